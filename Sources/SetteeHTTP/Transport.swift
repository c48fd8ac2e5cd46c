import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Settee
import SetteeReplicator
import Synchronization

/// The HTTP clients URLEndpoints use: one for plain HTTP and the system's trust roots, one per
/// pinned certificate. They live as long as the process (as `HTTPClient.shared` does), so that
/// endpoints, which are values, never have to shut one down; each keeps its keep-alive
/// connections pooled across replications.
enum HTTPClients {
    private static let clients = Mutex<[Data?: HTTPClient]>([:])

    static func client(pinning certificate: Data?) throws -> HTTPClient {
        try clients.withLock { all in
            if let c = all[certificate] { return c }
            var config = HTTPClient.Configuration()
            // A request has no overall deadline (a large batch or attachment may take long);
            // a connection that goes silent for this long is dropped.
            config.timeout = .init(connect: .seconds(10), read: .seconds(120))
            config.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 8)
            // A refused connection fails the request at once: the replicator's own backoff
            // (and its offline status) is the retry, not a silent wait of the connect timeout.
            config.connectionPool.retryConnectionEstablishment = false
            config.decompression = .enabled(limit: .none)
            if let certificate {
                var tls = TLSConfiguration.makeClientConfiguration()
                do {
                    tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: [UInt8](certificate), format: .der)])
                } catch {
                    throw ReplicatorError(.invalidRequest, "the pinned server certificate is not a DER certificate: \(error)")
                }
                // Pinned: that certificate and no other, whatever name the server answers to.
                tls.certificateVerification = .noHostnameVerification
                config.tlsConfiguration = tls
            }
            let c = HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
            all[certificate] = c
            return c
        }
    }
}

