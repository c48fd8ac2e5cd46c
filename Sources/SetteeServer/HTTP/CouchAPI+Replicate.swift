import Foundation
import HTTPTypes
import Hummingbird
@_spi(Replication) @_spi(Server) import Settee
import SetteeHTTP
import SetteeReplicator
import Synchronization

/// A continuous replication `POST /_replicate` started: one replicator, or two through a relay.
protocol ReplicationJob: AnyObject, Sendable {
    var isStopped: Bool { get }
    /// Why the job stopped on its own, if it did.
    var failure: ReplicatorError? { get }
    func start()
    func stop()
    /// Returns once the job has stopped, its resources released.
    func waitUntilDone() async
    /// Documents replicated so far.
    var completed: UInt64 { get }
}

extension Replicator: ReplicationJob {
    var isStopped: Bool { status.activity == .stopped }
    var completed: UInt64 { status.progress.completed }
    var failure: ReplicatorError? { status.error }
    func waitUntilDone() async { _ = await waitUntilStopped() }
}

/// Two continuous replicators through a relay database: a pull from the source into it, a push
/// from it to the target. The relay is closed (and, in memory, removed) once both have stopped.
///
/// ```swift
/// let job = RelayedReplication(pull: pull, push: push, relay: relay)
/// job.start()
/// ```
///
/// - Note: Thread-safe: its parts are.
final class RelayedReplication: ReplicationJob {
    let pull: Replicator
    let push: Replicator
    let relay: ServedDatabase

    init(pull: Replicator, push: Replicator, relay: ServedDatabase) {
        self.pull = pull
        self.push = push
        self.relay = relay
    }

    var isStopped: Bool { pull.isStopped && push.isStopped }
    var failure: ReplicatorError? { pull.failure ?? push.failure }
    var completed: UInt64 { pull.completed &+ push.completed }
    func start() { pull.start(); push.start() }
    func stop() { pull.stop(); push.stop() }
    func waitUntilDone() async {
        _ = await pull.waitUntilStopped()
        _ = await push.waitUntilStopped()
        try? relay.close()
    }
}

/// The continuous replications `POST /_replicate` started, by the key its cancel names.
final class ReplicationJobs: Sendable {
    private let jobs = Mutex<[String: any ReplicationJob]>([:])

    func start(_ key: String, _ job: any ReplicationJob) -> Bool {
        jobs.withLock { all in
            if let old = all[key], !old.isStopped { return false }
            all[key] = job
            job.start()
            return true
        }
    }

    func cancel(_ key: String) -> (any ReplicationJob)? { jobs.withLock { $0.removeValue(forKey: key) } }

    /// Each job's key, whether it runs, and what it replicated so far (for `/_metrics`).
    func progress() -> [(key: String, running: Bool, completed: UInt64)] {
        jobs.withLock { all in all.map { ($0.key, !$0.value.isStopped, $0.value.completed) } }
    }

    /// Whether the job `key` runs.
    func isRunning(_ key: String) -> Bool { jobs.withLock { $0[key].map { !$0.isStopped } ?? false } }

    /// Stops every job (the server is closing).
    func stopAll() async {
        let all = jobs.withLock { j in defer { j = [:] }; return Array(j.values) }
        for r in all { r.stop() }
        for r in all { await r.waitUntilDone() }
    }
}

extension CouchAPI {
    /// `POST /_replicate` (admin port): CouchDB's one-shot or continuous replication between a
    /// database this server serves and another one (served here, or a URL), run by Settee's
    /// replicator. `source` and `target` are names or URLs (strings, or `{"url", "headers"}`);
    /// one of them must be served here.
    func replicate(_ call: inout Call) async throws -> Response {
        try requireAdmin(call)
        try allow(call.request.method, [.post])
        let body = try await jsonBody(&call, limit: 1 << 20)
        let run = try await replicate(body)
        return try jsonResponse(run.answer, status: run.status)
    }

