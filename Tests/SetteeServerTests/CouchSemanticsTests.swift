import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
import Synchronization
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer
import SetteeHTTP

/// CouchDB semantics a client or replicator relies on: edits of a conflict's losing leaf,
/// `_bulk_get` with `latest` and as `multipart/mixed`, HEAD lengths, sessions, `key`, purges.
@Suite struct CouchSemanticsTests {
    static let digestA = String(repeating: "a", count: 32)
    static let digestB = String(repeating: "b", count: 32)

    /// `d` with two live leaves `2-aaa…` and `2-bbb…` (the winner) on `1-…`.
    private func conflicted(_ c: any TestClientProtocol) async throws -> (rev1: String, loser: String, winner: String) {
        let rev1 = try #require(try await c.send(.put, "/db/d", json: #"{"v":1}"#)["rev"]?.stringValue)
        let base = String(rev1.split(separator: "-")[1])
        let docs = [Self.digestA, Self.digestB].map {
            #"{"_id":"d","_rev":"2-\#($0)","_revisions":{"start":2,"ids":["\#($0)","\#(base)"]},"v":"\#($0.prefix(1))"}"#
        }
        let inserted = try await c.send(.post, "/db/_bulk_docs", json: #"{"new_edits":false,"docs":[\#(docs.joined(separator: ","))]}"#)
        #expect(inserted.status == .created)
        return (rev1, "2-\(Self.digestA)", "2-\(Self.digestB)")
    }

    @Test func anEditOfALosingLeafContinuesThatBranch() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let (rev1, loser, winner) = try await conflicted(c)
            #expect(try await c.send(.get, "/db/d")["_rev"] == .string(winner))
            let put = try await c.send(.put, "/db/d", json: #"{"_rev":"\#(loser)","v":"edited"}"#)
            #expect(put.status == .created, "\(put.text)")
            let rev3 = try #require(put["rev"]?.stringValue)
            #expect(rev3.hasPrefix("3-"))
            let current = try await c.send(.get, "/db/d?revs=true&conflicts=true")
            #expect(current["_rev"] == .string(rev3) && current["v"] == "edited")
            #expect(current["_revisions"]?.objectValue?["ids"]?.arrayValue?[1] == .string(Self.digestA))
            #expect(current["_conflicts"] == [.string(winner)])
            // A revision that is not a leaf any more: 409.
            #expect(try await c.send(.put, "/db/d", json: #"{"_rev":"\#(loser)","v":"again"}"#).status == .conflict)
            #expect(try await c.send(.put, "/db/d", json: #"{"_rev":"\#(rev1)","v":"old"}"#).status == .conflict)
            // Deleting the other leaf resolves the conflict; a second time it is not a leaf.
            let deleted = try await c.send(.delete, "/db/d?rev=\(winner)")
            #expect(deleted.status == .ok, "\(deleted.text)")
            #expect(try await c.send(.get, "/db/d?conflicts=true")["_conflicts"] == nil)
            #expect(try await c.send(.delete, "/db/d?rev=\(winner)").status == .conflict)
        }
    }