/// A server's answer: status, headers, the whole body.
struct Reply: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: ByteBuffer

    var json: JSONValue {
        get throws {
            do {
                return try JSONValue(parsing: Array(body.readableBytesView))
            } catch {
                throw ReplicatorError(.peerFailed, "the server answered \(status) with a body that is not JSON: \(error)")
            }
        }
    }

    /// CouchDB's `{"error", "reason"}`, for messages.
    var reason: String {
        guard let o = (try? json)?.objectValue else { return String(buffer: body).prefix(200).description }
        return [o["error"]?.stringValue, o["reason"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
    }
}

/// Requests to one database of a CouchDB-compatible server.
struct Transport: Sendable {
    /// `scheme://host:port/path-of-the-database` (no trailing slash, no credentials).
    let base: String
    /// `scheme://host:port/`: the server's welcome.
    let root: String
    let headers: [(String, String)]
    let client: HTTPClient
    /// Largest response body read whole.
    static let maxBody = 256 << 20

    init(url: URL, authenticator: (any Authenticator)?, headers extra: [String: String], pinnedCertificate: Data?) throws {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let scheme = parts.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = parts.host, !host.isEmpty else {
            throw ReplicatorError(.invalidRequest, "a URLEndpoint needs an http or https URL of a database, not '\(Self.redacted(url))'")
        }
        // A port is 16 bits: a larger number must not reach the socket layer (which traps on it).
        if let port = parts.port, !(1 ... 65535).contains(port) {
            throw ReplicatorError(.invalidRequest, "the URL '\(Self.redacted(url))' names port \(port), outside 1–65535")
        }
        var fields: [(String, String)] = [("Accept", "application/json")]
        for (k, v) in extra.sorted(by: { $0.key < $1.key }) { fields.append((k, v)) }
        if let authenticator {
            for (k, v) in authenticator.httpHeaders.sorted(by: { $0.key < $1.key }) { fields.append((k, v)) }
        } else if let user = parts.user {
            // Credentials in the URL, as CouchDB's replicator takes them.
            let basic = BasicAuthenticator(username: user.removingPercentEncoding ?? user,
                                           password: (parts.password ?? "").removingPercentEncoding ?? "")
            for (k, v) in basic.httpHeaders { fields.append((k, v)) }
        }
        parts.user = nil
        parts.password = nil
        parts.query = nil
        parts.fragment = nil
        while parts.percentEncodedPath.hasSuffix("/") { parts.percentEncodedPath.removeLast() }
        guard let clean = parts.string, !parts.percentEncodedPath.isEmpty else {
            throw ReplicatorError(.invalidRequest, "the URL '\(Self.redacted(url))' names no database")
        }
        base = clean
        var server = parts
        server.percentEncodedPath = "/"
        root = server.string ?? clean
        headers = fields
        client = try HTTPClients.client(pinning: pinnedCertificate)
    }

    /// Percent-encodes a path segment or query value (everything but RFC 3986's unreserved).
    static func encode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? s
    }
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A document's path: `_design/` and `_local/` keep their slash, as CouchDB expects.
    static func documentPath(_ id: String) -> String {
        for prefix in ["_design/", "_local/"] where id.hasPrefix(prefix) {
            return prefix + encode(String(id.dropFirst(prefix.count)))
        }
        return encode(id)
    }

    func request(_ method: HTTPMethod, _ path: String, query: [(String, String)] = [], json: JSONValue? = nil,
                 accept: String? = nil, atRoot: Bool = false) -> HTTPClientRequest {
        var url = atRoot ? root : base + (path.isEmpty ? "/" : "/" + path)
        if !query.isEmpty { url += "?" + query.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&") }
        var r = HTTPClientRequest(url: url)
        r.method = method
        for (k, v) in headers where !(k == "Accept" && accept != nil) { r.headers.add(name: k, value: v) }
        if let accept { r.headers.add(name: "Accept", value: accept) }
        if let json, let bytes = try? json.jsonBytes() {
            r.headers.add(name: "Content-Type", value: "application/json")
            r.body = .bytes(ByteBuffer(bytes: bytes))
        }
        return r
    }

    /// Sends a request and reads the whole answer. A network failure is `unreachable`; the
    /// caller judges the status.
    func send(_ request: HTTPClientRequest) async throws -> Reply {
        try await classifying(request) {
            let response = try await client.execute(request, deadline: .distantFuture)
            let body = try await response.body.collect(upTo: Self.maxBody)
            return Reply(status: Int(response.status.code), headers: response.headers, body: body)
        }
    }

    /// Runs `body` (one exchange of `request`), turning what the HTTP client throws into the
    /// replicator's errors: its own and cancellation pass through, anything else is classified.
    private func classifying<T>(_ request: HTTPClientRequest, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as ReplicatorError {
            throw e
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw Self.classify(error, request)
        }
    }

    /// A failure below HTTP: an untrusted server (its certificate refused) stops the
    /// replicator, retrying would not change it; anything else is `unreachable`.
    static func classify(_ error: any Error, _ request: HTTPClientRequest) -> ReplicatorError {
        let what = "\(request.method) \(redacted(request.url)): \(error)"
        if error is NIOSSLError || error is BoringSSLError {
            return ReplicatorError(.authenticationFailed, "the server's TLS certificate is not trusted: " + what)
        }
        return ReplicatorError(.unreachable, what)
    }

    /// Streams a 200 answer's body into `file` (created), with its MD5; any other status is
    /// classified as `json` does.
    func download(_ request: HTTPClientRequest, into file: URL) async throws -> (url: URL, md5: String) {
        try await classifying(request) {
            let response = try await client.execute(request, deadline: .distantFuture)
            guard response.status.code == 200 else {
                let body = try await response.body.collect(upTo: 1 << 20)
                throw failure(Reply(status: Int(response.status.code), headers: response.headers, body: body), request)
            }
            guard FileManager.default.createFile(atPath: file.path, contents: nil), let handle = FileHandle(forWritingAtPath: file.path) else {
                throw ReplicatorError(.peerFailed, "cannot write the temporary file \(file.path)")
            }
            defer { try? handle.close() }
            var md5 = Insecure.MD5()
            for try await chunk in response.body {
                chunk.withUnsafeReadableBytes { md5.update(bufferPointer: $0) }
                do {
                    try handle.write(contentsOf: Data(chunk.readableBytesView))
                } catch {
                    // The local disk, not the network: not worth a retry.
                    throw ReplicatorError(.peerFailed, "writing the temporary file \(file.path): \(error)")
                }
            }
            return (file, "md5-" + Data(md5.finalize()).base64EncodedString())
        }
    }

    /// Sends a request whose answer may take long but must keep coming (a long poll with
    /// heartbeats): silent for `silence`, it is dropped as `unreachable`.
    func sendWatched(_ request: HTTPClientRequest, silence: Duration) async throws -> Reply {
        let lastHeard = LastHeard()
        return try await withThrowingTaskGroup(of: Reply?.self) { group in
            group.addTask {
                try await classifying(request) {
                    let response = try await client.execute(request, deadline: .distantFuture)
                    lastHeard.now()
                    var body = ByteBuffer()
                    for try await var chunk in response.body {
                        lastHeard.now()
                        guard body.readableBytes + chunk.readableBytes <= Self.maxBody else {
                            throw ReplicatorError(.peerFailed, "\(Self.redacted(request.url)): the answer is too large")
                        }
                        body.writeBuffer(&chunk)
                    }
                    return Reply(status: Int(response.status.code), headers: response.headers, body: body)
                }
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: .milliseconds(250))
                    if ContinuousClock.now - lastHeard.instant > silence { return nil }
                }
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let reply = first else {
                throw ReplicatorError(.unreachable, "\(Self.redacted(request.url)): the feed sent nothing, not even a heartbeat, for \(silence)")
            }
            return reply
        }
    }

    /// Sends a request and returns its JSON when the status is one of `expected`; any other
    /// status is classified (`failure`).
    func json(_ request: HTTPClientRequest, expect expected: Set<Int> = [200, 201, 202]) async throws -> JSONValue {
        let reply = try await send(request)
        guard expected.contains(reply.status) else { throw failure(reply, request) }
        return try reply.json
    }

    /// A status the replicator cannot go on with: 401 and 403 stop it (authentication), 404 on
    /// the database itself stops it (no such database), 408, 429 and 5xx are transient (it goes
    /// offline and retries), anything else is a failure of the peer.
    func failure(_ reply: Reply, _ request: HTTPClientRequest) -> ReplicatorError {
        let what = "\(request.method) \(Self.redacted(request.url)): \(reply.status) \(reply.reason)"
        switch reply.status {
        case 401, 403: return ReplicatorError(.authenticationFailed, what)
        case 408, 429, 500...599: return ReplicatorError(.unreachable, what)
        case 404 where request.url == base + "/": return ReplicatorError(.remoteDatabaseNotFound, what)
        default: return ReplicatorError(.peerFailed, what)
        }
    }

    /// A URL without its query (which may hold filter parameters) for messages.
    /// A URL as an error may show it: without its credentials, query and fragment.
    static func redacted(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "the URL" }
        parts.user = nil
        parts.password = nil
        parts.query = nil
        parts.fragment = nil
        return parts.string ?? "the URL"
    }

    static func redacted(_ url: String) -> String {
        url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
    }
}

