import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// `inBatch`: one all-or-nothing transaction, reads that see its writes, one notification.
@Suite struct BatchTests {
    struct Abort: Error {}

    @Test func aThrowInsideABatchLeavesNothingSaved() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "before", data: ["v": 1]))
        let seq = try db.lastSequence
        #expect(throws: Abort.self) {
            try db.inBatch {
                for i in 0 ..< 10 { try db.saveDocument(MutableDocument(id: "doc-\(i)", data: ["i": .int(Int64(i))])) }
                try db.purgeDocument(withID: "before")
                try db.insertRevision(rev("remote", "1-a", ["1-a"], ["v": 1]))
                _ = try db.saveLocalDocument(["x": 1], withID: "cp")
                throw Abort()
            }
        }
        #expect(try db.lastSequence == seq)
        #expect(try db.count == 1)
        #expect(try db.document(withID: "before") != nil)
        #expect(try db.document(withID: "doc-0") == nil)
        #expect(try db.document(withID: "remote") == nil)
        #expect(try db.localDocument(withID: "cp") == nil)
        #expect(try db.changes(since: 0).map(\.documentID) == ["before"])

        // A library error inside a batch (a rejected save) aborts it too when it is not caught.
        #expect(throws: SetteeError.self) {
            try db.inBatch {
                try db.saveDocument(MutableDocument(id: "ok", data: ["v": 1]))
                try db.saveDocument(MutableDocument(id: "bad", data: ["_id": "x"]))
            }
        }
        #expect(try db.document(withID: "ok") == nil)
        // Caught inside, the batch goes on.
        try db.inBatch {
            try db.saveDocument(MutableDocument(id: "ok", data: ["v": 1]))
            #expect(setteeError { try db.saveDocument(MutableDocument(id: "bad", data: ["_id": "x"])) } != nil)
        }
        #expect(try db.document(withID: "ok") != nil)
        // The database stays usable after an aborted batch.
        try db.saveDocument(MutableDocument(id: "after", data: ["v": 1]))
        #expect(try db.count == 3)
    }

    @Test func readsInsideABatchSeeItsWrites() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let outside = Locked<[Bool]>([])
        try db.inBatch {
            let doc = MutableDocument(id: "a", data: ["v": 1])
            try db.saveDocument(doc)
            let inside = try db.document(withID: "a")
            #expect(inside?.int(forKey: "v") == 1)
            #expect(inside?.revisionID == doc.revisionID)
            doc.setInt(2, forKey: "v")
            try db.saveDocument(doc)
            #expect(try db.document(withID: "a")?.int(forKey: "v") == 2)
            #expect(try db.revisionTree(withID: "a")?.revisions.count == 2)
            #expect(try db.allDocuments().readAll().map(\.id) == ["a"])
            #expect(try db.changes(since: 0).map(\.documentID) == ["a"])
            #expect(try db.count == 1)
            #expect(try db.lastSequence == 2)
            // Another thread does not see the uncommitted batch.
            let done = DispatchSemaphore(value: 0)
            Thread {
                outside.withLock { $0.append((try? db.document(withID: "a")) == nil) }
                done.signal()
            }.start()
            #expect(wait(done))
            // A nested batch joins this one.
            try db.inBatch { try db.saveDocument(MutableDocument(id: "b", data: ["v": 1])) }
        }
        #expect(outside.value == [true])
        #expect(try db.document(withID: "a")?.int(forKey: "v") == 2)
        #expect(try db.document(withID: "b") != nil)
        #expect(try db.lastSequence == 3)
    }

    @Test func listenersHearOfABatchOnce() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let received = Locked<[[String]]>([])
        let signal = DispatchSemaphore(value: 0)
        let token = db.addChangeListener { change in
            received.withLock { $0.append(change.documentIDs) }
            signal.signal()
        }
        defer { token.remove() }
        try db.inBatch {
            for i in 0 ..< 5 { try db.saveDocument(MutableDocument(id: "doc-\(i)", data: ["i": .int(Int64(i))])) }
            try db.deleteDocument(try #require(try db.document(withID: "doc-2")))
        }
        #expect(wait(signal))
        try db.saveDocument(MutableDocument(id: "sentinel"))
        #expect(wait(signal))
        let all = received.value
        #expect(all.count == 2)
        #expect(all.first == ["doc-0", "doc-1", "doc-2", "doc-3", "doc-4", "doc-2"])
        #expect(all.last == ["sentinel"])
    }
}
