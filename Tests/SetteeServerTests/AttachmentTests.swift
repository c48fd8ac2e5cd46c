import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// CouchDB's attachments: inline, as stubs, standalone, and in multipart uploads, with the md5
/// digests CouchDB's replicator checks.
@Suite struct AttachmentTests {
    static let hello = Data("hello, world".utf8)
    static var helloMD5: String { "md5-" + Data(Insecure.MD5.hash(data: hello)).base64EncodedString() }

    @Test func inlineAttachmentsStubsAndStandaloneAccess() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let b64 = Self.hello.base64EncodedString()
            let put = try await c.send(.put, "/db/doc", json: #"{"t":1,"_attachments":{"note.txt":{"content_type":"text/plain","data":"\#(b64)"}}}"#)
            #expect(put.status == .created, "\(put.text)")
            let rev1 = try #require(put["rev"]?.stringValue)
            let stub = try #require(try await c.send(.get, "/db/doc")["_attachments"]?.objectValue?["note.txt"]?.objectValue)
            #expect(stub == ["content_type": "text/plain", "digest": .string(Self.helloMD5), "length": 12, "revpos": 1, "stub": true])
            let inline = try await c.send(.get, "/db/doc?attachments=true")["_attachments"]?.objectValue?["note.txt"]?.objectValue
            #expect(inline?["data"] == .string(b64) && inline?["stub"] == nil)
            // The attachment itself, whole and in ranges.
            let att = try await c.send(.get, "/db/doc/note.txt")
            #expect(att.status == .ok && Data(att.body.readableBytesView) == Self.hello)
            #expect(att.headers[.contentType] == "text/plain" && att.headers[.eTag] == "\"\(Self.helloMD5.dropFirst(4))\"")
            let part = try await c.send(.get, "/db/doc/note.txt", headers: [.range: "bytes=7-11"])
            #expect(part.status == .partialContent && part.text == "world" && part.headers[.contentRange] == "bytes 7-11/12")
            #expect(try await c.send(.get, "/db/doc/note.txt", headers: [.range: "bytes=-5"]).text == "world")
            let bad = try await c.send(.get, "/db/doc/note.txt", headers: [.range: "bytes=50-60"])
            #expect(bad.status == .rangeNotSatisfiable && bad.headers[.contentRange] == "bytes */12")
            #expect(try await c.send(.get, "/db/doc/missing.txt").status == .notFound)
            // An update keeps an attachment by its stub; a stub of nothing is 412 missing_stub.
            let kept = try await c.send(.put, "/db/doc", json: #"{"_rev":"\#(rev1)","t":2,"_attachments":{"note.txt":{"stub":true}}}"#)
            let rev2 = try #require(kept["rev"]?.stringValue)
            #expect(try await c.send(.get, "/db/doc/note.txt").text == "hello, world")
            let missing = try await c.send(.put, "/db/doc", json: #"{"_rev":"\#(rev2)","_attachments":{"gone.txt":{"stub":true}}}"#)
            #expect(missing.status == .preconditionFailed && missing["error"] == "missing_stub")
            // Standalone PUT and DELETE make new revisions.
            let added = try await c.execute(uri: "/db/doc/dir/raw.bin?rev=\(rev2)", method: .put, headers: [.contentType: "application/octet-stream"],
                                            body: ByteBuffer(bytes: [0, 1, 2, 255]))
            #expect(added.status == .created)
            let rev3 = try #require(added["rev"]?.stringValue)
            #expect(Array(try await c.send(.get, "/db/doc/dir/raw.bin").body.readableBytesView) == [0, 1, 2, 255])
            let atts = try #require(try await c.send(.get, "/db/doc")["_attachments"]?.objectValue)
            #expect(Set(atts.keys) == ["note.txt", "dir/raw.bin"])
            #expect(atts["dir/raw.bin"]?.objectValue?["revpos"] == 3)
            #expect(try await c.send(.delete, "/db/doc/note.txt?rev=\(rev2)").status == .conflict)
            #expect(try await c.send(.delete, "/db/doc/note.txt?rev=\(rev3)").status == .ok)
            #expect(try await c.send(.get, "/db/doc/note.txt").status == .notFound)
            // atts_since: only attachments newer than the revisions the client has come inline.
            let since = try await c.send(.get, #"/db/doc?revs=true&atts_since=["\#(rev2)"]"#)
            #expect(since["_attachments"]?.objectValue?["dir/raw.bin"]?.objectValue?["data"] == "AAEC/w==")
            // HEAD: GET's headers, no body.
            let head = try await c.send(.head, "/db/doc/dir/raw.bin")
            #expect(head.status == .ok && head.body.readableBytes == 0)
            #expect(try await c.send(.head, "/db").body.readableBytes == 0)
            // The changes feed's documents carry stubs, or the data with attachments=true.
            let feed = try await c.send(.get, "/db/_changes?include_docs=true&attachments=true")
            let fed = feed["results"]?.arrayValue?.first { $0.objectValue?["id"] == "doc" }?.objectValue?["doc"]?.objectValue
            #expect(fed?["_attachments"]?.objectValue?["dir/raw.bin"]?.objectValue?["data"] == "AAEC/w==")
            // An attachment on a new document by a standalone PUT.
            #expect(try await c.send(.put, "/db/fresh/a.txt", json: "{}").status == .created)
        }
    }

    @Test func badAttachmentsAreRefusedAndStoreNothing() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            #expect(try await c.send(.put, "/db/x", json: #"{"_attachments":{"a":{"data":"not base64!!"}}}"#).status == .badRequest)
            #expect(try await c.send(.put, "/db/x", json: #"{"_attachments":{"a":{"data":"aGk=","length":9}}}"#).status == .badRequest)
            #expect(try await c.send(.put, "/db/x", json: #"{"_attachments":{"a":{"data":"aGk=","digest":"md5-AAAAAAAAAAAAAAAAAAAAAA=="}}}"#).status == .badRequest)
            #expect(try await c.send(.put, "/db/x", json: #"{"_attachments":{"_a":{"data":"aGk="}}}"#).status == .badRequest)
            #expect(try await c.send(.put, "/db/x", json: #"{"_attachments":[1]}"#).status == .badRequest)
            #expect(try await c.send(.put, "/db/x", json: #"{"_attachments":{"a":{"content_type":"text/plain"}}}"#).status == .badRequest)
            // A truncated multipart body.
            let truncated = try await c.execute(uri: "/db/x", method: .put, headers: [.contentType: "multipart/related; boundary=\"abc\""],
                                                body: ByteBuffer(string: "--abc\r\nContent-Type: application/json\r\n\r\n{\"_attachments\":{\"a\":{\"follows\":true}}}\r\n--abc\r\n\r\nhel"))
            #expect(truncated.status == .badRequest, "\(truncated.text)")
            #expect(try await c.send(.get, "/db")["doc_count"] == 0)
        }
    }

