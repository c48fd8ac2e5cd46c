import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// The admin port trusts its network, never a web page: what a browser sends on behalf of
/// another site, or under a name that is not the admin interface's (DNS rebinding), is refused
/// before anything else is read; and when the configuration names administrators, every request
/// needs one's credentials.
extension CouchAPI {
    /// Refuses a request to the admin port that a web page of another site made (`Sec-Fetch-Site`
    /// other than `same-origin` or `none`; an `Origin` that is not the admin interface's), or
    /// that names a host other than the admin interface's (a name an attacker's DNS may point at
    /// loopback: only IP literals, `localhost` and the configured host are the admin port's).
    func checkAdminRequest(_ request: Request) throws {
        if let site = request.headers[.secFetchSite]?.lowercased(), site != "same-origin", site != "none" {
            throw CouchError.forbidden("the admin port does not answer requests made by another site (Sec-Fetch-Site: \(Self.shown(site)))")
        }
        var host: String?
        if let authority = request.head.authority {
            guard let name = Self.hostName(ofAuthority: authority), isAdminHost(name) else {
                throw CouchError.forbidden("the admin port answers only to its own address, localhost or an IP address (Host: \(Self.shown(authority)))")
            }
            host = authority
        }
        if let origin = request.headers[.origin] {
            // The admin page's own requests come from the origin it was loaded from: this host.
            guard let host, let url = URL(string: origin), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  origin.lowercased() == "\(scheme)://\(host.lowercased())" else {
                throw CouchError.forbidden("the admin port does not answer requests made by another site (Origin: \(Self.shown(origin)))")
            }
        }
    }

    /// Refuses a request to the public port that changes something (any method but GET, HEAD
    /// and OPTIONS) when a web page of another site made it: `Sec-Fetch-Site: cross-site`, or an
    /// `Origin` that is not the host the request names. A browser sends a page's form or
    /// `text/plain` POST with the user's Basic credentials or session cookie; the server serves
    /// no CORS, so no page of another site has a reason to write. Clients that are not browsers
    /// send neither header.
    func checkPublicRequest(_ request: Request) throws {
        guard ![.get, .head, .options].contains(request.method) else { return }
        if request.headers[.secFetchSite]?.lowercased() == "cross-site" {
            throw CouchError.forbidden("this server does not take changes made by a page of another site (Sec-Fetch-Site: cross-site)")
        }
        if let origin = request.headers[.origin] {
            // "null" is what a sandboxed or file: page sends: another site as well.
            guard let host = request.head.authority, let url = URL(string: origin), let scheme = url.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", origin.lowercased() == "\(scheme)://\(host.lowercased())" else {
                throw CouchError.forbidden("this server does not take changes made by a page of another site (Origin: \(Self.shown(origin)))")
            }
        }
    }

    /// Whether `name` (a Host header's host, brackets removed) is one the admin port answers to.
    private func isAdminHost(_ name: String) -> Bool {
        let n = name.lowercased()
        if n == "localhost" || n.hasSuffix(".localhost") { return true }
        if Self.isIPLiteral(n) { return true }
        if let configured = server.configuration.adminInterface.flatMap(ListenAddress.init) {
            return configured.host.lowercased() == n
        }
        return false
    }

    /// The host of a `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`); nil when malformed.
    static func hostName(ofAuthority authority: String) -> String? {
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && UInt16(rest.dropFirst()) != nil) else { return nil }
            return String(authority[authority.index(after: authority.startIndex) ..< close])
        }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, let name = parts.first, !name.isEmpty else { return nil }
        if parts.count == 2, UInt16(parts[1]) == nil { return nil }
        return String(name)
    }

    /// An IPv4 address in dotted decimal, or an IPv6 address (hexadecimal groups and colons, an
    /// embedded IPv4 allowed): names no DNS answer can stand behind.
    static func isIPLiteral(_ s: String) -> Bool {
        let v4 = s.split(separator: ".", omittingEmptySubsequences: false)
        if v4.count == 4, v4.allSatisfy({ $0.count <= 3 && UInt8($0) != nil }) { return true }
        guard s.contains(":"), s.count <= 45 else { return false }
        return s.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
    }

    /// At most 100 characters of a header a client sent, for an error message: a response never
    /// echoes unbounded input.
    static func shown(_ text: String) -> String {
        text.count <= 100 ? text : String(text.prefix(100)) + "…"
    }

    /// Who an admin-port request is, when the configuration names administrators.
    enum AdminAccess {
        /// No administrators configured: the port asks for nothing.
        case open
        /// An administrator, by Basic credentials or a session cookie (with the cookie to send
        /// back when the session was extended).
        case administrator(String, refreshed: HTTPField?)
        /// Nobody yet, asking `/_session` (to log in, out, or who it is): the only path open so.
        case anonymousSession
    }

    /// With administrators configured, the admin port's requests need one's Basic credentials or
    /// a session of one (`POST /_session` with a name and password, as CouchDB's server admins log
    /// in); answers 401 (with a challenge the browser shows) otherwise. `/_session` itself is open,
    /// as nobody, so that a client can log in.
    func checkAdministrator(_ request: Request, path: [String], client: ClientAddress) throws -> AdminAccess {
        guard !server.adminCredentials.isEmpty else { return .open }
        if let header = request.headers[.authorization] {
            // Guesses are held back per client (ClientThrottle): a fast hash must not be a fast oracle.
            let credentials = Self.basicCredentials(header)
            func guess() -> String { ClientThrottle.key(client: client.key, name: "_admin:" + (credentials?.0 ?? "")) }
            // Nothing to check nor forget while no client's guesses are remembered.
            let throttled = server.passwordGuesses.remembersAnyone
            if throttled { try server.passwordGuesses.check(guess()) }
            guard let (name, password) = credentials, server.adminCredentials.matches(name: name, password: password) else {
                server.passwordGuesses.failed(guess())
                server.authentications.count(false)
                throw CouchError.unauthorized(realm: "Settee admin")
            }
            if throttled { server.passwordGuesses.succeeded(guess()) }
            server.authentications.count(true)
            return .administrator(name, refreshed: nil)
        }
        if let (cookieName, id) = Self.sessionCookie(request.headers[.cookie]), cookieName == Self.couchCookie,
           let (name, refreshed) = server.adminSessions.session(id) {
            return .administrator(name, refreshed: refreshed ? AdministratorSessions.cookie(id) : nil)
        }
        if path == ["_session"] { return .anonymousSession }
        throw CouchError.unauthorized(realm: "Settee admin")
    }
}

