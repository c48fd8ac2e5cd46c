import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Tombstones that keep properties (seeds 003 and 004) and purging (DESIGN "Semantics decided" 5).
@Suite struct DeletionTests {
    @Test func tombstoneKeepsAProperty() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "job-1", data: ["worker_id": "w-7", "status": "done", "payload": [1, 2, 3]]))
        try db.saveDocument(MutableDocument(id: "job-2", data: ["worker_id": "w-8"]))
        let loaded = try #require(try db.document(withID: "job-1"))

        let tombstone = loaded.toMutable()
        tombstone.setData(["worker_id": loaded["worker_id"] ?? nil, "deleted_by": "cleanup"])
        tombstone.isDeletion = true
        try db.saveDocument(tombstone)
        let tombRev = try #require(tombstone.revisionID)
        #expect(tombRev.hasPrefix("2-"))

        #expect(try db.document(withID: "job-1") == nil)
        #expect(try db.count == 1)
        let stored = try #require(try db.document(withID: "job-1", revisionID: tombRev))
        #expect(stored.isDeleted)
        #expect(stored.toDictionary() == ["worker_id": "w-7", "deleted_by": "cleanup"])

        let leaves = try db.leafRevisions(withID: "job-1")
        #expect(leaves.count == 1)
        #expect(leaves.first?.isDeleted == true)
        #expect(try leaves.first?.properties["worker_id"] == "w-7")
        #expect(leaves.first?.history == [tombRev, loaded.revisionID!])

        let change = try #require(try db.changes(since: 0).first { $0.documentID == "job-1" })
        #expect(change.isDeleted)
        #expect(change.revisionID == tombRev)
        #expect(try db.revisionTree(withID: "job-1")?.currentRevisionID == tombRev)

        #expect(try db.allDocuments().readAll().map(\.id) == ["job-2"])
        var options = AllDocumentsOptions()
        options.includeDeleted = true
        let all = try db.allDocuments(options).readAll()
        #expect(all.map(\.id) == ["job-1", "job-2"])
        #expect(all[0].isDeleted)
        #expect(all[0].string(forKey: "worker_id") == "w-7")
        #expect(!all[1].isDeleted)

        // The plain delete keeps nothing.
        try db.deleteDocument(try #require(try db.document(withID: "job-2")))
        let plain = try #require(try db.leafRevisions(withID: "job-2").first)
        #expect(plain.isDeleted)
        #expect(try plain.properties.isEmpty)
        // A replicated tombstone with properties is stored the same way.
        try db.insertRevision(rev("job-3", "1-a", ["1-a"], ["worker_id": "w-9"]))
        try db.insertRevision(rev("job-3", "2-b", ["2-b", "1-a"], deleted: true, ["worker_id": "w-9"]))
        #expect(try db.document(withID: "job-3") == nil)
        #expect(try db.document(withID: "job-3", revisionID: "2-b")?.string(forKey: "worker_id") == "w-9")
        #expect(try db.count == 0)
    }

    @Test func purgeRemovesEveryTrace() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "a", data: ["v": 1]))
        let b = MutableDocument(id: "b", data: ["v": 1])
        try db.saveDocument(b)
        b.setInt(2, forKey: "v")
        try db.saveDocument(b)
        try db.saveDocument(MutableDocument(id: "c", data: ["v": 1]))
        try db.deleteDocument(try #require(try db.document(withID: "c")))
        #expect(try db.count == 2)
        let seq = try db.lastSequence

        try db.purgeDocument(withID: "b")
        #expect(try db.lastSequence == seq + 1)
        #expect(try db.document(withID: "b") == nil)
        #expect(try db.revisionTree(withID: "b") == nil)
        #expect(try db.document(withID: "b", revisionID: b.revisionID!) == nil)
        #expect(try db.leafRevisions(withID: "b").isEmpty)
        #expect(try db.changes(since: 0).map(\.documentID) == ["a", "c"])
        #expect(try db.count == 1)
        // Unknown to revsDiff again: a peer could bring it back.
        #expect(try db.revsDiff(["b": [b.revisionID!]])["b"]?.missing == [b.revisionID!])

        // Purging a tombstone does not change the count.
        try db.purgeDocument(try #require(try db.currentRevision(id: "c", key: Array("c".utf8))))
        #expect(try db.count == 1)
        #expect(try db.lastSequence == seq + 2)
        var options = AllDocumentsOptions()
        options.includeDeleted = true
        #expect(try db.allDocuments(options).readAll().map(\.id) == ["a"])
        #expect(try db.changes(since: 0).map(\.documentID) == ["a"])

        // Unknown IDs: notFound, and no sequence taken.
        #expect(setteeError { try db.purgeDocument(withID: "nobody") }?.code == .notFound)
        #expect(setteeError { try db.purgeDocument(withID: "b") }?.code == .notFound)
        #expect(try db.lastSequence == seq + 2)

        // A document loaded before the purge and saved after it starts again from scratch.
        let stale = MutableDocument(id: "a", data: ["v": 5])
        try db.saveDocument(stale)
        let loadedA = try #require(try db.document(withID: "a")).toMutable()
        try db.purgeDocument(withID: "a")
        loadedA.setInt(6, forKey: "v")
        #expect(try db.saveDocument(loadedA, concurrencyControl: .failOnConflict))
        #expect(loadedA.revisionID?.hasPrefix("1-") == true)
        #expect(try db.revisionTree(withID: "a")?.revisions.count == 1)
        let afterStale = try db.lastSequence

        // A purged ID can be created again from scratch.
        let again = MutableDocument(id: "b", data: ["v": 9])
        try db.saveDocument(again)
        #expect(again.revisionID?.hasPrefix("1-") == true)
        #expect(try db.lastSequence == afterStale + 1)
    }

    @Test func purgingAConflictedDocumentClearsTheConflictsIndex() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try db.insertRevisions([rev("d", "1-a", ["1-a"], ["v": 1]), rev("d", "2-b", ["2-b", "1-a"], ["v": 2]),
                                rev("d", "2-c", ["2-c", "1-a"], ["v": 3])])
        #expect(try conflictsIndexCount(db) == 1)
        try db.purgeDocument(withID: "d")
        #expect(try conflictsIndexCount(db) == 0)
        var options = AllDocumentsOptions()
        options.onlyConflicts = true
        #expect(try db.allDocuments(options).readAll().map(\.id).isEmpty)
        #expect(try db.count == 0)
    }
}