    /// A replication as `_replicate`'s body describes it (also a `_replicator` document's, whose
    /// jobs are kept under `jobKey`): a one-shot one has ended when this returns, a continuous
    /// one runs on as `job`.
    func replicate(_ body: [String: JSONValue], jobKey: String? = nil) async throws
    -> (answer: JSONValue, status: HTTPResponse.Status, job: (any ReplicationJob)?) {
        // A URL of this server is its database (CouchDB 3 takes URLs only, its own included).
        let source = local(try Self.endpoint(body["source"], "source"))
        let target = local(try Self.endpoint(body["target"], "target"))
        for flag in ["continuous", "cancel", "create_target"] where body[flag] != nil && body[flag]?.boolValue == nil {
            throw CouchError.badRequest("\(flag) must be a boolean")
        }
        let continuous = body["continuous"] == true
        let description = "\(source.description)→\(target.description)"
        let key = jobKey ?? description
        if body["create_target"] == true, body["cancel"] != true { try await createTarget(target) }
        let jobID = description.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
        let localID = String(jobID, radix: 16) + (continuous ? "+continuous" : "")
        if body["cancel"] == true {
            guard let r = server.replications.cancel(key) else { throw CouchError.notFound("replication \(localID) is not running") }
            r.stop()
            await r.waitUntilDone()
            return (["ok": true, "_local_id": .string(localID)], .ok, nil)
        }
        // The replicator replicates a database of this server with a peer: a push when the
        // source is served here, else a pull.
        let config: ReplicatorConfiguration
        switch (source, target) {
        case (.local(let s), .local(let t)):
            config = ReplicatorConfiguration(database: try served(s).database, target: DatabaseEndpoint(database: try served(t).database))
        case (.local(let s), .remote(let url, let headers)):
            var c = ReplicatorConfiguration(database: try served(s).database, target: URLEndpoint(url: url))
            c.headers = headers
            config = c
        case (.remote(let url, let headers), .local(let t)):
            var c = ReplicatorConfiguration(database: try served(t).database, target: URLEndpoint(url: url))
            c.headers = headers
            c.replicatorType = .pull
            config = c
        case (.remote(let from, let fromHeaders), .remote(let to, let toHeaders)):
            return try await relay(from: (from, fromHeaders), to: (to, toHeaders), key: key, localID: localID, continuous: continuous)
        }
        var settings = config
        if case .local = source { settings.replicatorType = .push }
        settings.continuous = continuous
        // A replication an HTTP client waits for gives up on an unreachable peer after a few tries.
        if !continuous { settings.maxAttempts = 3 }
        let log = server.logger
        settings.logHandler = { level, message in if level >= .warning { log.warning("\("replication: \(message)".escapedForLog)") } }
        let replicator = Replicator(config: settings)
        let counts = Mutex((written: 0, failures: 0))
        replicator.addDocumentReplicationListener { r in
            counts.withLock { c in
                for d in r.documents { if d.error == nil { c.written += 1 } else { c.failures += 1 } }
            }
        }
        if continuous {
            guard server.replications.start(key, replicator) else {
                throw CouchError(.conflict, "conflict", "replication \(localID) is already running")
            }
            return (["ok": true, "_local_id": .string(localID)], .accepted, replicator)
        }
        replicator.start()
        let status = await replicator.waitUntilStopped()
        if let e = status.error { throw Self.replicationFailure(e) }
        let (written, failures) = counts.withLock { ($0.written, $0.failures) }
        return (["ok": true, "session_id": .string(localID), "docs_read": .int(Int64(status.progress.completed)),
                 "docs_written": .int(Int64(written)), "doc_write_failures": .int(Int64(failures))], .ok, nil)
    }

    /// `target` made before replicating (`create_target`): a database of this server that
    /// is not served yet is created in memory, as `PUT /{db}` without a configuration makes it;
    /// a remote one is created with `PUT` on its URL (one that exists already is fine).
    private func createTarget(_ target: ReplicationEnd) async throws {
        switch target {
        case .local(let name):
            guard server.database(named: name) == nil else { return }
            let config = try ServerConfiguration.database(ConfigReader(.object([:]), path: "databases." + name))
            let served = try ServedDatabase.open(name: name, config: config, engine: server.scripts)
            // Made meanwhile by another request: that one is the target.
            if !server.addDatabase(served) { try served.close() }
        case .remote(let url, let headers):
            do {
                try await RemoteDatabase.create(url: url, headers: headers)
            } catch let e as ReplicatorError {
                throw CouchError(e.code == .authenticationFailed ? .unauthorized : .badGateway,
                                 e.code == .authenticationFailed ? "unauthorized" : "replication_failed",
                                 "create_target: \(e.message)")
            }
        }
    }

