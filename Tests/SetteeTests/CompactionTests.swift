import Foundation
import Synchronization
import Testing
@_spi(Replication) @testable import Settee

/// What a database holds, as a user sees it: every document's tree shape, winner, body and
/// sequence, plus the counters. Compaction must leave all of it as it was.
private func contents(_ db: Database) throws -> [String] {
    var out: [String] = ["count \(try db.count)", "seq \(try db.lastSequence)"]
    var options = AllDocumentsOptions()
    options.includeDeleted = true
    try db.forEachDocument(options) { doc in
        let tree = try db.revisionTree(withID: doc.id)
        let leaves = try db.conflictingRevisions(withID: doc.id).map { "\($0.revisionID ?? "")=\(String(decoding: $0.body, as: UTF8.self))" }
        out.append("\(doc.id) \(doc.revisionID ?? "") \(doc.sequence) \(doc.isDeleted) \(String(decoding: doc.body, as: UTF8.self)) "
                   + "\(tree?.revisions.map { "\($0.revisionID)<\($0.parentRevisionID ?? "")" } ?? []) \(leaves)")
        return true
    }
    for c in try db.changes(since: 0) { out.append("change \(c.sequence) \(c.documentID) \(c.revisionID) \(c.leafRevisionIDs)") }
    return out
}

private func logSize(_ db: Database) -> UInt64 {
    let attributes = try? FileManager.default.attributesOfItem(atPath: db.path + "/log")
    return (attributes?[.size] as? NSNumber)?.uint64Value ?? 0
}

@Suite struct CompactionTests {
    @Test func compactionDropsOldBodiesAndKeepsWhatUsersSee() throws {
        let dir = try TemporaryDirectory()
        var config = DatabaseConfiguration(directory: dir.path)
        config.fullSync = false
        config.autoCompaction = false
        let db = try Database(name: "db", config: config)
        let filler = String(repeating: "x", count: 600)
        for i in 0..<300 {
            let m = MutableDocument(id: "doc-\(i)", data: ["v": 0, "filler": .string(filler)])
            try db.saveDocument(m)
            for v in 1...4 {
                m.setInt(v, forKey: "v")
                try db.saveDocument(m)
            }
            if i % 10 == 0 { try db.deleteDocument(m, concurrencyControl: .lastWriteWins) }
        }
        try db.purgeDocument(withID: "doc-7")
        try db.saveLocalDocument(["checkpoint": 42], withID: "cp")
        let before = try contents(db)
        let oldRevision = try #require(try db.revisionTree(withID: "doc-1")?.revisions.first?.revisionID)
        #expect(try db.document(withID: "doc-1", revisionID: oldRevision) != nil)

        var reports: [CompactionProgress] = []
        let report = try db.compact { reports.append($0); return true }
        #expect(report.sizeAfter < report.sizeBefore / 3, "\(report)")
        #expect(report.documents == 299)
        #expect(!reports.isEmpty && reports.last!.bytesDone <= reports.last!.bytesTotal)
        #expect(try contents(db) == before)
        // A body that is neither a leaf nor a conflict's base is gone; its revision ID stays.
        #expect(try db.document(withID: "doc-1", revisionID: oldRevision) == nil)
        #expect(try db.revisionTree(withID: "doc-1")?.revisions.first?.revisionID == oldRevision)
        #expect(try db.localDocument(withID: "cp")?["checkpoint"] == 42)
        #expect(!FileManager.default.fileExists(atPath: db.path + "/log.compact"))

        // Still writable, and the same after reopening.
        try db.saveDocument(MutableDocument(id: "after", data: ["ok": true]))
        let after = try contents(db)
        try db.close()
        let again = try Database(name: "db", config: config)
        #expect(try contents(again) == after)
    }

    @Test func conflictLeavesAndTheirCommonAncestorSurviveRepeatedCompaction() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let revs = try saveRevisions(db, id: "doc", values: [1, 2, 3])
        let (r1, r2, r3) = (revs[0], revs[1], revs[2])
        try db.insertRevision(rev("doc", "3-other", ["3-other", r2, r1], ["v": 30]))
        // A tombstone that keeps a routing property is a leaf too.
        try db.insertRevision(rev("doc", "4-gone", ["4-gone", "3-gone", r2, r1], deleted: true, ["worker": "w1"]))