/// When a watched answer last sent something.
private final class LastHeard: Sendable {
    private let value = Mutex(ContinuousClock.now)
    func now() { value.withLock { $0 = .now } }
    var instant: ContinuousClock.Instant { value.withLock { $0 } }
}

/// A remote database as a whole (not a replication's peer).
package enum RemoteDatabase {
    /// Creates the database at `url` with `PUT` (what CouchDB's replicator does for
    /// `create_target`); one that exists already (412) is fine.
    ///
    /// ```swift
    /// try await RemoteDatabase.create(url: URL(string: "http://127.0.0.1:5984/copy")!, headers: [:])
    /// ```
    ///
    /// - Throws: ``ReplicatorError`` `.authenticationFailed` for 401 or 403, `.peerFailed` for
    ///   another refusal, `.unreachable` when the server cannot be reached.
    package static func create(url: URL, headers: [String: String]) async throws {
        let transport = try Transport(url: url, authenticator: nil, headers: headers, pinnedCertificate: nil)
        let reply = try await transport.send(transport.request(.PUT, ""))
        switch reply.status {
        case 200 ..< 300, 412: return
        case 401, 403: throw ReplicatorError(.authenticationFailed, "\(url.absoluteString) refused to create the database: \(reply.status)")
        default: throw ReplicatorError(.peerFailed, "\(url.absoluteString) could not create the database: \(reply.status)")
        }
    }
}
