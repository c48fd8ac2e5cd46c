import Foundation
import HTTPTypes
import Hummingbird
@_spi(Replication) @_spi(Server) import Settee

extension CouchAPI {
    // MARK: - _session

    /// `/_session` (CouchDB: cookie `AuthSession`) and `/{db}/_session` (Sync Gateway: cookie
    /// `SyncGatewaySession`): GET tells who the request is, POST logs in with a name and password
    /// (JSON or a form), DELETE logs out. On the admin port, `POST /{db}/_session {"name", "ttl"}`
    /// makes a session for a user without its password, and `GET|DELETE /{db}/_session/{id}`.
    func session(_ call: inout Call, db: ServedDatabase?, sessionID: String? = nil) async throws -> Response {
        let cookieName = db == nil ? Self.couchCookie : Self.gatewayCookie
        let cookiePath = db.map { "/\($0.name)" } ?? "/"
        if let sessionID {
            try requireAdmin(call)
            guard let db else { throw CouchError.notFound() }
            switch call.request.method {
            case .get, .head:
                guard let (session, _) = try await db.principals.session(sessionID) else { throw CouchError.notFound("missing") }
                return try jsonResponse(["session_id": .string(sessionID), "user": .string(session.user),
                                         "expires": .string(ISO8601DateFormatter().string(from: session.expires))])
            case .delete:
                try await db.principals.deleteSession(sessionID)
                return try jsonResponse(["ok": true])
            default: throw CouchError.methodNotAllowed("DELETE,GET,HEAD")
            }
        }
        // The admin port with administrators configured: their own sessions, as CouchDB's
        // server admins log in.
        if isAdmin, db == nil, !server.adminCredentials.isEmpty {
            return try await administratorSession(&call)
        }
        switch call.request.method {
        case .get, .head:
            // CouchDB's handler names: Basic credentials are "default", a session "cookie".
            let via: JSONValue = call.request.headers[.authorization] == nil && Self.sessionCookie(call.request.headers[.cookie]) != nil ? "cookie" : "default"
            var context = try userContext(call.principal, db, authenticated: via, verifiedIn: call.verifiedIn)
            // An administrator who gave credentials (the admin port then requires them) is named,
            // as CouchDB names a server admin.
            if call.principal == .admin, let name = call.administrator, case .object(var ctx)? = context["userCtx"] {
                ctx["name"] = .string(name)
                context["userCtx"] = .object(ctx)
                context["info"] = ["authentication_handlers": ["default", "cookie"], "authenticated": "default"]
            }
            return try jsonResponse(.object(context))
        case .post:
            let (name, password, ttl) = try await loginFields(&call)
            if call.principal == .admin, let db {
                // Sync Gateway's admin-made session: no password needed, `ttl` seconds long.
                guard let user = try db.principals.user(named: name), !user.isGuest else { throw CouchError.notFound("no such user") }
                let (id, session) = try await db.principals.createSession(for: user.name, ttl: ttl ?? ServedDatabase.sessionTTL)
                return try jsonResponse(["session_id": .string(id), "cookie_name": .string(cookieName),
                                         "expires": .string(ISO8601DateFormatter().string(from: session.expires))])
            }
            // A server-wide login (`/_session`) opens the session in every database whose user
            // this is, under one ID, so the cookie works wherever those credentials would.
            let guess = ClientThrottle.key(client: call.client.key, name: name)
            try server.passwordGuesses.check(guess)
            var sessionID: String?
            var loggedIn: User?
            var verified: Set<String> = []
            for candidate in db.map({ [$0] }) ?? databases(for: []) where try candidate.principals.user(named: name) != nil {
                guard let password, let user = try await candidate.principals.authenticate(name: name, password: password) else { continue }
                sessionID = try await candidate.principals.createSession(for: user.name, id: sessionID, ttl: ServedDatabase.sessionTTL).id
                loggedIn = loggedIn ?? user
                verified.insert(candidate.name)
                if server.logKeys.contains("Auth") { server.log(.info, "Auth: session for \(user.name) in \(candidate.name)") }
            }
            if let id = sessionID, let user = loggedIn {
                server.passwordGuesses.succeeded(guess)
                server.authentications.count(true)
                var body = try userContext(.user(user.name), db, authenticated: "default", verifiedIn: verified)
                body["name"] = .string(user.name)
                body["roles"] = .array(user.adminRoles.map(JSONValue.string))
                return try jsonResponse(.object(body), headers: [.setCookie: Self.setCookie(cookieName, id, path: cookiePath, maxAge: Int(ServedDatabase.sessionTTL)).value])
            }
            if password != nil { try await PasswordHasher.shared.spendCheckTime() }
            server.passwordGuesses.failed(guess)
            server.authentications.count(false)
            throw CouchError(.unauthorized, "unauthorized", "Name or password is incorrect.")
        case .delete:
            if let (_, id) = Self.sessionCookie(call.request.headers[.cookie]) {
                for candidate in db.map({ [$0] }) ?? databases(for: []) { try await candidate.principals.deleteSession(id) }
            }
            return try jsonResponse(["ok": true], headers: [.setCookie: Self.setCookie(cookieName, "", path: cookiePath, maxAge: 0).value])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST")
        }
    }

