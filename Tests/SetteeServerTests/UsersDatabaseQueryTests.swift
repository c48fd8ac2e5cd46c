import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// `/_users` as a database on the admin port, as CouchDB's clients use it: `_all_docs`,
/// `_find`, `_explain`, `_index` and `_bulk_docs` over the served databases' user records.
@Suite struct UsersDatabaseQueryTests {
    static func config(_ directory: String) -> String {
        """
        {"replicator": "\(directory)",
         "databases": {"db": {"server": "walrus:", "users": {"alice": {"password": "pw", "admin_roles": ["staff"]},
                                                            "bob": {"password": "pw"}}},
                       "other": {"server": "walrus:", "users": {"carol": {"password": "pw", "admin_roles": ["staff"]}}}}}
        """
    }

    func ids(_ r: TestResponse) -> [String] { (r["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } }

    @Test func usersAreQueriedAsADatabase() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("users-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try channelServer(Self.config(directory))
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            // _all_docs with keys, ranges and paging.
            let keyed = try await admin.send(.post, "/_users/_all_docs", json: #"{"keys": ["org.couchdb.user:bob", "nope"], "include_docs": true}"#)
            #expect(keyed.rows.first?["id"] == "org.couchdb.user:bob" && keyed.rows.first?["doc"]?["name"] == "bob", "\(keyed.text)")
            #expect(keyed.rows.last?["error"] == "not_found" && keyed["total_rows"] == 3)
            let ranged = try await admin.send(.get, "/_users/_all_docs?startkey=%22org.couchdb.user:b%22&limit=1")
            #expect(ranged.rowIDs == ["org.couchdb.user:bob"], "\(ranged.text)")
            #expect(try await admin.send(.get, "/_users/_all_docs?descending=true&skip=1").rowIDs == ["org.couchdb.user:bob", "org.couchdb.user:alice"])
            // _find over the user documents; a sort needs an index, as in CouchDB.
            let staff = try await admin.send(.post, "/_users/_find", json: #"{"selector": {"roles": {"$all": ["staff"]}}, "fields": ["name"], "execution_stats": true}"#)
            #expect(staff.status == .ok && ids(staff).isEmpty && staff["docs"] == [["name": "alice"], ["name": "carol"]], "\(staff.text)")
            #expect(staff["execution_stats"]?["total_docs_examined"] == 3 && staff["execution_stats"]?["results_returned"] == 2)
            let unsorted = try await admin.send(.post, "/_users/_find", json: #"{"selector": {"name": {"$gt": "a"}}, "sort": [{"name": "desc"}]}"#)
            #expect(unsorted.status == .badRequest && unsorted["error"] == "no_usable_index", "\(unsorted.text)")
            let made = try await admin.send(.post, "/_users/_index", json: #"{"index": {"fields": ["name"]}, "ddoc": "people", "name": "by-name", "w": 3}"#)
            #expect(made["result"] == "created" && made["id"] == "_design/people", "\(made.text)")
            let sorted = try await admin.send(.post, "/_users/_find", json: #"{"selector": {"name": {"$gt": "a"}}, "sort": [{"name": "desc"}], "limit": 2}"#)
            #expect(ids(sorted) == ["org.couchdb.user:carol", "org.couchdb.user:bob"] && sorted["warning"] == nil, "\(sorted.text)")
            let next = try await admin.send(.post, "/_users/_find", json: #"{"selector": {"name": {"$gt": "a"}}, "sort": [{"name": "desc"}], "bookmark": "\#(sorted["bookmark"]?.stringValue ?? "")"}"#)
            #expect(ids(next) == ["org.couchdb.user:alice"], "\(next.text)")
            let explained = try await admin.send(.post, "/_users/_explain", json: #"{"selector": {"name": "bob"}}"#)
            #expect(explained["dbname"] == "_users" && explained["index"]?["name"] == "by-name", "\(explained.text)")
            #expect(try await admin.send(.get, "/_users/_index")["indexes"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["_all_docs", "by-name"])
            // _bulk_docs: each document as its own PUT, with its own answer.
            let bulk = try await admin.send(.post, "/_users/_bulk_docs", json: #"""
                {"docs": [{"_id": "org.couchdb.user:dave", "name": "dave", "type": "user", "roles": [], "password": "secret"},
                          {"_id": "org.couchdb.user:erin", "name": "erin", "type": "person", "password": "secret"},
                          {"_id": "nobody"}]}
                """#)
            #expect(bulk.status == .created, "\(bulk.text)")
            let results = try bulk.json.arrayValue ?? []
            #expect(results.count == 3 && results[0]["ok"] == true && results[1]["error"] == "forbidden" && results[2]["error"] == "forbidden", "\(bulk.text)")
            let login = try await pub.send(.post, "/db/_session", json: #"{"name": "dave", "password": "secret"}"#)
            #expect(login.status == .ok, "\(login.text)")
            // Only the admin port queries them.
            #expect(try await pub.send(.post, "/_users/_find", json: #"{"selector": {}}"#, headers: basic("alice", "pw")).status == .forbidden)
            #expect(try await pub.send(.post, "/_users/_bulk_docs", json: #"{"docs": []}"#, headers: basic("alice", "pw")).status == .forbidden)
            #expect(try await admin.send(.delete, "/_users/_index/people/json/by-name")["ok"] == true)
            #expect(try await admin.send(.get, "/_users/_index")["total_rows"] == 1)
            #expect(try await admin.send(.post, "/_users/_index", json: #"{"index": {"fields": ["name"]}, "ddoc": "people", "name": "by-name"}"#)["result"] == "created")
        }
        try server.close()
        // The index definitions last with the server's own database.
        let again = try channelServer(Self.config(directory))
        defer { try? again.close() }
        try await withPorts(again) { _, admin in
            let list = try await admin.send(.get, "/_users/_index")
            #expect(list["indexes"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["_all_docs", "by-name"], "\(list.text)")
        }
    }
}
