import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// Answers whose error names and words CouchDB's clients match, as CouchDB 3.4 gives them
/// (checked against CouchDB 3.4.3), on live servers on loopback; and that a user learns no more
/// from them than CouchDB's rules allow.
@Suite struct CouchDBAnswerTests {
    static let config = redChannelConfig
    static let alice = basic("alice", "pw")

    func expectError(_ r: TestResponse, _ status: HTTPResponse.Status, _ error: String, _ reason: String,
                     sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == status && r["error"]?.stringValue == error && r["reason"]?.stringValue == reason,
                "\(r.status) \(r.text)", sourceLocation: sourceLocation)
    }

    /// `_local` where a document ID is expected: no ID is `Invalid _local document id.`, more
    /// after it `_local documents do not accept attachments.`; `_local%2Fx` is `_local/x`.
    @Test func localPathsAnswerAsCouchDB() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            for method in [HTTPRequest.Method.get, .put, .delete] {
                for path in ["/db/_local", "/db/_local/", "/db/_local%2F"] {
                    expectError(try await admin.send(method, path, json: method == .put ? "{}" : nil), .badRequest, "bad_request", "Invalid _local document id.")
                }
                expectError(try await admin.send(method, "/db/_local/a/b", json: method == .put ? "{}" : nil), .badRequest, "bad_request",
                            "_local documents do not accept attachments.")
            }
            let made = try await admin.send(.put, "/db/_local%2Fcheckpoint", json: #"{"seq": 4}"#)
            #expect(made.status == .created && made["id"] == "_local/checkpoint", "\(made.text)")
            #expect(try await admin.send(.get, "/db/_local/checkpoint")["seq"] == 4)
            #expect(try await admin.send(.get, "/db/_local%2Fcheckpoint")["seq"] == 4)
        }
    }

    /// An attachment's `rev`: malformed is 400 "Invalid rev format"; one the document lacks is
    /// 404 "missing" on a read and 409 `not_found` "missing_rev" on a write (CouchDB's); a
    /// revision a user may not read answers exactly as one that does not exist.
    @Test func attachmentRevisionsAnswerAsCouchDB() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            let first = try await put(admin, "d", #"{"color": "red"}"#)
            let att = try await admin.send(.put, "/db/d/a.txt?rev=\(first)", headers: [.contentType: "text/plain"])
            #expect(att.status == .created, "\(att.text)")
            let second = try #require(att["rev"]?.stringValue)
            // A branch the user may not read: a blue revision in conflict.
            let blue = try await admin.send(.put, "/db/d?new_edits=false", json: #"{"_rev": "2-b1ue", "color": "blue", "_revisions": {"start": 2, "ids": ["b1ue", "\#(first.dropFirst(2))"]}}"#)
            #expect(blue.status == .created, "\(blue.text)")
            for (c, h) in [(admin, HTTPFields()), (pub, Self.alice)] {
                expectError(try await c.send(.get, "/db/d/a.txt?rev=bogus", headers: h), .badRequest, "bad_request", "Invalid rev format")
                expectError(try await c.send(.get, "/db/d/a.txt?rev=1-abc", headers: h), .notFound, "not_found", "missing")
                expectError(try await c.send(.get, "/db/d/nothing.txt?rev=\(second)", headers: h), .notFound, "not_found", "Document is missing attachment")
                #expect(try await c.send(.get, "/db/d/a.txt?rev=\(second)", headers: h).status == .ok)
                let write = adding(h, .contentType, "text/plain")
                expectError(try await c.send(.put, "/db/d/b.txt?rev=1-abc", headers: write), .conflict, "not_found", "missing_rev")
                expectError(try await c.send(.put, "/db/nodoc/b.txt?rev=1-abc", headers: write), .conflict, "not_found", "missing_rev")
                expectError(try await c.send(.delete, "/db/d/a.txt?rev=1-abc", headers: h), .conflict, "not_found", "missing_rev")
                // A revision that is there but is not a leaf: a conflict.
                expectError(try await c.send(.put, "/db/d/b.txt?rev=\(first)", headers: write), .conflict, "conflict", "Document update conflict.")
            }
            // The blue branch exists; to alice, who reads red only, it is as missing as 1-abc.
            expectError(try await pub.send(.get, "/db/d/a.txt?rev=2-b1ue", headers: Self.alice), .notFound, "not_found", "missing")
            expectError(try await pub.send(.put, "/db/d/b.txt?rev=2-b1ue", headers: adding(Self.alice, .contentType, "text/plain")),
                        .conflict, "not_found", "missing_rev")
            let name = try await admin.send(.put, "/db/d/_x?rev=\(second)", headers: [.contentType: "text/plain"])
            expectError(name, .badRequest, "bad_request", "Attachment name '_x' starts with prohibited character '_'")
            let inline = try await admin.send(.put, "/db/e", json: #"{"_attachments": {"_x": {"data": "aGk=", "content_type": "text/plain"}}}"#)
            expectError(inline, .badRequest, "bad_request", "Attachment name '_x' starts with prohibited character '_'")
        }
    }

    /// The words of CouchDB's 400s for bodies and parameters of the wrong kind.
    @Test func badBodiesAndParametersAreCouchDBsWords() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            for body in ["[]", #""x""#, "3"] {
                expectError(try await admin.send(.put, "/db/d", json: body), .badRequest, "bad_request", "Document must be a JSON object")
                expectError(try await admin.send(.post, "/db", json: body), .badRequest, "bad_request", "Document must be a JSON object")
            }
            expectError(try await admin.send(.post, "/db/_bulk_docs", json: #"{"docs": {}}"#), .badRequest, "bad_request", "`docs` parameter must be an array.")
            expectError(try await admin.send(.post, "/db/_bulk_docs", json: #"{}"#), .badRequest, "bad_request", "POST body must include `docs` parameter.")
            expectError(try await admin.send(.post, "/db/_all_docs", json: #"{"keys": "x"}"#), .badRequest, "bad_request", "`keys` body member must be an array.")
            expectError(try await admin.send(.get, "/db/_all_docs?keys=%22x%22"), .badRequest, "bad_request", "`keys` parameter must be an array.")
            expectError(try await admin.send(.get, "/db/_all_docs?key=x"), .badRequest, "bad_request", "invalid UTF-8 JSON")
            expectError(try await admin.send(.delete, "/db?rev=1-x"), .badRequest, "bad_request",
                        "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
            #expect(try await admin.send(.get, "/db").status == .ok)
        }
    }

    /// Multipart answers follow `Accept` as CouchDB's (mochiweb's) reading of it: a range
    /// naming the type, its `main/*` or `*/*` takes it, `q=0` refuses it, no `Accept` is JSON.
    /// A multipart document gives its attachments' parts in the order its JSON part lists them.
    @Test func multipartAnswersFollowAcceptAsCouchDBs() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            let doc = #"{"z": 1, "_attachments": {"b.txt": {"content_type": "text/plain", "data": "YmJi"}, "a.txt": {"content_type": "text/plain", "data": "YWFh"}}}"#
            #expect(try await admin.send(.put, "/db/m", json: doc).status == .created)
            func type(_ path: String, _ accept: String?) async throws -> String {
                let r = try await admin.send(.get, path, headers: accept.map { [.accept: $0] } ?? [:])
                #expect(r.status == .ok, "\(path): \(r.text)")
                return r.headers[.contentType]?.split(separator: ";").first.map(String.init) ?? ""
            }
            for (accept, expected) in [("multipart/related,*/*", "multipart/related"), ("*/*", "multipart/related"), ("multipart/*", "multipart/related"),
                                       ("multipart/related;q=0, application/json", "application/json"), ("application/json", "application/json")] {
                #expect(try await type("/db/m?attachments=true", accept) == expected, "attachments=true, Accept \(accept)")
            }
            #expect(try await type("/db/m?attachments=true", nil) == "application/json")
            for (accept, expected) in [("multipart/related,*/*", "multipart/mixed"), ("*/*", "multipart/mixed"), ("multipart/mixed", "multipart/mixed"),
                                       ("multipart/related", "application/json"), ("application/json", "application/json")] {
                #expect(try await type("/db/m?open_revs=all", accept) == expected, "open_revs, Accept \(accept)")
            }
            #expect(try await type("/db/m?open_revs=all", nil) == "application/json")
            // `_bulk_get` is multipart only for a client that does not take JSON (CouchDB's rule).
            for (accept, expected) in [("*/*", "application/json"), ("multipart/mixed", "multipart/mixed"),
                                       ("application/json, multipart/mixed", "application/json"), ("multipart/related", "application/json")] {
                let r = try await admin.send(.post, "/db/_bulk_get", json: #"{"docs": [{"id": "m"}]}"#, headers: [.accept: accept])
                let got = r.headers[.contentType]?.split(separator: ";").first.map(String.init) ?? ""
                #expect(r.status == .ok && got == expected, "_bulk_get, Accept \(accept): \(got)")
            }
            // The parts come in the order of the JSON part's stubs.
            let r = try await admin.send(.get, "/db/m?attachments=true", headers: [.accept: "multipart/related"])
            let text = String(buffer: r.body)
            let json = try #require(text.range(of: #"{"_attachments""#))
            let stubs = ["a.txt", "b.txt"].sorted { text.range(of: "\"\($0)\"", range: json.lowerBound ..< text.endIndex)!.lowerBound
                < text.range(of: "\"\($1)\"", range: json.lowerBound ..< text.endIndex)!.lowerBound }
            let parts = ["a.txt", "b.txt"].sorted { text.range(of: "filename=\"\($0)\"")!.lowerBound < text.range(of: "filename=\"\($1)\"")!.lowerBound }
            #expect(stubs == parts, "\(text)")
        }
    }

    /// What python-couchdb's suite met, answered as CouchDB 3.4.3 answers it: a top-level name
    /// no endpoint has is a database that does not exist (404; `PUT` of it 400
    /// `illegal_database_name`); `_temp_view` is 410 `gone`; a design document whose map does
    /// not compile is its own `_bulk_docs` row's `compilation_error`, the others saved.
    @Test func namesAndTemporaryViewsAndBulkDesignErrorsAsCouchDB() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            for path in ["/_config", "/_stats", "/_foo"] {
                let r = try await admin.send(.get, path)
                #expect(r.status == .notFound && r["reason"] == "Database does not exist.", "\(path): \(r.text)")
            }
            #expect(try await admin.send(.put, "/_foo")["error"] == "illegal_database_name")
            let temp = try await admin.send(.post, "/db/_temp_view", json: #"{"map": "function(doc) { emit(1); }"}"#)
            #expect(temp.status == .gone && temp["error"] == "gone", "\(temp.text)")
            let bulk = try await admin.send(.post, "/db/_bulk_docs", json: #"{"docs": [{"_id": "_design/foo", "views": {"v": {"map": "baz"}}}, {"_id": "fine"}]}"#)
            #expect(bulk.status == .created, "\(bulk.text)")
            let rows = (try? bulk.json)?.arrayValue ?? []
            #expect(rows.first?["error"] == "compilation_error" && rows.first?["id"] == "_design/foo", "\(bulk.text)")
            #expect(rows.last?["ok"] == true && rows.last?["id"] == "fine", "\(bulk.text)")
            #expect(try await admin.send(.get, "/db/_design/foo").status == .notFound)
        }
    }
}
