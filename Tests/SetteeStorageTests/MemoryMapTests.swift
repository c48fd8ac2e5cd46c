import Foundation
import Testing
@testable import SetteeStorage

/// The log's memory map is reserved once and never moves, so the log must never grow past it.
/// `StoreConfiguration.mapReservation` makes the reservation small enough to reach.
@Suite struct MemoryMapTests {
    static let reservation = 3 << 20

    /// Bytes that do not compress, so the log grows by about their size.
    static func value(_ i: Int, size: Int) -> [UInt8] {
        var g = SeededGenerator(seed: UInt64(bitPattern: Int64(i)) &+ 0x9E37_79B9)
        return (0..<size).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }

    static func fileSize(_ path: String) throws -> UInt64 {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber).uint64Value
    }

    /// An append that would grow the log past the reservation is refused before anything is
    /// written (`io`, `EFBIG`), whether the file grows by zeros written ahead (4 KiB values) or
    /// by the append itself (200 KiB): the store is not poisoned (the refusal repeats, it is not
    /// `poisoned`), a snapshot taken before reads on, the file is never larger than the
    /// reservation (zeros written ahead stop there), and everything committed is there after
    /// reopening with the same reservation, and with the default one.
    @Test(arguments: [4 << 10, 200 << 10])
    func growthPastTheReservationIsRefused(valueSize: Int) throws {
        let dir = TemporaryDirectory("map-reservation")
        defer { dir.cleanup() }
        var config = smallConfiguration()
        config.mapReservation = Self.reservation
        let store = try Store(directory: dir.path, configuration: config)
        let tree = try store.write { tx in try tx.createTree(named: "t") }
        try store.write { tx in try tx.put(bytes("first"), Self.value(-1, size: valueSize), in: tree) }
        let early = store.snapshot()

        var committed = 0
        var refusal: StorageError?
        while refusal == nil && committed < 10_000 {
            do {
                try store.write { tx in try tx.put(paddedKey("k", committed), Self.value(committed, size: valueSize), in: tree) }
                committed += 1
                #expect(try Self.fileSize(dir.sub("log")) <= UInt64(Self.reservation))
            } catch let e as StorageError {
                refusal = e
            }
        }
        let e = try #require(refusal)
        #expect(e.code == .io)
        #expect(e.errno == EFBIG)
        #expect(e.operation == "grow the log")
        #expect(committed > 0)
        #expect(try Self.fileSize(dir.sub("log")) <= UInt64(Self.reservation))
        #expect(store.fileSize <= UInt64(Self.reservation))

        // Refused again, not poisoned; readers unaffected.
        do {
            try store.write { tx in try tx.put(bytes("again"), Self.value(0, size: valueSize), in: tree) }
            Issue.record("an append past the reservation was accepted")
        } catch let again as StorageError {
            #expect(again.code == .io && again.errno == EFBIG, "\(again)")
        }
        #expect(try early.read { tx in try tx.value(forKey: bytes("first"), in: tree) } == Self.value(-1, size: valueSize))
        #expect(try store.read { tx in try tx.value(forKey: paddedKey("k", committed - 1), in: tree) } == Self.value(committed - 1, size: valueSize))
        // Closing checkpoints, which may not fit any more either; the commits are in the log.
        do throws(StorageError) { try store.close() } catch { #expect(error.errno == EFBIG, "\(error)") }

        for reservation in [Self.reservation, nil] as [Int?] {
            var reopen = smallConfiguration()
            reopen.mapReservation = reservation
            let again = try Store(directory: dir.path, configuration: reopen)
            try again.read { tx in
                let t = try #require(try tx.tree(named: "t"))
                #expect(try tx.value(forKey: bytes("first"), in: t) == Self.value(-1, size: valueSize))
                for i in [0, committed / 2, committed - 1] {
                    #expect(try tx.value(forKey: paddedKey("k", i), in: t) == Self.value(i, size: valueSize))
                }
                #expect(try tx.value(forKey: paddedKey("k", committed), in: t) == nil)
            }
            _ = try again.check()
            again.abandon()
        }
    }

    /// A log already larger than the reservation is refused at open, with the same error.
    @Test func aLogLargerThanTheReservationIsRefusedAtOpen() throws {
        let dir = TemporaryDirectory("map-reservation-open")
        defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { tx in try tx.createTree(named: "t") }
        for i in 0..<40 { try store.write { tx in try tx.put(paddedKey("k", i), Self.value(i, size: 100 << 10), in: tree) } }
        try store.close()
        var config = smallConfiguration()
        config.mapReservation = 1 << 20
        let e = #expect(throws: StorageError.self) { _ = try Store(directory: dir.path, configuration: config) }
        #expect(e?.code == .io && e?.errno == EFBIG)
        // The lock was released: the default reservation opens it.
        try Store(directory: dir.path, configuration: smallConfiguration()).close()
    }
}
