import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Change listeners, document listeners and the async change stream (seed 004, "change
/// notifications").
@Suite struct ObserverTests {
    @Test func listenersHearOfAReplicatedConflict() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev("doc", "1-a", ["1-a"], ["v": 1]))

        let dbChanges = Locked<[DocumentChange]>([])
        let docChanges = Locked<[DocumentChange]>([])
        let otherDocChanges = Locked<[DocumentChange]>([])
        let dbSignal = DispatchSemaphore(value: 0)
        let docSignal = DispatchSemaphore(value: 0)
        let dbToken = db.addChangeListener { change in
            #expect(change.database == "db")
            dbChanges.withLock { $0 += change.changes }
            dbSignal.signal()
        }
        let docToken = db.addDocumentChangeListener(withID: "doc") { change in
            docChanges.withLock { $0.append(change) }
            docSignal.signal()
        }
        let otherToken = db.addDocumentChangeListener(withID: "other") { change in
            otherDocChanges.withLock { $0.append(change) }
        }

        try db.insertRevision(rev("doc", "2-b", ["2-b", "1-a"], ["v": 2]))
        #expect(wait(dbSignal))
        #expect(wait(docSignal))
        try db.insertRevision(rev("doc", "2-c", ["2-c", "1-a"], ["v": 3]))   // the conflict
        #expect(wait(dbSignal))
        #expect(wait(docSignal))

        let heard = dbChanges.value
        #expect(heard.map(\.revisionID) == ["2-b", "2-c"])
        #expect(heard.map(\.isConflicted) == [false, true])
        #expect(heard.last?.documentID == "doc")
        #expect(try heard.last?.sequence == db.lastSequence)
        #expect(heard.last?.isDeleted == false)
        #expect(heard.last?.isPurged == false)
        #expect(docChanges.value.map(\.isConflicted) == [false, true])
        #expect(docChanges.value.last?.revisionID == "2-c")

        // After remove(), nothing more arrives; a listener still registered proves the change was
        // delivered (listeners run on one serial queue).
        docToken.remove()
        docToken.remove()   // twice is harmless
        let sentinel = DispatchSemaphore(value: 0)
        let sentinelToken = db.addDocumentChangeListener(withID: "doc") { _ in sentinel.signal() }
        try db.resolveConflict(withID: "doc")
        #expect(wait(sentinel))
        #expect(wait(dbSignal))
        #expect(docChanges.value.count == 2)
        #expect(dbChanges.value.last?.isConflicted == false)
        dbToken.remove()
        try db.purgeDocument(withID: "doc")
        #expect(wait(sentinel))
        #expect(dbSignal.wait(timeout: .now() + 0.2) == .timedOut)
        #expect(dbChanges.value.allSatisfy { !$0.isPurged })
        #expect(otherDocChanges.value.isEmpty)
        sentinelToken.remove()
        otherToken.remove()
    }

    @Test func listenersSeeDeletionsAndPurgesInCommitOrder() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let log = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let token = db.addChangeListener { change in
            for c in change.changes {
                let what = c.isPurged ? "purged" : c.isDeleted ? "deleted" : "saved"
                log.withLock { $0.append("\(c.documentID):\(what):\(c.sequence)") }
            }
            if change.documentIDs.contains("end") { done.signal() }
        }
        defer { token.remove() }
        try db.saveDocument(MutableDocument(id: "a"))
        try db.deleteDocument(try #require(try db.document(withID: "a")))
        try db.saveDocument(MutableDocument(id: "b"))
        try db.purgeDocument(withID: "b")
        try db.saveDocument(MutableDocument(id: "end"))
        #expect(wait(done))
        #expect(log.value == ["a:saved:1", "a:deleted:2", "b:saved:3", "b:purged:4", "end:saved:5"])
    }

    @Test func listenersDoNotRunOnTheCommittingThread() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let committing = UInt(bitPattern: Int(bitPattern: pthread_self()))
        let sameThread = Locked<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        let token = db.addChangeListener { _ in
            sameThread.withLock { $0 = UInt(bitPattern: Int(bitPattern: pthread_self())) == committing }
            // A listener may read the database.
            _ = try? db.document(withID: "x")
            done.signal()
        }
        defer { token.remove() }
        try db.saveDocument(MutableDocument(id: "x"))
        #expect(wait(done))
        #expect(sameThread.value == false)
    }

    /// Changes committed while nobody reads are merged into one element (one entry per
    /// document, its latest change, in first-change order): the stream never queues without bound.
    @Test func changeEventsMergeWhatTheReaderHasNotTaken() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let stream = db.changeEvents()
        try await db.saveDocument(MutableDocument(id: "one"))
        try await db.inBatch { db in
            try db.saveDocument(MutableDocument(id: "two"))
            try db.saveDocument(MutableDocument(id: "three"))
        }
        try db.insertRevision(rev("four", "1-a", ["1-a"]))
        try db.insertRevision(rev("four", "1-b", ["1-b"]))
        for i in 0 ..< 500 { try await db.saveDocument(MutableDocument(id: "one", data: ["i": .int(Int64(i))])) }

        var it = stream.makeAsyncIterator()
        let merged = try #require(try await it.next())
        #expect(merged.documentIDs == ["one", "two", "three", "four"])
        #expect(merged.database == "db")
        #expect(merged.changes[3].isConflicted && merged.changes[3].revisionID == "1-b")
        #expect(merged.changes[0].sequence == (try db.lastSequence))
        // Later changes come as later elements; closing ends the sequence.
        try await db.saveDocument(MutableDocument(id: "five"))
        #expect(try await it.next()?.documentIDs == ["five"])
        try db.close()
        #expect(try await it.next() == nil)
    }

    /// `changeEvents(since:)` starts with the current state of every document changed after the
    /// sequence, page by page, then goes on with live changes: none missed, none repeated.
    @Test func changeEventsSinceStartWithTheCurrentState() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try await db.inBatch { db in
            for i in 0 ..< 1200 { try db.saveDocument(MutableDocument(id: String(format: "d%04d", i), data: ["v": 0])) }
        }
        try await db.saveDocument(MutableDocument(id: "d0000", data: ["v": 1]))   // d0000 now at the last sequence
        try await db.deleteDocument(try #require(try await db.document(withID: "d0001")))
        let mark = try db.lastSequence

        var everything = db.changeEvents(since: 0).makeAsyncIterator()
        var fromMark = db.changeEvents(since: mark - 2).makeAsyncIterator()
        // A commit after the sequences were made but before the first read: delivered once.
        try await db.saveDocument(MutableDocument(id: "late", data: ["v": 2]))

        var pages: [[DocumentChange]] = []
        var seen: [String: Int] = [:]
        while seen["late"] == nil, let page = try await everything.next() {
            pages.append(page.changes)
            for c in page.changes { seen[c.documentID, default: 0] += 1 }
        }
        #expect(pages.first?.count == 500, "the current state comes in elements of at most 500")
        #expect(seen.count == 1201)
        #expect(seen.values.allSatisfy { $0 == 1 }, "nothing repeated")
        let all = pages.flatMap { $0 }
        #expect(all.map(\.sequence) == all.map(\.sequence).sorted())
        #expect(all.first { $0.documentID == "d0001" }?.isDeleted == true)
        #expect(all.first { $0.documentID == "d0000" }?.sequence == mark - 1)

        let first = try #require(try await fromMark.next())
        #expect(first.documentIDs == ["d0000", "d0001", "late"])
        // Live changes go on after the current state.
        try await db.saveDocument(MutableDocument(id: "later"))
        #expect(try await everything.next()?.documentIDs == ["later"])
        #expect(try await fromMark.next()?.documentIDs == ["later"])
        try db.close()
        #expect(try await everything.next() == nil)
        #expect(try await fromMark.next() == nil)
        // Made after the close: they end at once.
        var closed = db.changeEvents(since: 0).makeAsyncIterator()
        #expect(try await closed.next() == nil)
        var closedLive = db.changeEvents().makeAsyncIterator()
        #expect(try await closedLive.next() == nil)
        var closedDocument = db.documentChanges(withID: "later").makeAsyncIterator()
        #expect(try await closedDocument.next() == nil)
    }

    /// A document observation starts with the current state, yields the latest state after each
    /// change (a reader that falls behind gets only the latest), and ends at close.
    @Test func documentChangesStartWithTheCurrentStateAndCoalesce() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        var it = db.documentChanges(withID: "task").makeAsyncIterator()
        let first = try await it.next()
        #expect(first != nil && first! == nil)   // absent: the current state is nil
        let m = MutableDocument(id: "task", data: ["n": 0])
        try await db.saveDocument(m)
        #expect(try await it.next()??.int(forKey: "n") == 0)
        for n in 1 ... 100 {
            m.setInt(n, forKey: "n")
            try await db.saveDocument(m)
        }
        try await db.saveDocument(MutableDocument(id: "other"))   // not this document: no element
        let latest = try await it.next()
        #expect(latest??.int(forKey: "n") == 100)
        try await db.deleteDocument(m)
        let deleted = try await it.next()
        #expect(deleted != nil && deleted! == nil)
        // An observation begun now starts with the current (deleted) state.
        var late = db.documentChanges(withID: "task").makeAsyncIterator()
        let lateFirst = try await late.next()
        #expect(lateFirst != nil && lateFirst! == nil)
        try db.close()
        #expect(try await it.next() == nil)
        #expect(try await late.next() == nil)
    }

    /// Listeners given a queue run on it.
    @Test func listenersRunOnTheQueueTheyName() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let queue = DispatchQueue(label: "observer-tests.ui")
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "ui")
        let heard = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let a = db.addChangeListener(on: queue) { change in
            heard.withLock { $0.append("db:\(DispatchQueue.getSpecific(key: key) ?? "elsewhere")") }
            done.signal()
        }
        let b = db.addDocumentChangeListener(withID: "x", on: queue) { change in
            heard.withLock { $0.append("doc:\(DispatchQueue.getSpecific(key: key) ?? "elsewhere")") }
            done.signal()
        }
        try db.saveDocument(MutableDocument(id: "x"))
        #expect(wait(done) && wait(done))
        #expect(Set(heard.value) == ["db:ui", "doc:ui"])
        a.remove()
        b.remove()
    }
}
