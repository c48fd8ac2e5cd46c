import Foundation
import HTTPTypes
@testable import HummingbirdTesting
import NIOCore
import Synchronization
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// CouchDB's server databases over Settee's own model: `/_users` (the served databases' users),
/// `/_replicator` (replications as documents) and `/_db_updates`, each on a running server on
/// loopback, as CouchDB's clients and PouchDB reach them.
@Suite struct ServerDatabasesTests {
    static func config(signUp: Bool = true, replicator: String = "walrus:", databases: String = "") -> String {
        """
        {"interface": "127.0.0.1:0", "adminInterface": "127.0.0.1:0", "log": [], "allowSignUp": \(signUp),
         "replicator": "\(replicator)",
         "databases": {
           "db": {"server": "walrus:", "allowSignUp": true, "users": {"alice": {"password": "pw", "admin_channels": ["*"]},
                                                 "GUEST": {"disabled": false, "admin_channels": ["*"]}}},
           "other": {"server": "walrus:", "allowSignUp": true},
           "closed": {"server": "walrus:"}\(databases)}}
        """
    }

    // MARK: - _users

    /// A PouchDB sign-up on the public port makes a user of every database that takes
    /// sign-ups (and of no other), who then logs in; what a user may read and change of
    /// `_users` is CouchDB's rule.
    @Test func signUpMakesAUserOfTheDatabasesThatTakeSignUps() async throws {
        let server = try SetteeServer(configuration: ServerConfiguration(json: Self.config()))
        try await running(server) { pub, admin in
            let bob = #"{"_id": "org.couchdb.user:bob", "name": "bob", "password": "pw", "roles": [], "type": "user"}"#
            let made = try await pub.send(.put, "/_users/org.couchdb.user:bob", json: bob)
            #expect(made.status == .created && made["id"] == "org.couchdb.user:bob", "\(made.text)")
            for db in ["db", "other"] {
                #expect(try await admin.send(.get, "/\(db)/_user/bob").status == .ok, "\(db)")
                #expect(try await pub.send(.get, "/\(db)", headers: basic("bob", "pw")).status == .ok, "\(db)")
            }
            #expect(try await admin.send(.get, "/closed/_user/bob").status == .notFound)
            #expect(try await pub.send(.get, "/closed", headers: basic("bob", "pw")).status == .unauthorized)
            let login = try await pub.send(.post, "/_session", json: #"{"name": "bob", "password": "pw"}"#)
            #expect(login.status == .ok && login["name"] == "bob" && login.headers[.setCookie]?.contains("AuthSession=") == true)

            // Taken names, roles, malformed documents: CouchDB's answers.
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:bob", json: bob).status == .conflict)
            let eve = #"{"name": "eve", "password": "pw", "roles": ["boss"], "type": "user"}"#
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:eve", json: eve).status == .forbidden)
            for (id, body) in [("org.couchdb.user:eve", #"{"name": "mallory", "password": "pw", "type": "user"}"#),
                               ("org.couchdb.user:eve", #"{"name": "eve", "password": "pw", "type": "admin"}"#),
                               ("org.couchdb.user:eve", #"{"name": "eve", "password": "pw", "roles": "x", "type": "user"}"#),
                               ("org.couchdb.user:eve", #"{"name": "eve", "type": "user"}"#),
                               ("org.couchdb.user:GUEST", #"{"name": "GUEST", "password": "pw", "type": "user"}"#),
                               ("eve", #"{"name": "eve", "password": "pw", "type": "user"}"#)] {
                let r = try await pub.send(.put, "/_users/\(id)", json: body)
                #expect(r.status == .forbidden, "\(id) \(body): \(r.status) \(r.text)")
            }
            #expect(try await admin.send(.get, "/db/_user/eve").status == .notFound)

            // Bob reads his own document (a hash, never the password); nobody else does.
            let own = try await pub.send(.get, "/_users/org.couchdb.user:bob", headers: basic("bob", "pw"))
            #expect(own.status == .ok && own["type"] == "user" && own["roles"] == [] && own["password"] == nil, "\(own.text)")
            #expect(own["derived_key"]?.stringValue?.count == 64 && own["password_scheme"] == "pbkdf2")
            #expect(try await pub.send(.get, "/_users/org.couchdb.user:bob").status == .notFound)
            #expect(try await pub.send(.get, "/_users/org.couchdb.user:bob", headers: basic("alice", "pw")).status == .notFound)
            #expect(try await pub.send(.get, "/_users/org.couchdb.user:alice", headers: basic("bob", "pw")).status == .notFound)
            #expect(try await pub.send(.get, "/_users/_all_docs", headers: basic("bob", "pw")).status == .forbidden)
            #expect(try await pub.send(.get, "/_users").status == .forbidden)

            // He changes his password (with the revision), not his roles, not Alice's document.
            let rev = try #require(own["_rev"]?.stringValue)
            let promote = #"{"_rev": "\#(rev)", "name": "bob", "password": "pw", "roles": ["boss"], "type": "user"}"#
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:bob", json: promote, headers: basic("bob", "pw")).status == .forbidden)
            let alice = #"{"name": "alice", "password": "mine", "roles": [], "type": "user"}"#
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:alice", json: alice, headers: basic("bob", "pw")).status == .conflict)
            #expect(try await pub.send(.get, "/db", headers: basic("alice", "pw")).status == .ok)
            let stale = #"{"_rev": "1-00000000000000000000000000000000", "name": "bob", "password": "pw2", "roles": [], "type": "user"}"#
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:bob", json: stale, headers: basic("bob", "pw")).status == .conflict)
            let change = #"{"_rev": "\#(rev)", "name": "bob", "password": "pw2", "roles": [], "type": "user"}"#
            let changed = try await pub.send(.put, "/_users/org.couchdb.user:bob", json: change, headers: basic("bob", "pw"))
            #expect(changed.status == .created && changed["rev"] != .string(rev), "\(changed.text)")
            #expect(try await pub.send(.get, "/other", headers: basic("bob", "pw")).status == .unauthorized)
            #expect(try await pub.send(.get, "/other", headers: basic("bob", "pw2")).status == .ok)

            // The admin port: every user, roles as Settee's admin_roles, the same users as `_user`'s.
            let all = try await admin.send(.get, "/_users/_all_docs")
            #expect(all.rowIDs == ["org.couchdb.user:alice", "org.couchdb.user:bob"], "\(all.text)")
            #expect(try await admin.send(.get, "/_users")["doc_count"] == 2)
            try await admin.send(.put, "/other/_user/carol", json: #"{"password": "pw", "admin_roles": ["ops"]}"#)
            let carol = try await admin.send(.get, "/_users/org.couchdb.user:carol")
            #expect(carol.status == .ok && carol["roles"] == ["ops"], "\(carol.text)")
            let bobNow = try await admin.send(.get, "/_users/org.couchdb.user:bob")
            let roles = #"{"_rev": "\#(bobNow["_rev"]?.stringValue ?? "")", "name": "bob", "roles": ["ops"], "type": "user"}"#
            #expect(try await admin.send(.put, "/_users/org.couchdb.user:bob", json: roles).status == .created)
            #expect(try await admin.send(.get, "/db/_user/bob")["admin_roles"] == ["ops"])
            #expect(try await pub.send(.get, "/db", headers: basic("bob", "pw2")).status == .ok)

            // Deleted with its revision: gone from every database, and logged out.
            let current = try #require(try await admin.send(.get, "/_users/org.couchdb.user:bob")["_rev"]?.stringValue)
            #expect(try await admin.send(.delete, "/_users/org.couchdb.user:bob?rev=x").status == .badRequest)
            #expect(try await admin.send(.delete, "/_users/org.couchdb.user:bob?rev=\(rev)").status == .conflict)
            #expect(try await admin.send(.delete, "/_users/org.couchdb.user:bob?rev=\(current)").status == .ok)
            for db in ["db", "other", "closed"] { #expect(try await admin.send(.get, "/\(db)/_user/bob").status == .notFound) }
            #expect(try await pub.send(.post, "/_session", json: #"{"name": "bob", "password": "pw2"}"#).status == .unauthorized)
        }
    }

    /// Without `allowSignUp` nobody makes users on the public port: not anonymously, not a
    /// logged-in user for someone else.
    @Test func signUpIsOffUnlessConfigured() async throws {
        let server = try SetteeServer(configuration: ServerConfiguration(json: Self.config(signUp: false)))
        try await running(server) { pub, admin in
            let bob = #"{"name": "bob", "password": "pw", "roles": [], "type": "user"}"#
            let r = try await pub.send(.put, "/_users/org.couchdb.user:bob", json: bob)
            #expect(r.status == .forbidden && r.text.contains("allowSignUp"), "\(r.text)")
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:bob", json: bob, headers: basic("alice", "pw")).status == .forbidden)
            #expect(try await admin.send(.get, "/db/_user/bob").status == .notFound)
            // The admin port makes users either way.
            #expect(try await admin.send(.put, "/_users/org.couchdb.user:bob", json: bob).status == .created)
            #expect(try await pub.send(.get, "/db", headers: basic("bob", "pw")).status == .ok)
            #expect(try await admin.send(.head, "/_users").status == .ok)
            #expect(try await admin.send(.get, "/_all_dbs").json == ["_replicator", "_users", "closed", "db", "other"])
        }
    }

    /// A user changing its own document (as a user may) changes its password where it is a
    /// user, nothing more: it joins no other database and takes no other database's roles.
    @Test func aUserChangingItsOwnDocumentGainsNothing() async throws {
        let server = try SetteeServer(configuration: ServerConfiguration(json: """
            {"interface": "127.0.0.1:0", "adminInterface": "127.0.0.1:0", "log": [], "allowSignUp": true,
             "databases": {
               "a": {"server": "walrus:", "users": {"dana": {"password": "pw", "admin_roles": ["boss"]}, "erin": {"password": "pw"}}},
               "b": {"server": "walrus:", "users": {"dana": {"password": "pw"}}}}}
            """))
        try await running(server) { pub, admin in
            for name in ["dana", "erin"] {
                let doc = try await pub.send(.get, "/_users/org.couchdb.user:\(name)", headers: basic(name, "pw"))
                let roles = name == "dana" ? #"["boss"]"# : "[]"
                let body = #"{"_rev": "\#(doc["_rev"]?.stringValue ?? "")", "name": "\#(name)", "type": "user", "roles": \#(roles), "password": "new"}"#
                let r = try await pub.send(.put, "/_users/org.couchdb.user:\(name)", json: body, headers: basic(name, "pw"))
                #expect(r.status == .created, "\(name): \(r.text)")
            }
            #expect(try await admin.send(.get, "/b/_user/dana")["admin_roles"] == [])
            #expect(try await admin.send(.get, "/a/_user/dana")["admin_roles"] == ["boss"])
            #expect(try await admin.send(.get, "/b/_user/erin").status == .notFound)
            #expect(try await pub.send(.get, "/b", headers: basic("erin", "new")).status == .unauthorized)
            #expect(try await pub.send(.get, "/a", headers: basic("erin", "new")).status == .ok)
            #expect(try await pub.send(.get, "/b", headers: basic("dana", "new")).status == .ok)
        }
    }

    // MARK: - _replicator

    /// A replication document runs its replication: a one-shot one to its end, a continuous one
    /// until the document is deleted; its state is in the document.
    @Test func replicationDocumentsRunAndReportTheirState() async throws {
        let server = try SetteeServer(configuration: ServerConfiguration(json: Self.config()))
        try await running(server) { pub, admin in
            for i in 0 ..< 5 { try await admin.send(.put, "/db/d\(i)", json: #"{"n": \#(i)}"#) }
            #expect(try await pub.send(.get, "/_replicator").status == .forbidden)
            #expect(try await pub.send(.put, "/_replicator/x", json: #"{"source": "db", "target": "other"}"#).status == .forbidden)

            try await admin.send(.put, "/_replicator/once", json: #"{"source": "db", "target": "copy", "create_target": true}"#)
            let once = try await replicationState(admin, "once", until: "completed")
            #expect(once["_replication_stats"]?["docs_written"] == 5 && once["_replication_id"] != nil, "\(once)")
            #expect(try await admin.send(.get, "/copy")["doc_count"] == 5)

            try await admin.send(.put, "/_replicator/live",
                                 json: #"{"source": "db", "target": "feed", "continuous": true, "create_target": true}"#)
            _ = try await replicationState(admin, "live", until: "triggered")
            #expect(server.replications.isRunning(ReplicatorDocuments.jobKey("live")))
            try await admin.send(.put, "/db/later", json: #"{"late": true}"#)
            try await eventually { try await admin.send(.get, "/feed/later").status == .ok }
            // The server's state members cannot be written by a client (dropped from its writes).
            let doc = try await admin.send(.get, "/_replicator/live")
            var edited = try #require(doc.json.objectValue)
            edited["_replication_state"] = "completed"
            let put = try await admin.send(.put, "/_replicator/live", json: String(decoding: try JSONValue.object(edited).jsonBytes(), as: UTF8.self))
            #expect(put.status == .created, "\(put.text)")
            // Deleted: the replication stops.
            let rev = try #require(try await admin.send(.get, "/_replicator/live")["_rev"]?.stringValue)
            #expect(try await admin.send(.delete, "/_replicator/live?rev=\(rev)").status == .ok)
            try await eventually { !server.replications.isRunning(ReplicatorDocuments.jobKey("live")) }

            // A replication that cannot run fails, with its reason.
            try await admin.send(.put, "/_replicator/broken", json: #"{"source": "missing", "target": "db"}"#)
            let broken = try await replicationState(admin, "broken", until: "failed")
            #expect(broken["_replication_state_reason"]?.stringValue?.contains("missing") == true, "\(broken)")
            #expect(try await admin.send(.delete, "/_replicator").status == .forbidden)
        }
    }

    /// Kept on disk, replication documents outlive the server: a finished one stays finished, a
    /// continuous one starts again.
    @Test func replicationDocumentsAreStartedAgainAtStart() async throws {
        let directory = NSTemporaryDirectory() + "settee-replicator-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = Self.config(replicator: directory)
        let finishedAt = Mutex<JSONValue?>(nil)
        do {
            let server = try SetteeServer(configuration: ServerConfiguration(json: config))
            try await running(server) { _, admin in
                try await admin.send(.put, "/db/a", json: "{}")
                try await admin.send(.put, "/_replicator/once", json: #"{"source": "db", "target": "other"}"#)
                let time = try await replicationState(admin, "once", until: "completed")["_replication_state_time"]
                finishedAt.withLock { $0 = time }
                try await admin.send(.put, "/_replicator/live", json: #"{"source": "db", "target": "other", "continuous": true}"#)
                _ = try await replicationState(admin, "live", until: "triggered")
            }
        }
        let server = try SetteeServer(configuration: ServerConfiguration(json: config))
        try await running(server) { _, admin in
            try await eventually { server.replications.isRunning(ReplicatorDocuments.jobKey("live")) }
            #expect(!server.replications.isRunning(ReplicatorDocuments.jobKey("once")))
            let once = try await admin.send(.get, "/_replicator/once")
            #expect(once["_replication_state"] == "completed" && once["_replication_state_time"] == finishedAt.withLock({ $0 }), "\(once.text)")
            try await admin.send(.put, "/db/b", json: "{}")
            try await eventually { try await admin.send(.get, "/other/b").status == .ok }
        }
    }

    // MARK: - _db_updates

    /// Databases created, updated and deleted, in every feed type, from a sequence on.
    @Test func databaseUpdatesInEveryFeedType() async throws {
        let server = try SetteeServer(configuration: ServerConfiguration(json: Self.config()))
        try await running(server) { pub, admin in
            #expect(try await pub.send(.get, "/_db_updates").status == .forbidden)
            #expect(try await admin.send(.get, "/_db_updates?feed=sideways").status == .badRequest)
            #expect(try await admin.send(.get, "/_db_updates?limit=-1").status == .badRequest)
            let start = try #require(try await admin.send(.get, "/_db_updates")["last_seq"])
            try await admin.send(.put, "/made")
            try await admin.send(.put, "/db/x", json: "{}")
            try await admin.send(.delete, "/made")
            let since = try #require(start.stringValue)
            let normal = try await admin.send(.get, "/_db_updates?since=\(since)")
            let events = normal.rows.map { "\($0["type"]?.stringValue ?? "")/\($0["db_name"]?.stringValue ?? "")" }
            #expect(events == ["created/made", "updated/db", "deleted/made"], "\(normal.text)")
            // One result per line, as CouchDB writes it; each `seq` is a `since`.
            #expect(normal.text.hasPrefix("{\"results\":[\n") && normal.text.contains("\n],\n\"last_seq\":"), "\(normal.text)")
            let second = try #require(normal.rows[1]["seq"]?.stringValue)
            #expect(try await admin.send(.get, "/_db_updates?since=\(second)").rows.count == 1)
            #expect(try await admin.send(.get, "/_db_updates?since=\(since)&limit=1").rows.count == 1)
            // A sequence of another run (or none this server knows) starts from the beginning.
            #expect(try await admin.send(.get, "/_db_updates?since=3-elsewhere").rows.count == 3)

            // Longpoll waits for the next event; continuous and eventsource write each as it comes.
            async let waiting = admin.send(.get, "/_db_updates?feed=longpoll&since=now&timeout=60000")
            try await Task.sleep(for: .milliseconds(200))
            try await pub.send(.put, "/db/y", json: "{}", headers: basic("alice", "pw"))
            let woken = try await waiting
            #expect(woken.rows.count == 1 && woken.rows.first?["db_name"] == "db", "\(woken.text)")
            let continuous = try await admin.send(.get, "/_db_updates?feed=continuous&since=\(since)&limit=2")
            let lines = continuous.text.split(separator: "\n")
            #expect(lines.count == 3 && lines[0].contains("\"created\"") && lines[2].hasPrefix("{\"last_seq\":"), "\(continuous.text)")
            let stream = try await admin.send(.get, "/_db_updates?feed=eventsource&since=\(since)&limit=1")
            #expect(stream.headers[.contentType] == "text/event-stream" && stream.text.hasPrefix("data: {") && stream.text.contains("\nid: \""),
                    "\(stream.text)")
            let quiet = try await admin.send(.get, "/_db_updates?feed=continuous&since=now&timeout=100")
            #expect(quiet.text.hasPrefix("{\"last_seq\":"), "\(quiet.text)")
        }
    }
}
