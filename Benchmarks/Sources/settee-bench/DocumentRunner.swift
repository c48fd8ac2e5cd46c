import Foundation
@_spi(Replication) import Settee
import Synchronization

/// `Runner`'s counterpart for `settee-doc`: the same workloads on the same data, in the same order and with
/// the same timing rules, through Settee's document API.
///
/// The API takes `String` IDs and `JSONValue` properties, so what the other engines get as bytes is
/// converted before any clock starts: the IDs once, the bodies with `JSONValue(parsing:)` batch by batch
/// (as the other engines' batches are generated before their clocks start). Only the API calls are timed.
/// Stored bodies are canonical JSON (sorted keys), not the dataset's bytes, so reads are checked by
/// comparing properties with the parsed dataset body rather than by byte totals.
final class DocumentRunner {
    typealias Engine = SetteeDocEngine

    /// Documents per `changes(since:limit:)` call in `changes-scan`.
    static let changesPageSize = 10_000

    private let dataset: Dataset
    private let workloads: Set<Workload>
    /// Document `i`'s ID (`doc-%08d`), made once, untimed.
    private lazy var ids: [String] = (0 ..< dataset.documentCount).map {
        String(decoding: dataset.key($0), as: UTF8.self)
    }

    init(dataset: Dataset, workloads: Set<Workload>) {
        self.dataset = dataset
        self.workloads = workloads
    }

    func run(in directory: String) throws -> [Measurement] {
        var results: [Measurement] = []
        func report(_ workload: Workload, _ value: Double) {
            guard workloads.contains(workload) else { return }
            results.append(Measurement(workload: workload, engine: Engine.name, value: value,
                                       note: Engine.note(for: workload)))
            Progress.log("  \(Engine.name.rawValue) \(workload.rawValue): \(Report.format(value, unit: workload.unit)) \(workload.unit)")
        }
        func report(_ workload: Workload, figures: [(Figure, Double, note: String?)]) {
            for (figure, value, note) in figures {
                let measurement = Measurement(workload: workload, figure: figure, engine: Engine.name, value: value,
                                              note: note ?? Engine.note(for: figure))
                results.append(measurement)
                Progress.log("  \(Engine.name.rawValue) \(measurement.label): \(Report.format(value, unit: figure.unit)) \(figure.unit)")
            }
        }

        if workloads.contains(where: \.needsLoad) {
            var engine = try Engine(directory: directory)
            Files.settleWriteback()
            let inBatch = try bulkLoad(engine)
            report(.bulkLoad, inBatch)
            try verifyDocuments(engine, dataset.timedGets.prefix(1000), expected: dataset.body)
            let counts = try engine.counts
            guard counts.documents == UInt64(dataset.documentCount), counts.lastSequence == UInt64(dataset.documentCount)
            else { throw EngineError("settee-doc: after the load: \(counts)") }
            try engine.close()
            report(.fileSize, Double(try Engine.footprint(of: directory)))

            let later = [Workload.pointGet, .changesScan, .durableCommit].filter(workloads.contains)
            if !later.isEmpty {
                engine = try Engine(directory: directory)
                for workload in later {
                    Files.settleWriteback()
                    switch workload {
                    case .pointGet:
                        let sync = try pointGet(engine)
                        report(workload, sync)
                        let viaAsync = try pointGetAsync(engine)
                        report(workload, figures: [(.asyncGet, viaAsync, "try await document(withID:) from one task, on the calling task"),
                                                   (.asyncGetKept, sync / viaAsync, "sync ns/op ÷ async ns/op (target ≥ 0.9)")])
                    case .changesScan: report(workload, try changesScan(engine))
                    default:
                        report(workload, try durableCommit(engine))
                        Files.settleWriteback()
                        let turns = try durableCommitInterleaved(engine)
                        report(workload, figures: [
                            (.asyncCommits, turns.async, "try await saveDocument from one task (the worker thread), blocks taking turns with sync; fullSync"),
                            (.asyncCommitsKept, turns.async / turns.sync, "async ÷ sync commits/s of the blocks taking turns (target ≥ 0.9)"),
                            (.executorCommitsKept, turns.executor / turns.sync, "the same from a task preferring db.writeExecutor ÷ sync"),
                        ])
                    }
                }
                try engine.close()
            }
        }

        if workloads.contains(.bulkLoad), let inBatch = results.first(where: { $0.workload == .bulkLoad && $0.figure == nil })?.value {
            Files.settleWriteback()
            let prepared = try bulkLoadPrepared(in: directory + "/bulk-prepared", pipelined: false)
            Files.settleWriteback()
            let pipelined = try bulkLoadPrepared(in: directory + "/bulk-pipelined", pipelined: true)
            report(.bulkLoad, figures: [
                (.saveDocuments, prepared, "saveDocuments per batch of 1000: prepared, then one commit; fullSync"),
                (.asyncPipelined, pipelined, "try await saveDocuments, 2 batches in flight: one prepared while one commits"),
                (.pipelinedGain, pipelined / inBatch, "async-pipelined ÷ the inBatch row"),
            ])
        }
        if workloads.contains(.revInsert) {
            report(.revInsert, try revInsert(in: directory + "/rev-insert"))
        }
        if workloads.contains(where: \.isExpiry) {
            let count = min(dataset.documentCount, ExpiryBench.documentCount)
            let bench = ExpiryBench(count: count)
            let ids = ids
            let figures = try bench.run(in: directory + "/expiry") { range in
                try range.map { Engine.NewDocument(id: ids[$0], properties: try Engine.properties(of: dataset.body($0))) }
            }
            report(.expiry, figures.purgeMilliseconds)
            report(.expiryStall, figures.longestStallMilliseconds)
        }

        if workloads.contains(where: \.isReplication) {
            let figures = try ReplicationBench(total: dataset.documentCount, ids: ids, dataset: dataset)
                .run(in: directory + "/replicate")
            // One run measures both; selecting either reports both.
            for (workload, value) in [(Workload.replicateLocal, figures.docsPerSecond), (.replicateNoop, figures.noopMilliseconds)] {
                results.append(Measurement(workload: workload, engine: Engine.name, value: value, note: Engine.note(for: workload)))
                Progress.log("  \(Engine.name.rawValue) \(workload.rawValue): \(Report.format(value, unit: workload.unit)) \(workload.unit)")
            }
        }

        if workloads.contains(.compaction) {
            report(.compaction, figures: try compaction(in: directory + "/compaction",
                                                        fresh: directory + "/compaction-fresh"))
        }
        return results
    }

