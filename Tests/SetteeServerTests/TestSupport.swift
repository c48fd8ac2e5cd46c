import Foundation
import HTTPTypes
import Hummingbird
// For `TestResponse`'s memberwise initializer: the live client below is ours.
@testable import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// A server over walrus databases (in memory, removed at close) with both ports on loopback.
func makeServer(guest: Bool = true, users: [String: ServerConfiguration.UserConfig] = [:],
                databases: [String] = ["db"]) throws -> SetteeServer {
    var config = ServerConfiguration()
    config.interface = "127.0.0.1:0"
    config.adminInterface = "127.0.0.1:0"
    config.log = []
    for name in databases {
        var db = ServerConfiguration.DatabaseConfig(server: "walrus:")
        db.users = users
        db.users["GUEST"] = .init(disabled: !guest, adminChannels: ["*"])
        config.databases[name] = db
    }
    return try SetteeServer(configuration: config)
}

/// How a test reaches a server: through the router in process, or over a loopback socket.
enum ClientSetup: Sendable {
    /// Requests go to the responder directly (no socket).
    case router
    /// A real listener on loopback and a client connected to it.
    case live
}

/// How long a live test client waits for a response before failing. Long on purpose: the suite
/// runs its tests in parallel on a two-thread cooperative pool, and a server answering a few
/// seconds late under that load is not the defect a test looks for (a hang still fails, once
/// the suite's own guard gives up).
let liveClientTimeout: Duration = .seconds(600)

extension SetteeServer {
    /// Runs `body` against the public (or admin) port, through Hummingbird's test client.
    func withClient<R: Sendable>(admin: Bool = false, _ setup: ClientSetup = .router,
                                 _ body: @Sendable (any TestClientProtocol) async throws -> R) async throws -> R {
        switch setup {
        case .router:
            if admin {
                return try await adminApplication(address: "127.0.0.1:0").test(.router, body)
            }
            return try await publicApplication().test(.router, body)
        case .live:
            let ports = AsyncStream.makeStream(of: Int.self)
            let onRunning: @Sendable (Int) async -> Void = { ports.continuation.yield($0) }
            if admin {
                return try await runLive(adminApplication(address: "127.0.0.1:0", onRunning: onRunning), ports.stream, body)
            }
            return try await runLive(publicApplication(onRunning: onRunning), ports.stream, body)
        }
    }
}

/// Runs `application` on loopback while `body` talks to it through a client whose read timeout
/// is `liveClientTimeout` (Hummingbird's own live setup fixes it at 20 seconds).
private func runLive<App: ApplicationProtocol, R: Sendable>(
    _ application: App, _ ports: AsyncStream<Int>,
    _ body: @Sendable (any TestClientProtocol) async throws -> R
) async throws -> R {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await application.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: liveClientTimeout))
        client.connect()
        let outcome: Swift.Result<R, any Error>
        do {
            outcome = .success(try await body(LiveClient(client: client)))
        } catch {
            outcome = .failure(error)
        }
        try? await client.shutdown()
        group.cancelAll()
        return try outcome.get()
    }
}

/// A client of a live server on one keep-alive connection, as Hummingbird's live setup has it.
struct LiveClient: TestClientProtocol {
    let client: TestClient

    func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestResponse {
        var headers = headers
        headers[.connection] = "keep-alive"
        let response = try await client.execute(
            TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body))
        return TestResponse(head: response.head, body: response.body ?? ByteBuffer(), trailerHeaders: response.trailerHeaders)
    }

    var port: Int? { client.port }
}

extension TestClientProtocol {
    /// Sends a request with an optional JSON body; returns the response.
    @discardableResult
    func send(_ method: HTTPRequest.Method, _ uri: String, json: String? = nil, headers: HTTPFields = [:]) async throws -> TestResponse {
        var fields = headers
        if json != nil && fields[.contentType] == nil { fields[.contentType] = "application/json" }
        return try await execute(uri: uri, method: method, headers: fields, body: json.map { ByteBuffer(string: $0) })
    }
}

extension TestResponse {
    /// The body as JSON.
    var json: JSONValue {
        get throws { try JSONValue(parsing: Array(body.readableBytesView)) }
    }
    var text: String { String(buffer: body) }
    /// A member of an object body.
    subscript(key: String) -> JSONValue? {
        (try? json)?.objectValue?[key]
    }
}

