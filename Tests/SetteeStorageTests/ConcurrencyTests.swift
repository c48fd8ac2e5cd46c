import Dispatch
import Foundation
import Synchronization
import Testing
@testable import SetteeStorage

/// Readers on snapshots while a writer commits.
//
//  Writer:  commit n (a = n, b = n, count grows)   commit n+1 ...   checkpoint ...
//  Readers: read a, b, count in one snapshot: always equal, never a partial commit
@Suite struct ConcurrencyTests {
    @Test func readersNeverSeeAPartialCommitAndNeverBlock() throws {
        let dir = TemporaryDirectory("concurrent"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration(checkpointInterval: 1 << 16))
        let tree = try store.write { try $0.createTree(named: "t") }
        let done = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        let started = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        // Dedicated threads, not the shared pool: with every suite running in parallel the
        // pool may not schedule the readers until the writer is done.
        for _ in 0..<2 {
            let reader = Thread {
                started.add(1, ordering: .relaxed)
                while !done.load(ordering: .acquiring) {
                    do {
                        try store.read { tx in
                            let a = try tx.value(forKey: bytes("a"), in: tree)
                            let b = try tx.value(forKey: bytes("b"), in: tree)
                            let n = try tx.count(in: tree)
                            let scanned = try tx.all(tree).count
                            if a != b || n != scanned { failures.add(1, ordering: .relaxed) }
                            if let a, n != 2 + Int(String(decoding: a, as: UTF8.self))! { failures.add(1, ordering: .relaxed) }
                        }
                        reads.add(1, ordering: .relaxed)
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                }
                finished.add(1, ordering: .releasing)
            }
            reader.start()
        }
        while started.load(ordering: .relaxed) < 2 { usleep(100) }
        // Keep committing until the readers have overlapped with many commits.
        var n = 0
        while n < 400 || (reads.load(ordering: .relaxed) < 300 && n < 200_000) {
            defer { n += 1 }
            try store.write { tx throws in
                try tx.put(bytes("a"), bytes("\(n + 1)"), in: tree)
                try tx.put(paddedKey("filler-", n), [UInt8](repeating: 1, count: 200), in: tree)
                try tx.put(bytes("b"), bytes("\(n + 1)"), in: tree)
            }
            if n % 100 == 99 { try store.checkpoint() }
        }
        done.store(true, ordering: .releasing)
        while finished.load(ordering: .acquiring) < 2 { usleep(100) }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(reads.load(ordering: .relaxed) > 0)
        try store.close()
    }

    @Test func aSnapshotKeepsItsViewWhileTheWriterMovesOn() throws {
        let dir = TemporaryDirectory("snapshot"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in try tx.put(bytes("k"), bytes("old"), in: tree) }
        try store.read { tx throws in
            // Another thread commits and checkpoints while this snapshot is open.
            let writer = Thread {
                try? store.write { tx throws in
                    try tx.put(bytes("k"), bytes("new"), in: tree)
                    for i in 0..<2000 { try tx.put(paddedKey("x", i), [9], in: tree) }
                }
                try? store.checkpoint()
            }
            writer.start()
            while !writer.isFinished { usleep(1000) }
            #expect(try tx.value(forKey: bytes("k"), in: tree) == bytes("old"))
            #expect(try tx.count(in: tree) == 1)
        }
        try store.read { tx throws in #expect(try tx.value(forKey: bytes("k"), in: tree) == bytes("new")) }
        try store.close()
    }
}
