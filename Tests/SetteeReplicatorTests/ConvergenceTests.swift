import Foundation
import Settee
import Testing
@testable import SetteeReplicator

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
/// Revision trees are kept 1000 deep so pruning, which each database does on its own, never
/// removes a revision one database has and another not.
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
        var description: String {
            "\(edits) edits, \(deletes) deletions, \(purges) purges, \(oneShot) one-shot, \(interrupted) interrupted, "
                + "\(continuous) continuous replications; \(documents) documents compared; \(pulledEvents) pulled documents reported"
        }
    }

    static func run(seed: UInt64, stats: inout Stats) async throws -> Bool {
        var rng = SeededGenerator(seed: seed)
        let dir = try TestDirectory()
        let count = Int.random(in: 3 ... 5, using: &rng)
        let dbs = try (0 ..< count).map { try dir.open("db\($0)") }
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

        for _ in 0 ..< 40 {
            if Int.random(in: 0 ..< 100, using: &rng) < 55 {
                try edit(dbs.randomElement(using: &rng)!, &rng)
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

        let expected = try shapes(hub)
        stats.documents += expected.count
        for (n, db) in dbs.enumerated().dropFirst() {
            let got = try shapes(db)
            guard got == expected else {
                for id in Set(got.keys).union(expected.keys).sorted() where got[id] != expected[id] {
                    print("seed \(seed): db\(n) \(id): \(got[id].map(String.init(describing:)) ?? "absent") vs hub \(expected[id].map(String.init(describing:)) ?? "absent")")
                }
                return false
            }
            guard db.count == hub.count else { print("seed \(seed): counts differ"); return false }
            for id in expected.keys {
                guard try db.document(withID: id)?.toDictionary() == hub.document(withID: id)?.toDictionary() else {
                    print("seed \(seed): \(id)'s current body differs"); return false
                }
            }
        }
        for db in dbs { try db.close() }
        return true
    }
}
