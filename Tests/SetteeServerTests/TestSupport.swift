import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
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
