import Foundation
import Testing
@_spi(Replication) @_spi(Server) @testable import Settee

/// Routing (channels and grants stored with each revision and indexed by sequence): what the
/// sync server builds Sync Gateway's channels on.
@Suite struct RoutingTests {
    /// The router of Sync Gateway's default sync function: `channel(doc.channels)`; a tombstone
    /// keeps its parent's channels; `grant` gives its channels to `to`.
    static let router: Router = { input in
        if input.revision.isDeleted { return input.parentRouting ?? RevisionRouting() }
        let channels = Set(input.revision.array(forKey: "channels")?.compactMap(\.stringValue) ?? [])
        var access: [String: Set<String>] = [:]
        if let to = input.revision.string(forKey: "to") {
            access[to] = Set(input.revision.array(forKey: "grant")?.compactMap(\.stringValue) ?? [])
        }
        if input.revision.bool(forKey: "reject") { throw SetteeError(.unauthorized, "log in") }
        return RevisionRouting(channels: channels, access: access)
    }

    func save(_ db: Database, _ id: String, _ data: [String: JSONValue]) throws {
        let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
        m.setData(data)
        try db.saveDocument(m)
    }

    /// An older revision, readable while its body is kept, keeps the channels it was saved in:
    /// moving the document to another channel does not make its old bodies readable there.
    @Test func olderRevisionsKeepTheChannelsTheyHad() throws {
        let dir = try TemporaryDirectory()
        var db = try openDatabase(dir)
        db.setRouter(Self.router)
        var revs: [String] = []
        for (channel, v) in [("red", 1), ("red", 2), ("blue", 3), ("blue", 4), ("green", 5)] {
            try save(db, "a", ["channels": [.string(channel)], "v": .int(Int64(v))])
            revs.append(try #require(try db.document(withID: "a")?.revisionID))
            // Edits that stay in the same channels list nothing.
            if v == 2 { #expect(try db.routing(ofDocumentWithID: "a")?.innerChannels.isEmpty == true) }
        }
        func channels(_ rev: String) throws -> Set<String> { try #require(try db.routing(ofDocumentWithID: "a")).channels(ofRevision: rev) }
        #expect(try channels(revs[0]) == ["red"] && channels(revs[1]) == ["red"])
        #expect(try channels(revs[2]) == ["blue"] && channels(revs[3]) == ["blue"])
        #expect(try channels(revs[4]) == ["green"])
        // A branch off the second revision, in its own channel, then edited on its branch.
        let side = "3-side"
        #expect(try db.insertRevisions([rev("a", side, [side, revs[1]], ["channels": ["side"]])]) == [.inserted])
        #expect(try channels(side) == ["side"])
        let onSide = try #require(try db.document(withID: "a", revisionID: side)).toMutable()
        onSide.setData(["channels": ["green"], "v": 6])
        _ = try db.saveDocument(onSide, concurrencyControl: .failOnConflict)
        #expect(try channels(side) == ["side"] && channels(revs[0]) == ["red"] && channels(revs[2]) == ["blue"])
        // Kept across a reopen.
        try db.close()
        db = try openDatabase(dir)
        db.setRouter(Self.router)
        #expect(try channels(revs[0]) == ["red"] && channels(revs[3]) == ["blue"] && channels(side) == ["side"])
        // Compaction drops the old bodies; the next write drops what they had.
        _ = try db.compact()
        #expect(try db.document(withID: "a", revisionID: revs[0]) == nil)
        try save(db, "a", ["channels": ["green"], "v": 7])
        let kept = try #require(try db.routing(ofDocumentWithID: "a")).innerChannels
        let tree = try #require(try db.revisionTree(withID: "a"))
        #expect(Set(kept.keys).isSubset(of: Set(tree.revisions.filter(\.hasBody).map(\.revisionID))), "\(kept)")
        #expect(try db.check().problems.isEmpty)
    }

    @Test func channelLogsFollowEachDocumentsLatestChange() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        try save(db, "a", ["channels": ["x", "y"]])
        try save(db, "b", ["channels": ["y"]])
        try save(db, "a", ["channels": ["y"], "v": 2])      // leaves x at seq 3
        let logs = try db.channelChanges([ChannelQuery(channel: "x", after: 0), ChannelQuery(channel: "y", after: 0),
                                          ChannelQuery(channel: "z", after: 0)])
        #expect(logs[0].map(\.documentID) == ["a"])
        #expect(logs[0].map(\.isRemoved) == [true])
        #expect(logs[0].map(\.sequence) == [3])
        #expect(logs[1].map(\.documentID) == ["b", "a"])
        #expect(logs[1].map(\.sequence) == [2, 3])
        #expect(logs[1].allSatisfy { !$0.isRemoved })
        #expect(logs[2].isEmpty)
        // After, through and limit bound each query.
        #expect(try db.channelChanges([ChannelQuery(channel: "y", after: 2)])[0].map(\.documentID) == ["a"])
        #expect(try db.channelChanges([ChannelQuery(channel: "y", after: 0, through: 2)])[0].map(\.documentID) == ["b"])
        #expect(try db.channelChanges([ChannelQuery(channel: "y", after: 0, limit: 1)])[0].count == 1)
        // A channel whose name is another's prefix does not see the other's entries.
        try save(db, "c", ["channels": ["yy"]])
        #expect(try db.channelChanges([ChannelQuery(channel: "y", after: 0)])[0].count == 2)
        let r = try #require(try db.routing(ofDocumentWithID: "a"))
        #expect(r.current.channels == ["y"])
        #expect(r.membership["x"] == ChannelMembership(sequence: 3, isRemoved: true))
        #expect(r.membership["y"] == ChannelMembership(sequence: 3, isRemoved: false))
        // Entering again moves the removal entry back to a member entry.
        try save(db, "a", ["channels": ["x"]])
        let x = try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0]
        #expect(x.count == 1 && !x[0].isRemoved && x[0].sequence == 5)
        #expect(try db.channelChanges([ChannelQuery(channel: "y", after: 0)])[0].last?.isRemoved == true)
    }

    @Test func aDocumentRoutedToNothingKeepsNoRecordUntilItHasAChannel() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        try save(db, "a", ["n": 1])
        try save(db, "a", ["n": 2])
        #expect(try db.routing(ofDocumentWithID: "a") == nil)
        try save(db, "a", ["channels": ["x"]])
        #expect(try db.routing(ofDocumentWithID: "a")?.current.channels == ["x"])
        // Leaving its channel, it keeps the record: the removal entry is in the log.
        try save(db, "a", ["n": 3])
        let r = try #require(try db.routing(ofDocumentWithID: "a"))
        #expect(r.current.channels.isEmpty && r.membership["x"]?.isRemoved == true)
        #expect(try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0].map(\.isRemoved) == [true])
        // A grant alone is something to keep.
        try save(db, "g", ["to": "bob", "grant": ["x"]])
        #expect(try db.routing(ofDocumentWithID: "g")?.current.access == ["bob": ["x"]])
        #expect(try db.grants(to: "bob", kind: .channels).map(\.name) == ["x"])
    }

