import Foundation
@_spi(Replication) import Settee
import Synchronization

/// `expiry` and `expiry-stall` (settee-doc only), one run: `count` documents (at most 100,000) that all
/// expire in the same second, purged by the database's expiry sweeper on the wall clock while a writer
/// thread saves single documents.
///
/// Untimed: the documents are saved (`inBatch` of 1000 `saveDocument`, `fullSync`) into a new database
/// (`<engine>/expiry`), then given the same expiration, a whole second a few seconds ahead, 1000
/// `setDocumentExpiration` per `inBatch`. The writer starts before that second and saves
/// `MutableDocument`s over 1000 IDs of its own in a loop, one durable `saveDocument` after another, until
/// every purge has been heard.
///
/// - `expiry`: from the due second (wall clock) until a database change listener has heard the last
///   purge, in ms. The sweeper purges 1000 documents per write transaction.
/// - `expiry-stall`: the longest single `saveDocument` of the writer among those that ran, even in part,
///   between the due second and the last purge, in ms. Its usual duration (one `fdatasync`) is logged
///   beside it, as is the longest save before the due second.
///
/// Checked afterwards: no document of the `count` is left, the last sequence grew by `count`, and every
/// writer save is readable.
struct ExpiryBench {
    static let documentCount = 100_000
    /// Seconds added to the estimated setup time to pick the due second, so the writer runs on its own
    /// for a while before it.
    static let margin: TimeInterval = 2

    let count: Int

    struct Figures {
        var purgeMilliseconds: Double
        var longestStallMilliseconds: Double
    }

    func run(in directory: String, documents: (Range<Int>) throws -> [SetteeDocEngine.NewDocument]) throws -> Figures {
        try Files.createDirectory(directory)
        let engine = try SetteeDocEngine(directory: directory)
        defer { try? engine.close() }
        let database = engine.database

        Progress.log("  settee-doc expiry: loading \(count) documents")
        let progress = Progress("settee-doc expiry load", total: count)
        var ids: [String] = []
        ids.reserveCapacity(count)
        for start in stride(from: 0, to: count, by: Dataset.batchSize) {
            let batch = try documents(start ..< min(start + Dataset.batchSize, count))
            try engine.insert(batch)
            ids += batch.map(\.id)
            progress.update(start + batch.count)
        }

        // The due second: after an estimate of how long setting the expirations takes.
        let estimate = Stopwatch()
        try setExpirations(database, ids.prefix(Dataset.batchSize), Date.distantFuture)
        let perBatch = estimate.elapsedSeconds
        let setup = perBatch * Double(count) / Double(Dataset.batchSize)
        let due = (Date().timeIntervalSince1970 + setup * 1.5 + Self.margin + 1).rounded(.up)
        let dueDate = Date(timeIntervalSince1970: due)

        let listener = PurgeCounter(expected: count)
        let token = database.addChangeListener { change in listener.heard(change) }
        defer { token.remove() }
        let lastSequenceBefore = try database.lastSequence
        try setExpirations(database, ids[...], dueDate)
        let left = dueDate.timeIntervalSinceNow
        guard left > 0.5 else {
            throw EngineError("settee-doc expiry: setting the expirations ended \(String(format: "%.1f", -left)) s after the due second")
        }
        Progress.log(String(format: "  settee-doc expiry: %d expirations set, due in %.1f s", count, left))

        let writer = Writer(database: database)
        writer.start()
        guard listener.wait(seconds: 300) else {
            writer.stop()
            throw EngineError("settee-doc expiry: \(listener.purged) of \(count) purges heard in 300 s")
        }
        writer.stop()
        if let failure = writer.failure { throw EngineError("settee-doc expiry: a writer save failed: \(failure)") }
        let done = listener.lastHeard
        let purgeMilliseconds = done.timeIntervalSince(dueDate) * 1000
        let stall = writer.longest(overlapping: dueDate, done)

        Progress.log(String(format: "  settee-doc expiry: first purge heard %.1f ms after the due second; %d purge transactions",
                            listener.firstHeard.timeIntervalSince(dueDate) * 1000, listener.transactions))
        Progress.log(String(format: "  settee-doc expiry-stall: %d writer saves during the purge, median %.2f ms, longest %.1f ms; "
                            + "longest before the due second %.1f ms",
                            stall.saves, stall.median * 1000, stall.longest * 1000,
                            writer.longest(overlapping: .distantPast, dueDate).longest * 1000))

        // Checks (untimed).
        for id in ids.prefix(1000) where try database.revisionTree(withID: id) != nil {
            throw EngineError("settee-doc expiry: \(id) is still there")
        }
        guard try database.count == UInt64(writer.distinctIDs) else {
            throw EngineError("settee-doc expiry: \(try database.count) documents left, expected the writer's \(writer.distinctIDs)")
        }
        guard try database.lastSequence == lastSequenceBefore + UInt64(count) + UInt64(writer.saves) else {
            throw EngineError("settee-doc expiry: last sequence \(try database.lastSequence) is not the purges' and saves'")
        }
        return Figures(purgeMilliseconds: purgeMilliseconds, longestStallMilliseconds: stall.longest * 1000)
    }

