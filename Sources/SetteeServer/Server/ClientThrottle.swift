import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// The context of one request to the server: Hummingbird's, and the address of the client's end
/// of the connection (what the throttles count by).
///
/// ```swift
/// let client = ServerRequestContext.clientKey(context.remoteAddress)
/// ```
///
/// - Note: A value type; one per request.
public struct ServerRequestContext: RequestContext, RemoteAddressRequestContext {
    /// Hummingbird's part of the context.
    ///
    /// ```swift
    /// let logger = context.coreContext.logger
    /// ```
    public var coreContext: CoreRequestContextStorage
    /// The peer's address, when the connection has one (read from the channel when asked: most
    /// requests never need it).
    ///
    /// ```swift
    /// print(context.remoteAddress?.ipAddress ?? "unknown")
    /// ```
    public var remoteAddress: SocketAddress? { channel.remoteAddress }
    /// The connection the request came on.
    let channel: any Channel

    /// The context of a request arriving on `source`'s channel.
    ///
    /// ```swift
    /// let context = ServerRequestContext(source: .init(channel: channel, logger: logger))
    /// ```
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// What a client is counted as: its IPv4 address, the /64 network of its IPv6 address (one
    /// host commonly holds a whole /64), or `unknown`. Every port and connection of one host is
    /// one client.
    static func clientKey(_ address: SocketAddress?) -> String {
        switch address {
        case .v6(let a)?:
            var bytes = a.address.sin6_addr
            let all = withUnsafeBytes(of: &bytes) { Array($0) }
            // An IPv4 address mapped into IPv6 (::ffff:a.b.c.d) is that IPv4 host.
            if all.count == 16, all[0 ..< 10].allSatisfy({ $0 == 0 }), all[10] == 0xFF, all[11] == 0xFF {
                return all[12...].map { String($0) }.joined(separator: ".")
            }
            return all.prefix(8).map { String(format: "%02x", $0) }.joined() + "::/64"
        case let other?:
            return other.ipAddress ?? "unknown"
        case nil:
            return "unknown"
        }
    }
}

/// The client of one request, as the throttles count it (``ServerRequestContext/clientKey(_:)``),
/// worked out from the connection the first time it is asked for: a request that neither logs in,
/// signs up nor is throttled never reads its peer's address.
///
/// ```swift
/// try server.signUps.admit(call.client.key)
/// ```
///
/// - Note: Not thread-safe: one request's task.
final class ClientAddress {
    private let channel: (any Channel)?
    private var known: String?

    /// The client of a request that came on `channel`.
    init(channel: any Channel) { self.channel = channel }

    /// A client already known by its key.
    init(key: String) {
        channel = nil
        known = key
    }

    /// The client's key: its IPv4 address, its IPv6 address's /64, or `unknown`.
    var key: String {
        if let known { return known }
        let key = ServerRequestContext.clientKey(channel?.remoteAddress)
        known = key
        return key
    }
}

/// Bounds how often clients may do something that costs the server a password hash or a user:
/// signing up, and guessing passwords.
///
/// - ``admit(_:)`` is a rate: at most `perClient` attempts per client and `overall` attempts in
///   all per `window`; past either, 429 with `Retry-After`.
/// - ``check(_:)``, ``failed(_:)`` and ``succeeded(_:)`` are a backoff on failures: a client
///   whose `perClient` failures fall within a `window` waits 2 s before its next attempt, then
///   4, 8, … up to `maxBackoff`, until one succeeds; and while more than `overall` failures in
///   all fall within one second, a client with a recent failure waits too. A client that has not
///   failed is never held up by others' guessing.
///
/// Clients are counted by IP address (behind a proxy, the proxy's); password guesses by client
/// and name together (``key(client:name:)``), so that one name guessed at does not hold up
/// another behind the same address. At most `maxClients` are remembered; past that the oldest
/// are forgotten.
///
/// ```swift
/// try server.passwordGuesses.check(ClientThrottle.key(client: call.client, name: name))
/// ```
///
/// - Note: Thread-safe: its state is behind a lock.
final class ClientThrottle: Sendable {
    let perClient: Int
    let overall: Int
    let window: TimeInterval
    let maxBackoff: TimeInterval
    static let maxClients = 100_000
    /// Seconds since 1970 the throttle reads as now when set (tests stop its clock); the
    /// system's time otherwise.
    let frozenTime = Atomic<Double>(-1)

    /// Now, as the throttle reads it.
    var now: Date {
        let frozen = frozenTime.load(ordering: .relaxed)
        return frozen >= 0 ? Date(timeIntervalSince1970: frozen) : Date()
    }

    private struct Client {
        var attempts: [Date] = []
        var failures = 0
        var lastFailure = Date.distantPast
        var blockedUntil = Date.distantPast
    }