    @Test func aSimpleDocumentsRoutingLivesInItsSequenceEntry() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        try save(db, "a", ["channels": ["x"]])
        func stored(_ id: String) throws -> Bool {
            try db.core.write { c in try c.tx.withValue(forKey: Array(id.utf8), in: c.trees.routing) { _ in true } ?? false }
        }
        #expect(try !stored("a"))
        let first = try #require(try db.routing(ofDocumentWithID: "a"))
        let seq = try #require(try db.document(withID: "a")).sequence
        #expect(first.current.channels == ["x"] && first.membership["x"] == ChannelMembership(sequence: seq, isRemoved: false))
        // Leaving a channel needs the record (the removal entry's sequence is not the document's).
        try save(db, "a", ["channels": ["y"]])
        #expect(try stored("a"))
        // Purged, it leaves both logs, and a sequence entry naming nothing is never read.
        try db.purgeDocument(withID: "a")
        #expect(try !stored("a"))
        #expect(try db.channelChanges([ChannelQuery(channel: "x", after: 0), ChannelQuery(channel: "y", after: 0)]).allSatisfy(\.isEmpty))
    }

    @Test func formatFiveRecordsAndMemberEntriesStayReadable() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        try save(db, "a", ["channels": ["x"]])
        let doc = try #require(try db.document(withID: "a"))
        let rev = try #require(doc.revisionID)
        let seq = doc.sequence
        // As format 5 wrote it: the record in doc.routing, a member entry naming the document,
        // a sequence entry without routing.
        try db.core.write { c in
            let record = RoutingRecord(simple: RevisionRouting(channels: ["x"]), winner: rev, sequence: seq)
            try c.tx.put(Array("a".utf8), record.encoded(), in: c.trees.routing)
            try c.tx.put(RoutingKey.channel("x", seq),
                         RoutingKey.entry(deleted: false, removed: false, otherLeaves: false, id: "a", rev: rev), in: c.trees.channels)
            try c.tx.put([UInt8](bigEndian: seq), SequenceEntry(flags: [], documentID: "a", revisionID: rev).encoded(),
                         in: c.trees.bySequence)
        }
        #expect(try db.routing(ofDocumentWithID: "a")?.current.channels == ["x"])
        let x = try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0]
        #expect(x.map(\.documentID) == ["a"] && x.map(\.revisionID) == [rev])
        // Its next change (in the same channel: the old revision's channels need no record) writes
        // it the format 6 way and moves its entry.
        try save(db, "a", ["channels": ["x"], "v": 2])
        let now = try #require(try db.document(withID: "a")).sequence
        let after = try db.channelChanges([ChannelQuery(channel: "x", after: 0)])
        #expect(after.map { $0.map(\.sequence) } == [[now]])
        #expect(try db.core.write { c in try c.tx.withValue(forKey: Array("a".utf8), in: c.trees.routing) { _ in true } } == nil)
        #expect(try db.routing(ofDocumentWithID: "a")?.current.channels == ["x"])
    }

    @Test func tombstonesKeepTheirChannelsAndPurgeLeavesEveryLog() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        try save(db, "a", ["channels": ["x"]])
        try db.deleteDocument(try #require(try db.document(withID: "a")))
        let x = try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0]
        #expect(x.count == 1 && x[0].isDeleted && !x[0].isRemoved)
        try db.purgeDocument(withID: "a")
        #expect(try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0].isEmpty)
        #expect(try db.routing(ofDocumentWithID: "a") == nil)
    }

    @Test func grantsAreTimedAndRevocationsKept() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        try save(db, "g", ["to": "alice", "grant": ["x", "y"]])       // seq 1
        try save(db, "h", ["to": "role:staff", "grant": ["z"]])       // seq 2
        var g = try db.grants(to: "alice", kind: .channels).sorted { $0.name < $1.name }
        #expect(g.map(\.name) == ["x", "y"] && g.allSatisfy { !$0.isRevoked && $0.sequence == 1 && $0.documentID == "g" })
        try save(db, "g", ["to": "alice", "grant": ["y", "w"]])       // seq 3: x revoked, w granted, y kept
        g = try db.grants(to: "alice", kind: .channels).sorted { $0.name < $1.name }
        #expect(g.map(\.name) == ["w", "x", "y"])
        #expect(g.map(\.isRevoked) == [false, true, false])
        #expect(g.map(\.sequence) == [3, 3, 1])
        #expect(try db.grants(to: "role:staff", kind: .channels).map(\.name) == ["z"])
        #expect(try db.grants(to: "al", kind: .channels).isEmpty)
        try db.purgeDocument(withID: "h")
        #expect(try db.grants(to: "role:staff", kind: .channels).map(\.isRevoked) == [true])
    }

    /// Each commit that changes grants names the principals it changed them for, so that what
    /// was worked out for anyone else still holds.
    @Test func grantChangesNameWhomEachCommitTouched() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        let v0 = db.grantsVersion
        #expect(db.grantChanges(after: v0) == [:])
        try save(db, "g", ["to": "alice", "grant": ["x"]])
        let v1 = db.grantsVersion
        #expect(v1 == v0 + 1)
        #expect(db.grantChanges(after: v0) == [.channels: ["alice"]])
        try save(db, "plain", ["channels": ["x"]])          // grants nothing: no new version
        #expect(db.grantsVersion == v1)
        try db.inBatch {
            try save(db, "h", ["to": "bob", "grant": ["y"]])
            try save(db, "g", ["to": "carol", "grant": ["x"]])   // alice loses x, carol gains it
        }
        #expect(db.grantChanges(after: v1) == [.channels: ["bob", "alice", "carol"]])
        #expect(db.grantChanges(after: v0) == [.channels: ["alice", "bob", "carol"]])
        // A commit that changes thousands of principals' grants lists none: anyone may have changed.
        let many = (0 ..< RoutingCommit.maxListedGrantChanges + 1).map { JSONValue.string("u\($0)") }
        db.setRouter { input in
            RevisionRouting(access: Dictionary(uniqueKeysWithValues: (input.revision.array(forKey: "to") ?? []).compactMap(\.stringValue).map { ($0, ["c"]) }))
        }
        let v2 = db.grantsVersion
        try save(db, "wide", ["to": .array(many)])
        #expect(db.grantChanges(after: v2) == nil)
        // Further back than the log reaches: unknown.
        db.setRouter(Self.router)
        for i in 0 ..< ChannelRouting.grantLogSize + 1 { try save(db, "g", ["to": "alice", "grant": [.string("c\(i)")]]) }
        #expect(db.grantChanges(after: v0) == nil)
        #expect(db.grantChanges(after: db.grantsVersion - 1) == [.channels: ["alice"]])
    }

    /// Read without its grants, a document that grants 100,000 channels has the same channels
    /// and membership, and no grants.
    @Test func routingReadsWithoutGrants() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        let granted = (0 ..< 100_000).map { JSONValue.string("c\($0)") }
        try save(db, "wide", ["channels": ["a", "b"], "to": "alice", "grant": .array(granted)])
        // Two leaves, so the record is stored on its own (not in the sequence entry).
        try save(db, "two", ["channels": ["a"], "to": "bob", "grant": ["x"]])
        try save(db, "two", ["channels": ["b"], "to": "bob", "grant": ["y"]])
        for id in ["wide", "two"] {
            let full = try #require(try db.routing(ofDocumentWithID: id))
            let light = try #require(try db.routing(ofDocumentWithID: id, grants: false))
            #expect(light.current.channels == full.current.channels)
            #expect(light.membership == full.membership)
            #expect(light.leaves.mapValues(\.channels) == full.leaves.mapValues(\.channels))
            #expect(light.current.access.isEmpty && !full.current.access.isEmpty)
        }
        #expect(try db.routing(ofDocumentWithID: "wide")?.current.access["alice"]?.count == 100_000)
    }

    @Test func rejectionsAreReportedPerRevisionAndReplicatedRevisionsAreRouted() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, "a")
        db.setRouter(Self.router)
        let e = setteeError { try db.saveDocument(MutableDocument(id: "r", data: ["reject": true])) }
        #expect(e?.code == .unauthorized && e?.message == "log in")
        #expect(try db.document(withID: "r") == nil)
        db.setRouter { _ in RevisionRouting(channels: [""]) }
        #expect(setteeError { try db.saveDocument(MutableDocument(id: "r", data: [:])) }?.code == .invalidParameter)

        let source = try openDatabase(dir, "b")
        try save(source, "p", ["channels": ["x"]])
        try save(source, "q", ["reject": true])
        db.setRouter(Self.router)
        let outcomes = try replicate(from: source, to: db)
        #expect(outcomes.count == 2)
        #expect(outcomes.contains(.inserted))
        #expect(outcomes.contains { if case .rejected(let e) = $0 { e.code == .unauthorized } else { false } })
        #expect(try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0].map(\.documentID) == ["p"])
    }

    @Test func conflictsRouteByTheWinner() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        // Two branches of one document: the winner (higher revision ID at generation 2) decides.
        let base = ReplicatedRevision(documentID: "d", revisionID: "1-aa", history: ["1-aa"], isDeleted: false,
                                      properties: ["channels": ["base"]])
        let low = ReplicatedRevision(documentID: "d", revisionID: "2-aa", history: ["2-aa", "1-aa"], isDeleted: false,
                                     properties: ["channels": ["low"]])
        let high = ReplicatedRevision(documentID: "d", revisionID: "2-bb", history: ["2-bb", "1-aa"], isDeleted: false,
                                      properties: ["channels": ["high"]])
        _ = try db.insertRevisions([base, high, low])
        let r = try #require(try db.routing(ofDocumentWithID: "d"))
        #expect(r.current.channels == ["high"])
        #expect(Set(r.leaves.keys) == ["2-aa", "2-bb"])
        #expect(r.leaves["2-aa"]?.channels == ["low"])
        // Deleting the winner hands the document to the other branch's channels.
        let del = ReplicatedRevision(documentID: "d", revisionID: "3-cc", history: ["3-cc", "2-bb", "1-aa"], isDeleted: true,
                                     properties: [:])
        _ = try db.insertRevisions([del])
        #expect(try db.routing(ofDocumentWithID: "d")?.current.channels == ["low"])
        #expect(try db.channelChanges([ChannelQuery(channel: "high", after: 0)])[0].map(\.isRemoved) == [true])
    }

    @Test func rerouteMovesChangedDocumentsToANewSequence() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try save(db, "old", ["channels": ["x"]])                      // before any router: not routed
        #expect(try db.routing(ofDocumentWithID: "old") == nil)
        db.setRouter(Self.router)
        try save(db, "a", ["channels": ["x"], "owner": "y"])
        try save(db, "b", ["channels": ["x"]])
        let before = try db.lastSequence
        #expect(try db.reroute(batchSize: 1) == 1)                    // "old" gains x; a and b unchanged
        #expect(try db.lastSequence == before + 1)
        db.setRouter { input in RevisionRouting(channels: Set([input.revision.string(forKey: "owner") ?? "nobody"])) }
        #expect(try db.reroute() == 3)
        let y = try db.channelChanges([ChannelQuery(channel: "y", after: before + 1)])[0]
        #expect(y.map(\.documentID) == ["a"])
        #expect(try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0].allSatisfy(\.isRemoved))
        // The document's change reaches the plain changes feed too, with its revision unchanged.
        #expect(try db.changes(since: before + 1).map(\.documentID).sorted() == ["a", "b", "old"])
        db.setRouter(nil)
        #expect(setteeError { try db.reroute() }?.code == .invalidParameter)
    }

    @Test func takeSequenceOrdersAnEventAmongChangesAndSurvivesReopen() throws {
        let dir = try TemporaryDirectory()
        var seq: UInt64 = 0
        do {
            let db = try openDatabase(dir)
            try save(db, "a", [:])
            try db.inBatch { seq = try db.takeSequence() }
            #expect(seq == 2)
            try save(db, "b", [:])
            try db.close()
        }
        let db = try openDatabase(dir)
        #expect(try db.lastSequence == 3)
        db.setRouter(Self.router)
        try save(db, "c", ["channels": ["x"]])
        // Compaction keeps the routing trees.
        try db.compact()
        #expect(try db.channelChanges([ChannelQuery(channel: "x", after: 0)])[0].map(\.documentID) == ["c"])
        #expect(try db.routing(ofDocumentWithID: "c")?.current.channels == ["x"])
    }

    /// Every write reads the router: reading it must not wrap the stored function again (it once
    /// did, a thunk per read, until 100,000 writes overflowed the writer's stack).
    @Test func manyWritesReadTheRouterWithoutGrowingIt() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.setRouter(Self.router)
        for start in stride(from: 0, to: 60_000, by: 2000) {
            try db.inBatch {
                for i in start ..< start + 2000 { try db.saveDocument(MutableDocument(id: "d\(i)", data: ["channels": ["c\(i % 10)"]])) }
            }
        }
        #expect(try db.channelChanges([ChannelQuery(channel: "c3", after: 0)])[0].count == 6000)
    }
}
