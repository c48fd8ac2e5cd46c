import Foundation
import HTTPTypes
import Hummingbird
@_spi(Replication) import Settee
import SetteeHTTP
import SetteeReplicator
import Synchronization

/// The continuous replications `POST /_replicate` started, by the key its cancel names.
final class ReplicationJobs: Sendable {
    private let jobs = Mutex<[String: Replicator]>([:])

    func start(_ key: String, _ replicator: Replicator) -> Bool {
        jobs.withLock { all in
            if let old = all[key], old.status.activity != .stopped { return false }
            all[key] = replicator
            replicator.start()
            return true
        }
    }

    func cancel(_ key: String) -> Replicator? { jobs.withLock { $0.removeValue(forKey: key) } }

    /// Stops every job (the server is closing).
    func stopAll() async {
        let all = jobs.withLock { j in defer { j = [:] }; return Array(j.values) }
        for r in all { r.stop() }
        for r in all { _ = await r.waitUntilStopped() }
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
        let source = try Self.endpoint(body["source"], "source")
        let target = try Self.endpoint(body["target"], "target")
        for flag in ["continuous", "cancel", "create_target"] where body[flag] != nil && body[flag]?.boolValue == nil {
            throw CouchError.badRequest("\(flag) must be a boolean")
        }
        let continuous = body["continuous"] == true
        let key = "\(source.description)→\(target.description)"
        let jobID = key.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
        let localID = String(jobID, radix: 16) + (continuous ? "+continuous" : "")
        if body["cancel"] == true {
            guard let r = server.replications.cancel(key) else { throw CouchError.notFound("replication \(localID) is not running") }
            r.stop()
            _ = await r.waitUntilStopped()
            return try jsonResponse(["ok": true, "_local_id": .string(localID)])
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
        case (.remote, .remote):
            throw CouchError.badRequest("one of source and target must be a database this server serves")
        }
        var settings = config
        if case .local = source { settings.replicatorType = .push }
        settings.continuous = continuous
        // A replication an HTTP client waits for gives up on an unreachable peer after a few tries.
        if !continuous { settings.maxAttempts = 3 }
        let log = server.logger
        settings.logHandler = { level, message in if level >= .warning { log.warning("replication: \(message)") } }
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
            return try jsonResponse(["ok": true, "_local_id": .string(localID)], status: .accepted)
        }
        replicator.start()
        let status = await replicator.waitUntilStopped()
        if let e = status.error {
            switch e.code {
            case .authenticationFailed: throw CouchError(.unauthorized, "unauthorized", e.message)
            case .remoteDatabaseNotFound: throw CouchError(.notFound, "db_not_found", e.message)
            default: throw CouchError(.badGateway, "replication_failed", e.message)
            }
        }
        let (written, failures) = counts.withLock { ($0.written, $0.failures) }
        return try jsonResponse(["ok": true, "session_id": .string(localID), "docs_read": .int(Int64(status.progress.completed)),
                                 "docs_written": .int(Int64(written)), "doc_write_failures": .int(Int64(failures))])
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
            guard let url = URL(string: text), url.host != nil else { throw CouchError.badRequest("\(name) is not a valid URL") }
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
