import Foundation
@_spi(Replication) import Settee
import Testing
@_spi(Replication) @testable import SetteeReplicator

@Suite struct ReplicatorBasicsTests {
    @Test func pushCopiesDocumentsTombstonesAndBlobs() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        for i in 0 ..< 120 { try save(a, "doc-\(i)", ["n": .int(Int64(i))]) }
        try save(a, "doc-3", ["n": 33])
        let gone = MutableDocument(id: "gone", data: ["x": 1])
        try await a.saveDocument(gone)
        try await a.deleteDocument(try #require(try a.document(withID: "gone")))
        let photo = MutableDocument(id: "photo")
        photo.setBlob(Blob(contentType: "image/png", data: Data(repeating: 7, count: 5000)), forKey: "image")
        try await a.saveDocument(photo)

        let recorder = Recorder()
        let status = await replicate(a, b, .push, recorder: recorder) { $0.batchSize = 50 }
        #expect(status.activity == .stopped)
        #expect(status.error == nil)
        #expect(status.progress.completed == status.progress.total)
        #expect(status.progress.total == 122)
        #expect(try shapes(a) == shapes(b))
        #expect(try b.count == 121)
        #expect(try await b.document(withID: "gone") == nil)
        #expect(try await b.revisionTree(withID: "gone")?.revisions.last?.isDeleted == true)
        #expect(try await b.document(withID: "photo")?.blob(forKey: "image")?.content == Data(repeating: 7, count: 5000))
        #expect(await recorder.waitFor { $0.count == 122 })
        #expect(recorder.documents.value.allSatisfy { $0.0 == .push && $0.1.error == nil })
        #expect(recorder.documents.value.contains { $0.1.id == "gone" && $0.1.flags.contains(.deleted) })
    }