    /// `/_session` on the admin port when `adminUsers` names administrators: POST logs one in
    /// with its name and password (JSON or a form) and sets `AuthSession`, which then stands for
    /// its credentials on this port; GET tells who the request is; DELETE logs out.
    private func administratorSession(_ call: inout Call) async throws -> Response {
        func context(_ name: String?, via: JSONValue) -> JSONValue {
            ["ok": true, "userCtx": ["name": name.map(JSONValue.string) ?? .null, "roles": name == nil ? [] : ["_admin"]],
             "info": ["authentication_handlers": ["default", "cookie"], "authenticated": name == nil ? .null : via]]
        }
        switch call.request.method {
        case .get, .head:
            let viaCookie = call.request.headers[.authorization] == nil
            return try jsonResponse(context(call.administrator, via: viaCookie ? "cookie" : "default"))
        case .post:
            let (name, password, _) = try await loginFields(&call, formsOnAdmin: true)
            let guess = ClientThrottle.key(client: call.client.key, name: "_admin:" + name)
            try server.passwordGuesses.check(guess)
            guard let password, server.adminCredentials.matches(name: name, password: password) else {
                server.passwordGuesses.failed(guess)
                server.authentications.count(false)
                if server.logKeys.contains("Auth") { server.log(.info, "Auth: administrator login refused") }
                throw CouchError(.unauthorized, "unauthorized", "Name or password is incorrect.")
            }
            server.passwordGuesses.succeeded(guess)
            server.authentications.count(true)
            let id = server.adminSessions.create(for: name)
            if server.logKeys.contains("Auth") { server.log(.info, "Auth: administrator \(name) logged in") }
            return try jsonResponse(["ok": true, "name": .string(name), "roles": ["_admin"]],
                                    headers: [.setCookie: AdministratorSessions.cookie(id).value])
        case .delete:
            if let (cookieName, id) = Self.sessionCookie(call.request.headers[.cookie]), cookieName == Self.couchCookie {
                server.adminSessions.delete(id)
            }
            return try jsonResponse(["ok": true], headers: [.setCookie: AdministratorSessions.cookie("").value])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST")
        }
    }

    /// CouchDB's `userCtx` (and Sync Gateway's channels when a database is named).
    private func userContext(_ principal: Principal, _ db: ServedDatabase?, authenticated via: JSONValue,
                             verifiedIn: Set<String>) throws -> [String: JSONValue] {
        var context: [String: JSONValue] = ["name": .null, "roles": []]
        var authenticated: JSONValue = .null
        switch principal {
        case .admin:
            context["roles"] = ["_admin"]
            authenticated = "admin_port"
        case .user(let name) where name != User.guestName:
            context["name"] = .string(name)
            authenticated = via
            if let db, let user = try db.principals.user(named: name) {
                let access = try db.access(for: name)
                context["roles"] = .array(Set(access.roles.keys).union(user.adminRoles).sorted().map(JSONValue.string))
                context["channels"] = Self.channelsJSON(access)
            } else if db == nil {
                // Server-wide: the user's roles in the databases whose user its credentials
                // proved (the same name elsewhere may be someone else).
                var roles: Set<String> = []
                for db in server.userDatabases where verifiedIn.contains(db.name) { roles.formUnion(try db.principals.user(named: name)?.adminRoles ?? []) }
                context["roles"] = .array(roles.sorted().map(JSONValue.string))
            }
        case .user:
            if let db, let guest = try db.principals.user(named: User.guestName), !guest.disabled {
                context["channels"] = Self.channelsJSON(try db.access(for: guest.name))
            }
        }
        return ["ok": true, "userCtx": .object(context),
                "info": ["authentication_handlers": ["default", "cookie"], "authenticated": authenticated]]
    }

