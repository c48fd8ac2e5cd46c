import Foundation
import SetteeCrashKit
import SetteeStorage
import Testing
@_spi(Replication) @testable import Settee

/// The blob store's I/O through the file-system seam: every failing operation of an install is
/// reported and leaves nothing the store vouches for; a power failure at any of them leaves the
/// blob whole or absent, and whole once the install returned (Formats/documents.md, "Blobs").
@Suite struct BlobStoreTests {
    /// A database directory (its blob store's parent), resolved as `Database` resolves it.
    static func databaseDirectory(_ dir: TemporaryDirectory) throws -> String {
        let resolved = try #require(realpath(dir.path, nil))
        defer { free(resolved) }
        let path = String(cString: resolved) + "/db.settee"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func content(_ seed: UInt64, count: Int = 5_000) -> Data {
        var g = SplitMix(seed: seed)
        return Data((0..<count).map { _ in UInt8(truncatingIfNeeded: g.next()) })
    }

    static func names(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// Whether the file is there and its bytes hash to its name.
    static func isWhole(_ path: String) -> Bool {
        guard let bytes = FileManager.default.contents(atPath: path) else { return false }
        return SHA1.hex(SHA1.hash(Array(bytes))) + ".blob" == (path as NSString).lastPathComponent
    }

    /// An install's operations, after the blob store has opened: the temporary file's write (1)
    /// and sync (2), its rename into place (3), the directory's sync (4). Each failing one throws
    /// `io`, leaves no temporary file, and nothing the store vouches for; the blob directory's
    /// sync failing leaves the file in place, unvouched, until an install of the same content
    /// succeeds (all four operations again, not a touch).
    @Test(arguments: 1...4)
    func eachFailingOperationOfAnInstallIsReported(operation: Int) throws {
        let dir = try TemporaryDirectory()
        let base = try Self.databaseDirectory(dir)
        let plan = FaultPlan()
        let simulated = try SimulatedDirectory(path: base, plan: plan, seed: 7)
        defer { simulated.detach() }
        let store = try BlobStore(directory: base + "/blobs")
        #expect(store.fileSystem === simulated)
        let blob = Blob(contentType: "application/octet-stream", data: Self.content(1))
        let file = base + "/blobs/" + (try #require(BlobStore.fileName(forDigest: blob.digest)))
        if operation == 2 || operation == 4 {
            plan.failSyncAt = plan.operations + operation
        } else {
            plan.failWriteAt = plan.operations + operation
        }
        let error = #expect(throws: SetteeError.self) { try store.install(blob) }
        #expect(error?.code == .io, "\(String(describing: error))")
        #expect(plan.injectedFailure)
        #expect(simulated.failureInjected(under: "blobs"))
        #expect(Self.names(base + "/blobs/tmp").isEmpty)
        #expect(FileManager.default.fileExists(atPath: file) == (operation == 4))
        #expect(!store.has(digest: blob.digest))
        #expect(try !store.contains(digest: blob.digest))
        // Its path is withheld once the rename was tried (the name may be there, not durable).
        #expect((store.path(forDigest: blob.digest) == nil) == (operation >= 3))
        #expect(store.data(forDigest: blob.digest) == nil)
        #expect(store.stream(forDigest: blob.digest) == nil)

        let before = plan.operations
        try store.install(blob)
        #expect(plan.operations - before == 4)
        #expect(store.has(digest: blob.digest))
        #expect(store.data(forDigest: blob.digest) == blob.content)
        #expect(Self.isWhole(file))
        // Stored now: another install only marks it as just written.
        let again = plan.operations
        try store.install(blob)
        #expect(plan.operations - again == 1)
    }

    /// Marking a stored blob as just written (compaction spares blobs written since it began)
    /// can fail too: reported, and the blob, durable all along, stays vouched for.
    @Test func aFailedTouchIsReported() throws {
        let dir = try TemporaryDirectory()
        let base = try Self.databaseDirectory(dir)
        let plan = FaultPlan()
        let simulated = try SimulatedDirectory(path: base, plan: plan, seed: 8)
        defer { simulated.detach() }
        let store = try BlobStore(directory: base + "/blobs")
        let blob = Blob(contentType: "text/plain", data: Self.content(2))
        try store.install(blob)
        plan.failWriteAt = plan.operations + 1
        #expect((#expect(throws: SetteeError.self) { try store.install(blob) })?.code == .io)
        #expect(store.has(digest: blob.digest))
        #expect(store.data(forDigest: blob.digest) == blob.content)
    }

    /// The power fails at each operation of a fresh blob store's first install (the blob
    /// directory created in the same power cycle), or after it: on the disk the blob is whole or
    /// absent, and whole whenever the install returned. Seeded; the seed is printed.
    @Test func aBlobIsWholeOrAbsentAfterPowerLossAtAnyOperation() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        print("blob power loss: seed \(seed)")
        var outcomes = (returned: 0, whole: 0, absent: 0)
        for trial in 0..<60 {
            let dir = try TemporaryDirectory()
            let base = try Self.databaseDirectory(dir)
            let plan = FaultPlan()
            var r = SplitMix(seed: SplitMix.mix(seed, UInt64(trial)))
            let simulated = try SimulatedDirectory(path: base, plan: plan, seed: r.next())
            defer { simulated.detach() }
            // Opening is two operations (the database directory's sync, the blob directory's),
            // then the install's four.
            plan.crashAt = 1 + Int(r.next(below: 7))
            let blob = Blob(contentType: "application/octet-stream", data: Self.content(r.next(), count: 1 + Int(r.next(below: 9_000))))
            var returned = false
            if let store = try? BlobStore(directory: base + "/blobs") {
                returned = (try? store.install(blob)) != nil
            }
            #expect(returned == !plan.crashed, "seed \(seed), trial \(trial)")
            #expect(plan.operationsAfterCrash == 0, "seed \(seed), trial \(trial)")
            try simulated.powerLoss(random: &r)
            simulated.detach()
            let file = base + "/blobs/" + (try #require(BlobStore.fileName(forDigest: blob.digest)))
            let present = FileManager.default.fileExists(atPath: file)
            #expect(!present || Self.isWhole(file), "seed \(seed), trial \(trial): a torn blob file")
            if returned {
                outcomes.returned += 1
                #expect(present, "seed \(seed), trial \(trial): an acknowledged blob was lost")
            }
            if present { outcomes.whole += 1 } else { outcomes.absent += 1 }
            for name in Self.names(base + "/blobs") where name.hasSuffix(".blob") {
                #expect(Self.isWhole(base + "/blobs/" + name), "seed \(seed), trial \(trial): \(name)")
            }
        }
        #expect(outcomes.returned > 0 && outcomes.absent > 0)
    }

    /// Why the store must not take a file whose directory sync failed as stored: that name stays
    /// uncertain after a power failure even when a later sync of the directory succeeds (as after
    /// a failed `fsync` on Linux), so only installing the content again makes it durable.
    @Test func aNameWhoseDirectorySyncFailedStaysUncertainUntilInstalledAgain() throws {
        var lost = 0
        for trial in 0..<24 {
            let reinstall = trial % 2 == 1
            let dir = try TemporaryDirectory()
            let base = try Self.databaseDirectory(dir)
            let plan = FaultPlan()
            let simulated = try SimulatedDirectory(path: base, plan: plan, seed: UInt64(trial))
            defer { simulated.detach() }
            let store = try BlobStore(directory: base + "/blobs")
            let failed = Blob(contentType: "text/plain", data: Self.content(UInt64(100 + trial)))
            let other = Blob(contentType: "text/plain", data: Self.content(UInt64(200 + trial)))
            plan.failSyncAt = plan.operations + 4
            #expect(throws: SetteeError.self) { try store.install(failed) }
            try store.install(other)
            if reinstall { try store.install(failed) }
            var r = SplitMix(seed: UInt64(trial))
            try simulated.powerLoss(random: &r)
            simulated.detach()
            let path = { (b: Blob) in base + "/blobs/" + BlobStore.fileName(forDigest: b.digest)! }
            #expect(Self.isWhole(path(other)), "trial \(trial)")
            if reinstall {
                #expect(Self.isWhole(path(failed)), "trial \(trial)")
            } else if !FileManager.default.fileExists(atPath: path(failed)) {
                lost += 1
            } else {
                #expect(Self.isWhole(path(failed)), "trial \(trial)")
            }
        }
        #expect(lost > 0)
    }

    /// Temporary files a crash left are deleted when the store opens.
    @Test func temporaryFilesLeftByACrashAreDeletedOnOpen() throws {
        let dir = try TemporaryDirectory()
        let base = try Self.databaseDirectory(dir)
        _ = try BlobStore(directory: base + "/blobs")
        for name in ["a", "b"] {
            #expect(FileManager.default.createFile(atPath: base + "/blobs/tmp/" + name, contents: Data("torn".utf8)))
        }
        let store = try BlobStore(directory: base + "/blobs")
        #expect(store.fileSystem === PosixFileSystem.shared)
        #expect(Self.names(base + "/blobs/tmp").isEmpty)
    }

    /// Compaction's collection: blob files named in `keeping`, or written since the cutoff, stay.
    @Test func removeUnreferencedDeletesOnlyOldUnreferencedBlobs() throws {
        let dir = try TemporaryDirectory()
        let base = try Self.databaseDirectory(dir)
        let store = try BlobStore(directory: base + "/blobs")
        let blobs = (0..<3).map { Blob(contentType: "text/plain", data: Self.content(UInt64(10 + $0), count: 100)) }
        for b in blobs { try store.install(b) }
        let names = try blobs.map { try #require(BlobStore.fileName(forDigest: $0.digest)) }
        var old = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        for name in names.prefix(2) { #expect(utimensat(AT_FDCWD, base + "/blobs/" + name, &old, 0) == 0) }
        let deleted = try store.removeUnreferenced(keeping: [names[0]], modifiedBefore: Date(timeIntervalSinceNow: -3600))
        #expect(deleted == 1)
        #expect(try store.storedFileNames().sorted() == [names[0], names[2]].sorted())
    }

    /// Under a `Database`: a save whose blob's directory sync fails throws `io` and leaves no
    /// document; the database is not poisoned (the log was not touched), the blob is not vouched
    /// for until the same content is saved again, and that save keeps it after reopening.
    @Test func aSaveWhoseBlobFailsLeavesTheDatabaseWritable() throws {
        let dir = try TemporaryDirectory()
        let base = try Self.databaseDirectory(dir)
        let plan = FaultPlan()
        let simulated = try SimulatedDirectory(path: base, plan: plan, seed: 9)
        var config = DatabaseConfiguration(directory: (base as NSString).deletingLastPathComponent)
        config.fullSync = false
        config.autoCompaction = false
        let db = try Database(name: "db", config: config, openFile: { (path) throws(StorageError) in try simulated.open(path) })
        let blob = Blob(contentType: "image/png", data: Self.content(3))
        let doc = MutableDocument(id: "with-blob", data: ["title": "photo"])
        doc.setBlob(blob, forKey: "image")
        // The install before the write: the temporary file's write, sync, rename, directory sync.
        plan.failSyncAt = plan.operations + 4
        #expect((#expect(throws: SetteeError.self) { try db.saveDocument(doc) })?.code == .io)
        #expect(simulated.failureInjected(under: "blobs") && !simulated.failureInjected(outside: "blobs"))
        #expect(try db.document(withID: "with-blob") == nil)
        #expect(try db.blob(withDigest: blob.digest) == nil)
        try db.saveDocument(MutableDocument(id: "plain", data: ["n": 1]))
        // A document referencing the blob without carrying it is refused: the store does not vouch for it.
        let reference = MutableDocument(id: "reference")
        reference.setValue(.object(blob.properties), forKey: "image")
        #expect((#expect(throws: SetteeError.self) { try db.saveDocument(reference) })?.code == .notFound)
        try db.saveDocument(doc)
        #expect(try db.document(withID: "with-blob")?.blob(forKey: "image")?.content == blob.content)
        try db.close()
        simulated.detach()

        let reopened = try Database(name: "db", config: config)
        #expect(try reopened.document(withID: "with-blob")?.blob(forKey: "image")?.content == blob.content)
        #expect(try reopened.document(withID: "plain") != nil)
        try reopened.close()
    }
}
