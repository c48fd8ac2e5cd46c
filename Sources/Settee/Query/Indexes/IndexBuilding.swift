import Foundation
internal import SetteeStorage
import Synchronization
internal import Logging

extension DatabaseCore {
    /// The indexes of the catalog in `tx`, compiled; one that cannot be read is left out of
    /// maintenance and planning (``Database/check(repair:)`` reports it) rather than failing
    /// the open.
    static func loadIndexes(_ tx: some StoreReading, catalog: Tree, maps: [String: MapIndexConfiguration]) throws -> IndexSet {
        var set = IndexSet()
        try tx.forEach(in: catalog, from: nil, reverse: false) { k, v in
            let name = String(decoding: k, as: UTF8.self)
            do {
                let d = try IndexDefinition(decoding: v)
                guard let tree = tx.tree(named: d.treeName) else {
                    throw SetteeError(.corrupted, "its tree \(d.treeName) is missing")
                }
                // A map index gets its function only when the version it was built with is the
                // one the application gave.
                let map = maps[name].flatMap { d.kind == .map && d.expressions == [$0.version] ? $0 : nil }
                set.indexes.append(try CompiledIndex(name: name, definition: d, tree: tree, map: map))
            } catch {
                set.broken[name] = "\(error)"
            }
            return true
        }
        return set
    }

    /// The ready indexes of the snapshot `tx` reads, for planning a query: those of the
    /// writers' set whose catalog record is the same, others compiled.
    func readyIndexes(_ tx: some StoreReading) throws -> [CompiledIndex] {
        let known = parts.queries.indexSet.withLock { $0.indexes }
        var out: [CompiledIndex] = []
        try tx.forEach(in: trees.indexCatalog, from: nil, reverse: false) { k, v in
            let name = String(decoding: k, as: UTF8.self)
            if let c = known.first(where: { $0.name == name && $0.record.elementsEqual(v) }) {
                if c.isReady { out.append(c) }
                return true
            }
            // The catalog changed after this snapshot was taken (or before: a rare race);
            // compile what the snapshot says.
            if let d = try? IndexDefinition(decoding: v), d.state == .ready,
               let tree = tx.tree(named: d.treeName),
               let c = try? CompiledIndex(name: name, definition: d, tree: tree) {
                out.append(c)
            }
            return true
        }
        return out
    }

    /// Runs a change of the catalog as a transaction of its own, then gives writers the new
    /// set of indexes before the write lock is released, so no commit misses an index.
    func changingIndexes<R>(_ body: (WriteContext) throws -> R) throws -> R {
        guard batchTransactionOnThisThread() == nil else {
            throw SetteeError(.invalidParameter, "indexes are created and deleted outside inBatch")
        }
        writeLock.lock()
        defer { writeLock.unlock() }
        let r = try writeHoldingLock(body)
        let maps = parts.queries.mapFunctions.withLock { $0 }
        let loaded = try read { tx in try Self.loadIndexes(tx, catalog: trees.indexCatalog, maps: maps) }
        parts.queries.indexSet.withLock { $0 = loaded }
        return r
    }

    /// Builds an index registered as building: reads the documents from snapshots in steps of
    /// a few thousand, computes their entries outside the write lock, then writes each step in
    /// a transaction that skips every document changed since its snapshot (the writer that
    /// changed it has written its entry). Marks the index ready at the end; on failure or
    /// cancellation removes it.
    func buildIndex(name: String, progress: (IndexBuildProgress) -> Bool) throws {
        guard let start = parts.queries.indexSet.withLock({ $0.indexes.first { $0.name == name } }) else {
            throw SetteeError(.notFound, "index \(name) was deleted while it was being created")
        }
        do {
            try fillIndex(start, progress: progress)
            try changingIndexes { c in
                guard c.participants.indexes.indexes.contains(where: { $0.name == name && $0.record == start.record }) else {
                    throw SetteeError(.conflict, "index \(name) was deleted or replaced while it was being created")
                }
                var d = start.definition
                d.state = .ready
                try c.tx.put(Array(name.utf8), d.encoded(), in: trees.indexCatalog)
            }
        } catch {
            // Leave nothing half-built behind, unless another call replaced the index meanwhile.
            // When that fails too (an I/O error: the database must be reopened, and the open
            // finishes the build), its error is the one to report: the index is still there.
            try changingIndexes { c in
                if c.participants.indexes.indexes.contains(where: { $0.name == name && $0.record == start.record }) { try c.removeIndex(name: name) }
            }
            throw error
        }
    }

