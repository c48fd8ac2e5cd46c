/// The figures of the `compaction` row group, in table order. Each engine reports those it has.
enum Figure: String, CaseIterable {
    /// The database's size before compacting ÷ the compaction's time (MB = 10⁶ bytes).
    case input
    /// The compaction's time (SQLite: prune + vacuum).
    case seconds
    /// SQLite only: rewriting every row's `extra` without old bodies.
    case pruneSeconds = "prune-seconds"
    /// SQLite only: `VACUUM` and `wal_checkpoint(TRUNCATE)`.
    case vacuumSeconds = "vacuum-seconds"
    case sizeBefore = "size-before"
    case sizeAfter = "size-after"
    /// settee-doc only: a fresh database of the same live content (the last revisions, saved once each).
    case freshSize = "fresh-size"
    /// settee-doc only: size-after ÷ fresh-size.
    case afterVsFresh = "after-vs-fresh"
    /// settee-doc only: single-document durable saves per second with a reader running, no compaction.
    case commitsNormal = "commits-normal"
    /// The same while `compact()` runs.
    case commitsDuring = "commits-during"
    /// commits-during ÷ commits-normal.
    case commitsKept = "commits-kept"
    /// settee-doc only: point-get time with the writer running, no compaction.
    case getNormal = "get-normal"
    /// The same while `compact()` runs.
    case getDuring = "get-during"
    /// The get rate kept: get-normal ÷ get-during (rates, so the inverse of the ns/op ratio).
    case getRateKept = "get-rate-kept"
    /// settee-doc only: point-get through the `async` API, from a task.
    case asyncGet = "async-get"
    /// The sync row's time ÷ the async row's (1 = as fast; higher is better).
    case asyncGetKept = "async-get-kept"
    /// settee-doc only: durable-commit through the `async` API, from a task, each save awaited.
    case asyncCommits = "async-commits"
    /// The async row's rate ÷ the sync row's.
    case asyncCommitsKept = "async-commits-kept"
    /// settee-doc only: durable-commit from a task preferring `writeExecutor`, ÷ the sync blocks' rate.
    case executorCommitsKept = "executor-commits-kept"
    /// settee-doc only: bulk-load through `saveDocuments` (each batch prepared before the write lock).
    case saveDocuments = "save-documents"
    /// settee-doc only: bulk-load through `try await saveDocuments`, two batches in flight.
    case asyncPipelined = "async-pipelined"
    /// async-pipelined ÷ the `inBatch` row.
    case pipelinedGain = "pipelined-gain"

    // The `query` group (`QueryBench`): settee-doc and sqlite, each speedup settee-doc's only.
    case newestTasks = "eq-order-limit"
    case newestTasksSpeedup = "eq-order-limit-speedup"
    case createdRange = "range-count"
    case createdRangeSpeedup = "range-count-speedup"
    case unindexedScan = "scan-unindexed"
    case unindexedScanSpeedup = "scan-unindexed-speedup"
    case groupCount = "group-count"
    case groupCountSpeedup = "group-count-speedup"
    case createIndexTasks = "create-index-tasks"
    case createIndexTasksSpeedup = "create-index-tasks-speedup"
    case createIndexCreated = "create-index-created"
    case createIndexCreatedSpeedup = "create-index-created-speedup"
    case load0Indexes = "load-0-indexes"
    case load0IndexesSpeedup = "load-0-indexes-speedup"
    case load1Index = "load-1-index"
    case load2Indexes = "load-2-indexes"
    case load2IndexesSpeedup = "load-2-indexes-speedup"
    case load1IndexCost = "load-1-index-cost"
    case load2IndexesCost = "load-2-indexes-cost"
    /// settee-doc only (`LiveQueryBench`): a live query's notification after a matching commit.
    case liveNotifyP50 = "live-notify-p50"
    case liveNotifyP99 = "live-notify-p99"
    /// settee-doc only: durable commits' time with 1000 idle live queries ÷ without.
    case liveIdleCost = "live-1000-idle-cost"
    // The `collections` group (`CollectionsBench`).
    case openMany = "open-many"
    case openOne = "open-one"
    case getMany = "get-many"
    case getOne = "get-one"
    case scanMany = "scan-many"
    case scanAlone = "scan-alone"
    case scanRatio = "scan-ratio"
    case join
    case joinSpeedup = "join-speedup"
    case joinUnindexed = "join-unindexed"
    case joinUnindexedSpeedup = "join-unindexed-speedup"

