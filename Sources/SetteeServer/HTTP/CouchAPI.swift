import Foundation
import HTTPTypes
import Hummingbird
import SetteeHTTP
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
@_spi(Replication) @_spi(Server) import Settee

/// CouchDB's HTTP API over the server's databases, on one port (public or admin).
///
/// Paths are split and percent-decoded here rather than by a router: CouchDB's paths are
/// irregular (`/{db}/_design/{name}`, `/{db}/_local/{id}`, IDs with encoded `/`), and each segment
/// must be decoded exactly once.
struct CouchAPI: HTTPResponder {
    typealias Context = ServerRequestContext
    let server: SetteeServer
    let isAdmin: Bool

    /// What one request carries past routing.
    struct Call {
        var request: Request
        /// The path's segments; a partition's request (`/{db}/_partition/{p}/…`) is read as the
        /// database's own with `partition` in its query.
        var path: [String]
        var query: [String: String]
        let principal: Principal
        let started: ContinuousClock.Instant
        /// Who sent it, as the throttles count clients (``ServerRequestContext/clientKey(_:)``).
        var client = ClientAddress(key: "unknown")
        /// How long reading the request's body took (`X-CouchDB-Body-Time`).
        var bodyTime = BodyTime()
        /// The administrator an admin-port request authenticated as (none without `adminUsers`).
        var administrator: String?
        /// The databases whose user of the principal's name the request's credentials proved
        /// (its password, or a session of that database): a name proves nothing in another
        /// database, where it may be someone else's. Empty for GUEST and the admin port.
        var verifiedIn: Set<String> = []
        /// A keyspace path's collection that the database does not have (`db.store.tasks`):
        /// answered 404 to whoever may read the database, as the database's own answer otherwise.
        var missingKeyspace: String?
        /// A keyspace path's named collection that is served: the request is its.
        var keyspace: ServedDatabase?

        /// The request's body, at most `limit` bytes, its reading timed.
        mutating func collectBody(upTo limit: Int) async throws -> ByteBuffer {
            let start = ContinuousClock.now
            defer { bodyTime.add(ContinuousClock.now - start) }
            return try await request.collectBody(upTo: limit)
        }
    }

    /// Milliseconds spent reading a request's body, shared by the request's handler and the
    /// response's headers. Not thread-safe: one request's task.
    final class BodyTime {
        private(set) var milliseconds: Int64 = 0
        func add(_ d: Duration) {
            let (seconds, attoseconds) = d.components
            // A duration of a body read is far below Int64's range in milliseconds.
            milliseconds += min(seconds, 1 << 40) * 1000 + attoseconds / 1_000_000_000_000_000
        }
    }

    var realm: String { "Settee" }

    func respond(to request: Request, context: Context) async throws -> Response {
        let started = ContinuousClock.now
        let bodyTime = BodyTime()
        let requestID = Self.requestID(request.headers[Self.requestIDHeader])
        let client = ClientAddress(channel: context.channel)
        var response = await answer(request, client: client, bodyTime: bodyTime, started: started)
        // Every answer says which request it is (a client's own ID echoed) and how long its
        // body took to arrive, as CouchDB's do.
        // Appended: no answer sets them before this (a subscript would search the fields first).
        response.headers.append(HTTPField(name: Self.requestIDHeader, value: requestID))
        response.headers.append(HTTPField(name: Self.bodyTimeHeader, value: bodyTime.milliseconds == 0 ? "0" : String(bodyTime.milliseconds)))
        if request.method == .connect {
            // The HTTP decoder reads what follows a CONNECT as a tunnel's bytes, never as another
            // request: the connection ends with this answer instead of idling until its timeout
            // (connections held so would fill the listener).
            response.headers[.connection] = "close"
            let channel = context.channel
            channel.close(mode: .input).whenFailure { _ in
                channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
            }
        }
        return response
    }

    static let requestIDHeader = HTTPField.Name("X-Couch-Request-ID")!
    static let bodyTimeHeader = HTTPField.Name("X-CouchDB-Body-Time")!
    static let methodOverrideHeader = HTTPField.Name("X-HTTP-Method-Override")!

