import Foundation
@_spi(Replication) import Settee
import Testing
@_spi(Replication) @testable import SetteeReplicator

/// The convergence property: databases that edit, delete, conflict and purge at random, and
/// replicate in random pairs (one-shot, interrupted, continuous), end with identical revision
/// trees and winners after a final full exchange.
///
/// Runs: `SETTEE_CONVERGENCE_RUNS=N` (default 3; `SETTEE_LONG=1` makes it 200), first seed
/// `SETTEE_CONVERGENCE_SEED=S` (default random, printed; run `i` uses `S + i`).
///
/// Purges are local and not replicated, and a checkpoint says nothing of what a peer purged
/// afterwards, so the final exchange runs with `start(reset: true)`: a hub (the first database)
/// pulls from every other, then pushes to every other; `_revs_diff` keeps it to what is missing.
/// Each run mixes peers that keep revision trees 5, 20 and 1,000 deep, so truncated histories
/// (from a peer that pruned) cross between them and trees pruned differently meet. Trees then
/// hold different old revisions. A peer can also hold as a leaf a revision that another peer
/// knows as an ancestor, when the history that would link it arrived truncated (CouchDB's merge
/// does the same: nothing in the tree can tell). So what must agree is: the leaves no peer has
/// seen with a child, with their deletion, on every peer; and where no peer holds such an
/// extra leaf, the current revision, the current body and the count; a revision two peers both
/// hold with a parent has the same parent on both.
@Suite struct ConvergenceTests {
    static var runs: Int {
        let env = ProcessInfo.processInfo.environment
        if let n = env["SETTEE_CONVERGENCE_RUNS"].flatMap(Int.init) { return n }
        return env["SETTEE_LONG"] == "1" ? 200 : 3
    }

