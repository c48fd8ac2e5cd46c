import Foundation
@_spi(Replication) import Settee
import Synchronization

/// Users, roles and sessions made through the admin API or by logging in, kept with the database
/// they belong to (as Sync Gateway keeps them in its bucket): two local documents, which do not
/// replicate and which the public `_local` endpoint does not serve.
///
/// Format (`Formats/http-api.md`, "Users and sessions on disk"):
/// - `settee.server/principals`: `{"users": {name: user}, "roles": {name: {"admin_channels": […]}},
///   "history": …}` (``PrincipalHistory``),
///   a user being `{"admin_channels", "admin_roles", "disabled", "email"?, "grants_from"?,
///   "password_hash"?: {"algorithm": "pbkdf2-sha256", "rounds", "salt", "hash"}}` (salt and hash
///   in base64; `grants_from` for a user made by signing up, see ``User/grantsFrom``);
/// - `settee.server/sessions`: `{session id: {"user": name, "expires": unix seconds}}`.
enum PrincipalRecords {
    static let prefix = "settee.server/"
    static let principalsID = prefix + "principals"
    static let sessionsID = prefix + "sessions"
    /// Where a user's `_local` documents live: `settee.user/<name>/<id>`, the name with `%` and
    /// `/` percent-encoded so that no two users' IDs meet. The admin port's are stored as named.
    static let userLocalPrefix = "settee.user/"

    static func localID(_ id: String, of principal: Principal) -> String {
        guard case .user(let name) = principal else { return id }
        let encoded = name.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
        return userLocalPrefix + encoded + "/" + id
    }

    static func encode(_ user: User) -> JSONValue {
        var o: [String: JSONValue] = [
            "admin_channels": .array(user.adminChannels.map(JSONValue.string)),
            "admin_roles": .array(user.adminRoles.map(JSONValue.string)),
            "disabled": .bool(user.disabled),
        ]
        if let email = user.email { o["email"] = .string(email) }
        if let from = user.grantsFrom { o["grants_from"] = .int(Int64(clamping: from)) }
        if let p = user.password {
            o["password_hash"] = [
                "algorithm": "pbkdf2-sha256", "rounds": .int(Int64(p.rounds)),
                "salt": .string(Data(p.salt).base64EncodedString()), "hash": .string(Data(p.hash).base64EncodedString()),
            ]
        }
        return .object(o)
    }

    static func decodeUser(_ name: String, _ v: JSONValue) throws -> User {
        guard case .object(let o) = v else { throw SetteeError(.corrupted, "stored user \(name) is not an object") }
        func strings(_ key: String) throws -> [String] {
            guard let a = o[key] else { return [] }
            guard case .array(let items) = a else { throw SetteeError(.corrupted, "stored user \(name): \(key) is not an array") }
            return try items.map { item in
                guard case .string(let s) = item else { throw SetteeError(.corrupted, "stored user \(name): \(key) holds a non-string") }
                return s
            }
        }
        var password: PasswordHash?
        if let h = o["password_hash"] {
            guard case .object(let p) = h, p["algorithm"] == "pbkdf2-sha256", case .int(let rounds)? = p["rounds"],
                  case .string(let salt)? = p["salt"], case .string(let hash)? = p["hash"],
                  let s = Data(base64Encoded: salt), let d = Data(base64Encoded: hash), rounds > 0, rounds <= 100_000_000 else {
                throw SetteeError(.corrupted, "stored user \(name): password_hash is malformed")
            }
            password = PasswordHash(salt: Array(s), hash: Array(d), rounds: Int(rounds))
        }
        var grantsFrom: UInt64?
        if let g = o["grants_from"] {
            guard case .int(let n) = g, n >= 0 else { throw SetteeError(.corrupted, "stored user \(name): grants_from is malformed") }
            grantsFrom = UInt64(n)
        }
        return User(name: name, password: password, adminChannels: try strings("admin_channels"),
                    adminRoles: try strings("admin_roles"), disabled: o["disabled"] == true, email: o["email"]?.stringValue,
                    grantsFrom: grantsFrom)
    }
}

/// A logged-in session: who, until when, and the life each use extends it to.
struct Session: Sendable, Equatable {
    var user: String
    var expires: Date
    var ttl: TimeInterval = ServedDatabase.sessionTTL

    /// A session ID (a cookie's value): 20 random bytes in hex.
    static func newID() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0 ..< 20).map { _ in String(format: "%02x", UInt8.random(in: 0 ... 255, using: &rng)) }.joined()
    }
}

extension ServedDatabase {
    static let sessionTTL: TimeInterval = 24 * 3600

