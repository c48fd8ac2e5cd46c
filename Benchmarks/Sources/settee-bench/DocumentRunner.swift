import Settee

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
            Progress.log("  \(Engine.name.rawValue) \(workload.rawValue): \(Report.format(value, for: workload)) \(workload.unit)")
        }

        if workloads.contains(where: \.needsLoad) {
            var engine = try Engine(directory: directory)
            Files.settleWriteback()
            report(.bulkLoad, try bulkLoad(engine))
            try verifyDocuments(engine, dataset.timedGets.prefix(1000), expected: dataset.body)
            let counts = engine.counts
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
                    case .pointGet: report(workload, try pointGet(engine))
                    case .changesScan: report(workload, try changesScan(engine))
                    default: report(workload, try durableCommit(engine))
                    }
                }
                try engine.close()
            }
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
            // Untimed: the same histories the other engines get, as Strings, and the parsed bodies.
            let batch = dataset.replication(start ..< end)
            let revisions = try batch.indices.map { position in
                let document = batch[position]
                let history = (0 ..< ReplicatedBatch.historyDepth).map {
                    String(decoding: document.history($0), as: UTF8.self)
                }
                return ReplicatedRevision(documentID: ids[dataset.insertionOrder[position]], revisionID: history[0],
                                          history: history, isDeleted: false,
                                          properties: try Engine.properties(of: document.body))
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
                  revision.properties == (try Engine.properties(of: dataset.body(index))),
                  try engine.get(ids[index])?.revisionID == history[0]
            else { throw EngineError("settee-doc: rev-insert: document \(index) reads back wrong") }
        }
        let counts = engine.counts
        guard counts.documents == UInt64(total), counts.lastSequence == UInt64(total) else {
            throw EngineError("settee-doc: after rev-insert: \(counts)")
        }
        try engine.close()
        return Double(total) / (Double(nanoseconds) / 1e9)
    }

    // MARK: - Checks (untimed)

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