    static let ratioUnit = "×"

    /// The `query` group's speedup figure of a figure measured on both engines (itself for the others).
    var speedup: Figure {
        switch self {
        case .newestTasks: .newestTasksSpeedup
        case .createdRange: .createdRangeSpeedup
        case .unindexedScan: .unindexedScanSpeedup
        case .groupCount: .groupCountSpeedup
        case .createIndexTasks: .createIndexTasksSpeedup
        case .createIndexCreated: .createIndexCreatedSpeedup
        case .load0Indexes: .load0IndexesSpeedup
        case .load2Indexes: .load2IndexesSpeedup
        default: self
        }
    }

    var unit: String {
        switch self {
        case .input: "MB/s"
        case .seconds, .pruneSeconds, .vacuumSeconds: "s"
        case .sizeBefore, .sizeAfter, .freshSize: "bytes"
        case .afterVsFresh, .commitsKept, .getRateKept, .asyncGetKept, .asyncCommitsKept, .pipelinedGain, .executorCommitsKept: Self.ratioUnit
        case .newestTasks, .createdRange, .unindexedScan, .groupCount: "queries/s"
        case .createIndexTasks, .createIndexCreated: "s"
        case .liveNotifyP50, .liveNotifyP99: "ms"
        case .liveIdleCost: Self.ratioUnit
        case .load0Indexes, .load1Index, .load2Indexes: "docs/s"
        case .newestTasksSpeedup, .createdRangeSpeedup, .unindexedScanSpeedup, .groupCountSpeedup, .createIndexTasksSpeedup,
             .createIndexCreatedSpeedup, .load0IndexesSpeedup, .load2IndexesSpeedup, .load1IndexCost,
             .load2IndexesCost: Self.ratioUnit
        case .saveDocuments, .asyncPipelined: "docs/s"
        case .commitsNormal, .commitsDuring, .asyncCommits: "commits/s"
        case .getNormal, .getDuring, .asyncGet, .getMany, .getOne: "ns/op"
        case .openMany, .openOne, .scanMany, .scanAlone, .join, .joinUnindexed: "ms"
        case .scanRatio, .joinSpeedup, .joinUnindexedSpeedup: Self.ratioUnit
        }
    }
}

/// `compaction`'s documents for one commit while its history is built: generation `generation` (1 ...
/// `generations`) of the documents inserted at `positions`, in insertion order, with sequence
/// `(generation - 1) × N + position + 1`. Generation 1 is the dataset's own version and body; later
/// generations' versions and bodies (same sizes, 400–600 bytes) are generated when the batch is made,
/// before any clock starts (the whole history is built untimed anyway).
struct HistoryBatch: RandomAccessCollection {
    /// Revisions each document gets: saved once, then updated `generations - 1` times.
    static let generations = 5

    let dataset: Dataset
    let positions: Range<Int>
    let generation: Int
    private let versions: ByteTable?
    private let bodies: ByteTable?

    init(dataset: Dataset, positions: Range<Int>, generation: Int) {
        precondition((1 ... Self.generations).contains(generation))
        self.dataset = dataset
        self.positions = positions
        self.generation = generation
        guard generation > 1 else {
            (versions, bodies) = (nil, nil)
            return
        }
        let versions = ByteTable(byteCapacity: positions.count * 40, entryCapacity: positions.count)
        let bodies = ByteTable(byteCapacity: positions.count * DocumentGenerator.bodySizes.upperBound,
                               entryCapacity: positions.count)
        for position in positions {
            let index = dataset.insertionOrder[position]
            versions.append(dataset.generator.version(of: index, generation: generation))
            bodies.append(dataset.generator.body(of: index, generation: generation))
        }
        (self.versions, self.bodies) = (versions, bodies)
    }

    var startIndex: Int { positions.lowerBound }
    var endIndex: Int { positions.upperBound }