    /// Sync Gateway's `userCtx.channels`: each readable channel with the sequence it was granted at.
    static func channelsJSON(_ access: UserAccess) -> JSONValue {
        .object(access.channels.mapValues { .int(Int64(clamping: $0)) })
    }

    /// `name`, `password` and (for an admin-made session) `ttl` in seconds, from a JSON or form body.
    /// A form is read on the public port, and on the admin port for an administrator's login
    /// (`formsOnAdmin`: a form that logs in changes nothing another site could want).
    private func loginFields(_ call: inout Call, formsOnAdmin: Bool = false) async throws -> (String, String?, TimeInterval?) {
        let type = try Self.contentType(call.request.headers)?.lowercased() ?? ""
        var fields: [String: JSONValue] = [:]
        if type.hasPrefix("application/x-www-form-urlencoded") && (!isAdmin || formsOnAdmin) {
            let buffer = try await call.collectBody(upTo: 64 << 10)
            for (k, v) in try Self.queryParameters(String(decoding: buffer.readableBytesView, as: UTF8.self)) { fields[k] = .string(v) }
        } else {
            fields = try await jsonBody(&call, limit: 64 << 10)
        }
        guard case .string(let name)? = fields["name"], !name.isEmpty else {
            throw CouchError.badRequest("A name is required")
        }
        var password: String?
        if let p = fields["password"] {
            guard case .string(let s) = p else { throw CouchError.badRequest("password must be a string") }
            password = s
        }
        var ttl: TimeInterval?
        if let t = fields["ttl"] {
            guard let seconds = t.doubleValue ?? t.stringValue.flatMap(Double.init), seconds >= 1, seconds <= 10 * 365 * 86400 else {
                throw CouchError.badRequest("ttl must be a number of seconds, at least 1")
            }
            ttl = seconds.rounded()
        }
        return (name, password, ttl)
    }

    // MARK: - _user, _role (admin port)

