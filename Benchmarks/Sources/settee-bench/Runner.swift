/// One figure: a workload's value on one engine.
struct Measurement {
    let workload: Workload
    /// Which of a row group's figures this is (`compaction` has several); nil for the one figure of the
    /// other workloads.
    let figure: Figure?
    let engine: EngineName
    let value: Double
    /// Durability, or how the figure was taken.
    let note: String

    init(workload: Workload, figure: Figure? = nil, engine: EngineName, value: Double, note: String) {
        self.workload = workload
        self.figure = figure
        self.engine = engine
        self.value = value
        self.note = note
    }

    var unit: String { figure?.unit ?? workload.unit }

    /// The row's name in the table: the workload, then the figure when there is one.
    var label: String { figure.map { "\(workload.rawValue) \($0.rawValue)" } ?? workload.rawValue }
}

/// Runs the selected workloads on one engine at a time, in `Workload` order, and checks what every engine
/// read against the dataset so no engine can win by doing less.
///
/// The load runs whenever a workload that needs its data is selected (every one but `rev-insert` and
/// `compaction`); it is reported only when selected. `rev-insert` writes a new database of its own, in
/// `<directory>/rev-insert`, and `compaction` in `<directory>/compaction`.
final class Runner {
    private let dataset: Dataset
    private let workloads: Set<Workload>
    private lazy var expectedScan = dataset.expectedScan

    init(dataset: Dataset, workloads: Set<Workload>) {
        self.dataset = dataset
        self.workloads = workloads
    }

    func run<E: Engine>(_: E.Type, in directory: String) throws -> [Measurement] {
        var results: [Measurement] = []
        func report(_ workload: Workload, _ value: Double) {
            guard workloads.contains(workload) else { return }
            results.append(Measurement(workload: workload, engine: E.name, value: value, note: E.note(for: workload)))
            Progress.log("  \(E.name.rawValue) \(workload.rawValue): \(Report.format(value, unit: workload.unit)) \(workload.unit)")
        }
        func report(_ workload: Workload, figures: [(Figure, Double)]) {
            for (figure, value) in figures {
                let measurement = Measurement(workload: workload, figure: figure, engine: E.name, value: value,
                                              note: E.note(for: figure))
                results.append(measurement)
                Progress.log("  \(E.name.rawValue) \(measurement.label): \(Report.format(value, unit: figure.unit)) \(figure.unit)")
            }
        }

        if workloads.contains(where: \.needsLoad) {
            var engine = try E(directory: directory, documentCount: dataset.documentCount)
            Files.settleWriteback()
            report(.bulkLoad, try bulkLoad(engine))
            try verifyBodies(engine, of: dataset.timedGets.prefix(1000), expected: dataset.body)
            try engine.close()
            report(.fileSize, Double(try E.footprint(of: directory)))

            let later = [Workload.pointGet, .changesScan, .durableCommit].filter(workloads.contains)
            if !later.isEmpty {
                engine = try E(directory: directory, documentCount: dataset.documentCount)
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

        if workloads.contains(where: \.isExpiry) {
            Progress.log("  \(E.name.rawValue) expiry: \(E.note(for: .expiry))")
        }
        if workloads.contains(where: \.isReplication) {
            Progress.log("  \(E.name.rawValue) replicate-local: \(E.note(for: .replicateLocal))")
        }
        if workloads.contains(.revInsert) {
            if E.storesRevisionTrees {
                report(.revInsert, try revInsert(E.self, in: directory + "/rev-insert"))
            } else {
                Progress.log("  \(E.name.rawValue) rev-insert: \(E.note(for: .revInsert))")
            }
        }

        if workloads.contains(.compaction) {
            if E.compactsHistory {
                report(.compaction, figures: try compaction(E.self, in: directory + "/compaction"))
            } else {
                Progress.log("  \(E.name.rawValue) compaction: \(E.note(for: .compaction))")
            }
        }
        return results
    }

    // MARK: - Workloads

    /// All documents, 1000 per durable commit, in the insertion order → docs/s.
    private func bulkLoad<E: Engine>(_ engine: E) throws -> Double {
        let total = dataset.documentCount
        let progress = Progress("\(E.name.rawValue) bulk-load", total: total)
        // Only the engine's work is timed: each batch is generated before its clock starts.
        var nanoseconds: UInt64 = 0
        for start in stride(from: 0, to: total, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, total)
            let batch = dataset.insertion(start ..< end)
            let watch = Stopwatch()
            try engine.insert(batch)
            nanoseconds += watch.elapsedNanoseconds
            progress.update(end)
        }
        return Double(total) / (Double(nanoseconds) / 1e9)
    }

    /// N uniformly random gets after an untimed warm-up of N others → ns/op.
    private func pointGet<E: Engine>(_ engine: E) throws -> Double {
        let sink = ReadSink()
        Progress.log("  \(E.name.rawValue) point-get: warm-up, then \(dataset.timedGets.count) timed gets")
        try get(dataset.warmUpGets, from: engine, into: sink)
        sink.reset()
        let watch = Stopwatch()
        try get(dataset.timedGets, from: engine, into: sink)
        let elapsed = watch.elapsedNanoseconds
        guard sink.summary.documents == dataset.timedGets.count, sink.summary.bytes == dataset.timedGetBytes else {
            throw EngineError("\(E.name.rawValue): point-get read \(sink.summary.bytes) bytes, expected \(dataset.timedGetBytes)")
        }
        return Double(elapsed) / Double(dataset.timedGets.count)
    }

    @inline(__always)
    private func get<E: Engine>(_ documents: [Int], from engine: E, into sink: ReadSink) throws {
        for index in documents {
            guard try engine.get(dataset.key(index), into: sink) else {
                throw EngineError("\(E.name.rawValue): document \(index) is missing")
            }
        }
    }

    /// Every document in sequence order → docs/s.
    private func changesScan<E: Engine>(_ engine: E) throws -> Double {
        let expected = expectedScan
        let sink = ReadSink()
        let watch = Stopwatch()
        try engine.scanChanges(into: sink)
        let seconds = watch.elapsedSeconds
        guard sink.summary == expected else {
            throw EngineError("\(E.name.rawValue): changes-scan saw \(sink.summary), expected \(expected)")
        }
        return Double(sink.summary.documents) / seconds
    }

    /// Single-document durable commits, each replacing a random existing document → commits/s.
    private func durableCommit<E: Engine>(_ engine: E) throws -> Double {
        try engine.prepareForDurableCommits()
        let count = Dataset.updateCount
        let progress = Progress("\(E.name.rawValue) durable-commit", total: count)
        var nanoseconds: UInt64 = 0
        for number in 0 ..< count {
            let document = dataset.update(number)
            let watch = Stopwatch()
            try engine.update(document)
            nanoseconds += watch.elapsedNanoseconds
            progress.update(number + 1)
        }
        let seconds = Double(nanoseconds) / 1e9
        try verifyBodies(engine, of: Set(dataset.updatedDocuments), expected: dataset.finalBody)
        return Double(count) / seconds
    }

    /// All documents again, into a new database, as replicated revisions with 10-revision histories,
    /// 1000 per durable commit → docs/s.
    private func revInsert<E: Engine>(_: E.Type, in directory: String) throws -> Double {
        try Files.createDirectory(directory)
        let engine = try E(directory: directory, documentCount: dataset.documentCount)
        try engine.prepareForDurableCommits()
        Files.settleWriteback()
        let total = dataset.documentCount
        let progress = Progress("\(E.name.rawValue) rev-insert", total: total)
        // As in bulk-load: each batch, histories included, is generated before its clock starts.
        var nanoseconds: UInt64 = 0
        for start in stride(from: 0, to: total, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, total)
            let batch = dataset.replication(start ..< end)
            let watch = Stopwatch()
            try engine.insertReplicated(batch)
            nanoseconds += watch.elapsedNanoseconds
            progress.update(end)
        }
        for index in dataset.timedGets.prefix(1000) {
            guard let (history, body) = try engine.replicatedDocument(dataset.key(index)),
                  history == dataset.replicatedHistory(of: index), body.elementsEqual(dataset.body(index))
            else { throw EngineError("\(E.name.rawValue): rev-insert: document \(index) reads back wrong") }
        }
        try engine.close()
        return Double(total) / (Double(nanoseconds) / 1e9)
    }

