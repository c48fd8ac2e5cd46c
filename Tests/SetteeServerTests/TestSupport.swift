import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) import Settee
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

extension SetteeServer {
    /// Runs `body` against the public (or admin) port, through Hummingbird's test client.
    func withClient<R: Sendable>(admin: Bool = false, _ setup: TestingSetup = .router,
                                 _ body: @Sendable (any TestClientProtocol) async throws -> R) async throws -> R {
        if admin {
            return try await adminApplication(address: "127.0.0.1:0").test(setup, body)
        }
        return try await publicApplication().test(setup, body)
    }
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
    try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
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
