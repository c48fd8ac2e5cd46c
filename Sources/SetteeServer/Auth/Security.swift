import Foundation
@_spi(Replication) @_spi(Server) import Settee
import Synchronization

/// A database's CouchDB security object (`/{db}/_security`): its `admins` and `members`, each
/// `{"names": [...], "roles": [...]}`. Members restrict who may use the database at all, on top
/// of channels: when `members` names anyone (a user or a role), a user of the database must be
/// one of them, or one of `admins`. Being listed in `admins` gives no power of its own here:
/// administration is the admin port's.
///
/// ```swift
/// let security = try SecurityObject(json: ["members": ["names": ["alice"], "roles": []]])
/// security.admits(user: "alice", roles: [])   // true
/// ```
///
/// - Note: A value type; `Sendable`.
struct SecurityObject: Sendable, Equatable {
    struct Names: Sendable, Equatable {
        var names: [String] = []
        var roles: [String] = []
        var isEmpty: Bool { names.isEmpty && roles.isEmpty }

        func lists(_ user: String, _ userRoles: Set<String>) -> Bool {
            names.contains(user) || roles.contains(where: userRoles.contains)
        }
    }

    var admins = Names()
    var members = Names()
    /// The object as it was set, answered as it was sent (CouchDB keeps it whole: an emptied
    /// `members` stays there, other members too); nil when none was ever set.
    var stored: [String: JSONValue]?

    init() {}

    /// Reads a security object as CouchDB checks one: an object whose `admins` and `members`,
    /// when present, are objects whose `names` and `roles`, when present, are arrays of strings.
    ///
    /// - Throws: ``CouchError`` 400 for anything else.
    init(json: JSONValue) throws {
        guard case .object(let o) = json else { throw CouchError.badRequest("the security object must be a JSON object") }
        func names(_ key: String) throws -> Names {
            guard let v = o[key] else { return Names() }
            guard case .object(let n) = v else { throw CouchError.badRequest("\(key) must be an object of names and roles") }
            func strings(_ member: String) throws -> [String] {
                guard let list = n[member] else { return [] }
                guard case .array(let a) = list else { throw CouchError.badRequest("\(key).\(member) must be an array of strings") }
                return try a.map { v in
                    guard case .string(let s) = v else { throw CouchError.badRequest("\(key).\(member) must be an array of strings") }
                    return s
                }
            }
            return Names(names: try strings("names"), roles: try strings("roles"))
        }
        admins = try names("admins")
        members = try names("members")
        stored = o
    }

    /// The object as CouchDB answers it: as it was set, `{}` when nothing was.
    var json: JSONValue { .object(stored ?? [:]) }

    /// Whether `user` (GUEST for an anonymous request) may use the database.
    func admits(user: String, roles: Set<String>) -> Bool {
        if members.isEmpty { return true }
        return members.lists(user, roles) || admins.lists(user, roles)
    }
}

extension ServedDatabase {
    static let securityID = PrincipalRecords.prefix + "security"

    /// The security object stored with the database (`{}` when none was set).
    func loadSecurity() throws {
        guard let stored = try database.localDocument(withID: Self.securityID) else { return }
        let object = try SecurityObject(json: .object(stored))
        security.withLock { $0 = object }
    }

    /// Stores `object` with the database, then applies it.
    func setSecurity(_ object: SecurityObject) async throws {
        guard case .object(let o) = object.json else { return }
        _ = try await database.saveLocalDocument(o, withID: Self.securityID)
        security.withLock { $0 = object }
    }
}
