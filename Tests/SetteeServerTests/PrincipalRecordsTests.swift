import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// Users, roles and sessions as one record each: what a change writes, what a login writes, how
/// sessions end, how history is compacted, and a database written when they were kept whole.
@Suite struct PrincipalRecordsTests {
    /// A server over one file database in a new directory (removed by the caller).
    static func fileServer(_ directory: String, users: String = "{}", roles: String = "{}", sync: String? = nil) throws -> SetteeServer {
        let syncMember = sync.map { ", \"sync\": `\($0)`" } ?? ""
        return try channelServer("""
        {"allowSignUp": true, "databases": {"db": {"server": "\(directory)", "allowSignUp": true,
          "users": \(users), "roles": \(roles)\(syncMember)}}}
        """)
    }

    static func directory(_ tag: String) -> String {
        NSTemporaryDirectory() + "settee-principals-\(tag)-\(UUID().uuidString)"
    }

    /// Every principal record's ID with its revision (`0-N`).
    static func records(_ db: Database) throws -> [String: String] {
        var out: [String: String] = [:]
        try db.forEachLocalDocument(from: PrincipalRecords.prefix, includeProperties: false) { id, rev, _ in
            guard id.hasPrefix("_local/" + PrincipalRecords.prefix) else { return false }
            out[String(id.dropFirst(7))] = rev
            return true
        }
        return out
    }

