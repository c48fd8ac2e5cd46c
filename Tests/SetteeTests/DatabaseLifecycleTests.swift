import Foundation
import Testing
@_spi(Replication) @testable import Settee
import SetteeStorage

/// Opening, sharing, closing, reopening and deleting databases.
@Suite struct DatabaseLifecycleTests {
    @Test func twoObjectsOnTheSameDatabaseShareData() throws {
        let dir = try TemporaryDirectory()
        let one = try openDatabase(dir, "shared")
        let two = try openDatabase(dir, "shared")
        #expect(one.uuid == two.uuid)
        #expect(one.path == two.path)

        let heard = Locked<[String]>([])
        let signal = DispatchSemaphore(value: 0)
        let token = two.addChangeListener { change in
            heard.withLock { $0 += change.documentIDs }
            signal.signal()
        }
        try one.saveDocument(MutableDocument(id: "from-one", data: ["v": 1]))
        #expect(try two.document(withID: "from-one")?.int(forKey: "v") == 1)
        #expect(wait(signal))
        #expect(heard.value == ["from-one"])
        token.remove()

        let m = try #require(try two.document(withID: "from-one")).toMutable()
        m.setInt(2, forKey: "v")
        try two.saveDocument(m)
        #expect(try one.document(withID: "from-one")?.int(forKey: "v") == 2)
        #expect(try one.lastSequence == 2)
        #expect(try two.count == 1)
        // Validations are shared too.
        one.addValidation(named: "no-x") { new, _ in
            if new.contains(key: "x") { throw SetteeError.forbidden("no x") }
        }
        #expect(setteeError { try two.saveDocument(MutableDocument(id: "x", data: ["x": 1])) }?.code == .forbidden)

        // Deleting while open is refused; closing one keeps the other working.
        #expect(setteeError { try Database.delete(withName: "shared", inDirectory: dir.path) }?.code == .busy)
        #expect(setteeError { try one.delete() }?.code == .busy)   // `one` is closed by the attempt, `two` is open
        #expect(setteeError { _ = try one.document(withID: "from-one") }?.code == .notOpen)
        #expect(try two.document(withID: "from-one") != nil)
        try two.close()
        try two.close()   // closing twice does nothing
        #expect(setteeError { try two.saveDocument(MutableDocument(id: "late")) }?.code == .notOpen)
        // A closed database has no count or sequence to read: it throws rather than read 0.
        #expect(setteeError { _ = try two.count }?.code == .notOpen)
        #expect(setteeError { _ = try two.lastSequence }?.code == .notOpen)
        #expect(Database.exists(withName: "shared", inDirectory: dir.path))
        try Database.delete(withName: "shared", inDirectory: dir.path)
        #expect(!Database.exists(withName: "shared", inDirectory: dir.path))
        try Database.delete(withName: "shared", inDirectory: dir.path)   // nothing there: fine
    }

