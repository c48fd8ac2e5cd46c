import Foundation
import Testing
@testable import Settee

/// `saveDocuments`: many documents prepared outside the write lock, then saved in one commit,
/// each exactly as `saveDocument(_:concurrencyControl:)` would save it.
@Suite struct BatchSaveTests {
    @Test func aBatchSavesWhatSingleSavesWouldInOneCommit() async throws {
        let dir = try TemporaryDirectory()
        let batch = try openDatabase(dir, "batch"), single = try openDatabase(dir, "single")
        for db in [batch, single] {
            try await db.saveDocument(MutableDocument(id: "old", data: ["v": 0]))
            try await db.saveDocument(MutableDocument(id: "gone", data: ["v": 0]))
            try await db.deleteDocument(try #require(try await db.document(withID: "gone")))
        }
        func documents(_ db: Database) throws -> [MutableDocument] {
            let edit = try #require(try db.document(withID: "old")).toMutable()
            edit.setInt(1, forKey: "v")
            let tombstone = MutableDocument(id: "tomb", data: ["kept": true])
            tombstone.isDeletion = true
            return (0 ..< 50).map { MutableDocument(id: "new-\($0)", data: ["n": .int(Int64($0))]) }
                + [edit, MutableDocument(id: "gone", data: ["back": true]), tombstone]
        }
        let events = batch.changeEvents()
        let before = try batch.lastSequence
        let outcomes = try await batch.saveDocuments(try documents(batch))
        #expect(outcomes == Array(repeating: true, count: 53))
        let singles = try documents(single)
        for d in singles { try await single.saveDocument(d) }
        // The same revisions, IDs included: the IDs prepared outside the lock are the ones a
        // save computes under it.
        for id in (0 ..< 50).map({ "new-\($0)" }) + ["old", "gone", "tomb"] {
            let a = try await batch.revisionTree(withID: id), b = try await single.revisionTree(withID: id)
            #expect(a?.revisions.map(\.revisionID) == b?.revisions.map(\.revisionID), "\(id)")
            let x = try await batch.document(withID: id), y = try await single.document(withID: id)
            #expect(x?.toDictionary() == y?.toDictionary())
        }
        // One commit: consecutive sequences, one change event with every document.
        #expect(try batch.lastSequence == before + 53)
        var it = events.makeAsyncIterator()
        #expect(try await it.next()?.changes.count == 53)
    }

    @Test func concurrencyControlAppliesToEachDocument() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "a", data: ["v": 0]))
        try db.saveDocument(MutableDocument(id: "b", data: ["v": 0]))
        let staleA = try #require(try db.document(withID: "a")).toMutable()
        let freshB = try #require(try db.document(withID: "b")).toMutable()
        try db.saveDocument(MutableDocument(id: "a", data: ["v": 9]))   // a changes meanwhile
        staleA.setInt(1, forKey: "v")
        freshB.setInt(1, forKey: "v")
        #expect(try db.saveDocuments([staleA, freshB], concurrencyControl: .failOnConflict) == [false, true])
        #expect(try db.document(withID: "a")?.int(forKey: "v") == 9)
        #expect(try db.document(withID: "b")?.int(forKey: "v") == 1)
        // Last write wins: the stale edit goes on top of the current revision, with the ID that
        // parent gives (not the one prepared for the revision it was read from).
        let current = try #require(try db.document(withID: "a")?.revisionID)
        #expect(try db.saveDocuments([staleA]) == [true])
        let tree = try #require(try db.revisionTree(withID: "a"))
        #expect(tree.revisions.first { $0.revisionID == staleA.revisionID }?.parentRevisionID == current)
        #expect(!tree.isConflicted)
    }

    @Test func anInvalidDocumentSavesNone() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let good = MutableDocument(id: "good", data: ["v": 1])
        #expect(setteeError { try db.saveDocuments([good, MutableDocument(id: "bad", data: ["_rev": "1-x"])]) }?.code == .invalidParameter)
        #expect(setteeError { try db.saveDocuments([good, MutableDocument(id: "_design", data: [:])]) }?.code == .invalidParameter)
        db.addValidation(named: "no-evil") { new, _ in
            if new.bool(forKey: "evil") { throw SetteeError.forbidden("evil") }
        }
        #expect(setteeError { try db.saveDocuments([good, MutableDocument(id: "evil", data: ["evil": true])]) }?.code == .forbidden)
        #expect(try db.count == 0)
        #expect(good.revisionID == nil)
        // Inside a batch, it joins the batch's transaction.
        try db.inBatch {
            try db.saveDocuments([good])
            try db.saveDocument(MutableDocument(id: "other"))
        }
        #expect(try db.count == 2)
    }

    @Test func batchesInFlightFromManyTasksAllLand() async throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("seed \(seed) (BatchSaveTests.batchesInFlightFromManyTasksAllLand)")
        var rng = SeededGenerator(seed: seed)
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let sizes = (0 ..< 12).map { _ in Int.random(in: 1 ... 300, using: &rng) }
        try await withThrowingTaskGroup(of: [Bool].self) { group in
            for (b, size) in sizes.enumerated() {
                group.addTask {
                    try await db.saveDocuments((0 ..< size).map { MutableDocument(id: "b\(b)-\($0)", data: ["b": .int(Int64(b))]) })
                }
            }
            for try await outcomes in group { #expect(outcomes.allSatisfy { $0 }) }
        }
        #expect(try db.count == UInt64(sizes.reduce(0, +)))
        #expect(try db.lastSequence == UInt64(sizes.reduce(0, +)))
        #expect(try await db.document(withID: "b11-0")?.int(forKey: "b") == 11)
    }
}