    /// Sync Gateway's admin API for users and roles: GET lists, POST and PUT write, GET reads
    /// (with the computed channels, never the password), DELETE removes. Changes take effect at
    /// once and are kept with the database.
    func principals(_ call: inout Call, _ db: ServedDatabase, kind: String, name: String?) async throws -> Response {
        let isUser = kind == "_user"
        let method = call.request.method
        let store = db.principals
        func exists(_ n: String) throws -> Bool { isUser ? try store.user(named: n) != nil : try store.role(named: n) != nil }
        guard let name else {
            switch method {
            case .get, .head:
                return try jsonResponse(.array((isUser ? try store.userNames() : try store.roleNames()).map(JSONValue.string)))
            case .post:
                let body = try await jsonBody(&call, limit: 1 << 20)
                guard case .string(let n)? = body["name"], !n.isEmpty else { throw CouchError.badRequest("name is required") }
                if try exists(n) { throw CouchError(.conflict, "conflict", "\(isUser ? "User" : "Role") \(n) exists") }
                try await writePrincipal(db, isUser: isUser, name: n, body: body)
                return try jsonResponse(["ok": true], status: .created)
            default: throw CouchError.methodNotAllowed("GET,HEAD,POST")
            }
        }
        switch method {
        case .get, .head:
            if isUser {
                guard let user = try store.user(named: name) else { throw CouchError.notFound("missing") }
                let access = try db.access(for: user.name)
                var o: [String: JSONValue] = [
                    "name": .string(user.name),
                    "admin_channels": .array(user.adminChannels.map(JSONValue.string)),
                    "all_channels": .array(access.channelNames.map(JSONValue.string)),
                    "admin_roles": .array(user.adminRoles.map(JSONValue.string)),
                    "roles": .array(access.roles.keys.sorted().map(JSONValue.string)),
                    "disabled": .bool(user.disabled),
                ]
                if let email = user.email { o["email"] = .string(email) }
                return try jsonResponse(.object(o))
            }
            guard let role = try store.role(named: name) else { throw CouchError.notFound("missing") }
            return try jsonResponse(["name": .string(role.name), "admin_channels": .array(role.adminChannels.map(JSONValue.string)),
                                     "all_channels": .array((role.adminChannels + ["!"]).sorted().map(JSONValue.string))])
        case .put:
            let body = try await jsonBody(&call, limit: 1 << 20)
            if case .string(let n)? = body["name"], n != name { throw CouchError.badRequest("name does not match the URL") }
            let existed = try exists(name)
            try await writePrincipal(db, isUser: isUser, name: name, body: body)
            return try jsonResponse(["ok": true], status: existed ? .ok : .created)
        case .delete:
            let removed = isUser ? try await store.deleteUser(named: name) : try await store.deleteRole(named: name)
            guard removed else { throw CouchError.notFound("missing") }
            db.principalChanged(user: isUser ? name : nil)
            return try jsonResponse(["ok": true])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    private func kind(_ isUser: Bool) -> String { isUser ? "_user" : "_role" }

    /// Validates and stores a user or role from its JSON (the configuration's keys, plus `name`;
    /// for a user, `password_hash` in the stored form may stand for `password`: a user moved
    /// from another server keeps its password without it being known here).
    private func writePrincipal(_ db: ServedDatabase, isUser: Bool, name: String, body: [String: JSONValue]) async throws {
        var fields = body
        fields.removeValue(forKey: "name")
        // Computed members a client may send back from a GET: ignored.
        for computed in ["all_channels", "roles"] { fields.removeValue(forKey: computed) }
        let store = db.principals
        // A new principal's name is checked; one made before the rules keeps its name.
        let exists = isUser ? try store.user(named: name) != nil : try store.role(named: name) != nil
        if !exists, let problem = PrincipalName.problem(name, kind: isUser ? .user : .role) { throw CouchError.badRequest(problem) }
        if isUser {
            var madeHash: PasswordHash?
            if let h = fields.removeValue(forKey: "password_hash") {
                guard name != User.guestName, fields["password"] == nil, let hash = PrincipalRecords.decodePasswordHash(h) else {
                    throw CouchError.badRequest(
                        "password_hash is {\"algorithm\": \"pbkdf2-sha256\", \"rounds\": 1000 to 10000000, \"salt\" and \"hash\" in base64}, for a user other than GUEST, without password")
                }
                madeHash = hash
            }
            let reader = ConfigReader(.object(fields), path: "\(kind(isUser)).\(name)")
            let u: ServerConfiguration.UserConfig
            do {
                u = try ServerConfiguration.user(reader, isGuest: name == User.guestName, requirePassword: false)
            } catch {
                throw CouchError.badRequest(error.description)
            }
            let old = try store.user(named: name)
            // A PUT without a password keeps the one stored.
            var password = madeHash ?? old?.password
            if let given = u.password { password = try await PasswordHasher.shared.hash(given) }
            if name != User.guestName && password == nil && !u.disabled {
                throw CouchError.badRequest("a user needs a password")
            }
            // A disabled user, or one given a new password, is logged out everywhere.
            var newPassword = false
            if let given = u.password, let oldHash = old?.password {
                newPassword = try await !PasswordHasher.shared.check(given, against: oldHash)
            } else if let madeHash, let oldHash = old?.password {
                newPassword = madeHash != oldHash
            }
            try await store.saveUser(User(name: name, password: name == User.guestName ? nil : password, adminChannels: u.adminChannels,
                                          adminRoles: u.adminRoles, disabled: u.disabled, email: u.email, grantsFrom: old?.grantsFrom),
                                     endSessions: u.disabled || newPassword)
            db.principalChanged(user: name)
        } else {
            let reader = ConfigReader(.object(fields), path: "\(kind(isUser)).\(name)")
            let r: ServerConfiguration.RoleConfig
            do {
                r = try ServerConfiguration.role(reader)
            } catch {
                throw CouchError.badRequest(error.description)
            }
            try await store.saveRole(Role(name: name, adminChannels: r.adminChannels))
            db.principalChanged(user: nil)
        }
    }
}