    subscript(position: Int) -> Document {
        let index = dataset.insertionOrder[position]
        let offset = position - positions.lowerBound
        return Document(key: dataset.key(index),
                        sequence: UInt64((generation - 1) * dataset.documentCount + position + 1),
                        version: versions?[offset] ?? dataset.version(index),
                        body: bodies?[offset] ?? dataset.body(index))
    }
}

extension Dataset {
    /// Generation `generation` of the documents inserted at `positions` (see `HistoryBatch`).
    func history(_ positions: Range<Int>, generation: Int) -> HistoryBatch {
        HistoryBatch(dataset: self, positions: positions, generation: generation)
    }

    /// Saves every generation of every document through `save`, a batch at a time, in the
    /// order `HistoryBatch` describes (untimed), reporting progress.
    func loadHistory(engine name: String, _ save: (HistoryBatch) throws -> Void) throws {
        let total = documentCount
        let progress = Progress("\(name) compaction: history", total: total * HistoryBatch.generations)
        for generation in 1 ... HistoryBatch.generations {
            for start in stride(from: 0, to: total, by: Dataset.batchSize) {
                let end = min(start + Dataset.batchSize, total)
                try save(history(start ..< end, generation: generation))
                progress.update((generation - 1) * total + end)
            }
        }
    }

    /// The version and body document `index` has at `generation` (untimed checks).
    func revision(of index: Int, generation: Int) -> (version: [UInt8], body: [UInt8]) {
        generation == 1 ? (Array(version(index)), Array(body(index)))
            : (generator.version(of: index, generation: generation), generator.body(of: index, generation: generation))
    }
}

/// How `compaction`'s SQLite peer keeps a document's history in LiteCore's `RawRevTree` (see `RawRevTree` in
/// Replication.swift for the layout): the current revision first, without data (its body is the row's
/// `body`); each older revision with the flag `kHasData` (0x80) and its body after the varint sequence,
/// as LiteCore stores a revision whose body is kept in the tree.
extension RawRevTree {
    /// LiteCore's `RawRevision::kHasData`: the revision's body follows its sequence.
    static let hasDataFlag: UInt8 = 0x80

    /// One revision of an encoded tree; the buffers are views into the tree.
    struct Revision {
        let parent: UInt16
        let flags: UInt8
        /// Compact binary form (varint generation, digest bytes).
        let revisionID: UnsafeRawBufferPointer
        let sequence: UInt64
        /// The body, when `flags` has `hasDataFlag`.
        let data: UnsafeRawBufferPointer?
    }

    /// Calls `body` with each revision of `tree`, in stored order. Throws when it is malformed.
    @inline(__always)
    static func forEachRevision(in tree: UnsafeRawBufferPointer, _ body: (Revision) throws -> Void) throws {
        var offset = 0
        while true {
            guard offset + 4 <= tree.count else { throw EngineError("compaction: truncated revision tree") }
            let size = Int(UInt32(bigEndian: tree.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            if size == 0 {
                guard offset + 4 == tree.count else { throw EngineError("compaction: bytes after a revision tree") }
                return
            }
            guard size >= 9, offset + size <= tree.count else { throw EngineError("compaction: bad revision size") }
            let parent = UInt16(bigEndian: tree.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self))
            let flags = tree[offset + 6]
            let idLength = Int(tree[offset + 7])
            var cursor = offset + 8 + idLength
            guard cursor < offset + size else { throw EngineError("compaction: bad revision ID length") }
            var sequence: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard cursor < offset + size, shift < 64 else { throw EngineError("compaction: bad sequence") }
                let byte = tree[cursor]
                cursor += 1
                sequence |= UInt64(byte & 0x7F) << shift
                shift += 7
                if byte < 0x80 { break }
            }
            let data = flags & hasDataFlag != 0
                ? UnsafeRawBufferPointer(rebasing: tree[cursor ..< offset + size]) : nil
            guard data != nil || cursor == offset + size else { throw EngineError("compaction: bytes after a sequence") }
            try body(Revision(parent: parent, flags: flags,
                              revisionID: UnsafeRawBufferPointer(rebasing: tree[(offset + 8) ..< (offset + 8 + idLength)]),
                              sequence: sequence, data: data))
            offset += size
        }
    }