    /// Between two remote databases: Settee's replicator always has a database of its own on one
    /// side, so the source is pulled into a relay database (in memory, removed afterwards) and
    /// pushed from it to the target, revisions and histories as they are. One-shot: the pull,
    /// then the push. Continuous: both run until cancelled, each change going through the relay.
    private func relay(from: (URL, [String: String]), to: (URL, [String: String]), key: String, localID: String,
                       continuous: Bool) async throws -> (answer: JSONValue, status: HTTPResponse.Status, job: (any ReplicationJob)?) {
        let config = try ServerConfiguration.database(ConfigReader(.object([:]), path: "databases.relay"))
        let relayDB = try ServedDatabase.open(name: "relay", config: config, engine: server.scripts)
        func replicator(_ url: URL, _ headers: [String: String], _ type: ReplicatorType) -> Replicator {
            var c = ReplicatorConfiguration(database: relayDB.database, target: URLEndpoint(url: url))
            c.headers = headers
            c.replicatorType = type
            c.continuous = continuous
            if !continuous { c.maxAttempts = 3 }
            let log = server.logger
            c.logHandler = { level, message in if level >= .warning { log.warning("\("replication: \(message)".escapedForLog)") } }
            return Replicator(config: c)
        }
        let pull = replicator(from.0, from.1, .pull), push = replicator(to.0, to.1, .push)
        if continuous {
            let pair = RelayedReplication(pull: pull, push: push, relay: relayDB)
            guard server.replications.start(key, pair) else {
                try? relayDB.close()
                throw CouchError(.conflict, "conflict", "replication \(localID) is already running")
            }
            return (["ok": true, "_local_id": .string(localID)], .accepted, pair)
        }
        defer { try? relayDB.close() }
        let counts = Mutex((written: 0, failures: 0))
        push.addDocumentReplicationListener { r in
            counts.withLock { c in
                for d in r.documents { if d.error == nil { c.written += 1 } else { c.failures += 1 } }
            }
        }
        var read = 0
        for r in [pull, push] {
            r.start()
            let status = await r.waitUntilStopped()
            if let e = status.error { throw Self.replicationFailure(e) }
            if r === pull { read = Int(status.progress.completed) }
        }
        let (written, failures) = counts.withLock { ($0.written, $0.failures) }
        return (["ok": true, "session_id": .string(localID), "docs_read": .int(Int64(read)),
                 "docs_written": .int(Int64(written)), "doc_write_failures": .int(Int64(failures))], .ok, nil)
    }

    /// A replication's failure as CouchDB answers it.
    static func replicationFailure(_ e: ReplicatorError) -> CouchError {
        switch e.code {
        case .authenticationFailed: CouchError(.unauthorized, "unauthorized", e.message)
        case .remoteDatabaseNotFound: CouchError(.notFound, "db_not_found", e.message)
        default: CouchError(.badGateway, "replication_failed", e.message)
        }
    }

    /// `end` as a database of this server when it is a URL of this server (a loopback or
    /// configured host, one of the ports it listens on) whose path names one database, and
    /// carries no credentials: a URL with a user's name and password (or an `Authorization` or
    /// `Cookie` header) is replicated over HTTP, as that user, with its authentication and
    /// channels, exactly as any other client's.
    private func local(_ end: ReplicationEnd) -> ReplicationEnd {
        guard case .remote(let url, let headers) = end, let host = url.host?.lowercased() else { return end }
        guard url.user == nil, url.password == nil,
              !headers.keys.contains(where: { ["authorization", "cookie"].contains($0.lowercased()) }) else { return end }
        let port = url.port ?? (url.scheme == "https" ? 443 : 80)
        guard server.boundPorts.withLock({ $0.contains(port) }) else { return end }
        let configured = [server.configuration.interface, server.configuration.adminInterface ?? ""]
            .compactMap { ListenAddress($0)?.host.lowercased() }.filter { !$0.isEmpty }
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"]
        guard loopback.contains(host) || configured.contains(host) else { return end }
        let segments = (try? Self.segments(url.path)) ?? []
        guard segments.count == 1, ServerConfiguration.isValidDatabaseName(segments[0]) else { return end }
        return .local(segments[0])
    }

    private func served(_ name: String) throws -> ServedDatabase {
        guard let db = server.database(named: name) else { throw CouchError(.notFound, "db_not_found", "no database named \(name) is served here") }
        return db
    }

    /// A `source` or `target`: a served database's name, or a URL (a string, or CouchDB's
    /// `{"url", "headers"}`).
    private static func endpoint(_ v: JSONValue?, _ name: String) throws -> ReplicationEnd {
        var text: String?
        var headers: [String: String] = [:]
        switch v {
        case .string(let s)?: text = s
        case .object(let o)?:
            text = o["url"]?.stringValue
            for (k, h) in o["headers"]?.objectValue ?? [:] {
                guard case .string(let value) = h else { throw CouchError.badRequest("\(name).headers must hold strings") }
                headers[k] = value
            }
        default: break
        }
        guard let text, !text.isEmpty else { throw CouchError.badRequest("\(name) must be a database name or a URL") }
        if text.hasPrefix("http://") || text.hasPrefix("https://") {
            guard let url = URL(string: text), let host = url.host, !host.isEmpty else { throw CouchError.badRequest("\(name) is not a valid URL") }
            if let port = url.port, !(1 ... 65535).contains(port) {
                throw CouchError.badRequest("\(name) names port \(port), outside 1–65535")
            }
            return .remote(url, headers)
        }
        guard ServerConfiguration.isValidDatabaseName(text) else { throw CouchError.badRequest("\(name) is not a database name or an http(s) URL") }
        return .local(text)
    }
}

/// One side of a `_replicate` request.
enum ReplicationEnd: CustomStringConvertible {
    case local(String)
    case remote(URL, [String: String])

    var description: String {
        switch self {
        case .local(let name): return name
        case .remote(let url, _): return url.absoluteString
        }
    }
}
