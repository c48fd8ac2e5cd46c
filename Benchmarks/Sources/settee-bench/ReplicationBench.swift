import Dispatch
import Foundation
@_spi(Replication) import Settee
@_spi(Replication) import SetteeReplicator

/// `replicate-local` and `replicate-noop` (settee-doc only), one run: `SetteeReplicator` between two
/// databases in this process (`DatabaseEndpoint`), both `fullSync`.
///
/// - `replicate-local`: min(N, 100,000) documents saved in the source (untimed, as `bulk-load`), then a
///   one-shot push (`ReplicatorConfiguration.replicatorType = .push`, default batch size) into an empty
///   target, timed from `start()` until it has stopped → docs/s. Every batch is a changes page, a
///   `revsDiff` on the target, the revisions fetched with their history from the source, and one
///   `insertRevisions` transaction on the target; the next batch is fetched while one is inserted;
///   checkpoints are written on both sides.
/// - `replicate-noop`: the rest of the N documents saved in the source and replicated both ways,
///   untimed, so both checkpoints are at the end of both feeds; then a one-shot push-and-pull with
///   nothing new, timed from `start()` until stopped, the median of 11 runs → ms. It reads the two
///   checkpoint documents of each direction and each source's last sequence, and scans nothing.
///
/// Checked afterwards: the target holds every document with the dataset's properties (1000 compared),
/// and the no-op runs changed neither database's last sequence.
struct ReplicationBench {
    static let pushCount = 100_000
    static let noopRuns = 11

    struct Figures {
        var docsPerSecond: Double
        var noopMilliseconds: Double
    }

    let total: Int
    let ids: [String]
    let dataset: Dataset

    func run(in directory: String) throws -> Figures {
        try Files.createDirectory(directory)
        let source = try SetteeDocEngine(directory: directory + "/source")
        let target = try SetteeDocEngine(directory: directory + "/target")
        defer {
            try? source.close()
            try? target.close()
        }
        let pushed = min(total, Self.pushCount)
        try load(source, 0 ..< pushed)
        Files.settleWriteback()

        var config = ReplicatorConfiguration(database: source.database, target: DatabaseEndpoint(database: target.database))
        config.replicatorType = .push
        Progress.log("  settee-doc replicate-local: pushing \(pushed) documents")
        let watch = Stopwatch()
        let status = Self.runToEnd(Replicator(config: config))
        let seconds = watch.elapsedSeconds
        if let error = status.error { throw EngineError("settee-doc replicate-local: \(error)") }
        guard try target.database.count == UInt64(pushed) else {
            throw EngineError("settee-doc replicate-local: the target has \(try target.database.count) of \(pushed) documents")
        }
        try verify(target, pushed)

        // The no-op: a database of all N documents, in step both ways.
        if total > pushed {
            try load(source, pushed ..< total)
            Progress.log("  settee-doc replicate-noop: pushing the other \(total - pushed) documents (untimed)")
        }
        var both = config
        both.replicatorType = .pushAndPull
        Progress.log("  settee-doc replicate-noop: replicating both ways until in step (untimed)")
        if let error = Self.runToEnd(Replicator(config: both)).error { throw EngineError("settee-doc replicate-noop: \(error)") }
        guard try target.database.count == UInt64(total) else {
            throw EngineError("settee-doc replicate-noop: the target has \(try target.database.count) of \(total) documents")
        }
        let sequences = (try source.database.lastSequence, try target.database.lastSequence)
        var times: [Double] = []
        for _ in 0 ..< Self.noopRuns {
            let replicator = Replicator(config: both)
            let watch = Stopwatch()
            let status = Self.runToEnd(replicator)
            times.append(watch.elapsedSeconds * 1000)
            if let error = status.error { throw EngineError("settee-doc replicate-noop: \(error)") }
            guard status.progress.total == 0 else { throw EngineError("settee-doc replicate-noop: it saw \(status.progress.total) changes") }
        }
        guard try (source.database.lastSequence, target.database.lastSequence) == sequences else {
            throw EngineError("settee-doc replicate-noop: a no-op replication changed a database")
        }
        times.sort()
        Progress.log(String(format: "  settee-doc replicate-noop: %d runs, min %.3f ms, max %.3f ms", times.count, times[0], times[times.count - 1]))
        return Figures(docsPerSecond: Double(pushed) / seconds, noopMilliseconds: times[times.count / 2])
    }

    /// Saves the dataset's documents at `positions` of the insertion order, 1000 per `inBatch` (untimed).
    private func load(_ engine: SetteeDocEngine, _ positions: Range<Int>) throws {
        let progress = Progress("settee-doc replicate load", total: positions.count)
        for start in stride(from: positions.lowerBound, to: positions.upperBound, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, positions.upperBound)
            try engine.insert(try dataset.insertionOrder[start ..< end].map { index in
                SetteeDocEngine.NewDocument(id: ids[index], properties: try SetteeDocEngine.properties(of: dataset.body(index)))
            })
            progress.update(end - positions.lowerBound)
        }
    }

    private func verify(_ target: SetteeDocEngine, _ pushed: Int) throws {
        for position in stride(from: 0, to: pushed, by: max(1, pushed / 1000)) {
            let index = dataset.insertionOrder[position]
            guard let doc = try target.database.document(withID: ids[index]),
                  doc.toDictionary() == (try SetteeDocEngine.properties(of: dataset.body(index))), doc.revisionID?.hasPrefix("1-") == true
            else { throw EngineError("settee-doc replicate-local: document \(index) reads back wrong") }
        }
    }

    /// Starts a replicator and blocks this (non-async) thread until it has stopped.
    static func runToEnd(_ replicator: Replicator) -> ReplicatorStatus {
        let done = DispatchSemaphore(value: 0)
        let result = ResultBox()
        replicator.start()
        Task {
            result.status = await replicator.waitUntilStopped()
            done.signal()
        }
        done.wait()
        return result.status!
    }

    private final class ResultBox: @unchecked Sendable {
        // Written by the task before it signals, read after the wait: the semaphore orders them.
        var status: ReplicatorStatus?
    }
}