    private struct State {
        var clients: [String: Client] = [:]
        var recent: [Date] = []
    }

    private let state = Mutex(State())
    /// How many clients are remembered (the state's count, readable without the lock).
    private let rememberedCount = Atomic<Int>(0)

    /// Whether any client is remembered. When none is, ``check(_:now:)`` and
    /// ``succeeded(_:)`` have nothing to do, and a request need not work out who it is from
    /// (a request with Basic credentials would otherwise pay for it every time).
    ///
    /// ```swift
    /// if server.passwordGuesses.remembersAnyone { try server.passwordGuesses.check(guess) }
    /// ```
    var remembersAnyone: Bool { rememberedCount.load(ordering: .acquiring) > 0 }

    init(perClient: Int, overall: Int, window: TimeInterval, maxBackoff: TimeInterval = 300) {
        self.perClient = perClient
        self.overall = overall
        self.window = window
        self.maxBackoff = maxBackoff
    }

    /// What password guesses are counted by: the client and the name it tries.
    static func key(client: String, name: String) -> String { client + "\u{0}" + name }

    /// The error a refused attempt answers.
    static func tooMany(retryAfter seconds: TimeInterval) -> CouchError {
        var e = CouchError(.tooManyRequests, "too_many_requests", "Too many attempts: try again in \(Int(seconds.rounded(.up))) s.")
        e.headers[.retryAfter] = String(max(1, Int(seconds.rounded(.up))))
        return e
    }

    /// Counts an attempt of `client`, or refuses it when the client or everyone together has
    /// made as many as the window allows.
    func admit(_ client: String, now given: Date? = nil) throws(CouchError) {
        let now = given ?? self.now
        let wait: TimeInterval? = state.withLock { s in
            let since = now.addingTimeInterval(-window)
            s.recent.removeAll { $0 <= since }
            var c = s.clients[client] ?? Client()
            c.attempts.removeAll { $0 <= since }
            if c.attempts.count >= perClient, let first = c.attempts.first {
                s.clients[client] = c
                return first.addingTimeInterval(window).timeIntervalSince(now)
            }
            if s.recent.count >= overall, let first = s.recent.first { return first.addingTimeInterval(window).timeIntervalSince(now) }
            c.attempts.append(now)
            s.recent.append(now)
            remember(&s, client, c, now: now)
            return nil
        }
        if let wait { throw Self.tooMany(retryAfter: wait) }
    }

    /// Refuses `client`'s attempt while it is held back by its own failures, or by everyone's.
    func check(_ client: String, now given: Date? = nil) throws(CouchError) {
        let now = given ?? self.now
        let wait: TimeInterval? = state.withLock { s in
            guard let c = s.clients[client] else { return nil }
            if c.blockedUntil > now { return c.blockedUntil.timeIntervalSince(now) }
            let second = now.addingTimeInterval(-1)
            s.recent.removeAll { $0 <= second }
            if s.recent.count > overall, now.timeIntervalSince(c.lastFailure) < window { return 1 }
            return nil
        }
        if let wait { throw Self.tooMany(retryAfter: wait) }
    }

    /// Records a failed attempt (a wrong password) of `client`.
    func failed(_ client: String, now given: Date? = nil) {
        let now = given ?? self.now
        state.withLock { s in
            var c = s.clients[client] ?? Client()
            if now.timeIntervalSince(c.lastFailure) > window { c.failures = 0 }
            c.failures += 1
            c.lastFailure = now
            if c.failures >= perClient {
                let doublings = min(c.failures - perClient + 1, 20)
                c.blockedUntil = now.addingTimeInterval(min(maxBackoff, Double(1 << doublings)))
            }
            s.recent.append(now)
            if s.recent.count > 4 * overall { s.recent.removeFirst(s.recent.count - 2 * overall) }
            remember(&s, client, c, now: now)
        }
    }

    /// Forgets `client`'s failures: it proved a password.
    func succeeded(_ client: String) {
        state.withLock { s in
            guard var c = s.clients[client], c.failures > 0 || c.blockedUntil > .distantPast else { return }
            c.failures = 0
            c.blockedUntil = .distantPast
            s.clients[client] = c
        }
    }

    private func remember(_ s: inout State, _ client: String, _ c: Client, now: Date) {
        if s.clients[client] == nil, s.clients.count >= Self.maxClients {
            // Bounded: those idle longest go first (a scan, once per this many new clients).
            let horizon = now.addingTimeInterval(-window)
            s.clients = s.clients.filter { $0.value.blockedUntil > now || ($0.value.attempts.last ?? $0.value.lastFailure) > horizon }
            if s.clients.count >= Self.maxClients { s.clients.removeAll(keepingCapacity: true) }
        }
        s.clients[client] = c
        rememberedCount.store(s.clients.count, ordering: .releasing)
    }
}
