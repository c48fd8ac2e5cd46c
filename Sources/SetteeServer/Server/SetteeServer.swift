import Foundation
import Crypto
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import NIOCore
import ServiceLifecycle
@_spi(Replication) @_spi(Server) import Settee
import SetteeReplicator
import Synchronization
@_exported import UnixSignals

/// The ports a running server listens on (the ones the system picked, for port 0).
///
/// ```swift
/// try await server.run { ports in print("listening on", ports.publicPort) }
/// ```
///
/// - Note: A value type; `Sendable`.
public struct ListeningPorts: Sendable, Equatable {
    /// The public REST API's port.
    ///
    /// ```swift
    /// let url = "http://127.0.0.1:\(ports.publicPort)/db"
    /// ```
    public var publicPort: Int
    /// The admin REST API's port; nil when the server has none.
    ///
    /// ```swift
    /// if let admin = ports.adminPort { print(admin) }
    /// ```
    public var adminPort: Int?
}

/// The sync server: CouchDB's HTTP API and replication protocol over Settee databases, with Sync
/// Gateway's configuration, users and ports (`settee serve`).
///
/// ```swift
/// let server = try SetteeServer(configuration: ServerConfiguration(json: text))
/// try await server.run { ports in print("serving on", ports.publicPort) }
/// ```
///
/// An app can serve its own open database to peers, as Couchbase Lite's `URLEndpointListener`
/// does; port 0 lets the system pick a free port, reported once the server runs:
///
/// ```swift
/// var config = ServerConfiguration()
/// config.interface = "0.0.0.0:0"
/// config.adminInterface = nil
/// let server = try SetteeServer(serving: db, as: "notes", configuration: config, users: ["GUEST": .init()])
/// Task { try await server.run { ports in advertise(ports.publicPort) } }
/// ```
///
/// - Note: Thread-safe. ``run(gracefulShutdownSignals:onRunning:)`` runs until its task is
///   cancelled or a listed signal arrives; then it stops accepting, lets requests in flight
///   finish and closes the databases it opened.
public final class SetteeServer: Sendable {
    /// The configuration the server was made with.
    ///
    /// ```swift
    /// print(server.configuration.interface)
    /// ```
    public let configuration: ServerConfiguration
    let databases: Mutex<[String: ServedDatabase]>
    let logger: Logger
    let logKeys: LogKeys
    /// Continuous replications started with `POST /_replicate`.
    let replications = ReplicationJobs()
    /// Databases created, updated and deleted while the server runs (`/_db_updates`).
    let databaseUpdates = DatabaseUpdates()
    /// What `GET /_metrics` answers.
    let metrics = ServerMetrics()
    /// Each listener's connections, by port name (`public`, `admin`), for `/_metrics`.
    let listeners = Mutex<[String: ConnectionLimiter]>([:])
    /// Password checks that succeeded and failed (users' Basic credentials and logins).
    let authentications = AuthenticationCounters()
    /// The replications `/_replicator`'s documents ask for.
    let replicatorDocuments = ReplicatorDocuments()
    /// The ports this server's listeners are bound to (the system's choice for port 0), so that
    /// a URL naming this server is known as such (`_replicate`).
    let boundPorts = Mutex<Set<Int>>([])
    /// Where every database's JavaScript runs (sync functions, design documents' functions).
    let scripts = ScriptEngine()
    /// The administrators the admin port asks for (none: it asks for no credentials).
    let adminCredentials: AdministratorCredentials
    /// Their sessions (`POST /_session` on the admin port).
    let adminSessions = AdministratorSessions()
    /// Password checks that fail (users' and administrators', Basic or `_session`), held back
    /// per client: five wrong in a minute, then a wait that doubles with each further one.
    let passwordGuesses = ClientThrottle(perClient: 5, overall: 50, window: 60)
    /// Sign-ups (`PUT /_users/…` by anyone): ten a minute from one client, sixty from all.
    let signUps = ClientThrottle(perClient: 10, overall: 60, window: 60)
    /// What the admin page's forms carry back (against requests forged by other sites): random,
    /// made when the server starts.
    let adminFormToken: String = {
        var rng = SystemRandomNumberGenerator()
        return (0 ..< 4).map { _ in String(rng.next() as UInt64, radix: 16) }.joined()
    }()

