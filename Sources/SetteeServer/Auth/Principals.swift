import Crypto
import Foundation
@_spi(Replication) @_spi(Server) import Settee

/// A user as stored: the user, when its admin channels and roles began and ended, and from when
/// its sessions count.
struct UserRecord: Sendable, Equatable {
    var user: User
    var history = GrantHistory()
    /// Sessions made before this moment (seconds since 1970) are over: a new password, a
    /// disabled or deleted user ends them all with one write, however many there are.
    var sessionsFrom: Double?
}

/// A role as stored, with when its admin channels began and ended.
struct RoleRecord: Sendable, Equatable {
    var role: Role
    var history = GrantHistory()
}

/// What is kept of a deleted user or role: when what it held ended (so that a principal made
/// again under its name carries on from there) and, for a user, from when sessions count (so
/// that the deleted user's sessions do not wake with a new one).
struct FormerPrincipal: Sendable, Equatable {
    var history = GrantHistory()
    var sessionsFrom: Double?
}

/// A logged-in session: who, until when, and the life each use extends it to.
struct Session: Sendable, Equatable {
    var user: String
    var expires: Date
    var ttl: TimeInterval = ServedDatabase.sessionTTL
    /// When it was made (a session made before its user's `sessions_from` is over).
    var created = Date()

    /// A session ID (a cookie's value): 20 random bytes in hex.
    static func newID() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0 ..< 20).map { _ in String(format: "%02x", UInt8.random(in: 0 ... 255, using: &rng)) }.joined()
    }

    /// Whether `id` could be a session ID: 16 to 64 hex digits. Anything else (a cookie's value
    /// is the client's to choose) is no session, without a read.
    static func isWellFormed(_ id: String) -> Bool {
        (16 ... 64).contains(id.utf8.count) && id.utf8.allSatisfy { (48 ... 57).contains($0) || (97 ... 102).contains($0) }
    }
}

/// Users, roles and sessions kept with the database they belong to (as Sync Gateway keeps
/// `_sync:user:NAME` and `_sync:session:ID` in its bucket): one local document each, which do
/// not replicate and which the public `_local` endpoint does not serve.
///
/// IDs (`Formats/http-api.md`, "Users, roles and sessions on disk"), the name with `%`, `/` and
/// `=` percent-encoded (or, past 900 bytes encoded, `=` and the SHA-256 of the name in hex):
/// - `settee.server/user/<name>`: `{"name", "admin_channels", "admin_roles", "disabled",
///   "email"?, "grants_from"?, "sessions_from"?, "password_hash"?: {"algorithm": "pbkdf2-sha256",
///   "rounds", "salt", "hash"}, "history": {"channels": {c: [granted, revoked]}, "roles": {…}}}`;
/// - `settee.server/role/<name>`: `{"name", "admin_channels", "history"}`;
/// - `settee.server/former-user/<name>` and `former-role/<name>`: `{"name", "history",
///   "sessions_from"?}` for a deleted one;
/// - `settee.server/session/<id>`: `{"user", "expires", "ttl", "created"}` (seconds since 1970).
///
/// Databases written before these records held every user and role in `settee.server/principals`
/// and every session in `settee.server/sessions`; ``PrincipalStore`` moves them on open.
enum PrincipalRecords {
    static let prefix = "settee.server/"
    static let userPrefix = prefix + "user/"
    static let rolePrefix = prefix + "role/"
    static let formerUserPrefix = prefix + "former-user/"
    static let formerRolePrefix = prefix + "former-role/"
    static let sessionPrefix = prefix + "session/"
    /// The records of databases written before one record per principal.
    static let legacyPrincipalsID = prefix + "principals"
    static let legacySessionsID = prefix + "sessions"
    /// Where a user's `_local` documents live: `settee.user/<name>/<id>`, the name with `%` and
    /// `/` percent-encoded so that no two users' IDs meet. The admin port's are stored as named.
    static let userLocalPrefix = "settee.user/"

    static func localID(_ id: String, of principal: Principal) -> String {
        guard case .user(let name) = principal else { return id }
        let encoded = name.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
        return userLocalPrefix + encoded + "/" + id
    }

