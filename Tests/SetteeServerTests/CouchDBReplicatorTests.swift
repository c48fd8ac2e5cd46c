import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// What a real CouchDB 3.4 replicator sends and expects, found by replicating with one: checkpoint
/// updates carrying `_revisions`, gzip-encoded attachment parts, attachment bodies in
/// `open_revs` multipart answers, and a cookie login for a user of several databases.
@Suite struct CouchDBReplicatorTests {
    /// gzip of "hello, world, hello, world" (26 bytes), as CouchDB stores and sends text.
    static let gzipped = "H4sIAAAAAAACA8tIzcnJ11Eozy/KSdFRyEDiAQDOuzyxGgAAAA=="
    static let gzippedMD5 = "md5-wtLbbcPaJk7A0OCgtqh6eA=="

    @Test func checkpointUpdatesWithRevisionsAreAccepted() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            #expect(try await c.send(.put, "/db/_local/rep", json: #"{"session_id":"a","history":[]}"#)["rev"] == "0-1")
            let second = try await c.send(.put, "/db/_local/rep", json: #"{"_rev":"0-1","_revisions":{"start":0,"ids":["1"]},"session_id":"b"}"#)
            #expect(second.status == .created && second["rev"] == "0-2", "\(second.text)")
            #expect(try await c.send(.get, "/db/_local/rep")["_revisions"] == nil)
        }
    }

    @Test func gzipEncodedAttachmentPartsAreDecoded() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let gz = try #require(Data(base64Encoded: Self.gzipped))
            let doc = #"{"_id":"z","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"t.txt":{"content_type":"text/plain","follows":true,"length":26,"encoding":"gzip","encoded_length":\#(gz.count),"digest":"\#(Self.gzippedMD5)","revpos":1}}}"#
            var body = Data("--B\r\nContent-Type: application/json\r\n\r\n\(doc)\r\n--B\r\nContent-Disposition: attachment; filename=\"t.txt\"\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n\r\n".utf8)
            body.append(gz)
            body.append(Data("\r\n--B--".utf8))
            let put = try await c.execute(uri: "/db/z?new_edits=false", method: .put,
                                          headers: [.contentType: "multipart/related; boundary=\"B\""], body: ByteBuffer(bytes: body))
            #expect(put.status == .created, "\(put.text)")
            #expect(try await c.send(.get, "/db/z/t.txt").text == "hello, world, hello, world")
            let stub = try await c.send(.get, "/db/z")["_attachments"]?.objectValue?["t.txt"]?.objectValue
            #expect(stub?["length"] == 26)
            // Damaged gzip is refused.
            var bad = gz
            bad[bad.count / 2] ^= 0xFF
            let inline = #"{"_attachments":{"x":{"data":"\#(bad.base64EncodedString())","encoding":"gzip"}}}"#
            #expect(try await c.send(.put, "/db/bad", json: inline).status == .badRequest)
            #expect(try await c.send(.put, "/db/bad2", json: #"{"_attachments":{"x":{"data":"aGk=","encoding":"br"}}}"#).status == .unsupportedMediaType)
        }
    }

    @Test func openRevsAsMultipartCarriesAttachmentBodies() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let put = try await c.send(.put, "/db/d", json: #"{"v":1,"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC/w=="},"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#)
            let rev = try #require(put["rev"]?.stringValue)
            let answer = try await c.send(.get, #"/db/d?revs=true&open_revs=["\#(rev)"]&latest=true"#, headers: [.accept: "multipart/mixed"])
            let text = String(decoding: answer.body.readableBytesView, as: UTF8.self)
            #expect(text.contains("Content-Type: multipart/related; boundary="))
            #expect(text.contains(#""follows":true"#) && !text.contains(#""stub":true"#))
            // The bodies follow in the order the document lists the names.
            let a = try #require(text.range(of: "filename=\"a.txt\""))
            let b = try #require(text.range(of: "filename=\"b.bin\""))
            #expect(a.lowerBound < b.lowerBound)
            #expect(Data(answer.body.readableBytesView).range(of: Data([0, 1, 2, 255])) != nil)
            // With atts_since naming this revision, nothing follows: stubs only.
            let since = try await c.send(.get, #"/db/d?revs=true&open_revs=["\#(rev)"]&atts_since=["\#(rev)"]"#, headers: [.accept: "multipart/mixed"])
            #expect(since.text.contains(#""stub":true"#) && !since.text.contains(#""follows":true"#))
        }
    }

    @Test func aCookieLoginWorksInEveryDatabaseOfTheUser() async throws {
        let server = try makeServer(guest: false, users: ["alice": .init(password: "pw")], databases: ["one", "two"])
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let login = try await c.execute(uri: "/_session", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                            body: ByteBuffer(string: "name=alice&password=pw"))
            let cookie = try #require(login.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            #expect(try await c.send(.get, "/one/", headers: [.cookie: cookie]).status == .ok)
            #expect(try await c.send(.get, "/two/", headers: [.cookie: cookie]).status == .ok)
        }
    }
}
