import Foundation
import SetteeCrashKit
import Testing
@_spi(Replication) @testable import Settee

/// The merge of replicated histories into revision trees (Formats/documents.md, "Merging a
/// history"): the two worked examples, and a property test against a reference model written
/// here, over seeded random trees.
///
/// Property runs: `SETTEE_MERGE_DOCS=N` documents per depth (default 3,000; `SETTEE_LONG=1` makes
/// it 100,000), first seed `SETTEE_MERGE_SEED=S` (default random, printed).
@Suite struct RevTreeMergeTests {
    // MARK: - The worked examples

    private func rev(_ history: [String], deleted: Bool, _ v: Int = 0) -> ReplicatedRevision {
        ReplicatedRevision(documentID: "doc", revisionID: history[0], history: history, isDeleted: deleted,
                           properties: deleted ? [:] : ["v": .int(Int64(v))])
    }

    private func chain(_ letter: String, _ generations: ClosedRange<Int>) -> [String] {
        generations.reversed().map { "\($0)-\(letter)" }
    }

    /// r1: a truncated history, then the full history of a sibling: the stored leaf `2-b` and
    /// the stored root `3-c` are linked, and the document is deleted.
    @Test func r1TruncatedHistoryIsLinkedWhenTheFullHistoryArrives() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev(["2-b", "1-a"], deleted: false))
        try db.insertRevision(rev(["5-d", "4-c", "3-c"], deleted: true))
        try db.insertRevision(rev(["5-e", "4-c", "3-c", "2-b", "1-a"], deleted: true))
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(Set(tree.leafRevisionIDs) == ["5-d", "5-e"])
        #expect(tree.currentRevisionID == "5-e")
        #expect(tree.revisions.filter(\.isLeaf).allSatisfy { $0.isDeleted })
        #expect(tree.revisions.first { $0.revisionID == "3-c" }?.parentRevisionID == "2-b")
        #expect(try db.document(withID: "doc") == nil)
        #expect(try db.count == 0)
        #expect(try db.check().isHealthy)
    }

    /// r2: a deep deleted history pruned to 20, an old revision sent again (a separate branch:
    /// the tree no longer holds its descendants' link to it), then a history that reaches both:
    /// they are linked through it, and the document is deleted, as CouchDB and PouchDB have it.
    @Test func r2OldRevisionSentAgainIsLinkedByALaterHistory() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)   // maxRevTreeDepth 20, the default
        #expect(db.config.maxRevTreeDepth == 20)
        try db.insertRevision(rev(chain("a", 1 ... 25), deleted: true))
        let pruned = try #require(try db.revisionTree(withID: "doc"))
        #expect(pruned.revisions.map(\.generation).min() == 6)
        try db.insertRevision(rev(chain("a", 1 ... 3), deleted: false))
        try db.insertRevision(rev(["12-b", "11-b"] + chain("a", 1 ... 10), deleted: true))
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(Set(tree.leafRevisionIDs) == ["25-a", "12-b"])
        #expect(tree.currentRevisionID == "25-a")
        #expect(tree.revisions.filter(\.isLeaf).allSatisfy { $0.isDeleted })
        #expect(try db.document(withID: "doc") == nil)
        #expect(try db.count == 0)
        #expect(try db.changes(since: 0).map(\.isDeleted) == [true])
        #expect(try db.check().isHealthy)
    }

    /// A known revision sent again with a longer history still links what it names: the outcome
    /// is `inserted` (the tree changed), and sending it once more changes nothing.
    @Test func knownRevisionWithLongerHistoryLinksDownward() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev(["2-b", "1-a"], deleted: false, 1))
        try db.insertRevision(rev(["4-c", "3-c"], deleted: false, 2))
        #expect(try db.revisionTree(withID: "doc")?.isConflicted == true)
        #expect(try db.insertRevisions([rev(["4-c", "3-c", "2-b", "1-a"], deleted: false, 2)]) == [.inserted])
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(tree.leafRevisionIDs == ["4-c"])
        #expect(!tree.isConflicted)
        #expect(try db.insertRevisions([rev(["4-c", "3-c", "2-b", "1-a"], deleted: false, 2)]) == [.alreadyPresent])
        #expect(try db.check().isHealthy)
    }

    /// A history that contradicts a stored link (only a damaged or hostile peer sends one) adds
    /// nothing below the contradiction: no phantom leaf appears.
    @Test func contradictingHistoryAddsNoLeaf() {
        var t = RevTree()
        t.merge(history: ["3-c", "2-b", "1-a"], generation: 3, deleted: false, hasAttachments: false, bodyRef: 1)
        let changed = t.merge(history: ["4-d", "3-c", "2-x", "1-y"], generation: 4, deleted: false, hasAttachments: false, bodyRef: 2)
        #expect(changed)
        #expect(t.index(of: "4-d") != nil)
        #expect(t.leaves().map { t.revs[$0].id } == ["4-d"])
        #expect(t.index(of: "2-x") == nil && t.index(of: "1-y") == nil)
    }

    /// A tree holding a revision twice, as damage could leave it: the check names the leaf that
    /// another branch's history has as an ancestor, the repair makes it one node, and the
    /// document's winner is chosen again.
    @Test func checkReportsAndRepairsALeafNamedAsAnAncestor() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.insertRevision(rev(["3-c", "2-b", "1-a"], deleted: true))
        try db.insertRevision(rev(["2-z", "1-a"], deleted: false, 7))
        #expect(try db.document(withID: "doc")?.revisionID == "2-z")
        // Write a damaged tree by hand: a second copy of 2-b, a live leaf under 1-a.
        try db.core.write { c in
            let key = Array("doc".utf8)
            let old = try #require(try c.meta(key))
            var tree = try db.core.tree(c.tx, old)
            let root = try #require(tree.index(of: "1-a"))
            tree.add(id: "2-b", generation: 2, parent: root, deleted: false, hasAttachments: false, bodyRef: 0)
            #expect(tree.isConflicted())
            let treeRef = try c.tx.appendValue(tree.encoded()).rawValue
            let meta = DocMeta(flags: old.flags, sequence: old.sequence, revisionID: old.revisionID, bodyRef: old.bodyRef, treeRef: treeRef)
            try c.tx.put(key, meta.encoded(), in: c.trees.byID)
        }
        let report = try db.check()
        #expect(!report.isHealthy)
        #expect(report.problems.contains {
            $0.documentID == "doc" && $0.isRepairable
                && $0.message == "revision 2-b is a leaf, and the history of 3-c names it as an ancestor (the tree holds it twice)"
        })
        #expect(report.problems.allSatisfy { $0.isRepairable }, "\(report.problems)")
        #expect(report.repaired.isEmpty)
        let repaired = try db.check(repair: true)
        #expect(repaired.repaired == ["doc"])
        #expect(try db.check().isHealthy)
        let tree = try #require(try db.revisionTree(withID: "doc"))
        #expect(tree.revisions.filter { $0.revisionID == "2-b" }.count == 1)
        #expect(Set(tree.leafRevisionIDs) == ["3-c", "2-z"])
        #expect(tree.currentRevisionID == "2-z")
        #expect(!tree.isConflicted)
    }

    @Test func checkOfAHealthyDatabaseFindsNothing() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try saveRevisions(db, id: "a", values: [1, 2, 3])
        _ = try saveRevisions(db, id: "b", values: [1])
        try db.insertRevision(ReplicatedRevision(documentID: "a", revisionID: "3-x", history: ["3-x", "2-x"], isDeleted: false, properties: ["v": 9]))
        try db.deleteDocument(try #require(try db.document(withID: "b")))
        let report = try db.check()
        #expect(report.isHealthy, "\(report.problems)")
        #expect(report.documents == 2)
        #expect(report.revisions == 3 + 2 + 2)
    }

    /// The ranking rule the replicator uses is the revision tree's: for random pairs of live
    /// leaves the tree's winner is the one `RevisionRanking` ranks above; malformed IDs have no
    /// rank (the replicator once read `+5` and `05` as generation 5 and a bad ID as 0).
    @Test func rankingIsTheTreesWinnerRule() throws {
        let seed = Self.firstSeed
        print("RevTreeMergeTests.rankingIsTheTreesWinnerRule: seed \(seed)")
        var rng = SplitMix(seed: seed)
        let digits = ["a", "b", "z", "A", "0", "aa", "ab", "b0"]
        for _ in 0 ..< 2000 {
            let a = "\(rng.next(below: 12) + 1)-\(digits[Int(rng.next(below: 8))])"
            let b = "\(rng.next(below: 12) + 1)-\(digits[Int(rng.next(below: 8))])"
            guard a != b else {
                #expect(try !RevisionRanking.ranksAbove(a, a))
                continue
            }
            var t = RevTree()
            t.merge(history: [a], generation: RevisionID.generation(of: a)!, deleted: false, hasAttachments: false, bodyRef: 1)
            t.merge(history: [b], generation: RevisionID.generation(of: b)!, deleted: false, hasAttachments: false, bodyRef: 1)
            let winner = t.revs[t.winner()!].id
            #expect(try RevisionRanking.ranksAbove(a, b) == (winner == a), "\(a) vs \(b): the tree picks \(winner)")
            #expect(try RevisionRanking.ranksAbove(b, a) == (winner == b))
        }
        for bad in ["+5-x", "05-x", "x", "5-", "-x", "5 -x", ""] {
            #expect(throws: SetteeError.self) { try RevisionRanking.ranksAbove(bad, "1-a") }
            #expect(throws: SetteeError.self) { try RevisionRanking.ranksAbove("1-a", bad) }
        }
    }

    // MARK: - The property test

    static var docsPerDepth: Int {
        let env = ProcessInfo.processInfo.environment
        if let n = env["SETTEE_MERGE_DOCS"].flatMap(Int.init) { return n }
        return env["SETTEE_LONG"] == "1" ? 100_000 : 3_000
    }

    static var firstSeed: UInt64 {
        ProcessInfo.processInfo.environment["SETTEE_MERGE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1 ... 1 << 40)
    }

    /// Random replicated histories merged one by one into `RevTree` (pruned after each, as a
    /// commit does) give exactly the reference model's tree after the same insertions; at depths
    /// 20 and 1000 (no pruning happens: at most 12 generations) every insertion order gives the
    /// same leaves, winner and deletion state; at depth 5, where pruning does happen, the result
    /// is still the reference's, and is never live when every inserted revision is deleted.
    @Test(arguments: [20, 1000, 5])
    func mergeMatchesTheReferenceModel(depth: Int) throws {
        let seed = Self.firstSeed
        let docs = Self.docsPerDepth
        print("RevTreeMergeTests: \(docs) documents at depth \(depth), seed \(seed) (SETTEE_MERGE_SEED=\(seed))")
        var rng = SplitMix(seed: seed &+ UInt64(depth))
        var stats = (histories: 0, truncated: 0, orders: 0, prunedDocs: 0)
        for n in 0 ..< docs {
            let truth = TrueTree.random(&rng)
            let inserts = truth.histories(&rng)
            stats.histories += inserts.count
            stats.truncated += inserts.filter { $0.history.count < $0.generation }.count
            var first: Outcome? = nil
            let orders = depth == 5 ? 2 : 3
            for o in 0 ..< orders {
                var order = inserts
                if o > 0 { order.shuffle(using: &rng) }
                var tree = RevTree()
                var reference = ReferenceTree()
                var pruned = false
                for h in order {
                    tree.merge(history: h.history, generation: UInt64(h.generation), deleted: h.deleted,
                                   hasAttachments: false, bodyRef: 1)
                    tree.prune(maxDepth: depth)
                    reference.merge(h.history, deleted: h.deleted)
                    pruned = reference.prune(depth) || pruned
                    guard Outcome(tree) == Outcome(reference) else {
                        Issue.record("""
                            seed \(seed), depth \(depth), document \(n), order \(o): after inserting \(h.history) \
                            (deleted: \(h.deleted)) Settee has \(Outcome(tree)), the reference \(Outcome(reference)); \
                            insertions so far: \(order.prefix { $0 != h } + [h])
                            """)
                        return
                    }
                    #expect(tree.duplicateIDs().isEmpty)
                }
                if pruned { stats.prunedDocs += 1 }
                let outcome = Outcome(tree)
                if order.allSatisfy(\.deleted) && !outcome.deleted {
                    Issue.record("seed \(seed), depth \(depth), document \(n): every inserted revision is deleted, the winner \(outcome.winner) is live")
                    return
                }
                if depth >= 20 {
                    if let first, first.leaves != outcome.leaves || first.winner != outcome.winner || first.deleted != outcome.deleted {
                        Issue.record("seed \(seed), depth \(depth), document \(n): order \(o) gives \(outcome), the first order \(first)")
                        return
                    }
                    first = first ?? outcome
                    stats.orders += 1
                }
            }
        }
        print("RevTreeMergeTests: depth \(depth): \(stats.histories) histories (\(stats.truncated) truncated), "
              + "\(stats.orders) order comparisons, \(stats.prunedDocs) runs pruned")
        if depth == 5 { #expect(stats.prunedDocs > 0) }
        #expect(stats.truncated > 0)
    }

    /// The same property through the database: histories in random batches of
    /// `insertRevisions`, in several orders, against the reference, read back with
    /// `revisionTree(withID:)`, then the document layer's check.
    @Test(arguments: [20, 1000, 5])
    func databaseMergeMatchesTheReferenceModel(depth: Int) throws {
        let seed = Self.firstSeed
        let docs = max(Self.docsPerDepth / 20, 50)
        print("RevTreeMergeTests (database): \(docs) documents at depth \(depth), seed \(seed) (SETTEE_MERGE_SEED=\(seed))")
        var rng = SplitMix(seed: seed &+ UInt64(depth) &+ 7)
        let dir = try TemporaryDirectory()
        let dbs = try (0 ..< 2).map { try openDatabase(dir, "db\($0)", maxRevTreeDepth: depth) }
        for n in 0 ..< docs {
            let truth = TrueTree.random(&rng)
            let inserts = truth.histories(&rng)
            var outcomes: [Outcome] = []
            for (k, db) in dbs.enumerated() {
                var order = inserts
                if k > 0 { order.shuffle(using: &rng) }
                var reference = ReferenceTree()
                var rest = order[...]
                let id = "doc-\(n)"
                while !rest.isEmpty {
                    let batch = rest.prefix(Int(rng.next(below: 4)) + 1)
                    rest = rest.dropFirst(batch.count)
                    let outcomes = try db.insertRevisions(batch.map {
                        ReplicatedRevision(documentID: id, revisionID: $0.history[0], history: $0.history, isDeleted: $0.deleted,
                                           properties: $0.deleted ? [:] : ["n": .int(Int64(n))])
                    })
                    for (h, o) in zip(batch, outcomes) {
                        if case .rejected(let e) = o { Issue.record("seed \(seed): \(h.history) rejected: \(e)") }
                        reference.merge(h.history, deleted: h.deleted)
                        _ = reference.prune(depth)
                    }
                }
                let tree = try #require(try db.revisionTree(withID: id))
                let got = Outcome(tree)
                guard got == Outcome(reference) else {
                    Issue.record("seed \(seed), depth \(depth), \(id) in db\(k): Settee \(got), reference \(Outcome(reference)); order \(order)")
                    return
                }
                #expect((try db.document(withID: id) == nil) == got.deleted)
                outcomes.append(got)
            }
            if depth >= 20, outcomes[0].leaves != outcomes[1].leaves || outcomes[0].winner != outcomes[1].winner {
                Issue.record("seed \(seed), depth \(depth), doc-\(n): the two orders give \(outcomes[0]) and \(outcomes[1])")
                return
            }
        }
        for db in dbs {
            let report = try db.check()
            #expect(report.isHealthy, "\(report.problems.prefix(5))")
            #expect(report.documents == docs)
        }
    }
}

// MARK: - The test's own model

/// One insertion: a revision with its history, as a peer sends it.
private struct Insertion: Equatable, CustomStringConvertible {
    var history: [String]
    var deleted: Bool
    var generation: Int { Int(history[0].prefix { $0 != "-" })! }
    var description: String { "\(history)\(deleted ? " deleted" : "")" }
}

/// What the tests compare: the revisions, their links, the leaves with their deletion, and the
/// winner.
private struct Outcome: Equatable, CustomStringConvertible {
    var links: Set<String>
    var leaves: [String: Bool]
    var winner: String
    var deleted: Bool

    init(_ tree: RevTree) {
        links = Set(tree.revs.map { "\($0.parent >= 0 ? tree.revs[$0.parent].id : "-")>\($0.id)" })
        let mask = tree.leafMask()
        leaves = Dictionary(uniqueKeysWithValues: tree.revs.indices.filter { mask[$0] }.map { (tree.revs[$0].id, tree.revs[$0].deleted) })
        let w = tree.revs[tree.winner()!]
        winner = w.id
        deleted = w.deleted
    }

    init(_ tree: RevisionTree) {
        links = Set(tree.revisions.map { "\($0.parentRevisionID ?? "-")>\($0.revisionID)" })
        leaves = Dictionary(uniqueKeysWithValues: tree.revisions.filter(\.isLeaf).map { ($0.revisionID, $0.isDeleted) })
        let current = tree.currentRevisionID
        winner = current
        deleted = tree.revisions.first { $0.revisionID == current }!.isDeleted
    }

    init(_ r: ReferenceTree) {
        links = Set(r.nodes.keys.map { "\(r.parent[$0] ?? "-")>\($0)" })
        leaves = r.leaves
        winner = r.winner
        deleted = r.leaves[winner]!
    }

    var description: String {
        "winner \(winner)\(deleted ? " (deleted)" : ""), leaves \(leaves.sorted { $0.key < $1.key }.map { "\($0.key)\($0.value ? "†" : "")" }), \(links.count) revisions"
    }
}

/// The reference: revisions as a dictionary of parent links, each history merged path by path
/// (every revision it names added, each linked to the next one unless already linked), the
/// winner by seed 004's rule, then pruning to a depth, keeping the paths from an open conflict's
/// common ancestor. Written apart from `RevTree`, sharing none of its code.
private struct ReferenceTree {
    var nodes: [String: Bool] = [:]   // ID → deleted
    var parent: [String: String] = [:]

    static func generation(_ id: String) -> Int { Int(id.prefix { $0 != "-" })! }

    mutating func merge(_ path: [String], deleted: Bool) {
        for (i, id) in path.enumerated() {
            if nodes[id] == nil { nodes[id] = i == 0 ? deleted : false }
            if i + 1 < path.count, parent[id] == nil { parent[id] = path[i + 1] }
        }
    }

    var leaves: [String: Bool] {
        let inner = Set(parent.values)
        return nodes.filter { !inner.contains($0.key) }
    }

    /// Seed 004: undeleted before deleted, then the higher generation, then the higher ID.
    var winner: String {
        leaves.max { a, b in
            if a.value != b.value { return a.value }   // a deleted ranks below b live
            let (ga, gb) = (Self.generation(a.key), Self.generation(b.key))
            if ga != gb { return ga < gb }
            return Array(a.key.utf8).lexicographicallyPrecedes(Array(b.key.utf8))
        }!.key
    }

    private func chain(from id: String) -> [String] {
        var out = [id]
        while let p = parent[out.last!] { out.append(p) }
        return out
    }

    /// Returns whether anything was dropped.
    mutating func prune(_ depth: Int) -> Bool {
        let leaves = self.leaves
        var keep = Set<String>()
        for leaf in leaves.keys { keep.formUnion(chain(from: leaf).prefix(depth)) }
        let live = leaves.filter { !$0.value }.map(\.key)
        if live.count > 1 {
            var common = Set(chain(from: live[0]))
            for l in live.dropFirst() { common.formIntersection(chain(from: l)) }
            if let base = common.max(by: { Self.generation($0) < Self.generation($1) }) {
                for l in live {
                    for id in chain(from: l) {
                        keep.insert(id)
                        if id == base { break }
                    }
                }
            }
        }
        let dropped = nodes.keys.filter { !keep.contains($0) }
        for id in dropped {
            nodes[id] = nil
            parent[id] = nil
        }
        for (child, p) in parent where !keep.contains(p) { parent[child] = nil }
        return !dropped.isEmpty
    }
}

/// The revisions that really exist, as every peer's edits made them: one or two roots, up to
/// 12 generations, 1 to 8 leaves, some tombstones (a few with children: resurrections).
private struct TrueTree {
    var parent: [String: String] = [:]
    var deleted: [String: Bool] = [:]
    var leaves: [String] = []

    static func random(_ rng: inout SplitMix) -> TrueTree {
        var t = TrueTree()
        let roots = rng.chance(20) ? 2 : 1
        var tips: [String] = []
        for r in 0 ..< roots {
            let id = "1-r\(r)x\(rng.next(below: 1000))"
            t.deleted[id] = false
            tips.append(id)
        }
        let wanted = Int(rng.next(below: 8)) + 1
        let maxGen = Int(rng.next(below: 12)) + 1
        var steps = 0
        while steps < 60 {
            steps += 1
            let i = Int(rng.next(below: UInt64(tips.count)))
            let tip = tips[i]
            let g = ReferenceTree.generation(tip)
            if g >= maxGen { if tips.count >= wanted { break } else { continue } }
            let child = "\(g + 1)-\(String(rng.next(below: 1 << 20), radix: 16))"
            guard t.deleted[child] == nil else { continue }
            t.parent[child] = tip
            t.deleted[child] = rng.chance(15)
            if tips.count < wanted && rng.chance(30) {
                tips.append(child)   // a branch: the tip stays a leaf candidate too
            } else {
                tips[i] = child
            }
        }
        let inner = Set(t.parent.values)
        t.leaves = t.deleted.keys.filter { !inner.contains($0) }.sorted()
        // Leaves are tombstones more often than inner revisions.
        for l in t.leaves where rng.chance(35) { t.deleted[l] = true }
        return t
    }

    func path(from id: String) -> [String] {
        var out = [id]
        while let p = parent[out.last!] { out.append(p) }
        return out
    }

    /// The histories peers send: every leaf at least once, with its full history or truncated
    /// (its sender pruned it); some inner revisions (old revisions sent again); some histories
    /// split in two (the newer part first or last); some duplicates.
    func histories(_ rng: inout SplitMix) -> [Insertion] {
        var out: [Insertion] = []
        func add(_ id: String, keep: Int? = nil) {
            let full = path(from: id)
            let n = keep.map { min(max($0, 1), full.count) } ?? full.count
            out.append(Insertion(history: Array(full.prefix(n)), deleted: deleted[id]!))
        }
        for leaf in leaves {
            let full = path(from: leaf)
            switch rng.next(below: 10) {
            case 0 ..< 5:
                add(leaf)
            case 5 ..< 8:
                add(leaf, keep: Int(rng.next(below: UInt64(full.count))) + 1)   // truncated
            default:
                // Split: the older part as its own insertion of an inner revision.
                let cut = Int(rng.next(below: UInt64(full.count)))
                add(leaf, keep: cut + 1)
                if cut + 1 < full.count { add(full[cut + 1]) }
            }
        }
        let all = deleted.keys.sorted()
        for _ in 0 ..< Int(rng.next(below: 4)) {
            let id = all[Int(rng.next(below: UInt64(all.count)))]
            add(id, keep: rng.chance(50) ? nil : Int(rng.next(below: 6)) + 1)
        }
        if !out.isEmpty, rng.chance(30) { out.append(out[Int(rng.next(below: UInt64(out.count)))]) }
        return out
    }
}
