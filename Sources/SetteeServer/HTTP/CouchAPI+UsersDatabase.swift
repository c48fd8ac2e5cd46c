import Crypto
import Foundation
import HTTPTypes
import Hummingbird
@_spi(Replication) import Settee

/// CouchDB's `_users` database, over Settee's users: the document `org.couchdb.user:NAME` is
/// the user NAME of the served databases (the configuration's, the `_user` API's, the same
/// records). A write applies to every served database, so that a user made here logs in with
/// `/_session` and reaches each database as CouchDB's server-wide users do; channels stay each
/// database's (`_user` API, sync function), CouchDB's `roles` are Settee's `admin_roles`.
///
/// Who may do what, as CouchDB's `_users` rules say: the admin port anything; a user reads and
/// updates its own document (its password, never its roles) and deletes it; anyone else creates
/// a new user only when `allowSignUp` is set, with no roles. Other users' documents are 404.
enum UsersDatabase {
    static let name = "_users"
    static let prefix = "org.couchdb.user:"

    /// One user's records across databases, in database-name order.
    struct Records {
        var records: [(database: String, user: User)]
        var first: User { records[0].user }

        /// A revision derived from every record: it changes with any of them, and is the same
        /// for the same records at every start. Generation 1 (the records keep no history).
        var revision: String {
            var text = ""
            for (db, u) in records {
                let hash = u.password.map { "\($0.rounds):" + Self.hex($0.salt) + ":" + Self.hex($0.hash) } ?? "-"
                text += "\(db.utf8.count):\(db)|\(hash)|\(u.adminRoles.joined(separator: ","))|\(u.adminChannels.joined(separator: ","))|\(u.disabled)|\(u.email ?? "")\n"
            }
            return "1-" + Self.hex(Array(Insecure.MD5.hash(data: Array(text.utf8))))
        }

        /// The document as CouchDB shows it to an administrator or its user.
        func document(id: String) -> JSONValue {
            let u = first
            var o: [String: JSONValue] = [
                "_id": .string(id), "_rev": .string(revision), "name": .string(u.name), "type": "user",
                "roles": .array(u.adminRoles.map(JSONValue.string)),
            ]
            if let p = u.password {
                o["password_scheme"] = "pbkdf2"
                o["pbkdf2_prf"] = "sha256"
                o["iterations"] = .int(Int64(p.rounds))
                o["salt"] = .string(Self.hex(p.salt))
                o["derived_key"] = .string(Self.hex(p.hash))
            }
            if u.disabled { o["disabled"] = true }
            return .object(o)
        }

        static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    }
}

extension SetteeServer {
    /// The databases users belong to: every served one but the server's own (`_replicator`).
    var userDatabases: [ServedDatabase] {
        databaseNames.compactMap(database(named:))
    }

    /// The names of every served database's users, sorted (GUEST is nobody's document).
    var userNames: [String] {
        Set(userDatabases.flatMap(\.users.userNames)).subtracting([User.guestName]).sorted()
    }

    /// The user `name` of every database that has one (GUEST is nobody's document).
    func userRecords(_ name: String) -> UsersDatabase.Records? {
        guard name != User.guestName else { return nil }
        let records = userDatabases.compactMap { db in db.users.user(named: name).map { (db.name, $0) } }
        return records.isEmpty ? nil : UsersDatabase.Records(records: records)
    }
}

extension CouchAPI {
    // MARK: - /_users