    /// A server for `configuration`: opens (creating if needed) every configured database.
    ///
    /// ```swift
    /// let server = try SetteeServer(configuration: .standalone(directory: "./settee-data"))
    /// ```
    ///
    /// - Throws: a `SetteeError` when a database cannot be opened (the ones opened before are
    ///   closed again).
    public init(configuration: ServerConfiguration, logger: Logger = Logger(label: "settee.server")) throws {
        self.configuration = configuration
        self.logger = logger
        logKeys = LogKeys(configuration.log)
        if let warning = logKeys.warning { logger.warning("\(warning.escapedForLog)") }
        adminCredentials = AdministratorCredentials(configuration.adminUsers)
        var opened: [String: ServedDatabase] = [:]
        do {
            for (name, config) in configuration.databases.sorted(by: { $0.key < $1.key }) {
                opened[name] = try ServedDatabase.open(name: name, config: config, engine: scripts)
            }
            opened[ReplicatorDocuments.databaseName] = try ServedDatabase.open(
                name: ReplicatorDocuments.databaseName, config: .init(server: configuration.replicator), engine: scripts)
        } catch {
            for db in opened.values { try? db.close() }
            throw error
        }
        databases = Mutex(opened)
        for db in opened.values { databaseUpdates.watch(db) }
    }

    /// A server of one database the app already opened (it stays open when the server stops).
    ///
    /// ```swift
    /// let server = try SetteeServer(serving: db, as: "notes", configuration: config,
    ///                               users: ["GUEST": .init(disabled: false, adminChannels: ["*"])])
    /// ```
    public init(serving database: Database, as name: String, configuration: ServerConfiguration,
                users: [String: ServerConfiguration.UserConfig] = [:], logger: Logger = Logger(label: "settee.server")) throws {
        guard ServerConfiguration.isValidDatabaseName(name) else {
            throw ConfigurationError(path: "", message: "invalid database name \"\(name)\"")
        }
        var config = configuration
        var dbConfig = ServerConfiguration.DatabaseConfig(server: database.config.directory)
        dbConfig.users = users
        config.databases = [name: dbConfig]
        self.configuration = config
        let replicatorDB = try ServedDatabase.open(name: ReplicatorDocuments.databaseName, config: .init(server: config.replicator),
                                                   engine: scripts)
        self.logger = logger
        logKeys = LogKeys(config.log)
        if let warning = logKeys.warning { logger.warning("\(warning.escapedForLog)") }
        adminCredentials = AdministratorCredentials(config.adminUsers)
        let served = try ServedDatabase(name: name, database: database, config: dbConfig, walrusDirectory: nil, owned: false,
                                        routing: try RoutingState(config: dbConfig, engine: scripts, database: name))
        try served.startRouting()
        try served.loadSecurity()
        try served.openCollections(engine: scripts)
        databases = Mutex([name: served, ReplicatorDocuments.databaseName: replicatorDB])
        databaseUpdates.watch(served)
        databaseUpdates.watch(replicatorDB)
    }

