import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// What CouchDB's clients meet on ordinary calls, answered as CouchDB 3 answers them: each
/// test on a live server on loopback, as a client library reaches it.
@Suite struct CouchClientCompatibilityTests {
    @Test func ifMatchNamesTheRevisionOfAWrite() async throws {
        try await withLiveServer { c async throws in
            let rev1 = try await put(c, "a", #"{"v":1}"#)
            // PUT with If-Match only (quoted, as an ETag is): an update.
            let put = try await c.send(.put, "/db/a", json: #"{"v":2}"#, headers: [.ifMatch: "\"\(rev1)\""])
            #expect(put.status == .created, "\(put.text)")
            let rev2 = try #require(put["rev"]?.stringValue)
            // If-Match that disagrees with ?rev= or the body's _rev: 400, nothing written.
            for (uri, body) in [("/db/a?rev=\(rev2)", #"{"v":3}"#), ("/db/a", #"{"_rev":"\#(rev2)","v":3}"#)] {
                let r = try await c.send(.put, uri, json: body, headers: [.ifMatch: "\"\(rev1)\""])
                #expect(r.status == .badRequest && r["reason"] == "Document rev and etag have different values", "\(r.text)")
            }
            #expect(try await c.send(.get, "/db/a")["_rev"] == .string(rev2))
            // The same revision named twice is fine.
            let same = try await c.send(.put, "/db/a?rev=\(rev2)", json: #"{"v":3}"#, headers: [.ifMatch: rev2])
            #expect(same.status == .created, "\(same.text)")
            let rev3 = try #require(same["rev"]?.stringValue)
            // DELETE with If-Match; a disagreeing ?rev= is 400.
            let clash = try await c.send(.delete, "/db/a?rev=\(rev2)", headers: [.ifMatch: "\"\(rev3)\""])
            #expect(clash.status == .badRequest, "\(clash.text)")
            let deleted = try await c.send(.delete, "/db/a", headers: [.ifMatch: "\"\(rev3)\""])
            #expect(deleted.status == .ok, "\(deleted.text)")
            #expect(try await c.send(.get, "/db/a").status == .notFound)
        }
    }

    @Test func malformedRevisionsAreBadRequests() async throws {
        try await withLiveServer { c async throws in
            _ = try await put(c, "a", #"{"v":1}"#)
            let answers = [
                try await c.send(.get, "/db/a?rev=foo"),
                try await c.send(.delete, "/db/a?rev=foo"),
                try await c.send(.put, "/db/a", json: #"{"_rev":"x"}"#),
                try await c.send(.put, "/db/a?rev=1-", json: #"{}"#),
                try await c.send(.put, "/db/a", json: #"{}"#, headers: [.ifMatch: "\"nonsense\""]),
                try await c.send(.put, "/db/a?batch=ok", json: #"{"_rev":"x"}"#),
            ]
            for r in answers {
                #expect(r.status == .badRequest && r["error"] == "bad_request" && r["reason"] == "Invalid rev format", "\(r.text)")
            }
        }
    }

    @Test func theURLNamesTheDocumentAndAnyContentTypeIsJSON() async throws {
        try await withLiveServer { c async throws in
            let put = try await c.send(.put, "/db/b", json: #"{"_id":"other","v":1}"#)
            #expect(put.status == .created && put["id"] == "b", "\(put.text)")
            #expect(try await c.send(.get, "/db/other").status == .notFound)
            // curl's default type for -d, and none at all.
            for (id, type) in [("form", "application/x-www-form-urlencoded"), ("plain", "text/plain")] {
                let r = try await c.execute(uri: "/db/\(id)", method: .put, headers: [.contentType: type], body: ByteBuffer(string: #"{"v":2}"#))
                #expect(r.status == .created, "\(type): \(r.text)")
                #expect(try await c.send(.get, "/db/\(id)")["v"] == 2)
            }
            let none = try await c.execute(uri: "/db/none", method: .put, headers: [:], body: ByteBuffer(string: #"{"v":3}"#))
            #expect(none.status == .created, "\(none.text)")
            // Not JSON is still refused, whatever the type says.
            let junk = try await c.execute(uri: "/db/junk", method: .put, headers: [.contentType: "application/x-www-form-urlencoded"],
                                          body: ByteBuffer(string: "v=1"))
            #expect(junk.status == .badRequest)
            // POST /db keeps CouchDB's rule: JSON's type only.
            let post = try await c.execute(uri: "/db", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                          body: ByteBuffer(string: #"{"v":4}"#))
            #expect(post.status == .unsupportedMediaType && post["error"] == "bad_content_type")
        }
    }

    @Test func batchModeAcceptsWithoutARevision() async throws {
        try await withLiveServer { c async throws in
            for _ in 0 ..< 2 {
                // The second is a conflict: accepted all the same, and dropped.
                let r = try await c.send(.put, "/db/d?batch=ok", json: #"{"v":1}"#)
                #expect(r.status == .accepted, "\(r.text)")
                #expect(try r.json == ["ok": true, "id": "d"])
            }
            let doc = try await c.send(.get, "/db/d")
            #expect(doc["v"] == 1 && doc["_rev"]?.stringValue?.hasPrefix("1-") == true)
            let rev = try #require(doc["_rev"]?.stringValue)
            let update = try await c.send(.put, "/db/d?batch=ok", json: #"{"_rev":"\#(rev)","v":2}"#)
            #expect(update.status == .accepted && update["rev"] == nil)
            #expect(try await c.send(.get, "/db/d")["v"] == 2)
            let post = try await c.send(.post, "/db?batch=ok", json: #"{"_id":"p","v":1}"#)
            #expect(post.status == .accepted && post["id"] == "p" && post["rev"] == nil)
            #expect(try await c.send(.post, "/db?batch=ok", json: #"{"_id":"p","v":9}"#).status == .accepted)
            #expect(try await c.send(.get, "/db/p")["v"] == 1)
            // What CouchDB checks before accepting is still an error.
            let bad = try await c.send(.put, "/db/_bad?batch=ok", json: #"{}"#)
            #expect(bad.status == .badRequest && bad["error"] == "illegal_docid")
        }
    }

    @Test func documentIDsAreCheckedAsCouchDBChecksThem() async throws {
        try await withLiveServer { c async throws in
            let answers = [
                try await c.send(.post, "/db", json: #"{"_id":5}"#),
                try await c.send(.post, "/db", json: #"{"_id":"_bad"}"#),
                try await c.send(.post, "/db", json: #"{"_id":"_local/x"}"#),
                try await c.send(.put, "/db/_bad", json: "{}"),
                try await c.send(.put, "/db/_design%2F", json: "{}"),
                try await c.send(.post, "/db", json: #"{"_id":""}"#),
            ]
            for r in answers {
                #expect(r.status == .badRequest && r["error"] == "illegal_docid", "\(r.text)")
            }
            #expect(try await c.send(.get, "/db/_all_docs")["total_rows"] == 0)
        }
    }

    @Test func copyGoesToAnotherDocumentOfThisDatabaseOnly() async throws {
        try await withLiveServer { c async throws in
            _ = try await put(c, "a", #"{"v":1}"#)
            for destination in ["http://evil.example/x", "HTTPS://evil.example/db/x"] {
                let r = try await c.send(HTTPRequest.Method("COPY")!, "/db/a", headers: [HTTPField.Name("Destination")!: destination])
                #expect(r.status == .badRequest && r["reason"] == "Destination URL must be relative.", "\(r.text)")
            }
            #expect(try await c.send(.get, "/db/_all_docs")["total_rows"] == 1)
            let copy = try await c.send(HTTPRequest.Method("COPY")!, "/db/a", headers: [HTTPField.Name("Destination")!: "a%2Fcopy"])
            #expect(copy.status == .created, "\(copy.text)")
            #expect(copy.headers[.location]?.hasSuffix("/db/a%2Fcopy") == true)
            #expect(try await c.send(.get, "/db/a%2Fcopy")["v"] == 1)
        }
    }

    @Test func locationsAreAbsoluteURLsAsTheClientReachedTheServer() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(.live) { c async throws in
            let port = try #require((c as? LiveClient)?.port)
            let plain = try await c.send(.put, "/db/a%2Fb", json: "{}")
            // The live client names the server "localhost" (its Host header).
            #expect(plain.headers[.location] == "http://localhost/db/a%2Fb" || plain.headers[.location] == "http://localhost:\(port)/db/a%2Fb",
                    "\(plain.headers[.location] ?? "none")")
            let proxied = try await c.send(.put, "/db/c", json: "{}", headers: [
                HTTPField.Name("X-Forwarded-Host")!: "couch.example.com", HTTPField.Name("X-Forwarded-Proto")!: "https",
            ])
            #expect(proxied.headers[.location] == "https://couch.example.com/db/c")
            let rev = try #require(proxied["rev"]?.stringValue)
            // An attachment's PUT names the attachment; its DELETE names nothing.
            let att = try await c.execute(uri: "/db/c/notes%2F1.txt?rev=\(rev)", method: .put, headers: [.contentType: "text/plain"],
                                          body: ByteBuffer(string: "hello"))
            #expect(att.status == .created, "\(att.text)")
            #expect(att.headers[.location]?.hasSuffix("/db/c/notes%2F1.txt") == true, "\(att.headers[.location] ?? "none")")
            let rev2 = try #require(att["rev"]?.stringValue)
            let removed = try await c.send(.delete, "/db/c/notes%2F1.txt", headers: [.ifMatch: "\"\(rev2)\""])
            #expect(removed.status == .ok && removed.headers[.location] == nil, "\(removed.text)")
        }
        // Creating a database is the admin port's; its Location has the same form.
        try await server.withClient(admin: true, .live) { c async throws in
            let created = try await c.send(.put, "/newdb", json: "{}", headers: [HTTPField.Name("X-Forwarded-Host")!: "127.0.0.1:9"])
            #expect(created.status == .created, "\(created.text)")
            #expect(created.headers[.location] == "http://127.0.0.1:9/newdb", "\(created.headers[.location] ?? "none")")
        }
    }

    @Test func attachmentsAnswerAsCouchDBDoes() async throws {
        try await withLiveServer { c async throws in
            let rev = try await put(c, "a", #"{"v":1}"#)
            let put = try await c.execute(uri: "/db/a/f.txt?rev=\(rev)", method: .put, headers: [.contentType: "text/plain"],
                                          body: ByteBuffer(string: "0123456789"))
            #expect(put.status == .created)
            let get = try await c.send(.get, "/db/a/f.txt")
            // The MD5 in base64, quoted: no "md5-" prefix.
            let md5 = "eB5eJF1ptWaXm4bijSPyxw=="
            #expect(get.headers[.eTag] == "\"\(md5)\"", "\(get.headers[.eTag] ?? "none")")
            let whole = try await c.send(.get, "/db/a/f.txt", headers: [.range: "bytes=0-"])
            #expect(whole.status == .ok && whole.text == "0123456789" && whole.headers[.contentRange] == nil)
            let part = try await c.send(.get, "/db/a/f.txt", headers: [.range: "bytes=2-4"])
            #expect(part.status == .partialContent && part.text == "234")
            let cached = try await c.send(.get, "/db/a/f.txt", headers: [.ifNoneMatch: "W/\"\(md5)\""])
            #expect(cached.status == .notModified && cached.body.readableBytes == 0)
        }
    }

    @Test func cachingHeadersAsCouchDBSendsThem() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(.live) { c async throws in
            let rev = try await put(c, "a", #"{"v":1}"#)
            for header in ["W/\"\(rev)\"", "\"1-x\", \"\(rev)\"", "\"\(rev)\""] {
                let r = try await c.send(.get, "/db/a", headers: [.ifNoneMatch: header])
                #expect(r.status == .notModified && r.headers[.eTag] == "\"\(rev)\"", "\(header)")
            }
            #expect(try await c.send(.get, "/db/a", headers: [.ifNoneMatch: "W/\"1-other\""]).status == .ok)
            // A revision whose body is gone is 404, not a confirmation of the client's copy.
            let rev2 = try await put(c, "a", #"{"_rev":"\#(rev)","v":2}"#)
            _ = try await server.database(named: "db")?.database.compact()
            let gone = try await c.send(.get, "/db/a?rev=\(rev)", headers: [.ifNoneMatch: "\"\(rev)\""])
            #expect(gone.status == .notFound, "\(gone.status)")
            #expect(try await c.send(.get, "/db/a?rev=\(rev2)", headers: [.ifNoneMatch: "\"\(rev2)\""]).status == .notModified)
            let uuids = try await c.send(.get, "/_uuids?count=3")
            #expect(uuids["uuids"]?.arrayValue?.count == 3)
            #expect(uuids.headers[.cacheControl] == "must-revalidate, no-cache")
            #expect(uuids.headers[HTTPField.Name("Pragma")!] == "no-cache")
            #expect(uuids.headers[.eTag] != nil)
            let tooMany = try await c.send(.get, "/_uuids?count=1001")
            #expect(tooMany.status == .badRequest, "\(tooMany.text)")
        }
    }

    @Test func requestIDsBodyTimesAndMethodOverrides() async throws {
        try await withLiveServer { c async throws in
            let requestID = HTTPField.Name("X-Couch-Request-ID")!, bodyTime = HTTPField.Name("X-CouchDB-Body-Time")!
            let own = try await c.send(.get, "/db", headers: [requestID: "client-42_x"])
            #expect(own.headers[requestID] == "client-42_x")
            #expect(own.headers[bodyTime].flatMap { Int($0) } != nil)
            // Made up when none, and when the client's could not be a header or log line as it is.
            for given in [nil, "a b", String(repeating: "x", count: 37), "é"] {
                let r = try await c.send(.get, "/db/missing", headers: given.map { [requestID: $0] } ?? [:])
                let id = try #require(r.headers[requestID])
                #expect(id != given && id.count == 10 && id.allSatisfy(\.isHexDigit), "\(id)")
                #expect(r.status == .notFound && r.headers[bodyTime] != nil)
            }
            let override = HTTPField.Name("X-HTTP-Method-Override")!
            let put = try await c.send(.post, "/db/fnord", json: #"{"bob":"connie"}"#, headers: [override: "PUT"])
            #expect(put.status == .created, "\(put.text)")
            let rev = try #require(put["rev"]?.stringValue)
            let delete = try await c.send(.post, "/db/fnord?rev=\(rev)", headers: [override: "DELETE"])
            #expect(delete.status == .ok, "\(delete.text)")
            #expect(try await c.send(.get, "/db/fnord").status == .notFound)
            // Only a POST is overridden.
            let get = try await c.send(.get, "/db", headers: [override: "DELETE"])
            #expect(get.status == .ok && get["db_name"] == "db")
        }
    }

    @Test func queryBooleansAreReadInAnyCase() async throws {
        try await withLiveServer { c async throws in
            _ = try await put(c, "a", #"{"v":1}"#)
            #expect(try await c.send(.get, "/db/a?revs=True")["_revisions"] != nil)
            #expect(try await c.send(.get, "/db/_all_docs?include_docs=TRUE")["rows"]?.arrayValue?.first?.objectValue?["doc"] != nil)
            #expect(try await c.send(.get, "/db/a?revs=False")["_revisions"] == nil)
            #expect(try await c.send(.get, "/db/a?revs=yes").status == .badRequest)
        }
    }

    @Test func allDocsKeysAndOffsetsAsCouchDBAnswersThem() async throws {
        try await withLiveServer { c async throws in
            for id in ["a", "b", "c", "d", "e"] { _ = try await put(c, id, "{}") }
            func ids(_ r: TestResponse) -> [JSONValue?] { r.rows.map { $0.objectValue?["id"] ?? $0.objectValue?["key"] } }
            let keys = #"["c","a","e","zz"]"#
            let post = try await c.send(.post, "/db/_all_docs?descending=true&skip=1&limit=2", json: #"{"keys":\#(keys)}"#)
            #expect(ids(post) == ["e", "a"], "\(post.text)")
            #expect(post["offset"] == .null && post["total_rows"] == 5)
            let get = try await c.send(.get, "/db/_all_docs?keys=\(keys.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&skip=1")
            #expect(ids(get) == ["a", "e", "zz"] && get.rows.last?.objectValue?["error"] == "not_found")
            // Keys that are no document IDs are rows not found, not a failed request.
            let odd = try await c.send(.post, "/db/_all_docs", json: #"{"keys":[1,null,"_bad","b",{"x":1}]}"#)
            #expect(odd.status == .ok, "\(odd.text)")
            #expect(odd.rows.map { $0.objectValue?["error"] } == ["not_found", "not_found", "not_found", nil, "not_found"])
            #expect(odd.rows.first?.objectValue?["key"] == 1 && odd.rows[3].objectValue?["id"] == "b")
            // A query parameter wins over the body's option.
            let both = try await c.send(.post, "/db/_all_docs?limit=1", json: #"{"limit":3}"#)
            #expect(both.rows.count == 1)
            // The offset is the number of rows before the first one.
            let ranged = try await c.send(.get, "/db/_all_docs?startkey=%22c%22&skip=1")
            #expect(ids(ranged) == ["d", "e"] && ranged["offset"] == 3, "\(ranged.text)")
            let back = try await c.send(.get, "/db/_all_docs?startkey=%22c%22&descending=true")
            #expect(ids(back) == ["c", "b", "a"] && back["offset"] == 2, "\(back.text)")
            let past = try await c.send(.get, "/db/_all_docs?skip=9")
            #expect(past.rows.isEmpty && past["offset"] == 5)
        }
    }

    @Test func bulkDocsAnswersLocalDocumentsAndAtomicBatchesPerRow() async throws {
        try await withLiveServer { c async throws in
            let r = try await c.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"a"},{"_id":"_local/x","v":1},{"_id":"b"}]}"#)
            #expect(r.status == .created, "\(r.text)")
            let rows = try #require(try r.json.arrayValue)
            #expect(rows.count == 3)
            #expect(rows[0].objectValue?["id"] == "a" && rows[0].objectValue?["ok"] == true)
            #expect(rows[1].objectValue?["id"] == "_local/x" && rows[1].objectValue?["error"] == "illegal_docid")
            #expect(rows[2].objectValue?["id"] == "b" && rows[2].objectValue?["ok"] == true)
            #expect(try await c.send(.get, "/db/_local/x").status == .notFound)
            // new_edits=false answers only what it refused: the local document.
            let replicated = try await c.send(.post, "/db/_bulk_docs", json: #"{"new_edits":false,"docs":[{"_id":"_local/y","_rev":"0-1"},{"_id":"c","_rev":"1-abc"}]}"#)
            #expect(replicated.status == .created, "\(replicated.text)")
            #expect(try replicated.json.arrayValue?.map { $0.objectValue?["id"] } == ["_local/y"])
            #expect(try await c.send(.get, "/db/c")["_rev"] == "1-abc")
            // all_or_nothing is refused as CouchDB 3 refuses it: 417, a row per document, nothing written.
            let atomic = try await c.send(.post, "/db/_bulk_docs", json: #"{"all_or_nothing":true,"docs":[{"_id":"d"},{"_id":"a","_rev":"1-x"}]}"#)
            #expect(atomic.status == .expectationFailed, "\(atomic.text)")
            let refused = try #require(try atomic.json.arrayValue)
            #expect(refused.map { $0.objectValue?["error"] } == ["not_implemented", "not_implemented"])
            #expect(refused.map { $0.objectValue?["id"] } == ["d", "a"] && refused[1].objectValue?["rev"] == "1-x")
            #expect(try await c.send(.get, "/db/d").status == .notFound)
        }
    }

    @Test func changesFeedsAreWrittenAsCouchDBWritesThem() async throws {
        try await withLiveServer { c async throws in
            for id in ["a", "b", "c"] { _ = try await put(c, id, "{}") }
            // One result per line, as a client reading the body line by line expects.
            for uri in ["/db/_changes", "/db/_changes?feed=longpoll&since=0&timeout=1000"] {
                let r = try await c.send(.get, uri)
                let lines = r.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                #expect(lines.first == #"{"results":["#, "\(uri): \(r.text)")
                let results = lines.dropFirst().prefix { $0 != "]," }
                #expect(results.count == 3, "\(uri): \(r.text)")
                for (line, id) in zip(results, ["a", "b", "c"]) {
                    let row = try JSONValue(parsing: Array((line.hasSuffix(",") ? String(line.dropLast()) : line).utf8))
                    #expect(row.objectValue?["id"] == .string(id))
                }
                #expect(try r.json.objectValue?["last_seq"] == 3 && r["pending"] == 0)
            }
            let empty = try await c.send(.get, "/db/_changes?since=3")
            #expect(try empty.json == ["results": [], "last_seq": 3, "pending": 0])
            // `live` is `continuous`: a row per line, then last_seq.
            let live = try await c.send(.get, "/db/_changes?feed=live&since=1&timeout=200")
            let liveLines = live.text.split(separator: "\n").map { try? JSONValue(parsing: Array($0.utf8)) }
            #expect(liveLines.map { $0?.objectValue?["id"] ?? $0?.objectValue?["last_seq"] } == ["b", "c", 3], "\(live.text)")
            // An EventSource resumes from Last-Event-ID (the header, else the parameter).
            let resumed = try await c.send(.get, "/db/_changes?feed=eventsource&timeout=200", headers: [HTTPField.Name("Last-Event-ID")!: "2"])
            #expect(resumed.text.contains(#""id":"c""#) && !resumed.text.contains(#""id":"b""#), "\(resumed.text)")
            let byParameter = try await c.send(.get, "/db/_changes?feed=eventsource&timeout=200&last-event-id=1")
            #expect(byParameter.text.contains(#""id":"b""#) && !byParameter.text.contains(#""id":"a""#), "\(byParameter.text)")
            // Heartbeats: `true` is the default interval; anything but a positive integer is 400.
            #expect(try await c.send(.get, "/db/_changes?feed=longpoll&heartbeat=true&since=0").status == .ok)
            for bad in ["0", "-5", "soon"] {
                let r = try await c.send(.get, "/db/_changes?feed=continuous&heartbeat=\(bad)")
                #expect(r.status == .badRequest && r["error"] == "bad_request", "\(bad): \(r.text)")
            }
        }
    }

    /// `filter=_selector`: the changes of the documents a Mango selector (POST body) matches.
    @Test func changesFilteredByASelector() async throws {
        try await withLiveServer { c async throws in
            _ = try await put(c, "a", #"{"type": "task", "n": 1}"#)
            _ = try await put(c, "b", #"{"type": "note", "n": 2}"#)
            _ = try await put(c, "c", #"{"type": "task", "n": 3}"#)
            let tasks = try await c.send(.post, "/db/_changes?filter=_selector", json: #"{"selector": {"type": "task"}}"#)
            #expect(tasks.rowIDs == ["a", "c"], "\(tasks.text)")
            let later = try await c.send(.post, "/db/_changes?filter=_selector&since=1", json: #"{"selector": {"n": {"$gt": 1}}}"#)
            #expect(later.rowIDs == ["b", "c"] && later["last_seq"] == 3, "\(later.text)")
            // The document's current revision decides: an update out of the selector leaves it.
            _ = try await c.send(.put, "/db/c", json: #"{"_rev": "\#(try await c.send(.get, "/db/c")["_rev"]?.stringValue ?? "")", "type": "done"}"#)
            #expect(try await c.send(.post, "/db/_changes?filter=_selector", json: #"{"selector": {"type": "task"}}"#).rowIDs == ["a"])
            for (body, reason) in [("{}", "Selector must be specified"), (#"{"selector": 1}"#, "Selector must be specified"),
                                   (#"{"selector": {"n": {"$bogus": 1}}}"#, "$bogus")] {
                let r = try await c.send(.post, "/db/_changes?filter=_selector", json: body)
                #expect(r.status == .badRequest && r["reason"]?.stringValue?.contains(reason) == true, "\(body): \(r.text)")
            }
        }
    }

    @Test func compactRunningIsTrueUntilTheCompactionHasEnded() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true, .live) { c async throws in
            // Enough old revisions that the compaction has work to do.
            var revs: [String: String] = [:]
            for i in 0 ..< 200 { revs["d\(i)"] = try await put(c, "d\(i)", #"{"v":0,"pad":"\#(String(repeating: "x", count: 500))"}"#) }
            for (id, rev) in revs { _ = try await put(c, id, #"{"_rev":"\#(rev)","v":1}"#) }
            let accepted = try await c.send(.post, "/db/_compact", json: "{}")
            #expect(accepted.status == .accepted)
            // Polled as clients poll it: once it reads false, the old bodies are gone.
            var polls = 0
            while try await c.send(.get, "/db")["compact_running"] == true {
                polls += 1
                try await Task.sleep(for: .milliseconds(20))
                try #require(polls < 3000, "compaction never ended")
            }
            for (id, rev) in revs.prefix(20) {
                let old = try await c.send(.get, "/db/\(id)?rev=\(rev)")
                #expect(old.status == .notFound, "\(id) \(rev) still readable after compact_running turned false")
            }
            // `_compact/{ddoc}` names a design document that must be there.
            let missing = try await c.send(.post, "/db/_compact/nope", json: "{}")
            #expect(missing.status == .notFound && missing["error"] == "not_found", "\(missing.text)")
            _ = try await put(c, "_design/app", #"{"views": {"v": {"map": "function (doc) { emit(doc.v, null); }"}}}"#)
            #expect(try await c.send(.post, "/db/_compact/app", json: "{}").status == .accepted)
            while try await c.send(.get, "/db")["compact_running"] == true { try await Task.sleep(for: .milliseconds(20)) }
            // Design functions this server does not run say so; shows, lists and updates it runs
            // say which function is missing.
            for method in [HTTPRequest.Method.get, .post, .put] {
                let r = try await c.send(method, "/db/_design/app/_rewrite/x", json: method == .get ? nil : "{}")
                #expect(r.status == .notFound && r["reason"]?.stringValue?.contains("not served") == true, "\(method) _rewrite: \(r.text)")
            }
            for (method, path) in [(HTTPRequest.Method.get, "_show/s/d1"), (.post, "_list/l/v"), (.put, "_update/u")] {
                let r = try await c.send(method, "/db/_design/app/\(path)", json: method == .get ? nil : "{}")
                #expect(r.status == .notFound && r["reason"]?.stringValue?.contains("missing function") == true, "\(method) \(path): \(r.text)")
            }
        }
    }

    /// `PUT /{db}` takes no body, whatever type an empty one is labelled with (aiohttp sends
    /// `application/octet-stream`).
    @Test func creatingADatabaseTakesAnEmptyBodyOfAnyType() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true, .live) { c async throws in
            for (name, type) in [("made1", "application/octet-stream"), ("made2", "text/html"), ("made3", "application/json")] {
                let r = try await c.execute(uri: "/\(name)", method: .put, headers: [.contentType: type], body: nil)
                #expect(r.status == .created, "\(type): \(r.status) \(String(buffer: r.body))")
            }
            // A body still has to be a configuration, sent as JSON.
            let r = try await c.execute(uri: "/made4", method: .put, headers: [.contentType: "application/octet-stream"], body: ByteBuffer(string: "{}"))
            #expect(r.status == .unsupportedMediaType)
        }
    }

    @Test func theWelcomeNamesTheCouchDBAPILevel() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(.live) { c async throws in
            let welcome = try await c.send(.get, "/")
            #expect(welcome["couchdb"] == "Welcome" && welcome["version"] == .string(CouchAPI.couchDBVersion))
            #expect(welcome["version"]?.stringValue?.hasPrefix("3.") == true)
            #expect(welcome["vendor"]?.objectValue?["name"] == "Settee")
            // CouchDB's system databases are names, not bad names: `_global_changes` does not
            // exist here, `_users` and `_replicator` are the admin port's to list (a user's own
            // document aside).
            let global = try await c.send(.get, "/_global_changes")
            #expect(global.status == .notFound && global["error"] == "not_found", "\(global.text)")
            for path in ["/_users", "/_replicator"] {
                let r = try await c.send(.get, path)
                #expect(r.status == .forbidden && r["error"] == "forbidden", "\(path): \(r.text)")
            }
            #expect(try await c.send(.get, "/_users/org.couchdb.user:bob").status == .notFound)
        }
        // Without administrators configured the admin port names nobody: there are no credentials.
        try await server.withClient(admin: true, .live) { c async throws in
            let context = try await c.send(.get, "/_session")["userCtx"]?.objectValue
            #expect(context?["name"] == .null && context?["roles"] == ["_admin"])
        }
    }

    @Test func aStubNamesTheRevisionThatAddedItsAttachment() async throws {
        try await withLiveServer { c async throws in
            let rev1 = try await put(c, "a", #"{"_attachments":{"f.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)
            let rev2 = try await put(c, "a", #"{"_rev":"\#(rev1)","v":2,"_attachments":{"f.txt":{"stub":true,"revpos":1}}}"#)
            let wrong = try await c.send(.put, "/db/a", json: #"{"_rev":"\#(rev2)","_attachments":{"f.txt":{"stub":true,"revpos":2}}}"#)
            #expect(wrong.status == .preconditionFailed && wrong["error"] == "missing_stub", "\(wrong.text)")
            // Without revpos, or as 1.0, it is the attachment the revision has.
            let rev3 = try await put(c, "a", #"{"_rev":"\#(rev2)","v":3,"_attachments":{"f.txt":{"stub":true,"revpos":1.0}}}"#)
            _ = try await put(c, "a", #"{"_rev":"\#(rev3)","v":4,"_attachments":{"f.txt":{"stub":true}}}"#)
            #expect(try await c.send(.get, "/db/a/f.txt").text == "hello")
        }
    }

    @Test func attachmentsComeAsPartsWhenAMultipartAnswerIsAskedFor() async throws {
        try await withLiveServer { c async throws in
            let rev = try await put(c, "a", #"{"v":1,"_attachments":{"f.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)
            let r = try await c.send(.get, "/db/a?attachments=true", headers: [.accept: "multipart/related"])
            #expect(r.status == .ok && r.headers[.eTag] == "\"\(rev)\"")
            let type = try #require(r.headers[.contentType])
            #expect(type.hasPrefix("multipart/related; boundary="), "\(type)")
            let boundary = String(type.split(separator: "\"")[1])
            let parts = r.text.components(separatedBy: "--\(boundary)")
            // The document, the attachment, and the closing delimiter's remains.
            #expect(parts.count == 4 && parts.last == "--", "\(r.text)")
            let document = try #require(parts[1].components(separatedBy: "\r\n\r\n").last)
            let json = try JSONValue(parsing: Array(document.utf8))
            #expect(json.objectValue?["_rev"] == .string(rev) && json.objectValue?["v"] == 1)
            #expect(json.objectValue?["_attachments"]?.objectValue?["f.txt"]?.objectValue?["follows"] == true)
            #expect(parts[2].contains("Content-Disposition: attachment; filename=\"f.txt\"") && parts[2].hasSuffix("\r\n\r\nhello\r\n"))
            // Without the Accept header, or without attachments=true, the JSON answer as before.
            let inline = try await c.send(.get, "/db/a?attachments=true")
            #expect(inline.headers[.contentType] == "application/json")
            #expect(inline["_attachments"]?.objectValue?["f.txt"]?.objectValue?["data"] == "aGVsbG8=")
            #expect(try await c.send(.get, "/db/a?revs=true", headers: [.accept: "multipart/related"]).headers[.contentType] == "application/json")
        }
    }

    @Test func aFormUploadsAnAttachmentFromAPageOfThisServerOnly() async throws {
        try await withLiveServer { c async throws in
            let rev = try await put(c, "a", #"{"v":1}"#)
            func form(_ rev: String?, file: String = "notes.txt", content: String = "hello form") -> ByteBuffer {
                var body = ""
                if let rev { body += "--XyZ\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\(rev)\r\n" }
                body += "--XyZ\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"\(file)\"\r\nContent-Type: text/plain\r\n\r\n\(content)\r\n"
                return ByteBuffer(string: body + "--XyZ--\r\n")
            }
            let formType: HTTPFields = [.contentType: "multipart/form-data; boundary=XyZ"]
            func post(_ headers: HTTPFields, _ body: ByteBuffer) async throws -> TestResponse {
                var fields = formType
                fields.append(contentsOf: headers)
                return try await c.execute(uri: "/db/a", method: .post, headers: fields, body: body)
            }
            // Another site's page, or no Referer at all: refused, nothing written.
            #expect(try await post([:], form(rev)).status == .badRequest)
            #expect(try await post([.referer: "http://evil.example/page"], form(rev)).status == .badRequest)
            #expect(try await post([.referer: "http://localhost/db", .origin: "http://evil.example"], form(rev)).status == .forbidden)
            #expect(try await c.send(.get, "/db/a")["_rev"] == .string(rev))
            let ok = try await post([.referer: "http://localhost/_utils/document.html"], form(rev))
            #expect(ok.status == .created, "\(ok.text)")
            let rev2 = try #require(ok["rev"]?.stringValue)
            #expect(rev2.hasPrefix("2-") && ok.headers[.eTag] == "\"\(rev2)\"")
            let att = try await c.send(.get, "/db/a/notes.txt")
            #expect(att.text == "hello form" && att.headers[.contentType] == "text/plain")
            #expect(try await c.send(.get, "/db/a")["v"] == 1)
            // A stale revision is a conflict; another type on POST /db/doc is 415.
            #expect(try await post([.referer: "http://localhost/x"], form(rev)).status == .conflict)
            let json = try await c.send(.post, "/db/a", json: "{}")
            #expect(json.status == .unsupportedMediaType && json["error"] == "bad_content_type")
        }
    }

    @Test func securityMembersRestrictWhoMayUseTheDatabase() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("settee-security-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try Database(name: "secured", config: DatabaseConfiguration(directory: dir))
        defer { try? db.close() }
        try await db.saveDocument(MutableDocument(id: "a", data: ["v": 1]))
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        let users: [String: ServerConfiguration.UserConfig] = [
            "GUEST": .init(disabled: false, adminChannels: ["*"]),
            "alice": .init(password: "pw", adminChannels: ["*"]),
            "bob": .init(password: "pw", adminChannels: ["*"]),
            "carol": .init(password: "pw", adminChannels: ["*"], adminRoles: ["staff"]),
            "dave": .init(password: "pw", adminChannels: ["*"]),
        ]
        do {
            let server = try SetteeServer(serving: db, as: "db", configuration: config, users: users)
            try await withPorts(server) { pub, admin async throws in
                #expect(try await pub.send(.get, "/db/_security").json == [:])
                let body = #"{"admins":{"names":["bob"],"roles":[]},"members":{"names":["alice"],"roles":["staff"]}}"#
                // Setting it is administration: the admin port's.
                #expect(try await pub.send(.put, "/db/_security", json: body, headers: basic("alice", "pw")).status == .forbidden)
                #expect(try await admin.send(.put, "/db/_security", json: #"{"members":{"names":"alice"}}"#).status == .badRequest)
                #expect(try await admin.send(.put, "/db/_security", json: body)["ok"] == true)
                // carol's role counts whether or not a role of that name is defined (CouchDB's
                // roles are the user's list).
                // Members (by name or role) and admins may use it; another user is 403, anonymous 401.
                for user in ["alice", "bob", "carol"] {
                    let r = try await pub.send(.get, "/db/a", headers: basic(user, "pw"))
                    #expect(r.status == .ok, "\(user): \(r.text)")
                }
                // A user of the database who is not a member: nothing, not even what its channels hold.
                for path in ["/db/a", "/db/_all_docs", "/db/_changes", "/db/_security"] {
                    let r = try await pub.send(.get, path, headers: basic("dave", "pw"))
                    #expect(r.status == .forbidden && r["error"] == "forbidden", "\(path): \(r.text)")
                }
                #expect(try await pub.send(.put, "/db/mine", json: "{}", headers: basic("dave", "pw")).status == .forbidden)
                #expect(try await pub.send(.post, "/db/_bulk_docs", json: #"{"docs":[{"_id":"x"}]}"#, headers: basic("dave", "pw")).status == .forbidden)
                let guest = try await pub.send(.get, "/db/a")
                #expect(guest.status == .unauthorized)
                #expect(try await pub.send(.get, "/db/_changes").status == .unauthorized)
                #expect(try await pub.send(.put, "/db/b", json: "{}").status == .unauthorized)
                let security = try await admin.send(.get, "/db/_security").json
                #expect(security.objectValue?["members"]?.objectValue?["roles"] == ["staff"])
                #expect(security.objectValue?["admins"]?.objectValue?["names"] == ["bob"])
                // Logging in stays open (it is how a member gets a session); a login names the roles.
                #expect(try await pub.send(.post, "/db/_session", json: #"{"name":"alice","password":"pw"}"#).status == .ok)
                let carol = try await pub.send(.get, "/_session", headers: basic("carol", "pw"))
                #expect(carol["userCtx"]?["roles"] == ["staff"], "\(carol.text)")
                // Emptied, it answers as it was set (members and admins empty, not `{}`).
                let emptied = #"{"admins":{"names":[],"roles":[]},"members":{"names":[],"roles":[]}}"#
                #expect(try await admin.send(.put, "/db/_security", json: emptied)["ok"] == true)
                #expect(try await admin.send(.get, "/db/_security").json == (try JSONValue(parsing: Array(emptied.utf8))))
                #expect(try await pub.send(.get, "/db/a", headers: basic("dave", "pw")).status == .ok)
                #expect(try await admin.send(.put, "/db/_security", json: body)["ok"] == true)
            }
            try server.close()
        }
        // Stored with the database: a server started again over it keeps it.
        let again = try SetteeServer(serving: db, as: "db", configuration: config, users: users)
        try await withPorts(again) { pub, _ async throws in
            #expect(try await pub.send(.get, "/db/a", headers: basic("bob", "pw")).status == .ok)
            #expect(try await pub.send(.get, "/db/a").status == .unauthorized)
            #expect(try await pub.send(.get, "/db/_security", headers: basic("alice", "pw")).json.objectValue?["members"] != nil)
        }
        try again.close()
    }

    /// Runs `body` with a client of a live server on loopback (its public port), over walrus
    /// databases, closed afterwards.
    private func withLiveServer(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(.live, body)
    }
}
