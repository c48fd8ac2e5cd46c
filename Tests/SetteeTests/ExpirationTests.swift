import Foundation
import SetteeStorage
import Testing
@_spi(Replication) @testable import Settee

/// A clock the test moves by hand: the sweeper sleeps until the test advances it past a due
/// time, so nothing waits for real time to pass.
final class ManualClock: ExpirationClock, @unchecked Sendable {
    private let lock = NSLock()
    private var time: Date
    private var alarms: [SweepAlarm] = []

    init(_ start: TimeInterval = ExpirationTests.start) { time = Date(timeIntervalSince1970: start) }

    func now() -> Date { lock.withLock { time } }

    func sleep(until deadline: Date?, alarm: SweepAlarm) {
        lock.withLock {
            if !alarms.contains(where: { $0 === alarm }) { alarms.append(alarm) }
        }
        if let deadline, now() >= deadline { return }
        alarm.wait(until: nil)
    }

    func advance(by seconds: TimeInterval) {
        let rung = lock.withLock { () -> [SweepAlarm] in
            time += seconds
            return alarms
        }
        for a in rung { a.ring() }
    }

    func set(_ seconds: TimeInterval) {
        advance(by: seconds - now().timeIntervalSince1970)
    }
}

/// Collects what listeners hear, and signals when `expected` purges have arrived.
final class PurgeLog: Sendable {
    let changes = Locked<[DocumentChange]>([])
    let transactions = Locked<[Int]>([])
    private let signal = DispatchSemaphore(value: 0)
    private let target: Locked<Int>

    init(_ db: Database, expecting purges: Int = 1) {
        target = Locked(purges)
        _ = db.addChangeListener { [self] change in
            let purged = change.changes.filter(\.isPurged).count
            let total = changes.withLock { c -> Int in
                c += change.changes
                return c.filter(\.isPurged).count
            }
            if purged > 0 { transactions.withLock { $0.append(purged) } }
            if total >= target.value && total - purged < target.value { signal.signal() }
        }
    }

    /// Waits for the expected number of purges to be heard (a guard against hanging, not a
    /// measure of time).
    func wait(seconds: Double = 30) -> Bool { signal.wait(timeout: .now() + seconds) == .success }

    var purgedIDs: [String] { changes.value.filter(\.isPurged).map(\.documentID) }
}

/// Document expiration (seed 004, "Document expiration (TTL)") and tombstone eviction, driven by
/// a manual clock (and one test on the wall clock).
@Suite struct ExpirationTests {
    static let start: TimeInterval = 1_700_000_000

    func open(_ dir: TemporaryDirectory, _ clock: ManualClock, name: String = "db",
              tombstoneMaxAge: TimeInterval? = nil) throws -> Database {
        var config = DatabaseConfiguration(directory: dir.path)
        config.fullSync = false
        config.tombstoneMaxAge = tombstoneMaxAge
        return try Database(name: name, config: config, openFile: nil, clock: clock)
    }

    func date(_ offset: TimeInterval) -> Date { Date(timeIntervalSince1970: Self.start + offset) }

    /// Entries in the two expiry trees.
    func indexCounts(_ db: Database) throws -> (byTime: Int, byID: Int) {
        try db.core.store.read { tx in
            (try tx.count(in: db.core.trees.expiry), try tx.count(in: db.core.trees.expiryByID))
        }
    }

    @discardableResult
    func save(_ db: Database, _ id: String, _ data: [String: JSONValue] = ["v": 1]) throws -> MutableDocument {
        let doc = MutableDocument(id: id, data: data)
        try db.saveDocument(doc)
        return doc
    }

    // MARK: - Setting and reading

    @Test func setGetAndClear() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        try save(db, "doc")
        #expect(try db.getDocumentExpiration(withID: "doc") == nil)

