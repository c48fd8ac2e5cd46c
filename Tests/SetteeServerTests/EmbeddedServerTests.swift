import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// An app serving its own open database (Couchbase Lite's URLEndpointListener): port 0 picks a
/// free port, reported when the server runs; stopping the server leaves the database open.
@Suite struct EmbeddedServerTests {
    @Test func anAppServesItsOpenDatabaseOnAPortTheSystemPicks() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("settee-embedded-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = try Database(name: "notes", config: DatabaseConfiguration(directory: dir))
        defer { try? db.close() }
        try await db.saveDocument(MutableDocument(id: "from-app", data: ["v": 1]))
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = nil
        config.log = []
        let server = try SetteeServer(serving: db, as: "notes", configuration: config,
                                      users: ["GUEST": .init(disabled: false, adminChannels: ["*"])])
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let running = Task { try await server.run { ports.continuation.yield($0) } }
        var iterator = ports.stream.makeAsyncIterator()
        let listening = try #require(await iterator.next())
        #expect(listening.publicPort > 0 && listening.adminPort == nil)
        let client = TestClient(host: "127.0.0.1", port: listening.publicPort, configuration: .init(timeout: liveClientTimeout))
        client.connect()
        let got = try await client.execute(TestClient.Request("/notes/from-app", method: .get))
        #expect(got.status == .ok)
        let put = try await client.execute(TestClient.Request("/notes/from-peer", method: .put, headers: [.contentType: "application/json"],
                                                              body: .init(string: #"{"v":2}"#)))
        #expect(put.status == .created)
        try await client.shutdown()
        running.cancel()
        _ = try? await running.value
        // The app's database is still open, and holds what the peer wrote.
        #expect(try await db.document(withID: "from-peer")?.int(forKey: "v") == 2)
    }

    @Test func copyAndPurge() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let b64 = Data("att".utf8).base64EncodedString()
            try await c.send(.put, "/db/src", json: #"{"v":1,"_attachments":{"a.txt":{"content_type":"text/plain","data":"\#(b64)"}}}"#)
            let copy = try await c.execute(uri: "/db/src", method: HTTPRequest.Method("COPY")!, headers: [HTTPField.Name("Destination")!: "dst"])
            #expect(copy.status == .created)
            #expect(try await c.send(.get, "/db/dst")["v"] == 1)
            #expect(try await c.send(.get, "/db/dst/a.txt").text == "att")
            // Over an existing document it needs that document's rev.
            #expect(try await c.execute(uri: "/db/src", method: HTTPRequest.Method("COPY")!, headers: [HTTPField.Name("Destination")!: "dst"]).status == .conflict)
            #expect(try await c.execute(uri: "/db/src", method: HTTPRequest.Method("COPY")!).status == .badRequest)
            // Purge is the admin port's.
            #expect(try await c.send(.post, "/db/_purge", json: #"{"src":["1-x"]}"#).status == .forbidden)
        }
        try await server.withClient(admin: true) { a async throws in
            let rev = try #require(try await a.send(.get, "/db/src")["_rev"]?.stringValue)
            let purged = try await a.send(.post, "/db/_purge", json: #"{"src":["\#(rev)"],"nothing":["1-a"]}"#)
            #expect(purged.status == .created)
            #expect(purged["purged"]?.objectValue?["src"] == .array([.string(rev)]))
            #expect(try await a.send(.get, "/db/src").status == .notFound)
            #expect(try await a.send(.get, "/db/_changes")["results"]?.arrayValue?.count == 1)   // dst only
            #expect(try await a.send(.get, "/db/_revs_limit").json == 1000)
            #expect(try await a.send(.put, "/db/_revs_limit", json: "50")["ok"] == true)
            #expect(try await a.send(.get, "/db/_revs_limit").json == 50)
            for bad in ["0", "-1", "\"50\"", "1.5", "1000001"] {
                #expect(try await a.send(.put, "/db/_revs_limit", json: bad).status == .badRequest, "\(bad)")
            }
        }
    }
}

/// What a hostile or broken client cannot do to the server: stall a connection forever, send
/// headers without bound.
@Suite struct ConnectionLimitTests {
    /// A running server with `readTimeout`; its port, and the task to cancel.
    func start(readTimeout: Int) async throws -> (port: Int, running: Task<Void, any Error>) {
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = nil
        config.log = []
        config.serverReadTimeout = readTimeout
        var db = ServerConfiguration.DatabaseConfig(server: "walrus:")
        db.users["GUEST"] = .init(disabled: false, adminChannels: ["*"])
        config.databases["db"] = db
        let server = try SetteeServer(configuration: config)
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let running = Task { try await server.run { ports.continuation.yield($0) } }
        var iterator = ports.stream.makeAsyncIterator()
        return (try #require(await iterator.next()).publicPort, running)
    }

    @Test func aStalledRequestIsClosed() async throws {
        let (port, running) = try await start(readTimeout: 1)
        defer { running.cancel() }

        // Half a request line, then silence: the server closes the connection.
        let fd = try loopbackSocket(port: port, timeout: 10)
        defer { close(fd) }
        _ = "GET /db HT".withCString { send(fd, $0, 10, 0) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let started = Date()
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(n <= 0 || String(decoding: buffer[0 ..< n], as: UTF8.self).hasPrefix("HTTP/1.1 4"), "the stalled connection was answered or closed")
        #expect(Date().timeIntervalSince(started) < 8)
    }

    /// Headers far beyond any real client's: refused, and the server goes on serving. (Its own
    /// server, with the default read timeout: under a loaded machine a one-second timeout could
    /// close the follow-up connection before its request.)
    @Test func oversizedHeadersAreRefused() async throws {
        let (port, running) = try await start(readTimeout: 300)
        defer { running.cancel() }
        let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: liveClientTimeout))
        client.connect()
        let huge = try? await client.execute(TestClient.Request("/db", method: .get, headers: [HTTPField.Name("X-Big")!: String(repeating: "a", count: 200_000)]))
        #expect(huge == nil || huge!.status.code >= 400)
        try? await client.shutdown()
        let again = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: liveClientTimeout))
        again.connect()
        #expect(try await again.execute(TestClient.Request("/db", method: .get)).status == .ok)
        try await again.shutdown()
    }
}