    /// A new database (`directory`) of every document with `HistoryBatch.generations` revisions, built
    /// untimed (a generation at a time, 1000 documents per commit), closed, its files read into the page
    /// cache, reopened; then the engine's compaction, its two parts timed one after the other → input MB/s,
    /// seconds (both parts and their sum) and the footprints before and after.
    private func compaction<E: Engine>(_: E.Type, in directory: String) throws -> [(Figure, Double)] {
        try Files.createDirectory(directory)
        let total = dataset.documentCount
        var engine = try E(directory: directory, documentCount: total)
        try dataset.loadHistory(engine: E.name.rawValue) { try engine.saveHistory($0) }
        try verifyHistory(engine, bodiesKept: true)
        try engine.close()
        let before = try E.footprint(of: directory)
        try Files.warmBeforeCompaction(directory, engine: E.name.rawValue, bytes: before)

        engine = try E(directory: directory, documentCount: total)
        var watch = Stopwatch()
        try engine.pruneOldBodies()
        let prune = watch.elapsedSeconds
        watch = Stopwatch()
        try engine.vacuum()
        let vacuum = watch.elapsedSeconds
        try verifyHistory(engine, bodiesKept: false)
        try engine.close()
        let after = try E.footprint(of: directory)
        let seconds = prune + vacuum
        return [(.input, Double(before) / 1e6 / seconds), (.seconds, seconds), (.pruneSeconds, prune),
                (.vacuumSeconds, vacuum), (.sizeBefore, Double(before)), (.sizeAfter, Double(after))]
    }

    // MARK: - Checks (untimed)

    /// Reads 1000 documents of `compaction`'s database back: every generation's revision ID, newest first,
    /// the newest body current, and the older ones' bodies in the tree when `bodiesKept`, none when not.
    private func verifyHistory<E: Engine>(_ engine: E, bodiesKept: Bool) throws {
        for index in dataset.timedGets.prefix(1000) {
            let expected = stride(from: HistoryBatch.generations, through: 1, by: -1).map {
                dataset.revision(of: index, generation: $0)
            }
            guard let (revisions, body) = try engine.historyDocument(dataset.key(index)),
                  revisions.map(\.revisionID) == expected.map(\.version), body == expected[0].body,
                  revisions.first?.body == nil,
                  revisions.dropFirst().map(\.body) == expected.dropFirst().map({ bodiesKept ? $0.body : nil })
            else { throw EngineError("\(E.name.rawValue): compaction: document \(index) reads back wrong") }
        }
    }

    /// Reads `documents` back and compares each body with `expected(document)`.
    private func verifyBodies<E: Engine>(_ engine: E, of documents: some Sequence<Int>,
                                         expected: (Int) -> UnsafeRawBufferPointer) throws {
        let sink = ReadSink()
        for index in documents {
            guard try engine.get(dataset.key(index), into: sink), sink.lastBody.elementsEqual(expected(index)) else {
                throw EngineError("\(E.name.rawValue): document \(index) reads back wrong")
            }
        }
    }
}