    /// The server's UUID, as CouchDB's `GET /` gives it (32 hex digits): made from the UUID of
    /// the server's own database (`/_replicator`'s), so it lasts as long as that database does,
    /// across restarts when ``ServerConfiguration/replicator`` is a directory.
    ///
    /// ```swift
    /// print(server.uuid)   // "5f3c…" (32 hex digits)
    /// ```
    public var uuid: String {
        let own = databases.withLock { $0[ReplicatorDocuments.databaseName]?.database.uuid } ?? ""
        return SHA256.hash(data: Data("settee-server:\(own)".utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// The names of the databases served (not the server's own `_replicator`).
    ///
    /// ```swift
    /// print(server.databaseNames)   // ["db"]
    /// ```
    public var databaseNames: [String] { databases.withLock { $0.keys.filter { !$0.hasPrefix("_") }.sorted() } }

    func database(named name: String) -> ServedDatabase? { databases.withLock { $0[name] } }

    /// Adds a database made at run time (admin `PUT /{db}`); false when the name is taken.
    func addDatabase(_ db: ServedDatabase) -> Bool {
        let added = databases.withLock { dbs in
            guard dbs[db.name] == nil else { return false }
            dbs[db.name] = db
            return true
        }
        if added {
            databaseUpdates.watch(db)
            databaseUpdates.record(db.name, .created)
        }
        return added
    }

    /// Whether a database made at run time may keep its files in `path`: one of the directories
    /// the configuration's databases (or `_replicator`) use, or a directory under one, with no
    /// `..` in it, once symbolic links are followed. The configuration's directories are the
    /// server's data; an administrator's request must not write beside other files of the host.
    func isDataDirectory(_ path: String) -> Bool {
        guard !path.isEmpty, !path.split(separator: "/").contains("..") else { return false }
        // Links are followed in the part of the path that exists (a directory to be made under
        // a link out of the data is out of the data).
        func resolved(_ p: String) -> String {
            var existing = URL(fileURLWithPath: p).standardizedFileURL
            var rest: [String] = []
            while !FileManager.default.fileExists(atPath: existing.path), existing.pathComponents.count > 1 {
                rest.insert(existing.lastPathComponent, at: 0)
                existing.deleteLastPathComponent()
            }
            var out = existing.resolvingSymlinksInPath()
            for part in rest { out.appendPathComponent(part) }
            return out.standardizedFileURL.path
        }
        let roots = (configuration.databases.values.filter { !$0.isWalrus }.map(\.server) + [configuration.replicator])
            .filter { $0 != "walrus:" && !$0.isEmpty }.map(resolved)
        let target = resolved(path)
        return roots.contains { root in target == root || target.hasPrefix(root.hasSuffix("/") ? root : root + "/") }
    }

    /// Stops serving a database (admin `DELETE /{db}`); the caller closes it.
    func removeDatabase(named name: String) -> ServedDatabase? {
        guard let removed = databases.withLock({ $0.removeValue(forKey: name) }) else { return nil }
        databaseUpdates.stopWatching(name)
        databaseUpdates.record(name, .deleted)
        return removed
    }

    /// Answers one request in this process, as the public or the admin port would, with no
    /// socket: what the server's fuzz target feeds its inputs to.
    ///
    /// ```swift
    /// @_spi(Fuzzing) import SetteeServer
    /// let response = try await server.respond(to: request, context: context, admin: false)
    /// ```
    @_spi(Fuzzing)
    public func respond(to request: Request, context: ServerRequestContext, admin: Bool) async throws -> Response {
        try await (admin ? adminResponder() : publicResponder()).respond(to: request, context: context)
    }

    /// The public API's responder (for tests and embedding in another Hummingbird app).
    func publicResponder() -> CouchAPI { CouchAPI(server: self, isAdmin: false) }
    /// The admin API's responder.
    func adminResponder() -> CouchAPI { CouchAPI(server: self, isAdmin: true) }

    /// The public port's application, listening on `address`, holding at most `connections`
    /// connections (the configuration's `maxIncomingConnections` unless ``run(gracefulShutdownSignals:onRunning:)``
    /// lowered it to the descriptors the system grants).
    func publicApplication(connections: Int? = nil, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        try application(publicResponder(), configuration.interface, name: "public", connections: connections ?? configuration.maxIncomingConnections,
                        onRunning: onRunning)
    }

    /// The admin port's application.
    func adminApplication(address: String, connections: Int? = nil,
                          onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        try application(adminResponder(), address, name: "admin", connections: connections ?? configuration.maxIncomingConnections,
                        onRunning: onRunning)
    }

    /// The connections each listener may hold when the process may open `descriptors` files
    /// (nil: unknown): the configured `maxIncomingConnections`, lowered so that both listeners
    /// together leave `reserve` descriptors for the databases' files (32, and 16 more a
    /// database), with a tenth of what sockets may use kept for the admin port, so that clients
    /// holding the public port full cannot lock out the administrator. 0 (no limit) configured
    /// is also bounded by the descriptors.
    ///
    /// ```swift
    /// let caps = SetteeServer.connectionLimits(descriptors: 1024, configured: 2000, databases: 1)
    /// // (public: 879, admin: 97)
    /// ```
    static func connectionLimits(descriptors: Int?, configured: Int, databases: Int) -> (public: Int, admin: Int) {
        guard let descriptors else { return (configured, configured) }
        let reserve = 32 + 16 * max(1, databases)
        let sockets = max(0, descriptors - reserve)
        let admin = max(8, sockets / 10)
        let pub = max(16, sockets - admin)
        func cap(_ n: Int) -> Int { configured == 0 ? n : min(configured, n) }
        return (cap(pub), cap(admin))
    }

    private func application(_ responder: CouchAPI, _ address: String, name: String, connections: Int,
                             onRunning: @escaping @Sendable (Int) async -> Void) throws -> Application<CouchAPI> {
        guard let bind = ListenAddress(address) else {
            throw ConfigurationError(path: name == "admin" ? "adminInterface" : "interface", message: "expected host:port, got \"\(address)\"")
        }
        var http = HTTP1Channel.Configuration()
        http.idleTimeout = TimeAmount.seconds(Int64(configuration.serverReadTimeout))
        // Each listener counts its own connections against its limit.
        let limiter = ConnectionLimiter(limit: connections)
        listeners.withLock { $0[name] = limiter }
        var tls: TLSConfiguration?
        if let cert = configuration.sslCert, let key = configuration.sslKey {
            do {
                tls = TLSConfiguration.makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            } catch {
                throw ConfigurationError(path: "SSLCert", message: "cannot read the certificate or its key: \(error)")
            }
        }
        let (channelConfiguration, tlsConfiguration) = (http, tls)
        let server = HTTPServerBuilder { responder in
            let plain = HTTP1Channel(responder: responder, configuration: channelConfiguration)
            if let tlsConfiguration {
                return LimitedChildChannel(base: try TLSChannel(plain, tlsConfiguration: tlsConfiguration), limiter: limiter)
            }
            return LimitedChildChannel(base: plain, limiter: limiter)
        }
        return Application(
            responder: responder,
            server: server,
            configuration: ApplicationConfiguration(address: .hostname(bind.host, port: bind.port), serverName: "Settee"),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? bind.port
                boundPorts.withLock { _ = $0.insert(port) }
                await onRunning(port)
            },
            logger: logger)
    }


    /// Runs the public and admin listeners until the task is cancelled or one of `signals`
    /// arrives, then finishes the requests in flight and closes the databases it opened.
    ///
    /// ```swift
    /// try await server.run(gracefulShutdownSignals: [.sigterm, .sigint]) { ports in
    ///     print("public port \(ports.publicPort)")
    /// }
    /// ```
    public func run(gracefulShutdownSignals signals: [UnixSignal] = [],
                    onRunning: @escaping @Sendable (ListeningPorts) async -> Void = { _ in }) async throws {
        // Sockets and database files share the process's descriptors: ask for what the
        // configuration says (the system's default, often 1,024, is what idle sockets exhaust).
        let descriptors = FileDescriptorLimit.raise(to: configuration.maxFileDescriptors)
        if let descriptors, descriptors < configuration.maxFileDescriptors {
            logger.warning("the system allows \(descriptors) open files, less than maxFileDescriptors (\(configuration.maxFileDescriptors))")
        }
        let limits = Self.connectionLimits(descriptors: descriptors, configured: configuration.maxIncomingConnections,
                                           databases: databaseNames.count + 1)
        if limits.public < configuration.maxIncomingConnections || configuration.maxIncomingConnections == 0 {
            logger.notice("connections limited to \(limits.public) on the public port and \(limits.admin) on the admin port (\(descriptors.map(String.init) ?? "?") open files allowed)")
        }
        if configuration.adminUsers.isEmpty, let admin = configuration.adminInterface.flatMap(ListenAddress.init),
           !["127.0.0.1", "::1", "localhost"].contains(admin.host) {
            logger.warning("the admin port listens on \(admin.host), not loopback, and asks for no credentials (set adminUsers)")
        }
        let ports = Mutex<(public: Int?, admin: Int?)>((nil, nil))
        let expectAdmin = configuration.adminInterface != nil
        @Sendable func report() async {
            let ready = ports.withLock { p -> ListeningPorts? in
                guard let pub = p.public, !expectAdmin || p.admin != nil else { return nil }
                return ListeningPorts(publicPort: pub, adminPort: p.admin)
            }
            if let ready {
                // Replications of `_replicator` start once URLs of this server are known as such.
                replicatorDocuments.start(self)
                await onRunning(ready)
            }
        }
        var services: [any Service] = [try publicApplication(connections: limits.public) { port in
            ports.withLock { $0.public = port }
            await report()
        }]
        if let admin = configuration.adminInterface {
            services.append(try adminApplication(address: admin, connections: limits.admin) { port in
                ports.withLock { $0.admin = port }
                await report()
            })
        }
        let group = ServiceGroup(services: services, gracefulShutdownSignals: signals, logger: logger)
        do {
            try await group.run()
        } catch {
            replicatorDocuments.stop()
            await replications.stopAll()
            try? close()
            throw error
        }
        replicatorDocuments.stop()
        await replications.stopAll()
        try close()
    }

    /// Registers a filter function for `GET /{database}/_changes?filter=<name>` (a pulling
    /// replicator's `filterName`): it gets each changed document's current revision (tombstones
    /// included) and the request's other query parameters, as strings. Takes effect at once.
    ///
    /// ```swift
    /// try server.registerFilter(named: "by_worker", in: "db") { doc, params in
    ///     doc["worker_id"] != nil && doc["worker_id"] == params["worker_id"]
    /// }
    /// ```
    ///
    /// - Throws: `SetteeError` `notFound` when the server does not serve `database`.
    public func registerFilter(named name: String, in database: String, _ filter: @escaping PeerFilterFunction) throws {
        guard let db = self.database(named: database) else {
            throw SetteeError(.notFound, "no database named \(database) is served")
        }
        db.filters.withLock { $0[name] = filter }
    }

    /// Closes every database the server opened (a served app database stays open).
    ///
    /// ```swift
    /// try server.close()
    /// ```
    public func close() throws {
        let all = databases.withLock { dbs in
            defer { dbs = [:] }
            return Array(dbs.values)
        }
        var firstError: (any Error)?
        for db in all {
            do { try db.close() } catch { firstError = firstError ?? error }
        }
        if let firstError { throw firstError }
    }
}

extension SetteeServer {
    /// Writes one line to the server's log, every control character in it escaped
    /// (``Swift/String/escapedForLog``): IDs, names and paths come from requests, and a line
    /// break in one would forge a line of its own.
    ///
    /// ```swift
    /// server.log(.info, "CRUD: \(db.name)/\(id) saved")
    /// ```
    func log(_ level: Logger.Level, _ message: String) {
        logger.log(level: level, "\(message.escapedForLog)")
    }
}

/// Which log keys (Sync Gateway's `log` setting) are on.
///
/// Keys are Sync Gateway's, in any case: `HTTP`, `CRUD`, `Auth` and `Changes` are what Settee
/// writes under; a `+` form (`HTTP+`, Sync Gateway's "more detail") is its key (Settee has one
/// level); `*` is all. Sync Gateway's other keys are accepted and write nothing here; a key
/// neither knows is ignored and named in a warning at start.
struct LogKeys: Sendable {
    let keys: Set<String>
    /// The configured keys that are no log key at all.
    let unknown: [String]

    /// What Settee writes under.
    static let written: Set<String> = ["HTTP", "CRUD", "AUTH", "CHANGES"]
    /// Sync Gateway's other keys (2.x and 3.x).
    static let gateway: Set<String> = [
        "ACCESS", "ADMIN", "ATTACH", "BLIP", "BUCKET", "CACHE", "CBGT", "CONFIG", "DCP", "EVENTS", "GOCB", "IMPORT",
        "JAVASCRIPT", "MIGRATE", "QUERY", "REPLICATE", "SGCLUSTER", "SGREPLICATE", "SYNC", "SYNCMSG", "WS", "WEBSOCKET",
        "SECURITY", "AUDIT", "SYNC_MSG", "DCP+",
    ]

    init(_ configured: [String]) {
        var keys = Set<String>()
        var unknown: [String] = []
        for k in configured {
            var key = k.uppercased()
            while key.hasSuffix("+") { key.removeLast() }
            if key != "*" && !Self.written.contains(key) && !Self.gateway.contains(key) { unknown.append(k) }
            keys.insert(key)
        }
        self.keys = keys
        self.unknown = unknown
    }

    func contains(_ key: String) -> Bool { keys.contains("*") || keys.contains(key.uppercased()) }

    /// The warning to give at start, if a configured key is no log key.
    var warning: String? {
        guard !unknown.isEmpty else { return nil }
        let names = unknown.map { "\"\($0)\"" }.joined(separator: ", ")
        return "log: \(names) \(unknown.count == 1 ? "is" : "are") not a log key (Settee writes HTTP, CRUD, Auth and Changes; `*` is all); ignored"
    }
}

/// Password checks that succeeded and failed, for `/_metrics`.
///
/// Thread-safe: atomics.
final class AuthenticationCounters: Sendable {
    let succeeded = Atomic<UInt64>(0)
    let failed = Atomic<UInt64>(0)

    func count(_ ok: Bool) {
        if ok { succeeded.add(1, ordering: .relaxed) } else { failed.add(1, ordering: .relaxed) }
    }
}
