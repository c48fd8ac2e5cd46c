import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// CouchDB's database and document endpoints: success paths, and the errors CouchDB gives.
@Suite struct DocumentAPITests {
    @Test func serverEndpoints() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let welcome = try await c.send(.get, "/")
            #expect(welcome["couchdb"] == "Welcome")
            #expect(welcome["ADMIN"] == nil)
            #expect(try await c.send(.get, "/_up")["status"] == "ok")
            let uuids = try await c.send(.get, "/_uuids?count=3")["uuids"]?.arrayValue
            #expect(uuids?.count == 3 && Set(uuids ?? []).count == 3)
            #expect(try await c.send(.get, "/_uuids?count=5000").status == .badRequest)
            #expect(try await c.send(.get, "/_all_dbs").status == .forbidden)
            #expect(try await c.send(.delete, "/").status == .methodNotAllowed)
            let info = try await c.send(.get, "/db")
            #expect(info["db_name"] == "db" && info["update_seq"] == 0 && info["instance_start_time"] == "0")
            // CouchDB 3's members, for one node.
            #expect(info["cluster"] == ["q": 1, "n": 1, "w": 1, "r": 1] && info["props"] == .object([:]), "\(info.text)")
            #expect(try await c.send(.head, "/db").status == .ok)
            // On the public port a database that is not served is answered as one whose user the
            // caller is not, so that names are not learned by trying them.
            let missing = try await c.send(.get, "/nope")
            #expect(missing.status == .unauthorized && missing["error"] == "unauthorized")
            #expect(try await c.send(.get, "/Bad")["error"] == "illegal_database_name")
            // A replicator's create_target probe: 412 to a user of a database that exists, 403
            // otherwise.
            #expect(try await c.send(.put, "/db").status == .preconditionFailed)
            #expect(try await c.send(.put, "/other").status == .forbidden)
        }
        try await server.withClient(admin: true) { c async throws in
            #expect(try await c.send(.get, "/")["ADMIN"] == true)
            #expect(try await c.send(.get, "/_all_dbs").json == ["_replicator", "_users", "db"])
            #expect(try await c.send(.put, "/made").status == .created)
            #expect(try await c.send(.put, "/made").status == .preconditionFailed)
            #expect(try await c.send(.get, "/_all_dbs").json == ["_replicator", "_users", "db", "made"])
            #expect(try await c.send(.delete, "/made")["ok"] == true)
            #expect(try await c.send(.get, "/made").status == .notFound)
        }
    }

    @Test func createReadUpdateDelete() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let created = try await c.send(.put, "/db/doc1", json: #"{"title":"hello","n":1}"#)
            #expect(created.status == .created)
            let rev1 = try #require(created["rev"]?.stringValue)
            #expect(created.headers[.eTag] == "\"\(rev1)\"")
            #expect(created.headers[.location]?.hasSuffix("/db/doc1") == true && created.headers[.location]?.hasPrefix("http://") == true)
            let got = try await c.send(.get, "/db/doc1")
            #expect(try got.json == ["_id": "doc1", "_rev": .string(rev1), "title": "hello", "n": 1])
            // If-None-Match with the current ETag: 304.
            #expect(try await c.send(.get, "/db/doc1", headers: [.ifNoneMatch: "\"\(rev1)\""]).status == .notModified)
            // Update without or with a stale rev: 409.
            #expect(try await c.send(.put, "/db/doc1", json: #"{"title":"x"}"#).status == .conflict)
            let updated = try await c.send(.put, "/db/doc1", json: #"{"_rev":"\#(rev1)","title":"bye"}"#)
            let rev2 = try #require(updated["rev"]?.stringValue)
            #expect(rev2.hasPrefix("2-"))
            let stale = try await c.send(.put, "/db/doc1?rev=\(rev1)", json: #"{"title":"late"}"#)
            #expect(stale.status == .conflict && stale["error"] == "conflict")
            // Old revision by rev=, history by revs=true.
            #expect(try await c.send(.get, "/db/doc1?rev=\(rev1)")["title"] == "hello")
            let revs = try await c.send(.get, "/db/doc1?revs=true")["_revisions"]
            #expect(revs?.objectValue?["start"] == 2)
            #expect(revs?.objectValue?["ids"]?.arrayValue?.count == 2)
            let info = try await c.send(.get, "/db/doc1?revs_info=true")["_revs_info"]?.arrayValue
            #expect(info?.first?.objectValue?["status"] == "available")
            // POST makes an ID.
            let posted = try await c.send(.post, "/db", json: #"{"made":"by post"}"#)
            #expect(posted.status == .created && posted["id"]?.stringValue?.count == 32)
            // Delete needs the current rev.
            #expect(try await c.send(.delete, "/db/doc1").status == .conflict)
            let deleted = try await c.send(.delete, "/db/doc1?rev=\(rev2)")
            #expect(deleted["ok"] == true && deleted["rev"]?.stringValue?.hasPrefix("3-") == true)
            let gone = try await c.send(.get, "/db/doc1")
            #expect(gone.status == .notFound && gone["reason"] == "deleted")
            #expect(try await c.send(.get, "/db/never")["reason"] == "missing")
            // Recreated after deletion: a new revision on the tombstone's branch.
            let again = try await c.send(.put, "/db/doc1", json: #"{"title":"again"}"#)
            #expect(again["rev"]?.stringValue?.hasPrefix("4-") == true)
            // Design documents are written by admins only (the admin port), read by every user;
            // IDs are percent-decoded once.
            #expect(try await c.send(.put, "/db/_design/app", json: #"{"views":{}}"#).status == .forbidden)
            try await server.withClient(admin: true) { a async throws in
                #expect(try await a.send(.put, "/db/_design/app", json: #"{"views":{}}"#).status == .created)
            }
            #expect(try await c.send(.get, "/db/_design%2Fapp")["_id"] == "_design/app")
            #expect(try await c.send(.put, "/db/a%20b%2Fc", json: "{}").status == .created)
            #expect(try await c.send(.get, "/db/a%20b%2Fc")["_id"] == "a b/c")
        }
    }

    @Test func badInputGetsCouchDBsErrorsAndChangesNothing() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            func expectError(_ r: TestResponse, _ status: HTTPResponse.Status, _ error: String, sourceLocation: SourceLocation = #_sourceLocation) {
                #expect(r.status == status, "\(r.text)", sourceLocation: sourceLocation)
                #expect(r["error"]?.stringValue == error, "\(r.text)", sourceLocation: sourceLocation)
                #expect(r["reason"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
            }
            expectError(try await c.send(.put, "/db/x", json: #"{"a":"#), .badRequest, "bad_request")
            expectError(try await c.send(.put, "/db/x", json: #"[1,2]"#), .badRequest, "bad_request")
            expectError(try await c.send(.put, "/db/x", json: #"{"_foo":1}"#), .badRequest, "doc_validation")
            expectError(try await c.send(.post, "/db", json: #"{"a":1}"#, headers: [.contentType: "image/png"]), .unsupportedMediaType, "bad_content_type")
            expectError(try await c.send(.put, "/db/_bad", json: "{}"), .badRequest, "illegal_docid")
            expectError(try await c.send(.put, "/db/x?rev=banana", json: "{}"), .badRequest, "bad_request")
            expectError(try await c.send(.put, "/db/x?new_edits=false", json: #"{"_rev":"2-a","_revisions":{"start":3,"ids":["a","b"]}}"#), .badRequest, "bad_request")
            expectError(try await c.send(.get, "/db/x?revs=maybe"), .badRequest, "bad_request")
            expectError(try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"a"}],"new_edits":"false"}"#), .badRequest, "bad_request")
            expectError(try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"ok"},{"_id":"_bad"}]}"#), .badRequest, "illegal_docid")
            expectError(try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"ok2"},{"_id":"b","_x":1}]}"#), .badRequest, "doc_validation")
            expectError(try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"a","_rev":"1-x"}],"new_edits":false,"#), .badRequest, "bad_request")
            expectError(try await c.send(.get, "/db/_changes?feed=sideways"), .badRequest, "bad_request")
            expectError(try await c.send(.get, "/db/_changes?since=yesterday"), .badRequest, "bad_request")
            expectError(try await c.send(.get, "/db/_all_docs?limit=-1"), .badRequest, "query_parse_error")
            // CouchDB's `_all_docs` answers JSON it cannot read with `bad_request` (views: `query_parse_error`).
            expectError(try await c.send(.get, "/db/_all_docs?startkey=nope"), .badRequest, "bad_request")
            expectError(try await c.send(.post, "/db/_revs_diff", json: #"{"a":"1-x"}"#), .badRequest, "bad_request")
            expectError(try await c.send(.patch, "/db/x"), .methodNotAllowed, "method_not_allowed")
            // Invalid UTF-8 in the body.
            let invalid = try await c.execute(uri: "/db/x", method: .put, headers: [.contentType: "application/json"],
                                              body: ByteBuffer(bytes: [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D]))
            expectError(invalid, .badRequest, "bad_request")
            // Nothing from a rejected request was stored.
            #expect(try await c.send(.get, "/db")["doc_count"] == 0)
            #expect(try await c.send(.get, "/db/ok").status == .notFound)
        }
    }

    @Test func allDocsAndBulkDocs() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let bulk = try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"b","v":2},{"_id":"a","v":1},{"_id":"c","v":3},{"v":0}]}"#)
            #expect(bulk.status == .created)
            let results = try #require(try bulk.json.arrayValue)
            #expect(results.count == 4 && results.allSatisfy { $0.objectValue?["ok"] == true })
            // A conflict is a per-document error; the others are saved.
            let rev = try #require(results[0].objectValue?["rev"]?.stringValue)
            let mixed = try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"b","v":20},{"_id":"b2","v":4},{"_id":"b","_rev":"\#(rev)","v":22}]}"#)
            let mixedResults = try #require(try mixed.json.arrayValue)
            #expect(mixedResults[0].objectValue?["error"] == "conflict")
            #expect(mixedResults[1].objectValue?["ok"] == true && mixedResults[2].objectValue?["ok"] == true)
            let all = try await c.send(.get, "/db/_all_docs")
            #expect(all["total_rows"] == 5)
            let ids = try #require(all["rows"]?.arrayValue).compactMap { $0.objectValue?["id"]?.stringValue }
            #expect(ids.filter { $0.count <= 2 } == ["a", "b", "b2", "c"])   // and the generated ID
            let range = try await c.send(.get, #"/db/_all_docs?startkey="b"&endkey="c"&inclusive_end=false&include_docs=true"#)
            let rows = try #require(range["rows"]?.arrayValue)
            #expect(rows.compactMap { $0.objectValue?["id"]?.stringValue }.filter { $0.count <= 2 } == ["b", "b2"])
            #expect(rows.first { $0.objectValue?["id"] == "b" }?.objectValue?["doc"]?.objectValue?["v"] == 22)
            let page = try await c.send(.get, "/db/_all_docs?descending=true&limit=2&skip=1")
            #expect(page["rows"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue }.count == 2)
            let keys = try await c.send(.post, "/db/_all_docs", json: #"{"keys":["c","zz","a"]}"#)
            let keyRows = try #require(keys["rows"]?.arrayValue)
            #expect(keyRows.count == 3)
            #expect(keyRows[1].objectValue?["error"] == "not_found")
            #expect(keyRows[2].objectValue?["id"] == "a")
            #expect(try await c.send(.get, "/db/_all_docs?update_seq=true")["update_seq"] == 6)
        }
    }
}