    @Test func aRejectedBulkDocsRequestDeletesNoLosingLeaf() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let (_, loser, _) = try await conflicted(c)
            let before = try await c.send(.get, "/db/d?open_revs=all").json
            let seq = try await c.send(.get, "/db")["update_seq"]
            // The second document's attachment is not base64: the whole request fails, 400.
            let refused = try await c.send(.post, "/db/_bulk_docs", json: #"""
                {"docs":[{"_id":"d","_rev":"\#(loser)","_deleted":true},
                         {"_id":"e","_attachments":{"x":{"content_type":"text/plain","data":"%%%"}}}]}
                """#)
            #expect(refused.status == .badRequest, "\(refused.text)")
            #expect(try await c.send(.get, "/db/d?open_revs=all").json == before)
            #expect(try await c.send(.get, "/db")["update_seq"] == seq)
            // The same deletion alone goes through, answered per document.
            let ok = try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"d","_rev":"\#(loser)","_deleted":true}]}"#)
            #expect(try ok.status == .created && ok.json.arrayValue?.first?.objectValue?["ok"] == true)
        }
    }

    @Test func bulkGetFollowsLatestAndAnswersMultipartMixed() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let rev1 = try #require(try await c.send(.put, "/db/d", json: #"{"v":1}"#)["rev"]?.stringValue)
            let rev2 = try #require(try await c.send(.put, "/db/d", json: #"{"_rev":"\#(rev1)","v":2}"#)["rev"]?.stringValue)
            let e = try await c.send(.put, "/db/e", json: #"{"_attachments":{"n.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)
            let erev = try #require(e["rev"]?.stringValue)
            let request = #"{"docs":[{"id":"d","rev":"\#(rev1)"},{"id":"nope"},{"id":"e","rev":"\#(erev)"}]}"#

            // JSON: latest replaces the superseded revision by its leaf.
            let json = try await c.send(.post, "/db/_bulk_get?revs=true&latest=true&attachments=true", json: request)
            let results = try #require(json["results"]?.arrayValue)
            #expect(results.count == 3)
            #expect(results[0].objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_rev"] == .string(rev2))
            #expect(results[1].objectValue?["docs"]?.arrayValue?.first?.objectValue?["error"]?.objectValue?["error"] == "not_found")
            // Without latest, the revision asked for.
            let exact = try await c.send(.post, "/db/_bulk_get", json: request)
            #expect(exact["results"]?.arrayValue?[0].objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_rev"] == .string(rev1))

            // multipart/mixed: a JSON part, an error part, a multipart/related part with the body.
            var headers: HTTPFields = [.accept: "multipart/mixed"]
            headers[.contentType] = "application/json"
            let mixed = try await c.send(.post, "/db/_bulk_get?revs=true&latest=true&attachments=true", json: request, headers: headers)
            let type = try #require(mixed.headers[.contentType])
            #expect(type.hasPrefix("multipart/mixed"))
            let parts = try Multipart.parts(Array(mixed.body.readableBytesView), boundary: try #require(Multipart.boundary(of: type)))
            #expect(parts.count == 3)
            #expect(parts[0].headers["content-type"] == "application/json")
            #expect(try JSONValue(parsing: parts[0].body).objectValue?["_rev"] == .string(rev2))
            #expect(parts[1].headers["content-type"] == #"application/json; error="true""#)
            #expect(try JSONValue(parsing: parts[1].body).objectValue?["error"] == "not_found")
            let relatedType = try #require(parts[2].headers["content-type"])
            #expect(relatedType.hasPrefix("multipart/related"))
            let related = try Multipart.parts(parts[2].body, boundary: try #require(Multipart.boundary(of: relatedType)))
            #expect(related.count == 2)
            let doc = try JSONValue(parsing: related[0].body)
            #expect(doc.objectValue?["_attachments"]?.objectValue?["n.txt"]?.objectValue?["follows"] == true)
            #expect(String(decoding: related[1].body, as: UTF8.self) == "hello")
        }
    }

    @Test func headAnswersGetsContentLength() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(.live) { c async throws in
            try await c.send(.put, "/db/d", json: #"{"title":"a body of some length"}"#)
            for path in ["/db/d", "/db", "/", "/db/_all_docs"] {
                let get = try await c.send(.get, path)
                let head = try await c.send(.head, path)
                #expect(head.status == .ok && head.body.readableBytes == 0)
                #expect(head.headers[.contentLength] == String(get.body.readableBytes), "\(path)")
            }
        }
    }

    @Test func allDocsKeyDeleteOfADeletedDocumentAndAttachmentDeletion() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            for id in ["a", "b", "c"] { try await c.send(.put, "/db/\(id)", json: "{}") }
            let one = try await c.send(.get, #"/db/_all_docs?key="b"&inclusive_end=false"#)
            #expect(one["rows"]?.arrayValue?.compactMap { $0.objectValue?["id"] } == ["b"])
            #expect(try await c.send(.get, #"/db/_all_docs?key=3"#).status == .badRequest)
            let rev = try #require(try await c.send(.get, "/db/a")["_rev"]?.stringValue)
            let gone = try await c.send(.delete, "/db/a?rev=\(rev)")
            let tombstone = try #require(gone["rev"]?.stringValue)
            let again = try await c.send(.delete, "/db/a?rev=\(tombstone)")
            #expect(again.status == .notFound && again["reason"] == "deleted")
            #expect(try await c.send(.delete, "/db/zz?rev=1-\(Self.digestA)")["reason"] == "missing")
        }
    }

    @Test func sessionsSayHowTheyAuthenticatedAndKeepAnAdminGivenLifetime() async throws {
        let server = try makeServer(guest: false, users: ["alice": .init(password: "pw")])
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let login = try await c.send(.post, "/_session", json: #"{"name":"alice","password":"pw"}"#)
            let cookie = try #require(login.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            let viaCookie = try await c.send(.get, "/_session", headers: [.cookie: cookie])
            #expect(viaCookie["info"]?.objectValue?["authenticated"] == "cookie")
            #expect(viaCookie["userCtx"]?.objectValue?["name"] == "alice")
            let viaBasic = try await c.send(.get, "/_session", headers: basic("alice", "pw"))
            #expect(viaBasic["info"]?.objectValue?["authenticated"] == "default")
        }
        let id = try await server.withClient(admin: true) { c async throws -> String in
            let sent = Date()
            let made = try await c.send(.post, "/db/_session", json: #"{"name":"alice","ttl":120}"#)
            let answered = Date()
            #expect(made.status == .ok, "\(made.text)")
            let expires = try #require(made["expires"]?.stringValue.flatMap { ISO8601DateFormatter().date(from: $0) })
            // 120 s from when the server answered (whole seconds), however long the answer took.
            #expect(expires.timeIntervalSince(sent) > 118 && expires.timeIntervalSince(answered) < 122, "\(sent) \(answered) \(expires)")
            #expect(try await c.send(.post, "/db/_session", json: #"{"name":"alice","ttl":"soon"}"#).status == .badRequest)
            return try #require(made["session_id"]?.stringValue)
        }
        try await server.withClient { c async throws in
            let used = try await c.send(.get, "/db/_session", headers: [.cookie: "SyncGatewaySession=\(id)"])
            #expect(used["userCtx"]?.objectValue?["name"] == "alice")
        }
    }

    @Test func aRefusedPurgePurgesNothing() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            _ = try await conflicted(c)
            #expect(try await c.send(.put, "/db/a", json: "{}").status == .created)
        }
        try await server.withClient(admin: true) { c async throws in
            let arev = try #require(try await c.send(.get, "/db/a")["_rev"]?.stringValue)
            // `a` is complete, `d` lists one of its two leaves: 400, and `a` stays.
            let refused = try await c.send(.post, "/db/_purge", json: #"{"a":["\#(arev)"],"d":["2-\#(Self.digestA)"]}"#)
            #expect(refused.status == .badRequest)
            #expect(try await c.send(.get, "/db/a").status == .ok)
            let purged = try await c.send(.post, "/db/_purge", json: #"{"a":["\#(arev)"],"d":["2-\#(Self.digestA)","2-\#(Self.digestB)"]}"#)
            #expect(purged.status == .created)
            #expect(purged["purged"]?.objectValue?["a"] == [.string(arev)])
            #expect(try await c.send(.get, "/db/a").status == .notFound)
            #expect(try await c.send(.get, "/db/d").status == .notFound)
        }
    }
}

/// Requests racing with the deletion of their database get CouchDB's answers (the document's, or
/// 404 once the database is gone), never a server error.
@Suite struct RequestsRacingADatabaseDeletionTests {
    @Test func requestsDuringADeletionAreAnsweredAsForAMissingDatabase() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        for round in 0 ..< 5 {
            try await server.withClient(admin: true, .router) { a async throws in
                #expect(try await a.send(.put, "/made").status == .created)
                try await a.send(.put, "/made/one", json: "{}")
            }
            let statuses = try await withThrowingTaskGroup(of: [Int].self) { group in
                for worker in 0 ..< 4 {
                    group.addTask {
                        let seen = Mutex<[Int]>([])
                        try await server.withClient(admin: true, .live) { c async throws in
                            for i in 0 ..< 40 {
                                let requests: [(HTTPRequest.Method, String, String?)] = [
                                    (.get, "/made/one", nil), (.put, "/made/w\(worker)-\(i)", "{}"),
                                    (.delete, "/made/_design/x", nil), (.get, "/made/_all_docs", nil), (.get, "/made", nil),
                                ]
                                let (method, path, body) = requests[i % requests.count]
                                let code = Int(try await c.send(method, path, json: body).status.code)
                                seen.withLock { $0.append(code) }
                            }
                        }
                        return seen.withLock { $0 }
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(5))
                    try await server.withClient(admin: true, .live) { a async throws in
                        #expect(try await a.send(.delete, "/made").status == .ok)
                    }
                    return []
                }
                var all: [Int] = []
                for try await s in group { all += s }
                return all
            }
            #expect(statuses.allSatisfy { $0 < 500 }, "round \(round): \(statuses.filter { $0 >= 500 })")
        }
    }
}

/// A database deleted under an open feed ends the feed's answer properly (a continuous feed's
/// last line), never by cutting its connection.
@Suite struct FeedsOfADeletedDatabaseTests {
    @Test func aContinuousFeedEndsCleanlyWhenItsDatabaseIsDeleted() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true, .router) { a async throws in
            #expect(try await a.send(.put, "/made").status == .created)
            try await a.send(.put, "/made/one", json: "{}")
        }
        try await server.withClient(admin: true, .live) { c async throws in
            let feed = Task { try await c.send(.get, "/made/_changes?feed=continuous&since=0&heartbeat=1000") }
            // Until the feed is open on the server (under load the request may take a while).
            for _ in 0 ..< 1000 where server.database(named: "made")?.openFeeds.withLock({ $0.signals.isEmpty }) ?? false {
                try await Task.sleep(for: .milliseconds(10))
            }
            try await server.withClient(admin: true, .router) { a async throws in
                #expect(try await a.send(.delete, "/made").status == .ok)
            }
            let answer = try await feed.value
            #expect(answer.status == .ok)
            let lines = answer.text.split(separator: "\n")
            #expect(lines.first?.contains("\"one\"") == true)
            #expect(lines.last?.contains("last_seq") == true, "\(answer.text)")
        }
    }
}