        for _ in 0..<3 { try db.compact() }
        #expect(try db.document(withID: "doc", revisionID: r1) == nil)
        #expect(try db.document(withID: "doc", revisionID: r2)?.int(forKey: "v") == 2)
        #expect(try db.document(withID: "doc", revisionID: r3)?.int(forKey: "v") == 3)
        #expect(try db.document(withID: "doc", revisionID: "3-other")?.int(forKey: "v") == 30)
        #expect(try db.document(withID: "doc", revisionID: "4-gone")?.string(forKey: "worker") == "w1")
        #expect(Set(try db.conflictingRevisions(withID: "doc").compactMap(\.revisionID)) == [r3, "3-other"])
        var conflictsOnly = AllDocumentsOptions()
        conflictsOnly.onlyConflicts = true
        let onlyConflicts = try db.allDocuments(conflictsOnly).readAll().map(\.id)
        #expect(onlyConflicts == ["doc"])

        // A three-way merge is still possible after compaction.
        let merged = MutableDocument(id: "doc", data: ["v": 33])
        try db.resolveConflict(withID: "doc", winningRevisionID: r3, mergedProperties: merged.toDictionary())
        #expect(try db.conflictingRevisions(withID: "doc").count == 1)
    }

    @Test func historyIsPrunedToTheConfiguredDepthAtCompaction() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, maxRevTreeDepth: 50)
        let m = MutableDocument(id: "doc", data: ["v": 0])
        for v in 1...40 {
            m.setInt(v, forKey: "v")
            try db.saveDocument(m)
        }
        #expect(try db.revisionTree(withID: "doc")?.revisions.count == 40)
        try db.close()
        let small = try openDatabase(dir, maxRevTreeDepth: 10)
        try small.compact()
        let tree = try #require(try small.revisionTree(withID: "doc"))
        #expect(tree.revisions.count == 10)
        #expect(tree.revisions.filter(\.hasBody).map(\.revisionID) == [tree.currentRevisionID])
        #expect(try small.document(withID: "doc")?.int(forKey: "v") == 40)
    }

    @Test func cancellingLeavesTheDatabaseAsItWas() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        for i in 0..<3_000 { try db.saveDocument(MutableDocument(id: String(format: "d%05d", i), data: ["i": .int(Int64(i))])) }
        let before = try contents(db)
        var calls = 0
        let error = setteeError { try db.compact { _ in calls += 1; return calls < 2 } }
        #expect(error?.code == .cancelled)
        #expect(!FileManager.default.fileExists(atPath: db.path + "/log.compact"))
        #expect(try contents(db) == before)
        try db.saveDocument(MutableDocument(id: "later", data: [:]))
        try db.compact()
        #expect(try db.count == 3_001)
    }

    @Test func anUnfinishedCompactionFileIsIgnoredAndRemovedOnOpen() throws {
        let dir = try TemporaryDirectory()
        var db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "a", data: ["v": 1]))
        let path = db.path
        try db.close()
        // What a crash in the middle of a compaction leaves: a partial new log.
        try Data(repeating: 7, count: 10_000).write(to: URL(fileURLWithPath: path + "/log.compact"))
        db = try openDatabase(dir)
        #expect(try db.document(withID: "a")?.int(forKey: "v") == 1)
        #expect(!FileManager.default.fileExists(atPath: path + "/log.compact"))
    }

    @Test func writersAndReadersKeepGoingDuringCompactionAndNothingIsLost() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let seed = UInt64.random(in: 1...UInt64.max)
        print("writersAndReadersKeepGoingDuringCompaction seed \(seed)")
        var rng = SeededGenerator(seed: seed)
        for i in 0..<5_000 {
            let m = MutableDocument(id: "d\(i)", data: ["v": 0, "pad": .string(String(repeating: "p", count: Int.random(in: 0...800, using: &rng)))])
            try db.saveDocument(m)
        }
        let stop = Atomic<Bool>(false)
        let written = Locked<[String: Int]>([:])
        let failures = Locked<[String]>([])
        let writer = Thread {
            var n = 0
            while !stop.load(ordering: .relaxed) {
                let id = "d\(n % 7_000)"
                do {
                    let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
                    m.setInt(n, forKey: "v")
                    try db.saveDocument(m)
                    written.withLock { $0[id] = n }
                    if n % 97 == 0 {
                        try db.purgeDocument(withID: id)
                        written.withLock { $0[id] = -1 }
                    }
                } catch { failures.withLock { $0.append("write \(id): \(error)") } }
                n += 1
            }
        }
        let reader = Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                do { _ = try db.document(withID: "d\(i % 5_000)") } catch { failures.withLock { $0.append("read: \(error)") } }
                i += 1
            }
        }
        writer.start()
        reader.start()
        for _ in 0..<3 { try db.compact() }
        stop.store(true, ordering: .relaxed)
        while writer.isExecuting || reader.isExecuting { usleep(1_000) }
        #expect(failures.value.isEmpty, "\(failures.value.prefix(3))")
        for (id, v) in written.value {
            if v < 0 { #expect(try db.document(withID: id) == nil) } else { #expect(try db.document(withID: id)?.int(forKey: "v") == v, "\(id)") }
        }
        let snapshot = try contents(db)
        try db.close()
        #expect(try contents(try openDatabase(dir)) == snapshot)
    }

    @Test func blobsNothingReferencesAreDeleted() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let m = MutableDocument(id: "photo")
        let first = Blob(contentType: "image/png", data: Data(repeating: 1, count: 5_000))
        m.setBlob(first, forKey: "image")
        try db.saveDocument(m)
        let second = Blob(contentType: "image/png", data: Data(repeating: 2, count: 5_000))
        m.setBlob(second, forKey: "image")
        try db.saveDocument(m)
        let kept = Blob(contentType: "text/plain", data: Data("kept".utf8))
        let other = MutableDocument(id: "other")
        other.setBlob(kept, forKey: "a")
        try db.saveDocument(other)
        try db.deleteDocument(other, concurrencyControl: .lastWriteWins)
        #expect(try db.blob(withDigest: first.digest) != nil)
        // Saved ahead of the document that will reference it, as a replicator does: kept.
        let ahead = Blob(contentType: "text/plain", data: Data("ahead".utf8))
        try db.saveBlob(ahead)

        // An unreferenced blob goes once it is older than the retention (an hour): age the others.
        for blob in [first, second, kept] { try age(blob, in: db, seconds: 2 * 3600) }
        var report = try db.compact()
        #expect(report.blobsDeleted == 2)   // the first image, and the deleted document's blob
        #expect(try db.blob(withDigest: first.digest) == nil)
        #expect(try db.document(withID: "photo")?.blob(forKey: "image")?.content == second.content)
        #expect(try db.blob(withDigest: kept.digest) == nil)
        #expect(try db.blob(withDigest: ahead.digest) != nil)
        let later = MutableDocument(id: "later")
        later.setBlob(try db.blob(withDigest: ahead.digest, contentType: "text/plain"), forKey: "b")
        try db.saveDocument(later)
        #expect(try db.document(withID: "later")?.blob(forKey: "b")?.content == ahead.content)

        // Within the hour, even an unreferenced blob stays; past it, it goes.
        try db.purgeDocument(withID: "later")
        report = try db.compact()
        #expect(report.blobsDeleted == 0)
        try age(ahead, in: db, seconds: 3600 + 60)
        report = try db.compact()
        #expect(report.blobsDeleted == 1)
        #expect(try db.blob(withDigest: ahead.digest) == nil)
    }

    private func age(_ blob: Blob, in db: Database, seconds: Int) throws {
        let path = try #require(db.core.blobs.path(forDigest: blob.digest))
        let then = time(nil) - seconds
        var times = [timespec(tv_sec: then, tv_nsec: 0), timespec(tv_sec: then, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    }

    /// A save carrying a blob whose content is already stored (written before the compaction
    /// started, referenced by nothing) finds it there, then waits for the write lock; a compaction
    /// that holds the lock meanwhile collects that file. The save must still succeed, with its blob
    /// (the document crash round hit this: `notFound` from the save, with compactions running on
    /// another thread).
    @Test func aSaveWaitingForTheLockKeepsItsBlobThroughACompaction() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let blob = Blob(contentType: "application/octet-stream", data: Data(repeating: 7, count: 3_000))
        try db.saveBlob(blob)
        let path = try #require(db.core.blobs.path(forDigest: blob.digest))
        var old = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)

        let saving = DispatchSemaphore(value: 0)
        let saved = DispatchSemaphore(value: 0)
        let outcome = Mutex<String>("")
        let saver = Thread {
            let m = MutableDocument(id: "doc")
            m.setBlob(blob, forKey: "file")
            saving.signal()
            do {
                try db.saveDocument(m)
                outcome.withLock { $0 = "saved" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
            saved.signal()
        }
        // The write lock held as a compaction's swap holds it: the save installs its blob (the
        // file is there), then waits; the compaction collects what nothing it kept references.
        try db.inBatch {
            saver.start()
            saving.wait()
            usleep(200_000)
            _ = try db.core.collectBlobs(referenced: [], olderThan: Date())
        }
        saved.wait()
        #expect(outcome.withLock { $0 } == "saved")
        #expect(try db.document(withID: "doc")?.blob(forKey: "file")?.content == blob.content)
    }

    @Test func automaticCompactionRunsWhenDeadSpacePassesTheThreshold() throws {
        let dir = try TemporaryDirectory()
        var config = DatabaseConfiguration(directory: dir.path)
        config.fullSync = false
        config.autoCompactionMinimumSize = 16 << 20
        let db = try Database(name: "db", config: config)
        // Random text, so that LZ4 cannot shrink the bodies and the file grows fast.
        var rng = SystemRandomNumberGenerator()
        let pad = String((0..<2_000).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement(using: &rng)! })
        let m = MutableDocument(id: "hot", data: ["pad": .string(pad)])
        var peak: UInt64 = 0
        var shrank = false
        for v in 0..<20_000 {
            m.setInt(v, forKey: "v")
            try db.saveDocument(m)
            let size = logSize(db)
            peak = max(peak, size)
            // The file is preallocated 4 MiB ahead, so only a large file shows a clear drop.
            if peak > 16 << 20, size < peak / 2 {
                shrank = true
                break
            }
        }
        #expect(shrank, "the file grew to \(peak) bytes and never shrank")
        #expect(try db.document(withID: "hot")?.string(forKey: "pad") == pad)
        // The background status counts it, with no failure.
        let deadline = Date(timeIntervalSinceNow: 10)
        while db.backgroundStatus.automaticCompactions == 0 && Date() < deadline { usleep(10_000) }
        #expect(db.backgroundStatus.automaticCompactions >= 1)
        #expect(db.backgroundStatus.lastCompactionFailure == nil)
        #expect(db.backgroundStatus.lastExpiryFailure == nil)

        var off = config
        off.autoCompaction = false
        let dir2 = try TemporaryDirectory()
        off.directory = dir2.path
        let manual = try Database(name: "db", config: off)
        for v in 0..<12_000 {
            m.setInt(v, forKey: "v")
            try manual.saveDocument(m)
        }
        #expect(logSize(manual) > 20 << 20)
    }
}

