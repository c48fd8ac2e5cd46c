import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Hostile files: a damaged or truncated log must make opening or reading throw a SetteeError
/// (or recover), never crash.
@Suite struct CorruptionTests {
    /// A database's log bytes, and the properties of every revision it ever held with a body,
    /// by "id rev": what any read of a damaged copy must agree with.
    struct Pristine {
        var bytes: [UInt8]
        var revisions: [String: [String: JSONValue]]
    }

    /// Builds a database with documents of every kind, closes it and returns its log's bytes.
    static func pristine(in dir: TemporaryDirectory) throws -> Pristine {
        let db = try openDatabase(dir, "source")
        try db.inBatch {
            for i in 0 ..< 300 {
                try db.saveDocument(MutableDocument(id: String(format: "doc-%03d", i),
                                                    data: ["i": .int(Int64(i)), "text": .string(String(repeating: "lorem ipsum ", count: i % 40))]))
            }
        }
        for i in stride(from: 0, to: 300, by: 7) {
            let id = String(format: "doc-%03d", i)
            let m = try #require(try db.document(withID: id)).toMutable()
            m.setBool(true, forKey: "edited")
            try db.saveDocument(m)
        }
        for i in stride(from: 0, to: 300, by: 11) {
            try db.insertRevision(rev(String(format: "doc-%03d", i), "9-conflict", ["9-conflict"] + (1 ... 8).reversed().map { "\($0)-c" }, ["c": true]))
        }
        for i in stride(from: 5, to: 300, by: 13) {
            try db.deleteDocument(try #require(try db.document(withID: String(format: "doc-%03d", i))))
        }
        try db.saveLocalDocument(["last_seq": 99], withID: "checkpoint")
        var revisions: [String: [String: JSONValue]] = [:]
        let cursor = try db.allDocuments({ var o = AllDocumentsOptions(); o.includeDeleted = true; return o }())
        while let d = try cursor.next() {
            for r in try #require(try db.revisionTree(withID: d.id)).revisions {
                if let old = try db.document(withID: d.id, revisionID: r.revisionID) {
                    revisions[d.id + " " + r.revisionID] = old.toDictionary()
                }
            }
        }
        try db.close()
        let bytes = try #require(FileManager.default.contents(atPath: db.path + "/log"))
        return Pristine(bytes: [UInt8](bytes), revisions: revisions)
    }

    /// Every read of a damaged copy that does not throw returns what the undamaged database held
    /// for that revision, or says its body is unreadable: never a default in its place.
    static func expectAsStored(_ d: Document?, _ original: Pristine) {
        guard let d, d.bodyError == nil, let rev = d.revisionID else { return }
        guard let stored = original.revisions[d.id + " " + rev] else {
            if d.isDeleted && d.toDictionary().isEmpty { return }   // an older tombstone reads as {}
            Issue.record("read \(d.id) \(rev), which the undamaged database never held")
            return
        }
        #expect(d.toDictionary() == stored, "\(d.id) \(rev) reads otherwise than it was stored")
    }

    /// Opens `bytes` as a database's log and reads everything; every error must be a SetteeError.
    static func exercise(_ bytes: [UInt8], in dir: TemporaryDirectory, name: String, original: Pristine) -> String {
        let path = dir.path + "/" + name + ".settee"
        try? FileManager.default.removeItem(atPath: path)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: path + "/log", contents: Data(bytes))
        var outcome = "opened"
        do {
            let db = try openDatabase(dir, name)
            defer { try? db.close() }
            _ = try db.count
            _ = try db.lastSequence
            let cursor = try db.allDocuments({ var o = AllDocumentsOptions(); o.includeDeleted = true; return o }())
            var ids: [String] = []
            while let d = try cursor.next() {
                expectAsStored(d, original)
                ids.append(d.id)
            }
            for id in ids.prefix(400) {
                expectAsStored(try db.document(withID: id), original)
                if let tree = try db.revisionTree(withID: id) {
                    for r in tree.revisions { expectAsStored(try db.document(withID: id, revisionID: r.revisionID), original) }
                }
                for r in try db.leafRevisions(withID: id) {
                    // A leaf's properties throw when its body does not parse, so a read is a match.
                    if let stored = original.revisions[id + " " + r.revisionID] { #expect(try r.properties == stored) }
                }
                for d in try db.conflictingRevisions(withID: id) { expectAsStored(d, original) }
            }
            _ = try db.changes(since: 0)
            _ = try db.allDocuments({ var o = AllDocumentsOptions(); o.onlyConflicts = true; return o }()).readAll().map(\.id)
            _ = try db.localDocument(withID: "checkpoint")
            _ = try db.revsDiff(Dictionary(uniqueKeysWithValues: ids.prefix(50).map { ($0, ["1-x"]) }))
            try db.saveDocument(MutableDocument(id: "after-damage", data: ["ok": true]))
            outcome = "recovered (\(ids.count) documents)"
        } catch let e as SetteeError {
            outcome = "\(e.code)"
        } catch {
            Issue.record("not a SetteeError: \(error)")
            outcome = "other error"
        }
        return outcome
    }