    // MARK: - Workloads

    /// All documents, 1000 saves per `inBatch` (one durable commit), in the insertion order → docs/s.
    private func bulkLoad(_ engine: Engine) throws -> Double {
        let total = dataset.documentCount
        let ids = ids
        let progress = Progress("\(Engine.name.rawValue) bulk-load", total: total)
        var nanoseconds: UInt64 = 0
        for start in stride(from: 0, to: total, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, total)
            // Untimed: the batch's IDs and parsed bodies.
            let documents = try dataset.insertionOrder[start ..< end].map { index in
                Engine.NewDocument(id: ids[index], properties: try Engine.properties(of: dataset.body(index)))
            }
            let watch = Stopwatch()
            try engine.insert(documents)
            nanoseconds += watch.elapsedNanoseconds
            progress.update(end)
        }
        return Double(total) / (Double(nanoseconds) / 1e9)
    }

    /// bulk-load again into a new database through `saveDocuments` (each batch's documents prepared
    /// before the write lock), or with `pipelined` through `try await saveDocuments` with two batches in
    /// flight. The batches' parsed bodies are made untimed, 100 batches at a time; the time of each group's
    /// saves is summed → docs/s.
    private func bulkLoadPrepared(in directory: String, pipelined: Bool) throws -> Double {
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let engine = try Engine(directory: directory)
        let total = dataset.documentCount
        let ids = ids
        let label = pipelined ? "async-pipelined" : "save-documents"
        let progress = Progress("\(Engine.name.rawValue) bulk-load \(label)", total: total)
        var nanoseconds: UInt64 = 0
        let group = Dataset.batchSize * 100
        for groupStart in stride(from: 0, to: total, by: group) {
            let groupEnd = min(groupStart + group, total)
            let batches = try stride(from: groupStart, to: groupEnd, by: Dataset.batchSize).map { start in
                try dataset.insertionOrder[start ..< min(start + Dataset.batchSize, groupEnd)].map { index in
                    Engine.NewDocument(id: ids[index], properties: try Engine.properties(of: dataset.body(index)))
                }
            }
            if pipelined {
                nanoseconds += try Self.runTask { () async throws -> UInt64 in
                    let watch = Stopwatch()
                    try await withThrowingTaskGroup(of: Void.self) { tasks in
                        var inFlight = 0
                        for batch in batches {
                            if inFlight == 2 { try await tasks.next(); inFlight -= 1 }
                            tasks.addTask { try await engine.insertPreparedAsync(batch) }
                            inFlight += 1
                        }
                        try await tasks.waitForAll()
                    }
                    return watch.elapsedNanoseconds
                }
            } else {
                for batch in batches {
                    let watch = Stopwatch()
                    try engine.insertPrepared(batch)
                    nanoseconds += watch.elapsedNanoseconds
                }
            }
            progress.update(groupEnd)
        }
        try verifyDocuments(engine, dataset.timedGets.prefix(1000), expected: dataset.body)
        let counts = try engine.counts
        guard counts.documents == UInt64(total), counts.lastSequence == UInt64(total) else {
            throw EngineError("settee-doc: after bulk-load \(label): \(counts)")
        }
        try engine.close()
        return Double(total) / (Double(nanoseconds) / 1e9)
    }

    /// N uniformly random `document(withID:)` after an untimed warm-up of N others → ns/op.
    private func pointGet(_ engine: Engine) throws -> Double {
        let ids = ids
        Progress.log("  \(Engine.name.rawValue) point-get: warm-up, then \(dataset.timedGets.count) timed gets")
        var found = 0
        for index in dataset.warmUpGets where try engine.get(ids[index]) != nil {
            found += 1
        }
        guard found == dataset.warmUpGets.count else { throw EngineError("settee-doc: point-get: documents missing") }
        found = 0
        let watch = Stopwatch()
        for index in dataset.timedGets where try engine.get(ids[index]) != nil {
            found += 1
        }
        let elapsed = watch.elapsedNanoseconds
        guard found == dataset.timedGets.count else {
            throw EngineError("settee-doc: point-get found \(found) of \(dataset.timedGets.count) documents")
        }
        try verifyDocuments(engine, dataset.timedGets.prefix(1000), expected: dataset.body)
        return Double(elapsed) / Double(dataset.timedGets.count)
    }

    /// point-get again through the `async` API: the same timed gets, each awaited from one task → ns/op.
    private func pointGetAsync(_ engine: Engine) throws -> Double {
        let ids = ids
        let gets = dataset.timedGets
        let (elapsed, found) = try Self.runTask { () async throws -> (UInt64, Int) in
            var found = 0
            let watch = Stopwatch()
            for index in gets where try await engine.getAsync(ids[index]) != nil { found += 1 }
            return (watch.elapsedNanoseconds, found)
        }
        guard found == gets.count else { throw EngineError("settee-doc: async point-get found \(found) of \(gets.count) documents") }
        return Double(elapsed) / Double(gets.count)
    }

    /// durable-commit again, the same updates in the same order, in blocks of 100 that take turns: the
    /// synchronous save, `try await saveDocument` from one task (the save runs on the database's worker
    /// thread), and the same from a task that prefers the database's `writeExecutor` (it runs on the
    /// worker thread and saves inline). The disk's latency drifts during a run; taking turns exposes the
    /// three forms to the same drift → commits/s of each.
    private func durableCommitInterleaved(_ engine: Engine) throws -> (sync: Double, async: Double, executor: Double) {
        let count = Dataset.updateCount
        let block = 100
        let updates = try (0 ..< count).map { number in
            Engine.NewDocument(id: ids[dataset.updatedDocuments[number]], properties: try Engine.properties(of: dataset.update(number).body))
        }
        var nanoseconds: [UInt64] = [0, 0, 0], counts = [0, 0, 0]
        for (index, start) in stride(from: 0, to: count, by: block).enumerated() {
            let slice = Array(updates[start ..< min(start + block, count)])
            let mode = index % 3
            switch mode {
            case 0:
                for update in slice {
                    let watch = Stopwatch()
                    try engine.update(update)
                    nanoseconds[0] += watch.elapsedNanoseconds
                }
            default:
                nanoseconds[mode] += try Self.runTask { () async throws -> UInt64 in
                    func saves() async throws -> UInt64 {
                        var total: UInt64 = 0
                        for update in slice {
                            let watch = Stopwatch()
                            try await engine.updateAsync(update)
                            total += watch.elapsedNanoseconds
                        }
                        return total
                    }
                    if mode == 1 { return try await saves() }
                    return try await withTaskExecutorPreference(engine.database.writeExecutor) { try await saves() }
                }
            }
            counts[mode] += slice.count
        }
        try verifyDocuments(engine, Set(dataset.updatedDocuments), expected: dataset.finalBody)
        let rates = (0 ..< 3).map { Double(counts[$0]) / (Double(nanoseconds[$0]) / 1e9) }
        return (rates[0], rates[1], rates[2])
    }

    /// Runs `body` in a task and waits for it on this (the bench's main) thread.
    private static func runTask<R: Sendable>(_ body: @escaping @Sendable () async throws -> R) throws -> R {
        let result = Mutex<Swift.Result<R, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let r: Swift.Result<R, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Every change from sequence 0, `changesPageSize` per call → docs/s. The timed pass counts the entries;
    /// an untimed second pass checks each one (ID in insertion order, sequence, generation-1 revision, one
    /// leaf, not deleted).
    private func changesScan(_ engine: Engine) throws -> Double {
        let watch = Stopwatch()
        let count = try engine.scanChanges(pageSize: Self.changesPageSize)
        let seconds = watch.elapsedSeconds
        guard count == dataset.documentCount else {
            throw EngineError("settee-doc: changes-scan saw \(count) changes, expected \(dataset.documentCount)")
        }

        var position = 0
        while position < dataset.documentCount {
            let page = try engine.changes(since: UInt64(position), limit: Self.changesPageSize)
            guard !page.isEmpty else { break }
            for entry in page {
                guard entry.sequence == UInt64(position + 1), entry.documentID == ids[dataset.insertionOrder[position]],
                      entry.revisionID.hasPrefix("1-"), entry.leafRevisionIDs == [entry.revisionID],
                      !entry.isDeleted, !entry.isConflicted
                else { throw EngineError("settee-doc: changes-scan: change \(position + 1) is wrong: \(entry)") }
                position += 1
            }
        }
        guard position == dataset.documentCount else {
            throw EngineError("settee-doc: changes-scan: the check pass saw \(position) changes")
        }
        return Double(count) / seconds
    }

    /// Single-document durable saves, each replacing a random existing document → commits/s.
    private func durableCommit(_ engine: Engine) throws -> Double {
        let count = Dataset.updateCount
        let progress = Progress("\(Engine.name.rawValue) durable-commit", total: count)
        var nanoseconds: UInt64 = 0
        for number in 0 ..< count {
            let update = Engine.NewDocument(id: ids[dataset.updatedDocuments[number]],
                                            properties: try Engine.properties(of: dataset.update(number).body))
            let watch = Stopwatch()
            try engine.update(update)
            nanoseconds += watch.elapsedNanoseconds
            progress.update(number + 1)
        }
        let seconds = Double(nanoseconds) / 1e9
        try verifyDocuments(engine, Set(dataset.updatedDocuments), expected: dataset.finalBody)
        return Double(count) / seconds
    }

    /// All documents again, into a new database, as replicated revisions with 10-revision histories,
    /// 1000 per `insertRevisions` (one durable commit) → docs/s.
    private func revInsert(in directory: String) throws -> Double {
        try Files.createDirectory(directory)
        let engine = try Engine(directory: directory)
        Files.settleWriteback()
        let total = dataset.documentCount
        let ids = ids
        let progress = Progress("\(Engine.name.rawValue) rev-insert", total: total)
        var nanoseconds: UInt64 = 0
        for start in stride(from: 0, to: total, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, total)
            // Untimed: the same histories the other engines get, as Strings, and the bodies as the
            // JSON bytes a peer sends (checked inside `insertRevisions`, timed, and stored as they are).
            let batch = dataset.replication(start ..< end)
            let revisions = try batch.indices.map { position in
                let document = batch[position]
                let history = (0 ..< ReplicatedBatch.historyDepth).map {
                    String(decoding: document.history($0), as: UTF8.self)
                }
                return ReplicatedRevision(documentID: ids[dataset.insertionOrder[position]], revisionID: history[0],
                                          history: history, isDeleted: false,
                                          json: Array(document.body))
            }
            let watch = Stopwatch()
            let outcomes = try engine.insertReplicated(revisions)
            nanoseconds += watch.elapsedNanoseconds
            guard outcomes.count == revisions.count, outcomes.allSatisfy({ $0 == .inserted }) else {
                throw EngineError("settee-doc: rev-insert: \(outcomes.first { $0 != .inserted }.map { "\($0)" } ?? "too few outcomes")")
            }
            progress.update(end)
        }

        for index in dataset.timedGets.prefix(1000) {
            let history = dataset.replicatedHistory(of: index).map { String(decoding: $0, as: UTF8.self) }
            guard let revision = try engine.revision(of: ids[index], revisionID: history[0]),
                  revision.history == history, !revision.isDeleted,
                  revision.json == Array(dataset.body(index)),
                  try engine.get(ids[index])?.revisionID == history[0]
            else { throw EngineError("settee-doc: rev-insert: document \(index) reads back wrong") }
        }
        let counts = try engine.counts
        guard counts.documents == UInt64(total), counts.lastSequence == UInt64(total) else {
            throw EngineError("settee-doc: after rev-insert: \(counts)")
        }
        try engine.close()
        return Double(total) / (Double(nanoseconds) / 1e9)
    }

    /// `compaction`: a database of every document with `HistoryBatch.generations` revisions (saved, then
    /// updated four times with new bodies), built untimed with `autoCompaction` off, 1000 saves per
    /// `inBatch`; closed, its files read into the page cache, reopened; `db.compact()` timed alone → input
    /// MB/s, seconds, footprints before and after, and after ÷ the footprint of a fresh database
    /// (`fresh`) holding the same live content (each document's 5th revision, saved once, 1000 per batch).
    /// Then, on the compacted database, reopened: a writer thread (single-document durable saves) and a
    /// reader thread (`document(withID:)`) for a stretch without compaction, one while `compact()` runs on
    /// this thread (again and again until `minimumWindow` has passed), and one more without → their rates
    /// (the two stretches without compaction pooled, so a drift of the disk's flush latency over the run
    /// weighs on both sides) and the ratios.
    private func compaction(in directory: String, fresh: String) throws -> [(Figure, Double, note: String?)] {
        try Files.createDirectory(directory)
        let total = dataset.documentCount
        var engine = try Engine(directory: directory, autoCompaction: false)
        try dataset.loadHistory(engine: Engine.name.rawValue) { try engine.insert(try newDocuments($0)) }
        try verifyHistory(engine, bodiesKept: true)
        try engine.close()
        let before = try Engine.footprint(of: directory)
        try Files.warmBeforeCompaction(directory, engine: Engine.name.rawValue, bytes: before)

        engine = try Engine(directory: directory, autoCompaction: false)
        let watch = Stopwatch()
        let compacted = try engine.compact()
        let seconds = watch.elapsedSeconds
        guard compacted.documents == total else {
            throw EngineError("settee-doc: compaction kept \(compacted.documents) documents, expected \(total)")
        }
        try verifyHistory(engine, bodiesKept: false)
        try engine.close()
        let after = try Engine.footprint(of: directory)
        Progress.log("  \(Engine.name.rawValue) compaction: \(String(format: "%.3f", seconds)) s; its report: "
            + "\(compacted.sizeBefore) → \(compacted.sizeAfter) bytes, \(compacted.documents) documents")

        // The same live content, saved once into a new database.
        try Files.createDirectory(fresh)
        engine = try Engine(directory: fresh, autoCompaction: false)
        for start in stride(from: 0, to: total, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, total)
            try engine.insert(try newDocuments(dataset.history(start ..< end, generation: HistoryBatch.generations)))
        }
        try engine.close()
        let freshSize = try Engine.footprint(of: fresh)

        engine = try Engine(directory: directory, autoCompaction: false)
        let window = max(Self.minimumWindow, seconds)
        let first = try underLoad(engine, stretch: 0, compacting: false, window: window)
        let during = try underLoad(engine, stretch: 1, compacting: true, window: Self.minimumWindow)
        let last = try underLoad(engine, stretch: 2, compacting: false, window: window)
        let normal = LoadFigures(commits: first.commits + last.commits, gets: first.gets + last.gets,
                                 seconds: first.seconds + last.seconds)
        let counts = try engine.counts
        guard counts.documents == UInt64(total) else {
            throw EngineError("settee-doc: compaction: \(counts.documents) documents after the concurrent runs")
        }
        try engine.close()
        for (name, figures) in [("before", first), ("during", during), ("after", last)] {
            Progress.log("  \(Engine.name.rawValue) compaction: \(name): \(figures.commits) commits (longest "
                + String(format: "%.1f ms", Double(figures.longestCommit) / 1e6) + "), \(figures.gets) gets in "
                + String(format: "%.3f s", figures.seconds) + (figures.runs > 0 ? ", \(figures.runs) compact() runs" : ""))
        }

        let duringNote = "while compact() ran \(during.runs)× in \(String(format: "%.2f", during.seconds)) s; "
            + "writer and reader threads"
        let commitsNormal = Double(normal.commits) / normal.seconds
        let commitsDuring = Double(during.commits) / during.seconds
        let getNormal = normal.seconds * 1e9 / Double(max(normal.gets, 1))
        let getDuring = during.seconds * 1e9 / Double(max(during.gets, 1))
        return [(.input, Double(before) / 1e6 / seconds, nil), (.seconds, seconds, nil),
                (.sizeBefore, Double(before), nil), (.sizeAfter, Double(after), nil), (.freshSize, Double(freshSize), nil),
                (.afterVsFresh, Double(after) / Double(freshSize), nil),
                (.commitsNormal, commitsNormal, nil), (.commitsDuring, commitsDuring, "saveDocument, fullSync; " + duringNote
                    + String(format: "; longest commit %.0f ms", Double(during.longestCommit) / 1e6)),
                (.commitsKept, commitsDuring / commitsNormal, nil),
                (.getNormal, getNormal, nil), (.getDuring, getDuring, "document(withID:); " + duringNote),
                (.getRateKept, getNormal / getDuring, nil)]
    }

    /// The shortest stretch `compaction`'s concurrent figures are measured over; `compact()` runs again
    /// (on the same database: every run copies everything live) until it has passed.
    static let minimumWindow = 1.0
    /// Untimed warm-up of the writer and reader threads before a measured stretch.
    static let warmUp = 0.2

    /// What the writer and reader threads did while measured (only operations that began and ended within
    /// the stretch count), the stretch's length, and how many compactions ran in it.
    private struct LoadFigures {
        var commits = 0
        var gets = 0
        var seconds = 0.0
        var runs = 0
        /// The longest of the counted commits, in nanoseconds (a stall shows here, not in the rate).
        var longestCommit: UInt64 = 0
    }

    /// The threads' shared state: the phase (0 warm-up, 1 measured, 2 stop), their counts, an error.
    private final class LoadState: Sendable {
        let phase = Atomic<Int>(0)
        let commits = Atomic<Int>(0)
        let longestCommit = Atomic<UInt64>(0)
        let gets = Atomic<Int>(0)
        let failure = Mutex<String?>(nil)

        func fail(_ message: String) {
            failure.withLock { $0 = $0 ?? message }
            phase.store(2, ordering: .releasing)
        }
    }

    /// Runs a writer thread (single-document durable saves over random documents, bodies from the dataset's
    /// updates, parsed beforehand) and a reader thread (`document(withID:)` over the timed-get list) for a
    /// warm-up, then a measured stretch: `window` seconds, or, when `compacting`, `compact()` on this thread
    /// again and again until `window` seconds have passed. `stretch` numbers the stretches, so each writes
    /// its own sequence of documents.
    private func underLoad(_ engine: Engine, stretch: Int, compacting: Bool, window: Double) throws -> LoadFigures {
        let ids = ids
        let total = dataset.documentCount
        let bodies = try (0 ..< Dataset.updateCount).map { try Engine.properties(of: dataset.update($0).body) }
        let reads = dataset.timedGets
        let state = LoadState()
        let seed = dataset.generator.seed
        let finished = DispatchSemaphore(value: 0)

        Thread {
            defer { finished.signal() }
            var random = SplitMix64(seed: seed, stream: Stream.compactionWrites, item: UInt64(stretch))
            var number = 0
            var counted = 0
            var longest: UInt64 = 0
            do {
                while true {
                    let phase = state.phase.load(ordering: .acquiring)
                    if phase == 2 { break }
                    let update = Engine.NewDocument(id: ids[random.bounded(total)], properties: bodies[number % bodies.count])
                    number += 1
                    let watch = Stopwatch()
                    try engine.update(update)
                    let elapsed = watch.elapsedNanoseconds
                    if phase == 1, state.phase.load(ordering: .acquiring) == 1 {
                        counted += 1
                        longest = max(longest, elapsed)
                    }
                }
            } catch {
                state.fail("writer: \(error)")
            }
            state.longestCommit.store(longest, ordering: .releasing)
            state.commits.store(counted, ordering: .releasing)
        }.start()
        Thread {
            defer { finished.signal() }
            var position = stretch * reads.count / 3
            var counted = 0
            do {
                while true {
                    let phase = state.phase.load(ordering: .acquiring)
                    if phase == 2 { break }
                    guard try engine.get(ids[reads[position]]) != nil else {
                        throw EngineError("document \(reads[position]) is missing")
                    }
                    position = position + 1 == reads.count ? 0 : position + 1
                    if phase == 1, state.phase.load(ordering: .acquiring) == 1 { counted += 1 }
                }
            } catch {
                state.fail("reader: \(error)")
            }
            state.gets.store(counted, ordering: .releasing)
        }.start()

        var figures = LoadFigures()
        Thread.sleep(forTimeInterval: Self.warmUp)
        state.phase.store(1, ordering: .releasing)
        let watch = Stopwatch()
        var failure: Error?
        if compacting {
            do {
                repeat {
                    _ = try engine.compact()
                    figures.runs += 1
                } while watch.elapsedSeconds < window && state.phase.load(ordering: .acquiring) == 1
            } catch {
                failure = error
            }
        } else {
            while watch.elapsedSeconds < window && state.phase.load(ordering: .acquiring) == 1 {
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        figures.seconds = watch.elapsedSeconds
        state.phase.store(2, ordering: .releasing)
        finished.wait()
        finished.wait()
        if let failure { throw failure }
        if let message = state.failure.withLock({ $0 }) { throw EngineError("settee-doc: compaction: \(message)") }
        figures.commits = state.commits.load(ordering: .acquiring)
        figures.longestCommit = state.longestCommit.load(ordering: .acquiring)
        figures.gets = state.gets.load(ordering: .acquiring)
        return figures
    }

    /// The documents of `batch` as the API takes them (untimed): IDs and parsed bodies.
    private func newDocuments(_ batch: HistoryBatch) throws -> [Engine.NewDocument] {
        let ids = ids
        return try batch.indices.map { position in
            Engine.NewDocument(id: ids[dataset.insertionOrder[position]], properties: try Engine.properties(of: batch[position].body))
        }
    }

    // MARK: - Checks (untimed)

    /// Reads 1000 documents of `compaction`'s database back: the current revision is the 5th generation with
    /// the 5th body, its history has every generation, and the older revisions' bodies are there when
    /// `bodiesKept`, gone when not.
    private func verifyHistory(_ engine: Engine, bodiesKept: Bool) throws {
        let generations = HistoryBatch.generations
        for index in dataset.timedGets.prefix(1000) {
            let bodies = try stride(from: generations, through: 1, by: -1).map {
                try dataset.revision(of: index, generation: $0).body.withUnsafeBytes(Engine.properties(of:))
            }
            guard let current = try engine.get(ids[index]), let revisionID = current.revisionID,
                  revisionID.hasPrefix("\(generations)-"), current.toDictionary() == bodies[0],
                  let revision = try engine.revision(of: ids[index], revisionID: revisionID),
                  revision.history.count == generations, try revision.properties == bodies[0]
            else { throw EngineError("settee-doc: compaction: document \(index) reads back wrong") }
            for depth in 1 ..< generations {
                let old = try engine.revision(of: ids[index], revisionID: revision.history[depth])
                guard try bodiesKept ? old?.properties == bodies[depth] : old == nil else {
                    throw EngineError("settee-doc: compaction: document \(index), revision \(revision.history[depth]): "
                        + (bodiesKept ? "body missing or wrong" : "body still kept"))
                }
            }
        }
    }

    /// Reads `documents` back and compares each one's properties with `expected(document)` parsed.
    private func verifyDocuments(_ engine: Engine, _ documents: some Sequence<Int>,
                                 expected: (Int) -> UnsafeRawBufferPointer) throws {
        for index in documents {
            guard let document = try engine.get(ids[index]), document.id == ids[index],
                  document.toDictionary() == (try Engine.properties(of: expected(index)))
            else { throw EngineError("settee-doc: document \(index) reads back wrong") }
        }
    }
}