    /// What CouchDB's replicator does for a document with attachments: a multipart/related PUT
    /// with new_edits=false, then reading it back as a replicator from this server would.
    @Test func aReplicatorsMultipartUpload() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let doc = #"{"_id":"m","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":1,"_attachments":{"two.txt":{"content_type":"text/plain","follows":true,"length":3,"revpos":2},"one.txt":{"content_type":"text/plain","follows":true,"length":12,"revpos":1,"digest":"\#(Self.helloMD5)"}}}"#
            let body = "--XyZ\r\nContent-Type: application/json\r\n\r\n\(doc)\r\n--XyZ\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\ntwo\r\n--XyZ\r\nContent-Disposition: attachment; filename=\"one.txt\"\r\nContent-Type: text/plain\r\n\r\nhello, world\r\n--XyZ--"
            let put = try await c.execute(uri: "/db/m?new_edits=false", method: .put,
                                          headers: [.contentType: "multipart/related; boundary=\"XyZ\""], body: ByteBuffer(string: body))
            #expect(put.status == .created, "\(put.text)")
            #expect(try await c.send(.get, "/db/m/one.txt").text == "hello, world")
            #expect(try await c.send(.get, "/db/m/two.txt").text == "two")
            let atts = try #require(try await c.send(.get, "/db/m")["_attachments"]?.objectValue)
            #expect(atts["one.txt"]?.objectValue?["revpos"] == 1 && atts["two.txt"]?.objectValue?["revpos"] == 2)
            // A later revision sent with stubs only (the target has the content already).
            let stubs = #"{"new_edits":false,"docs":[{"_id":"m","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"v":2,"_attachments":{"one.txt":{"stub":true,"revpos":1},"two.txt":{"stub":true,"revpos":2}}}]}"#
            #expect(try await c.send(.post, "/db/_bulk_docs", json: stubs).status == .created)
            #expect(try await c.send(.get, "/db/m")["_rev"] == "3-c")
            #expect(try await c.send(.get, "/db/m/two.txt?rev=3-c").text == "two")
            // Read by a replicator: bulk_get with attachments, and open_revs as multipart/mixed.
            let bulk = try await c.send(.post, "/db/_bulk_get?revs=true&attachments=true", json: #"{"docs":[{"id":"m","rev":"3-c","atts_since":["2-b"]}]}"#)
            let got = try #require(bulk["results"]?.arrayValue?.first?.objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue)
            #expect(got["_attachments"]?.objectValue?["one.txt"]?.objectValue?["stub"] == true)
            let all = try await c.send(.post, "/db/_bulk_get?attachments=true", json: #"{"docs":[{"id":"m"}]}"#)
            let data = all["results"]?.arrayValue?.first?.objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_attachments"]?.objectValue?["two.txt"]?.objectValue?["data"]
            #expect(data == "dHdv")
            let mixed = try await c.send(.get, #"/db/m?revs=true&open_revs=["3-c"]&attachments=true"#, headers: [.accept: "multipart/mixed"])
            #expect(mixed.text.contains("\"follows\":true") && mixed.text.contains("\r\n\r\nhello, world\r\n"))
        }
    }
}
