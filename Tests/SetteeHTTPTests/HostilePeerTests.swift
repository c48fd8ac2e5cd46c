import Foundation
import Hummingbird
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
import Synchronization
import Testing

/// A Settee app replicating with a hostile or broken peer does not crash: a real server on a
/// loopback socket that serves revisions no honest peer would (generations past 2^64 − 1's
/// neighbourhood, histories that do not count down, bodies nested too deep), and the pull reports
/// each such revision as that document's failure while the rest arrive.
@Suite struct HostilePeerTests {
    /// The peer: CouchDB's replication endpoints, answering with `revisions` (id → JSON text of
    /// the `ok` document `_bulk_get` sends).
    static func hostileRouter(_ docs: [(id: String, rev: String, json: String)]) -> Hummingbird.Router<BasicRequestContext> {
        let router = Hummingbird.Router()
        router.get("/") { _, _ in Self.json(#"{"couchdb": "Welcome", "version": "3.4.3"}"#) }
        router.get("/db") { _, _ in Self.json(#"{"db_name": "db", "update_seq": \#(docs.count), "instance_start_time": "0"}"#) }
        router.get("/db/_local/**") { _, _ in Self.json(#"{"error": "not_found", "reason": "missing"}"#, .notFound) }
        router.put("/db/_local/**") { _, _ in Self.json(#"{"ok": true, "id": "_local/x", "rev": "0-1"}"#, .created) }
        router.get("/db/_changes") { request, _ in
            let since = Int(request.uri.queryParameters["since"].map(String.init) ?? "0") ?? 0
            let rows = docs.enumerated().filter { $0.offset + 1 > since }.map { i, d in
                #"{"seq": \#(i + 1), "id": "\#(d.id)", "changes": [{"rev": "\#(d.rev)"}]}"#
            }
            return Self.json(#"{"results": [\#(rows.joined(separator: ","))], "last_seq": \#(docs.count)}"#)
        }
        router.post("/db/_bulk_get") { _, _ in
            let results = docs.map { d in #"{"id": "\#(d.id)", "docs": [{"ok": \#(d.json)}]}"# }
            return Self.json(#"{"results": [\#(results.joined(separator: ","))]}"#)
        }
        // A document alone (open_revs), as JSON.
        router.get("/db/:id") { _, context in
            let id = context.parameters.get("id") ?? ""
            guard let d = docs.first(where: { $0.id == id }) else { return Self.json(#"{"error": "not_found", "reason": "missing"}"#, .notFound) }
            return Self.json(#"[{"ok": \#(d.json)}]"#)
        }
        router.post("/db/_ensure_full_commit") { _, _ in Self.json(#"{"ok": true, "instance_start_time": "0"}"#, .created) }
        return router
    }

    static func json(_ text: String, _ status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    @Test func aPullFromAHostilePeerReportsWhatItRefusesAndKeepsTheRest() async throws {
        let deep = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        let docs: [(id: String, rev: String, json: String)] = [
            ("huge", "18446744073709551615-a", #"{"_id": "huge", "_rev": "18446744073709551615-a", "_revisions": {"start": 18446744073709551615, "ids": ["a"]}}"#),
            ("over", "9007199254740992-a", #"{"_id": "over", "_rev": "9007199254740992-a", "_revisions": {"start": 9007199254740992, "ids": ["a"]}}"#),
            ("gaps", "5-e", #"{"_id": "gaps", "_rev": "5-e", "_revisions": {"start": 5, "ids": ["e", "d", "c", "b", "a", "z", "y"]}}"#),
            ("deep", "1-a", #"{"_id": "deep", "_rev": "1-a", "x": \#(deep)}"#),
            ("fine", "2-b", #"{"_id": "fine", "_rev": "2-b", "_revisions": {"start": 2, "ids": ["b", "a"]}, "v": 1}"#),
            ("top", "9007199254740991-a", #"{"_id": "top", "_rev": "9007199254740991-a", "_revisions": {"start": 9007199254740991, "ids": ["a"]}}"#),
        ]
        let port = Mutex<Int?>(nil)
        let running = AsyncStream.makeStream(of: Void.self)
        let app = Application(router: Self.hostileRouter(docs), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in
                                  port.withLock { $0 = channel.localAddress?.port }
                                  running.continuation.yield()
                              })
        let server = Task { try await app.runService() }
        defer { server.cancel() }
        var started = running.stream.makeAsyncIterator()
        _ = await started.next()
        let listening = try #require(port.withLock { $0 })
        let url = try #require(URL(string: "http://127.0.0.1:\(listening)/db"))
        let scratch = try Scratch()
        let db = try scratch.open("device")
        let recorder = Recorder()
        var config = ReplicatorConfiguration(database: db, target: URLEndpoint(url: url))
        config.replicatorType = .pull
        config.logHandler = { @Sendable _, _ in }
        let replicator = Replicator(config: config)
        recorder.attach(replicator)
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error == nil, "\(String(describing: status.error))")
        #expect(try await db.document(withID: "fine")?.int(forKey: "v") == 1)
        #expect(try await db.document(withID: "top")?.revisionID == "9007199254740991-a")
        for id in ["huge", "over", "gaps", "deep"] { #expect(try await db.revisionTree(withID: id) == nil, "\(id)") }
        #expect(await eventually { Set(recorder.documents.withLock { $0.filter { $0.error != nil }.map(\.id) }) == ["huge", "over", "gaps", "deep"] },
                "\(recorder.documents.withLock { $0 })")
    }
}