    @Test func aChangeWritesItsPrincipalsRecordAndOneSequence() async throws {
        let dir = Self.directory("change")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try Self.fileServer(dir)
        defer { try? server.close() }
        let db = try #require(server.database(named: "db"))
        let hash = try PrincipalRecords.encode(PasswordHash(password: "pw")).jsonText()
        try await server.withClient(admin: true, .live) { admin async throws in
            for i in 0 ..< 40 {
                let r = try await admin.send(.put, "/db/_user/u\(i)", json: #"{"password_hash": \#(hash), "admin_channels": ["c\#(i)"]}"#)
                #expect(r.status == .created, "\(r.text)")
            }
            // A new user takes no sequence: no client of it can have missed anything.
            let seqBefore = try db.database.lastSequence
            #expect(try await admin.send(.put, "/db/_user/new", json: #"{"password": "pw", "admin_channels": ["n"]}"#).status == .created)
            #expect(try db.database.lastSequence == seqBefore)
            let before = try Self.records(db.database)
            #expect(before.keys.filter { $0.hasPrefix(PrincipalRecords.userPrefix) }.count == 41)
            // A change of one user's channels: its record, and one sequence.
            #expect(try await admin.send(.put, "/db/_user/u7", json: #"{"admin_channels": ["c7", "more"]}"#).status == .ok)
            let after = try Self.records(db.database)
            let changed = Set(after.keys).filter { after[$0] != before[$0] }
            #expect(changed == [PrincipalRecords.userID("u7")])
            #expect(try db.database.lastSequence == seqBefore + 1)
            // Its history says from when.
            let record = try #require(try db.principals.userRecord(named: "u7"))
            #expect(record.history.channels["more"] == GrantHistory.Span(granted: seqBefore + 1, revoked: nil))
            #expect(record.history.channels["c7"] == GrantHistory.Span(granted: 0, revoked: nil))
            // Its password stayed (a PUT without one keeps it).
            #expect(try await db.principals.authenticate(name: "u7", password: "pw") != nil)
            // A role: its own record.
            #expect(try await admin.send(.put, "/db/_role/r", json: #"{"admin_channels": ["x"]}"#).status == .created)
            #expect(try Self.records(db.database).count == after.count + 1)
        }
    }

    @Test func aLoginWritesOneSessionRecordWhateverTheOthers() async throws {
        let dir = Self.directory("login")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try Self.fileServer(dir, users: #"{"alice": {"password": "alice-pw", "admin_channels": ["a"]}}"#)
        defer { try? server.close() }
        let db = try #require(server.database(named: "db"))
        try await withPorts(server) { pub, admin async throws in
            // Sessions made by the administrator (no hash each), then a login among them.
            for _ in 0 ..< 300 {
                #expect(try await admin.send(.post, "/db/_session", json: #"{"name": "alice"}"#).status == .ok)
            }
            let before = try Self.records(db.database)
            let login = try await pub.send(.post, "/db/_session", json: #"{"name": "alice", "password": "alice-pw"}"#)
            #expect(login.status == .ok)
            let after = try Self.records(db.database)
            let written = Set(after.keys).filter { after[$0] != before[$0] }
            #expect(written.count == 1)
            #expect(written.first?.hasPrefix(PrincipalRecords.sessionPrefix) == true)
            #expect(db.principals.counts.sessions == 301)
            // The cookie is the session.
            let cookie = try #require(SessionAndUserTests.cookie(login))
            #expect(try await pub.send(.get, "/db/_session", headers: [.cookie: cookie])["userCtx"]?.objectValue?["name"] == "alice")
            // Logging out deletes that record alone.
            #expect(try await pub.send(.delete, "/db/_session", headers: [.cookie: cookie]).status == .ok)
            #expect(try Self.records(db.database) == before)
        }
    }

    @Test func sessionsEndWithOneWriteAndStayEndedForANewUserOfTheName() async throws {
        let dir = Self.directory("end")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try Self.fileServer(dir, users: #"{"alice": {"password": "alice-pw", "admin_channels": ["a"]}}"#)
        defer { try? server.close() }
        let db = try #require(server.database(named: "db"))
        try await withPorts(server) { pub, admin async throws in
            func session() async throws -> String {
                let id = try #require(try await admin.send(.post, "/db/_session", json: #"{"name": "alice"}"#)["session_id"]?.stringValue)
                return "SyncGatewaySession=\(id)"
            }
            func who(_ cookie: String) async throws -> HTTPResponse.Status {
                try await pub.send(.get, "/db/_all_docs", headers: [.cookie: cookie]).status
            }
            let cookies = [try await session(), try await session(), try await session()]
            for c in cookies { #expect(try await who(c) == .ok) }
            // Two more, never used again: their records stay until the sweep.
            _ = try await session()
            _ = try await session()
            // A new password: every session ends, with one record written (the user's).
            let before = try Self.records(db.database)
            #expect(try await admin.send(.put, "/db/_user/alice", json: #"{"password": "new-pw", "admin_channels": ["a"]}"#).status == .ok)
            let after = try Self.records(db.database)
            #expect(Set(after.keys).filter { after[$0] != before[$0] } == [PrincipalRecords.userID("alice")])
            for c in cookies { #expect(try await who(c) == .unauthorized) }
            // Deleted, then made again under the same name: the old sessions stay ended.
            let late = try await session()
            #expect(try await admin.send(.delete, "/db/_user/alice").status == .ok)
            #expect(try await who(late) == .unauthorized)
            #expect(try db.database.localDocument(withID: PrincipalRecords.formerUserID("alice")) != nil)
            #expect(try await admin.send(.put, "/db/_user/alice", json: #"{"password": "x", "admin_channels": ["a"]}"#).status == .created)
            #expect(try await who(late) == .unauthorized)
            #expect(try db.database.localDocument(withID: PrincipalRecords.formerUserID("alice")) == nil)
            let fresh = try await session()
            #expect(try await who(fresh) == .ok)
            // A session found over is deleted when it is used; the sweep deletes the records of
            // the others that ended (the two never used again) and of an expired one.
            let expired = Session.newID()
            _ = try await db.principals.createSession(for: "alice", id: expired, ttl: 1)
            let swept = try await db.principals.sweepSessions(now: Date().addingTimeInterval(2))
            #expect(swept == 2 + 1)
            let left = try Self.records(db.database).keys.filter { $0.hasPrefix(PrincipalRecords.sessionPrefix) }
            #expect(left == [PrincipalRecords.sessionID(String(fresh.dropFirst("SyncGatewaySession=".count)))])
            #expect(try await who(fresh) == .ok)
        }
    }

    @Test func historyKeepsWhatIsHeldAndTheLatestRevocations() async throws {
        let dir = Self.directory("history")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try Self.fileServer(dir, users: #"{"alice": {"password": "alice-pw", "admin_channels": ["c0"]}}"#)
        defer { try? server.close() }
        let db = try #require(server.database(named: "db"))
        try await server.withClient(admin: true) { admin async throws in
            for i in 1 ... 150 {
                #expect(try await admin.send(.put, "/db/_user/alice", json: #"{"admin_channels": ["c\#(i)"]}"#).status == .ok)
            }
        }
        let history = try #require(try db.principals.userRecord(named: "alice")).history
        #expect(history.channels.count == GrantHistory.keptRevoked + 1)
        #expect(history.channels["c150"]?.revoked == nil)
        // The oldest revocations went; the latest hundred stayed, each at its own sequence.
        #expect(history.channels["c0"] == nil && history.channels["c49"] == nil)
        let kept = (50 ... 149).compactMap { history.channels["c\($0)"]?.revoked }
        #expect(kept.count == 100 && kept == kept.sorted() && Set(kept).count == 100)
        // Read back from disk as written.
        let stored = try #require(try PrincipalStore.readUser(db.database, "alice"))
        #expect(stored.history == history)
    }

    @Test func accessIsWorkedOutAgainOnlyForWhomAChangeNames() async throws {
        let dir = Self.directory("access")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try Self.fileServer(dir, users: """
            {"alice": {"password": "a", "admin_channels": ["a"]}, "bob": {"password": "b", "admin_channels": ["b"], "admin_roles": ["team"]},
             "carol": {"password": "c", "admin_channels": ["c"]}}
            """, roles: #"{"team": {"admin_channels": ["t"]}}"#,
            sync: #"function(doc) { channel(doc.channels); if (doc.to) { access(doc.to, doc.grant); } }"#)
        defer { try? server.close() }
        let db = try #require(server.database(named: "db"))
        @Sendable func computations() -> UInt64 { db.accessComputations.load(ordering: .relaxed) }
        for name in ["alice", "bob", "carol"] { _ = try db.access(for: name) }
        let start = computations()
        try await server.withClient(admin: true) { admin async throws in
            // A document granting alice a channel: alice's access is worked out again, no one else's.
            try await put(admin, "g1", #"{"to": "alice", "grant": ["x"]}"#)
            #expect(try db.access(for: "alice").channels["x"] != nil)
            #expect(computations() == start + 1)
            _ = try db.access(for: "bob")
            _ = try db.access(for: "carol")
            #expect(computations() == start + 1)
            // A document that grants nothing changes no one's.
            try await put(admin, "plain", #"{"channels": ["b"]}"#)
            _ = try db.access(for: "alice")
            _ = try db.access(for: "bob")
            #expect(computations() == start + 1)
            // A change of the role: its holder's access, not the others'.
            #expect(try await admin.send(.put, "/db/_role/team", json: #"{"admin_channels": ["t", "t2"]}"#).status == .ok)
            #expect(try db.access(for: "bob").channels["t2"] != nil)
            _ = try db.access(for: "alice")
            _ = try db.access(for: "carol")
            #expect(computations() == start + 2)
            // A grant to the role through a document: its holder's again.
            try await put(admin, "g2", #"{"to": "role:team", "grant": ["t3"]}"#)
            #expect(try db.access(for: "bob").channels["t3"] != nil)
            _ = try db.access(for: "carol")
            #expect(computations() == start + 3)
            // A change of carol: carol's.
            #expect(try await admin.send(.put, "/db/_user/carol", json: #"{"admin_channels": ["c", "c2"]}"#).status == .ok)
            #expect(try db.access(for: "carol").channels["c2"] != nil)
            _ = try db.access(for: "alice")
            _ = try db.access(for: "bob")
            #expect(computations() == start + 4)
        }
    }

    @Test func anAdministratorMayGiveAPasswordHash() async throws {
        let dir = Self.directory("hash")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try Self.fileServer(dir)
        defer { try? server.close() }
        let made = PasswordHash(password: "given-pw")
        try await withPorts(server) { pub, admin async throws in
            let body = #"{"password_hash": \#(try PrincipalRecords.encode(made).jsonText()), "admin_channels": ["a"]}"#
            #expect(try await admin.send(.put, "/db/_user/moved", json: body).status == .created)
            #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("moved", "given-pw")).status == .ok)
            #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("moved", "other")).status == .unauthorized)
            for bad in [#"{"password_hash": {"algorithm": "md5", "rounds": 1, "salt": "AA==", "hash": "AA=="}}"#,
                        #"{"password_hash": {"algorithm": "pbkdf2-sha256", "rounds": 99999999999, "salt": "AAAAAAAAAAA=", "hash": "AAAAAAAAAAAAAAAAAAAAAA=="}}"#,
                        #"{"password_hash": "x"}"#,
                        #"{"password": "p", "password_hash": \#(try PrincipalRecords.encode(made).jsonText())}"#] {
                let r = try await admin.send(.put, "/db/_user/other", json: bad)
                #expect(r.status == .badRequest, "\(bad)")
            }
            #expect(try await admin.send(.get, "/db/_user/other").status == .notFound)
        }
    }

    // MARK: A database written when every principal was kept in one document

    static let fixture: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/principals-v1/db.settee").path
    }()

    @Test func aDatabaseWrittenWithEveryPrincipalInOneDocumentOpensAsOneRecordEach() async throws {
        let fixtureLog = try Data(contentsOf: URL(fileURLWithPath: Self.fixture + "/log"))
        let dir = Self.directory("v1")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: dir + "/db.settee")
        let users = #"{"GUEST": {"disabled": false, "admin_channels": ["public"]}, "configured": {"password": "conf-pw", "admin_channels": ["c1"]}}"#
        let roles = #"{"editor": {"admin_channels": ["drafts"]}}"#
        for _ in 0 ..< 2 {
            let server = try Self.fileServer(dir, users: users, roles: roles)
            defer { try? server.close() }
            let db = try #require(server.database(named: "db"))
            #expect(try db.database.localDocument(withID: PrincipalRecords.legacyPrincipalsID) == nil)
            #expect(try db.database.localDocument(withID: PrincipalRecords.legacySessionsID) == nil)
            #expect(try db.principals.userNames() == ["GUEST", "alice", "bob", "configured", "dora", "signed"])
            #expect(try db.principals.roleNames() == ["editor", "viewer"])
            let alice = try #require(try db.principals.userRecord(named: "alice"))
            #expect(alice.user.email == "alice@example.com" && alice.user.adminChannels == ["red"] && alice.user.adminRoles == ["editor"])
            #expect(alice.history.channels["green"]?.revoked != nil && alice.history.channels["red"]?.revoked == nil)
            #expect(try db.principals.userRecord(named: "signed")?.user.grantsFrom != nil)
            #expect(try db.principals.user(named: "dora")?.disabled == true)
            #expect(try db.principals.role(named: "viewer")?.adminChannels.sorted() == ["news", "sports"])
            // The configured user's stored hash is kept (its password is the configured one).
            let configured = try #require(try db.principals.user(named: "configured")?.password)
            #expect(configured.salt == Self.hex("65051c22368becad81ab79fa19035617"))
            try await withPorts(server) { pub, admin async throws in
                #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("alice", "alice-pw")).status == .ok)
                #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("bob", "bob-pw")).status == .ok)
                #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("signed", "signed-pw")).status == .ok)
                #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("configured", "conf-pw")).status == .ok)
                #expect(try await pub.send(.get, "/db/_all_docs", headers: basic("dora", "dora-pw")).status == .unauthorized)
                let who = try await pub.send(.get, "/db/_session", headers: basic("alice", "alice-pw"))
                #expect(who["userCtx"]?.objectValue?["channels"]?.objectValue.map { Set($0.keys) } == ["!", "drafts", "red"])
                // bob's session (made to last until 2029) carried over.
                let bobSession = "SyncGatewaySession=fad54e960b38129a9e68264d979b0b9c4f54f6ba"
                #expect(try await pub.send(.get, "/db/_session", headers: [.cookie: bobSession])["userCtx"]?.objectValue?["name"] == "bob")
                // Alice's session (a day long) carried over while it lasted, and is gone after.
                let aliceSession = "f2ac4ee604dc0673d647bff95f0392ecc16f19be"
                let stillOn = try await admin.send(.get, "/db/_session/\(aliceSession)").status == .ok
                let asAlice = try await pub.send(.get, "/db/_all_docs", headers: [.cookie: "SyncGatewaySession=\(aliceSession)"]).status
                #expect(asAlice == (stillOn ? .ok : .unauthorized))
                #expect(try await admin.send(.get, "/db/_user/bob")["all_channels"] == ["!", "blue", "news", "sports"])
            }
        }
        // The fixture itself is untouched.
        #expect(try Data(contentsOf: URL(fileURLWithPath: Self.fixture + "/log")) == fixtureLog)
    }

    static func hex(_ s: String) -> [UInt8] {
        stride(from: 0, to: s.count, by: 2).map { i in
            UInt8(s[s.index(s.startIndex, offsetBy: i) ..< s.index(s.startIndex, offsetBy: i + 2)], radix: 16) ?? 0
        }
    }
}
