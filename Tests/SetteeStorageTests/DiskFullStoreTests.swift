import Foundation
import Testing
import SetteeCrashKit
@testable import SetteeStorage

/// The engine on a disk that fills (the crash kit's ``FullDisk``): a commit or checkpoint that
/// needs space is refused with ``StorageError/Code/noSpace`` and keeps nothing, the store is not
/// poisoned, and commits go on once space is freed; every acknowledged commit is there after a
/// reopen and the file checks whole.
@Suite struct DiskFullStoreTests {
    @Test(arguments: [StoreConfiguration.Durability.synchronous, .none])
    func noSpaceRefusesTheWriteAndLeavesTheStoreUsable(durability: StoreConfiguration.Durability) throws {
        let dir = TemporaryDirectory("full"); defer { dir.cleanup() }
        var config = StoreConfiguration()
        config.durability = durability
        config.checkpointInterval = 256 << 10
        let disk = FullDisk(capacity: 1 << 40)
        var store = try Store(directory: dir.path, configuration: config, openFile: { (path) throws(StorageError) in try disk.open(path) })
        let tree = try store.write { try $0.createTree(named: "t") }
        disk.capacity = disk.used + (200 << 10)
        var random = SplitMix(seed: 11)
        func value() -> [UInt8] { (0 ..< 3000).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
        var acknowledged: [Int: [UInt8]] = [:]
        var refused = 0
        var other: [StorageError] = []
        for i in 0 ..< 4000 {
            let v = value()
            do {
                try store.write { tx in try tx.put(paddedKey("k", i), v, in: tree) }
                acknowledged[i] = v
            } catch let e as StorageError {
                if e.code == .noSpace { refused += 1 } else { other.append(e) }
                if refused >= 30 { break }
            }
        }
        #expect(refused >= 30 && other.isEmpty, "\(refused) refused; others: \(other)")
        // A checkpoint that needs space is refused the same way, and poisons nothing.
        #expect { try store.checkpoint() } throws: { ($0 as? StorageError)?.code == .noSpace }
        try store.read { tx in
            for (i, v) in acknowledged {
                let stored = try tx.value(forKey: paddedKey("k", i), in: tree)
                #expect(stored == v, "\(i)")
            }
        }
        disk.capacity = 1 << 40
        for i in 10_000 ..< 10_100 {
            let v = value()
            try store.write { tx in try tx.put(paddedKey("k", i), v, in: tree) }
            acknowledged[i] = v
        }
        try store.checkpoint()
        try store.close()
        store = try Store(directory: dir.path, configuration: config)
        defer { try? store.close() }
        try store.read { tx in
            let t = try #require(tx.tree(named: "t"))
            #expect(try tx.count(in: t) == acknowledged.count)
            for (i, v) in acknowledged {
                let stored = try tx.value(forKey: paddedKey("k", i), in: t)
                #expect(stored == v, "\(i) after reopening")
            }
        }
        #expect(try store.check().entries == acknowledged.count)
    }
}
