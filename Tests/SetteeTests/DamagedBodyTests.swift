import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// A stored body that passes its checksum and still does not parse (a file written by something
/// other than Settee): it is reported, never read as an empty document, and never overwritten by
/// an edit of nothing.
@Suite struct DamagedBodyTests {
    static let damaged = Array(#"{"title":"draft","n":1,,}"#.utf8)

    /// Saves `doc` twice, then points its current revision at `damaged`; returns that revision.
    func databaseWithDamagedBody(_ dir: TemporaryDirectory) throws -> (Database, String) {
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["title": "draft", "n": 0]))
        let m = try #require(try db.document(withID: "doc")).toMutable()
        m.setInt(1, forKey: "n")
        try db.saveDocument(m)
        let rev = try #require(m.revisionID)
        try db.core.write { c in
            let key = Array("doc".utf8)
            let old = try #require(try c.meta(key))
            var tree = try db.core.tree(c.tx, old)
            let bodyRef = try c.tx.appendValue(Self.damaged).rawValue
            let i = try #require(tree.index(of: rev))
            tree.revs[i].bodyRef = bodyRef
            let treeRef = try c.tx.appendValue(tree.encoded()).rawValue
            let meta = DocMeta(flags: old.flags, sequence: old.sequence, revisionID: old.revisionID, bodyRef: bodyRef, treeRef: treeRef)
            try c.tx.put(key, meta.encoded(), in: c.trees.byID)
        }
        return (db, rev)
    }

    struct Draft: Codable { var title: String; var n: Int }

    @Test func aBodyThatDoesNotParseIsReportedNotReadAsEmpty() throws {
        let dir = try TemporaryDirectory()
        let (db, rev) = try databaseWithDamagedBody(dir)
        let doc = try #require(try db.document(withID: "doc"))
        #expect(doc.revisionID == rev)
        #expect(doc.bodyError?.code == .corrupted)
        #expect(doc.toDictionary().isEmpty)
        #expect(throws: SetteeError.self) { _ = try doc.decode(Draft.self) }
        #expect((try? doc.decode(Draft.self)) == nil)
        // The document-layer check names it.
        let report = try db.check()
        #expect(report.problems.contains { $0.documentID == "doc" }, "\(report.problems)")
        // An older revision that parses is unaffected.
        let older = try #require(try db.revisionTree(withID: "doc")).revisions.first { $0.revisionID != rev }
        if let older, let first = try db.document(withID: "doc", revisionID: older.revisionID) {
            #expect(first.bodyError == nil)
        }
    }

    @Test func anEditOfAnUnreadableBodyIsRefusedUntilEveryPropertyIsReplaced() throws {
        let dir = try TemporaryDirectory()
        let (db, rev) = try databaseWithDamagedBody(dir)
        let edit = try #require(try db.document(withID: "doc")).toMutable()
        edit.setString("final", forKey: "title")
        let error = setteeError { try db.saveDocument(edit) }
        #expect(error?.code == .corrupted)
        #expect(setteeError { _ = try db.saveDocument(edit, concurrencyControl: .lastWriteWins) }?.code == .corrupted)
        #expect(setteeError { _ = try db.saveDocument(edit) { _, _ in true } }?.code == .corrupted)
        // A copy of the copy is refused too.
        #expect(setteeError { try db.saveDocument(edit.toMutable()) }?.code == .corrupted)
        // Nothing was written: the stored bytes are the damaged ones, still the current revision.
        #expect(try db.document(withID: "doc")?.revisionID == rev)
        let stored = try db.core.read { tx in
            try db.core.body(tx, ref: try #require(try db.core.meta(tx, id: Array("doc".utf8))).bodyRef)
        }
        #expect(stored == Self.damaged)
        // Replacing every property is a deliberate overwrite: it saves, and the damaged revision
        // stays in the tree as its parent, its bytes kept until compaction.
        edit.setData(["title": "rewritten"])
        try db.saveDocument(edit)
        #expect(try db.document(withID: "doc")?.toDictionary() == ["title": "rewritten"])
        #expect(try db.revisionTree(withID: "doc")?.revisions.first { $0.revisionID == rev }.map { _ in true } == true)
        #expect(try db.document(withID: "doc", revisionID: rev)?.bodyError?.code == .corrupted)
    }

    @Test func aConflictResolutionRefusesAnUnreadableResult() async throws {
        let dir = try TemporaryDirectory()
        let (db, _) = try databaseWithDamagedBody(dir)
        let doc = try #require(try await db.document(withID: "doc"))
        await #expect(throws: SetteeError.self) { _ = try await db.propertiesForResolution(doc) }
        await #expect(throws: SetteeError.self) { _ = try await db.propertiesForResolution(doc.toMutable()) }
        let fine = MutableDocument(id: "doc", data: ["merged": true])
        #expect(try await db.propertiesForResolution(fine) == ["merged": true])
    }
}

/// A body damaged on disk fails its checksum: the read that fetches it throws `corrupted`, the
/// other documents read as they were stored, and nothing is read as a default.
@Suite struct DamagedOnDiskTests {
    @Test func aFlippedByteInABodyFailsTheReadOfThatDocumentOnly() throws {
        let dir = try TemporaryDirectory()
        let marker = "zq7-unique-marker-81kx"
        do {
            let db = try openDatabase(dir)
            try db.saveDocument(MutableDocument(id: "victim", data: ["text": .string(marker)]))
            try db.saveDocument(MutableDocument(id: "bystander", data: ["text": "fine"]))
            try db.close()
        }
        let path = dir.path + "/db.settee/log"
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        let needle = Array(marker.utf8)
        let at = try #require((0 ... bytes.count - needle.count).first { bytes[$0 ..< $0 + needle.count].elementsEqual(needle) },
                              "the body is stored as written (uncompressed at this size)")
        bytes[at + 3] ^= 0x20
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let db = try openDatabase(dir)
        #expect(setteeError { _ = try db.document(withID: "victim") }?.code == .corrupted)
        #expect(try db.document(withID: "bystander")?.toDictionary() == ["text": "fine"])
        let report = try db.check()
        #expect(report.problems.contains { $0.documentID == "victim" }, "\(report.problems)")
    }
}