        try db.setDocumentExpiration(withID: "doc", expiration: date(3600))
        #expect(try db.getDocumentExpiration(withID: "doc") == date(3600))
        try db.setDocumentExpiration(withID: "doc", expiration: date(60))   // earlier: replaces it
        #expect(try db.getDocumentExpiration(withID: "doc") == date(60))
        #expect(try indexCounts(db) == (1, 1))
        try db.setDocumentExpiration(withID: "doc", expiration: nil)
        #expect(try db.getDocumentExpiration(withID: "doc") == nil)
        #expect(try indexCounts(db) == (0, 0))
        try db.setDocumentExpiration(withID: "doc", expiration: nil)   // clearing twice does nothing

        // No document: setting or clearing is notFound, reading is nil.
        #expect(setteeError { try db.setDocumentExpiration(withID: "missing", expiration: date(10)) }?.code == .notFound)
        #expect(setteeError { try db.setDocumentExpiration(withID: "missing", expiration: nil) }?.code == .notFound)
        #expect(try db.getDocumentExpiration(withID: "missing") == nil)
        #expect(setteeError { try db.setDocumentExpiration(withID: "_bad", expiration: date(10)) }?.code == .invalidParameter)
        #expect(setteeError { _ = try db.getDocumentExpiration(withID: "") }?.code == .invalidParameter)
        for bad in [Double.nan, .infinity, -.infinity, 1e300] {
            #expect(setteeError { try db.setDocumentExpiration(withID: "doc", expiration: Date(timeIntervalSince1970: bad)) }?.code
                    == .invalidParameter)
        }

        // A second Database object on the same files sees it; a closed one refuses.
        try db.setDocumentExpiration(withID: "doc", expiration: date(100))
        let other = try open(dir, clock)
        #expect(try other.getDocumentExpiration(withID: "doc") == date(100))
        try other.close()
        #expect(setteeError { _ = try other.getDocumentExpiration(withID: "doc") }?.code == .notOpen)
        #expect(setteeError { try other.setDocumentExpiration(withID: "doc", expiration: nil) }?.code == .notOpen)
    }

    @Test func timesAreWholeSecondsRoundedUp() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        try save(db, "doc")
        for (given, stored) in [(10.0, 10.0), (10.2, 11.0), (10.999, 11.0), (11.0001, 12.0)] {
            try db.setDocumentExpiration(withID: "doc", expiration: date(given))
            #expect(try db.getDocumentExpiration(withID: "doc") == date(stored))
        }
        // Before 1970: stored as the epoch (already due, so not set on a document here).
        #expect(try ExpiryTime.seconds(roundingUp: Date(timeIntervalSince1970: -5.5)) == 0)
        #expect(try ExpiryTime.seconds(roundingUp: Date(timeIntervalSince1970: 0.5)) == 1)

        // Due at the rounded second, not before: 20.3 is stored as 21.
        try save(db, "late")
        let log = PurgeLog(db)
        try db.setDocumentExpiration(withID: "doc", expiration: date(20.3))
        try db.setDocumentExpiration(withID: "late", expiration: date(20.3))
        clock.set(Self.start + 20.9)
        db.waitForExpirySweeper()
        #expect(try db.document(withID: "late") != nil)
        clock.set(Self.start + 21)
        #expect(log.wait())
        db.waitForExpirySweeper()
        #expect(try db.revisionTree(withID: "late") == nil)
        #expect(try db.revisionTree(withID: "doc") == nil)
    }

    // MARK: - Purging

    @Test func expiredDocumentsArePurgedAndListenersHear() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        for i in 0 ..< 5 { try save(db, "doc-\(i)", ["i": .int(Int64(i))]) }
        try db.setDocumentExpiration(withID: "doc-0", expiration: date(10))
        try db.setDocumentExpiration(withID: "doc-1", expiration: date(10))
        try db.setDocumentExpiration(withID: "doc-2", expiration: date(30))
        try db.setDocumentExpiration(withID: "doc-3", expiration: date(3600))
        #expect(try db.lastSequence == 5)

        let log = PurgeLog(db, expecting: 2)
        let docHeard = Locked<[DocumentChange]>([])
        let docSignal = DispatchSemaphore(value: 0)
        let token = db.addDocumentChangeListener(withID: "doc-1") { c in
            docHeard.withLock { $0.append(c) }
            docSignal.signal()
        }
        defer { token.remove() }
        clock.advance(by: 15)
        #expect(log.wait())
        #expect(wait(docSignal))
        #expect(Set(log.purgedIDs) == ["doc-0", "doc-1"])
        let purges = log.changes.value.filter(\.isPurged)
        #expect(purges.allSatisfy { $0.revisionID == nil && !$0.isDeleted && !$0.isConflicted })
        #expect(Set(purges.map(\.sequence)) == [6, 7])   // each purge takes a sequence
        #expect(docHeard.value.map(\.isPurged) == [true])
        #expect(try db.lastSequence == 7)
        #expect(try db.count == 3)
        #expect(try db.document(withID: "doc-0") == nil)
        #expect(try db.revisionTree(withID: "doc-1") == nil)
        #expect(try db.changes(since: 0).map(\.documentID) == ["doc-2", "doc-3", "doc-4"])
        #expect(try db.getDocumentExpiration(withID: "doc-0") == nil)
        #expect(try db.getDocumentExpiration(withID: "doc-2") == date(30))
        #expect(try indexCounts(db) == (2, 2))

        // The sweeper sleeps until the next one.
        let log2 = PurgeLog(db, expecting: 1)
        clock.advance(by: 15)
        #expect(log2.wait())
        #expect(log2.purgedIDs == ["doc-2"])
        #expect(try db.document(withID: "doc-3") != nil)
        #expect(try db.document(withID: "doc-4") != nil)
    }

    @Test func anEarlierExpirationWakesTheSleepingSweeper() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        try save(db, "later")
        try save(db, "sooner")
        try save(db, "latest")
        try db.setDocumentExpiration(withID: "later", expiration: date(1000))
        db.waitForExpirySweeper()   // now asleep until +1000 s
        let passes = db.core.parts.expiry.sweeper.passes.load(ordering: .acquiring)

        // A later due time does not wake it.
        try db.setDocumentExpiration(withID: "latest", expiration: date(5000))
        db.waitForExpirySweeper()
        #expect(db.core.parts.expiry.sweeper.passes.load(ordering: .acquiring) == passes)

        // An earlier one does, although the clock has not moved: it is due now.
        let log = PurgeLog(db)
        try db.setDocumentExpiration(withID: "sooner", expiration: date(0))
        #expect(log.wait())
        #expect(log.purgedIDs == ["sooner"])
        db.waitForExpirySweeper()
        #expect(db.core.parts.expiry.sweeper.passes.load(ordering: .acquiring) > passes)
        #expect(try db.document(withID: "later") != nil)
        #expect(try db.nextDueForTests() == UInt64(Self.start) + 1000)
    }

    @Test func expirationsThatPassedWhileClosedArePurgedOnOpen() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        do {
            let db = try open(dir, clock)
            try save(db, "gone")
            try save(db, "kept")
            try db.setDocumentExpiration(withID: "gone", expiration: date(10))
            try db.setDocumentExpiration(withID: "kept", expiration: date(100))
            try db.close()
        }
        clock.advance(by: 50)
        let db = try open(dir, clock)
        db.waitForExpirySweeper()   // the first pass runs at open
        #expect(try db.revisionTree(withID: "gone") == nil)
        #expect(try db.document(withID: "kept") != nil)
        #expect(try db.getDocumentExpiration(withID: "kept") == date(100))
        #expect(try db.lastSequence == 3)
        #expect(try indexCounts(db) == (1, 1))

        // Closed again past the second one, and opened with the wall clock (far later): caught up too.
        try db.close()
        let again = try openDatabase(dir)
        defer { try? again.close() }
        again.waitForExpirySweeper()
        #expect(try again.revisionTree(withID: "kept") == nil)
        #expect(try again.count == 0)
        #expect(try indexCounts(again) == (0, 0))
    }

    @Test func purgeUpdateAndDeleteInteractions() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)

        // An explicit purge removes the expiration: the ID saved again starts without one.
        try save(db, "purged")
        try db.setDocumentExpiration(withID: "purged", expiration: date(10))
        try db.purgeDocument(withID: "purged")
        #expect(try indexCounts(db) == (0, 0))
        #expect(try db.getDocumentExpiration(withID: "purged") == nil)
        #expect(setteeError { try db.setDocumentExpiration(withID: "purged", expiration: date(10)) }?.code == .notFound)
        try save(db, "purged")
        #expect(try db.getDocumentExpiration(withID: "purged") == nil)

        // Updates keep it (local saves and replicated revisions).
        let updated = try save(db, "updated")
        try db.setDocumentExpiration(withID: "updated", expiration: date(20))
        updated.setInt(2, forKey: "v")
        try db.saveDocument(updated)
        try db.insertRevision(rev("updated", "9-z", ["9-z"], ["v": 9]))   // a second branch: a conflict
        #expect(try db.getDocumentExpiration(withID: "updated") == date(20))
        #expect(try db.revisionTree(withID: "updated")?.isConflicted == true)

        // Deletion keeps it: the tombstone is purged when it comes.
        try save(db, "deleted")
        try db.setDocumentExpiration(withID: "deleted", expiration: date(20))
        try db.deleteDocument(try #require(try db.document(withID: "deleted")))
        #expect(try db.getDocumentExpiration(withID: "deleted") == date(20))

        // A tombstone may be given an expiration.
        try save(db, "tombstone")
        try db.deleteDocument(try #require(try db.document(withID: "tombstone")))
        try db.setDocumentExpiration(withID: "tombstone", expiration: date(20))

        // A batch that fails leaves no expiration behind.
        try save(db, "rolled-back")
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try db.inBatch {
                try db.setDocumentExpiration(withID: "rolled-back", expiration: date(20))
                throw Abort()
            }
        }
        #expect(try db.getDocumentExpiration(withID: "rolled-back") == nil)

        let log = PurgeLog(db, expecting: 3)
        clock.advance(by: 30)
        #expect(log.wait())
        #expect(Set(log.purgedIDs) == ["updated", "deleted", "tombstone"])
        for id in ["updated", "deleted", "tombstone"] { #expect(try db.revisionTree(withID: id) == nil) }
        #expect(try db.document(withID: "purged") != nil)
        #expect(try db.document(withID: "rolled-back") != nil)
        #expect(try indexCounts(db) == (0, 0))
        #expect(try db.core.store.read { tx in try tx.count(in: db.core.trees.conflicts) } == 0)
    }

    @Test func anExpirationIsNotARevision() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        // A validation that refuses everything from now on: expirations and their purges are not revisions.
        try save(db, "doc")
        let before = try #require(try db.document(withID: "doc"))
        let feed = try db.changes(since: 0)
        db.addValidation(named: "frozen") { _, _ in throw SetteeError.forbidden("frozen") }

        let heard = Locked<[DocumentChange]>([])
        let signal = DispatchSemaphore(value: 0)
        let token = db.addChangeListener { change in
            heard.withLock { $0 += change.changes }
            signal.signal()
        }
        defer { token.remove() }
        try db.setDocumentExpiration(withID: "doc", expiration: date(100))
        try db.setDocumentExpiration(withID: "doc", expiration: date(50))
        let after = try #require(try db.document(withID: "doc"))
        #expect(after.revisionID == before.revisionID)
        #expect(after.sequence == before.sequence)
        #expect(try db.lastSequence == 1)
        #expect(try db.changes(since: 0) == feed)
        #expect(try db.revisionTree(withID: "doc")?.revisions.count == 1)

        // The purge is the only change listeners hear, and it takes the next sequence.
        clock.advance(by: 60)
        #expect(wait(signal))
        #expect(heard.value.count == 1)
        #expect(heard.value.first?.isPurged == true)
        #expect(heard.value.first?.sequence == 2)
        #expect(try db.lastSequence == 2)
        #expect(try db.changes(since: 0).isEmpty)
    }

    @Test func purgeExpiredDocumentsPurgesWhatIsDueAndCounts() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        try db.inBatch {
            for i in 0 ..< 2500 {
                try save(db, "doc-\(i)")
                try db.setDocumentExpiration(withID: "doc-\(i)", expiration: date(i < 2100 ? 100 : 200))
            }
        }
        // The sweeper's clock has not reached them; compaction asks for a later time.
        #expect(try db.purgeExpiredDocuments(asOf: date(99.5)) == 0)
        #expect(try db.purgeExpiredDocuments(asOf: date(100)) == 2100)   // several batches
        #expect(try db.count == 400)
        #expect(try db.lastSequence == 2500 + 2100)
        #expect(try indexCounts(db) == (400, 400))
        #expect(try db.purgeExpiredDocuments(asOf: date(100)) == 0)
    }

    // MARK: - Tombstone eviction

    @Test func oldTombstonesAreEvicted() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock, tombstoneMaxAge: 100)
        try save(db, "live")
        try save(db, "old")
        try save(db, "back")
        try save(db, "expiring")
        try db.deleteDocument(try #require(try db.document(withID: "old")))
        try db.deleteDocument(try #require(try db.document(withID: "back")))
        try db.insertRevision(rev("replicated", "1-r", ["1-r"], deleted: true))   // arrives as a tombstone
        try db.setDocumentExpiration(withID: "expiring", expiration: date(400))
        try db.deleteDocument(try #require(try db.document(withID: "expiring")))
        #expect(try db.expiryRecord(Array("old".utf8)) == ExpiryRecord(eviction: UInt64(Self.start) + 100))
        #expect(try db.expiryRecord(Array("live".utf8)) == nil)
        #expect(try db.getDocumentExpiration(withID: "old") == nil)   // eviction is not an expiration

        // Brought back to life: the eviction entry goes.
        clock.advance(by: 10)
        try db.saveDocument(MutableDocument(id: "back", data: ["alive": true]))
        #expect(try db.expiryRecord(Array("back".utf8)) == nil)

        // Deleted later: younger.
        clock.advance(by: 40)
        try save(db, "young")
        try db.deleteDocument(try #require(try db.document(withID: "young")))

        let log = PurgeLog(db, expecting: 3)
        clock.advance(by: 50)   // +100 s
        #expect(log.wait())
        db.waitForExpirySweeper()
        #expect(Set(log.purgedIDs) == ["old", "replicated", "expiring"])
        #expect(try db.revisionTree(withID: "old") == nil)
        #expect(try db.revisionTree(withID: "young") != nil)
        #expect(try db.document(withID: "live") != nil)
        #expect(try db.document(withID: "back") != nil)
        #expect(try indexCounts(db) == (1, 1))

        let log2 = PurgeLog(db, expecting: 1)
        clock.advance(by: 50)   // +150 s
        #expect(log2.wait())
        #expect(log2.purgedIDs == ["young"])
        #expect(try db.count == 2)
        #expect(try indexCounts(db) == (0, 0))
    }

    @Test func aChangeToATombstoneStartsItsAgeAgain() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock, tombstoneMaxAge: 100)
        try db.insertRevision(rev("doc", "1-a", ["1-a"], ["v": 1]))
        try db.insertRevision(rev("doc", "2-b", ["2-b", "1-a"], deleted: true))
        clock.advance(by: 60)
        // Another tombstone revision arrives: the document is still deleted, counted from now.
        try db.insertRevision(rev("doc", "2-c", ["2-c", "1-a"], deleted: true))
        #expect(try db.expiryRecord(Array("doc".utf8))?.eviction == UInt64(Self.start) + 160)
        clock.advance(by: 50)
        db.waitForExpirySweeper()
        #expect(try db.revisionTree(withID: "doc") != nil)
        clock.advance(by: 50)
        db.waitForExpirySweeper()
        #expect(try db.revisionTree(withID: "doc") == nil)

        // A replicated revision that wins over a tombstone brings the document back.
        try db.insertRevision(rev("doc2", "1-a", ["1-a"], deleted: true))
        #expect(try db.expiryRecord(Array("doc2".utf8)) != nil)
        try db.insertRevision(rev("doc2", "2-b", ["2-b", "1-a"], ["back": true]))
        #expect(try db.expiryRecord(Array("doc2".utf8)) == nil)
        #expect(try indexCounts(db) == (0, 0))
    }

    @Test func evictionStopsWhenThePolicyIsTurnedOff() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        do {
            let db = try open(dir, clock, tombstoneMaxAge: 100)
            try save(db, "gone")
            try db.setDocumentExpiration(withID: "gone", expiration: date(500))
            try db.deleteDocument(try #require(try db.document(withID: "gone")))
            try save(db, "kept")
            try db.deleteDocument(try #require(try db.document(withID: "kept")))
            try db.close()
        }
        let db = try open(dir, clock)   // policy off
        clock.advance(by: 200)
        db.waitForExpirySweeper()
        #expect(try db.revisionTree(withID: "kept") != nil)
        #expect(try db.revisionTree(withID: "gone") != nil)
        // The eviction times are dropped; the expiration stays and still applies.
        #expect(try db.expiryRecord(Array("kept".utf8)) == nil)
        #expect(try db.expiryRecord(Array("gone".utf8)) == ExpiryRecord(expiration: UInt64(Self.start) + 500))
        #expect(try indexCounts(db) == (1, 1))
        clock.advance(by: 300)
        db.waitForExpirySweeper()
        #expect(try db.revisionTree(withID: "gone") == nil)

        var config = DatabaseConfiguration(directory: dir.path)
        for bad in [-1, Double.nan, .infinity] {
            config.tombstoneMaxAge = bad
            #expect(setteeError { _ = try Database(name: "other", config: config) }?.code == .invalidParameter)
        }
        config.tombstoneMaxAge = 0
        #expect(config != DatabaseConfiguration(directory: dir.path))
    }

    // MARK: - Lifecycle and format

    @Test func closingStopsTheSweeperAndDeletingWorks() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let db = try open(dir, clock)
        try save(db, "doc")
        try db.setDocumentExpiration(withID: "doc", expiration: date(10))
        let sweeper = db.core.parts.expiry.sweeper
        try db.delete()   // closes: the sweeper thread ends before the files go
        #expect(sweeper.alarm.isStopped)
        #expect(!Database.exists(withName: "db", inDirectory: dir.path))
        clock.advance(by: 100)   // rings a stopped alarm: nothing happens
        #expect(sweeper.lastError.withLock { $0 } == nil)
    }

    @Test func olderDatabasesAreUpgradedOnOpen() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        func setFormat(_ v: UInt64) throws {
            let store = try Store(directory: dir.path + "/db.settee")
            try store.write { tx in
                let meta = try #require(tx.tree(named: "db.meta"))
                try tx.put(Array("format".utf8), withUnsafeBytes(of: v.littleEndian, Array.init), in: meta)
            }
            try store.close()
        }
        func format() throws -> UInt64? {
            let store = try Store(directory: dir.path + "/db.settee")
            defer { try? store.close() }
            return try store.read { tx in
                try tx.value(forKey: Array("format".utf8), in: try #require(tx.tree(named: "db.meta")))
                    .map { $0.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) } }
            }
        }
        try open(dir, clock).close()
        #expect(try format() == DatabaseFile.formatVersion)
        for old: UInt64 in [1, 2, 3, 4] {
            try setFormat(old)
            let db = try open(dir, clock)
            try save(db, "doc-\(old)")
            try db.setDocumentExpiration(withID: "doc-\(old)", expiration: date(10))
            try db.close()
            #expect(try format() == DatabaseFile.formatVersion)
        }
        try setFormat(DatabaseFile.formatVersion + 1)
        #expect(setteeError { _ = try open(dir, clock) }?.code == .versionMismatch)
    }

    @Test func expiryRecordsRoundTripAndRejectDamage() throws {
        for r in [ExpiryRecord(expiration: 7), ExpiryRecord(eviction: 9), ExpiryRecord(expiration: 1, eviction: .max)] {
            #expect(try r.encoded().withUnsafeBytes { try ExpiryRecord(decoding: $0) } == r)
        }
        #expect(ExpiryRecord(expiration: 5, eviction: 3).due == 3)
        for bad: [UInt8] in [[], [0], [4, 0, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0], [1] + [UInt8](repeating: 0, count: 9), [3] + [UInt8](repeating: 0, count: 8)] {
            #expect(throws: SetteeError.self) { try bad.withUnsafeBytes { try ExpiryRecord(decoding: $0) } }
        }
    }

    // MARK: - Wall clock

    /// The one test on real time: an expiration a second or two ahead is purged by the sweeper's
    /// timed sleep (nothing rings it).
    @Test func anExpirationOnTheWallClockComes() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try save(db, "soon")
        try save(db, "later")
        try save(db, "never")
        let log = PurgeLog(db)
        // The sweeper sleeps towards the year 4001 first (a timed wait cannot take every date).
        try db.setDocumentExpiration(withID: "never", expiration: .distantFuture)
        db.waitForExpirySweeper()
        try db.setDocumentExpiration(withID: "later", expiration: Date(timeIntervalSinceNow: 3600))
        try db.setDocumentExpiration(withID: "soon", expiration: Date(timeIntervalSinceNow: 1.5))
        #expect(log.wait(seconds: 60))
        #expect(log.purgedIDs == ["soon"])
        #expect(try db.document(withID: "later") != nil)
        db.waitForExpirySweeper()
        #expect(try db.document(withID: "never") != nil)
        #expect(db.core.parts.expiry.sweeper.lastError.withLock { $0 } == nil)
    }
}

