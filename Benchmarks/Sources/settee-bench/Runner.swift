/// One figure: a workload's value on one engine.
struct Measurement {
    let workload: Workload
    let engine: EngineName
    let value: Double
    /// Durability, or how the figure was taken.
    let note: String
}

/// Runs the selected workloads on one engine at a time, in `Workload` order, and checks what every engine
/// read against the dataset so no engine can win by doing less.
///
/// The load runs whenever a workload that needs its data is selected (every one but `rev-insert`); it is
/// reported only when selected. `rev-insert` writes a new database of its own, in `<directory>/rev-insert`.
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
            Progress.log("  \(E.name.rawValue) \(workload.rawValue): \(Report.format(value, for: workload)) \(workload.unit)")
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
        if workloads.contains(.revInsert) {
            if E.storesRevisionTrees {
                report(.revInsert, try revInsert(E.self, in: directory + "/rev-insert"))
            } else {
                Progress.log("  \(E.name.rawValue) rev-insert: \(E.note(for: .revInsert))")
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

    // MARK: - Checks (untimed)

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
