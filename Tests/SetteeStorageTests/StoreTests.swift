import Foundation
import SetteeTestSupport
import Testing
@testable import SetteeStorage

@Suite struct StoreTests {
    @Test func aSecondStoreOnTheSameDirectoryIsLocked() throws {
        let dir = TemporaryDirectory("lock"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path)
        #expect { _ = try Store(directory: dir.path) } throws: { ($0 as? StorageError)?.code == .locked }
        // Another process gets the same answer (flock(1) tries the lock without waiting).
        let other = try Subprocess.runBlocking("/usr/bin/flock", ["-n", dir.path + "/lock", "true"])
        #expect(other.termination != .exited(0), "\(other)")
        try store.close()
        let again = try Store(directory: dir.path)
        try again.close()
    }

    @Test func misuseGetsClearErrors() throws {
        let dir = TemporaryDirectory("misuse"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path)
        let other = TemporaryDirectory("misuse-other"); defer { other.cleanup() }
        let otherStore = try Store(directory: other.path)
        let foreign = try otherStore.write { try $0.createTree(named: "t") }
        let tree = try store.write { try $0.createTree(named: "t") }
        func code(_ body: () throws -> Void) -> StorageError.Code? {
            do { try body(); return nil } catch let e as StorageError { return e.code } catch { return nil }
        }
        #expect(code { try store.write { try $0.put(bytes("k"), [], in: foreign) } } == .noSuchTree)
        #expect(code { try store.write { try $0.put([UInt8](repeating: 1, count: 1025), [], in: tree) } } == .invalidKey)
        #expect(code { try store.write { _ in try store.write { _ in } } } == .invalidArgument)
        #expect(code { try store.write { _ = try $0.createTree(named: "") } } == .invalidArgument)
        #expect(code { try store.read { _ = try $0.withValue(at: ValueRef(rawValue: 12)) { $0.count } } } == .invalidValueRef)
        #expect(code { try store.read { _ = try $0.withValue(at: ValueRef(rawValue: 1 << 50)) { $0.count } } } == .invalidValueRef)
        var escaped: WriteTransaction?
        try store.write { escaped = $0 }
        #expect(code { try escaped!.put(bytes("k"), [], in: tree) } == .invalidArgument)
        // An aborted transaction leaves nothing, not even the tree it created.
        struct Stop: Error {}
        _ = try? store.write { tx throws in
            let t = try tx.createTree(named: "gone")
            try tx.put(bytes("x"), bytes("y"), in: t)
            throw Stop()
        }
        try store.read { tx throws in #expect(tx.tree(named: "gone") == nil) }
        try store.close()
        #expect(code { try store.write { _ in } } == .closed)
        try otherStore.close()
    }

    @Test func largeCompressibleValuesAreCompressedAndReadBackIntact() throws {
        let dir = TemporaryDirectory("lz4"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path)
        let tree = try store.write { try $0.createTree(named: "t") }
        let text = [UInt8](String(repeating: "{\"name\":\"settee\",\"tags\":[\"couch\",\"sofa\"]}", count: 400).utf8)
        var rng = SeededGenerator(seed: 5)
        let noise = (0..<16_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let before = store.logEnd
        try store.write { tx throws in try tx.put(bytes("text"), text, in: tree) }
        let textCost = store.logEnd - before
        #expect(textCost < UInt64(text.count / 4))
        let mid = store.logEnd
        try store.write { tx throws in try tx.put(bytes("noise"), noise, in: tree) }
        #expect(store.logEnd - mid > UInt64(noise.count))
        try store.read { tx throws in
            #expect(try tx.value(forKey: bytes("text"), in: tree) == text)
            #expect(try tx.value(forKey: bytes("noise"), in: tree) == noise)
        }
        try store.close()
        let again = try Store(directory: dir.path)
        try again.read { tx throws in #expect(try tx.value(forKey: bytes("text"), in: tx.tree(named: "t")!) == text) }
        try again.close()
    }

    /// Values a commit wrote count as verified for this process (Formats/storage.md): each one of
    /// 64 bytes or more, entry header included, by the block holding its last byte; smaller ones
    /// are never remembered. A reopened store has checked nothing yet.
    @Test func valuesACommitWroteCountAsVerified() throws {
        let dir = TemporaryDirectory("verified"); defer { dir.cleanup() }
        var store: Store? = try Store(directory: dir.path)
        var rng = SeededGenerator(seed: 64)
        let sizes = [10, 47, 48, 100, 5000]
        let values = sizes.map { n in (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        let refs = try store!.write { tx in try values.map { try tx.appendValue($0) } }
        func lastBlocksVerified(_ s: Store) -> [Bool] {
            let reader = s.reader(for: s.currentSnapshot)
            return zip(refs, sizes).map { ref, n in reader.isVerified(ref.rawValue + UInt64(16 + n) - 1) }
        }
        #expect(lastBlocksVerified(store!) == [false, false, true, true, true])
        try store!.close()
        store = try Store(directory: dir.path)
        #expect(lastBlocksVerified(store!) == [false, false, false, false, false])
        // Reading checks and then remembers them.
        let readBack = try store!.read { tx in try refs.map { ref in try tx.withValue(at: ref) { Array($0) } } }
        #expect(readBack == values)
        #expect(lastBlocksVerified(store!) == [false, false, true, true, true])
        try store!.close()
    }

    /// The stated bound (Formats/storage.md): in steady state one small put and its commit append
    /// one commit record, and checkpoints add at most the dirty path of each put, amortized.
    @Test func aSmallDurablePutAppendsWellUnder16KiB() throws {
        let dir = TemporaryDirectory("amplification"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration(checkpointInterval: 1 << 20, durability: .synchronous))
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in for i in 0..<50_000 { try tx.put(paddedKey("doc-", i), [UInt8](repeating: 3, count: 24), in: tree) } }
        try store.checkpoint()
        let start = store.logEnd
        var rng = SeededGenerator(seed: 9)
        let puts = 2000
        for _ in 0..<puts {
            let i = Int.random(in: 0..<50_000, using: &rng)
            try store.write { tx throws in try tx.put(paddedKey("doc-", i), [UInt8](repeating: 4, count: 24), in: tree) }
        }
        try store.checkpoint()
        let perPut = (store.logEnd - start) / UInt64(puts)
        print("bytes appended per small durable put, checkpoints included: \(perPut)")
        #expect(perPut < 16 * 1024)
        try store.close()
    }

    @Test func closeTrimsThePreallocatedTailAndReopeningReplaysNothing() throws {
        let dir = TemporaryDirectory("trim"); defer { dir.cleanup() }
        var store = try Store(directory: dir.path)
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in try tx.put(bytes("a"), bytes("b"), in: tree) }
        #expect(store.fileSize > store.logEnd)
        try store.close()
        let size = try FileManager.default.attributesOfItem(atPath: dir.path + "/log")[.size] as! UInt64
        store = try Store(directory: dir.path)
        #expect(store.logEnd == size)
        try store.read { tx throws in #expect(try tx.value(forKey: bytes("a"), in: tx.tree(named: "t")!) == bytes("b")) }
        try store.close()
    }

    @Test func aFileFromANewerFormatIsAVersionMismatch() throws {
        let dir = TemporaryDirectory("version"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path)
        try store.close()
        // Rewrite both slots as version 2 with valid checksums.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: dir.path + "/log"))
        for slot in 0..<2 {
            try handle.seek(toOffset: UInt64(slot * 4096))
            var data = handle.readData(ofLength: 64)
            guard data.count == 64, data.prefix(8) != Data(count: 8) else { continue }
            data[8] = 2
            let crc = data.withUnsafeBytes { crc32c(0, $0.baseAddress!, 60) }
            withUnsafeBytes(of: crc.littleEndian) { data.replaceSubrange(60..<64, with: $0) }
            try handle.seek(toOffset: UInt64(slot * 4096))
            handle.write(data)
        }
        try handle.close()
        #expect { _ = try Store(directory: dir.path) } throws: { ($0 as? StorageError)?.code == .versionMismatch }
    }
}
