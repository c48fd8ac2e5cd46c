import Foundation
import Testing
@testable import SetteeStorage

/// The platform seam (Sources/SetteeStorage/Platform, docs/platforms.md): that the build makes the
/// calls its environment asked for, and that each of the seam's services works through the calls
/// this build makes. `scripts/test` runs the whole suite twice, the second time built and run with
/// `SETTEE_PORTABLE_IO=1`: this suite then checks that the portable path is the one running.
@Suite struct PlatformTests {
    /// Whether this run asked for the portable build (the same variable as the build's).
    static let portableRequested = ProcessInfo.processInfo.environment["SETTEE_PORTABLE_IO"] == "1"

    /// The build answers for the calls its environment asked for, and what it promises follows:
    /// the portable path syncs everything on a durable write, counts its ordering syncs as
    /// Darwin's barriers, and leaves membarrier alone (readers fence).
    @Test func theBuildMakesTheCallsItsEnvironmentAskedFor() {
        let known = ["linux-glibc", "linux-musl", "android", "darwin", "portable-posix"]
        #expect(known.contains(StoragePlatform.family))
        #expect((StoragePlatform.family == "portable-posix") == Self.portableRequested)
        if Self.portableRequested {
            #expect(StoragePlatform.durableWriteSyncsEverything)
            #expect(StoragePlatform.orderingSyncIsBarrierOnly)
            #expect(!System.processBarriers)
            #expect(!ReaderTable.asymmetric)
        }
        if StoragePlatform.family == "linux-glibc" {
            #expect(!StoragePlatform.durableWriteSyncsEverything)
            #expect(!StoragePlatform.orderingSyncIsBarrierOnly)
            #expect(System.processBarriers)
        }
    }

    /// A file made through the seam takes plain writes, durable writes and both kinds of sync,
    /// reads back what was written, reports and changes its size; a second creation of the same
    /// name is refused with `EEXIST`, and a missing file opened for reading is nil.
    @Test func filesWriteSyncAndReadBack() throws {
        let dir = TemporaryDirectory("platform-file")
        defer { dir.cleanup() }
        let fs = PosixFileSystem.shared
        let path = dir.path + "/f"
        let file = try fs.createFile(path)
        defer { file.close() }
        let first = bytes("written, then synced for order; ")
        let second = bytes("written durably")
        try first.withUnsafeBytes { try file.write($0, at: 0) }
        try file.syncForOrdering()
        try second.withUnsafeBytes { try file.writeDurably($0, at: UInt64(first.count)) }
        try file.sync()
        #expect(try file.size() == UInt64(first.count + second.count))
        var back = [UInt8](repeating: 0, count: first.count + second.count + 10)
        let n = try back.withUnsafeMutableBytes { try file.read(into: $0, at: 0) }
        #expect(n == first.count + second.count)
        #expect(Array(back[..<n]) == first + second)
        try file.truncate(to: 7)
        #expect(try file.size() == 7)

        let again = #expect(throws: StorageError.self) { try fs.createFile(path) }
        #expect(again?.errno == EEXIST)
        #expect(try fs.openFileForReading(dir.path + "/missing") == nil)
        let attributes = try #require(try fs.attributes(of: path))
        #expect(attributes.size == 7 && !attributes.isDirectory && attributes.modifiedSeconds > 1_700_000_000)
        #expect(try fs.attributes(of: dir.path)?.isDirectory == true)
        #expect(try fs.contentsOfDirectory(dir.path) == ["f"])
    }

    /// The lock a deletion takes: nil where there is no lock file, `locked` while a store holds
    /// it, taken once the store is closed.
    @Test func anExistingLockIsTakenOnlyWhenFree() throws {
        let dir = TemporaryDirectory("platform-lock")
        defer { dir.cleanup() }
        #expect(try LockFile.takeExisting(inDirectory: dir.path) == nil)
        var store: Store? = try Store(directory: dir.path)
        let refused = #expect(throws: StorageError.self) { try LockFile.takeExisting(inDirectory: dir.path) }
        #expect(refused?.code == .locked)
        try store?.close()
        store = nil
        let lock = try #require(try LockFile.takeExisting(inDirectory: dir.path))
        lock.release()
    }

    /// LZ4's raw block format, as Formats/storage.md states it, read by this platform's codec: a
    /// block written by hand from the format (three literals, a match of 22 at distance 3, five
    /// closing literals) decodes to its 30 bytes; the codec's own blocks decode to their input;
    /// a block cut short, or one that decodes to another length, is damage.
    @Test func lz4RawBlocksDecodeOnThisPlatform() throws {
        let block: [UInt8] = [0x3F] + bytes("abc") + [0x03, 0x00, 0x03, 0x50] + bytes("bcabc")
        let expected = bytes(String(repeating: "abc", count: 10))
        #expect(decode(block, rawCount: 30) == expected)
        #expect(decode(Array(block.dropLast(3)), rawCount: 30) == nil)
        #expect(decode(block, rawCount: 31) == nil)

        let input = bytes(String(repeating: "settee stores documents; ", count: 200))
        let compressor = LZ4.Compressor()
        var out = [UInt8](repeating: 0, count: LZ4.bound(input.count))
        let n = try #require(input.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { compressor.compress(src, into: $0.baseAddress!, capacity: $0.count) }
        })
        #expect(n < input.count / 4)
        #expect(decode(Array(out[..<n]), rawCount: input.count) == input)
    }

    private func decode(_ block: [UInt8], rawCount: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: rawCount + 1)
        let ok = block.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { LZ4.decompress(src.baseAddress!, count: src.count, into: $0.baseAddress!, rawCount: rawCount) }
        }
        return ok ? Array(out[..<rawCount]) : nil
    }
}