    @Test func pullAndBothWays() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        for i in 0 ..< 30 { try save(b, "b-\(i)", ["n": .int(Int64(i))]) }
        for i in 0 ..< 20 { try save(a, "a-\(i)", ["n": .int(Int64(i))]) }
        let pulled = await replicate(a, b, .pull)
        #expect(pulled.error == nil)
        #expect(try a.count == 50 && b.count == 30)
        let both = await replicate(a, b, .pushAndPull)
        #expect(both.error == nil)
        #expect(try a.count == 50 && b.count == 50)
        #expect(try shapes(a) == shapes(b))
    }

    @Test func checkpointsFollowTheCouchDBProtocol() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        for i in 0 ..< 10 { try save(a, "doc-\(i)", ["n": .int(Int64(i))]) }
        var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
        config.replicatorType = .push
        let replicator = Replicator(config: config)
        replicator.start()
        _ = await replicator.waitUntilStopped()
        let id = "_local/" + replicator.replicationID(.push)
        let onA = try #require(try a.localDocument(withID: id))
        let onB = try #require(try b.localDocument(withID: id))
        #expect(onA["session_id"] != nil && onA["session_id"] == onB["session_id"])
        #expect(try onA["source_last_seq"] == .int(Int64(a.lastSequence)))
        #expect(onB["source_last_seq"] == onA["source_last_seq"])
        let history = try #require(onA["history"]?.arrayValue)
        #expect(history.count == 1)
        #expect(history[0].objectValue?["recorded_seq"] == onA["source_last_seq"])
        #expect(history[0].objectValue?["docs_written"] == 10)

        // Other sessions: IDs differ per direction and per filter, not per continuity.
        #expect(replicator.replicationID(.push) != replicator.replicationID(.pull))
        var filtered = config
        filtered.documentIDs = ["doc-1"]
        #expect(Replicator(config: filtered).replicationID(.push) != replicator.replicationID(.push))
        var continuous = config
        continuous.continuous = true
        #expect(Replicator(config: continuous).replicationID(.push) == replicator.replicationID(.push))

        // The session IDs no longer match (the target's checkpoint was rewritten by another
        // session): the histories' newest common session gives the resume point.
        for i in 10 ..< 15 { try save(a, "doc-\(i)", ["n": .int(Int64(i))]) }
        replicator.start()
        _ = await replicator.waitUntilStopped()
        var rewritten = try #require(try b.localDocument(withID: id))
        let afterSecond = rewritten["source_last_seq"]
        rewritten["session_id"] = "someone-else"
        rewritten["history"] = .array(Array(try #require(rewritten["history"]?.arrayValue).dropFirst()))
        try await b.saveLocalDocument(rewritten, withID: id)
        let counting = CountingPeer(DatabaseEndpoint(database: b))
        var again = ReplicatorConfiguration(database: a, target: counting)
        again.replicatorType = .push
        let third = Replicator(config: again)
        third.start()
        _ = await third.waitUntilStopped()
        // Resumed from the first session's recorded_seq (10 documents in), not from zero and
        // not from the second session's end.
        #expect(counting.counts.value.revsDiffDocuments.count == 5)
        #expect(try afterSecond == .int(Int64(a.lastSequence)))

        // start(reset:) ignores checkpoints: every change is looked at again, nothing is re-sent.
        let resetPeer = CountingPeer(DatabaseEndpoint(database: b))
        var resetConfig = ReplicatorConfiguration(database: a, target: resetPeer)
        resetConfig.replicatorType = .push
        let resetting = Replicator(config: resetConfig)
        resetting.start(reset: true)
        _ = await resetting.waitUntilStopped()
        #expect(resetPeer.counts.value.revsDiffDocuments.count == 15)
        #expect(resetPeer.counts.value.inserted.isEmpty)
    }

    @Test func aNoOpReplicationScansNothing() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        for i in 0 ..< 300 { try save(a, "doc-\(i)", ["n": .int(Int64(i))]) }
        for i in 0 ..< 200 { try save(b, "other-\(i)", ["n": .int(Int64(i))]) }
        // One push-and-pull leaves both checkpoints at the end of both feeds (each direction made
        // a last pass over the other's echo), so the next run is the no-op.
        #expect(await replicate(a, b).error == nil)
        let peer = CountingPeer(DatabaseEndpoint(database: b))
        let status = await replicate(a, peer)
        #expect(status.error == nil)
        let c = peer.counts.value
        #expect(c.changesCalls == 0)            // pull: checkpoint == the source's last sequence
        #expect(c.revsDiffDocuments.isEmpty)    // push: nothing after its checkpoint either
        #expect(c.insertCalls == 0)
        #expect(status.progress.total == 0)
    }

    @Test func continuousReplicationIdlesAndFollowsChanges() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        try save(a, "first", ["n": 1])
        var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
        config.continuous = true
        let replicator = Replicator(config: config)
        let seen = Locked<[ReplicatorActivity]>([])
        let token = replicator.addChangeListener { s in seen.withLock { $0.append(s.activity) } }
        replicator.start()
        #expect(await waitFor(replicator, .idle))
        #expect(try await b.document(withID: "first") != nil)
        try save(a, "from-a", ["n": 2])
        #expect(try await eventually { try b.document(withID: "from-a") != nil })
        try save(b, "from-b", ["n": 3])
        #expect(try await eventually { try a.document(withID: "from-b") != nil })
        #expect(await waitFor(replicator, .idle))
        replicator.stop()
        let final = await replicator.waitUntilStopped()
        #expect(final.activity == .stopped && final.error == nil)
        #expect(await eventually { seen.value.last == .stopped })
        #expect(seen.value.contains(.connecting) && seen.value.contains(.busy) && seen.value.contains(.idle))
        token.remove()
        // Stopped: changes stay local.
        try save(a, "after-stop", ["n": 4])
        try await Task.sleep(for: .milliseconds(50))
        #expect(try await b.document(withID: "after-stop") == nil)
    }

    @Test func statusStream() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        try save(a, "x", ["n": 1])
        let replicator = Replicator(config: ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b)))
        let stream = replicator.statusChanges()
        replicator.start()
        var activities: [ReplicatorActivity] = []
        for await status in stream {
            activities.append(status.activity)
            if activities.count > 1 && status.activity == .stopped { break }
        }
        #expect(activities.first == .stopped)    // the current status comes first
        #expect(activities.contains(.busy))
        #expect(activities.last == .stopped)
    }

    @Test func stoppedMidBatchResumesFromItsCheckpoint() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        try a.inBatch { for i in 0 ..< 2000 { try save(a, String(format: "doc-%05d", i), ["n": .int(Int64(i))]) } }
        let peer = CountingPeer(DatabaseEndpoint(database: b))
        var config = ReplicatorConfiguration(database: a, target: peer)
        config.replicatorType = .push
        config.batchSize = 100
        let replicator = Replicator(config: config)
        // The stop arrives while the fifth batch is being inserted: that batch is acknowledged.
        peer.onInsert.withLock { $0 = { n in if n == 5 { replicator.stop() } } }
        replicator.start()
        let first = await replicator.waitUntilStopped()
        #expect(first.error == nil)
        let firstRun = peer.counts.value
        #expect(firstRun.insertCalls == 5)
        #expect(firstRun.inserted.count == 500)
        #expect(try b.count == 500)

        peer.onInsert.withLock { $0 = nil }
        peer.counts.withLock { $0 = CountingPeer.Counts() }
        replicator.start()
        let second = await replicator.waitUntilStopped()
        #expect(second.error == nil)
        let secondRun = peer.counts.value
        #expect(try b.count == 2000)
        #expect(try shapes(a) == shapes(b))
        // Nothing acknowledged in the first run was offered or sent again.
        #expect(Set(secondRun.inserted).isDisjoint(with: firstRun.inserted))
        #expect(secondRun.inserted.count == 1500)
        #expect(Set(secondRun.revsDiffDocuments).isDisjoint(with: firstRun.inserted))
    }

    @Test func pendingDocuments() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        for i in 0 ..< 5 { try save(a, "doc-\(i)", ["n": .int(Int64(i))]) }
        var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
        config.replicatorType = .push
        let replicator = Replicator(config: config)
        #expect(try replicator.pendingDocumentIDs() == Set((0 ..< 5).map { "doc-\($0)" }))
        #expect(try replicator.isDocumentPending("doc-2"))
        #expect(try !replicator.isDocumentPending("nope"))
        replicator.start()
        _ = await replicator.waitUntilStopped()
        #expect(try replicator.pendingDocumentIDs().isEmpty)
        #expect(try !replicator.isDocumentPending("doc-2"))
        try save(a, "doc-2", ["n": 22])
        #expect(try replicator.pendingDocumentIDs() == ["doc-2"])
        #expect(try replicator.isDocumentPending("doc-2"))

        var pullOnly = config
        pullOnly.replicatorType = .pull
        #expect(throws: ReplicatorError.self) { try Replicator(config: pullOnly).pendingDocumentIDs() }
    }
}