    /// What one step of a build read from a snapshot: each document's entry (or full-text
    /// terms, or the row a map function is to see), and where the next step starts. A value
    /// index's entries, back entries and records by channel are in `puts`, tagged with their
    /// document's place in `batch`.
    private final class BuildStep: @unchecked Sendable {
        // Written by the thread that reads the step, then read by the one that writes it, after
        // the first has finished (the hand-over waits on a semaphore): never both at once.
        var batch: [(key: [UInt8], sequence: UInt64, text: FullTextDocumentEntry?)] = []
        var puts = SortedPuts()
        var toMap: [(key: [UInt8], sequence: UInt64, row: QueryRow)] = []
        var last: [UInt8]?
        var seen = 0
        var live = 0
        var failure: (any Error)?
        /// The database's last sequence in the snapshot the step was read from.
        var readAtSequence: UInt64 = 0

        /// Adds a document's value index entry, its back entry and (for an index kept by
        /// channel) its records under its channels, all tagged with the document's place.
        func add(_ e: IndexEntry, key k: [UInt8], sequence: UInt64, index: CompiledIndex, tx: some StoreReading, trees: Trees) throws {
            let tag = batch.count
            batch.append((k, sequence, nil))
            puts.add(e.key, e.value, tag: tag)
            puts.add(IndexEntry.backTag + k, e.key, tag: tag)
            if index.definition.byChannel {
                let channels = try RoutingRecord.load(tx, trees, key: k, sequence: sequence)?.record.applied.channels ?? []
                for (rk, rv) in IndexEntry.channelRecords(e, id: String(decoding: k, as: UTF8.self), channels: channels) { puts.add(rk, rv, tag: tag) }
            }
        }
    }

    static let buildStepSize = 4096

    /// Where the next step of a run starts, shared by the threads that read the run's steps:
    /// a thread takes the start under the lock, walks the step's keys in its snapshot (cheap),
    /// sets the next start, and only then parses the step's documents and makes their entries,
    /// so the threads parse side by side while the steps still follow one another exactly.
    private final class StepCursor: @unchecked Sendable {
        // `next`, `taken`, `ended`, `steps` and `failure` are read and written under `lock` only.
        let lock = NSLock()
        var next: [UInt8]?
        var taken = 0
        var ended = false
        var steps: [Int: BuildStep] = [:]
        /// The bytes of the steps' entries read so far.
        var bytes = 0
        var failure: (any Error)?

        init(after: [UInt8]?) { next = after }
    }

    /// Threads that read a run's steps at once.
    static let buildReaders = 2

    /// Reads one step (the next of `cursor`'s) from a fresh snapshot: the documents after the
    /// cursor's start, their entries computed. Returns false when there was no step left.
    private func readBuildStep(_ index: CompiledIndex, cursor: StepCursor, limit: Int) throws -> Bool {
        cursor.lock.lock()
        var locked = true
        defer { if locked { cursor.lock.unlock() } }
        guard !cursor.ended, cursor.taken < limit, cursor.bytes < Self.buildRunBytes, cursor.failure == nil else { return false }
        let number = cursor.taken
        cursor.taken += 1
        let after = cursor.next
        let step = BuildStep()
        try read { tx in
            step.readAtSequence = try counter(tx, MetaKey.lastSequence)
            var found: [(key: [UInt8], meta: DocMeta)] = []
            found.reserveCapacity(Self.buildStepSize)
            try tx.forEach(in: trees.byID, from: after, reverse: false) { k, v in
                if let after, k.elementsEqual(after) { return true }
                found.append((Array(k), try DocMeta(decoding: v)))
                return found.count < Self.buildStepSize
            }
            step.seen = found.count
            step.last = found.last?.key
            cursor.next = step.last
            if found.count < Self.buildStepSize { cursor.ended = true }
            cursor.lock.unlock()
            locked = false
            // A value index of property paths takes its values from the bodies' bytes.
            let probe = IndexValueProbe(index)
            for (k, meta) in found where !meta.flags.contains(.deleted) {
                step.live += 1
                if let probe {
                    let outcome = try meta.bodyRef == 0 ? Self.emptyBody.withUnsafeBytes { b throws(SetteeError) in try probe.values(b) }
                        : tx.withValue(at: ValueRef(rawValue: meta.bodyRef)) { b throws(SetteeError) in try probe.values(b) }
                    switch outcome {
                    case .noEntry: continue
                    case .values(let values):
                        try step.add(try IndexEntry(values: values, keyCount: index.expressions.count, documentIDBytes: k),
                                     key: k, sequence: meta.sequence, index: index, tx: tx, trees: trees)
                        continue
                    case .undecided: break
                    }
                }
                let row = try queryRow(tx, id: String(decoding: k, as: UTF8.self), meta: meta, keys: index.documentKeys)
                if index.isMap {
                    step.toMap.append((k, meta.sequence, row))
                } else if index.analyzer != nil {
                    if let t = try index.textEntry(for: row) { step.batch.append((k, meta.sequence, t)) }
                } else if let e = try index.entry(for: row) {
                    try step.add(e, key: k, sequence: meta.sequence, index: index, tx: tx, trees: trees)
                }
            }
        }
        // Sorted here, beside the other reader: the writer then merges sorted steps.
        step.puts.sort()
        cursor.lock.lock()
        locked = true
        cursor.steps[number] = step
        cursor.bytes += step.puts.byteCount
        return true
    }

