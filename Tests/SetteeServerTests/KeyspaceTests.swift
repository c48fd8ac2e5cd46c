import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Server) import Settee
@testable import SetteeServer

/// Sync Gateway 3's keyspace paths on live servers on loopback: `/db._default._default/…` and
/// `/db._default/…` are the database's own paths; a collection the database does not have is
/// 404 to its users and tells nothing to anyone else.
@Suite struct KeyspaceTests {
    @Test func theDefaultCollectionsKeyspacesAreTheDatabase() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { user, admin in
            let alice = basic("alice", "pw")
            let made = try await user.send(.put, "/db._default._default/k1", json: #"{"color": "red", "n": 1}"#, headers: alice)
            #expect(made.status == .created, "\(made.text)")
            let rev = try #require(made["rev"]?.stringValue)
            // The same document through each name of the collection.
            for path in ["/db/k1", "/db._default._default/k1", "/db._default/k1"] {
                let got = try await user.send(.get, path, headers: alice)
                #expect(got.status == .ok && got["_rev"]?.stringValue == rev, "\(path): \(got.text)")
            }
            let bulk = try await user.send(.post, "/db._default/_bulk_docs", json: #"{"docs": [{"_id": "k2", "color": "red"}, {"_id": "k3", "color": "blue"}]}"#, headers: alice)
            #expect(bulk.status == .created, "\(bulk.text)")
            let all = try await user.send(.get, "/db._default._default/_all_docs", headers: alice)
            #expect((all["rows"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue } == ["k1", "k2"], "\(all.text)")
            let changes = try await user.send(.get, "/db._default._default/_changes", headers: alice)
            #expect(Set((changes["results"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }) == ["k1", "k2"], "\(changes.text)")
            let diff = try await user.send(.post, "/db._default._default/_revs_diff", json: #"{"k1": ["\#(rev)", "9-x"]}"#, headers: alice)
            #expect(diff["k1"]?["missing"] == ["9-x"], "\(diff.text)")
            let local = try await user.send(.put, "/db._default._default/_local/cp", json: #"{"seq": 3}"#, headers: alice)
            #expect(local.status == .created, "\(local.text)")
            #expect(try await user.send(.get, "/db/_local/cp", headers: alice)["seq"] == 3)
            let find = try await user.send(.post, "/db._default._default/_find", json: #"{"selector": {"n": 1}}"#, headers: alice)
            #expect((find["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } == ["k1"], "\(find.text)")
            // The admin port too; the database root answers GET, but a keyspace neither creates
            // nor deletes a database.
            #expect(try await admin.send(.get, "/db._default._default/k3")["color"] == "blue")
            #expect(try await admin.send(.get, "/db._default._default")["db_name"] == "db")
            let delete = try await admin.send(.delete, "/db._default._default")
            #expect(delete.status == .methodNotAllowed, "\(delete.text)")
            #expect(try await admin.send(.put, "/other._default._default").status == .methodNotAllowed)
            #expect(try await admin.send(.get, "/db").status == .ok)
            #expect(try await admin.send(.get, "/other").status == .notFound)
        }
    }

    /// Sync Gateway 3's configuration of the default collection's sync function under `scopes`
    /// routes documents as the database's own `sync` does.
    @Test func theDefaultCollectionsSyncFunctionGivenUnderScopes() async throws {
        let server = try channelServer("""
            {"databases": {"db": {"server": "walrus:",
              "users": {"GUEST": {"disabled": true}, "alice": {"password": "pw", "admin_channels": ["red"]}},
              "scopes": {"_default": {"collections": {"_default": {"sync": `function(doc) { channel(doc.color); }`}}}}}}}
            """)
        defer { try? server.close() }
        try await withPorts(server) { user, admin in
            let bulk = try await admin.send(.post, "/db._default._default/_bulk_docs", json: #"{"docs": [{"_id": "r", "color": "red"}, {"_id": "b", "color": "blue"}]}"#)
            #expect(bulk.status == .created, "\(bulk.text)")
            let alice = basic("alice", "pw")
            #expect(try await user.send(.get, "/db._default._default/_all_docs", headers: alice).rowIDs == ["r"])
            #expect(try await user.send(.get, "/db/b", headers: alice).status == .notFound)   // as a document that is not there
        }
    }

    @Test func aCollectionTheDatabaseHasNotIsNotFoundToItsUsersOnly() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { user, admin in
            let alice = basic("alice", "pw")
            for path in ["/db.store.tasks/k1", "/db.tasks/_all_docs", "/db.store._default/_changes", "/db._default.tasks"] {
                let r = try await user.send(.get, path, headers: alice)
                #expect(r.status == .notFound && r["reason"]?.stringValue?.hasPrefix("keyspace db.") == true, "\(path): \(r.text)")
                let write = try await user.send(.put, path.hasSuffix("k1") ? path : path + "/x", json: "{}", headers: alice)
                #expect(write.status == .notFound, "\(path): \(write.text)")
                #expect(try await admin.send(.get, path).status == .notFound)
                // Anonymous (GUEST is disabled), a wrong password, or another database's name:
                // what any path of a database it may not read answers.
                let anonymous = try await user.send(.get, path)
                let stranger = try await user.send(.get, path, headers: basic("alice", "wrong"))
                let nowhere = try await user.send(.get, path.replacingOccurrences(of: "/db.", with: "/nodb."))
                let plain = try await user.send(.get, "/db/k1")
                #expect(anonymous.status == plain.status && stranger.status == .unauthorized && nowhere.status == plain.status,
                        "\(path): \(anonymous.status) \(stranger.status) \(nowhere.status) vs \(plain.status)")
            }
            // Nothing was written anywhere.
            #expect(try await admin.send(.get, "/db/x").status == .notFound)
            // Names Couchbase Lite refuses, and keyspaces of more than three parts.
            for bad in ["/db._store.tasks/k", "/db.store.%25tasks/k", "/db.a.b.c/k", "/db..tasks/k", "/db./k", "/Db.store.tasks/k",
                        "/db.store." + String(repeating: "t", count: 252) + "/k"] {
                let r = try await user.send(.get, bad, headers: alice)
                #expect(r.status == .badRequest, "\(bad.prefix(40)): \(r.text)")
            }
        }
    }
}

/// Named collections served as Sync Gateway 3 serves them: each with its own sync function,
/// documents, feeds and indexes, channels and grants of its own; users and security are the
/// database's.
@Suite struct NamedKeyspaceTests {
    static let config = """
        {"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true}, "alice": {"password": "pw", "admin_channels": ["red"]},
                    "bob": {"password": "pw"}},
          "scopes": {"store": {"collections": {
              "lists": {"sync": `function(doc) { channel("list-" + doc.owner); access(doc.owner, "list-" + doc.owner); }`},
              "tasks": {}}}}}}}
        """

    @Test func theConfigurationNamesEachCollectionsSyncFunction() throws {
        let config = try ServerConfiguration(json: Self.config)
        let db = try #require(config.databases["db"])
        #expect(db.collections.keys.sorted() == ["store.lists", "store.tasks"])
        #expect(db.collections["store.lists"]?.sync?.contains("access(doc.owner") == true)
        #expect(db.collections["store.tasks"]?.sync == nil)
        #expect(db.sync == nil)
        // A function that does not compile stops the start, naming where it is given.
        let broken = try ServerConfiguration(json: """
            {"databases": {"db": {"server": "walrus:", "scopes": {"store": {"collections": {"tasks": {"sync": "function(doc) {"}}}}}}}
            """)
        do {
            _ = try SetteeServer(configuration: broken)
            Issue.record("a sync function that does not compile was taken")
        } catch let e as ConfigurationError {
            #expect(e.path == "databases.db.scopes.store.collections.tasks.sync", "\(e)")
        }
    }

    @Test func namedCollectionsAreServedApart() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { user, admin in
            // The admin writes into each collection; the same ID is three documents.
            for path in ["/db/same", "/db.store.lists/same", "/db.store.tasks/same"] {
                let r = try await admin.send(.put, path, json: #"{"owner": "alice", "channels": ["red"], "at": "\#(path)"}"#)
                #expect(r.status == .created, "\(path): \(r.text)")
            }
            let bobs = try await admin.send(.put, "/db.store.lists/bobs", json: #"{"owner": "bob"}"#)
            #expect(bobs.status == .created, "\(bobs.text)")
            for path in ["/db/same", "/db.store.lists/same", "/db.store.tasks/same"] {
                #expect(try await admin.send(.get, path)["at"]?.stringValue == path)
            }
            #expect(try await admin.send(.get, "/db.store.lists")["doc_count"] == 2)
            #expect(try await admin.send(.get, "/db.store.tasks")["db_name"]?.stringValue == "db.store.tasks")
            #expect(try await admin.send(.get, "/db")["doc_count"] == 1)
            // A collection's path neither creates, deletes nor posts.
            #expect(try await admin.send(.delete, "/db.store.lists").status == .methodNotAllowed)
            #expect(try await admin.send(.post, "/db.store.lists", json: "{}").status == .methodNotAllowed)

            let alice = basic("alice", "pw")
            let bob = basic("bob", "pw")
            // lists: its sync function granted alice her lists and bob his; alice's admin
            // channel `red` is the default collection's only.
            #expect(try await user.send(.get, "/db.store.lists/_all_docs", headers: alice).rowIDs == ["same"])
            #expect(try await user.send(.get, "/db.store.lists/_all_docs", headers: bob).rowIDs == ["bobs"])
            #expect(try await user.send(.get, "/db.store.lists/bobs", headers: alice).status == .notFound)
            // tasks: the default sync function routes to `red`, which nobody was granted here.
            #expect(try await user.send(.get, "/db.store.tasks/_all_docs", headers: alice).rowIDs == [])
            #expect(try await user.send(.get, "/db.store.tasks/same", headers: alice).status == .notFound)
            #expect(try await user.send(.get, "/db/_all_docs", headers: alice).rowIDs == ["same"])
            // Changes feeds are the collection's own.
            let feed = try await user.send(.get, "/db.store.lists/_changes", headers: alice)
            #expect((feed["results"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue } == ["same"], "\(feed.text)")
            // A user's write goes through the collection's sync function.
            let write = try await user.send(.put, "/db.store.lists/alices2", json: #"{"owner": "alice"}"#, headers: alice)
            #expect(write.status == .created, "\(write.text)")
            #expect(try await user.send(.get, "/db.store.lists/_all_docs", headers: alice).rowIDs == ["alices2", "same"])
            #expect(try await admin.send(.get, "/db/alices2").status == .notFound)
            // Mango and its indexes are the collection's.
            let index = try await admin.send(.post, "/db.store.lists/_index", json: #"{"index": {"fields": ["owner"]}, "name": "by-owner"}"#)
            #expect(index.status == .ok, "\(index.text)")
            let found = try await user.send(.post, "/db.store.lists/_find", json: #"{"selector": {"owner": "alice"}}"#, headers: alice)
            #expect((found["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue }.sorted() == ["alices2", "same"], "\(found.text)")
            let hidden = try await user.send(.post, "/db.store.lists/_find", json: #"{"selector": {"owner": "bob"}}"#, headers: alice)
            #expect(hidden["docs"]?.arrayValue?.isEmpty == true, "\(hidden.text)")
            let defaults = try await admin.send(.post, "/db/_find", json: #"{"selector": {"owner": "alice"}}"#)
            #expect((defaults["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } == ["same"], "\(defaults.text)")
            // Wrong password, unknown user, a collection not served.
            #expect(try await user.send(.get, "/db.store.lists/_all_docs", headers: basic("alice", "no")).status == .unauthorized)
            #expect(try await user.send(.get, "/db.store.other/x", headers: alice).status == .notFound)
        }
    }

    /// The admin page lists each database's collections and browses one as a database.
    @Test func theAdminPageListsAndBrowsesCollections() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            #expect(try await admin.send(.put, "/db.store.tasks/task-1", json: #"{"title": "milk"}"#).status == .created)
            #expect(try await admin.send(.put, "/db/plain", json: "{}").status == .created)
            let index = try await admin.send(.get, "/_admin/")
            for name in ["db", "db.store.lists", "db.store.tasks"] {
                #expect(index.text.contains("data-db=\"\(name)\""), "\(name) not listed: \(index.text)")
            }
            let tasks = try await admin.send(.get, "/_admin/db/db.store.tasks")
            #expect(tasks.status == .ok && tasks.text.contains("task-1") && !tasks.text.contains(">plain<"), "\(tasks.text)")
            #expect(tasks.text.contains("id=\"collections\"") && tasks.text.contains("/_admin/db/db.store.lists"))
            #expect(tasks.text.contains("/db.store.tasks/_changes"))
            let doc = try await admin.send(.get, "/_admin/db/db.store.tasks/doc/task-1")
            #expect(doc.status == .ok && doc.text.contains("milk"), "\(doc.text)")
            #expect(try await admin.send(.get, "/_admin/db/db.store.other").text.contains("No database"))
        }
    }
}
