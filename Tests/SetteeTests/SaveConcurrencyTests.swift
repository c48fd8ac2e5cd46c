import Dispatch
import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Saving and deleting with concurrency control and conflict handlers (DESIGN "Semantics
/// decided" 4, seed 002 case 2, seed 004 update-with-retry).
@Suite struct SaveConcurrencyTests {
    // MARK: Concurrency control

    @Test func lastWriteWinsAndFailOnConflictForSaves() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["v": 0]))
        let loaded = try #require(try db.document(withID: "doc"))
        let mine = loaded.toMutable()
        let theirs = loaded.toMutable()
        theirs.setString("theirs", forKey: "who")
        try db.saveDocument(theirs)
        let theirRev = try #require(theirs.revisionID)
        let seq = try db.lastSequence

        mine.setString("mine", forKey: "who")
        #expect(try db.saveDocument(mine, concurrencyControl: .failOnConflict) == false)
        #expect(try db.lastSequence == seq)
        #expect(try db.document(withID: "doc")?.revisionID == theirRev)
        #expect(mine.revisionID == loaded.revisionID)

        #expect(try db.saveDocument(mine, concurrencyControl: .lastWriteWins))
        let current = try #require(try db.document(withID: "doc"))
        #expect(current.revisionID == mine.revisionID)
        #expect(current.string(forKey: "who") == "mine")
        #expect(current.revisionID?.hasPrefix("3-") == true)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(!tree.isConflicted)
        #expect(tree.revisions.first { $0.revisionID == current.revisionID }?.parentRevisionID == theirRev)

        // A new object over a live document's ID: a conflict (it was not loaded from anything).
        let fresh = MutableDocument(id: "doc", data: ["v": 99])
        #expect(try db.saveDocument(fresh, concurrencyControl: .failOnConflict) == false)
        #expect(try db.saveDocument(fresh, concurrencyControl: .lastWriteWins))
        #expect(try db.document(withID: "doc")?.int(forKey: "v") == 99)
        #expect(try db.document(withID: "doc")?.revisionID?.hasPrefix("4-") == true)
    }

    @Test func aSaveNeverResurrectsADocumentDeletedMeanwhile() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["v": 0]))
        let loaded = try #require(try db.document(withID: "doc"))
        let editor = loaded.toMutable()
        try db.deleteDocument(loaded)
        let seq = try db.lastSequence

        editor.setInt(1, forKey: "v")
        #expect(try db.saveDocument(editor, concurrencyControl: .lastWriteWins) == false)
        #expect(try db.saveDocument(editor, concurrencyControl: .failOnConflict) == false)
        let error = setteeError { try db.saveDocument(editor) }
        #expect(error?.code == .conflict)
        #expect(try db.lastSequence == seq)
        #expect(try db.document(withID: "doc") == nil)
        #expect(try db.count == 0)
    }

    @Test func aDeleteWinsOverAConcurrentUpdate() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["v": 0]))
        let loaded = try #require(try db.document(withID: "doc"))
        let update = loaded.toMutable()
        update.setInt(1, forKey: "v")
        try db.saveDocument(update)
        let updated = try #require(update.revisionID)

        // failOnConflict: refused, nothing written.
        let seq = try db.lastSequence
        #expect(try db.deleteDocument(loaded, concurrencyControl: .failOnConflict) == false)
        #expect(try db.lastSequence == seq)
        #expect(try db.document(withID: "doc")?.int(forKey: "v") == 1)

        // lastWriteWins: the deletion goes on top of the update.
        #expect(try db.deleteDocument(loaded, concurrencyControl: .lastWriteWins))
        #expect(try db.document(withID: "doc") == nil)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        let tombstone = try #require(tree.revisions.first { $0.revisionID == tree.currentRevisionID })
        #expect(tombstone.isDeleted)
        #expect(tombstone.parentRevisionID == updated)
        #expect(tombstone.generation == 3)
        #expect(tree.leafRevisionIDs.count == 1)

        // Deleting again (already deleted) does not write another tombstone.
        let seq2 = try db.lastSequence
        #expect(try db.deleteDocument(loaded, concurrencyControl: .lastWriteWins))
        #expect(try db.lastSequence == seq2)
        // The MutableDocument variant, and notFound for an unknown document.
        let other = MutableDocument(id: "other", data: ["x": 1])
        try db.saveDocument(other)
        #expect(try db.deleteDocument(other))
        #expect(try db.document(withID: "other") == nil)
        #expect(setteeError { try db.deleteDocument(MutableDocument(id: "nobody")) }?.code == .notFound)
    }

    @Test func creatingOverATombstoneContinuesItsBranch() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        for control in [ConcurrencyControl.lastWriteWins, .failOnConflict] {
            let id = "t-\(control)"
            try db.saveDocument(MutableDocument(id: id, data: ["v": 1]))
            let first = try #require(try db.document(withID: id))
            try db.deleteDocument(first)
            let tombstone = try #require(try db.revisionTree(withID: id)?.currentRevisionID)
            #expect(tombstone.hasPrefix("2-"))

            let again = MutableDocument(id: id, data: ["v": 2])
            #expect(try db.saveDocument(again, concurrencyControl: control))
            let current = try #require(try db.document(withID: id))
            #expect(current.int(forKey: "v") == 2)
            #expect(current.revisionID?.hasPrefix("3-") == true)
            let tree = try #require(try db.revisionTree(withID: id))
            #expect(tree.revisions.count == 3)
            #expect(tree.leafRevisionIDs == [current.revisionID!])
            #expect(tree.revisions.first { $0.revisionID == current.revisionID }?.parentRevisionID == tombstone)
        }
        // saveDocument(_:) without a control too, and with a conflict handler (never called).
        try db.saveDocument(MutableDocument(id: "plain", data: ["v": 1]))
        try db.deleteDocument(try #require(try db.document(withID: "plain")))
        try db.saveDocument(MutableDocument(id: "plain", data: ["v": 2]))
        #expect(try db.document(withID: "plain")?.revisionID?.hasPrefix("3-") == true)
        try db.deleteDocument(try #require(try db.document(withID: "plain")))
        let saved = try db.saveDocument(MutableDocument(id: "plain", data: ["v": 3])) { _, _ in
            Issue.record("creating over a tombstone is not a conflict")
            return false
        }
        #expect(saved)
        #expect(try db.document(withID: "plain")?.revisionID?.hasPrefix("5-") == true)
        #expect(try db.count == 3)
    }

    // MARK: Conflict handlers (seed 002)

    @Test func mergingConflictHandler() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "xyz", data: ["name": "pears", "color": "green"]))
        let document = try #require(try db.document(withID: "xyz"))
        // Someone else changes the document meanwhile.
        let other = document.toMutable()
        other.setInt(3, forKey: "quantity")
        other.setString("yellow", forKey: "color")
        try db.saveDocument(other)
        let otherRev = try #require(other.revisionID)

        let mutableDocument = document.toMutable()
        mutableDocument.setString("apples", forKey: "name")
        var seen: [String?] = []
        let saved = try db.saveDocument(mutableDocument) { new, current in
            seen.append(current?.revisionID)
            let currentDict = try #require(current).toDictionary()
            let newDict = new.toDictionary()
            let result = newDict.merging(currentDict) { first, _ in first }
            new.setData(result)
            return true
        }
        #expect(saved)
        #expect(seen == [otherRev])
        let merged = try #require(try db.document(withID: "xyz"))
        #expect(merged.toDictionary() == ["name": "apples", "color": "green", "quantity": 3])
        #expect(merged.revisionID == mutableDocument.revisionID)
        #expect(merged.revisionID?.hasPrefix("3-") == true)
        #expect(try db.revisionTree(withID: "xyz")?.isConflicted == false)

        // No conflict: the handler is not called.
        mutableDocument.setBool(true, forKey: "ripe")
        let unconflicted = try db.saveDocument(mutableDocument) { _, _ in
            Issue.record("no conflict, no handler")
            return false
        }
        #expect(unconflicted)
        #expect(try db.document(withID: "xyz")?.bool(forKey: "ripe") == true)
    }

    @Test func conflictHandlerThatCancelsOrThrows() throws {
        struct Refused: Error, Equatable {}
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["v": 0]))
        let loaded = try #require(try db.document(withID: "doc"))
        let other = loaded.toMutable()
        other.setInt(1, forKey: "v")
        try db.saveDocument(other)
        let seq = try db.lastSequence

        let cancelled = loaded.toMutable()
        cancelled.setInt(2, forKey: "v")
        var calls = 0
        var currentValue: Int?
        let cancelledSaved = try db.saveDocument(cancelled) { _, current in
            calls += 1
            currentValue = current?.int(forKey: "v")
            return false
        }
        #expect(cancelledSaved == false)
        #expect(currentValue == 1)
        #expect(calls == 1)
        #expect(try db.lastSequence == seq)
        #expect(try db.document(withID: "doc")?.revisionID == other.revisionID)

        let throwing = loaded.toMutable()
        throwing.setInt(3, forKey: "v")
        #expect(throws: Refused()) {
            try db.saveDocument(throwing) { _, _ in throw Refused() }
        }
        #expect(try db.lastSequence == seq)
        #expect(try db.document(withID: "doc")?.int(forKey: "v") == 1)
        #expect(try db.revisionTree(withID: "doc")?.revisions.count == 2)
    }

    @Test func conflictHandlerGetsNilWhenTheCurrentIsDeleted() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["v": 0]))
        let loaded = try #require(try db.document(withID: "doc"))
        try db.deleteDocument(loaded)
        let tombstone = try #require(try db.revisionTree(withID: "doc")?.currentRevisionID)

        let editor = loaded.toMutable()
        editor.setInt(1, forKey: "v")
        var currents: [Document?] = []
        let refused = try db.saveDocument(editor) { _, current in
            currents.append(current)
            return false
        }
        #expect(refused == false)
        #expect(currents.count == 1)
        #expect(currents.first.map { $0 == nil } == true)
        #expect(try db.document(withID: "doc") == nil)

        // A handler that decides to save anyway continues from the tombstone.
        let resurrected = try db.saveDocument(editor) { _, current in current == nil }
        #expect(resurrected)
        let back = try #require(try db.document(withID: "doc"))
        #expect(back.int(forKey: "v") == 1)
        #expect(try db.revisionTree(withID: "doc")?.revisions.first { $0.revisionID == back.revisionID }?.parentRevisionID == tombstone)
    }

    // MARK: Update with retry (seed 004)

    @Test func updateWithRetryFromFourThreadsCountsExactly() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "counter", data: ["count": 0]))
        let failures = Locked<[String]>([])
        let retries = Locked(0)

        // Four threads, started together; each pauses between its read and its save so the
        // saves really race and the conflict handler really runs.
        let done = DispatchSemaphore(value: 0)
        let start = DispatchSemaphore(value: 0)
        for t in 0 ..< 4 {
            let thread = Thread {
                start.wait()
                for i in 0 ..< 50 {
                    do {
                        guard let doc = try db.document(withID: "counter") else {
                            failures.withLock { $0.append("counter missing") }
                            break
                        }
                        let m = doc.toMutable()
                        m.setInt(doc.int(forKey: "count") + 1, forKey: "count")
                        if (i + t) % 2 == 0 { usleep(200) }
                        let saved = try db.saveDocument(m) { new, current in
                            retries.withLock { $0 += 1 }
                            guard let current else { return false }
                            new.setInt(current.int(forKey: "count") + 1, forKey: "count")
                            return true
                        }
                        if !saved { failures.withLock { $0.append("save returned false") } }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
                done.signal()
            }
            thread.start()
        }
        for _ in 0 ..< 4 { start.signal() }
        for _ in 0 ..< 4 { #expect(wait(done, seconds: 30)) }
        #expect(failures.value.isEmpty)
        let counter = try #require(try db.document(withID: "counter"))
        #expect(counter.int(forKey: "count") == 200)
        #expect(counter.revisionID?.hasPrefix("201-") == true)
        let tree = try #require(try db.revisionTree(withID: "counter"))
        #expect(tree.leafRevisionIDs.count == 1)
        #expect(!tree.isConflicted)
        print("update-with-retry: \(retries.value) conflict-handler retries")
        #expect(retries.value > 0, "the saves never raced: the retry path was not exercised")
    }
}

extension SaveConcurrencyTests {
    @Test func readersSeeConsistentSnapshotsWhileAWriterRuns() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        for i in 0 ..< 20 { try db.saveDocument(MutableDocument(id: String(format: "d%02d", i), data: ["n": 1])) }
        let problems = Locked<[String]>([])
        let writing = Locked(true)
        let done = DispatchSemaphore(value: 0)
        for r in 0 ..< 3 {
            Thread {
                var lastSequence: UInt64 = 0
                while writing.value {
                    do {
                        // Each document's "n" is its generation: a torn read would break that.
                        let id = String(format: "d%02d", Int.random(in: 0 ..< 20))
                        if let doc = try db.document(withID: id) {
                            let generation = Int(doc.revisionID!.prefix { $0 != "-" })!
                            if doc.int(forKey: "n") != generation { problems.withLock { $0.append("\(id) n \(doc.int(forKey: "n")) at gen \(generation)") } }
                        }
                        let all = try db.allDocuments().readAll().map(\.id)
                        if all.count != 20 { problems.withLock { $0.append("reader \(r) saw \(all.count) documents") } }
                        let sequence = try db.lastSequence
                        if sequence < lastSequence { problems.withLock { $0.append("sequence went back") } }
                        lastSequence = sequence
                        let changes = try db.changes(since: 0)
                        if Set(changes.map(\.documentID)).count != changes.count { problems.withLock { $0.append("duplicate in changes") } }
                    } catch {
                        problems.withLock { $0.append("\(error)") }
                    }
                }
                done.signal()
            }.start()
        }
        for round in 2 ... 16 {
            try db.inBatch {
                for i in 0 ..< 20 {
                    let m = try #require(try db.document(withID: String(format: "d%02d", i))).toMutable()
                    m.setInt(round, forKey: "n")
                    try db.saveDocument(m)
                }
            }
        }
        writing.withLock { $0 = false }
        for _ in 0 ..< 3 { #expect(wait(done, seconds: 30)) }
        #expect(problems.value.isEmpty, "\(problems.value.prefix(5))")
        #expect(try db.lastSequence == 20 * 16)
    }
}
