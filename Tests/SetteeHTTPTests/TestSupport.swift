import Foundation
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
import SetteeServer
import Synchronization
import Testing

/// A directory for one test's databases (in /dev/shm when there is one), removed at the end.
final class Scratch: Sendable {
    let path: String
    init() throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        path = base + "settee-http-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func open(_ name: String) throws -> Database {
        var config = DatabaseConfiguration(directory: path)
        config.fullSync = false
        config.maxRevTreeDepth = 1000
        // Many databases are open at once across the suite: each reserves 8 GiB of address space.
        config.maximumSize = 8 << 30
        return try Database(name: name, config: config)
    }
}

/// `settee serve` in this process on a real loopback socket: one database `db` (stored under
/// `directory`, or in memory), users `molly` and `naomi` (password `secret`), GUEST disabled.
final class LiveServer: Sendable {
    let server: SetteeServer
    let port: Int
    let adminPort: Int
    private let task: Task<Void, any Error>

    static func start(directory: String? = nil, port: Int = 0, guest: Bool = false,
                      tls: (cert: String, key: String)? = nil) async throws -> LiveServer {
        var config = ServerConfiguration()
        config.sslCert = tls?.cert
        config.sslKey = tls?.key
        config.interface = "127.0.0.1:\(port)"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        var db = ServerConfiguration.DatabaseConfig(server: directory ?? "walrus:")
        for name in ["molly", "naomi"] { db.users[name] = .init(password: "secret", adminChannels: ["*"]) }
        db.users["GUEST"] = .init(disabled: !guest, adminChannels: ["*"])
        config.databases["db"] = db
        let server = try SetteeServer(configuration: config)
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let task = Task { try await server.run { ports.continuation.yield($0) } }
        var iterator = ports.stream.makeAsyncIterator()
        guard let listening = await iterator.next() else { throw CancellationError() }
        return LiveServer(server: server, port: listening.publicPort, adminPort: listening.adminPort ?? 0, task: task,
                          scheme: tls == nil ? "http" : "https")
    }

    private let scheme: String

    private init(server: SetteeServer, port: Int, adminPort: Int, task: Task<Void, any Error>, scheme: String) {
        self.server = server
        self.port = port
        self.adminPort = adminPort
        self.task = task
        self.scheme = scheme
    }

    /// The public URL of `db` (or another path).
    func url(_ path: String = "db") -> URL { URL(string: "\(scheme)://127.0.0.1:\(port)/\(path)")! }

    func stop() async {
        task.cancel()
        _ = try? await task.value
        try? server.close()
    }
}

/// Runs a replication with a server until it stops; returns the final status.
@discardableResult
func replicate(_ db: Database, _ url: URL, _ type: ReplicatorType = .pushAndPull, user: String? = "molly",
               password: String = "secret", configure: (inout ReplicatorConfiguration) -> Void = { _ in }) async -> ReplicatorStatus {
    var config = ReplicatorConfiguration(database: db, target: URLEndpoint(url: url))
    config.replicatorType = type
    if let user { config.authenticator = BasicAuthenticator(username: user, password: password) }
    config.logHandler = { @Sendable _, _ in }
    configure(&config)
    let replicator = Replicator(config: config)
    replicator.start()
    return await replicator.waitUntilStopped()
}

/// Starts a continuous replication with a server as molly (heartbeat 1 s, retries at most
/// `wait` apart), its statuses and events recorded.
func startContinuous(_ db: Database, _ url: URL, _ type: ReplicatorType, wait: Duration) -> (Replicator, Recorder) {
    var config = ReplicatorConfiguration(database: db, target: URLEndpoint(url: url))
    config.replicatorType = type
    config.continuous = true
    config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
    config.heartbeat = .seconds(1)
    config.maxAttemptWaitTime = wait
    config.logHandler = { @Sendable _, _ in }
    let replicator = Replicator(config: config)
    let recorder = Recorder()
    recorder.attach(replicator)
    replicator.start()
    return (replicator, recorder)
}

/// A document's revision tree as comparable data: each revision with its parent and flags, the
/// current revision, and the current body.
func snapshot(_ db: Database) throws -> [String: String] {
    var out: [String: String] = [:]
    var since: UInt64 = 0
    while case let rows = try db.changes(since: since, limit: 1000), let last = rows.last {
        for row in rows {
            guard let tree = try db.revisionTree(withID: row.documentID) else { continue }
            // Deletion is a leaf's: an ancestor known only from a history has no flag to carry.
            let leaves = Set(tree.leafRevisionIDs)
            let revs = tree.revisions.map { r in
                "\(r.revisionID)<\(r.parentRevisionID ?? "")\(leaves.contains(r.revisionID) && r.isDeleted ? " deleted" : "")"
            }.sorted()
            // Attachments gain CouchDB's `revpos` and `md5` on their way through a server; their
            // content (digest, type, length) is what must agree.
            var body = "-"
            if let doc = try db.document(withID: row.documentID, revisionID: tree.currentRevisionID) {
                var properties = doc.toDictionary()
                if case .object(var atts)? = properties["_attachments"] {
                    for (name, v) in atts {
                        guard case .object(var e) = v else { continue }
                        e.removeValue(forKey: "md5")
                        e.removeValue(forKey: "revpos")
                        atts[name] = .object(e)
                    }
                    properties["_attachments"] = .object(atts)
                }
                body = try JSONValue.object(properties).jsonText()
            }
            out[row.documentID] = "\(tree.currentRevisionID) \(revs) \(body)"
        }
        since = last.sequence
    }
    return out
}

/// Waits until `condition` holds: the event a test needs, however long the machine takes to get
/// there. The suite runs its tests in parallel on Swift's cooperative pool, two threads on a
/// two-core machine, and CPU-bound synchronous tests (the engine's model and crash tests) hold
/// them for tens of seconds at a time: a replication that needs a second of CPU alone then takes a
/// minute of wall time. So no wall-clock limit decides a test; `hangGuard` only ends one that
/// would otherwise never finish.
func eventually(hangGuard: Duration = .seconds(600), _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + hangGuard
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try condition()
}

/// Collects a replicator's statuses and document events.
final class Recorder: Sendable {
    let statuses = Mutex<[ReplicatorStatus]>([])
    let documents = Mutex<[ReplicatedDocument]>([])

    func attach(_ replicator: Replicator) {
        replicator.addChangeListener { s in self.statuses.withLock { $0.append(s) } }
        replicator.addDocumentReplicationListener { r in self.documents.withLock { $0 += r.documents } }
    }

    var activities: [ReplicatorActivity] { statuses.withLock { $0.map(\.activity) } }
}
