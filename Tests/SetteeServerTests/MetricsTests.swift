import Foundation
import HTTPTypes
import HummingbirdTesting
import SetteeTestSupport
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// `GET /_metrics` read as Prometheus reads it: each scrape parsed by the Prometheus project's
/// own parser (prometheus_client from PyPI, through `scripts/metrics-parse`).
@Suite struct MetricsTests {
    /// What prometheus_client parses of a scrape: family name → (type, samples).
    struct Parsed {
        var families: [String: (type: String, samples: [(name: String, labels: [String: String], value: Double?)])]

        /// The value of the sample `name` whose labels include `labels`.
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            for family in families.values {
                for s in family.samples where s.name == name && labels.allSatisfy({ s.labels[$0.key] == $0.value }) { return s.value }
            }
            return nil
        }
    }

    static func parse(_ text: String) throws -> Parsed {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/metrics-parse")
        let run = try Subprocess.runBlocking(script.path, [], input: text)
        guard run.termination == .exited(0) else {
            throw SetteeError(.invalidParameter, "prometheus_client could not parse the scrape: \(run.error)")
        }
        guard case .object(let o) = try JSONValue(parsing: Array(run.output.utf8)) else { throw SetteeError(.invalidJSON, "metrics-parse printed no object") }
        var families: [String: (type: String, samples: [(name: String, labels: [String: String], value: Double?)])] = [:]
        for (name, f) in o {
            let samples = (f.objectValue?["samples"]?.arrayValue ?? []).compactMap { s -> (String, [String: String], Double?)? in
                guard let a = s.arrayValue, a.count == 3, let n = a[0].stringValue else { return nil }
                let labels = (a[1].objectValue ?? [:]).compactMapValues(\.stringValue)
                return (n, labels, a[2].doubleValue)
            }
            families[name] = (f.objectValue?["type"]?.stringValue ?? "", samples.map { (name: $0.0, labels: $0.1, value: $0.2) })
        }
        return Parsed(families: families)
    }

    @Test func aScrapeIsPrometheusTextWithWhatTheServerDid() async throws {
        let dir = NSTemporaryDirectory() + "settee-metrics-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try channelServer("""
        {"databases": {"db": {"server": "\(dir)", "users": {"alice": {"password": "alice-pw", "admin_channels": ["a"]}},
          "roles": {"team": {"admin_channels": ["t"]}},
          "sync": `function(doc) { channel(doc.channels); if (doc.to) { access(doc.to, doc.grant); } }`}}}
        """)
        defer { try? server.close() }
        let db = try #require(server.database(named: "db"))
        try await withPorts(server) { pub, admin async throws in
            for i in 0 ..< 5 { try await put(admin, "d\(i)", #"{"channels": ["a", "c\#(i)"]}"#) }
            try await put(admin, "grant", #"{"to": "alice", "grant": ["b"]}"#)
            #expect(try await pub.send(.get, "/db/d1", headers: basic("alice", "alice-pw")).status == .ok)
            #expect(try await pub.send(.get, "/db/d1", headers: basic("alice", "wrong")).status == .unauthorized)
            #expect(try await admin.send(.post, "/db/_session", json: #"{"name": "alice"}"#).status == .ok)
            // The metrics are the admin port's.
            #expect(try await pub.send(.get, "/_metrics").status == .forbidden)
            // A feed waiting for changes, as the scrape sees it.
            let since = try db.database.lastSequence
            let feed = Task {
                try await server.withClient(.live) { c in
                    try await c.send(.get, "/db/_changes?feed=longpoll&since=\(since)&timeout=60000", headers: basic("alice", "alice-pw"))
                }
            }
            try await eventually { db.openFeedCount == 1 }
            let scrape = try await admin.send(.get, "/_metrics")
            #expect(scrape.status == .ok)
            #expect(scrape.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
            let m = try Self.parse(scrape.text)
            #expect(m.families["settee_http_requests"]?.type == "counter")
            #expect(m.families["settee_http_request_duration_seconds"]?.type == "histogram")
            #expect(m.families["settee_database_users"]?.type == "gauge")
            #expect(m.value("settee_http_requests_total", ["port": "public", "route": "document", "method": "GET", "status": "200"]) == 1)
            #expect(m.value("settee_http_requests_total", ["port": "public", "route": "document", "method": "GET", "status": "401"]) == 1)
            #expect(m.value("settee_http_requests_total", ["port": "admin", "route": "document", "method": "PUT", "status": "201"]) == 6)
            #expect((m.value("settee_http_request_duration_seconds_count", ["route": "document"]) ?? 0) >= 8)
            #expect(m.value("settee_database_doc_writes_total", ["database": "db"]) == 6)
            #expect(m.value("settee_database_doc_reads_total", ["database": "db"]) == 1)
            #expect(m.value("settee_database_sync_function_calls_total", ["database": "db"]) == 6)
            #expect((m.value("settee_database_sync_function_seconds_total", ["database": "db"]) ?? 0) > 0)
            #expect(m.value("settee_database_users", ["database": "db"]) == 1)
            #expect(m.value("settee_database_roles", ["database": "db"]) == 1)
            #expect(m.value("settee_database_sessions", ["database": "db"]) == 1)
            #expect(m.value("settee_database_channels", ["database": "db"]) == 6)   // a, c0…c4
            #expect(m.value("settee_database_continuous_feeds", ["database": "db"]) == 1)
            #expect((m.value("settee_database_file_size_bytes", ["database": "db"]) ?? 0) > 0)
            #expect(m.value("settee_database_doc_count", ["database": "db"]) == 6)
            #expect((m.value("settee_auth_success_total") ?? 0) >= 1)
            #expect(m.value("settee_auth_failed_total") == 1)
            #expect((m.value("settee_password_hashes_total") ?? 0) >= 2)
            #expect(m.value("settee_http_connections", ["port": "admin"]).map { $0 >= 1 } == true)
            // A change ends the feed; the next scrape counts on from the first.
            try await put(admin, "d9", #"{"channels": ["a"]}"#)
            #expect(try await feed.value.rowIDs == ["d9"])
            let again = try Self.parse(try await admin.send(.get, "/_metrics").text)
            #expect(again.value("settee_database_doc_writes_total", ["database": "db"]) == 7)
            #expect(again.value("settee_http_requests_total", ["port": "admin", "route": "metrics", "method": "GET", "status": "200"]) == 1)
        }
    }

    @Test func routeFamiliesAreAFixedSet() {
        let cases: [(String, String)] = [
            ("/", "root"), ("/_session", "session"), ("/_all_dbs", "server"), ("/db", "database"), ("/db/doc", "document"),
            ("/db/doc/att.png", "attachment"), ("/db/_changes", "changes"), ("/db/_bulk_docs", "bulk_docs"),
            ("/db/_find", "mango"), ("/db/_design/d/_view/v", "view"), ("/db/_design/d", "design"), ("/db/_local/x", "local"),
            ("/db/_user/alice", "principals"), ("/db/_session", "session"), ("/_metrics", "metrics"), ("/db/_purge", "database"),
        ]
        for (path, family) in cases { #expect(ServerMetrics.routeFamily(path) == family, "\(path)") }
        #expect(ServerMetrics.labelValue("a\"b\n{c}") == "a_b__c_")
    }
}