    /// A client's request ID when it is one CouchDB would echo (at most 36 letters, digits, `-`
    /// and `_`: nothing that could forge a header or a log line), else a new random one.
    static func requestID(_ given: String?) -> String {
        if let given, !given.isEmpty, given.utf8.count <= 36, given.utf8.allSatisfy({ b in
            (UInt8(ascii: "a") ... UInt8(ascii: "z")).contains(b | 0x20) || (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(b)
                || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
        }) {
            return given
        }
        return newRequestID()
    }

    /// Counts the request IDs this process made up, from a random start.
    private static let requestCounter = Atomic<UInt64>(UInt64.random(in: 0 ..< 1 << 40))

    /// A new request ID: ten hexadecimal digits, as CouchDB's. The counter taken through a
    /// bijection of 40 bits (odd multipliers and xor-shifts, each invertible modulo 2^40), so
    /// that no two of 2^40 requests share one and consecutive ones look unrelated; with no
    /// system call and no formatting, which cost a tenth of a GET when the ID was five random
    /// bytes formatted one by one. An ID names a request in logs; it guards nothing.
    static func newRequestID() -> String {
        let mask: UInt64 = (1 << 40) - 1
        var x = requestCounter.add(1, ordering: .relaxed).newValue & mask
        x = (x &* 0x9E37_79B9_7F4A_7C15) & mask
        x ^= x >> 21
        x = (x &* 0xBF58_476D_1CE4_E5B9) & mask
        x ^= x >> 19
        return String(unsafeUninitializedCapacity: 10) { out in
            for k in 0 ..< 10 { out[k] = hexDigits[Int((x >> UInt64(36 - 4 * k)) & 0xF)] }
            return 10
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private func answer(_ request: Request, client: ClientAddress, bodyTime: BodyTime, started: ContinuousClock.Instant) async -> Response {
        var status = HTTPResponse.Status.internalServerError
        defer {
            log(request, status: status, since: started)
            server.metrics.request(admin: isAdmin, route: ServerMetrics.routeFamily(request.uri.path), method: request.method.rawValue,
                                   status: status.code, duration: .now - started)
        }
        do {
            var response = try await route(request, client: client, bodyTime: bodyTime)
            status = response.status
            if request.method == .head {
                // HEAD answers GET's headers, its Content-Length included, without its body.
                response = response.createHeadResponse()
            }
            return response
        } catch let e as CouchError {
            status = e.status
            return e.response
        } catch let e as WireError {
            let c = CouchError(HTTPResponse.Status(code: e.status), e.error, e.reason)
            status = c.status
            return c.response
        } catch let e as SetteeError where e.code == .notOpen && databaseWasDeleted(request) {
            // The database was deleted while this request was in flight: answered as for a
            // database that does not exist (CouchDB's answer), not as a server failure.
            let c = CouchError.notFound("Database does not exist.")
            status = c.status
            return c.response
        } catch let e as SetteeError {
            let c = CouchError(e)
            status = c.status
            if c.status == .internalServerError || e.code == .diskFull {
                server.log(.error, "\(request.method) \(request.uri.path): \(e.code): \(e.message)")
            }
            return c.response
        } catch let e as HTTPError where e.status == .contentTooLarge {
            status = .contentTooLarge
            return CouchError.tooLarge("the request body is larger than the limit").response
        } catch is NIOTooManyBytesError {
            status = .contentTooLarge
            return CouchError.tooLarge("the request body is larger than the limit").response
        } catch let e as HTTPParserError {
            // The body did not parse as HTTP (a malformed chunk): the client's error.
            status = .badRequest
            return CouchError.badRequest("malformed HTTP request body: \(e)").response
        } catch {
            server.log(.error, "\(request.method) \(request.uri.path): \(error)")
            return CouchError(.internalServerError, "internal_server_error", "\(type(of: error))").response
        }
    }

    /// Whether the database the request's path names is no longer served.
    private func databaseWasDeleted(_ request: Request) -> Bool {
        guard let segment = request.uri.path.split(separator: "/", omittingEmptySubsequences: true).first,
              let name = String(segment).removingPercentEncoding, !name.hasPrefix("_") else { return false }
        return server.database(named: (try? Self.keyspace(name))??.database ?? name) == nil
    }

    /// The `HTTP` log key: method, path, status, duration; never a credential (the query is left
    /// out, and no header is logged).
    private func log(_ request: Request, status: HTTPResponse.Status, since started: ContinuousClock.Instant) {
        guard server.logKeys.contains("HTTP") else { return }
        let ms = (ContinuousClock.now - started).components
        let millis = Double(ms.seconds) * 1000 + Double(ms.attoseconds) / 1e15
        server.log(.info, "HTTP \(isAdmin ? "admin " : "")\(request.method) \(request.uri.path) \(status.code) \(String(format: "%.1f", millis)) ms")
    }

    // MARK: - Routing

    private func route(_ incoming: Request, client: ClientAddress, bodyTime: BodyTime) async throws -> Response {
        var request = incoming
        // Clients that can only POST name the method they mean (CouchDB's rule: on a POST only,
        // and only these methods). A page of another site cannot set this header unasked.
        if request.method == .post, let override = request.headers[Self.methodOverrideHeader],
           ["GET", "HEAD", "POST", "PUT", "DELETE", "COPY"].contains(override), let method = HTTPRequest.Method(override) {
            var head = request.head
            head.method = method
            request = Request(head: head, body: request.body)
        }
        var path = try Self.segments(request.uri.path)
        // A keyspace (`db._default._default`, `db.store.tasks`) is its database's path from here.
        let keyspace = try path.first.flatMap(Self.keyspace)
        if let keyspace {
            path[0] = keyspace.database
            if keyspace.isDefault, path.count == 1, request.method != .get, request.method != .head {
                // A collection's path does not create or delete its database.
                throw CouchError.methodNotAllowed("GET,HEAD")
            }
        }
        var access = AdminAccess.open
        if isAdmin {
            try checkAdminRequest(request)
            access = try checkAdministrator(request, path: path, client: client)
        } else {
            try checkPublicRequest(request)
        }
        let query = try Self.queryParameters(request.uri.query)
        let authentication = try await authenticate(request, path: path, client: client)
        var (principal, refreshedCookie) = (authentication.principal, authentication.cookie)
        var administrator: String?
        switch access {
        case .open: break
        case .administrator(let name, let refreshed):
            administrator = name
            refreshedCookie = refreshed
        case .anonymousSession:
            principal = .user(User.guestName)
        }
        var call = Call(request: request, path: path, query: query, principal: principal, started: .now, bodyTime: bodyTime)
        if let keyspace, !keyspace.isDefault {
            if let served = server.database(named: keyspace.database)?.collection(scope: keyspace.scope, name: keyspace.collection) {
                call.keyspace = served
            } else {
                call.missingKeyspace = keyspace.name
            }
        }
        call.administrator = administrator
        call.client = client
        if case .user = principal { call.verifiedIn = authentication.verifiedIn }
        var response = try await dispatch(&call)
        if let refreshedCookie { response.headers.append(refreshedCookie) }
        return response
    }

    private func dispatch(_ call: inout Call) async throws -> Response {
        let path = call.path
        let method = call.request.method

        guard let first = path.first else { return try welcome(method) }
        if first.hasPrefix("_") {
            switch first {
            case "_up": try allow(method, [.get, .head]); return try jsonResponse(["status": "ok"])
            case "_all_dbs": try allow(method, [.get, .head]); return try allDatabases(call)
            case "_uuids": try allow(method, [.get, .head]); return try uuids(call)
            case "_session": return try await session(&call, db: nil)
            case "_replicate": return try await replicate(&call)
            case "_db_updates": return try await databaseUpdates(call)
            case "_metrics":
                try requireAdmin(call)
                try allow(method, [.get, .head])
                return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: try server.metrics.scrape(server))))
            case "_admin":
                try requireAdmin(call)
                return try await AdminPages(server: server).respond(&call)
            case "_users": return try await usersDatabase(&call)
            case "_replicator": break   // a database of the server's own, served as any other
            case "_global_changes":
                // What CouchDB keeps there is `/_db_updates`' (Formats/http-api.md).
                throw CouchError.notFound("Database does not exist.")
            default:
                // As CouchDB: a name no endpoint has is a database that does not exist, and one
                // that cannot be made (`PUT`).
                guard method == .put else { throw missingDatabase(call) }
                throw CouchError.illegalDatabaseName(first)
            }
        }
        guard ServerConfiguration.isValidDatabaseName(first) || first == ReplicatorDocuments.databaseName else {
            throw CouchError.illegalDatabaseName(first)
        }
        // The server's own database is the admin port's.
        if first == ReplicatorDocuments.databaseName { try requireAdmin(call) }
        if let missing = call.missingKeyspace {
            guard let db = server.database(named: first) else { throw missingDatabase(call) }
            try requireUser(call, db)
            throw CouchError.notFound("keyspace \(missing) not found")
        }
        if let collection = call.keyspace, path.count == 1 {
            // A collection's path does not create or delete it, nor post to it.
            try allow(method, [.get, .head])
            try requireUser(call, collection)
            return try databaseInfo(collection, reader: try Reader(collection, call.principal))
        }
        if path.count == 1 { return try await databaseRoot(&call, name: first) }
        guard let db = call.keyspace ?? server.database(named: first) else { throw missingDatabase(call) }
        let rest = Array(path.dropFirst())
        // Logging in is open to anyone; the admin API is the admin port's.
        switch rest[0] {
        case "_session": return try await session(&call, db: db, sessionID: rest.count > 1 ? rest[1] : nil)
        case "_user", "_role":
            try requireAdmin(call)
            return try await principals(&call, db, kind: rest[0], name: rest.count > 1 ? rest[1] : nil)
        default: break
        }
        try requireUser(call, db)
        switch rest[0] {
        case "_all_docs": return try await allDocs(&call, db)
        case "_design_docs": return try await allDocs(&call, db, prefix: "_design/")
        case "_local_docs": return try await localDocs(&call, db)
        case "_partition": return try await partitionPath(&call, db, rest)
        case "_find": try allow(method, [.post]); return try await find(&call, db)
        case "_explain": try allow(method, [.post]); return try await explain(&call, db)
        case "_index": return try await index(&call, db, rest)
        case "_bulk_docs": try allow(method, [.post]); return try await bulkDocs(&call, db)
        case "_bulk_get": try allow(method, [.post]); return try await bulkGet(&call, db)
        case "_changes": try allow(method, [.get, .post, .head]); return try await changes(&call, db)
        case "_revs_diff": try allow(method, [.post]); return try await revsDiff(&call, db, missingRevs: false)
        case "_missing_revs": try allow(method, [.post]); return try await revsDiff(&call, db, missingRevs: true)
        case "_ensure_full_commit":
            try allow(method, [.post])
            return try jsonResponse(["ok": true, "instance_start_time": "0"], status: .created)
        case "_revs_limit":
            try allow(method, [.get, .head, .put])
            if method == .put {
                // CouchDB's database property: an admin's, stored with the database (it then
                // wins over the configuration's `revs_limit`, which is the default).
                try requireAdmin(call)
                // The range is the library's (Database.setMaxRevTreeDepth: 400 outside it).
                guard case .int(let n) = try await jsonValueBody(&call, limit: 1 << 10), let depth = Int(exactly: n) else {
                    throw CouchError.badRequest("Invalid revs_limit: a positive integer is expected")
                }
                try db.database.setMaxRevTreeDepth(depth)
                return try jsonResponse(["ok": true])
            }
            return try jsonResponse(.int(Int64(try db.database.maxRevTreeDepth)))
        case "_purge":
            try allow(method, [.post])
            try requireAdmin(call)
            return try await purge(&call, db)
        case "_resync":
            try allow(method, [.post])
            try requireAdmin(call)
            return try await resync(db)
        case "_compact":
            try allow(method, [.post])
            try requireAdmin(call)
            // `_compact/{ddoc}` names a design document, which must be there (CouchDB's 404).
            if rest.count > 1 {
                guard let ddoc = try await db.database.document(withID: "_design/" + rest[1]), !ddoc.isDeleted else {
                    throw CouchError.notFound("missing")
                }
            }
            // Counted from the request until the compaction ends, so that a client polling
            // `compact_running` sees it running and then done.
            db.compactionsRunning.add(1, ordering: .sequentiallyConsistent)
            let database = db.database
            let logger = server.logger
            Task.detached {
                defer { db.compactionsRunning.subtract(1, ordering: .sequentiallyConsistent) }
                do {
                    _ = try await database.compact()
                    db.counters.compactions.add(1, ordering: .relaxed)
                } catch {
                    logger.error("\("compaction of \(db.name): \(error)".escapedForLog)")
                }
            }
            return try jsonResponse(["ok": true], status: .accepted)
        case "_security":
            try allow(method, [.get, .head, .put])
            if method == .put {
                // Administration is the admin port's (a database's admins there, CouchDB's
                // server admins alike).
                try requireAdmin(call)
                let object = try SecurityObject(json: try await jsonValueBody(&call, limit: 1 << 20))
                try await (db.parent ?? db).setSecurity(object)
                return try jsonResponse(["ok": true])
            }
            return try jsonResponse(db.securityObject.json)
        case "_local":
            // CouchDB's words for a local document's path without its ID, or with more after it.
            guard rest.count >= 2 else { throw Self.invalidLocalID }
            guard rest.count == 2 else { throw Self.localAttachment }
            return try await localDocument(&call, db, id: rest[1])
        case let id where id.hasPrefix("_local/"):
            // `_local%2Fname`: the ID decoded from one segment, as CouchDB reads it.
            guard id.utf8.count > 7 else { throw Self.invalidLocalID }
            guard rest.count == 1 else { throw Self.localAttachment }
            return try await localDocument(&call, db, id: String(id.dropFirst(7)))
        case "_temp_view":
            // CouchDB 3's answer: temporary views were removed (a view is a design document's).
            throw CouchError(.gone, "gone", "Temporary views are not supported")
        case "_view_cleanup":
            try allow(method, [.post])
            try requireAdmin(call)
            return try await viewCleanup(db)
        case "_design":
            guard rest.count >= 2 else { throw CouchError.notFound() }
            let id = "_design/" + rest[1]
            if rest.count == 2 { return try await document(&call, db, id: id) }
            return try await designPath(&call, db, id: id, rest: Array(rest.dropFirst(2)))
        case let id where id.hasPrefix("_design/"):
            // `_design%2Fname`: the ID decoded from one segment.
            if rest.count == 1 { return try await document(&call, db, id: id) }
            return try await designPath(&call, db, id: id, rest: Array(rest.dropFirst()))
        default:
            if rest[0].hasPrefix("_") {
                throw CouchError(.badRequest, "illegal_docid", "Only reserved document ids may start with underscore.")
            }
            if rest.count == 1 { return try await document(&call, db, id: rest[0]) }
            return try await attachment(&call, db, id: rest[0], name: rest.dropFirst().joined(separator: "/"))
        }
    }