    /// Loads the users and roles stored with the database, then applies the configured ones over
    /// them (the configuration is authoritative for the principals it names, at every start).
    func loadPrincipals() throws {
        if let stored = try database.localDocument(withID: PrincipalRecords.principalsID) {
            let history = try PrincipalHistory(json: stored["history"])
            principalHistory.withLock { $0 = history }
            if case .object(let users)? = stored["users"] {
                for (name, v) in users where config.users[name] == nil { self.users.setUser(try PrincipalRecords.decodeUser(name, v)) }
            }
            if case .object(let roles)? = stored["roles"] {
                for (name, v) in roles where config.roles[name] == nil {
                    let channels = v.objectValue?["admin_channels"]?.arrayValue?.compactMap(\.stringValue) ?? []
                    self.users.setRole(Role(name: name, adminChannels: channels))
                }
            }
        }
        // A configured user whose password is not the one stored at the last start had it
        // changed in the configuration: its sessions end.
        var passwordChanged: Set<String> = []
        if case .object(let users)? = try database.localDocument(withID: PrincipalRecords.principalsID)?["users"] {
            for (name, configured) in config.users {
                guard let password = configured.password, let v = users[name],
                      let stored = try? PrincipalRecords.decodeUser(name, v).password else { continue }
                if !stored.matches(password) { passwordChanged.insert(name) }
            }
        }
        if let stored = try database.localDocument(withID: PrincipalRecords.sessionsID) {
            let now = Date()
            for (id, v) in stored {
                guard case .string(let user)? = v.objectValue?["user"], let expires = v.objectValue?["expires"]?.doubleValue,
                      !passwordChanged.contains(user) else { continue }
                let date = Date(timeIntervalSince1970: expires)
                let ttl = v.objectValue?["ttl"]?.doubleValue ?? Self.sessionTTL
                if date > now { sessions.withLock { $0[id] = Session(user: user, expires: date, ttl: ttl) } }
            }
        }
        // The configuration may have changed users' channels and roles since the last start:
        // that change takes a sequence like any other.
        let before = principalHistory.withLock { $0 }
        try database.inBatch {
            try updatePrincipalHistory(database)
            if principalHistory.withLock({ $0 }) != before { try writePrincipals(database) }
            if !passwordChanged.isEmpty { try writeSessions(database) }
        }
        principalsVersion.add(1, ordering: .releasing)
    }

    /// Writes every user and role (a change through the admin API). The state is read on the
    /// database's worker thread, in the write's turn, so the last write holds the latest state.
    ///
    /// A change of a user's or role's channels or roles takes a sequence (its place among
    /// document changes: from when a channel is readable, or when it was lost), and wakes the
    /// open feeds, which answer for the new access at once.
    func savePrincipals() async throws {
        // After the change (made by the caller, and here to the history), even if writing it
        // fails, and before the feeds wake: what was worked out before it is stale from here.
        do {
            try await database.inBatch { [self] db in
                try updatePrincipalHistory(db)
                try writePrincipals(db)
            }
        } catch {
            principalsVersion.add(1, ordering: .releasing)
            throw error
        }
        principalsVersion.add(1, ordering: .releasing)
        wakeFeeds()
    }

    /// Writes the principals record (in the caller's batch).
    private func writePrincipals(_ db: Database) throws {
        var users: [String: JSONValue] = [:]
        for name in self.users.userNames { if let u = self.users.user(named: name) { users[name] = PrincipalRecords.encode(u) } }
        var roles: [String: JSONValue] = [:]
        for name in self.users.roleNames {
            if let r = self.users.role(named: name) { roles[name] = ["admin_channels": .array(r.adminChannels.map(JSONValue.string))] }
        }
        try db.saveLocalDocument(["users": .object(users), "roles": .object(roles), "history": principalHistory.withLock { $0 }.json],
                                 withID: PrincipalRecords.principalsID)
    }

    /// A new session for `user` (under `id` when given: one login, several databases) lasting
    /// `ttl` seconds from each use; its ID is the cookie's value.
    func createSession(for user: String, id given: String? = nil, ttl: TimeInterval = sessionTTL) async throws -> (id: String, session: Session) {
        let id = given ?? Session.newID()
        let session = Session(user: user, expires: Date().addingTimeInterval(ttl), ttl: ttl)
        sessions.withLock { $0[id] = session }
        try await saveSessions()
        return (id, session)
    }

    /// The live session with this ID; a session used after a tenth of its life has passed is
    /// extended to a full life again (sliding expiry, as Sync Gateway does).
    func session(_ id: String) async throws -> (Session, refreshed: Bool)? {
        let now = Date()
        let found = sessions.withLock { s -> (Session, Bool)? in
            guard var session = s[id] else { return nil }
            guard session.expires > now else {
                s.removeValue(forKey: id)
                return nil
            }
            if session.expires.timeIntervalSince(now) < session.ttl * 0.9 {
                session.expires = now.addingTimeInterval(session.ttl)
                s[id] = session
                return (session, true)
            }
            return (session, false)
        }
        if found?.1 == true { try await saveSessions() }
        return found
    }

    func deleteSession(_ id: String) async throws {
        guard sessions.withLock({ $0.removeValue(forKey: id) }) != nil else { return }
        try await saveSessions()
    }

    /// Forgets a user's sessions (the user was deleted or disabled).
    func deleteSessions(of user: String) async throws {
        let removed = sessions.withLock { s in
            let ids = s.filter { $0.value.user == user }.map(\.key)
            for id in ids { s.removeValue(forKey: id) }
            return !ids.isEmpty
        }
        if removed { try await saveSessions() }
    }

    /// Writes the live sessions, read in the write's turn on the worker (as `savePrincipals`).
    private func saveSessions() async throws {
        try await database.inBatch { [self] db in try writeSessions(db) }
    }

    /// Writes the sessions record (in the caller's batch).
    private func writeSessions(_ db: Database) throws {
        let now = Date()
        let snapshot = sessions.withLock { s in
            s = s.filter { $0.value.expires > now }
            return s
        }
        var o: [String: JSONValue] = [:]
        for (id, s) in snapshot {
            o[id] = ["user": .string(s.user), "expires": .double(s.expires.timeIntervalSince1970), "ttl": .double(s.ttl)]
        }
        try db.saveLocalDocument(o, withID: PrincipalRecords.sessionsID)
    }
}