/// `Authorization: Basic …`.
func basic(_ name: String, _ password: String) -> HTTPFields {
    [.authorization: "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()]
}

/// A server from a JSON configuration text (back-tick strings allowed), both ports on loopback.
func channelServer(_ json: String) throws -> SetteeServer {
    var config = try ServerConfiguration(json: json)
    config.interface = "127.0.0.1:0"
    config.adminInterface = "127.0.0.1:0"
    config.log = []
    return try SetteeServer(configuration: config)
}

/// Runs `body` with a client of the public port and one of the admin port, both real servers on
/// loopback sockets.
func withPorts<R: Sendable>(_ server: SetteeServer,
                   _ body: @Sendable (_ pub: any TestClientProtocol, _ admin: any TestClientProtocol) async throws -> R) async throws -> R {
    try await server.withClient(.live) { pub async throws in
        try await server.withClient(admin: true, .live) { admin async throws in
            try await body(pub, admin)
        }
    }
}

/// Percent-encodes a query parameter's value (JSON in a URL).
func q(_ s: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
}

extension TestResponse {
    /// The IDs of a `_changes` or `_all_docs` answer's rows.
    var rowIDs: [String] {
        ((self["results"] ?? self["rows"])?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
    }
    var rows: [JSONValue] { (self["results"] ?? self["rows"])?.arrayValue ?? [] }
}

/// Writes a document through the admin port; returns its new revision.
@discardableResult
func put(_ c: any TestClientProtocol, _ id: String, _ json: String, headers: HTTPFields = [:],
         sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
    let r = try await c.send(.put, "/db/\(id)", json: json, headers: headers)
    #expect(r.status == .created, "PUT \(id): \(r.status) \(r.text)", sourceLocation: sourceLocation)
    return r["rev"]?.stringValue ?? ""
}

/// The current revision, through the admin port.
func currentRev(_ admin: any TestClientProtocol, _ id: String) async throws -> String {
    try #require(try await admin.send(.get, "/db/\(id)")["_rev"]?.stringValue)
}

/// `h` with one more header.
func adding(_ h: HTTPFields, _ name: HTTPField.Name, _ value: String) -> HTTPFields {
    var out = h
    out[name] = value
    return out
}

/// Runs `server` (both its listeners, on the ports the configuration names or the system picks)
/// for the duration of `body`, then stops it.
func whileRunning<R: Sendable>(_ server: SetteeServer, _ body: @Sendable (ListeningPorts) async throws -> R) async throws -> R {
    let ports = AsyncStream.makeStream(of: ListeningPorts.self)
    let task = Task { try await server.run { ports.continuation.yield($0) } }
    var iterator = ports.stream.makeAsyncIterator()
    guard let listening = await iterator.next() else { throw CancellationError() }
    do {
        let result = try await body(listening)
        task.cancel()
        _ = try? await task.value
        return result
    } catch {
        task.cancel()
        _ = try? await task.value
        throw error
    }
}

/// One request to `port` on loopback with the `Host` (authority) given, through a client of its
/// own.
func rawRequest(port: Int, _ method: HTTPRequest.Method, _ uri: String, authority: String?, headers: HTTPFields = [:],
                body: String? = nil) async throws -> TestClient.Response {
    try await TestClient.withClient(host: "127.0.0.1", port: port, configuration: .init(timeout: liveClientTimeout)) { client in
        try await client.execute(TestClient.Request(uri, method: method, authority: authority, headers: headers,
                                                    body: body.map { ByteBuffer(string: $0) }))
    }
}

/// A TCP socket connected to `port` on loopback, reads timing out after `timeout` seconds; the
/// caller closes it. For requests no HTTP client would send.
func loopbackSocket(port: Int, timeout: Int = 3) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        throw POSIXError(.ECONNREFUSED)
    }
    var limit = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

/// Runs the whole server (as `settee serve` does, `_replicator` included) while `body` talks
/// to its ports.
func running(_ server: SetteeServer,
             _ body: @Sendable (_ pub: any TestClientProtocol, _ admin: any TestClientProtocol) async throws -> Void) async throws {
    try await whileRunning(server) { ports in
        let pub = TestClient(host: "127.0.0.1", port: ports.publicPort, configuration: .init(timeout: liveClientTimeout))
        let admin = TestClient(host: "127.0.0.1", port: try #require(ports.adminPort), configuration: .init(timeout: liveClientTimeout))
        pub.connect()
        admin.connect()
        do {
            try await body(LiveClient(client: pub), LiveClient(client: admin))
        } catch {
            try? await pub.shutdown()
            try? await admin.shutdown()
            throw error
        }
        try? await pub.shutdown()
        try? await admin.shutdown()
    }
}

/// The replication document `id` once its state is `wanted`.
func replicationState(_ admin: any TestClientProtocol, _ id: String, until wanted: String) async throws -> JSONValue {
    var last: JSONValue = .null
    for _ in 0 ..< 1200 {
        last = try await admin.send(.get, "/_replicator/\(id)").json
        if last["_replication_state"]?.stringValue == wanted { return last }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("\(id) never reached \(wanted): \(last)")
    return last
}

/// Waits for `condition`, failing the test if it never holds.
func eventually(_ condition: @Sendable () async throws -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    for _ in 0 ..< 1200 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("the condition never held", sourceLocation: sourceLocation)
}

/// One database in memory with GUEST disabled, `alice` (password `pw`) reading channel `red`,
/// and a sync function routing each document to the channel its `color` names: the setting of
/// the suites that check what a user may read.
let redChannelConfig = """
        {"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true},
                    "alice": {"password": "pw", "admin_channels": ["red"]}},
          "sync": `function(doc) { channel(doc.color); }`}}}
        """