/// The administrators' sessions (`POST /_session` on the admin port): random IDs in memory (a
/// restart logs everyone out), each lasting ten minutes from its last use, as CouchDB's do.
///
/// - Note: Thread-safe: its state is behind a lock.
final class AdministratorSessions: Sendable {
    static let ttl: TimeInterval = 600
    static let maxSessions = 1000
    private let sessions = Mutex<[String: (name: String, expires: Date)]>([:])

    /// The `Set-Cookie` of a session (`id` empty: the one that ends it): the admin port's only,
    /// never sent along by another site's page.
    static func cookie(_ id: String) -> HTTPField {
        CouchAPI.setCookie(CouchAPI.couchCookie, id, path: "/", maxAge: id.isEmpty ? 0 : Int(ttl), sameSite: "Strict")
    }

    /// A new session for `name`; its ID is the cookie's value.
    func create(for name: String) -> String {
        let id = Session.newID()
        let now = Date()
        sessions.withLock { s in
            s = s.filter { $0.value.expires > now }
            // Bounded: logging in again and again forgets the oldest.
            if s.count >= Self.maxSessions, let oldest = s.min(by: { $0.value.expires < $1.value.expires }) { s.removeValue(forKey: oldest.key) }
            s[id] = (name, now.addingTimeInterval(Self.ttl))
        }
        return id
    }

    /// The administrator of a live session, and whether its life was extended (past a tenth of it).
    func session(_ id: String) -> (String, refreshed: Bool)? {
        let now = Date()
        return sessions.withLock { s in
            guard let found = s[id] else { return nil }
            guard found.expires > now else {
                s.removeValue(forKey: id)
                return nil
            }
            if found.expires.timeIntervalSince(now) < Self.ttl * 0.9 {
                s[id] = (found.name, now.addingTimeInterval(Self.ttl))
                return (found.name, true)
            }
            return (found.name, false)
        }
    }

    func delete(_ id: String) { _ = sessions.withLock { $0.removeValue(forKey: id) } }
}

/// The administrators' passwords as the running server keeps them: a SHA-256 under a salt made at
/// start, compared in constant time. (They are in the configuration file in clear; a slow hash
/// would only slow every admin request.)
///
/// - Note: Immutable; `Sendable`.
struct AdministratorCredentials: Sendable {
    private let salt: [UInt8]
    private let digests: [String: [UInt8]]

    init(_ passwords: [String: String]) {
        var rng = SystemRandomNumberGenerator()
        let salt = (0 ..< 16).map { _ in UInt8.random(in: 0 ... 255, using: &rng) }
        self.salt = salt
        digests = passwords.mapValues { Self.digest($0, salt) }
    }

    var isEmpty: Bool { digests.isEmpty }

    func matches(name: String, password: String) -> Bool {
        // Every check costs one digest and a full comparison, whoever is named.
        let candidate = Self.digest(password, salt)
        let expected = digests[name] ?? [UInt8](repeating: 0xFF, count: candidate.count)
        var difference: UInt8 = digests[name] == nil ? 1 : 0
        for (a, b) in zip(candidate, expected) { difference |= a ^ b }
        return difference == 0
    }

    private static func digest(_ password: String, _ salt: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: salt + Array(password.utf8)))
    }
}

extension HTTPField.Name {
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}
