import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// Session cookies (CouchDB's `/_session`, Sync Gateway's `/{db}/_session`) and the admin API for
/// users and roles, kept with the database.
@Suite struct SessionAndUserTests {
    static func cookie(_ r: TestResponse) -> String? {
        r.headers[.setCookie]?.split(separator: ";").first.map(String.init)
    }

    @Test func sessionCookiesLogInAndOut() async throws {
        let server = try makeServer(guest: false, users: ["pupshaw": .init(password: "frank", adminChannels: ["a"])])
        defer { try? server.close() }
        try await server.withClient { c async throws in
            // CouchDB's form login, as its replicator sends it.
            let login = try await c.send(.post, "/_session", json: nil, headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(login.status == .badRequest)
            let form = try await c.execute(uri: "/_session", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                           body: .init(string: "name=pupshaw&password=frank"))
            #expect(form.status == .ok)
            let couchCookie = try #require(Self.cookie(form))
            #expect(couchCookie.hasPrefix("AuthSession="))
            #expect(form.headers[.setCookie]?.contains("HttpOnly") == true)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.cookie: couchCookie]).status == .ok)
            #expect(try await c.send(.get, "/_session", headers: [.cookie: couchCookie])["userCtx"]?.objectValue?["name"] == "pupshaw")
            // Sync Gateway's JSON login on the database.
            let json = try await c.send(.post, "/db/_session", json: #"{"name":"pupshaw","password":"frank"}"#)
            let gatewayCookie = try #require(Self.cookie(json))
            #expect(gatewayCookie.hasPrefix("SyncGatewaySession="))
            // Sync Gateway's form: each channel with the sequence it was granted at.
            #expect(json["userCtx"]?.objectValue?["channels"] == ["!": 0, "a": 0])
            #expect(try await c.send(.put, "/db/doc", json: "{}", headers: [.cookie: gatewayCookie]).status == .created)
            // Wrong passwords and unknown users: 401, no cookie.
            let wrong = try await c.send(.post, "/db/_session", json: #"{"name":"pupshaw","password":"nope"}"#)
            #expect(wrong.status == .unauthorized && wrong.headers[.setCookie] == nil)
            #expect(try await c.send(.post, "/db/_session", json: #"{"name":"ghost","password":"frank"}"#).status == .unauthorized)
            // Logging out ends the session: the cookie no longer works.
            let out = try await c.send(.delete, "/db/_session", headers: [.cookie: gatewayCookie])
            #expect(out["ok"] == true && out.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.cookie: gatewayCookie]).status == .unauthorized)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.cookie: "AuthSession=forged"]).status == .unauthorized)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.cookie: couchCookie]).status == .ok)
        }
    }

    @Test func theAdminAPIManagesUsersAndRoles() async throws {
        let server = try makeServer(guest: false)
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            #expect(try await a.send(.put, "/db/_role/moderator", json: #"{"admin_channels":["m"]}"#).status == .created)
            #expect(try await a.send(.put, "/db/_user/alice", json: #"{"password":"pw","admin_channels":["x"],"admin_roles":["moderator"],"email":"a@example.com"}"#).status == .created)
            let alice = try await a.send(.get, "/db/_user/alice")
            #expect(alice["all_channels"] == ["!", "m", "x"])
            #expect(alice["email"] == "a@example.com")
            #expect(alice["password"] == nil && alice["password_hash"] == nil)
            #expect(try await a.send(.get, "/db/_user/").json == ["GUEST", "alice"])
            #expect(try await a.send(.get, "/db/_role/").json == ["moderator"])
            #expect(try await a.send(.post, "/db/_user/", json: #"{"name":"alice","password":"x"}"#).status == .conflict)
            #expect(try await a.send(.put, "/db/_user/bob", json: #"{"admin_channels":["x"]}"#).status == .badRequest)
            #expect(try await a.send(.put, "/db/_user/bob", json: #"{"password":"pw","chanels":["x"]}"#)["reason"] == "_user.bob.chanels: unknown key")
            #expect(try await a.send(.get, "/db/_user/nobody").status == .notFound)
        }
        try await server.withClient { c async throws in
            #expect(try await c.send(.get, "/db/_all_docs", headers: basic("alice", "pw")).status == .ok)
            // The public port has no admin API.
            #expect(try await c.send(.get, "/db/_user/alice", headers: basic("alice", "pw")).status == .forbidden)
        }
        try await server.withClient(admin: true) { a async throws in
            // An update without a password keeps the password.
            #expect(try await a.send(.put, "/db/_user/alice", json: #"{"admin_channels":["y"]}"#).status == .ok)
            #expect(try await a.send(.get, "/db/_user/alice")["admin_channels"] == ["y"])
            // GUEST is a user too.
            #expect(try await a.send(.put, "/db/_user/GUEST", json: #"{"disabled":false,"admin_channels":["*"]}"#).status == .ok)
        }
        try await server.withClient { c async throws in
            #expect(try await c.send(.get, "/db/_all_docs", headers: basic("alice", "pw")).status == .ok)
            #expect(try await c.send(.get, "/db/_all_docs").status == .ok)   // GUEST enabled at once
        }
        try await server.withClient(admin: true) { a async throws in
            #expect(try await a.send(.delete, "/db/_user/alice")["ok"] == true)
            #expect(try await a.send(.delete, "/db/_user/alice").status == .notFound)
        }
        try await server.withClient { c async throws in
            #expect(try await c.send(.get, "/db/_all_docs", headers: basic("alice", "pw")).status == .unauthorized)
            // The server's records are not served as local documents.
            #expect(try await c.send(.get, "/db/_local/settee.server%2Fprincipals").status == .forbidden)
        }
    }

    @Test func usersAndSessionsPersistWithTheDatabase() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("settee-server-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = ServerConfiguration()
        config.log = []
        var db = ServerConfiguration.DatabaseConfig(server: dir)
        db.users["GUEST"] = .init(disabled: true)
        config.databases["db"] = db
        let first = try SetteeServer(configuration: config)
        let cookie: String = try await first.withClient(admin: true) { a async throws in
            #expect(try await a.send(.put, "/db/_user/carol", json: #"{"password":"secret"}"#).status == .created)
            return ""
        } + (try await first.withClient { c async throws in
            let login = try await c.send(.post, "/db/_session", json: #"{"name":"carol","password":"secret"}"#)
            return try #require(Self.cookie(login))
        })
        try first.close()
        let second = try SetteeServer(configuration: config)
        defer { try? second.close() }
        try await second.withClient { c async throws in
            #expect(try await c.send(.get, "/db/_all_docs", headers: basic("carol", "secret")).status == .ok)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.cookie: cookie]).status == .ok)
            #expect(try await c.send(.get, "/db/_all_docs").status == .unauthorized)
        }
    }
}