    /// The most steps whose entries one transaction of a build writes (a run): the entries of
    /// a run are sorted and put in key order, so the leaves they land in are copied once per
    /// run rather than once per entry, and the commit writes each changed node once. Runs start
    /// at one step and double, so that a build reports progress early and small builds often.
    static let maxBuildRunSteps = 256

    /// The most steps of a run of `index`'s build. Only a value index's entries are sorted
    /// puts bounded by ``buildRunBytes``; a map index's step holds its documents' whole rows
    /// for the function, and a full-text index's their terms, so theirs are written a step at
    /// a time, as their memory stays that of one step.
    static func buildRunSteps(_ index: CompiledIndex) -> Int {
        index.definition.kind == .value ? maxBuildRunSteps : 1
    }
    /// The most bytes of entries a run holds (a value index's keys and values; with the
    /// documents' IDs and the sort's records, a run held while the next is read, and the
    /// run's merged copy, a build holds several times that). Larger runs copy fewer leaves, but
    /// hold more memory and leave a longer last write that no reading overlaps: at 1,000,000
    /// documents 8 MiB built faster than 4 MiB or 48 MiB.
    static let buildRunBytes = 8 << 20

    /// Fills a building index from the documents already there. The documents are read in
    /// steps (each from a snapshot of its own, parsing them and making their keys) on another
    /// thread, a run ahead of this one, which writes the runs: a build takes about the longer
    /// of the two, not their sum. Map functions run on this thread only.
    private func fillIndex(_ index: CompiledIndex, progress: (IndexBuildProgress) -> Bool) throws {
        let total = try read { tx in Int(try counter(tx, MetaKey.liveCount)) }
        var done = 0
        var steps = 1
        var current = try readBuildRun(index, after: nil, steps: steps)
        while true {
            if file.compactionCancelled.load(ordering: .relaxed) { throw SetteeError(.cancelled, "index build stopped: the database is closing") }
            // The next run is read while this one is written.
            var next: (run: BuildRun, finished: DispatchSemaphore)?
            if !current.ended, let last = current.steps.last?.last {
                let run = BuildRun(), finished = DispatchSemaphore(value: 0)
                steps = min(steps * 2, Self.buildRunSteps(index))
                DispatchQueue.global(qos: .utility).async { [steps, self] in
                    defer { finished.signal() }
                    do {
                        try readBuildRun(index, after: last, steps: steps, into: run)
                    } catch {
                        run.failure = error
                    }
                }
                next = (run, finished)
            }
            // Whatever happens here, the reader is waited for before this returns or throws.
            defer { next?.finished.wait() }
            try writeBuildRun(index, current)
            done += current.steps.reduce(0) { $0 + $1.live }
            guard progress(IndexBuildProgress(documentsIndexed: done, documentsTotal: max(total, done))) else {
                throw SetteeError(.cancelled, "index \(index.name): creation cancelled")
            }
            guard let (run, finished) = next else { return }
            finished.wait()
            next = nil
            if let failure = run.failure { throw failure }
            current = run
        }
    }

    /// The steps of one run, read one after the other.
    private final class BuildRun: @unchecked Sendable {
        // Written by the thread that reads the run, then read by the one that writes it, after
        // the first has finished (the hand-over waits on a semaphore): never both at once.
        var steps: [BuildStep] = []
        /// Whether the last step reached the end of the documents.
        var ended = false
        var failure: (any Error)?
    }

