import Foundation
import Testing
import SetteeCrashKit
@_spi(Replication) @testable import Settee
import SetteeStorage

/// A database whose disk fills: writes are refused with ``SetteeError/Code/diskFull`` and keep
/// nothing, reads go on, and writes are taken again, without reopening, once space is freed;
/// everything acknowledged is there after a reopen. For every durability setting and write path
/// (single saves, batches, replicated revisions, local documents, checkpoints).
@Suite struct DiskFullTests {
    @Test(arguments: [true, false])
    func aFullDiskRefusesWritesAndHealsWhenSpaceIsBack(fullSync: Bool) throws {
        let dir = try TemporaryDirectory()
        var config = DatabaseConfiguration(directory: dir.path)
        config.fullSync = fullSync
        config.autoCompaction = false
        let disk = FullDisk(capacity: 1 << 40)
        var db = try Database(name: "db", config: config, openFile: { (path) throws(StorageError) in try disk.open(path) })
        try db.saveDocument(MutableDocument(id: "first", data: ["n": 0]))
        // A little room past what the file holds (its zeros written ahead included).
        disk.capacity = disk.used + (96 << 10)
        var acknowledged: [String: Int64] = [:]
        var refusal: SetteeError?
        // Bodies LZ4 cannot shrink: the disk fills as they are written.
        var random = SplitMix(seed: 7)
        func noise() -> String { String((0 ..< 2000).map { _ in Character(UnicodeScalar(UInt8(33 + random.next(below: 90)))) }) }
        for i in 1 ..< 10_000 {
            do {
                if i % 3 == 0 {
                    let batch = (0 ..< 5).map { MutableDocument(id: "b\(i)-\($0)", data: ["n": .int(Int64(i)), "pad": .string(noise())]) }
                    try db.saveDocuments(batch)
                    for d in batch { acknowledged[d.id] = Int64(i) }
                } else if i % 3 == 1 {
                    let rev = ReplicatedRevision(documentID: "r\(i)", revisionID: "1-\(String(i, radix: 16))", history: ["1-\(String(i, radix: 16))"],
                                                 isDeleted: false, properties: ["n": .int(Int64(i)), "pad": .string(noise())])
                    _ = try db.insertRevisions([rev])
                    acknowledged["r\(i)"] = Int64(i)
                } else {
                    try db.saveDocument(MutableDocument(id: "d\(i)", data: ["n": .int(Int64(i)), "pad": .string(noise())]))
                    acknowledged["d\(i)"] = Int64(i)
                }
            } catch let e as SetteeError {
                refusal = e
                break
            }
        }
        let e = try #require(refusal, "the disk never filled")
        #expect(e.code == .diskFull, "\(e)")
        #expect(disk.refusals > 0)
        // Full: a write that finds room in what the file already holds is made, one that needs
        // more is refused; nothing else goes wrong, and reads go on.
        var refused = 0
        for i in 0 ..< 60 {
            do {
                if i % 2 == 0 {
                    try db.saveDocument(MutableDocument(id: "more\(i)", data: ["n": .int(Int64(i)), "pad": .string(noise())]))
                    acknowledged["more\(i)"] = Int64(i)
                } else {
                    _ = try db.saveLocalDocument(["pad": .string(noise() + noise())], withID: "checkpoint")
                }
            } catch let e as SetteeError {
                #expect(e.code == .diskFull, "\(e)")
                refused += 1
            }
        }
        #expect(refused >= 50, "\(refused) of 60 refused")
        for (id, n) in acknowledged { #expect(try db.document(withID: id)?.int64(forKey: "n") == n, "\(id)") }
        #expect(try db.createQuery("SELECT count(*) FROM _").execute().allResults().first?.int(at: 0) == acknowledged.count + 1)
        // Space is back: writes go on in this very Database.
        disk.capacity = 1 << 40
        for i in 0 ..< 200 { try db.saveDocument(MutableDocument(id: "after\(i)", data: ["n": .int(Int64(i))])) }
        _ = try db.saveLocalDocument(["at": 1], withID: "checkpoint")
        #expect(try db.check().isHealthy)
        try db.close()
        db = try Database(name: "db", config: config)
        defer { try? db.close() }
        for (id, n) in acknowledged { #expect(try db.document(withID: id)?.int64(forKey: "n") == n, "\(id) after reopening") }
        #expect(try db.document(withID: "after199") != nil)
        #expect(try db.check().isHealthy)
    }
}