    /// Appends one revision (the size computed) to `tree`.
    @inline(__always)
    static func append(parent: UInt16, flags: UInt8, revisionID: UnsafeRawBufferPointer, sequence: UInt64,
                       data: UnsafeRawBufferPointer?, to tree: RecordBuffer) {
        let start = tree.count
        tree.appendBigEndian32(0)
        tree.appendBigEndian16(parent)
        tree.appendByte(flags)
        tree.appendByte(UInt8(revisionID.count))
        tree.append(revisionID)
        tree.appendVarint(sequence)
        if let data { tree.append(data) }
        tree.patchBigEndian32(UInt32(tree.count - start), at: start)
    }

    /// The tree of a document's first revision: one leaf, sequence 0 ("the record's"). Its compact revision
    /// ID goes to `version`.
    static func encodeFirst(_ revisionID: UnsafeRawBufferPointer, tree: RecordBuffer, version: RecordBuffer) throws {
        _ = try appendCompact(revisionID, to: version)
        append(parent: noParent, flags: leafFlag, revisionID: version.bytes, sequence: 0, data: nil, to: tree)
        tree.appendBigEndian32(0)
    }

    /// The tree after saving `revisionID` on top of the current revision of `previous`: the new leaf first
    /// (its body goes in the row's `body`), then the old revisions with their parents shifted by one; the old
    /// current revision stops being a leaf and keeps its body (`previousBody`, until now the row's `body`) and
    /// its sequence (`previousSequence`, until now the row's) in the tree. The new compact ID goes to `version`.
    static func encodeUpdate(previous: UnsafeRawBufferPointer, previousSequence: UInt64,
                             previousBody: UnsafeRawBufferPointer, revisionID: UnsafeRawBufferPointer,
                             tree: RecordBuffer, version: RecordBuffer) throws {
        _ = try appendCompact(revisionID, to: version)
        append(parent: 1, flags: leafFlag, revisionID: version.bytes, sequence: 0, data: nil, to: tree)
        var first = true
        try forEachRevision(in: previous) { revision in
            let parent = revision.parent == noParent ? noParent : revision.parent + 1
            if first {
                guard revision.flags & leafFlag != 0, revision.data == nil else {
                    throw EngineError("compaction: the current revision is not a bodiless leaf")
                }
                append(parent: parent, flags: revision.flags & ~leafFlag | hasDataFlag, revisionID: revision.revisionID,
                       sequence: previousSequence, data: previousBody, to: tree)
                first = false
            } else {
                append(parent: parent, flags: revision.flags, revisionID: revision.revisionID,
                       sequence: revision.sequence, data: revision.data, to: tree)
            }
        }
        tree.appendBigEndian32(0)
    }

    /// `tree` without the bodies of its revisions (what the compaction of the SQLite peer does to every row:
    /// `kHasData` cleared, the data dropped, everything else kept). Returns false, writing nothing, when no
    /// revision has a body.
    static func pruneBodies(_ tree: UnsafeRawBufferPointer, into pruned: RecordBuffer) throws -> Bool {
        let start = pruned.count
        var found = false
        try forEachRevision(in: tree) { revision in
            if revision.data != nil { found = true }
            append(parent: revision.parent, flags: revision.flags & ~hasDataFlag, revisionID: revision.revisionID,
                   sequence: revision.sequence, data: nil, to: pruned)
        }
        guard found else {
            pruned.truncate(to: start)
            return false
        }
        pruned.appendBigEndian32(0)
        return true
    }

    /// The revisions of `tree` in stored order, with ASCII revision IDs and the bodies kept (untimed checks).
    static func decodeRevisions(_ tree: UnsafeRawBufferPointer) throws -> [(revisionID: [UInt8], body: [UInt8]?)] {
        var revisions: [(revisionID: [UInt8], body: [UInt8]?)] = []
        try forEachRevision(in: tree) { revision in
            revisions.append((asciiRevisionID(revision.revisionID), revision.data.map(Array.init)))
        }
        return revisions
    }
}