    /// `/_users` and what is under it: the database's information and `_all_docs` (admin port),
    /// and the user documents.
    func usersDatabase(_ call: inout Call) async throws -> Response {
        let rest = Array(call.path.dropFirst())
        let method = call.request.method
        guard let first = rest.first else {
            switch method {
            case .get, .head:
                try requireAdmin(call)
                return try jsonResponse(["db_name": .string(UsersDatabase.name), "doc_count": .int(Int64(server.userNames.count)), "doc_del_count": 0,
                                         "update_seq": 0, "committed_update_seq": 0, "purge_seq": 0, "instance_start_time": "0",
                                         "compact_running": false, "disk_format_version": 1, "state": "Online",
                                         "sizes": ["file": 0]])
            case .put:
                try requireAdmin(call)
                throw CouchError(.preconditionFailed, "file_exists", "The database could not be created, the file already exists.")
            case .post:
                let body = try await jsonBody(&call, limit: 1 << 20)
                guard case .string(let id)? = body["_id"] else {
                    throw CouchError.forbidden("Doc ID must be of the form org.couchdb.user:name")
                }
                return try await writeUserDocument(&call, id: id, body: body)
            case .delete:
                throw CouchError.forbidden("_users holds the served databases' users: delete a user, not the database")
            default:
                throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST,PUT")
            }
        }
        if first == "_all_docs" {
            try requireAdmin(call)
            try allow(method, [.get, .head])
            let includeDocs = try flag(call, "include_docs")
            let rows: [JSONValue] = server.userNames.compactMap { name in
                guard let records = server.userRecords(name) else { return nil }
                let id = UsersDatabase.prefix + name
                var row: [String: JSONValue] = ["id": .string(id), "key": .string(id), "value": ["rev": .string(records.revision)]]
                if includeDocs { row["doc"] = records.document(id: id) }
                return .object(row)
            }
            return try jsonResponse(["total_rows": .int(Int64(rows.count)), "offset": 0, "rows": .array(rows)])
        }
        if rest.count == 1, method == .put, !first.hasPrefix("_") {
            // Any other ID is refused with CouchDB's reason (403), not as a missing document.
            let body = try await jsonBody(&call, limit: 1 << 20, anyType: true)
            return try await writeUserDocument(&call, id: first, body: body)
        }
        guard rest.count == 1, first.hasPrefix(UsersDatabase.prefix) else {
            throw CouchError.notFound("_users serves users' documents (org.couchdb.user:NAME) and _all_docs only")
        }
        switch method {
        case .get, .head:
            let (_, records) = try readableUser(call, id: first)
            return try jsonResponse(records.document(id: first), headers: [.eTag: "\"\(records.revision)\""])
        case .put:
            return try await writeUserDocument(&call, id: first, body: try await jsonBody(&call, limit: 1 << 20, anyType: true))
        case .delete:
            let (name, records) = try readableUser(call, id: first)
            let given = try Self.revision(call.query["rev"], ifMatch: call.request.headers[.ifMatch])
            guard given == records.revision else { throw CouchError.conflict }
            for db in server.userDatabases where db.users.removeUser(named: name) {
                try await db.deleteSessions(of: name)
                try await db.savePrincipals()
            }
            let tombstone = "2-" + UsersDatabase.Records.hex(Array(Insecure.MD5.hash(data: Array(records.revision.utf8))))
            return try jsonResponse(["ok": true, "id": .string(first), "rev": .string(tombstone)])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// The user a document ID names, when the request may see it: the admin port, or the user
    /// itself (to anyone else it does not exist).
    private func readableUser(_ call: Call, id: String) throws -> (String, UsersDatabase.Records) {
        let name = String(id.dropFirst(UsersDatabase.prefix.count))
        guard let records = server.userRecords(name) else { throw CouchError.notFound("missing") }
        switch call.principal {
        case .admin: return (name, records)
        case .user(let u) where u == name: return (name, records)
        case .user: throw CouchError.notFound("missing")
        }
    }

    /// Creates or updates the user a document describes, in every served database.
    private func writeUserDocument(_ call: inout Call, id: String, body: [String: JSONValue]) async throws -> Response {
        guard id.hasPrefix(UsersDatabase.prefix) else { throw CouchError.forbidden("Doc ID must be of the form org.couchdb.user:name") }
        let name = String(id.dropFirst(UsersDatabase.prefix.count))
        guard !name.isEmpty, name != User.guestName else { throw CouchError.forbidden("Doc ID must be of the form org.couchdb.user:name") }
        // CouchDB's `_users` validation, with its reasons.
        guard body["type"] == "user" else { throw CouchError.forbidden("doc.type must be user") }
        guard body["name"] == .string(name) else { throw CouchError.forbidden("Doc ID must be of the form org.couchdb.user:name") }
        var roles: [String] = []
        if let r = body["roles"] {
            guard case .array(let items) = r else { throw CouchError.forbidden("doc.roles must be an array") }
            roles = try items.map { v in
                guard case .string(let s) = v else { throw CouchError.forbidden("doc.roles can only contain strings") }
                return s
            }
        }
        var password: String?
        if let p = body["password"] {
            guard case .string(let s) = p, !s.isEmpty else { throw CouchError.forbidden("doc.password must be a non-empty string") }
            password = s
        }
        let bodyRev: String? = switch body["_rev"] {
        case .string(let s)?: s
        case nil, .null?: nil
        default: throw CouchError.badRequest("Invalid rev format")
        }
        let given = try Self.revision(bodyRev ?? call.query["rev"], ifMatch: call.request.headers[.ifMatch])
        let current = server.userRecords(name)
        switch call.principal {
        case .admin:
            break
        case .user(let u) where u == name && current != nil:
            guard roles == current?.first.adminRoles else { throw CouchError.forbidden("Only _admin may edit roles") }
        case .user:
            // The name is taken (a sign-up of an existing user is a conflict, as in CouchDB).
            if current != nil { throw CouchError.conflict }
            guard server.configuration.allowSignUp else {
                throw CouchError.forbidden("Sign-up is off on this server (allowSignUp): users are made on the admin port.")
            }
            guard roles.isEmpty else { throw CouchError.forbidden("Only _admin may set roles") }
        }
        if let current {
            guard given == current.revision else { throw CouchError.conflict }
        } else {
            guard given == nil else { throw CouchError.conflict }
            guard password != nil else { throw CouchError.forbidden("doc.password is required for a new user") }
        }
        // A user changing its own document changes its password where it is a user, and
        // nothing else: not its roles in another database, not the databases it belongs to.
        let byItself = call.principal != .admin && current != nil
        let databases = server.userDatabases.filter { !byItself || $0.users.user(named: name) != nil }
        guard !databases.isEmpty else { throw CouchError.notFound("No database is served: a user belongs to databases") }
        // One hash for every database (PBKDF2 costs a few hundred milliseconds by design).
        let hash = password.map(PasswordHash.init(password:)) ?? current?.first.password
        for db in databases {
            let old = db.users.user(named: name)
            db.users.setUser(User(name: name, password: password == nil ? (old?.password ?? hash) : hash,
                                  adminChannels: old?.adminChannels ?? [], adminRoles: byItself ? (old?.adminRoles ?? []) : roles,
                                  disabled: old?.disabled ?? false, email: old?.email))
            // A new password logs the user out everywhere, as the `_user` API's does.
            if password != nil, old != nil { try await db.deleteSessions(of: name) }
            try await db.savePrincipals()
        }
        if server.logKeys.contains("Auth") { server.logger.info("Auth: user \(name) written through _users") }
        guard let written = server.userRecords(name) else { throw CouchError.notFound("missing") }
        return try jsonResponse(["ok": true, "id": .string(id), "rev": .string(written.revision)], status: .created,
                                headers: [.eTag: "\"\(written.revision)\""])
    }
}