extension Database {
    /// The sweeper's next due time, read from the index (tests).
    func nextDueForTests() throws -> UInt64? { try core.nextDue() }
}

extension HeavyTests {
    /// A hundred thousand documents expiring in the same second are all purged, in batches.
    @Suite struct ExpirationBatchTests {
        @Test func hundredThousandDocumentsExpiringInOneSecondAreAllPurged() throws {
            let dir = try TemporaryDirectory()
            let clock = ManualClock()
            var config = DatabaseConfiguration(directory: dir.path)
            config.fullSync = false
            let db = try Database(name: "db", config: config, openFile: nil, clock: clock)
            let total = 100_000
            let due = Date(timeIntervalSince1970: ExpirationTests.start + 60)
            for start in stride(from: 0, to: total, by: 10_000) {
                try db.inBatch {
                    let batch = (start ..< start + 10_000).map { rev("doc-\($0)", "1-a", ["1-a"], ["i": .int(Int64($0))]) }
                    let outcomes = try db.insertRevisions(batch)
                    if outcomes.contains(where: { $0 != .inserted }) { Issue.record("batch at \(start)") }
                    for i in start ..< start + 10_000 { try db.setDocumentExpiration(withID: "doc-\(i)", expiration: due) }
                }
            }
            #expect(try db.count == UInt64(total))
            let log = PurgeLog(db, expecting: total)
            clock.advance(by: 60)
            #expect(log.wait(seconds: 600))
            db.waitForExpirySweeper()
            #expect(try db.count == 0)
            #expect(try db.lastSequence == UInt64(2 * total))
            #expect(Set(log.purgedIDs).count == total)
            // Bounded batches: many transactions, none over the batch size.
            let sizes = log.transactions.value
            #expect(sizes.count >= total / DatabaseCore.expiryBatchSize)
            #expect(sizes.allSatisfy { $0 <= DatabaseCore.expiryBatchSize })
            let counts = try db.core.store.read { tx in
                (try tx.count(in: db.core.trees.expiry), try tx.count(in: db.core.trees.expiryByID), try tx.count(in: db.core.trees.byID))
            }
            #expect(counts == (0, 0, 0))
        }
    }
}