/// A clock that only moves when told and never wakes the sweeper, so that what is due is left for
/// compaction to find.
private final class StillClock: ExpirationClock, @unchecked Sendable {
    private let time = Mutex<TimeInterval>(1_700_000_000)
    func now() -> Date { Date(timeIntervalSince1970: time.withLock { $0 }) }
    func set(_ t: TimeInterval) { time.withLock { $0 = t } }
    func sleep(until deadline: Date?, alarm: SweepAlarm) {
        if let deadline, now() >= deadline { return }
        alarm.wait(until: nil)
    }
}

@Suite struct CompactionExpiryTests {
    @Test func compactionPurgesExpiredDocumentsFirstAndObserversHear() throws {
        let dir = try TemporaryDirectory()
        let clock = StillClock()
        var config = DatabaseConfiguration(directory: dir.path)
        config.fullSync = false
        let db = try Database(name: "db", config: config, openFile: nil, clock: clock)
        for i in 0..<10 { try db.saveDocument(MutableDocument(id: "d\(i)", data: ["i": .int(Int64(i))])) }
        for i in 0..<4 { try db.setDocumentExpiration(withID: "d\(i)", expiration: Date(timeIntervalSince1970: 1_700_000_010)) }
        let purged = Locked<[String]>([])
        let token = db.addChangeListener { change in
            purged.withLock { $0 += change.changes.filter(\.isPurged).map(\.documentID) }
        }
        defer { token.remove() }
        clock.set(1_700_000_020)
        try db.compact()
        #expect(try db.count == 6)
        for i in 0..<4 {
            #expect(try db.document(withID: "d\(i)") == nil)
            #expect(try db.getDocumentExpiration(withID: "d\(i)") == nil)
        }
        #expect(try db.document(withID: "d5")?.int(forKey: "i") == 5)
        let deadline = Date().addingTimeInterval(5)
        while purged.value.count < 4 && Date() < deadline { usleep(1_000) }
        #expect(Set(purged.value) == ["d0", "d1", "d2", "d3"])
    }
}
