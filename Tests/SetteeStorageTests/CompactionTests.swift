import Foundation
import Synchronization
import Testing
@testable import SetteeCrashKit
@testable import SetteeStorage

/// Online compaction of the engine: a new log filled from a snapshot while the store keeps
/// committing, caught up with the keys that changed, and swapped in; checked against a dictionary
/// model, with old readers, cancel, close, new trees, raw value copies and commit IDs.
@Suite struct CompactionTests {
    typealias Model = [String: [[UInt8]: [UInt8]]]
    struct Aborted: Error {}

    static let freshSeed = UInt64.random(in: 1...UInt64.max)

    static func code(_ body: () throws -> Void) -> StorageError.Code? {
        do { try body(); return nil } catch let e as StorageError { return e.code } catch { return nil }
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func inode(_ path: String) -> UInt64 {
        var st = stat()
        return stat(path, &st) == 0 ? UInt64(st.st_ino) : 0
    }

    /// Everything in the store, empty trees left out.
    static func contents(_ store: Store) throws -> Model {
        try store.read { tx throws in
            var out: Model = [:]
            for name in tx.treeNames {
                let entries = try tx.all(tx.tree(named: name)!)
                if !entries.isEmpty { out[name] = Dictionary(entries, uniquingKeysWith: { a, _ in a }) }
            }
            return out
        }
    }

    static func normalized(_ m: Model) -> Model { m.filter { !$0.value.isEmpty } }

    /// Random transactions against a store and its model.
    struct Writer {
        var rng: SeededGenerator
        var model: Model = [:]
        var treeNames = ["a", "b"]
        var newTrees = 0

        init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

        mutating func key() -> [UInt8] {
            let i = Int.random(in: 0..<500, using: &rng)
            return i % 7 == 0 ? paddedKey("long-key-with-a-shared-prefix-", i, width: 40) : paddedKey("k", i, width: 5)
        }

        mutating func value() -> [UInt8] {
            let n = [0, 3, 20, 100, 300, 600, 1500, 9000].randomElement(using: &rng)!
            if Bool.random(using: &rng) {
                let fill = UInt8.random(in: 0...255, using: &rng)
                return (0..<n).map { i in i % 4 == 0 ? fill : UInt8(truncatingIfNeeded: i / 16) }
            }
            return (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
        }

        /// `count` transactions of 1 to 12 operations, one in ten aborted; now and then a new tree.
        mutating func write(_ store: Store, count: Int) throws {
            for _ in 0..<count {
                if Int.random(in: 0..<30, using: &rng) == 0 {
                    newTrees += 1
                    treeNames.append("tree-\(newTrees)")
                }
                let abort = Int.random(in: 0..<10, using: &rng) == 0
                var staged = model
                do {
                    try store.write { tx in
                        for _ in 0..<Int.random(in: 1...12, using: &rng) {
                            let name = treeNames.randomElement(using: &rng)!
                            let tree = try tx.createTree(named: name)
                            let k = key()
                            if Int.random(in: 0..<4, using: &rng) == 0 {
                                _ = try tx.delete(k, in: tree)
                                staged[name, default: [:]][k] = nil
                            } else {
                                let v = value()
                                try tx.put(k, v, in: tree)
                                staged[name, default: [:]][k] = v
                            }
                        }
                        if abort { throw Aborted() }
                    }
                    model = staged
                } catch is Aborted {}
            }
        }
    }

    // MARK: - Model

    /// Rounds of random commits while a compaction copies its snapshot in batches (commits,
    /// checkpoints and new trees between the batches), catches up and finishes; the contents
    /// match the model after each swap and after reopening, and `check()` passes.
    @Test(arguments: [1, 2, 3, CompactionTests.freshSeed])
    func compactionRoundsMatchADictionary(seed: UInt64) throws {
        print("CompactionTests seed \(seed) (replay: run compactionRoundsMatchADictionary with this seed)")
        let dir = TemporaryDirectory("compaction-model"); defer { dir.cleanup() }
        var config = smallConfiguration(checkpointInterval: 1 << 16)
        config.compressionThreshold = 64
        var store = try Store(directory: dir.path, configuration: config)
        var w = Writer(seed: seed)
        var rng = SeededGenerator(seed: seed ^ 0x5eed)
        try w.write(store, count: 150)
        for round in 0..<5 {
            try w.write(store, count: Int.random(in: 10...80, using: &rng))
            let sizeBefore = store.fileSize
            let c = try store.beginCompaction()
            #expect(Self.exists(dir.path + "/log.compact"))
            var copier = SnapshotCopier(c)
            while try copier.step(c, batch: Int.random(in: 5...120, using: &rng)) {
                try w.write(store, count: Int.random(in: 0...3, using: &rng))
                if Int.random(in: 0..<10, using: &rng) == 0 { try store.checkpoint() }
                // Readers of the source see its latest commit, not the copy.
                if Int.random(in: 0..<8, using: &rng) == 0 {
                    #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model), "seed \(seed) round \(round)")
                }
            }
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                try w.write(store, count: Int.random(in: 1...20, using: &rng))
                try c.catchUp { source, changes in
                    try c.target.write { out in try SteppedCompaction.apply(changes, from: source, into: out) }
                }
                #expect(c.pendingChanges == 0)
            }
            try w.write(store, count: Int.random(in: 0...10, using: &rng))
            let commitBefore = store.lastCommitID
            try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
            #expect(!Self.exists(dir.path + "/log.compact"), "seed \(seed) round \(round)")
            #expect(store.lastCommitID >= commitBefore, "seed \(seed) round \(round)")
            #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model), "seed \(seed) round \(round)")
            _ = try store.check()
            if round == 0 { #expect(store.fileSize < sizeBefore, "seed \(seed): \(store.fileSize) after, \(sizeBefore) before") }
            // The store goes on writing to the new log.
            let next = store.lastCommitID + 1
            try w.write(store, count: 5)
            #expect(store.lastCommitID >= next)
            _ = try store.check()
            if Bool.random(using: &rng) {
                let last = store.lastCommitID
                if Bool.random(using: &rng) { try store.close() } else { store.abandon() }
                store = try Store(directory: dir.path, configuration: config)
                #expect(store.lastCommitID == last, "seed \(seed) round \(round)")
                #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model), "seed \(seed) round \(round)")
                _ = try store.check()
            }
        }
        try store.close()
    }

    /// A writer thread commits without pause while compactions run on this thread; what the
    /// store holds at the end is exactly what the writer committed.
    @Test func compactionWhileAnotherThreadWrites() throws {
        let seed = Self.freshSeed
        print("CompactionTests.compactionWhileAnotherThreadWrites seed \(seed)")
        let dir = TemporaryDirectory("compaction-concurrent"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        final class Shared: @unchecked Sendable {
            var writer: Writer
            var error: (any Error)?
            init(seed: UInt64) { writer = Writer(seed: seed) }
        }
        let shared = Shared(seed: seed)
        try shared.writer.write(store, count: 200)
        let stop = Atomic<Bool>(false)
        let finished = Atomic<Bool>(false)
        let thread = Thread {
            do {
                while !stop.load(ordering: .acquiring) { try shared.writer.write(store, count: 1) }
            } catch {
                shared.error = error
            }
            finished.store(true, ordering: .releasing)
        }
        thread.start()
        for _ in 0..<3 {
            let c = try store.beginCompaction()
            var copier = SnapshotCopier(c)
            try copier.all(c)
            var rounds = 0
            while c.pendingChanges > 20 && rounds < 5 {
                try c.catchUp { source, changes in
                    try c.target.write { out in try SteppedCompaction.apply(changes, from: source, into: out) }
                }
                rounds += 1
            }
            try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
            _ = try store.check()
        }
        stop.store(true, ordering: .releasing)
        while !finished.load(ordering: .acquiring) { usleep(1000) }
        #expect(shared.error == nil, "seed \(seed): \(String(describing: shared.error))")
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(shared.writer.model), "seed \(seed)")
        _ = try store.check()
        try store.close()
        let again = try Store(directory: dir.path, configuration: smallConfiguration())
        #expect(Self.normalized(try Self.contents(again)) == Self.normalized(shared.writer.model), "seed \(seed)")
        try again.close()
    }

    // MARK: - Readers, cancel, close

    /// A read transaction that began before the swap keeps reading its snapshot from the old
    /// log, unlinked but still mapped; new readers see the new log.
    @Test func readersFromBeforeTheSwapKeepReadingTheOldLog() throws {
        let dir = TemporaryDirectory("compaction-readers"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        var w = Writer(seed: 11)
        try w.write(store, count: 300)
        try store.checkpoint()
        try w.write(store, count: 20)   // some of the state in memory nodes, some on disk
        let oldModel = w.model
        let oldInode = Self.inode(dir.path + "/log")
        try store.read { old throws in
            let c = try store.beginCompaction()
            var copier = SnapshotCopier(c)
            try copier.all(c)
            try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
            #expect(Self.inode(dir.path + "/log") != oldInode)
            try w.write(store, count: 50)
            // Both snapshots read in full (every value checked against its checksum).
            var found: Model = [:]
            for name in old.treeNames {
                let entries = try old.all(old.tree(named: name)!)
                if !entries.isEmpty { found[name] = Dictionary(entries, uniquingKeysWith: { a, _ in a }) }
            }
            #expect(found == Self.normalized(oldModel))
            #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
            #expect(old.commitID < store.lastCommitID)
        }
        // A reader thread across several swaps, reading whole snapshots.
        let stop = Atomic<Bool>(false)
        let failures = Atomic<Int>(0)
        let reads = Atomic<Int>(0)
        let done = Atomic<Bool>(false)
        let reader = Thread {
            while !stop.load(ordering: .acquiring) {
                do {
                    try store.read { tx throws in
                        for name in tx.treeNames {
                            let t = tx.tree(named: name)!
                            if try tx.all(t).count != tx.count(in: t) { failures.add(1, ordering: .relaxed) }
                        }
                    }
                    reads.add(1, ordering: .relaxed)
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
            done.store(true, ordering: .releasing)
        }
        reader.start()
        for _ in 0..<4 {
            let c = try store.beginCompaction()
            var copier = SnapshotCopier(c)
            try copier.all(c)
            try w.write(store, count: 10)
            try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
        }
        while reads.load(ordering: .relaxed) < 3 { usleep(1000) }
        stop.store(true, ordering: .releasing)
        while !done.load(ordering: .acquiring) { usleep(1000) }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        try store.close()
    }

    /// `cancel` deletes the new log and leaves the store as it was, still writable; the abandoned
    /// compaction's later steps fail; a new compaction can start.
    @Test func cancelLeavesTheStoreUnchanged() throws {
        let dir = TemporaryDirectory("compaction-cancel"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        var w = Writer(seed: 12)
        try w.write(store, count: 100)
        let inode = Self.inode(dir.path + "/log")
        let c = try store.beginCompaction()
        var copier = SnapshotCopier(c)
        _ = try copier.step(c, batch: 50)
        try w.write(store, count: 10)
        let commit = store.lastCommitID
        c.cancel()
        #expect(!Self.exists(dir.path + "/log.compact"))
        #expect(Self.inode(dir.path + "/log") == inode)
        #expect(store.lastCommitID == commit)
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        #expect(Self.code { try c.finish { _, _, _ in } } == .invalidArgument)
        #expect(Self.code { try c.target.write { _ in } } == .closed)
        c.cancel()   // twice: nothing happens
        try w.write(store, count: 10)
        #expect(store.lastCommitID > commit)
        _ = try store.check()
        // The journal stopped: a new compaction starts and finishes normally.
        let again = try store.beginCompaction()
        var copier2 = SnapshotCopier(again)
        try copier2.all(again)
        try again.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        c.cancel()   // an old compaction's cancel does not touch the store
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        try store.close()
        let reopened = try Store(directory: dir.path, configuration: smallConfiguration())
        #expect(Self.normalized(try Self.contents(reopened)) == Self.normalized(w.model))
        try reopened.close()
    }

    /// One compaction at a time, and none from inside a write transaction.
    @Test func aSecondCompactionIsRefused() throws {
        let dir = TemporaryDirectory("compaction-twice"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        var w = Writer(seed: 13)
        try w.write(store, count: 20)
        let c = try store.beginCompaction()
        #expect(Self.code { _ = try store.beginCompaction() } == .invalidArgument)
        #expect(Self.code { try store.write { _ in _ = try store.beginCompaction() } } == .invalidArgument)
        var copier = SnapshotCopier(c)
        try copier.all(c)
        #expect(Self.code { try store.write { _ in try c.finish { _, _, _ in } } } == .invalidArgument)
        // The refused attempts did not disturb the running one.
        try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        #expect(Self.code { try c.finish { _, _, _ in } } == .invalidArgument)
        let next = try store.beginCompaction()
        next.cancel()
        try store.close()
        #expect(Self.code { _ = try store.beginCompaction() } == .closed)
    }

    /// Closing the store abandons a running compaction: its new log is deleted, and each of
    /// its later steps fails with `closed` instead of writing to a file nobody will use.
    @Test func closeAbandonsARunningCompaction() throws {
        let dir = TemporaryDirectory("compaction-close"); defer { dir.cleanup() }
        var w = Writer(seed: 14)
        do {
            let store = try Store(directory: dir.path, configuration: smallConfiguration())
            try w.write(store, count: 60)
            let c = try store.beginCompaction()
            var copier = SnapshotCopier(c)
            _ = try copier.step(c, batch: 20)
            try store.close()
            #expect(!Self.exists(dir.path + "/log.compact"))
            #expect(Self.code { _ = try copier.step(c, batch: 20) } == .closed)
            #expect(Self.code { try c.target.write { _ in } } == .closed)
            #expect(Self.code { try c.catchUp { _, _ in } } == .closed)
            #expect(Self.code { try c.finish { _, _, _ in } } == .closed)
            c.cancel()
            #expect(!Self.exists(dir.path + "/log.compact"))
        }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        _ = try store.check()
        try store.close()
    }

    /// A `log.compact` (or `log.compact.new`) left by a crash is deleted when the store opens.
    @Test func aLeftoverNewLogIsDeletedOnOpen() throws {
        let dir = TemporaryDirectory("compaction-leftover"); defer { dir.cleanup() }
        var w = Writer(seed: 15)
        do {
            let store = try Store(directory: dir.path, configuration: smallConfiguration())
            try w.write(store, count: 40)
            let c = try store.beginCompaction()
            var copier = SnapshotCopier(c)
            try copier.all(c)
            // A crash: nothing closed, nothing deleted.
            c.target.abandon()
            store.abandon()
        }
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: dir.path + "/log.compact.new"))
        #expect(Self.exists(dir.path + "/log.compact"))
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        #expect(!Self.exists(dir.path + "/log.compact"))
        #expect(!Self.exists(dir.path + "/log.compact.new"))
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        try store.close()
    }

    // MARK: - I/O failures

    /// A compaction whose start fails (its new log's first sync, the rename into place, the
    /// directory sync after it) leaves no `log.compact` or `log.compact.new`, and the store as it
    /// was, still writable.
    @Test(arguments: [3, 4, 5])
    func aFailedStartLeavesNoNewLog(failingOperation: Int) throws {
        let dir = TemporaryDirectory("compaction-failed-start"); defer { dir.cleanup() }
        var w = Writer(seed: 18)
        do {
            let store = try Store(directory: dir.path, configuration: smallConfiguration())
            try w.write(store, count: 20)
            try store.close()
        }
        let plan = FaultPlan()
        let directory = try SimulatedDirectory(path: dir.path, plan: plan, seed: 1)
        defer { directory.detach() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration(), openFile: { (path) throws(StorageError) in
            try directory.open(path)
        })
        // The start's operations: the new file truncated (1), its header written (2) and synced
        // (3), renamed to log.compact (4), the directory synced (5).
        if failingOperation == 4 {
            plan.failWriteAt = plan.operations + 4
        } else {
            plan.failSyncAt = plan.operations + failingOperation
        }
        #expect(Self.code { _ = try store.beginCompaction() } == .io)
        #expect(plan.injectedFailure)
        #expect(!Self.exists(dir.path + "/log.compact"))
        #expect(!Self.exists(dir.path + "/log.compact.new"))
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        try w.write(store, count: 5)
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        try store.close()
    }

    /// When the new log fails inside the finish's own commit (in the checkpoint that commit
    /// triggers, whose failure the commit does not report), the swap must not happen: the new log
    /// was never synced. The compaction is abandoned and the store goes on with its old log.
    @Test func aFailureOfTheNewLogDuringTheFinishAbandonsTheSwap() throws {
        let dir = TemporaryDirectory("compaction-failed-finish"); defer { dir.cleanup() }
        let plan = FaultPlan()
        var config = smallConfiguration()
        config.maxDirtyNodes = 64
        let store = try Store(directory: dir.path, configuration: config, openFile: { (path) throws(StorageError) in
            try FaultInjectingFile(path: path, plan: plan, seed: 2)
        })
        var w = Writer(seed: 19)
        try w.write(store, count: 50)
        let inode = Self.inode(dir.path + "/log")
        let c = try store.beginCompaction()
        var copier = SnapshotCopier(c)
        try copier.all(c)
        // Enough changes that the finish's commit in the new log checkpoints by itself.
        try store.write { tx in
            let t = try tx.createTree(named: "bulk")
            for i in 0..<10_000 { try tx.put(paddedKey("bulk-", i), [UInt8](repeating: UInt8(i % 251), count: 40), in: t) }
        }
        for i in 0..<10_000 { w.model["bulk", default: [:]][paddedKey("bulk-", i)] = [UInt8](repeating: UInt8(i % 251), count: 40) }
        var thrown: (any Error)?
        do {
            try c.finish { source, changes, out in
                try SteppedCompaction.apply(changes, from: source, into: out)
                // The commit's write is the next operation; the checkpoint's first write fails.
                plan.failWriteAt = plan.operations + 2
            }
        } catch {
            thrown = error
        }
        #expect(plan.writeFailures == 1)
        #expect(thrown != nil, "the swap went ahead with a new log that failed and was never synced")
        #expect(Self.inode(dir.path + "/log") == inode)
        #expect(!Self.exists(dir.path + "/log.compact"))
        #expect(Self.normalized(try Self.contents(store)) == Self.normalized(w.model))
        try w.write(store, count: 5)
        _ = try store.check()
        try store.close()
    }

    // MARK: - Trees, values, commit IDs

    /// Trees the source creates after `beginCompaction` are created in the target with the same
    /// numbers, by `catchUp` or by `finish`, so `Tree` values taken before the swap still work.
    @Test func treesCreatedDuringACompactionKeepTheirNumbers() throws {
        let dir = TemporaryDirectory("compaction-trees"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let a = try store.write { tx in
            let a = try tx.createTree(named: "a")
            try tx.put(bytes("k"), bytes("a"), in: a)
            return a
        }
        let c = try store.beginCompaction()
        #expect(try c.target.read { $0.treeNames } == ["a"])
        var copier = SnapshotCopier(c)
        try copier.all(c)
        let z = try store.write { tx in
            let z = try tx.createTree(named: "z")
            try tx.put(bytes("k"), bytes("z"), in: z)
            return z
        }
        try c.catchUp { source, changes in
            #expect(changes.map(\.tree.name) == ["z"])
            try c.target.write { out in try SteppedCompaction.apply(changes, from: source, into: out) }
        }
        #expect(try c.target.read { tx in tx.tree(named: "z")?.id } == z.id)
        // One created between the last catch-up and the finish, one with no keys at all.
        let (m, empty) = try store.write { tx in
            let m = try tx.createTree(named: "m")
            try tx.put(bytes("k"), bytes("m"), in: m)
            return (m, try tx.createTree(named: "empty"))
        }
        try c.finish { source, changes, out in
            #expect(out.tree(named: "m")?.id == m.id)
            #expect(out.tree(named: "empty")?.id == empty.id)
            try SteppedCompaction.apply(changes, from: source, into: out)
        }
        try store.read { tx throws in
            #expect(tx.treeNames == ["a", "z", "m", "empty"])
            #expect(try tx.value(forKey: bytes("k"), in: a) == bytes("a"))
            #expect(try tx.value(forKey: bytes("k"), in: z) == bytes("z"))
            #expect(try tx.value(forKey: bytes("k"), in: m) == bytes("m"))
            #expect(try tx.count(in: empty) == 0)
        }
        // The handles taken before the swap name the same trees in the new log.
        try store.write { tx in
            try tx.put(bytes("k2"), bytes("z2"), in: z)
            try tx.put(bytes("k2"), bytes("e"), in: empty)
        }
        try store.close()
        let reopened = try Store(directory: dir.path, configuration: smallConfiguration())
        try reopened.read { tx throws in
            #expect(tx.treeNames == ["a", "z", "m", "empty"])
            #expect(try tx.value(forKey: bytes("k2"), in: tx.tree(named: "z")!) == bytes("z2"))
            #expect(try tx.value(forKey: bytes("k2"), in: tx.tree(named: "empty")!) == bytes("e"))
        }
        try reopened.close()
    }

    /// The value entry at `ref` in the log file at `path`, as stored: flags, stored length,
    /// raw length, stored bytes.
    static func storedEntry(_ path: String, _ ref: ValueRef) throws -> (flags: UInt8, stored: Int, raw: Int, bytes: [UInt8]) {
        let file = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        let at = Int(ref.rawValue)
        func u32(_ o: Int) -> Int { Int(file[at + o]) | Int(file[at + o + 1]) << 8 | Int(file[at + o + 2]) << 16 | Int(file[at + o + 3]) << 24 }
        let stored = u32(Layout.vStoredLength)
        let start = at + Layout.valueHeaderSize
        return (file[at + Layout.vFlags], stored, u32(Layout.vRawLength), Array(file[start..<start + stored]))
    }

    /// `appendValue(copying:from:)` copies a value's stored bytes as they are: a compressed value
    /// stays the same LZ4 block, a raw one the same bytes, under a new checksum for its new place.
    @Test func appendValueCopyingCopiesStoredBytesExactly() throws {
        let dir = TemporaryDirectory("compaction-values"); defer { dir.cleanup() }
        var config = smallConfiguration()
        config.compressionThreshold = 256
        let store = try Store(directory: dir.path, configuration: config)
        var rng = SeededGenerator(seed: 16)
        let values: [[UInt8]] = [
            [UInt8](String(repeating: "settee sofa couch ", count: 600).utf8),        // compressed
            (0..<5000).map { _ in UInt8.random(in: 0...255, using: &rng) },           // raw: does not compress
            [UInt8](repeating: 7, count: 100),                                         // raw: under the threshold
            [],                                                                        // empty
            [UInt8](String(repeating: "ab", count: 40_000).utf8),                     // compressed, large
        ]
        let (refsTree, refs) = try store.write { tx in
            let t = try tx.createTree(named: "refs")
            var refs: [ValueRef] = []
            for (i, v) in values.enumerated() {
                let r = try tx.appendValue(v)
                refs.append(r)
                try tx.put(bytes("v\(i)"), withUnsafeBytes(of: r.rawValue.littleEndian, Array.init), in: t)
            }
            return (t, refs)
        }
        let before = try refs.map { try Self.storedEntry(dir.path + "/log", $0) }
        #expect(before[0].flags & Layout.valueFlagLZ4 != 0 && before[0].stored < before[0].raw)
        #expect(before[1].flags & Layout.valueFlagLZ4 == 0 && before[1].stored == 5000)
        #expect(before[2].flags & Layout.valueFlagLZ4 == 0)
        #expect(before[4].flags & Layout.valueFlagLZ4 != 0)

        let c = try store.beginCompaction()
        var copies: [ValueRef] = []
        try c.readStart { source throws in
            try c.target.write { out in
                let t = out.tree(named: "refs")!
                for (i, r) in refs.enumerated() {
                    let copy = try out.appendValue(copying: r, from: source)
                    copies.append(copy)
                    try out.put(bytes("v\(i)"), withUnsafeBytes(of: copy.rawValue.littleEndian, Array.init), in: t)
                    // Readable inside the transaction that copied it.
                    #expect(try out.withValue(at: copy) { Array($0) } == values[i])
                }
            }
        }
        try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
        let after = try copies.map { try Self.storedEntry(dir.path + "/log", $0) }
        for i in values.indices {
            #expect(after[i].flags == before[i].flags, "value \(i)")
            #expect(after[i].stored == before[i].stored && after[i].raw == before[i].raw, "value \(i)")
            #expect(after[i].bytes == before[i].bytes, "value \(i)")
        }
        try store.read { tx throws in
            for (i, v) in values.enumerated() {
                let raw = try #require(try tx.value(forKey: bytes("v\(i)"), in: refsTree))
                let ref = ValueRef(rawValue: raw.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) })
                #expect(ref == copies[i])
                #expect(try tx.withValue(at: ref) { Array($0) } == v, "value \(i)")
            }
        }
        _ = try store.check()
        try store.close()
        // After reopening (nothing verified yet in this process) every copy checks.
        let reopened = try Store(directory: dir.path, configuration: config)
        try reopened.read { tx throws in
            for (i, v) in values.enumerated() { #expect(try tx.withValue(at: copies[i]) { Array($0) } == v, "value \(i)") }
        }
        try reopened.close()
    }

    /// A damaged value in the source is reported as `corrupted` when copied, never copied.
    @Test(arguments: [false, true])
    func appendValueCopyingReportsADamagedValue(compressed: Bool) throws {
        let dir = TemporaryDirectory("compaction-damaged"); defer { dir.cleanup() }
        var rng = SeededGenerator(seed: 17)
        let value: [UInt8] = compressed ? [UInt8](String(repeating: "damaged? ", count: 500).utf8)
            : (0..<3000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let ref = try {
            let store = try Store(directory: dir.path, configuration: smallConfiguration())
            defer { try? store.close() }
            return try store.write { tx in try tx.appendValue(value) }
        }()
        #expect((try Self.storedEntry(dir.path + "/log", ref).flags & Layout.valueFlagLZ4 != 0) == compressed)
        // Flip one bit in the middle of the stored bytes.
        let stored = try Self.storedEntry(dir.path + "/log", ref).stored
        let fd = open(dir.path + "/log", O_RDWR)
        var byte: UInt8 = 0
        let at = off_t(ref.rawValue) + off_t(Layout.valueHeaderSize) + off_t(stored / 2)
        #expect(pread(fd, &byte, 1, at) == 1)
        byte ^= 0x10
        #expect(pwrite(fd, &byte, 1, at) == 1)
        close(fd)

        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let c = try store.beginCompaction()
        var thrown: StorageError?
        do {
            try c.readStart { source throws in
                try c.target.write { out in _ = try out.appendValue(copying: ref, from: source) }
            }
        } catch let e as StorageError {
            thrown = e
        }
        #expect(thrown?.code == .corrupted)
        #expect(thrown?.offset == ref.rawValue)
        // Not a value at all: a bad reference.
        #expect(Self.code {
            try c.readStart { source in try c.target.write { out in _ = try out.appendValue(copying: ValueRef(rawValue: ref.rawValue + 16), from: source) } }
        } == .invalidValueRef)
        c.cancel()
        try store.close()
    }

    /// The new log continues the old one's commit numbers, whether the copy took fewer commits
    /// than the source had or more; `lastCommitID` never goes backwards, across reopening too.
    @Test func commitIDsContinueAfterTheSwap() throws {
        let dir = TemporaryDirectory("compaction-commits"); defer { dir.cleanup() }
        var store = try Store(directory: dir.path, configuration: smallConfiguration())
        var t = try store.write { try $0.createTree(named: "t") }
        for i in 0..<120 { try store.write { tx in try tx.put(paddedKey("k", i), bytes("\(i)"), in: t) } }
        var last = store.lastCommitID
        #expect(last == 121)

        // Fewer commits in the copy than in the source: the numbers continue from the source's.
        var c = try store.beginCompaction()
        var copier = SnapshotCopier(c)
        try copier.all(c)
        try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
        #expect(store.lastCommitID >= last)
        last = store.lastCommitID
        let id = try store.write { tx in
            try tx.put(bytes("after"), bytes("1"), in: t)
            return tx.commitIDToBe
        }
        #expect(id == last + 1 && store.lastCommitID == id)
        last = id

        // A finish with nothing to copy and no commit of its own.
        c = try store.beginCompaction()
        copier = SnapshotCopier(c)
        try copier.all(c)
        try c.finish { _, changes, _ in #expect(changes.isEmpty) }
        #expect(store.lastCommitID == last)

        // The same when the target has just checkpointed (as it does by itself after a large
        // copy): the number it continues from must still reach the new log.
        c = try store.beginCompaction()
        copier = SnapshotCopier(c)
        try copier.all(c)
        try c.target.checkpoint()
        try c.finish { _, changes, _ in #expect(changes.isEmpty) }
        #expect(store.lastCommitID == last)
        store.abandon()
        store = try Store(directory: dir.path, configuration: smallConfiguration())
        #expect(store.lastCommitID == last)
        t = try store.read { $0.tree(named: "t")! }

        // More commits in the copy (one per entry) than the source has in all.
        try store.write { tx in for i in 200..<400 { try tx.put(paddedKey("k", i), bytes("\(i)"), in: t) } }
        last = store.lastCommitID
        c = try store.beginCompaction()
        copier = SnapshotCopier(c)
        while try copier.step(c, batch: 1) {}
        try c.finish { source, changes, out in try SteppedCompaction.apply(changes, from: source, into: out) }
        #expect(store.lastCommitID > last)
        last = store.lastCommitID
        store.abandon()
        store = try Store(directory: dir.path, configuration: smallConfiguration())
        #expect(store.lastCommitID == last)
        let next = try store.write { tx in
            try tx.put(bytes("reopened"), bytes("1"), in: tx.tree(named: "t")!)
            return tx.commitIDToBe
        }
        #expect(next == last + 1)
        try store.close()
    }
}
