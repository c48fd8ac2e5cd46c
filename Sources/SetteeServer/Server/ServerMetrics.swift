import CoreMetrics
import Foundation
import Prometheus
@_spi(Replication) @_spi(Server) import Settee
import Synchronization

/// What `GET /_metrics` (admin port) answers, in Prometheus' text format: metrics made with
/// swift-metrics' API on a factory of the server's own (never the process's global one, so an
/// application that serves a database keeps its own metrics system), written by swift-prometheus.
///
/// Requests are counted and timed as they are answered; what other parts count as they go
/// (documents written and read, sync-function calls, password hashes, replications, compactions)
/// is read when scraped, and so are the gauges (connections, feeds, users, sessions, file sizes).
/// Names follow Sync Gateway's `_metrics` and CouchDB's `_node/_local/_stats` where they have
/// one, with Settee's prefix (`Formats/http-api.md`, "Metrics").
///
/// ```swift
/// let text = String(decoding: try server.metrics.scrape(server), as: UTF8.self)
/// ```
///
/// Thread-safe: the handles are behind a lock; swift-prometheus' metrics are thread-safe.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory

    private struct RequestKey: Hashable {
        var admin: Bool
        var route: String
        /// The index in ``methods``; its count for any other.
        var method: Int
        var status: Int
    }
    private struct Handles {
        var requests: [RequestKey: (CoreMetrics.Counter, CoreMetrics.Timer)] = [:]
        var latency: [String: CoreMetrics.Timer] = [:]
        /// Totals kept elsewhere, published as counters: what was published of each so far.
        var published: [String: (counter: CoreMetrics.Counter, value: UInt64)] = [:]
        var publishedSeconds: [String: (counter: CoreMetrics.FloatingPointCounter, value: UInt64)] = [:]
        var gauges: [String: CoreMetrics.Gauge] = [:]
    }
    private let handles = Mutex(Handles())
    /// Each database's channel count and when it was read: a count costs a seek per channel,
    /// so it is read at most once a minute.
    private let channelCounts = Mutex<[String: (at: ContinuousClock.Instant, count: Int)]>([:])

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Request latencies from a tenth of a millisecond: most answers take about a millisecond.
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        self.factory = factory
    }

    // MARK: Requests

    /// Counts and times one answered request. `route` is a family from ``routeFamily(_:)``.
    func request(admin: Bool, route: String, method: String, status: Int, duration: Duration) {
        // A key of a bit, a literal and two small numbers: hashed on every request, under the lock.
        let key = RequestKey(admin: admin, route: route, method: Self.methods.firstIndex(of: method) ?? Self.methods.count,
                             status: (100 ... 599).contains(status) ? status : 0)
        let (counter, timer) = handles.withLock { h -> (CoreMetrics.Counter, CoreMetrics.Timer) in
            if let known = h.requests[key] { return known }
            let counter = CoreMetrics.Counter(label: "settee_http_requests_total",
                                              dimensions: [("port", admin ? "admin" : "public"), ("route", route),
                                                           ("method", key.method < Self.methods.count ? Self.methods[key.method] : "OTHER"),
                                                           ("status", String(key.status))],
                                              factory: factory)
            let timer = h.latency[route] ?? {
                let t = CoreMetrics.Timer(label: "settee_http_request_duration_seconds", dimensions: [("route", route)], factory: factory)
                h.latency[route] = t
                return t
            }()
            h.requests[key] = (counter, timer)
            return (counter, timer)
        }
        counter.increment()
        let parts = duration.components
        timer.recordNanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }

    private static let methods = ["GET", "HEAD", "PUT", "POST", "DELETE", "COPY", "OPTIONS"]

    /// The family of a request path, a small fixed set (a label's values must not grow with
    /// the requests: no database name, document ID or user in it). Read from the path's first
    /// four segments in place: it runs on every request.
    static func routeFamily(_ path: String) -> String {
        var segments: (Substring, Substring, Substring, Substring) = ("", "", "", "")
        var found = 0
        let bytes = path.utf8
        var index = bytes.startIndex
        while found < 4, index < bytes.endIndex {
            guard bytes[index] != UInt8(ascii: "/") else {
                index = bytes.index(after: index)
                continue
            }
            let end = bytes[index...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            switch found {
            case 0: segments.0 = path[index ..< end]
            case 1: segments.1 = path[index ..< end]
            case 2: segments.2 = path[index ..< end]
            default: segments.3 = path[index ..< end]
            }
            found += 1
            index = end
        }
        guard found > 0 else { return "root" }
        func special(_ segment: Substring) -> Bool { segment.utf8.first == UInt8(ascii: "_") }
        let first = segments.0
        // A document's path names no special segment: answered before any comparison.
        if found == 2, !special(first), !special(segments.1) { return "document" }
        if special(first) {
            switch first {
            case "_session": return "session"
            case "_users": return "users"
            case "_replicate", "_replicator": return "replicate"
            case "_admin": return "admin_page"
            case "_metrics": return "metrics"
            case "_db_updates": return "db_updates"
            default: return "server"
            }
        }
        guard found > 1 else { return "database" }
        let second = segments.1
        switch second {
        case "_changes": return "changes"
        case "_bulk_docs": return "bulk_docs"
        case "_bulk_get": return "bulk_get"
        case "_all_docs", "_design_docs", "_local_docs": return "all_docs"
        case "_find", "_explain", "_index": return "mango"
        case "_revs_diff", "_missing_revs": return "revs_diff"
        case "_session": return "session"
        case "_user", "_role": return "principals"
        case "_local": return "local"
        case "_design": return found > 3 && segments.3.hasPrefix("_view") ? "view" : "design"
        default:
            if special(second) { return "database" }
            return found > 2 ? "attachment" : "document"
        }
    }

    // MARK: Scraping

    /// Sets a gauge to `value` (made on first use).
    private func gauge(_ name: String, _ dimensions: [(String, String)] = [], _ value: Double) {
        let key = name + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        let g = handles.withLock { h in
            h.gauges[key] ?? {
                let g = CoreMetrics.Gauge(label: name, dimensions: dimensions, factory: factory)
                h.gauges[key] = g
                return g
            }()
        }
        g.record(value)
    }

    /// Publishes a total counted elsewhere as a counter (by what it grew since the last scrape).
    private func total(_ name: String, _ dimensions: [(String, String)] = [], _ value: UInt64) {
        let key = name + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        let (counter, delta) = handles.withLock { h -> (CoreMetrics.Counter, UInt64) in
            let entry = h.published[key] ?? (CoreMetrics.Counter(label: name, dimensions: dimensions, factory: factory), 0)
            // A total that went back (a database opened again) starts over from there.
            let delta = value >= entry.value ? value - entry.value : value
            h.published[key] = (entry.counter, value)
            return (entry.counter, delta)
        }
        if delta > 0 { counter.increment(by: delta) }
    }

    /// Publishes a time counted elsewhere in nanoseconds as a counter of seconds.
    private func totalSeconds(_ name: String, _ dimensions: [(String, String)] = [], nanoseconds value: UInt64) {
        let key = name + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        let (counter, delta) = handles.withLock { h -> (CoreMetrics.FloatingPointCounter, UInt64) in
            let entry = h.publishedSeconds[key] ?? (CoreMetrics.FloatingPointCounter(label: name, dimensions: dimensions, factory: factory), 0)
            let delta = value >= entry.value ? value - entry.value : value
            h.publishedSeconds[key] = (entry.counter, value)
            return (entry.counter, delta)
        }
        if delta > 0 { counter.increment(by: Double(delta) / 1e9) }
    }

    /// Forgets what was published for a database no longer served.
    private func forget(databasesOtherThan served: Set<String>) {
        let stale = handles.withLock { h -> [CoreMetrics.Gauge] in
            var stale: [CoreMetrics.Gauge] = []
            for (key, g) in h.gauges {
                guard let db = Self.database(in: key), !served.contains(db) else { continue }
                stale.append(g)
                h.gauges.removeValue(forKey: key)
            }
            for (key, entry) in h.published {
                guard let db = Self.database(in: key), !served.contains(db) else { continue }
                entry.counter.destroy()
                h.published.removeValue(forKey: key)
            }
            for (key, entry) in h.publishedSeconds {
                guard let db = Self.database(in: key), !served.contains(db) else { continue }
                entry.counter.destroy()
                h.publishedSeconds.removeValue(forKey: key)
            }
            return stale
        }
        for g in stale { g.destroy() }
    }

    /// A label value made of letters, digits and `-_.:/` only, at most 100 of them: what a
    /// replication's key holds is a client's choice.
    static func labelValue(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.prefix(100).map { c in
            c.isASCII && (CharacterSet.alphanumerics.contains(c) || "-_.:/".unicodeScalars.contains(c)) ? c : "_"
        }))
    }

    private static func database(in key: String) -> String? {
        guard let range = key.range(of: "|database=") else { return nil }
        let rest = key[range.upperBound...]
        return String(rest.prefix { $0 != "|" })
    }

    private func channelCount(_ db: ServedDatabase) throws -> Int {
        let now = ContinuousClock.now
        if let known = channelCounts.withLock({ $0[db.name] }), now - known.at < .seconds(60) { return known.count }
        let count = try db.database.channelCount()
        channelCounts.withLock { $0[db.name] = (now, count) }
        return count
    }

    /// Reads every gauge and total, then writes the whole registry in Prometheus' text format.
    func scrape(_ server: SetteeServer) throws -> [UInt8] {
        let listeners = server.listeners.withLock { $0 }
        for (name, limiter) in listeners { gauge("settee_http_connections", [("port", name)], Double(limiter.count)) }
        let hasher = PasswordHasher.shared
        total("settee_password_hashes_total", [], hasher.computed.load(ordering: .relaxed))
        totalSeconds("settee_password_hash_seconds_total", nanoseconds: hasher.nanoseconds.load(ordering: .relaxed))
        total("settee_password_checks_refused_total", [], hasher.refused.load(ordering: .relaxed))
        gauge("settee_password_checks_waiting", [], Double(hasher.waiting))
        gauge("settee_password_hash_threads", [], Double(hasher.threadCount))
        total("settee_auth_success_total", [], server.authentications.succeeded.load(ordering: .relaxed))
        total("settee_auth_failed_total", [], server.authentications.failed.load(ordering: .relaxed))
        let jobs = server.replications.progress()
        gauge("settee_replications_running", [], Double(jobs.filter(\.running).count))
        for job in jobs {
            total("settee_replication_docs_completed_total", [("replication", Self.labelValue(job.key))], job.completed)
        }
        var served: Set<String> = []
        for name in server.databaseNames + [ReplicatorDocuments.databaseName] {
            guard let db = server.database(named: name) else { continue }
            served.insert(name)
            let d = [("database", name)]
            let stats = try db.database.statistics
            gauge("settee_database_doc_count", d, Double(stats.documentCount))
            gauge("settee_database_file_size_bytes", d, Double(stats.fileSize))
            gauge("settee_database_last_sequence", d, Double(stats.lastSequence))
            total("settee_database_doc_writes_total", d, db.counters.documentsWritten.load(ordering: .relaxed))
            total("settee_database_doc_reads_total", d, db.counters.documentsRead.load(ordering: .relaxed))
            total("settee_database_sync_function_calls_total", d, db.routing.calls.load(ordering: .relaxed))
            totalSeconds("settee_database_sync_function_seconds_total", d, nanoseconds: db.routing.nanoseconds.load(ordering: .relaxed))
            total("settee_database_compactions_total", d,
                  UInt64(max(0, db.database.backgroundStatus.automaticCompactions)) + db.counters.compactions.load(ordering: .relaxed))
            gauge("settee_database_compaction_running", d, Double(db.compactionsRunning.load(ordering: .relaxed)))
            gauge("settee_database_continuous_feeds", d, Double(db.openFeedCount))
            let counts = db.principals.counts
            gauge("settee_database_users", d, Double(counts.users))
            gauge("settee_database_roles", d, Double(counts.roles))
            gauge("settee_database_sessions", d, Double(counts.sessions))
            gauge("settee_database_channels", d, Double(try channelCount(db)))
            total("settee_database_access_computations_total", d, db.accessComputations.load(ordering: .relaxed))
        }
        forget(databasesOtherThan: served)
        return registry.emitToBuffer()
    }
}
