import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
@_spi(Fuzzing) import SetteeServer
import Synchronization

/// The sync server's request handling as a fuzz target: each input is one HTTP request, answered
/// in this process by a server over walrus databases (no socket), its answer read to the end.
/// Any error answer is fine; a crash (a Swift trap), a hang or a runaway allocation is a finding.
///
/// An input is `flags`, then `METHOD \0 TARGET \0 HEADERS \0 BODY`:
/// - `flags` (one byte): bit 0 sends it to the admin port, else to the public one (as GUEST, who
///   reads only channel `red` of `db`, all of `open`);
/// - `TARGET`: the path and query (`/db/doc?revs=true`);
/// - `HEADERS`: `Name: value` lines separated by `\n`;
/// - `BODY`: the rest, bytes as they are.
///
/// What could make the process wait on the outside world is left out: `POST /_replicate` is not
/// sent, and `feed=` becomes a normal feed (a continuous one never ends). Every 500 inputs, and
/// whenever an input deleted `db` or made many databases, the server starts again from its seed
/// documents, so memory stays bounded.
package enum ServerFuzzing {
    /// A request decoded from fuzz bytes.
    package struct FuzzRequest {
        package var admin: Bool
        package var method: HTTPRequest.Method
        package var target: String
        package var headers: HTTPFields
        package var body: [UInt8]
    }

    /// Decodes an input; nil for one that is left out (see the type's documentation).
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> FuzzRequest? {
        guard let flags = bytes.first else { return nil }
        var fields: [ArraySlice<UInt8>] = []
        var rest = ArraySlice(bytes.dropFirst())
        while fields.count < 3, let zero = rest.firstIndex(of: 0) {
            fields.append(rest[rest.startIndex ..< zero])
            rest = rest[(zero + 1)...]
        }
        fields.append(rest)
        let methodText = fields.count > 1 ? String(decoding: fields[0], as: UTF8.self) : "GET"
        let method = HTTPRequest.Method(methodText) ?? .get
        var target = String(decoding: fields.count > 1 ? fields[1] : fields[0], as: UTF8.self)
        if !target.hasPrefix("/") { target = "/" + target }
        // Only printable ASCII in a request line (an HTTP parser would refuse the rest first).
        target = String(target.unicodeScalars.map { $0.isASCII && $0.value > 0x20 && $0.value < 0x7F ? Character($0) : "_" })
        if target.hasPrefix("/_replicate") { return nil }
        target = target.replacingOccurrences(of: "feed=", with: "xfeed=")
        var headers = HTTPFields()
        if fields.count > 2 {
            for line in String(decoding: fields[2], as: UTF8.self).split(separator: "\n") {
                guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon]).trimmingCharacters(in: .whitespaces)) else { continue }
                headers.append(HTTPField(name: name, value: String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
            }
        }
        let body = fields.count > 3 ? Array(fields[3]) : []
        return FuzzRequest(admin: flags & 1 == 1, method: method, target: target, headers: headers, body: body)
    }

    /// libFuzzer's entry point: one input answered.
    package static func oneInput(_ bytes: UnsafeRawBufferPointer) {
        guard let request = decode(bytes) else { return }
        let server = Harness.shared.server()
        _ = answer(request, server)
        Harness.shared.afterInput()
    }

    /// The status of `request` as `server` answers it, its body read to the end (or past 8 MiB).
    @discardableResult
    package static func answer(_ r: FuzzRequest, _ server: SetteeServer) -> Int {
        let done = DispatchSemaphore(value: 0)
        let status = Mutex(0)
        var headers = r.headers
        headers[.contentLength] = String(r.body.count)
        let request = Request(head: HTTPRequest(method: r.method, scheme: "http", authority: "127.0.0.1", path: r.target, headerFields: headers),
                              body: RequestBody(buffer: ByteBuffer(bytes: r.body)))
        let admin = r.admin
        Task {
            // One channel for every request: each testing channel keeps its pipeline until closed.
            let context = ServerRequestContext(source: .init(channel: Harness.channel, logger: Harness.logger))
            do {
                let response = try await server.respond(to: request, context: context, admin: admin)
                status.withLock { $0 = Int(response.status.code) }
                try? await response.body.write(Collector())
            } catch {
                status.withLock { $0 = -1 }
            }
            done.signal()
        }
        done.wait()
        return status.withLock { $0 }
    }

    /// Takes a response body, up to 8 MiB (past it the answer is cut: nothing needs more).
    struct Collector: ResponseBodyWriter {
        var count = 0
        mutating func write(_ buffer: ByteBuffer) async throws {
            count += buffer.readableBytes
            if count > 8 << 20 { throw CancellationError() }
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    /// The server inputs are answered by, made again from time to time.
    final class Harness: @unchecked Sendable {
        // @unchecked: used by the fuzzing thread only (libFuzzer calls one input at a time).
        static let shared = Harness()
        static let channel = NIOAsyncTestingChannel()
        static let logger: Logger = {
            var l = Logger(label: "settee.server-fuzz")
            l.logLevel = .critical
            return l
        }()

        private var current: SetteeServer?
        private var inputs = 0

        func server() -> SetteeServer {
            if let current { return current }
            let made = ServerFuzzing.makeServer()
            current = made
            return made
        }

        func afterInput() {
            inputs += 1
            guard let s = current else { return }
            if inputs % 500 == 0 || s.databaseNames.count > 6 || !s.databaseNames.contains("db") {
                try? s.close()
                current = nil
            }
        }
    }

    /// A server over two walrus databases with the seed documents: `db` (GUEST reads channel
    /// `red`; documents in red and blue, with attachments, a conflict, a deep one, a local one,
    /// a design document) and `open` (GUEST reads everything).
    package static func makeServer() -> SetteeServer {
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        var db = ServerConfiguration.DatabaseConfig(server: "walrus:")
        db.users["GUEST"] = .init(disabled: false, adminChannels: ["red"])
        config.databases["db"] = db
        var open = ServerConfiguration.DatabaseConfig(server: "walrus:")
        open.users["GUEST"] = .init(disabled: false, adminChannels: ["*"])
        config.databases["open"] = open
        let server: SetteeServer
        do {
            server = try SetteeServer(configuration: config, logger: Harness.logger)
        } catch {
            fatalError("the fuzz target's server does not start: \(error)")
        }
        for request in seedRequests where request.admin {
            answer(request, server)
        }
        return server
    }

    /// The requests that make the seed documents, and what the seed corpus starts from.
    package static let seedRequests: [FuzzRequest] = {
        let json: HTTPFields = [.contentType: "application/json"]
        func req(_ admin: Bool, _ method: HTTPRequest.Method, _ target: String, _ headers: HTTPFields = [:], _ body: String = "") -> FuzzRequest {
            FuzzRequest(admin: admin, method: method, target: target, headers: headers, body: Array(body.utf8))
        }
        let hello = Data("hello".utf8).base64EncodedString()
        let deep = String(repeating: "[", count: 60) + "1" + String(repeating: "]", count: 60)
        let multipart = "--B\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"mp\",\"_rev\":\"2-b\",\"_revisions\":{\"start\":2,\"ids\":[\"b\",\"a\"]},\"_attachments\":{\"t.txt\":{\"content_type\":\"text/plain\",\"follows\":true,\"length\":3}}}\r\n--B\r\nContent-Disposition: attachment; filename=\"t.txt\"\r\n\r\nabc\r\n--B--"
        return [
            req(true, .put, "/db/red1", json, #"{"channels": ["red"], "n": 1, "_attachments": {"a.txt": {"content_type": "text/plain", "data": "\#(hello)"}}}"#),
            req(true, .put, "/db/blue1", json, #"{"channels": ["blue"], "pin": 4711}"#),
            req(true, .post, "/db/_bulk_docs", json, #"{"new_edits": false, "docs": [{"_id": "red1", "_rev": "2-x", "_revisions": {"start": 2, "ids": ["x", "y"]}, "channels": ["red", "blue"]}, {"_id": "c", "_rev": "3-c", "_revisions": {"start": 3, "ids": ["c", "b", "a"]}, "channels": ["red"]}, {"_id": "c", "_rev": "2-z", "_revisions": {"start": 2, "ids": ["z", "a"]}, "channels": ["blue"]}]}"#),
            req(true, .put, "/db/deep", json, #"{"channels": ["red"], "d": \#(deep)}"#),
            req(true, .put, "/db/_local/cp", json, #"{"seq": 3}"#),
            req(true, .put, "/db/_design/app", json, #"{"views": {}}"#),
            req(true, .put, "/db/mp?new_edits=false", [.contentType: "multipart/related; boundary=B"], multipart),
            req(true, .put, "/open/o1", json, #"{"x": [1, 2, {"y": null}]}"#),
            req(false, .get, "/db/red1?revs=true&open_revs=all&attachments=true", [.accept: "multipart/mixed"]),
            req(false, .get, "/db/c?conflicts=true&meta=true&revs_info=true"),
            req(false, .post, "/db/_bulk_get?revs=true&attachments=true", json, #"{"docs": [{"id": "red1", "atts_since": ["1-a"]}, {"id": "c", "rev": "3-c"}, {"id": "blue1"}]}"#),
            req(false, .post, "/db/_revs_diff", json, #"{"red1": ["2-x", "3-q"], "blue1": ["1-a"], "c": ["2-z", "9007199254740991-m"]}"#),
            req(false, .get, "/db/_changes?style=all_docs&include_docs=true&conflicts=true&limit=2&since=1"),
            req(false, .post, "/db/_changes?filter=_doc_ids", json, #"{"doc_ids": ["red1", "c"]}"#),
            req(false, .get, "/db/_all_docs?include_docs=true&conflicts=true&startkey=%22a%22&endkey=%22z%22&inclusive_end=false&limit=9223372036854775807"),
            req(false, .post, "/db/_all_docs", json, #"{"keys": ["red1", "blue1", "nope"]}"#),
            req(false, .get, "/db/red1/a.txt", [.range: "bytes=1-3"]),
            req(false, .put, "/db/new?batch=ok", json, #"{"channels": ["red"], "_attachments": {"b.bin": {"content_type": "application/octet-stream", "data": "AAEC"}}}"#),
            req(false, .post, "/db/_bulk_docs", json, #"{"new_edits": false, "docs": [{"_id": "g", "_rev": "18446744073709551615-a", "_revisions": {"start": 18446744073709551615, "ids": ["a"]}}]}"#),
            req(false, .put, "/db/mp2?new_edits=false", [.contentType: "multipart/related; boundary=B"], multipart.replacingOccurrences(of: "\"mp\"", with: "\"mp2\"")),
            req(false, .put, "/db/_local/mine", json, #"{"seq": 1}"#),
            req(false, .get, "/db"),
            req(false, .post, "/_session", [.contentType: "application/x-www-form-urlencoded"], "name=GUEST&password=x"),
            req(true, .put, "/db/_user/fuzz", json, #"{"password": "pw", "admin_channels": ["red"]}"#),
            req(true, .post, "/db/_purge", json, #"{"blue1": ["1-x"]}"#),
            req(true, .get, "/_admin/db/db/doc/c"),
            req(true, .get, "/_admin/db/db?prefix=r&after=a"),
            req(true, .delete, "/db?rev=1-a"),
            req(false, .init("COPY")!, "/db/red1", [.init("Destination")!: "copied?rev=1-a"]),
            req(true, .get, "/db/_changes?since=0:0&limit=1&descending=true"),
        ]
    }()

    /// Writes the seed corpus: each seed request as an input.
    package static func writeSeedCorpus(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (i, r) in seedRequests.enumerated() {
            try Data(encode(r)).write(to: URL(fileURLWithPath: directory + "/seed-\(i)"))
        }
    }

    /// The input bytes that decode to `r`.
    package static func encode(_ r: FuzzRequest) -> [UInt8] {
        var out: [UInt8] = [r.admin ? 1 : 0]
        out += Array(r.method.rawValue.utf8) + [0]
        out += Array(r.target.utf8) + [0]
        out += Array(r.headers.map { "\($0.name.rawName): \($0.value)" }.joined(separator: "\n").utf8) + [0]
        out += r.body
        return out
    }
}
