import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Replication conflicts, the deterministic winner rule (seed 004, DESIGN "Semantics decided" 1
/// and 2), identical edits, and resolving conflicts by picking a winner or merging (seed 001).
@Suite struct ConflictTests {
    // MARK: Seed 004: Molly and Naomi

    @Test func twoDeviceConflictPicksTheSameWinnerOnBothDevices() throws {
        let dir = try TemporaryDirectory()
        let molly = try openDatabase(dir, "molly")
        let naomi = try openDatabase(dir, "naomi")

        // Molly creates DocumentA (1-5ac); it syncs to Naomi's device.
        try molly.insertRevision(rev("DocumentA", "1-5ac", ["1-5ac"], ["title": "Groceries", "items": ["milk"]]))
        #expect(try replicate(from: molly, to: naomi) == [.inserted])
        #expect(try naomi.document(withID: "DocumentA")?.revisionID == "1-5ac")
        #expect(try naomi.document(withID: "DocumentA")?.string(forKey: "title") == "Groceries")
        #expect(try replicate(from: molly, to: naomi).isEmpty)   // nothing left to send

        // Molly makes 2-54a.
        try molly.insertRevision(rev("DocumentA", "2-54a", ["2-54a", "1-5ac"], ["title": "Groceries", "items": ["milk", "eggs"]]))
        // Before Naomi changes anything, 2-54a is missing on her side and 1-5ac is a possible ancestor.
        let before = try naomi.revsDiff(["DocumentA": ["2-54a", "1-5ac"]])
        #expect(before["DocumentA"] == RevsDiffResult(missing: ["2-54a"], possibleAncestors: ["1-5ac"]))

        // Naomi makes 2-877.
        try naomi.insertRevision(rev("DocumentA", "2-877", ["2-877", "1-5ac"], ["title": "Naomi's groceries", "items": ["milk"]]))
        #expect(try molly.revisionTree(withID: "DocumentA")?.isConflicted == false)
        #expect(try naomi.revisionTree(withID: "DocumentA")?.isConflicted == false)

        // 2-877 reaches Molly, 2-54a reaches Naomi.
        #expect(try replicate(from: naomi, to: molly) == [.inserted])
        #expect(try replicate(from: molly, to: naomi) == [.inserted])
        #expect(try replicate(from: molly, to: naomi).isEmpty)
        #expect(try replicate(from: naomi, to: molly).isEmpty)

        var trees: [RevisionTree] = []
        for db in [molly, naomi] {
            let doc = try #require(try db.document(withID: "DocumentA"))
            #expect(doc.revisionID == "2-877", "\(db.name) picked \(doc.revisionID ?? "-")")
            #expect(doc.string(forKey: "title") == "Naomi's groceries")
            let tree = try #require(try db.revisionTree(withID: "DocumentA"))
            #expect(tree.isConflicted)
            #expect(tree.currentRevisionID == "2-877")
            #expect(tree.leafRevisionIDs == ["2-877", "2-54a"])
            #expect(try db.conflictingRevisions(withID: "DocumentA").map(\.revisionID) == ["2-877", "2-54a"])
            let change = try #require(try db.changes(since: 0).last)
            #expect(change.documentID == "DocumentA")
            #expect(change.isConflicted)
            #expect(change.leafRevisionIDs == ["2-877", "2-54a"])
            var options = AllDocumentsOptions()
            options.onlyConflicts = true
            #expect(try db.allDocuments(options).readAll().map(\.id) == ["DocumentA"])
            trees.append(tree)
        }
        // Both devices hold the same tree (revision order may differ: it is insertion order).
        func shape(_ t: RevisionTree) -> Set<String> {
            Set(t.revisions.map { "\($0.revisionID)<\($0.parentRevisionID ?? "")|\($0.isLeaf)|\($0.isDeleted)" })
        }
        #expect(shape(trees[0]) == shape(trees[1]))
        #expect(trees[0].leafRevisionIDs == trees[1].leafRevisionIDs)
        // The losing branch's body came across too.
        #expect(try naomi.document(withID: "DocumentA", revisionID: "2-54a")?.array(forKey: "items") == ["milk", "eggs"])
        #expect(try molly.document(withID: "DocumentA", revisionID: "2-877")?.string(forKey: "title") == "Naomi's groceries")
    }

    // MARK: Identical edits (seed 004 FAQ)

    @Test func identicalEditsOnTwoDatabasesGiveIdenticalRevisionIDs() throws {
        let dir = try TemporaryDirectory()
        let a = try openDatabase(dir, "a")
        let b = try openDatabase(dir, "b")
        var firstRevs: [String] = []
        var secondRevs: [String] = []
        for db in [a, b] {
            let doc = MutableDocument(id: "list", data: ["title": "Groceries", "items": ["milk"], "n": 1.5])
            try db.saveDocument(doc)
            firstRevs.append(try #require(doc.revisionID))
            let m = try #require(try db.document(withID: "list")).toMutable()
            m.setArray(["milk", "eggs"], forKey: "items")
            try db.saveDocument(m)
            secondRevs.append(try #require(m.revisionID))
        }
        #expect(firstRevs[0] == firstRevs[1])
        #expect(secondRevs[0] == secondRevs[1])
        #expect(secondRevs[0].hasPrefix("2-"))
        // Same data, different parent or deletion flag: a different revision ID.
        let c = try openDatabase(dir, "c")
        let other = MutableDocument(id: "list", data: ["title": "Groceries", "items": ["milk", "eggs"], "n": 1.5])
        try c.saveDocument(other)
        #expect(other.revisionID != secondRevs[0])
        // Replicating between a and b moves nothing: they hold the same revisions, no conflict.
        #expect(try replicate(from: a, to: b).isEmpty)
        #expect(try b.revisionTree(withID: "list")?.isConflicted == false)
        // Inserting the other device's identical revision is a no-op.
        let leaf = try #require(try a.leafRevisions(withID: "list").first)
        #expect(try b.insertRevision(leaf) == false)
        #expect(try b.revisionTree(withID: "list")?.revisions.count == 2)
    }

    @Test func identicalSaveFromTheSameParentIsNotANewRevision() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "doc", data: ["v": 1]))
        let loaded = try #require(try db.document(withID: "doc"))
        let m1 = loaded.toMutable()
        let m2 = loaded.toMutable()
        let m3 = loaded.toMutable()
        let m4 = loaded.toMutable()
        for m in [m1, m2, m3, m4] { m.setInt(2, forKey: "v") }

        try db.saveDocument(m1)
        let rev2 = try #require(m1.revisionID)
        let seq = try db.lastSequence
        // m2 makes the same edit of the same parent: under last-write-wins it lands on rev2 (the
        // same revision ID), nothing is written.
        #expect(try db.saveDocument(m2, concurrencyControl: .lastWriteWins))
        #expect(m2.revisionID == rev2)
        try db.saveDocument(m3)
        #expect(m3.revisionID == rev2)
        #expect(try db.lastSequence == seq)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(tree.revisions.count == 2)
        #expect(tree.leafRevisionIDs == [rev2])
        #expect(!tree.isConflicted)

        // The document did change since m4 was loaded, so failOnConflict and a conflict handler
        // still hear of it (an update-with-retry counter must not lose increments); neither
        // writes anything when it declines.
        #expect(try db.saveDocument(m4, concurrencyControl: .failOnConflict) == false)
        var handlerSaw: [String?] = []
        let saved = try db.saveDocument(m4) { _, current in
            handlerSaw.append(current?.revisionID)
            return false
        }
        #expect(saved == false)
        #expect(handlerSaw == [rev2])
        #expect(try db.lastSequence == seq)
        #expect(try db.revisionTree(withID: "doc")?.revisions.count == 2)

        // Once the document moved past the identical revision, last-write-wins writes on top.
        let m5 = try #require(try db.document(withID: "doc")).toMutable()
        m5.setInt(3, forKey: "v")
        try db.saveDocument(m5)
        let late = loaded.toMutable()
        late.setInt(2, forKey: "v")
        try db.saveDocument(late)
        #expect(late.revisionID?.hasPrefix("4-") == true)
        #expect(try db.document(withID: "doc")?.int(forKey: "v") == 2)
    }

    // MARK: Deleting a conflicted document (seed 004 FAQ)

    @Test func deletingTheWinnerRevealsTheOtherLeafThenTheDocumentGoesAway() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let doc = MutableDocument(id: "doc", data: ["v": 0])
        try db.saveDocument(doc)
        let r1 = try #require(doc.revisionID)
        try db.insertRevision(rev("doc", "2-aaa", ["2-aaa", r1], ["v": 1]))
        try db.insertRevision(rev("doc", "2-bbb", ["2-bbb", r1], ["v": 2]))
        #expect(try db.count == 1)
        let winner = try #require(try db.document(withID: "doc"))
        #expect(winner.revisionID == "2-bbb")
        #expect(try db.revisionTree(withID: "doc")?.isConflicted == true)

        try db.deleteDocument(winner)
        let revealed = try #require(try db.document(withID: "doc"))
        #expect(revealed.revisionID == "2-aaa")
        #expect(revealed.int(forKey: "v") == 1)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(!tree.isConflicted)
        #expect(tree.leafRevisionIDs.first == "2-aaa")
        #expect(tree.leafRevisionIDs.count == 2)
        let tombstone = try #require(tree.revisions.first { $0.isDeleted })
        #expect(tombstone.parentRevisionID == "2-bbb")
        #expect(tombstone.generation == 3)
        #expect(try db.conflictingRevisions(withID: "doc").count == 1)
        #expect(try db.count == 1)
        var options = AllDocumentsOptions()
        options.onlyConflicts = true
        #expect(try db.allDocuments(options).readAll().map(\.id).isEmpty)

        try db.deleteDocument(revealed)
        #expect(try db.document(withID: "doc") == nil)
        #expect(try db.count == 0)
        let after = try #require(try db.revisionTree(withID: "doc"))
        #expect(after.revisions.filter { $0.isLeaf }.allSatisfy { $0.isDeleted })
        #expect(try db.conflictingRevisions(withID: "doc").isEmpty)
        #expect(try db.changes(since: 0).last?.isDeleted == true)
    }

    @Test func pickingAWinnerByDeletingTheLosingRevisions() throws {
        // Seed 004: "Pick a winner. Just decide which of the two changes should win, and delete
        // the other one."
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try db.insertRevisions([rev("doc", "1-a", ["1-a"], ["v": 0]), rev("doc", "2-a", ["2-a", "1-a"], ["v": 1]),
                                rev("doc", "2-b", ["2-b", "1-a"], ["v": 2]), rev("doc", "2-c", ["2-c", "1-a"], ["v": 3])])
        let conflicts = try db.conflictingRevisions(withID: "doc")
        #expect(conflicts.map(\.revisionID) == ["2-c", "2-b", "2-a"])
        for loser in conflicts.dropFirst() {
            #expect(try db.deleteDocument(loser, concurrencyControl: .failOnConflict))
        }
        let doc = try #require(try db.document(withID: "doc"))
        #expect(doc.revisionID == "2-c")
        #expect(doc.int(forKey: "v") == 3)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(!tree.isConflicted)
        #expect(Set(tree.revisions.filter { $0.isLeaf && $0.isDeleted }.compactMap(\.parentRevisionID)) == ["2-a", "2-b"])
        #expect(try conflictsIndexCount(db) == 0)
        // The tombstoned loser is no longer a leaf: deleting it again under failOnConflict is
        // refused; deleting the winner deletes the document.
        let seq = try db.lastSequence
        #expect(try db.deleteDocument(conflicts[1], concurrencyControl: .failOnConflict) == false)
        #expect(try db.lastSequence == seq)
        try db.deleteDocument(doc)
        #expect(try db.document(withID: "doc") == nil)
    }

    @Test func anEditOfALosingLeafContinuesThatBranchUnderFailOnConflict() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try db.insertRevisions([rev("doc", "1-a", ["1-a"], ["v": 0]), rev("doc", "2-a", ["2-a", "1-a"], ["v": 1]),
                                rev("doc", "2-b", ["2-b", "1-a"], ["v": 2])])
        let loser = try #require(try db.document(withID: "doc", revisionID: "2-a")).toMutable()
        loser.setInt(10, forKey: "v")
        #expect(try db.saveDocument(loser, concurrencyControl: .failOnConflict))
        let tree = try #require(try db.revisionTree(withID: "doc"))
        let added = try #require(tree.revisions.first { $0.revisionID == loser.revisionID })
        #expect(added.parentRevisionID == "2-a")
        // Generation 3 beats 2-b: still two live leaves, the edited branch now current.
        #expect(tree.isConflicted && tree.currentRevisionID == loser.revisionID)
        // A read of a revision that is no longer a leaf is a conflict, as before.
        let stale = try #require(try db.document(withID: "doc", revisionID: "2-a")).toMutable()
        stale.setInt(11, forKey: "v")
        #expect(try db.saveDocument(stale, concurrencyControl: .failOnConflict) == false)
        // Last write wins saves on the current revision, whatever the edit was read from.
        let other = try #require(try db.document(withID: "doc", revisionID: "2-b")).toMutable()
        other.setInt(20, forKey: "v")
        #expect(try db.saveDocument(other, concurrencyControl: .lastWriteWins))
        let after = try #require(try db.revisionTree(withID: "doc"))
        #expect(after.revisions.first { $0.revisionID == other.revisionID }?.parentRevisionID == loser.revisionID)
        #expect(after.leafRevisionIDs.contains("2-b"))
    }

    // MARK: The winner rule (seed 004)

    @Test func undeletedLeafBeatsAHigherGenerationTombstone() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev("w", "1-a", ["1-a"], ["v": 1]))
        try db.insertRevision(rev("w", "2-b", ["2-b", "1-a"], ["v": 2]))
        try db.insertRevision(rev("w", "3-c", ["3-c", "2-b", "1-a"], deleted: true))
        try db.insertRevision(rev("w", "2-d", ["2-d", "1-a"], ["v": 4]))
        let doc = try #require(try db.document(withID: "w"))
        #expect(doc.revisionID == "2-d")
        #expect(doc.int(forKey: "v") == 4)
        let tree = try #require(try db.revisionTree(withID: "w"))
        #expect(tree.leafRevisionIDs == ["2-d", "3-c"])
        #expect(!tree.isConflicted)   // one undeleted leaf: no conflict

        // Every leaf deleted: the tombstone with the highest generation, ties by ASCII.
        try db.insertRevision(rev("w", "3-e", ["3-e", "2-d", "1-a"], deleted: true))
        #expect(try db.document(withID: "w") == nil)
        #expect(try db.revisionTree(withID: "w")?.currentRevisionID == "3-e")
        #expect(try db.revisionTree(withID: "w")?.leafRevisionIDs == ["3-e", "3-c"])
        #expect(try db.document(withID: "w", revisionID: "3-e")?.isDeleted == true)
        try db.insertRevision(rev("w", "4-a", ["4-a", "3-c", "2-b", "1-a"], deleted: true))
        #expect(try db.revisionTree(withID: "w")?.currentRevisionID == "4-a")

        // A higher-generation tombstone beats an ASCII-higher lower-generation one.
        try db.insertRevision(rev("x", "1-a", ["1-a"]))
        try db.insertRevision(rev("x", "2-z", ["2-z", "1-a"], deleted: true))
        try db.insertRevision(rev("x", "3-c", ["3-c", "2-b", "1-a"], deleted: true))
        #expect(try db.revisionTree(withID: "x")?.currentRevisionID == "3-c")
        #expect(try db.document(withID: "x") == nil)
        #expect(try db.count == 0)
    }

    @Test func tiesGoToTheASCIIHigherRevisionIDWhateverTheArrivalOrder() throws {
        let dir = try TemporaryDirectory()
        let one = try openDatabase(dir, "one")
        let two = try openDatabase(dir, "two")
        let a = rev("t", "3-a", ["3-a", "2-x", "1-x"], ["side": "a"])
        let b = rev("t", "3-b", ["3-b", "2-y", "1-x"], ["side": "b"])
        #expect(try one.insertRevisions([a, b]) == [.inserted, .inserted])
        #expect(try two.insertRevisions([b, a]) == [.inserted, .inserted])
        for db in [one, two] {
            #expect(try db.document(withID: "t")?.revisionID == "3-b")
            #expect(try db.document(withID: "t")?.string(forKey: "side") == "b")
            #expect(try db.revisionTree(withID: "t")?.leafRevisionIDs == ["3-b", "3-a"])
        }

        // ASCII order, not case-insensitive or numeric digest order.
        _ = try one.insertRevisions([rev("u", "2-B", ["2-B", "1-r"]), rev("u", "2-a", ["2-a", "1-r"])])
        #expect(try one.document(withID: "u")?.revisionID == "2-a")
        _ = try one.insertRevisions([rev("v", "2-10", ["2-10", "1-r"]), rev("v", "2-9", ["2-9", "1-r"])])
        #expect(try one.document(withID: "v")?.revisionID == "2-9")
        // Generations compare as numbers: 10 beats 9 although "9" > "1" in ASCII.
        let ten = (1...10).reversed().map { "\($0)-" + ($0 == 10 ? "a" : "x") }
        let nine = ["9-z"] + (1...8).reversed().map { "\($0)-x" }
        _ = try one.insertRevisions([rev("g", "9-z", nine), rev("g", "10-a", ten)])
        #expect(try one.document(withID: "g")?.revisionID == "10-a")
        #expect(try one.revisionTree(withID: "g")?.leafRevisionIDs == ["10-a", "9-z"])
    }

    // MARK: Parent bodies (seed 004 FAQ)

    @Test func parentBodiesAreReadableBeforeCompaction() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let revs = try saveRevisions(db, id: "doc", values: [1, 2, 3])
        let (r1, r2, r3) = (revs[0], revs[1], revs[2])

        let old = try #require(try db.document(withID: "doc", revisionID: r1))
        #expect(old.int(forKey: "v") == 1)
        #expect(old.revisionID == r1)
        #expect(old.sequence == 0)
        #expect(!old.isDeleted)
        #expect(try db.document(withID: "doc", revisionID: r2)?.int(forKey: "v") == 2)
        #expect(try db.document(withID: "doc", revisionID: r3)?.sequence == db.lastSequence)
        #expect(try db.document(withID: "doc", revisionID: "9-nope") == nil)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(tree.revisions.map(\.revisionID) == [r1, r2, r3])
        #expect(tree.revisions.allSatisfy { $0.hasBody })
        #expect(tree.revisions.map(\.parentRevisionID) == [nil, r1, r2])

        // The common ancestor of a conflict is readable for a three-way merge.
        try db.insertRevision(rev("doc", "3-other", ["3-other", r2, r1], ["v": 30]))
        let conflicts = try db.conflictingRevisions(withID: "doc")
        #expect(conflicts.count == 2)
        let base = try #require(try db.document(withID: "doc", revisionID: r2))
        #expect(base.int(forKey: "v") == 2)
        // Ancestors that only arrived as history have no body.
        try db.insertRevision(rev("h", "3-c", ["3-c", "2-b", "1-a"], ["v": 3]))
        #expect(try db.document(withID: "h", revisionID: "2-b") == nil)
        #expect(try db.revisionTree(withID: "h")?.revisions.map(\.hasBody) == [false, false, true])
        #expect(try db.revision(withID: "h", revisionID: "3-c")?.history == ["3-c", "2-b", "1-a"])
    }

    @Test func historyIsPrunedToMaxRevTreeDepth() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, maxRevTreeDepth: 5)
        let m = MutableDocument(id: "doc")
        for i in 0..<12 {
            m.setInt(i, forKey: "i")
            try db.saveDocument(m)
        }
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(tree.revisions.count == 5)
        #expect(tree.currentRevisionID.hasPrefix("12-"))
        #expect(tree.revisions.first?.parentRevisionID == nil)
        #expect(tree.revisions.first?.generation == 8)
    }

    @Test func pruningKeepsTheBranchesOfAnOpenConflict() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, maxRevTreeDepth: 3)
        let m = MutableDocument(id: "doc", data: ["v": 1])
        try db.saveDocument(m)
        let base = try #require(m.revisionID)
        try db.insertRevision(rev("doc", "2-mine", ["2-mine", base], ["v": 2]))
        try db.insertRevision(rev("doc", "2-other", ["2-other", base], ["v": -2]))
        // The winning branch grows far past the depth limit while the conflict stays open.
        for i in 3 ... 10 {
            let current = try #require(try db.document(withID: "doc")).toMutable()
            current.setInt(i, forKey: "v")
            try db.saveDocument(current)
        }
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(tree.isConflicted)
        #expect(tree.currentRevisionID.hasPrefix("10-"))
        #expect(tree.leafRevisionIDs.last == "2-mine")
        // The merge base and both branches down to it are kept, with the base's body.
        #expect(tree.revisions.count == 11)
        #expect(tree.revisions.contains { $0.revisionID == base })
        #expect(try db.document(withID: "doc", revisionID: base)?.int(forKey: "v") == 1)
        #expect(try db.document(withID: "doc", revisionID: "2-other")?.int(forKey: "v") == -2)
        // Once resolved, the old middle of the winning branch goes.
        try db.resolveConflict(withID: "doc")
        try db.saveDocument(try #require(try db.document(withID: "doc")).toMutable())
        let after = try #require(try db.revisionTree(withID: "doc"))
        #expect(!after.isConflicted)
        #expect(!after.revisions.contains { $0.generation >= 4 && $0.generation <= 9 })
        #expect(after.currentRevisionID.hasPrefix("12-"))
    }

    // MARK: Resolving (seed 001)

    @Test func nWayMergeResolvesAThreeWayConflict() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev("fruit", "1-a", ["1-a"], ["n": 0]))
        try db.insertRevision(rev("fruit", "2-b", ["2-b", "1-a"], ["apples": 1]))
        try db.insertRevision(rev("fruit", "2-c", ["2-c", "1-a"], ["pears": 2]))
        try db.insertRevision(rev("fruit", "2-d", ["2-d", "1-a"], ["plums": 3]))
        try db.saveDocument(MutableDocument(id: "calm", data: ["ok": true]))
        var onlyConflicts = AllDocumentsOptions()
        onlyConflicts.onlyConflicts = true
        #expect(try db.allDocuments(onlyConflicts).readAll().map(\.id) == ["fruit"])

        let revs = try db.conflictingRevisions(withID: "fruit")
        #expect(revs.map(\.revisionID) == ["2-d", "2-c", "2-b"])
        var merged: [String: JSONValue] = [:]
        for r in revs { merged.merge(r.toDictionary()) { mine, _ in mine } }
        #expect(merged == ["apples": 1, "pears": 2, "plums": 3])
        let resolved = try db.resolveConflict(withID: "fruit", mergedProperties: merged)
        #expect(resolved.toDictionary() == merged)
        #expect(resolved.revisionID?.hasPrefix("3-") == true)
        #expect(!resolved.isDeleted)

        #expect(try db.conflictingRevisions(withID: "fruit").count == 1)
        #expect(try db.allDocuments(onlyConflicts).readAll().map(\.id).isEmpty)
        #expect(try conflictsIndexCount(db) == 0)
        let tree = try #require(try db.revisionTree(withID: "fruit"))
        #expect(!tree.isConflicted)
        #expect(tree.currentRevisionID == resolved.revisionID)
        let leaves = tree.revisions.filter(\.isLeaf)
        #expect(leaves.count == 3)
        #expect(leaves.filter(\.isDeleted).compactMap(\.parentRevisionID).sorted() == ["2-b", "2-c"])
        #expect(leaves.first { !$0.isDeleted }?.parentRevisionID == "2-d")
        #expect(try db.document(withID: "fruit")?.toDictionary() == merged)
        #expect(try db.changes(since: 0).last?.isConflicted == false)
    }

    @Test func resolvingByPickingALosingLeaf() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev("pick", "1-a", ["1-a"], ["n": 0]))
        try db.insertRevision(rev("pick", "2-b", ["2-b", "1-a"], ["choice": "b"]))
        try db.insertRevision(rev("pick", "2-c", ["2-c", "1-a"], ["choice": "c"]))
        try db.insertRevision(rev("pick", "2-d", ["2-d", "1-a"], ["choice": "d"]))
        #expect(try db.document(withID: "pick")?.revisionID == "2-d")

        #expect(throws: SetteeError.self) { try db.resolveConflict(withID: "pick", winningRevisionID: "1-a") }
        #expect(throws: SetteeError.self) { try db.resolveConflict(withID: "nobody") }
        let resolved = try db.resolveConflict(withID: "pick", winningRevisionID: "2-b")
        #expect(resolved.string(forKey: "choice") == "b")
        let tree = try #require(try db.revisionTree(withID: "pick"))
        #expect(!tree.isConflicted)
        let current = try #require(tree.revisions.first { $0.revisionID == tree.currentRevisionID })
        #expect(current.parentRevisionID == "2-b")
        #expect(!current.isDeleted)
        #expect(Set(tree.revisions.filter { $0.isLeaf && $0.isDeleted }.compactMap(\.parentRevisionID)) == ["2-c", "2-d"])
        #expect(try db.document(withID: "pick")?.string(forKey: "choice") == "b")
        #expect(try conflictsIndexCount(db) == 0)
    }
}

/// The number of entries in the engine's conflicts index.
func conflictsIndexCount(_ db: Database) throws -> Int {
    try db.core.store.read { tx in try tx.count(in: db.core.trees.conflicts) }
}
