import Crypto
import Foundation
import HTTPTypes
import Hummingbird
@_spi(Replication) @_spi(Server) import Settee

/// CouchDB's `_users` database, over Settee's users: the document `org.couchdb.user:NAME` is
/// the user NAME of the served databases (the configuration's, the `_user` API's, the same
/// records). An administrator's write applies to every served database, so that a user made
/// there logs in with `/_session` and reaches each database as CouchDB's server-wide users do;
/// channels stay each database's (`_user` API, sync function), CouchDB's `roles` are Settee's
/// `admin_roles`.
///
/// Identities are per database (Sync Gateway's model): two databases' users named `bob` may be
/// different people. A user acting on its own document acts on the records its credentials
/// proved (``CouchAPI/Call/verifiedIn``) and sees only their hashes; a change or a deletion is
/// refused while its name also names users of databases its credentials do not open (they
/// are someone else's, or it must prove them too).
///
/// Who may do what, as CouchDB's `_users` rules say: the admin port anything; a user reads and
/// updates its own document (its password, never its roles) and deletes it; anyone else, when
/// `allowSignUp` is set, creates a new user with no roles, in the databases that take sign-ups
/// (`allowSignUp` of the database). Other users' documents are 404; with sign-up off, every
/// write of another user's document is 403, whether the name is taken or not.
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
    func userNames() throws -> [String] {
        var names: Set<String> = []
        for db in userDatabases { names.formUnion(try db.principals.userNames()) }
        return names.subtracting([User.guestName]).sorted()
    }

    /// The user `name` of every database that has one (GUEST is nobody's document).
    func userRecords(_ name: String) throws -> UsersDatabase.Records? {
        guard name != User.guestName else { return nil }
        var records: [(database: String, user: User)] = []
        for db in userDatabases { if let u = try db.principals.user(named: name) { records.append((db.name, u)) } }
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
                return try jsonResponse(["db_name": .string(UsersDatabase.name), "doc_count": .int(Int64(try server.userNames().count)), "doc_del_count": 0,
                                         "update_seq": 0, "committed_update_seq": 0, "purge_seq": 0, "instance_start_time": "0",
                                         "compact_running": false, "disk_format_version": 1, "state": "Online",
                                         "sizes": ["file": 0], "cluster": ["q": 1, "n": 1, "w": 1, "r": 1], "props": .object([:])])
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
        if first.hasPrefix("_"), let answer = try await usersEndpoint(&call, first, rest: rest) { return answer }
        if rest.count == 1, method == .put, !first.hasPrefix("_") {
            // Any other ID is refused with CouchDB's reason (403), not as a missing document.
            let body = try await jsonBody(&call, limit: 1 << 20, anyType: true)
            return try await writeUserDocument(&call, id: first, body: body)
        }
        guard rest.count == 1, first.hasPrefix(UsersDatabase.prefix) else {
            throw CouchError.notFound("_users serves users' documents (org.couchdb.user:NAME), _all_docs, _find, _explain, _index and _bulk_docs")
        }
        switch method {
        case .get, .head:
            let (_, records, _) = try readableUser(call, id: first)
            return try jsonResponse(records.document(id: first), headers: [.eTag: "\"\(records.revision)\""])
        case .put:
            return try await writeUserDocument(&call, id: first, body: try await jsonBody(&call, limit: 1 << 20, anyType: true))
        case .delete:
            let (name, records, whole) = try readableUser(call, id: first)
            guard whole else { throw Self.notAllYours }
            let given = try Self.revision(call.query["rev"], ifMatch: call.request.headers[.ifMatch])
            guard given == records.revision else { throw CouchError.conflict }
            for db in server.userDatabases where records.records.contains(where: { $0.database == db.name }) {
                if try await db.principals.deleteUser(named: name) { db.principalChanged(user: name) }
            }
            let tombstone = "2-" + UsersDatabase.Records.hex(Array(Insecure.MD5.hash(data: Array(records.revision.utf8))))
            return try jsonResponse(["ok": true, "id": .string(first), "rev": .string(tombstone)])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// The user a document ID names, when the request may see it: the admin port (every
    /// record), or the user itself (the records its credentials proved); to anyone else it does
    /// not exist. `whole`: whether those are all the records of the name.
    private func readableUser(_ call: Call, id: String) throws -> (name: String, records: UsersDatabase.Records, whole: Bool) {
        let name = String(id.dropFirst(UsersDatabase.prefix.count))
        guard let records = try server.userRecords(name) else { throw CouchError.notFound("missing") }
        switch call.principal {
        case .admin: return (name, records, true)
        case .user(let u) where u == name:
            let mine = records.records.filter { call.verifiedIn.contains($0.database) }
            guard !mine.isEmpty else { throw CouchError.notFound("missing") }
            return (name, UsersDatabase.Records(records: mine), mine.count == records.records.count)
        case .user: throw CouchError.notFound("missing")
        }
    }

    /// Why a user may not change or delete its document: its name also names users of
    /// databases its credentials do not open.
    static let notAllYours = CouchError.forbidden(
        "This name also names users of databases these credentials do not open: change or delete those on the admin port, or log in to each.")

    /// Creates or updates the user a document describes: an administrator's write in every
    /// served database, a user's own in the databases whose record of it its credentials proved,
    /// a sign-up in the databases that take sign-ups.
    private func writeUserDocument(_ call: inout Call, id: String, body: [String: JSONValue]) async throws -> Response {
        let rev = try await saveUserDocument(call, id: id, body: body)
        return try jsonResponse(["ok": true, "id": .string(id), "rev": .string(rev)], status: .created, headers: [.eTag: "\"\(rev)\""])
    }

    /// Writes a user document (``writeUserDocument(_:id:body:)``); returns its new revision as
    /// the writer sees it.
    func saveUserDocument(_ call: Call, id: String, body: [String: JSONValue], bulk: Bool = false) async throws -> String {
        guard id.hasPrefix(UsersDatabase.prefix) else { throw CouchError.forbidden("Doc ID must be of the form org.couchdb.user:name") }
        let name = String(id.dropFirst(UsersDatabase.prefix.count))
        guard !name.isEmpty, name != User.guestName else { throw CouchError.forbidden("Doc ID must be of the form org.couchdb.user:name") }
        let current = try server.userRecords(name)
        // Who writes: the administrator, the user itself, or someone signing up. With sign-up
        // off, anyone but those two is refused before anything about the name is looked at,
        // so the answer does not say whether it is taken.
        enum Writer { case admin, itself(whole: Bool), signUp }
        let writer: Writer
        switch call.principal {
        case .admin:
            writer = .admin
        case .user(let u) where u == name && current != nil:
            let mine = current?.records.filter { call.verifiedIn.contains($0.database) } ?? []
            guard !mine.isEmpty else { throw Self.notAllYours }
            writer = .itself(whole: mine.count == current?.records.count)
        case .user:
            guard server.configuration.allowSignUp else {
                throw CouchError.forbidden("Sign-up is off on this server (allowSignUp): users are made on the admin port.")
            }
            writer = .signUp
        }
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
        // One of `_bulk_docs`' documents has only its own `_rev`.
        let given = bulk ? try Self.revision(bodyRev, ifMatch: nil)
            : try Self.revision(bodyRev ?? call.query["rev"], ifMatch: call.request.headers[.ifMatch])
        var databases: [ServedDatabase]
        switch writer {
        case .admin:
            // A new user joins every database (CouchDB's users are the server's); a change
            // applies where the user is.
            databases = try server.userDatabases.filter { db in
                guard current != nil else { return true }
                return try db.principals.user(named: name) != nil
            }
        case .itself(let whole):
            guard whole else { throw Self.notAllYours }
            guard roles == current?.first.adminRoles else { throw CouchError.forbidden("Only _admin may edit roles") }
            databases = server.userDatabases.filter { call.verifiedIn.contains($0.name) }
        case .signUp:
            // The name is taken (a sign-up of an existing user is a conflict, as in CouchDB).
            if current != nil { throw CouchError.conflict }
            guard roles.isEmpty else { throw CouchError.forbidden("Only _admin may set roles") }
            databases = server.userDatabases.filter(\.config.allowSignUp)
            guard !databases.isEmpty else {
                throw CouchError.forbidden("No database of this server takes sign-ups (allowSignUp of a database).")
            }
        }
        if current == nil {
            if let problem = PrincipalName.problem(name, kind: .user) { throw CouchError.badRequest(problem) }
        }
        for role in roles {
            if let problem = PrincipalName.problem(role, kind: .role) { throw CouchError.badRequest(problem) }
        }
        if let current {
            guard given == current.revision else { throw CouchError.conflict }
        } else {
            guard given == nil else { throw CouchError.conflict }
            guard password != nil else { throw CouchError.forbidden("doc.password is required for a new user") }
        }
        // A sign-up that would be made costs a hash and a user: counted against its client.
        if case .signUp = writer { try server.signUps.admit(call.client.key) }
        guard !databases.isEmpty else { throw CouchError.notFound("No database is served: a user belongs to databases") }
        // One hash for every database (PBKDF2 costs a few hundred milliseconds by design).
        var hash = current?.first.password
        if let password { hash = try await PasswordHasher.shared.hash(password) }
        for db in databases {
            let old = try db.principals.user(named: name)
            var user = User(name: name, password: password == nil ? (old?.password ?? hash) : hash,
                            adminChannels: old?.adminChannels ?? [], adminRoles: old?.adminRoles ?? [],
                            disabled: old?.disabled ?? false, email: old?.email, grantsFrom: old?.grantsFrom)
            if case .admin = writer { user.adminRoles = roles }
            // What documents granted a name before someone signed up with it is not theirs.
            if case .signUp = writer { user.grantsFrom = try db.database.lastSequence }
            // A new password logs the user out everywhere, as the `_user` API's does.
            try await db.principals.saveUser(user, endSessions: password != nil && old != nil)
            db.principalChanged(user: name)
        }
        if server.logKeys.contains("Auth") { server.log(.info, "Auth: user \(name) written through _users") }
        guard let written = try server.userRecords(name) else { throw CouchError.notFound("missing") }
        let shown = call.principal == .admin ? written
            : UsersDatabase.Records(records: written.records.filter { r in databases.contains { $0.name == r.database } })
        return shown.revision
    }
}