    private func readBuildRun(_ index: CompiledIndex, after: [UInt8]?, steps: Int) throws -> BuildRun {
        let run = BuildRun()
        try readBuildRun(index, after: after, steps: steps, into: run)
        return run
    }

    /// Reads up to `steps` steps after `after` into `run`, on ``buildReaders`` threads.
    private func readBuildRun(_ index: CompiledIndex, after: [UInt8]?, steps: Int, into run: BuildRun) throws {
        let cursor = StepCursor(after: after)
        DispatchQueue.concurrentPerform(iterations: min(Self.buildReaders, steps)) { _ in
            do {
                while !file.compactionCancelled.load(ordering: .relaxed), try readBuildStep(index, cursor: cursor, limit: steps) {}
            } catch {
                cursor.lock.withLock { if cursor.failure == nil { cursor.failure = error } }
            }
        }
        if let failure = cursor.failure { throw failure }
        run.steps = (0 ..< cursor.taken).compactMap { cursor.steps[$0] }
        run.ended = cursor.ended
    }

    /// Writes a run's entries in one transaction, skipping every document changed since the
    /// snapshot of its step (the commit that changed it wrote its entry). A value index's
    /// entries, back entries and channel records go in in key order.
    private func writeBuildRun(_ index: CompiledIndex, _ run: BuildRun) throws {
        // Outside the snapshot and on this thread: the function may take a while.
        let toMap = run.steps.flatMap(\.toMap)
        let made = MapIndexStore.rows(of: index, rows: toMap.map(\.row))
        let mapped = zip(toMap, made).filter { !$0.1.isEmpty }.map { (key: $0.0.key, sequence: $0.0.sequence, rows: $0.1) }
        guard run.steps.contains(where: { !$0.batch.isEmpty }) || !mapped.isEmpty else { return }
        let earliest = run.steps.map(\.readAtSequence).min() ?? 0
        try write { c in
            guard c.participants.indexes.indexes.contains(where: { $0.name == index.name && $0.record == index.record }) else {
                throw SetteeError(.conflict, "index \(index.name) was deleted or replaced while it was being created")
            }
            // Nothing committed since the run's first step was read (every change takes a
            // sequence): every document is as read, and none needs looking up again.
            let unchanged = c.lastSequence == earliest
            var puts = SortedPuts()
            // Whether each document (numbered across the run's steps) is as its step read it.
            var current: [Bool] = []
            puts.reserve(pairs: run.steps.reduce(0) { $0 + $1.puts.count }, bytes: run.steps.reduce(0) { $0 + $1.puts.byteCount })
            for step in run.steps {
                puts.append(step.puts, tagOffset: current.count)
                for item in step.batch {
                    let same = try unchanged || c.meta(item.key)?.sequence == item.sequence
                    current.append(same)
                    if same, let t = item.text {
                        try FullTextIndexStore.update(c.tx, tree: index.tree, id: String(decoding: item.key, as: UTF8.self), old: nil, new: t)
                    }
                }
            }
            try puts.write(c.tx, in: index.tree) { !current[$0] }
            var summaries = MapIndexStore.SummaryDeltas()
            for item in mapped where try unchanged || c.meta(item.key)?.sequence == item.sequence {
                try MapIndexStore.replace(c.tx, tree: index.tree, id: String(decoding: item.key, as: UTF8.self), with: item.rows,
                                          summaries: &summaries)
            }
            try MapIndexStore.applySummaries(summaries, c.tx, tree: index.tree)
        }
    }

