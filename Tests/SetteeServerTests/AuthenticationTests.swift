import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// GUEST on and off × no credentials, a wrong password, an unknown user, the right password ×
/// the public and the admin port.
@Suite struct AuthenticationTests {
    static let users: [String: ServerConfiguration.UserConfig] = [
        "pupshaw": .init(password: "frank", adminChannels: ["*"]),
        "off": {
            var u = ServerConfiguration.UserConfig(password: "pw")
            u.disabled = true
            return u
        }(),
    ]

    @Test(arguments: [true, false])
    func theMatrix(guest: Bool) async throws {
        let server = try makeServer(guest: guest, users: Self.users)
        defer { try? server.close() }
        try await server.withClient { c async throws in
            let anonymous = try await c.send(.get, "/db/_all_docs")
            if guest {
                #expect(anonymous.status == .ok)
            } else {
                #expect(anonymous.status == .unauthorized)
                #expect(anonymous.headers[.wwwAuthenticate] == "Basic realm=\"Settee\"")
                #expect(anonymous["error"] == "unauthorized")
            }
            // A wrong password and an unknown user look the same.
            let wrong = try await c.send(.get, "/db/_all_docs", headers: basic("pupshaw", "nope"))
            let unknown = try await c.send(.get, "/db/_all_docs", headers: basic("nobody", "frank"))
            #expect(wrong.status == .unauthorized && unknown.status == .unauthorized)
            #expect(wrong.text == unknown.text)
            #expect(try await c.send(.get, "/db/_all_docs", headers: basic("off", "pw")).status == .unauthorized)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.authorization: "Basic !!!"]).status == .unauthorized)
            #expect(try await c.send(.get, "/db/_all_docs", headers: [.authorization: "Bearer x"]).status == .unauthorized)
            // The right password, again and again (the verified credential is remembered).
            for _ in 0 ..< 3 {
                #expect(try await c.send(.get, "/db/_all_docs", headers: basic("pupshaw", "frank")).status == .ok)
            }
            let session = try await c.send(.get, "/_session", headers: basic("pupshaw", "frank"))
            #expect(session["userCtx"]?.objectValue?["name"] == "pupshaw")
            // Writing needs the same.
            let put = try await c.send(.put, "/db/x", json: "{}")
            #expect(put.status == (guest ? .created : .unauthorized))
            #expect(try await c.send(.put, "/db/y", json: "{}", headers: basic("pupshaw", "frank")).status == .created)
        }
        // The admin port needs no credentials, and ignores them.
        try await server.withClient(admin: true) { c async throws in
            #expect(try await c.send(.get, "/db/_all_docs").status == .ok)
            #expect(try await c.send(.get, "/db/_all_docs", headers: basic("pupshaw", "nope")).status == .ok)
            #expect(try await c.send(.get, "/_session")["userCtx"]?.objectValue?["roles"] == ["_admin"])
        }
    }

    @Test func passwordsAreKeptOnlyAsSaltedHashes() async throws {
        let a = PasswordHash(password: "frank"), b = PasswordHash(password: "frank")
        #expect(a.salt != b.salt && a.hash != b.hash)
        #expect(a.matches("frank") && !a.matches("Frank") && !a.matches(""))
        #expect(a.rounds == PasswordHash.rounds)
        let directory = NSTemporaryDirectory() + "settee-auth-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = try Database(name: "auth", config: DatabaseConfiguration(directory: directory))
        defer { try? db.close() }
        let store = try PrincipalStore(database: db)
        try await store.saveUser(User(name: "u", password: a, adminChannels: [], adminRoles: [], disabled: false))
        #expect(try await store.authenticate(name: "u", password: "frank")?.name == "u")
        #expect(try await store.authenticate(name: "u", password: "frank")?.name == "u")   // remembered
        #expect(try await store.authenticate(name: "u", password: "nope") == nil)
        #expect(try await store.authenticate(name: "nobody", password: "frank") == nil)
        // A changed password forgets what was remembered.
        try await store.saveUser(User(name: "u", password: PasswordHash(password: "new"), adminChannels: [], adminRoles: [], disabled: false))
        #expect(try await store.authenticate(name: "u", password: "frank") == nil)
        #expect(try await store.authenticate(name: "u", password: "new") != nil)
        // The stored record holds the hash, never the password.
        let stored = try #require(try db.localDocument(withID: PrincipalRecords.userID("u")))
        #expect(!(try JSONValue.object(stored).jsonText()).contains("new\""))
        #expect(stored["password_hash"]?.objectValue?["algorithm"] == "pbkdf2-sha256")
    }
}