    @Test func randomEditsAndReplicationsConverge() async throws {
        let first = ProcessInfo.processInfo.environment["SETTEE_CONVERGENCE_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 1 ... 1 << 40)
        let runs = Self.runs
        print("ConvergenceTests: \(runs) runs from seed \(first)")
        let started = ContinuousClock.now
        var stats = Stats()
        for i in 0 ..< runs {
            let seed = first &+ UInt64(i)
            let ok = try await Self.run(seed: seed, stats: &stats)
            if !ok { Issue.record("convergence failed, seed \(seed) (SETTEE_CONVERGENCE_SEED=\(seed) SETTEE_CONVERGENCE_RUNS=1)"); break }
        }
        print("ConvergenceTests: \(runs) runs from seed \(first) in \(ContinuousClock.now - started): \(stats)")
    }

    struct Stats: CustomStringConvertible {
        var edits = 0, deletes = 0, purges = 0, oneShot = 0, interrupted = 0, continuous = 0, documents = 0, pulledEvents = 0
        var truncated = 0, phantomLeaves = 0
        var description: String {
            "\(edits) edits, \(deletes) deletions, \(purges) purges, \(oneShot) one-shot, \(interrupted) interrupted, "
                + "\(continuous) continuous replications; \(documents) documents compared, \(truncated) trees held truncated, "
                + "\(phantomLeaves) leaves held that another peer knows as ancestors; "
                + "\(pulledEvents) pulled documents reported"
        }
    }

    static func run(seed: UInt64, stats: inout Stats) async throws -> Bool {
        var rng = SeededGenerator(seed: seed)
        let dir = try TestDirectory()
        let count = Int.random(in: 3 ... 5, using: &rng)
        // Every run has each depth at least once (count >= 3), in a random position.
        let depths = [5, 20, 1000]
        let offset = Int.random(in: 0 ..< 3, using: &rng)
        let dbs = try (0 ..< count).map { try dir.open("db\($0)", maxRevTreeDepth: depths[($0 + offset) % 3]) }
        let ids = (0 ..< 8).map { "doc-\($0)" }
        let merging = rng.next() % 3 == 0
        let resolver: (any ConflictResolver)? = merging ? MergeResolver() : nil
        let resolved = Locked(0)

        func edit(_ db: Database, _ rng: inout SeededGenerator) throws {
            let id = ids.randomElement(using: &rng)!
            let r = Int.random(in: 0 ..< 100, using: &rng)
            let current = try db.document(withID: id)
            if r < 15, let current {
                if Bool.random(using: &rng) {
                    _ = try db.deleteDocument(current, concurrencyControl: .lastWriteWins)
                } else {
                    // A tombstone keeping a property (seed 003).
                    let m = current.toMutable()
                    m.setData(["kept": current["v"] ?? .null])
                    m.isDeletion = true
                    // A continuous replicator may delete it meanwhile: then the save reports the
                    // conflict (false) instead of resurrecting it.
                    _ = try db.saveDocument(m, concurrencyControl: .lastWriteWins)
                }
                stats.deletes += 1
            } else if r < 20 {
                if try db.revisionTree(withID: id) != nil { try db.purgeDocument(withID: id); stats.purges += 1 }
            } else {
                let m = current?.toMutable() ?? MutableDocument(id: id)
                m.setInt(Int.random(in: 0 ..< 5, using: &rng), forKey: "v")
                m.setString("k\(Int.random(in: 0 ..< 3, using: &rng))", forKey: "k\(Int.random(in: 0 ..< 3, using: &rng))")
                _ = try db.saveDocument(m, concurrencyControl: .lastWriteWins)
                stats.edits += 1
            }
        }

        func configure(_ a: Database, _ b: Database, _ rng: inout SeededGenerator, continuous: Bool) -> Replicator {
            var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
            config.replicatorType = ReplicatorType.allCases.randomElement(using: &rng)!
            config.continuous = continuous
            config.conflictResolver = resolver
            config.batchSize = Int.random(in: 1 ... 4, using: &rng)
            config.logHandler = { _, _ in }
            let r = Replicator(config: config)
            r.addDocumentReplicationListener { rep in
                if rep.direction == .pull { resolved.withLock { $0 += rep.documents.count } }
            }
            return r
        }

        // Every parent link any peer has shown, by document: what the revisions really descend
        // from (peers that prune forget some of it).
        var links: [String: [String: String]] = [:]
        func observe(_ dbs: [Database]) throws {
            for db in dbs {
                for (id, shape) in try shapes(db) {
                    for (rev, parent) in shape.parents { links[id, default: [:]][rev] = parent }
                }
            }
        }

        for _ in 0 ..< 40 {
            if Int.random(in: 0 ..< 100, using: &rng) < 55 {
                try edit(dbs.randomElement(using: &rng)!, &rng)
                try observe(dbs)
                continue
            }
            let i = Int.random(in: 0 ..< count, using: &rng)
            let j = (i + Int.random(in: 1 ..< count, using: &rng)) % count
            switch Int.random(in: 0 ..< 3, using: &rng) {
            case 0:
                let r = configure(dbs[i], dbs[j], &rng, continuous: false)
                r.start()
                let s = await r.waitUntilStopped()
                if s.error != nil { Issue.record("seed \(seed): \(s.error!)"); return false }
                stats.oneShot += 1
                try observe(dbs)
            case 1:
                // Interrupted at a random point.
                let r = configure(dbs[i], dbs[j], &rng, continuous: false)
                let delay = Int.random(in: 0 ..< 1500, using: &rng)
                r.start()
                try await Task.sleep(for: .microseconds(delay))
                r.stop()
                let s = await r.waitUntilStopped()
                if s.error != nil { Issue.record("seed \(seed): \(s.error!)"); return false }
                stats.interrupted += 1
                try observe(dbs)
            default:
                let r = configure(dbs[i], dbs[j], &rng, continuous: true)
                r.start()
                for _ in 0 ..< Int.random(in: 0 ... 3, using: &rng) {
                    try edit(Bool.random(using: &rng) ? dbs[i] : dbs[j], &rng)
                    try await Task.sleep(for: .microseconds(Int.random(in: 0 ..< 800, using: &rng)))
                }
                if Bool.random(using: &rng) { _ = await waitFor(r, .idle) }
                r.stop()
                let s = await r.waitUntilStopped()
                if s.error != nil { Issue.record("seed \(seed): \(s.error!)"); return false }
                stats.continuous += 1
                try observe(dbs)
            }
        }

        // The final full exchange (see the suite's comment).
        let hub = dbs[0]
        for other in dbs.dropFirst() {
            let s = await replicate(hub, other, .pull, reset: true) { $0.conflictResolver = resolver; $0.logHandler = { _, _ in } }
            if s.error != nil { Issue.record("seed \(seed): \(s.error!)"); return false }
        }
        for other in dbs.dropFirst() {
            let s = await replicate(hub, other, .push, reset: true) { $0.logHandler = { _, _ in } }
            if s.error != nil { Issue.record("seed \(seed): \(s.error!)"); return false }
        }
        stats.pulledEvents += resolved.value

        try observe(dbs)
        let all = try dbs.map { try shapes($0) }
        let everyID = Set(all.flatMap(\.keys))
        stats.documents += everyID.count
        var phantomDocuments: Set<String> = []
        for id in everyID.sorted() {
            let known = links[id] ?? [:]
            func describe() -> String {
                dbs.indices.map { "db\($0) (depth \(dbs[$0].config.maxRevTreeDepth)): \(all[$0][id].map(String.init(describing:)) ?? "absent")" }
                    .joined(separator: "\n  ")
            }
            guard all.allSatisfy({ $0[id] != nil }) else { print("seed \(seed): \(id) is missing somewhere:\n  \(describe())"); return false }
            // A leaf that some peer has seen with a child is an ancestor: a peer that holds it as
            // a leaf got its descendant's history truncated (pruned by its sender) or pruned the
            // link itself, as CouchDB does. Every other leaf must be on every peer.
            let ancestors = Set(known.values)
            let trueLeaves = all.map { $0[id]!.leaves.filter { !ancestors.contains($0.key) } }
            guard trueLeaves.allSatisfy({ $0 == trueLeaves[0] }) else { print("seed \(seed): \(id)'s leaves differ:\n  \(describe())"); return false }
            let phantoms = all.map { $0[id]!.leaves.count - trueLeaves[0].count }
            if phantoms.contains(where: { $0 > 0 }) {
                phantomDocuments.insert(id)
                stats.phantomLeaves += phantoms.reduce(0, +)
            }
            for (n, shapes) in all.enumerated() {
                if let clash = shapes[id]!.parentClash(with: all[0][id]!) { print("seed \(seed): db\(n) \(id): \(clash)"); return false }
            }
            // The peers without such a leaf agree on the current revision and body.
            let plain = dbs.indices.filter { phantoms[$0] == 0 }
            guard let first = plain.first else { continue }
            guard plain.allSatisfy({ all[$0][id]!.current == all[first][id]!.current }) else {
                print("seed \(seed): \(id)'s current revision differs:\n  \(describe())"); return false
            }
            let body = try await dbs[first].document(withID: id)?.toDictionary()
            for n in plain.dropFirst() where try await dbs[n].document(withID: id)?.toDictionary() != body {
                print("seed \(seed): db\(n) \(id)'s current body differs"); return false
            }
        }
        for (n, db) in dbs.enumerated() {
            for id in all[n].keys where try await db.revisionTree(withID: id)!.revisions.contains(where: { $0.parentRevisionID == nil && $0.generation > 1 }) {
                stats.truncated += 1
            }
        }
        if phantomDocuments.isEmpty {
            guard try dbs.allSatisfy({ try $0.count == hub.count }) else { print("seed \(seed): counts differ"); return false }
        }
        for db in dbs { try db.close() }
        return true
    }
}