    /// Brings every index to a usable state after the open: one whose strings were keyed by
    /// another ICU version (or, full-text, whose terms were made by another analyzer version;
    /// or, value, that has no back entries) is rebuilt, one whose build was interrupted is built
    /// again.
    /// A failed build is logged and removes the index (as a failed createIndex does); the open never fails for it.
    func finishIndexes() {
        let current = try? JSONCollation.collatorVersion()
        for index in parts.queries.indexSet.withLock({ $0.indexes }) {
            let analyzerChanged = index.definition.text.map { $0.analyzerVersion != FullTextAnalyzer.version } ?? false
            let stale = (current != nil && index.definition.collatorVersion != current) || analyzerChanged
                || index.definition.olderLayout
            guard stale || !index.isReady else { continue }
            // A map index is built when the application gives its function again
            // (``Database/createIndex(_:name:)``); until then a stale one is only emptied.
            if index.isMap && index.map == nil {
                guard stale, let current else { continue }
                var d = index.definition
                d.state = .building
                d.collatorVersion = current
                d.olderLayout = false
                do {
                    try changingIndexes { c in
                        try c.clearTree(index.tree)
                        try c.tx.put(Array(index.name.utf8), d.encoded(), in: trees.indexCatalog)
                    }
                } catch {
                    Self.logger.error("\("index \(index.name) could not be emptied for rebuilding: \(error)".escapedForLog)")
                }
                continue
            }
            do {
                if stale, let current {
                    var d = index.definition
                    d.state = .building
                    d.collatorVersion = current
                    d.text?.analyzerVersion = FullTextAnalyzer.version
                    d.olderLayout = false
                    try changingIndexes { c in
                        try c.clearTree(index.tree)
                        try c.tx.put(Array(index.name.utf8), d.encoded(), in: trees.indexCatalog)
                    }
                }
                try buildIndex(name: index.name) { _ in true }
            } catch {
                Self.logger.error("\("index \(index.name) could not be rebuilt: \(error)".escapedForLog)")
            }
        }
    }
}

extension WriteContext {
    /// Records a definition under `name`; returns whether the index must be built (false when
    /// the same index exists and is ready).
    func defineIndex(name: String, definition: IndexDefinition) throws -> Bool {
        let key = Array(name.utf8)
        var d = definition
        if let existing = try tx.withValue(forKey: key, in: trees.indexCatalog, { b in try IndexDefinition(decoding: b) }) {
            if existing.sameIndex(as: definition) && existing.state == .ready { return false }
            // Another definition (or a build that never finished): start again in its tree.
            guard let tree = tx.tree(named: existing.treeName) else {
                throw SetteeError(.corrupted, "index \(name): its tree \(existing.treeName) is missing")
            }
            try clearTree(tree)
            d.treeName = existing.treeName
        } else {
            let n = try core.counter(tx, MetaKey.nextIndexTree)
            try tx.put(MetaKey.nextIndexTree, withUnsafeBytes(of: (n + 1).littleEndian, Array.init), in: trees.meta)
            d.treeName = core.treePrefix + "idx.\(n)"
            _ = try tx.tree(named: d.treeName) ?? tx.createTree(named: d.treeName)
        }
        d.state = .building
        try tx.put(key, d.encoded(), in: trees.indexCatalog)
        return true
    }

    /// Removes an index's entries and catalog record (its empty tree stays: the engine keeps
    /// trees; a later index may not reuse the name, which has a number of its own).
    func removeIndex(name: String) throws {
        let key = Array(name.utf8)
        guard let existing = try tx.withValue(forKey: key, in: trees.indexCatalog, { b in try? IndexDefinition(decoding: b) }) else { return }
        if let d = existing, let tree = tx.tree(named: d.treeName) { try clearTree(tree) }
        try tx.delete(key, in: trees.indexCatalog)
    }

    /// Deletes every entry of `tree`, a slice at a time.
    func clearTree(_ tree: Tree) throws { try tx.removeAll(in: tree) }
}

extension DatabaseCore {
    /// Mends an index the check found out of step: a map index's group counts are counted
    /// again from its rows (its rows are what the application's function made, which the check
    /// cannot judge); any other index is rebuilt from the documents.
    func repairIndex(name: String) throws {
        guard let index = parts.queries.indexSet.withLock({ $0.indexes.first { $0.name == name } }) else { return }
        guard index.isMap else { return try rebuildIndex(name: name) }
        try write { c in try MapIndexStore.rewriteSummaries(c.tx, tree: index.tree) }
    }

    /// Empties an index and builds it again from the documents.
    func rebuildIndex(name: String) throws {
        guard let index = parts.queries.indexSet.withLock({ $0.indexes.first { $0.name == name } }) else { return }
        var d = index.definition
        d.state = .building
        try changingIndexes { c in
            try c.clearTree(index.tree)
            try c.tx.put(Array(name.utf8), d.encoded(), in: trees.indexCatalog)
        }
        try buildIndex(name: name) { _ in true }
    }
}

/// What ``Database/indexInfo(forName:)`` tells of an index: its kind, whether it is whole, and
/// its size.
///
/// ```swift
/// if let info = try db.indexInfo(forName: "tasks") { print(info.kind, info.entryCount) }
/// ```
///
/// - Note: A value type; safe to share between threads.
