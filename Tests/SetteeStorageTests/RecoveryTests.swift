import Foundation
import Testing
@testable import SetteeStorage

/// Opening after crashes: torn tails at every byte offset, stale records from older sessions,
/// and damage that must be reported rather than taken for a torn write.
@Suite struct RecoveryTests {
    /// Writes a checkpointed base, then small durable commits in the log tail, then "crashes".
    /// Returns the commit end offsets of the tail commits and the values each commit wrote.
    func makeTail(_ dir: String, commits: Int) throws -> (ends: [UInt64], start: UInt64) {
        let store = try Store(directory: dir, configuration: smallConfiguration(durability: .synchronous))
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in
            for i in 0..<200 { try tx.put(paddedKey("base-", i), bytes("b\(i)"), in: tree) }
        }
        try store.checkpoint()
        let start = store.logEnd
        var ends: [UInt64] = []
        for c in 0..<commits {
            try store.write { tx throws in
                try tx.put(paddedKey("tail-", c), [UInt8](repeating: UInt8(c), count: c == 1 ? 900 : 30), in: tree)
                if c == 2 { try tx.delete(paddedKey("base-", 5), in: tree) }
            }
            ends.append(store.logEnd)
        }
        store.abandon()
        return (ends, start)
    }

    func expectState(_ store: Store, tailCommits n: Int) throws {
        try store.read { tx throws in
            let t = tx.tree(named: "t")!
            #expect(try tx.count(in: t) == 200 + n - (n >= 3 ? 1 : 0))
            for c in 0..<4 {
                let v = try tx.value(forKey: paddedKey("tail-", c), in: t)
                #expect((v != nil) == (c < n))
            }
            #expect((try tx.value(forKey: paddedKey("base-", 5), in: t) == nil) == (n >= 3))
        }
        _ = try store.check()
    }

    @Test func truncationAtEveryOffsetOfTheLastCommitsOpensAtThePreviousCommit() throws {
        let dir = TemporaryDirectory("truncate"); defer { dir.cleanup() }
        let (ends, start) = try makeTail(dir.sub("source"), commits: 4)
        let log = dir.sub("source") + "/log"
        var opened = 0
        var cut = Int(start)
        while cut <= Int(ends.last!) {
            let target = dir.sub("cut")
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
            try copyFile(log, target + "/log", length: cut)
            let store = try Store(directory: target)
            let complete = ends.filter { $0 <= UInt64(cut) }.count
            try expectState(store, tailCommits: complete)
            // The reopened store keeps working after the cut.
            try store.write { tx throws in try tx.put(bytes("after"), bytes("cut"), in: tx.tree(named: "t")!) }
            try store.close()
            opened += 1
            // Every offset near record boundaries, a sample elsewhere (the record at 900 bytes is long).
            let nearBoundary = ends.contains { abs(Int($0) - cut) < 48 } || abs(cut - Int(start)) < 48
            cut += nearBoundary ? 1 : 7
        }
        #expect(opened > 200)
    }

    @Test func aTornLastRecordIsIgnoredAndStaleRecordsOfACrashedSessionNeverComeBack() throws {
        let dir = TemporaryDirectory("torn"); defer { dir.cleanup() }
        let path = dir.sub("db")
        let (ends, _) = try makeTail(path, commits: 4)
        // Tear the last commit: zero its second half.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/log"))
        let lastStart = ends[2]
        let mid = lastStart + (ends[3] - lastStart) / 2
        try handle.seek(toOffset: mid)
        handle.write(Data(count: Int(ends[3] - mid)))
        try handle.close()
        var store = try Store(directory: path)
        try expectState(store, tailCommits: 3)
        // A new, shorter commit lands where the torn one was; the torn bytes after it must not
        // be read as part of the log after another crash.
        try store.write { tx throws in try tx.put(bytes("z"), [], in: tx.tree(named: "t")!) }
        store.abandon()
        store = try Store(directory: path)
        try store.read { tx throws in
            let t = tx.tree(named: "t")!
            #expect(try tx.value(forKey: bytes("z"), in: t) == [])
            #expect(try tx.value(forKey: paddedKey("tail-", 3), in: t) == nil)
        }
        try store.close()
    }

    @Test func damageBeforeADurableRecordIsReportedAsCorruption() throws {
        let dir = TemporaryDirectory("damage"); defer { dir.cleanup() }
        let path = dir.sub("db")
        let (ends, _) = try makeTail(path, commits: 4)
        // Flip one byte inside the second tail commit; the third and fourth prove it was durable.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/log"))
        let at = ends[0] + 20
        try handle.seek(toOffset: at)
        let old = handle.readData(ofLength: 1)[0]
        try handle.seek(toOffset: at)
        handle.write(Data([old ^ 0x40]))
        try handle.close()
        do {
            _ = try Store(directory: path)
            Issue.record("a damaged acknowledged commit opened silently")
        } catch {
            #expect(error.code == .corrupted)
            #expect(error.offset == ends[0])
        }
    }

    @Test func damagedNodesAreReportedWithTheirOffset() throws {
        let dir = TemporaryDirectory("node"); defer { dir.cleanup() }
        let path = dir.sub("db")
        var store = try Store(directory: path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in for i in 0..<3000 { try tx.put(paddedKey("k", i), bytes("v\(i)"), in: tree) } }
        try store.close()
        // Find a leaf: look up one key's path through the internal reader.
        store = try Store(directory: path)
        var leafOffset: UInt64 = 0
        try store.read { tx throws in
            guard case .disk(let rootOffset)? = tx.snapshot.trees[0].root else { Issue.record("root not on disk"); return }
            let root = try tx.context.reader.node(at: rootOffset)
            #expect(!root.isLeaf)
            leafOffset = root.child(root.count - 1)
        }
        try store.close()
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/log"))
        try handle.seek(toOffset: leafOffset + 40)
        let old = handle.readData(ofLength: 1)[0]
        try handle.seek(toOffset: leafOffset + 40)
        handle.write(Data([old ^ 1]))
        try handle.close()
        store = try Store(directory: path)
        #expect(throws: StorageError.self) { try store.check() }
        do {
            _ = try store.check()
        } catch let e as StorageError {
            #expect(e.code == .corrupted)
            #expect(e.offset == leafOffset)
            #expect(e.tree == "t")
        }
        // Keys elsewhere still read; a key in the damaged leaf reports corruption, never wrong data.
        try store.read { tx throws in
            let t = tx.tree(named: "t")!
            #expect(try tx.value(forKey: paddedKey("k", 0), in: t) == bytes("v0"))
            #expect(throws: StorageError.self) { _ = try tx.value(forKey: paddedKey("k", 2999), in: t) }
        }
        try store.close()
    }

    @Test func aDamagedHeaderSlotFallsBackToTheOtherAndTwoDamagedSlotsAreAnError() throws {
        let dir = TemporaryDirectory("header"); defer { dir.cleanup() }
        let path = dir.sub("db")
        var store = try Store(directory: path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in try tx.put(bytes("a"), bytes("1"), in: tree) }
        try store.close()
        let generation = try Store.readHeader(PosixFile(path: path + "/log")).generation
        let newest = Int(generation % 2)
        func damage(slot: Int) throws {
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path + "/log"))
            try handle.seek(toOffset: UInt64(slot * 4096 + 20))
            handle.write(Data([0xFF, 0xEE]))
            try handle.close()
        }
        try damage(slot: newest)
        // The older slot names an older checkpoint; the log after it replays to the same state.
        store = try Store(directory: path)
        try store.read { tx throws in #expect(try tx.value(forKey: bytes("a"), in: tx.tree(named: "t")!) == bytes("1")) }
        store.abandon()
        try damage(slot: 0)
        try damage(slot: 1)
        #expect { _ = try Store(directory: path) } throws: { ($0 as? StorageError)?.code == .corrupted }
    }

    /// A new log's first header goes into the slot its generation selects, so the first open's
    /// header (the next generation, in the other slot) can be torn by a power failure and the
    /// database still opens. It once went into slot 0, the slot generation 2 overwrites.
    @Test func aTornFirstHeaderWriteAfterCreationLeavesTheCreationHeader() throws {
        let dir = TemporaryDirectory("first-header"); defer { dir.cleanup() }
        let path = dir.sub("db")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let file = try PosixFile(path: path + "/log")
        try Store.initialize(file)
        let created = try Store.readHeader(file)
        #expect(created.generation == 1)
        // What the first open writes, torn: half of generation 2's slot, the rest as it was.
        var next = created
        next.generation += 1
        let whole = UnsafeMutableRawPointer.allocate(byteCount: Layout.headerSlotSize, alignment: 16)
        defer { whole.deallocate() }
        whole.initializeMemory(as: UInt8.self, repeating: 0, count: Layout.headerSlotSize)
        next.encode(into: whole)
        let slot = Int(next.generation % 2)
        try file.write(UnsafeRawBufferPointer(start: whole, count: 24), at: UInt64(slot * Layout.headerSlotSize))
        #expect(try Store.readHeader(file).generation == 1)
        file.close()
        let store = try Store(directory: path)
        try store.write { tx throws in _ = try tx.createTree(named: "t") }
        try store.close()
        #expect(try Store(directory: path).read { tx in tx.tree(named: "t") != nil })
    }
}