    /// Deleting a database whose lock another process holds (an `flock` through another open
    /// file, as `settee serve` or another app would hold it) is refused with `busy` and deletes
    /// nothing; once the lock is let go, the deletion goes through.
    @Test func deletingADatabaseLockedElsewhereIsRefused() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, "held")
        try db.saveDocument(MutableDocument(id: "kept", data: ["v": 1]))
        let path = db.path
        try db.close()
        let held = try #require(try LockFile.takeExisting(inDirectory: path))
        #expect(setteeError { try Database.delete(withName: "held", inDirectory: dir.path) }?.code == .busy)
        #expect(Database.exists(withName: "held", inDirectory: dir.path))
        held.release()
        try Database.delete(withName: "held", inDirectory: dir.path)
        #expect(!Database.exists(withName: "held", inDirectory: dir.path))
    }

    /// A second open in the same process shares the first one's store, so a different
    /// configuration could not take effect: it is refused, naming the settings, rather than
    /// silently ignored. The same configuration (the directory spelled another way) is fine.
    @Test func secondOpenWithAnotherConfigurationIsAnError() throws {
        let dir = try TemporaryDirectory()
        let first = try openDatabase(dir, "shared", maxRevTreeDepth: 50)
        let e = setteeError { _ = try openDatabase(dir, "shared", maxRevTreeDepth: 20) }
        #expect(e?.code == .invalidParameter)
        #expect(e?.message.contains("maxRevTreeDepth 50, not 20") == true)
        #expect(setteeError { _ = try openDatabase(dir, "shared", fullSync: true, maxRevTreeDepth: 50) }?.message.contains("fullSync") == true)
        var same = first.config
        same.directory = dir.path + "/."
        let second = try Database(name: "shared", config: same)
        try first.saveDocument(MutableDocument(id: "d"))
        #expect(try second.count == 1)
        try first.close()
        try second.close()
        // Once every object is closed, another configuration opens it.
        let third = try openDatabase(dir, "shared", maxRevTreeDepth: 20)
        #expect(third.config.maxRevTreeDepth == 20)
        #expect(try third.count == 1)
    }

    /// A depth set on the database is stored with it: it prunes the next saves, outlasts a
    /// compaction and a reopen with another configured depth, and wins over that one.
    @Test func aRevisionTreeDepthSetOnTheDatabaseIsKept() throws {
        let dir = try TemporaryDirectory()
        do {
            let db = try openDatabase(dir, "limited", maxRevTreeDepth: 20)
            #expect(try db.maxRevTreeDepth == 20)
            for bad in [0, -3, 1_000_001] {
                #expect(setteeError { try db.setMaxRevTreeDepth(bad) }?.code == .invalidParameter)
            }
            try db.setMaxRevTreeDepth(5)
            #expect(try db.maxRevTreeDepth == 5)
            let doc = MutableDocument(id: "d")
            for i in 0 ..< 12 {
                doc.setValue(.int(Int64(i)), forKey: "n")
                try db.saveDocument(doc)
            }
            #expect(try db.revisionTree(withID: "d")?.revisions.count == 5)
            _ = try db.compact()
            #expect(try db.maxRevTreeDepth == 5)
            try db.close()
        }
        let reopened = try openDatabase(dir, "limited", maxRevTreeDepth: 50)
        #expect(try reopened.maxRevTreeDepth == 5)
        let doc = try #require(try reopened.document(withID: "d")).toMutable()
        doc.setValue(.int(99), forKey: "n")
        try reopened.saveDocument(doc)
        #expect(try reopened.revisionTree(withID: "d")?.revisions.count == 5)
        try reopened.close()
    }

    @Test func reopeningAfterCloseKeepsEverything() throws {
        let dir = try TemporaryDirectory()
        var uuid = ""
        var expectedTree: RevisionTree?
        var blobDigest = ""
        do {
            let db = try openDatabase(dir, "durable", fullSync: true)
            uuid = db.uuid
            try db.saveDocument(MutableDocument(id: "plain", data: ["title": "kept", "n": 1.25]))
            _ = try db.insertRevisions([rev("conflicted", "1-a", ["1-a"], ["v": 1]), rev("conflicted", "2-b", ["2-b", "1-a"], ["v": 2]),
                                    rev("conflicted", "2-c", ["2-c", "1-a"], ["v": 3])])
            let gone = MutableDocument(id: "gone", data: ["worker_id": "w"])
            try db.saveDocument(gone)
            gone.isDeletion = true
            try db.saveDocument(gone)
            try db.saveLocalDocument(["last_seq": 7], withID: "checkpoint")
            let withBlob = MutableDocument(id: "blobby")
            let blob = Blob(contentType: "text/plain", data: Data("persistent bytes".utf8))
            blobDigest = blob.digest
            withBlob.setBlob(blob, forKey: "file")
            try db.saveDocument(withBlob)
            expectedTree = try db.revisionTree(withID: "conflicted")
            #expect(try db.lastSequence == 7)
            try db.close()
        }
        let db = try openDatabase(dir, "durable", fullSync: true)
        #expect(db.uuid == uuid)
        #expect(try db.lastSequence == 7)
        #expect(try db.count == 3)
        #expect(try db.document(withID: "plain")?.toDictionary() == ["title": "kept", "n": 1.25])
        #expect(try db.revisionTree(withID: "conflicted") == expectedTree)
        #expect(try db.document(withID: "conflicted")?.revisionID == "2-c")
        #expect(try db.document(withID: "gone") == nil)
        #expect(try db.leafRevisions(withID: "gone").first?.properties == ["worker_id": "w"])
        #expect(try db.localDocument(withID: "checkpoint") == ["last_seq": 7])
        var options = AllDocumentsOptions()
        options.onlyConflicts = true
        #expect(try db.allDocuments(options).readAll().map(\.id) == ["conflicted"])
        let blob = try #require(try db.document(withID: "blobby")?.blob(forKey: "file"))
        #expect(blob.digest == blobDigest)
        #expect(blob.content == Data("persistent bytes".utf8))
        #expect(try db.changes(since: 0).map(\.documentID) == ["plain", "conflicted", "gone", "blobby"])
        // And it keeps counting from where it was.
        try db.saveDocument(MutableDocument(id: "next"))
        #expect(try db.lastSequence == 8)
        try db.delete()
        #expect(!Database.exists(withName: "durable", inDirectory: dir.path))
    }

    @Test func changeStreamEndsWhenTheDatabaseCloses() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let stream = db.changeEvents()
        try await db.saveDocument(MutableDocument(id: "a"))
        try db.close()
        var received: [[String]] = []
        for try await change in stream { received.append(change.documentIDs) }   // ends: no hang
        #expect(received == [["a"]])
    }
}

