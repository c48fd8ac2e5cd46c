import Foundation
import Testing
@_spi(Replication) @testable import Settee

@Suite struct DocumentBasicsTests {
    @Test func saveReadUpdateDelete() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(name: "basics", config: DatabaseConfiguration(directory: dir.path))
        let doc = MutableDocument(id: "task-1", data: ["title": "Buy milk", "done": false, "n": 3])
        try db.saveDocument(doc)
        let rev1 = try #require(doc.revisionID)
        #expect(rev1.hasPrefix("1-"))
        let read = try #require(try db.document(withID: "task-1"))
        #expect(read.string(forKey: "title") == "Buy milk")
        #expect(read.int(forKey: "n") == 3)
        #expect(read.bool(forKey: "done") == false)
        #expect(read.revisionID == rev1)
        #expect(try db.count == 1)

        let m = read.toMutable()
        m.setBool(true, forKey: "done")
        try db.saveDocument(m)
        #expect(m.revisionID?.hasPrefix("2-") == true)
        #expect(try db.document(withID: "task-1")?.bool(forKey: "done") == true)
        // The parent's body stays readable until compaction.
        #expect(try db.document(withID: "task-1", revisionID: rev1)?.bool(forKey: "done") == false)

        try db.deleteDocument(try #require(try db.document(withID: "task-1")))
        #expect(try db.document(withID: "task-1") == nil)
        #expect(try db.count == 0)
        let tree = try #require(try db.revisionTree(withID: "task-1"))
        #expect(tree.revisions.count == 3)
        #expect(tree.revisions.last?.isDeleted == true)
        try db.close()
        #expect(throws: SetteeError.self) { try db.document(withID: "task-1") }

        let again = try Database(name: "basics", config: DatabaseConfiguration(directory: dir.path))
        #expect(try again.revisionTree(withID: "task-1")?.revisions.count == 3)
        #expect(try again.lastSequence == 3)
        try again.delete()
        #expect(!Database.exists(withName: "basics", inDirectory: dir.path))
    }
}

extension DocumentBasicsTests {
    @Test func reservedTopLevelKeysAreRejected() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        for key in ["_id", "_rev", "_deleted", "_attachments", "_foo", "_"] {
            let doc = MutableDocument(id: "doc", data: ["ok": 1, .init(key): "x"])
            let error = setteeError { try db.saveDocument(doc) }
            #expect(error?.code == .invalidParameter, "key \(key)")
            #expect(error?.message.contains(key) == true)
        }
        #expect(try db.document(withID: "doc") == nil)
        #expect(try db.lastSequence == 0)

        // Nested keys starting with "_" belong to the application.
        let nested = MutableDocument(id: "doc", data: ["outer": ["_x": 1, "list": [["_y": true]]], "a_b": 2])
        try db.saveDocument(nested)
        let read = try #require(try db.document(withID: "doc"))
        #expect(read.dictionary(forKey: "outer")?["_x"] == 1)
        #expect(read.int(forKey: "a_b") == 2)

        // Replicated revisions, resolutions and updates are checked too.
        let outcome = try db.insertRevisions([rev("r", "1-a", ["1-a"], ["_rev": "1-a"])])
        #expect(outcome.count == 1)
        if case .rejected(let e) = outcome.first { #expect(e.code == .invalidParameter) } else { Issue.record("accepted \(outcome)") }
        let m = read.toMutable()
        m["_deleted"] = true
        #expect(setteeError { try db.saveDocument(m) }?.code == .invalidParameter)
        #expect(setteeError { try db.resolveConflict(withID: "doc", mergedProperties: ["_id": "x"]) }?.code == .invalidParameter)
        #expect(try db.document(withID: "doc")?.revisionID == read.revisionID)
    }

