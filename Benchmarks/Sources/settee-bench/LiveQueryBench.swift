import Dispatch
import Synchronization
@_spi(Replication) import Settee

/// The `query` group's live-query figures, settee-doc only (SQLite has no live queries), on the queried
/// database with its indexes:
///
/// - *live-notify-p50*, *live-notify-p99*: one live query of `eq-order-limit` (a list's 20 newest tasks);
///   `commits` times, a new newest task of that list is saved (a durable commit) and the clock runs from
///   `saveDocument`'s return to the listener's call (0 when the listener was called first). The next save
///   waits for the notification.
/// - *live-idle-cost*: durable single-document commits of documents no query concerns, timed without live
///   queries and with `idle` live queries of `eq-order-limit` over as many lists (listening, their first
///   results in), after a compaction (untimed, so none runs in the background meanwhile) and a cycle of
///   blocks not counted, in blocks of `idleCommits / 20` (400) in the order without, with, with, without,
///   five times →
///   the time with ÷ the time without.
///
/// The documents saved are purged afterwards, so the queries that follow see the loaded data only.
extension SetteeQueryEngine {
    struct LiveFigures {
        var p50: Double
        var p99: Double
        var idleCost: Double
        var notifications: Int
    }

    func liveFigures(lists: [String], commits: Int = 300, idle: Int = 1000, idleCommits: Int = 8000) throws -> LiveFigures {
        let database = self.database
        var saved: [String] = []
        defer { for id in saved { try? database.purgeDocument(withID: id) } }

        // Notification latency.
        let list = lists[0]
        let query = try database.createQuery(TaskQuery.newestTasks.sqlPlusPlus)
        query.parameters = Parameters().setString(list, forName: "list")
        let heard = DispatchSemaphore(value: 0)
        let last = Mutex<(at: UInt64, first: String?)>((0, nil))
        let token = query.addChangeListener { change in
            let first = change.results?.allResults().first?.string(at: 0)
            last.withLock { $0 = (DispatchTime.now().uptimeNanoseconds, first) }
            heard.signal()
        }
        defer { token.remove() }
        guard heard.wait(timeout: .now() + 60) == .success else { throw EngineError("live query: no first results") }
        var latencies: [Double] = []
        for i in 0 ..< commits {
            let id = "live-\(i)"
            try database.saveDocument(MutableDocument(id: id, data: [
                "type": "task", "title": "live \(i)", "list": ["id": .string(list)], "createdAt": .int(Int64(4_000_000_000_000 + i)),
            ]))
            let committed = DispatchTime.now().uptimeNanoseconds
            saved.append(id)
            guard heard.wait(timeout: .now() + 60) == .success else { throw EngineError("live query: commit \(i) was not announced") }
            let (at, first) = last.withLock { $0 }
            guard first == id else { throw EngineError("live query: after commit \(i) the first row is \(first ?? "none"), expected \(id)") }
            latencies.append(Double(at > committed ? at - committed : 0) / 1e6)
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)] }

        // Idle live queries' cost on durable commits: blocks of commits without and with the
        // live queries, in the order without, with, with, without, five times (a durable
        // commit's time drifts with the disk's flush latency).
        var n = 0
        func commitRun() throws -> UInt64 {
            let watch = Stopwatch()
            for _ in 0 ..< idleCommits / 20 {
                let id = "unrelated-\(n)"
                n += 1
                try database.saveDocument(MutableDocument(id: id, data: ["type": "note", "text": .string(id)]))
                saved.append(id)
            }
            return watch.elapsedNanoseconds
        }
        var queries: [Query] = []
        for k in 0 ..< idle {
            let q = try database.createQuery(TaskQuery.newestTasks.sqlPlusPlus)
            q.parameters = Parameters().setString(lists[k % lists.count], forName: "list")
            queries.append(q)
        }
        func withLiveQueries() throws -> UInt64 {
            let ready = DispatchSemaphore(value: 0)
            let tokens = queries.map { q in q.addChangeListener { _ in ready.signal() } }
            defer { for t in tokens { t.remove() } }
            for _ in 0 ..< idle {
                guard ready.wait(timeout: .now() + 120) == .success else { throw EngineError("live queries: first results missing") }
            }
            return try commitRun()
        }
        // Registering runs each query once, so a block without live queries first runs them
        // too: both kinds of block start from the same reads, and the difference is what idle
        // live queries cost while commits go on.
        func withoutLiveQueries() throws -> UInt64 {
            for q in queries { _ = try q.execute() }
            return try commitRun()
        }
        var without: UInt64 = 0, with: UInt64 = 0
        // The loads and index builds before leave dead space: an automatic compaction running in
        // the background would weigh on whichever blocks it overlaps. One compaction runs to its end
        // first (it waits for a running one), untimed.
        _ = try database.compact()
        let compactionsBefore = database.backgroundStatus.automaticCompactions
        defer { Progress.log("  live-idle: automatic compactions during the blocks: \(database.backgroundStatus.automaticCompactions - compactionsBefore)") }
        var blocks: [String] = []
        // A first cycle, not counted: the first blocks after the compaction run slower either way.
        for _ in 0 ..< 2 { _ = try withoutLiveQueries(); _ = try withLiveQueries() }
        for _ in 0 ..< 5 {
            let cycle = [try withoutLiveQueries(), try withLiveQueries(), try withLiveQueries(), try withoutLiveQueries()]
            without += cycle[0] + cycle[3]
            with += cycle[1] + cycle[2]
            blocks.append(cycle.map { String(format: "%.0f", Double($0) / 1e6) }.joined(separator: "/"))
        }
        Progress.log("  live-idle: blocks (ms, without/with/with/without): \(blocks.joined(separator: " "))")
        return LiveFigures(p50: percentile(0.5), p99: percentile(0.99), idleCost: Double(with) / Double(without),
                           notifications: latencies.count)
    }
}
