import Foundation
import SetteeStorage
import Testing
@_spi(Replication) @testable import Settee

/// The stored form of revision trees (Formats/documents.md, "Revision tree"): version 2 packs
/// 40-digit lowercase hex digests into 20 bytes, keeps every other digest as text, and still
/// reads version 1.
@Suite struct RevTreeFormatTests {
    private static let hex40 = "0123456789abcdef0123456789abcdef01234567"

    private func tree(_ ids: [String], bodyRef: UInt64 = 77) -> RevTree {
        var t = RevTree()
        for (i, id) in ids.enumerated() {
            let last = i == ids.count - 1
            t.revs.append(RevTree.Rev(id: id, generation: UInt64(i + 1), parent: i - 1, deleted: false,
                                      hasAttachments: false, hasBody: last, bodyRef: last ? bodyRef : 0))
        }
        return t
    }

    private func decode(_ bytes: [UInt8]) throws -> RevTree {
        try bytes.withUnsafeBytes { b throws(SetteeError) in try RevTree(decoding: b) }
    }

    /// Revision IDs are part of the format: two devices (and two versions) making the same edit must
    /// compute the same ID. Expected digests from an independent SHA-1 over Formats/documents.md's bytes.
    @Test func localRevisionIDsHashTheDocumentedBytes() {
        #expect(RevisionID.make(parent: nil, generation: 1, deleted: true, canonicalBody: Array("{}".utf8))
                == "1-2187de4ecda0f0bdd6c60ada60e5ec8dca99d88e")
        #expect(RevisionID.make(parent: "1-abc", generation: 2, deleted: false, canonicalBody: Array(#"{"a":1}"#.utf8))
                == "2-df28ab28af5dc2fe82a777bafed8a3fffc9767ad")
        // A parent of 202 bytes: its length takes two varint bytes.
        #expect(RevisionID.make(parent: "3-" + String(repeating: "x", count: 200), generation: 4, deleted: true,
                                canonicalBody: Array(#"{"a":1}"#.utf8))
                == "4-1c21eec1bb561bdba0a2b42ec6395c8052451408")
        #expect(RevisionID.make(parent: "99-x", generation: 12_345_678_901, deleted: false, canonicalBody: [])
                .hasPrefix("12345678901-"))
    }

    @Test func lowercaseHexDigestsArePackedAndComeBackTheSame() throws {
        let ids = (1...5).map { "\($0)-" + Self.hex40 }
        let t = tree(ids)
        let bytes = t.encoded()
        #expect(bytes[0] == 2)
        // Per revision: generation 1, length 0, 20 digest bytes, parent 1, flags 1; the leaf's ref 8.
        #expect(bytes.count == 2 + 5 * 24 + 8)
        let back = try decode(bytes)
        #expect(back.revs.map(\.id) == ids)
        #expect(back.revs.map(\.parent) == [-1, 0, 1, 2, 3])
        #expect(back.revs.last?.bodyRef == 77)
        #expect(back.encoded() == bytes)
    }

    /// The bytes of a small tree, field by field as Formats/documents.md gives them.
    @Test func encodingIsByteExact() throws {
        var t = RevTree()
        t.revs.append(RevTree.Rev(id: "200-" + Self.hex40, generation: 200, parent: -1, deleted: false,
                                  hasAttachments: false, hasBody: false, bodyRef: 0))
        t.revs.append(RevTree.Rev(id: "201-abc", generation: 201, parent: 0, deleted: true,
                                  hasAttachments: true, hasBody: true, bodyRef: 0x0102_0304_0506_0708))
        let digest: [UInt8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23,
                               0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67]
        let expected: [UInt8] = [2, 2]
            + [0xC8, 0x01, 0] + digest + [0, 0]
            + [0xC9, 0x01, 3] + Array("abc".utf8) + [1, 7, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01]
        #expect(t.encoded() == expected)
        #expect(try decode(expected).encoded() == expected)
    }

    @Test func otherDigestsStayTextExactlyAsReceived() throws {
        let ids = ["1-" + Self.hex40.uppercased(),
                   "2-" + String(Self.hex40.prefix(32)),          // CouchDB's MD5 digests
                   "3-" + Self.hex40.dropLast() + "g",            // not hex
                   "4-" + Self.hex40 + "0",                        // 41 digits
                   "5-x"]
        let t = tree(ids)
        let back = try decode(t.encoded())
        #expect(back.revs.map(\.id) == ids)
        #expect(back.encoded() == t.encoded())
    }

    @Test func versionOneTreesAreStillRead() throws {
        // Version 1, two revisions with textual 40-digit digests, the second a leaf with a body.
        var v1: [UInt8] = [1, 2]
        v1 += [1, 40] + Array(Self.hex40.utf8) + [0, 0]
        v1 += [2, 40] + Array(Self.hex40.utf8) + [1, RevTree.flagBody] + [9, 0, 0, 0, 0, 0, 0, 0]
        let t = try decode(v1)
        #expect(t.revs.map(\.id) == ["1-" + Self.hex40, "2-" + Self.hex40])
        #expect(t.revs[1].bodyRef == 9)
        // Written again, it takes the current, packed form.
        let again = t.encoded()
        #expect(again[0] == RevTree.formatVersion)
        #expect(again.count < v1.count - 2 * 19)
        #expect(try decode(again).revs.map(\.id) == t.revs.map(\.id))
        // Compaction's byte-level rewrite leaves older trees to the full path, which re-encodes.
        let rewritten = try v1.withUnsafeBytes { b in
            try RevTreeRewriter.rewrite(b, maxDepth: 20, currentBody: 9) { ref, _ in ref + 1 }
        }
        #expect(rewritten == nil)
    }

    @Test func damagedCompactDigestsAreReportedNotRead() throws {
        let good = tree(["1-" + Self.hex40]).encoded()
        // Cut inside the packed digest, at every length.
        for n in 3..<(3 + RevTree.compactDigestBytes) {
            #expect(throws: SetteeError.self) { try decode(Array(good.prefix(n))) }
        }
        // A zero-length digest means "packed" only from version 2 on.
        var v1 = good
        v1[0] = 1
        #expect(throws: SetteeError.self) { try decode(v1) }
        var v9 = good
        v9[0] = 9
        #expect(throws: SetteeError.self) { try decode(v9) }
    }

    @Test func savedDocumentsStoreTheirTreesPacked() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        let doc = MutableDocument(id: "d", data: ["v": 1])
        try db.saveDocument(doc)
        for v in 2...5 {
            let m = try #require(try db.document(withID: "d")).toMutable()
            m.setInt(v, forKey: "v")
            try db.saveDocument(m)
        }
        func storedTree() throws -> [UInt8] {
            try db.core.store.read { tx in
                let meta = try #require(try db.core.meta(tx, id: Array("d".utf8)))
                return try tx.withValue(at: ValueRef(rawValue: meta.treeRef)) { Array($0) }
            }
        }
        // Until compaction every revision keeps its body (a ref of 8 bytes each).
        var bytes = try storedTree()
        #expect(bytes[0] == RevTree.formatVersion)
        #expect(bytes.count == 2 + 5 * 24 + 5 * 8)
        _ = try db.compact()
        bytes = try storedTree()
        #expect(bytes.count == 2 + 5 * 24 + 8)
        #expect(try db.revisionTree(withID: "d")?.revisions.count == 5)
    }

    /// Format 4: a document with one revision stores no tree (tree ref 0); every reader of the
    /// tree gets it from the metadata, an edit stores a real one, and compaction keeps ref 0.
    @Test func singleRevisionDocumentsStoreNoTree() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.saveDocument(MutableDocument(id: "plain", data: ["v": 1]))
        let blob = Blob(contentType: "text/plain", data: Data("implied".utf8))
        let withBlob = MutableDocument(id: "blob")
        withBlob.setBlob(blob, forKey: "b")
        try db.saveDocument(withBlob)
        let tombstone = MutableDocument(id: "tomb", data: ["kept": true])
        tombstone.isDeletion = true
        try db.saveDocument(tombstone)

        func treeRef(_ id: String) throws -> UInt64 {
            try db.core.store.read { tx in try #require(try db.core.meta(tx, id: Array(id.utf8))).treeRef }
        }
        func check(_ id: String, deleted: Bool) throws {
            #expect(try treeRef(id) == 0, "\(id)")
            let tree = try #require(try db.revisionTree(withID: id))
            #expect(tree.revisions.count == 1)
            let r = try #require(tree.revisions.first)
            #expect(r.revisionID == tree.currentRevisionID && r.generation == 1 && r.parentRevisionID == nil)
            #expect(r.isLeaf && r.hasBody && r.isDeleted == deleted && !tree.isConflicted)
            #expect(tree.leafRevisionIDs == [r.revisionID])
            let same = try #require(try db.document(withID: id, revisionID: r.revisionID))
            #expect(same.isDeleted == deleted)
            let replicated = try #require(try db.revision(withID: id, revisionID: r.revisionID))
            #expect(replicated.history == [r.revisionID])
        }
        for _ in 0..<2 {
            try check("plain", deleted: false)
            try check("blob", deleted: false)
            try check("tomb", deleted: true)
            #expect(try db.document(withID: "plain")?.int(forKey: "v") == 1)
            #expect(try db.document(withID: "blob")?.blob(forKey: "b")?.content == blob.content)
            let tombTree = try #require(try db.revisionTree(withID: "tomb"))
            #expect(try db.document(withID: "tomb", revisionID: tombTree.currentRevisionID)?.bool(forKey: "kept") == true)
            let current = try #require(try db.document(withID: "plain"))
            #expect(try db.conflictingRevisions(withID: "plain").map(\.revisionID) == [current.revisionID])
            // Compaction copies the body and keeps the blob it references.
            let report = try db.compact()
            #expect(report.blobsDeleted == 0)
        }

        // An edit stores the two-revision tree, and the first revision stays readable by ID.
        let first = try #require(try db.document(withID: "plain"))
        let firstRev = try #require(first.revisionID)
        let edit = first.toMutable()
        edit.setInt(2, forKey: "v")
        try db.saveDocument(edit)
        #expect(try treeRef("plain") != 0)
        let tree = try #require(try db.revisionTree(withID: "plain"))
        #expect(tree.revisions.map(\.revisionID) == [firstRev, try #require(edit.revisionID)])
        #expect(try db.document(withID: "plain", revisionID: firstRev)?.int(forKey: "v") == 1)

        // Damage in what the tree comes from is reported: a tree ref of 0 beside a malformed ID.
        let key = Array("bad".utf8)
        try db.core.store.write { tx in
            let meta = DocMeta(flags: [], sequence: 99, revisionID: "x", bodyRef: 0, treeRef: 0)
            try tx.put(key, meta.encoded(), in: db.core.trees.byID)
        }
        #expect(setteeError { _ = try db.revisionTree(withID: "bad") }?.code == .corrupted)
    }

    /// A document written before format 4 keeps its stored one-revision tree and reads the same.
    @Test func storedSingleRevisionTreesStillRead() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.saveDocument(MutableDocument(id: "old", data: ["v": 7]))
        let key = Array("old".utf8)
        // Rewrite the document as format 3 stored it: the same metadata with a tree value.
        try db.core.store.write { tx in
            var meta = try #require(try db.core.meta(tx, id: key))
            let tree = try RevTree(implying: meta)
            meta.treeRef = try tx.appendValue(tree.encoded()).rawValue
            try tx.put(key, meta.encoded(), in: db.core.trees.byID)
        }
        let rev = try #require(try db.document(withID: "old")?.revisionID)
        #expect(try db.revisionTree(withID: "old")?.revisions.map(\.revisionID) == [rev])
        _ = try db.compact()
        #expect(try db.document(withID: "old")?.int(forKey: "v") == 7)
        #expect(try db.revisionTree(withID: "old")?.revisions.map(\.revisionID) == [rev])
        let edit = try #require(try db.document(withID: "old")).toMutable()
        edit.setInt(8, forKey: "v")
        try db.saveDocument(edit)
        #expect(try db.revisionTree(withID: "old")?.revisions.map(\.revisionID) == [rev, try #require(edit.revisionID)])
    }

    /// Revision IDs are `<generation>-<opaque>`: a decimal generation from 1 without leading
    /// zeros, then printable ASCII (0x21...0x7E), every byte of it checked.
    @Test func revisionIDGrammarAtEveryByte() {
        #expect(RevisionID.generation(of: "1-a") == 1)
        #expect(RevisionID.generation(of: "42-" + Self.hex40) == 42)
        // From outside, generations stop at 2^53 − 1; stored trees are read up to 2^64 − 1.
        #expect(RevisionID.generation(of: "9007199254740991-x") == (1 << 53) - 1)
        #expect(RevisionID.generation(of: "9007199254740992-x") == nil)
        #expect(RevisionID.generation(of: "18446744073709551615-x") == nil)
        #expect(RevisionID.generation(of: "18446744073709551615-x", limit: .max) == UInt64.max)
        #expect(RevisionID.generation(of: "18446744073709551616-x", limit: .max) == nil)
        #expect(RevisionID.generation(of: "7-!~") == 7)
        for bad in ["", "1", "1-", "-a", "0-a", "01-a", "a-1", "1a-b", "1-a b", "1-\u{7F}", "1-\u{E9}"] {
            #expect(RevisionID.generation(of: bad) == nil, "\(bad)")
        }
        // One byte outside the range anywhere after the dash refuses the whole ID.
        let base = Array(("3-" + Self.hex40).utf8)
        for at in 2 ..< base.count {
            for byte: UInt8 in [0x00, 0x20, 0x7F, 0x80, 0xFF] {
                var id = base
                id[at] = byte
                let generation = id.withUnsafeBytes { RevisionID.generation(utf8: $0) }
                #expect(generation == nil, "byte \(byte) at \(at)")
            }
            for byte: UInt8 in [0x21, 0x7E] {
                var id = base
                id[at] = byte
                #expect(id.withUnsafeBytes { RevisionID.generation(utf8: $0) } == 3)
            }
        }
    }
}
