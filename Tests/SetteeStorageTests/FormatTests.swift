import Foundation
import Testing
@testable import SetteeStorage

/// Golden files: databases written by format version 1 (Formats/storage.md), kept under
/// `Fixtures/v1/`. Every later version must still open them and read exactly this content.
/// `SETTEE_WRITE_GOLDEN=1 swift test --filter FormatTests` rewrites them (only when the format
/// version changes, into a new folder).
@Suite struct FormatTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/v1").path

    /// The content of the golden database, as a model.
    static func expected() -> (golden: [[UInt8]: [UInt8]], refs: [[UInt8]: [UInt8]]) {
        var golden: [[UInt8]: [UInt8]] = [:]
        var refs: [[UInt8]: [UInt8]] = [:]
        var rng = SeededGenerator(seed: 2026)
        for i in 0..<600 {
            let key = paddedKey("golden-", i, width: 4)
            if i % 50 == 0 {
                golden[key] = bytes(String(repeating: "compressible text \(i) ", count: 120))
            } else if i % 97 == 0 {
                golden[key] = (0..<2000).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                golden[key] = bytes("value-\(i)")
            }
            if i % 7 == 3 { golden[key] = nil }
        }
        for i in 0..<20 { refs[paddedKey("ref-", i, width: 2)] = bytes(String(repeating: "shared body \(i);", count: 40)) }
        return (golden, refs)
    }

    /// Writes the golden database: a checkpointed part and a log tail that must be replayed.
    static func writeGolden(to dir: String) throws {
        let (golden, refs) = expected()
        var config = StoreConfiguration()
        config.compressionThreshold = 256
        let store = try Store(directory: dir, configuration: config)
        let keys = golden.keys.sorted { $0.lexicographicallyPrecedes($1) }
        let g = try store.write { try $0.createTree(named: "golden") }
        try store.write { tx throws in
            for k in keys.prefix(400) { try tx.put(k, golden[k]!, in: g) }
            // Written then deleted: must not reappear.
            try tx.put(bytes("deleted-before-checkpoint"), bytes("x"), in: g)
        }
        try store.write { tx throws in _ = try tx.delete(bytes("deleted-before-checkpoint"), in: g) }
        try store.checkpoint()
        try store.write { tx throws in
            for k in keys.dropFirst(400) { try tx.put(k, golden[k]!, in: g) }
            let r = try tx.createTree(named: "refs")
            for (k, v) in refs.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
                let ref = try tx.appendValue(v)
                try tx.put(k, withUnsafeBytes(of: ref.rawValue.littleEndian) { [UInt8]($0) }, in: r)
            }
        }
        try store.write { tx throws in try tx.put(bytes("deleted-in-tail"), bytes("y"), in: g) }
        try store.write { tx throws in _ = try tx.delete(bytes("deleted-in-tail"), in: g) }
        let end = store.logEnd
        store.abandon()
        try FileHandle(forUpdating: URL(fileURLWithPath: dir + "/log")).truncate(atOffset: end)
        try? FileManager.default.removeItem(atPath: dir + "/lock")
    }

    static func verify(_ dir: String) throws {
        let (golden, refs) = expected()
        let store = try Store(directory: dir)
        defer { try? store.close() }
        try store.read { tx throws in
            #expect(tx.treeNames == ["golden", "refs"])
            let g = tx.tree(named: "golden")!
            let all = try tx.all(g)
            #expect(all.count == golden.count)
            for (k, v) in all { #expect(golden[k] == v) }
            let r = tx.tree(named: "refs")!
            let entries = try tx.all(r)
            #expect(entries.count == refs.count)
            for (k, v) in entries {
                let ref = ValueRef(rawValue: v.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) })
                #expect(try tx.withValue(at: ref) { [UInt8]($0) } == refs[k])
            }
        }
        let report = try store.check()
        #expect(report.entries == golden.count + refs.count)
    }

    @Test func goldenFilesOfVersion1OpenWithTheirContent() throws {
        if ProcessInfo.processInfo.environment["SETTEE_WRITE_GOLDEN"] != nil {
            try? FileManager.default.removeItem(atPath: Self.fixtures)
            try FileManager.default.createDirectory(atPath: Self.fixtures, withIntermediateDirectories: true)
            try Self.writeGolden(to: Self.fixtures + "/golden.settee")
        }
        let source = Self.fixtures + "/golden.settee/log"
        #expect(FileManager.default.fileExists(atPath: source), "golden file missing")
        // Opening writes a header, so work on a copy.
        let dir = TemporaryDirectory("golden"); defer { dir.cleanup() }
        try FileManager.default.createDirectory(atPath: dir.sub("db"), withIntermediateDirectories: true)
        try copyFile(source, dir.sub("db") + "/log")
        try Self.verify(dir.sub("db"))
        // And once more after this version has rewritten it (checkpoint on close).
        try Self.verify(dir.sub("db"))
    }

    @Test func headerLayoutConstantsMatchTheSpecification() {
        // Formats/storage.md, "Header slot" and "Record header".
        #expect(Layout.hMagic == 0 && Layout.hVersion == 8 && Layout.hGeneration == 16 && Layout.hSalt == 24)
        #expect(Layout.hEpoch == 32 && Layout.hCheckpoint == 40 && Layout.hReplayFrom == 48 && Layout.hNodeSize == 56)
        #expect(Layout.hChecksum == 60 && Layout.logStart == 8192)
        #expect(Layout.rChecksum == 0 && Layout.rType == 4 && Layout.rFlags == 5 && Layout.rLength == 8 && Layout.rEpoch == 12)
        #expect(Layout.valueHeaderSize == 16 && Layout.vStoredLength == 4 && Layout.vRawLength == 8 && Layout.vChecksum == 12)
        var magic = Layout.magic.littleEndian
        let text = withUnsafeBytes(of: &magic) { Array($0) }
        #expect(text == [0x53, 0x45, 0x54, 0x54, 0x45, 0x45, 0x00, 0x4C])
        var crcInput = Array("123456789".utf8)
        #expect(crc32c(0, &crcInput, 9) == 0xE306_9283)
    }

    /// The instruction path runs long inputs as three interleaved streams joined by shift tables;
    /// it must give the portable table's answer at every length around its 384-byte rounds, from
    /// any seed, and chain across any split.
    @Test func crc32cStreamsAgreeWithThePortablePath() {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("crc32cStreamsAgreeWithThePortablePath seed \(seed)")
        var random = SeededGenerator(seed: seed)
        let data = (0 ..< 5000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        data.withUnsafeBytes { buffer in
            let base = buffer.baseAddress!
            for length in Array(0 ... 800) + [1151, 1152, 1153, 4096, 4999] {
                let start = Int(random.next() % 7)
                let chain = UInt32(truncatingIfNeeded: random.next())
                let expected = CPU.portableCRC32C(chain, base.advanced(by: start), length)
                #expect(crc32c(chain, base + start, length) == expected, "length \(length) at \(start), seed \(seed)")
                let split = length == 0 ? 0 : Int(random.next() % UInt64(length + 1))
                let chained = crc32c(crc32c(chain, base + start, split), base + start + split, length - split)
                #expect(chained == expected, "length \(length) split at \(split), seed \(seed)")
            }
        }
    }
}