    @Test func garbageOverTheMiddleOfTheLog() throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("seed \(seed)")
        var rng = SeededGenerator(seed: seed)
        let dir = try TemporaryDirectory()
        let pristine = try Self.pristine(in: dir)
        let original = pristine.bytes
        #expect(original.count > 4096)
        var outcomes: [String: Int] = [:]
        for round in 0 ..< 24 {
            var bytes = original
            let length = [16, 256, 4096, original.count / 4][round % 4]
            let start: Int
            if round < 4 {
                start = max(0, original.count / 2 - length / 2)   // exactly the middle
            } else {
                start = Int.random(in: 0 ..< max(1, original.count - length), using: &rng)
            }
            for i in start ..< min(bytes.count, start + length) { bytes[i] = UInt8.random(in: 0 ... 255, using: &rng) }
            let outcome = Self.exercise(bytes, in: dir, name: "garbage-\(round)", original: pristine)
            outcomes[outcome.hasPrefix("recovered") ? "recovered" : outcome, default: 0] += 1
        }
        print("garbage rounds: \(outcomes)")
        // A few bit flips too.
        for round in 0 ..< 8 {
            var bytes = original
            for _ in 0 ..< 4 { bytes[Int.random(in: 0 ..< bytes.count, using: &rng)] ^= UInt8(1) << UInt8.random(in: 0 ..< 8, using: &rng) }
            _ = Self.exercise(bytes, in: dir, name: "flip-\(round)", original: pristine)
        }
    }

    @Test func truncatedLog() throws {
        let dir = try TemporaryDirectory()
        let pristine = try Self.pristine(in: dir)
        let original = pristine.bytes
        var outcomes: [Int: String] = [:]
        for size in [0, 1, 3, 7, 16, 64, 100, 512, 4095, 4096, 4097, original.count / 3, original.count / 2, original.count - 1] {
            outcomes[size] = Self.exercise(Array(original.prefix(size)), in: dir, name: "truncated-\(size)", original: pristine)
        }
        print("truncation outcomes: \(outcomes.sorted { $0.key < $1.key })")
        // Truncated to a few bytes: there is no header left to trust.
        for size in [1, 3, 7, 16] {
            let outcome = outcomes[size] ?? "-"
            #expect(!outcome.hasPrefix("recovered") || outcome.hasPrefix("recovered (0 "), "\(size) bytes: \(outcome)")
        }
        // The untouched copy opens with everything.
        #expect(Self.exercise(original, in: dir, name: "intact", original: pristine) == "recovered (300 documents)")
    }

    @Test func damagedBlobDirectoryAndMissingFiles() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, "blobs")
        let doc = MutableDocument(id: "doc")
        doc.setBlob(Blob(contentType: "text/plain", data: Data("content".utf8)), forKey: "file")
        try db.saveDocument(doc)
        let files = try BlobTests.blobFiles(db)
        try FileManager.default.removeItem(atPath: db.path + "/blobs/" + files[0])
        let blob = try #require(try db.document(withID: "doc")?.blob(forKey: "file"))
        #expect(blob.content == nil)
        #expect(blob.contentStream == nil)
        #expect(try db.blob(withDigest: blob.digest) == nil)
        try db.close()
    }
}