    private func setExpirations(_ database: Database, _ ids: ArraySlice<String>, _ date: Date) throws {
        var start = ids.startIndex
        while start < ids.endIndex {
            let end = min(start + Dataset.batchSize, ids.endIndex)
            try database.inBatch {
                for id in ids[start ..< end] { try database.setDocumentExpiration(withID: id, expiration: date) }
            }
            start = end
        }
    }
}

/// Counts purges heard by a change listener; signals when all have been.
private final class PurgeCounter: Sendable {
    private struct State {
        var purged = 0
        var transactions = 0
        var first: Date?
        var last: Date?
    }
    private let state = Mutex(State())
    private let expected: Int
    private let done = DispatchSemaphore(value: 0)

    init(expected: Int) { self.expected = expected }

    func heard(_ change: DatabaseChange) {
        let n = change.changes.reduce(0) { $0 + ($1.isPurged ? 1 : 0) }
        guard n > 0 else { return }
        let now = Date()
        let finished = state.withLock { s -> Bool in
            s.purged += n
            s.transactions += 1
            if s.first == nil { s.first = now }
            s.last = now
            return s.purged == expected
        }
        if finished { done.signal() }
    }

    func wait(seconds: Double) -> Bool { done.wait(timeout: .now() + seconds) == .success }
    var purged: Int { state.withLock { $0.purged } }
    var transactions: Int { state.withLock { $0.transactions } }
    var firstHeard: Date { state.withLock { $0.first ?? .distantPast } }
    var lastHeard: Date { state.withLock { $0.last ?? .distantPast } }
}

/// Saves single documents in a loop on a thread of its own, timing each save.
private final class Writer: @unchecked Sendable {
    static let idCount = 1000
    private let database: Database
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// (wall-clock start, seconds) per save; only touched by the writer thread until `stop` returns.
    private var timings: [(start: Date, seconds: Double)] = []
    private(set) var failure: (any Error)?

    init(database: Database) {
        self.database = database
        timings.reserveCapacity(1 << 16)
    }

    func start() {
        let thread = Thread { [self] in
            var n = 0
            while !stopping.load(ordering: .relaxed) {
                let doc = MutableDocument(id: "writer-\(n % Self.idCount)", data: ["n": .int(Int64(n))])
                let started = Date()
                let watch = Stopwatch()
                do {
                    try database.saveDocument(doc)
                } catch {
                    failure = error
                    break
                }
                timings.append((started, watch.elapsedSeconds))
                n += 1
            }
            finished.signal()
        }
        thread.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
    }

    var saves: Int { timings.count }
    var distinctIDs: Int { min(timings.count, Self.idCount) }

    /// The saves that ran, even in part, between `from` and `to`: how many, the median and the longest.
    func longest(overlapping from: Date, _ to: Date) -> (saves: Int, median: Double, longest: Double) {
        let during = timings.filter { $0.start <= to && $0.start.addingTimeInterval($0.seconds) >= from }.map(\.seconds).sorted()
        guard !during.isEmpty else { return (0, 0, 0) }
        return (during.count, during[during.count / 2], during.last ?? 0)
    }
}
