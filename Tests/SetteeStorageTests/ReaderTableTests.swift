import Foundation
import Synchronization
import Testing
@testable import SetteeStorage

/// How readers keep snapshots alive without reference counts (`ReaderTable`): a replaced snapshot
/// lives while a read that may see it runs, and is released after.
//
//  read pins epoch e ──────────────── unpin
//  writer:  publish S1 (retire S0 at e+1) · publish S2 · … · reclaim: S0 kept while e is pinned
@Suite struct ReaderTableTests {
    /// Commits enough for the writer to look for releasable snapshots more than once.
    private func commit(_ count: Int, in store: Store, _ tree: Tree, from first: Int = 0) throws {
        for i in first..<(first + count) {
            try store.write { tx in try tx.put(paddedKey("k", i), bytes("v\(i)"), in: tree) }
        }
    }

    /// A new store with one tree, `k` set to `value` when given; the caller removes `dir`.
    private func openStore(_ name: String, k value: String? = nil) throws -> (dir: TemporaryDirectory, store: Store, tree: Tree) {
        let dir = TemporaryDirectory(name)
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        if let value { try store.write { tx in try tx.put(bytes("k"), bytes(value), in: tree) } }
        return (dir, store, tree)
    }

    @Test func aReplacedSnapshotIsReleasedOnceNoReadRuns() throws {
        let (dir, store, tree) = try openStore("readers-release"); defer { dir.cleanup() }
        weak let old = store.currentSnapshot
        #expect(old != nil)
        try commit(Store.reclaimBatch * 2, in: store, tree)
        #expect(old == nil, "a snapshot no read pins is released within a batch of commits")
        try store.close()
    }

    @Test func aRunningReadKeepsItsSnapshotAndLaterOnesAlive() throws {
        let (dir, store, tree) = try openStore("readers-pin", k: "before"); defer { dir.cleanup() }
        weak var seen: Snapshot?
        try store.read { outer throws in
            seen = outer.snapshot
            // A nested read keeps the outer pin: the writer below must not free the outer snapshot.
            try store.read { inner throws in #expect(try inner.value(forKey: bytes("k"), in: tree) == bytes("before")) }
            let writer = Thread {
                try? self.commit(Store.reclaimBatch * 4, in: store, tree)
                try? store.write { tx in try tx.put(bytes("k"), bytes("after"), in: tree) }
            }
            writer.start()
            while !writer.isFinished { usleep(500) }
            #expect(seen != nil)
            #expect(try outer.value(forKey: bytes("k"), in: tree) == bytes("before"))
            #expect(try outer.count(in: tree) == 1)
        }
        try commit(Store.reclaimBatch * 2, in: store, tree, from: 1_000)
        #expect(seen == nil, "released once the read ended")
        try store.read { tx throws in #expect(try tx.value(forKey: bytes("k"), in: tree) == bytes("after")) }
        try store.close()
    }

    @Test func aThreadBeyondTheTablePinsThroughTheOverflowCount() throws {
        let (dir, store, tree) = try openStore("readers-overflow", k: "before"); defer { dir.cleanup() }
        weak var seen: Snapshot?
        try store.withCurrentSnapshotOverflowing { pinned throws in
            seen = pinned.takeUnretainedValue()
            #expect(store.readers.overflow.withLock { $0.count } == 1)
            try commit(Store.reclaimBatch * 4, in: store, tree)
            #expect(seen != nil)
            let tx = ReadTransaction(store: store, snapshot: pinned)
            #expect(try tx.value(forKey: bytes("k"), in: tree) == bytes("before"))
        }
        #expect(store.readers.overflow.withLock { $0.isEmpty })
        try commit(Store.reclaimBatch * 2, in: store, tree, from: 1_000)
        #expect(seen == nil)
        try store.close()
    }

    @Test func threadsThatExitGiveTheirReaderNumbersBack() throws {
        let (dir, store, tree) = try openStore("readers-threads", k: "v"); defer { dir.cleanup() }
        final class Context { let store: Store; let tree: Tree; var number = 0; var ok = false
            init(_ store: Store, _ tree: Tree) { self.store = store; self.tree = tree } }
        var numbers = Set<Int>()
        // One thread at a time, each joined: its exit returned its number before the next starts.
        for _ in 0..<300 {
            let context = Context(store, tree)
            var thread = pthread_t()
            let created = pthread_create(&thread, nil, { raw in
                let context = Unmanaged<Context>.fromOpaque(raw!).takeRetainedValue()
                context.number = ReaderThread.current(ReaderThread.key)
                context.ok = (try? context.store.read { tx in try tx.value(forKey: bytes("k"), in: context.tree) }) == bytes("v")
                return nil
            }, Unmanaged.passRetained(context).toOpaque())
            #expect(created == 0)
            pthread_join(thread, nil)
            #expect(context.ok)
            numbers.insert(context.number)
        }
        // Threads of suites running alongside take numbers too, but far fewer than 300.
        #expect(numbers.count < 50, "thread numbers are reused: \(numbers.count) distinct of 300 threads")
        try store.close()
    }
}