    /// A name as it appears in a record's ID.
    static func encode(_ name: String) -> String {
        let encoded = name.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
            .replacingOccurrences(of: "=", with: "%3D")
        guard encoded.utf8.count > 900 else { return encoded }
        return "=" + SHA256.hash(data: Array(name.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The name an ID's last part stands for; nil for a hashed one (its record names it).
    static func decode(_ part: Substring) -> String? {
        guard !part.hasPrefix("=") else { return nil }
        return part.replacingOccurrences(of: "%3D", with: "=").replacingOccurrences(of: "%2F", with: "/")
            .replacingOccurrences(of: "%25", with: "%")
    }

    static func userID(_ name: String) -> String { userPrefix + encode(name) }
    static func roleID(_ name: String) -> String { rolePrefix + encode(name) }
    static func formerUserID(_ name: String) -> String { formerUserPrefix + encode(name) }
    static func formerRoleID(_ name: String) -> String { formerRolePrefix + encode(name) }
    static func sessionID(_ id: String) -> String { sessionPrefix + id }

    // MARK: Users

    static func encode(_ r: UserRecord) -> [String: JSONValue] {
        let user = r.user
        var o: [String: JSONValue] = [
            "name": .string(user.name),
            "admin_channels": .array(user.adminChannels.map(JSONValue.string)),
            "admin_roles": .array(user.adminRoles.map(JSONValue.string)),
            "disabled": .bool(user.disabled),
            "history": r.history.json,
        ]
        if let email = user.email { o["email"] = .string(email) }
        if let from = user.grantsFrom { o["grants_from"] = .int(Int64(clamping: from)) }
        if let from = r.sessionsFrom { o["sessions_from"] = .double(from) }
        if let p = user.password { o["password_hash"] = encode(p) }
        return o
    }

    static func encode(_ p: PasswordHash) -> JSONValue {
        ["algorithm": "pbkdf2-sha256", "rounds": .int(Int64(p.rounds)),
         "salt": .string(Data(p.salt).base64EncodedString()), "hash": .string(Data(p.hash).base64EncodedString())]
    }

    /// A stored `password_hash`, or one an administrator gives in that form.
    static func decodePasswordHash(_ h: JSONValue) -> PasswordHash? {
        guard case .object(let p) = h, p["algorithm"] == "pbkdf2-sha256", case .int(let rounds)? = p["rounds"],
              case .string(let salt)? = p["salt"], case .string(let hash)? = p["hash"],
              let s = Data(base64Encoded: salt), let d = Data(base64Encoded: hash), rounds >= 1_000, rounds <= 10_000_000,
              (8 ... 64).contains(s.count), (16 ... 64).contains(d.count) else { return nil }
        return PasswordHash(salt: Array(s), hash: Array(d), rounds: Int(rounds))
    }

    static func decodeUser(_ name: String, _ o: [String: JSONValue], legacy: Bool = false) throws -> UserRecord {
        let what = "stored user \(name.escapedForLog)"
        func strings(_ key: String) throws -> [String] {
            guard let a = o[key] else { return [] }
            guard case .array(let items) = a else { throw SetteeError(.corrupted, "\(what): \(key) is not an array") }
            return try items.map { item in
                guard case .string(let s) = item else { throw SetteeError(.corrupted, "\(what): \(key) holds a non-string") }
                return s
            }
        }
        var password: PasswordHash?
        if let h = o["password_hash"] {
            guard let p = decodePasswordHash(h) else { throw SetteeError(.corrupted, "\(what): password_hash is malformed") }
            password = p
        }
        var grantsFrom: UInt64?
        if let g = o["grants_from"] {
            guard case .int(let n) = g, n >= 0 else { throw SetteeError(.corrupted, "\(what): grants_from is malformed") }
            grantsFrom = UInt64(n)
        }
        let user = User(name: name, password: password, adminChannels: try strings("admin_channels"),
                        adminRoles: try strings("admin_roles"), disabled: o["disabled"] == true, email: o["email"]?.stringValue,
                        grantsFrom: grantsFrom)
        guard !legacy else { return UserRecord(user: user) }
        return UserRecord(user: user, history: try GrantHistory(json: o["history"], what: what),
                          sessionsFrom: try seconds(o["sessions_from"], what, "sessions_from"))
    }

    static func seconds(_ v: JSONValue?, _ what: String, _ key: String) throws -> Double? {
        guard let v else { return nil }
        guard let d = v.doubleValue, d.isFinite, d >= 0, d < 1e11 else { throw SetteeError(.corrupted, "\(what): \(key) is malformed") }
        return d
    }

    // MARK: Roles

    static func encode(_ r: RoleRecord) -> [String: JSONValue] {
        ["name": .string(r.role.name), "admin_channels": .array(r.role.adminChannels.map(JSONValue.string)), "history": r.history.json]
    }

    static func decodeRole(_ name: String, _ o: [String: JSONValue]) throws -> RoleRecord {
        let what = "stored role \(name.escapedForLog)"
        var channels: [String] = []
        if let a = o["admin_channels"] {
            guard case .array(let items) = a else { throw SetteeError(.corrupted, "\(what): admin_channels is not an array") }
            channels = try items.map { item in
                guard case .string(let s) = item else { throw SetteeError(.corrupted, "\(what): admin_channels holds a non-string") }
                return s
            }
        }
        return RoleRecord(role: Role(name: name, adminChannels: channels), history: try GrantHistory(json: o["history"], what: what))
    }

    // MARK: Former principals

    static func encode(_ f: FormerPrincipal, name: String) -> [String: JSONValue] {
        var o: [String: JSONValue] = ["name": .string(name), "history": f.history.json]
        if let from = f.sessionsFrom { o["sessions_from"] = .double(from) }
        return o
    }

    static func decodeFormer(_ name: String, _ o: [String: JSONValue]) throws -> FormerPrincipal {
        let what = "stored former principal \(name.escapedForLog)"
        return FormerPrincipal(history: try GrantHistory(json: o["history"], what: what),
                               sessionsFrom: try seconds(o["sessions_from"], what, "sessions_from"))
    }

    // MARK: Sessions

    static func encode(_ s: Session) -> [String: JSONValue] {
        ["user": .string(s.user), "expires": .double(s.expires.timeIntervalSince1970), "ttl": .double(s.ttl),
         "created": .double(s.created.timeIntervalSince1970)]
    }

    /// A stored session; nil for one that does not decode (it is no session: the client logs in again).
    static func decodeSession(_ o: [String: JSONValue]) -> Session? {
        guard case .string(let user)? = o["user"], let expires = o["expires"]?.doubleValue, expires.isFinite else { return nil }
        let ttl = o["ttl"]?.doubleValue.flatMap { $0.isFinite && $0 >= 1 ? $0 : nil } ?? ServedDatabase.sessionTTL
        let created = o["created"]?.doubleValue.flatMap { $0.isFinite ? $0 : nil } ?? 0
        return Session(user: user, expires: Date(timeIntervalSince1970: expires), ttl: ttl, created: Date(timeIntervalSince1970: created))
    }
}