    @Test func invalidDocumentIDsAreRejected() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tooLong = String(repeating: "x", count: 1001)
        let multiByteTooLong = String(repeating: "é", count: 501)   // 1002 bytes, 501 characters
        for id in ["", "_design/", "_designs/x", "_local", "_local/x", "_", tooLong, multiByteTooLong] {
            #expect(setteeError { try db.saveDocument(MutableDocument(id: id, data: ["v": 1])) }?.code == .invalidParameter,
                    "id of \(id.utf8.count) bytes")
            #expect(setteeError { _ = try db.document(withID: id) }?.code == .invalidParameter)
            #expect(setteeError { _ = try db.revisionTree(withID: id) }?.code == .invalidParameter)
            #expect(setteeError { try db.purgeDocument(withID: id) }?.code == .invalidParameter)
            #expect(setteeError { try db.insertRevision(rev(id, "1-a")) }?.code == .invalidParameter)
        }
        #expect(try db.lastSequence == 0)
        // The limits themselves are fine: 1000 bytes, a "_" inside, any Unicode, and design
        // documents, which CouchDB stores and replicates like any other.
        for id in [String(repeating: "y", count: 1000), "a_b", "x/_y", "日本語 ID", "🙂", "_design/x"] {
            try db.saveDocument(MutableDocument(id: id, data: ["v": 1]))
            #expect(try db.document(withID: id)?.int(forKey: "v") == 1)
        }
        #expect(try db.count == 6)
        // Malformed revision IDs and histories.
        for bad in [rev("d", "a-1"), rev("d", "0-a"), rev("d", "01-a"), rev("d", "1-"),
                    rev("d", "2-b", ["2-b", "2-a"]), rev("d", "2-b", ["1-a"]), rev("d", "1-a b")] {
            #expect(setteeError { try db.insertRevision(bad) }?.code == .invalidParameter, "\(bad.revisionID) \(bad.history)")
        }
        #expect(try db.revisionTree(withID: "d") == nil)
        // A truncated history (a peer's revs_limit) is fine.
        #expect(try db.insertRevision(rev("d", "7-b", ["7-b", "6-a"])))
        // Bad database names.
        for name in ["", ".hidden", "a/b"] {
            #expect(setteeError { _ = try Database(name: name, config: DatabaseConfiguration(directory: dir.path)) }?.code
                    == .invalidParameter)
        }
    }
}

/// A directory removed when the value is released.
final class TemporaryDirectory {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "settee-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

extension DocumentBasicsTests {
    /// `_attachments`, a dictionary of blobs by name, is the one `_` key a document may hold
    /// (CouchDB's attachments, as the sync server stores them); its blobs are references like any.
    @Test func attachmentsAreTheOneReservedKeyADocumentMayHold() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let blob = Blob(contentType: "text/plain", data: Data("hello".utf8))
        try db.saveBlob(blob)
        try db.saveDocument(MutableDocument(id: "a", data: ["_attachments": ["note.txt": .object(blob.properties)], "t": 1]))
        let read = try #require(try db.document(withID: "a"))
        let stored = try #require(read.dictionary(forKey: "_attachments")?["note.txt"]?.objectValue)
        #expect(stored["digest"] == .string(blob.digest))
        #expect(try db.blob(withDigest: blob.digest)?.content == Data("hello".utf8))
        // A blob whose content is not in the database is refused, as anywhere else.
        var ghost = blob.properties
        ghost["digest"] = .string("sha1-" + String(repeating: "A", count: 27) + "=")
        #expect(setteeError { try db.saveDocument(MutableDocument(id: "b", data: ["_attachments": ["x": .object(ghost)]])) } != nil)
        // Not a dictionary: refused.
        #expect(setteeError { try db.saveDocument(MutableDocument(id: "c", data: ["_attachments": [1, 2]])) }?.code == .invalidParameter)
        // Replicated revisions may carry it too.
        let json = Array(#"{"_attachments":{"n":{"@type":"blob","content_type":"text/plain","digest":"\#(blob.digest)","length":5}}}"#.utf8)
        #expect(try db.insertRevision(ReplicatedRevision(documentID: "r", revisionID: "1-a", history: ["1-a"], isDeleted: false, json: json)))
        // Compaction keeps a blob referenced only from _attachments.
        _ = try db.compact()
        #expect(try db.blob(withDigest: blob.digest) != nil)
    }
}