    static let invalidLocalID = CouchError.badRequest("Invalid _local document id.")
    static let localAttachment = CouchError.badRequest("_local documents do not accept attachments.")

    /// What follows a design document's ID: `_view/{view}`, `_info`, or an attachment's name.
    func designPath(_ call: inout Call, _ db: ServedDatabase, id: String, rest: [String]) async throws -> Response {
        switch rest[0] {
        case "_view":
            guard rest.count == 2 else { throw CouchError.notFound("missing_named_view") }
            return try await view(&call, db, ddoc: id, name: rest[1])
        case "_info" where rest.count == 1:
            return try await designInfo(call, db, ddoc: id)
        case "_show", "_list", "_update":
            return try await render(&call, db, ddoc: id, rest: rest)
        case "_rewrite", "_search", "_nouveau", "_geo":
            // CouchDB's design functions this server does not run: said so, rather than read as
            // an attachment's name.
            throw CouchError.notFound("\(rest[0]) is not served by Settee: design documents run views, shows, lists, updates, filters and validate_doc_update")
        default:
            return try await attachment(&call, db, id: id, name: rest.joined(separator: "/"))
        }
    }

    func allow(_ method: HTTPRequest.Method, _ allowed: [HTTPRequest.Method]) throws {
        guard allowed.contains(method) else {
            throw CouchError.methodNotAllowed(allowed.map(\.rawValue).joined(separator: ","))
        }
    }