/// Error codes are values that a later version can add to: they match by name in `catch`
/// patterns, `switch` (with a `default`) and equality, and print their names.
@Suite struct ErrorCodeTests {
    @Test func codesMatchAndPrintByName() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        do {
            try db.purgeDocument(withID: "absent")
            Issue.record("purging an absent document did not throw")
        } catch SetteeError.Code.notFound {
            // matched by the code's pattern
        }
        let e = SetteeError(.conflict, "changed meanwhile")
        switch e.code {
        case .conflict: break
        default: Issue.record("a switch did not match .conflict")
        }
        #expect(SetteeError.Code(rawValue: "conflict") == .conflict)
        #expect(SetteeError.Code(rawValue: "somethingNew") != .conflict)
        #expect("\(e)" == "SetteeError.conflict: changed meanwhile")
        #expect(Set(SetteeError.Code.allCases).count == SetteeError.Code.allCases.count)
        #expect(SetteeError.Code.allCases.contains(.versionMismatch))
    }
}

/// `maximumSize` bounds the log (and the address space its memory map reserves).
@Suite struct MaximumSizeTests {
    @Test func aWritePastTheMaximumSizeFailsAndLosesNothing() throws {
        let dir = try TemporaryDirectory()
        var config = DatabaseConfiguration(directory: dir.path)
        config.fullSync = false
        config.maximumSize = 4 << 20
        let db = try Database(name: "small", config: config)
        // Incompressible (the log compresses with LZ4): random bytes as base64.
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        let body = Data((0 ..< 150_000).map { _ in x ^= x << 13; x ^= x >> 7; x ^= x << 17; return UInt8(truncatingIfNeeded: x) })
            .base64EncodedString()
        var saved = 0
        var failure: SetteeError?
        for i in 0 ..< 100 {
            do {
                try db.saveDocument(MutableDocument(id: "doc-\(i)", data: ["body": .string(body + "\(i)")]))
                saved += 1
            } catch let e as SetteeError {
                failure = e
                break
            }
        }
        #expect(failure?.code == .io)
        #expect(saved > 0 && saved < 100)
        // Everything saved before is there.
        #expect(try db.count == UInt64(saved))
        #expect(try db.document(withID: "doc-0")?.string(forKey: "body")?.hasSuffix("0") == true)
        // Another handle must ask for the same size.
        var other = config
        other.maximumSize = nil
        #expect(throws: SetteeError.self) { _ = try Database(name: "small", config: other) }
        try db.close()
    }
}