    /// Splits a raw path into percent-decoded segments; `//` and a trailing `/` add nothing.
    static func segments(_ raw: String) throws -> [String] {
        try raw.split(separator: "/", omittingEmptySubsequences: true).map { part in
            // Most segments hold no escape: Foundation's decoding is slow to find that out.
            if !part.utf8.contains(UInt8(ascii: "%")) { return String(part) }
            guard let decoded = String(part).removingPercentEncoding else {
                throw CouchError.badRequest("the path is not valid percent-encoded UTF-8")
            }
            return decoded
        }
    }

    /// Query parameters, percent-decoded (`+` is a space, as in forms); the last of a repeated key wins.
    static func queryParameters(_ raw: String?) throws -> [String: String] {
        guard let raw, !raw.isEmpty else { return [:] }
        var out: [String: String] = [:]
        for pair in raw.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) throws -> String {
                if !s.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { return String(s) }
                guard let d = s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding else {
                    throw CouchError.badRequest("a query parameter is not valid percent-encoded UTF-8")
                }
                return d
            }
            out[try decode(parts[0])] = parts.count > 1 ? try decode(parts[1]) : ""
        }
        return out
    }

    // MARK: - Authentication

    /// Who a request acts as: the principal, a cookie to set when its session was extended, and
    /// the databases whose user of that name its credentials proved.
    struct Authentication {
        var principal: Principal
        var cookie: HTTPField?
        var verifiedIn: Set<String> = []
    }

    /// Who the request acts as. The admin port needs no credentials. On the public port: Basic
    /// credentials, else a session cookie, checked against the database the path names (on a
    /// server-wide path, against every database that has a user of that name: each one whose
    /// record the credentials prove is one the request may act in, and no other); without
    /// either, GUEST (whether GUEST is enabled is checked per database).
    private func authenticate(_ request: Request, path: [String], client: ClientAddress) async throws -> Authentication {
        if isAdmin { return Authentication(principal: .admin) }
        let candidates = databases(for: path)
        if let header = request.headers[.authorization] {
            guard let (name, password) = Self.basicCredentials(header) else {
                throw CouchError.unauthorized(realm: realm)
            }
            // With no client's guesses remembered there is nothing to check, nor to forget at
            // a success, and the client's address is not read.
            let throttled = server.passwordGuesses.remembersAnyone
            if throttled { try server.passwordGuesses.check(ClientThrottle.key(client: client.key, name: name)) }
            var holders: [ServedDatabase] = []
            for db in candidates where try db.principals.user(named: name) != nil { holders.append(db) }
            var verified: Set<String> = []
            for db in holders where try await db.principals.authenticate(name: name, password: password) != nil { verified.insert(db.name) }
            // An unknown name costs what a wrong password does.
            if holders.isEmpty { try await PasswordHasher.shared.spendCheckTime() }
            guard !verified.isEmpty else {
                server.passwordGuesses.failed(ClientThrottle.key(client: client.key, name: name))
                server.authentications.count(false)
                if server.logKeys.contains("Auth") { server.log(.info, "Auth: invalid credentials") }
                throw CouchError.unauthorized(realm: realm)
            }
            if throttled { server.passwordGuesses.succeeded(ClientThrottle.key(client: client.key, name: name)) }
            server.authentications.count(true)
            if server.logKeys.contains("Auth") { server.log(.info, "Auth: user \(name) authenticated") }
            return Authentication(principal: .user(name), verifiedIn: verified)
        }
        if let (cookieName, id) = Self.sessionCookie(request.headers[.cookie]) {
            var found: Authentication?
            for db in candidates {
                guard let (session, refreshed) = try await db.principals.session(id) else { continue }
                guard let user = try db.principals.user(named: session.user), !user.disabled else { continue }
                // One login's session, under one ID, in each database whose user it proved.
                if let f = found {
                    if f.principal == .user(user.name) { found?.verifiedIn.insert(db.name) }
                    continue
                }
                let cookie = refreshed ? Self.setCookie(cookieName, id, path: cookieName == Self.couchCookie ? "/" : "/\(db.name)", maxAge: Int(session.ttl)) : nil
                found = Authentication(principal: .user(user.name), cookie: cookie, verifiedIn: [db.name])
            }
            if let found { return found }
            // Logging out with a session that is gone is not an error (CouchDB answers 200).
            if path.last == "_session" && request.method == .delete { return Authentication(principal: .user(User.guestName)) }
            throw CouchError.unauthorized(realm: realm)
        }
        return Authentication(principal: .user(User.guestName))
    }

    /// The databases whose users a request may authenticate as: the one its path names, or all
    /// (a server-wide path, or a database that is not served).
    func databases(for path: [String]) -> [ServedDatabase] {
        if let first = path.first, !first.hasPrefix("_"), let db = server.database(named: first) { return [db] }
        return server.userDatabases
    }

    /// The answer for a database that is not served: 404 on the admin port and to a user of the
    /// server (credentials some database proved: a replicator is told `db_not_found`, as Sync
    /// Gateway tells it); to anyone else what a served database whose user it is not answers
    /// (401), so that names are not learned by trying them anonymously.
    func missingDatabase(_ call: Call) -> CouchError {
        if isAdmin || !call.verifiedIn.isEmpty { return CouchError.notFound("Database does not exist.") }
        return CouchError.unauthorized(realm: realm)
    }

    /// CouchDB's session cookie, and Sync Gateway's.
    static let couchCookie = "AuthSession"
    static let gatewayCookie = "SyncGatewaySession"

    /// The session cookie in a `Cookie` header, if any.
    static func sessionCookie(_ header: String?) -> (String, String)? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let kv = part.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            let name = kv[0].trimmingCharacters(in: .whitespaces)
            if name == couchCookie || name == gatewayCookie {
                return (name, kv[1].trimmingCharacters(in: .whitespaces))
            }
        }
        return nil
    }

    static func setCookie(_ name: String, _ value: String, path: String, maxAge: Int, sameSite: String = "Lax") -> HTTPField {
        HTTPField(name: .setCookie, value: "\(name)=\(value); Path=\(path); Max-Age=\(maxAge); HttpOnly; SameSite=\(sameSite)")
    }

    private static let basicScheme = Array("basic".utf8)

    /// `Basic base64(name:password)`: read from the header's bytes with one allocation for the
    /// decoded credentials (it is read on every request that carries it).
    static func basicCredentials(_ header: String) -> (String, String)? {
        var header = header
        return header.withUTF8 { b -> (String, String)? in
            func isBlank(_ c: UInt8) -> Bool { c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") }
            var start = 0
            while start < b.count, b[start] == UInt8(ascii: " ") { start += 1 }
            // The scheme, in any case, then a space.
            let scheme = Self.basicScheme
            guard b.count - start > scheme.count, b[start + scheme.count] == UInt8(ascii: " ") else { return nil }
            for k in 0 ..< scheme.count where b[start + k] | 0x20 != scheme[k] { return nil }
            var from = start + scheme.count
            var end = b.count
            while from < end, isBlank(b[from]) { from += 1 }
            while end > from, isBlank(b[end - 1]) { end -= 1 }
            guard let decoded = Base64.decodeBytes(UnsafeBufferPointer(rebasing: b[from ..< end])),
                  let colon = decoded.firstIndex(of: UInt8(ascii: ":")),
                  let name = String(validating: decoded[..<colon], as: UTF8.self),
                  let password = String(validating: decoded[(colon + 1)...], as: UTF8.self) else { return nil }
            return (name, password)
        }
    }

    /// A database's endpoints need a user of that database: anonymous requests need GUEST enabled.
    /// When the database's security object lists members, the user must be one of them (or of
    /// its admins): anonymous requests are then 401, other users 403, as CouchDB answers.
    func requireUser(_ call: Call, _ db: ServedDatabase) throws {
        guard case .user(let name) = call.principal else { return }
        var user: User?
        if name == User.guestName {
            guard try db.principals.guestEnabled else { throw CouchError.unauthorized(realm: realm) }
        } else {
            user = try db.principals.user(named: name)
            guard let user, !user.disabled else { throw CouchError.unauthorized(realm: realm) }
        }
        let security = db.securityObject
        guard !security.members.isEmpty else { return }
        // CouchDB's roles are the user's own list (`_users`' `roles`, Settee's admin roles),
        // whether or not a role of that name is defined, with the sync function's beside.
        let roles = try user.map { Set(try db.access(for: name).roles.keys).union($0.adminRoles) } ?? []
        guard security.admits(user: name, roles: roles) else {
            if name == User.guestName { throw CouchError.unauthorized(realm: realm) }
            throw CouchError.forbidden("You are not allowed to access this db.")
        }
    }

    func requireAdmin(_ call: Call) throws {
        guard call.principal == .admin else {
            throw CouchError.forbidden("This endpoint is served on the admin port only.")
        }
    }

    // MARK: - Server

    private func welcome(_ method: HTTPRequest.Method) throws -> Response {
        try allow(method, [.get, .head])
        var body: [String: JSONValue] = [
            "couchdb": "Welcome",
            // The CouchDB API level served (what clients compare to choose features); Settee's
            // own version is the vendor's.
            "version": .string(Self.couchDBVersion),
            "vendor": ["name": "Settee", "version": .string(Self.version)],
            // CouchDB 3.4's features less those Settee lacks (`access-ready`,
            // `pluggable-storage-engines`, `reshard`, `scheduler`, `quickjs`): clients read
            // the list to choose what to use.
            "features": .array(Self.features.map(JSONValue.string)),
            "uuid": .string(server.uuid),
        ]
        if isAdmin { body["ADMIN"] = true }
        return try jsonResponse(.object(body))
    }

    static let version = "0.1.0"
    /// What `GET /` lists under `features`: the names CouchDB 3.4 gives there for what this
    /// server does too.
    static let features: [String] = ["partitioned"]
    /// The CouchDB release whose HTTP API this server answers as (Formats/http-api.md lists the
    /// differences that remain).
    static let couchDBVersion = "3.4.0"

    private func allDatabases(_ call: Call) throws -> Response {
        try requireAdmin(call)
        // CouchDB lists its system databases too: here the server's own two.
        let names = [ReplicatorDocuments.databaseName, UsersDatabase.name] + server.databaseNames
        return try jsonResponse(.array(names.map(JSONValue.string)))
    }

    private func uuids(_ call: Call) throws -> Response {
        let count = try call.query["count"].map { text -> Int in
            guard let n = Int(text), n >= 0 else { throw CouchError.badRequest("count must be a non-negative integer") }
            guard n <= 1000 else { throw CouchError.badRequest("count parameter too large") }
            return n
        } ?? 1
        let ids = (0 ..< count).map { _ in JSONValue.string(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")) }
        // Never cached (each answer is new IDs), with an ETag of its own as CouchDB sends.
        let etag = "\"\(UUID().uuidString.lowercased())\""
        return try jsonResponse(["uuids": .array(ids)], headers: [.cacheControl: "must-revalidate, no-cache", HTTPField.Name("Pragma")!: "no-cache", .eTag: etag])
    }

    // MARK: - Bodies

    /// The request body as a JSON object, within `limit` bytes; it must say it is JSON unless
    /// `anyType` (a document PUT, which CouchDB reads as JSON whatever its type).
    static let notAnObject = CouchError.badRequest("Request body must be a JSON object")
    /// What CouchDB says of a document that is not an object.
    static let documentNotAnObject = CouchError.badRequest("Document must be a JSON object")

    /// `lastKeyWins`: a key repeated in an object keeps its last value (as CouchDB reads a
    /// Mango query) rather than being a 400.
    func jsonBody(_ call: inout Call, limit: Int, anyType: Bool = false, lastKeyWins: Bool = false) async throws -> [String: JSONValue] {
        guard case .object(let o) = try await jsonValueBody(&call, limit: limit, anyType: anyType, lastKeyWins: lastKeyWins) else {
            throw Self.notAnObject
        }
        return o
    }

    /// A request's `Content-Type`: one field, or several that say the same (some clients
    /// repeat it; CouchDB takes them as one); fields that differ are 400, since which one the
    /// sender meant cannot be known.
    static func contentType(_ headers: HTTPFields) throws -> String? {
        let values = headers[values: .contentType]
        guard let first = values.first else { return nil }
        let trimmed = first.trimmingCharacters(in: .whitespaces)
        for other in values.dropFirst() where other.trimmingCharacters(in: .whitespaces).lowercased() != trimmed.lowercased() {
            throw CouchError.badRequest("the request has Content-Type headers that differ")
        }
        return trimmed
    }

    /// `empty`: what an empty body stands for; nil: an empty body is a 400.
    func jsonValueBody(_ call: inout Call, limit: Int, empty: JSONValue? = nil, anyType: Bool = false, lastKeyWins: Bool = false) async throws -> JSONValue {
        let buffer = try await call.collectBody(upTo: limit)
        let bytes = Array(buffer.readableBytesView)
        // A body that may be left out says nothing whatever its type (aiohttp labels an empty
        // PUT application/octet-stream); a page of another site cannot send a PUT unasked.
        if bytes.isEmpty, let empty, call.request.method == .put { return empty }
        if !anyType, let type = try Self.contentType(call.request.headers) {
            let mime = type.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            // On the admin port only JSON's own type: text/plain is what a page of another site
            // can send without asking.
            guard mime == "application/json" || (mime == "text/plain" && !isAdmin) else {
                throw CouchError.unsupportedMediaType("Content-Type must be application/json")
            }
        }
        if bytes.isEmpty, let empty { return empty }
        guard !bytes.isEmpty else { throw CouchError.badRequest("Request body is empty") }
        do {
            return try JSONValue(parsing: bytes, lastKeyWins: lastKeyWins)
        } catch {
            throw CouchError(.badRequest, "bad_request", "invalid UTF-8 JSON: \(error.message)")
        }
    }

    /// The absolute URL of `path` segments of a database (a document, an attachment) for a
    /// `Location` header, as CouchDB writes it: the scheme and host the client used (behind a
    /// proxy, `X-Forwarded-Host`, `X-Forwarded-Proto: https` or `X-Forwarded-Ssl: on`), each
    /// segment percent-encoded (a `/` in an ID stays `%2F`).
    func location(_ call: Call, _ db: ServedDatabase, _ segments: String...) -> String {
        absoluteURL(call, [db.name] + segments)
    }

    static let forwardedHostHeader = HTTPField.Name("X-Forwarded-Host")!
    static let forwardedSSLHeader = HTTPField.Name("X-Forwarded-Ssl")!
    static let forwardedProtoHeader = HTTPField.Name("X-Forwarded-Proto")!

    /// The absolute URL of a path given as its (decoded) segments; see ``location(_:_:_:)``.
    func absoluteURL(_ call: Call, _ segments: [String]) -> String {
        let headers = call.request.headers
        let forwardedHost = headers[Self.forwardedHostHeader]
        let host = forwardedHost ?? call.request.head.authority ?? "localhost"
        let https = headers[Self.forwardedSSLHeader] == "on" || headers[Self.forwardedProtoHeader] == "https"
            || (forwardedHost == nil && server.configuration.sslCert != nil)
        return (https ? "https://" : "http://") + host + "/" + segments.map(Self.percentEncoded).joined(separator: "/")
    }

    /// The largest request body a database accepts: a document, or a batch of them.
    func bodyLimit(_ db: ServedDatabase) -> Int { max(db.config.maxDocumentSize, 64 << 20) }

    /// A boolean query parameter (`true`/`false`); anything else is a 400.
    func flag(_ call: Call, _ name: String, default value: Bool = false) throws -> Bool {
        guard let text = call.query[name] else { return value }
        // Any case: Python's requests writes `True`.
        switch text.lowercased() {
        case "true": return true
        case "false": return false
        default: throw CouchError.badRequest("Invalid boolean parameter: \(name)=\(text)")
        }
    }

    /// A non-negative integer query parameter.
    func integer(_ call: Call, _ name: String) throws -> Int? {
        guard let text = call.query[name] else { return nil }
        guard let n = Int(text), n >= 0 else { throw CouchError(.badRequest, "query_parse_error", "Invalid value for integer: \"\(text)\"") }
        return n
    }

    /// A query parameter holding JSON (`startkey="a"`, `open_revs=["1-x"]`).
    /// `allDocs`: answered as CouchDB's `_all_docs` answers JSON it cannot read (`bad_request`
    /// "invalid UTF-8 JSON"), where views answer `query_parse_error`.
    func jsonParameter(_ call: Call, _ name: String, allDocs: Bool = false) throws -> JSONValue? {
        guard let text = call.query[name] else { return nil }
        do {
            return try JSONValue(parsing: text)
        } catch {
            if allDocs { throw CouchError.badRequest("invalid UTF-8 JSON") }
            throw CouchError(.badRequest, "query_parse_error", "Invalid JSON for \(name): \(error.message)")
        }
    }
}

/// `n + 1` for a count read from a request, which may be `Int.max` (then it stays `Int.max`):
/// reading one more than a limit must not overflow.
func oneMore(_ n: Int) -> Int { n < .max ? n + 1 : n }
