import Foundation
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
@testable import SetteeServer
import Testing

/// The convergence property over HTTP, through a proxy that refuses, cuts (mid-request and
/// mid-response) and stalls connections at seeded random points: devices that edit, delete and
/// conflict at random and replicate with `settee serve` in random ways (one-shot push, pull or
/// both, some continuous for a while) end, after a final exchange with the proxy turned off, with
/// identical revision trees, winners and bodies, and the server with them.
///
/// Runs: `SETTEE_HTTP_CONVERGENCE_RUNS=N` (default 2; `SETTEE_LONG=1` makes it 200), first seed
/// `SETTEE_HTTP_CONVERGENCE_SEED=S` (default random, printed; run `i` uses `S + i`).
@Suite struct HTTPConvergenceTests {
    static var runs: Int {
        let env = ProcessInfo.processInfo.environment
        if let n = env["SETTEE_HTTP_CONVERGENCE_RUNS"].flatMap(Int.init) { return n }
        return env["SETTEE_LONG"] == "1" ? 200 : 2
    }

    @Test func devicesConvergeThroughAFaultyNetwork() async throws {
        let first = ProcessInfo.processInfo.environment["SETTEE_HTTP_CONVERGENCE_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 1 ... 1 << 40)
        let runs = Self.runs
        print("HTTPConvergenceTests: \(runs) runs from seed \(first)")
        let started = ContinuousClock.now
        var totals = FaultProxy.Counts()
        var failedReplications = 0
        for i in 0 ..< runs {
            let seed = first &+ UInt64(i)
            let (ok, counts, failed) = try await Self.run(seed: seed)
            totals.connections += counts.connections
            totals.refused += counts.refused
            totals.cutRequests += counts.cutRequests
            totals.cutResponses += counts.cutResponses
            totals.stalls += counts.stalls
            failedReplications += failed
            if !ok {
                Issue.record("HTTP convergence failed, seed \(seed) (SETTEE_HTTP_CONVERGENCE_SEED=\(seed) SETTEE_HTTP_CONVERGENCE_RUNS=1)")
                break
            }
        }
        print("HTTPConvergenceTests: \(runs) runs from seed \(first) in \(ContinuousClock.now - started): \(totals.connections) connections, "
              + "\(totals.refused) refused, \(totals.cutRequests) cut mid-request, \(totals.cutResponses) cut mid-response, "
              + "\(totals.stalls) stalled; \(failedReplications) replications that gave up")
    }

    static func run(seed: UInt64) async throws -> (Bool, FaultProxy.Counts, Int) {
        var rng = SeededRandom(seed: seed)
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        let proxy = try await FaultProxy.start(to: server.port, seed: seed)
        defer {
            Task {
                await proxy.stop()
                await server.stop()
            }
        }
        let url = URL(string: "http://127.0.0.1:\(proxy.port)/db")!
        let devices = try (0 ..< Int.random(in: 2 ... 3, using: &rng)).map { try scratch.open("device\($0)") }
        let ids = (0 ..< 6).map { "doc-\($0)" }
        var failed = 0

        func edit(_ db: Database, _ rng: inout SeededRandom) async throws {
            let id = ids.randomElement(using: &rng)!
            let current = try await db.document(withID: id)
            if Int.random(in: 0 ..< 100, using: &rng) < 15, let current {
                _ = try await db.deleteDocument(current, concurrencyControl: .lastWriteWins)
            } else {
                let m = current?.toMutable() ?? MutableDocument(id: id)
                m.setInt(Int.random(in: 0 ..< 5, using: &rng), forKey: "v")
                m.setString("k\(Int.random(in: 0 ..< 3, using: &rng))", forKey: "k\(Int.random(in: 0 ..< 3, using: &rng))")
                _ = try await db.saveDocument(m, concurrencyControl: .lastWriteWins)
            }
        }

        func replicator(_ db: Database, _ type: ReplicatorType, continuous: Bool, batch: Int) -> Replicator {
            var config = ReplicatorConfiguration(database: db, target: URLEndpoint(url: url))
            config.replicatorType = type
            config.continuous = continuous
            config.batchSize = batch
            config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
            config.maxAttempts = 4
            config.maxAttemptWaitTime = .milliseconds(20)
            config.heartbeat = .seconds(1)
            config.logHandler = { @Sendable _, _ in }
            return Replicator(config: config)
        }

        for _ in 0 ..< Int.random(in: 4 ... 8, using: &rng) {
            for db in devices {
                for _ in 0 ..< Int.random(in: 0 ... 4, using: &rng) { try await edit(db, &rng) }
            }
            let db = devices.randomElement(using: &rng)!
            let type = ReplicatorType.allCases.randomElement(using: &rng)!
            let batch = Int.random(in: 1 ... 4, using: &rng)
            if Int.random(in: 0 ..< 4, using: &rng) == 0 {
                // Continuous for a while, with edits meanwhile, then stopped.
                let r = replicator(db, type, continuous: true, batch: batch)
                r.start()
                for _ in 0 ..< 3 { try await edit(db, &rng) }
                try await Task.sleep(for: .milliseconds(Int.random(in: 50 ... 300, using: &rng)))
                r.stop()
                if await r.waitUntilStopped().error != nil { failed += 1 }
            } else {
                let r = replicator(db, type, continuous: false, batch: batch)
                r.start()
                if await r.waitUntilStopped().error != nil { failed += 1 }
            }
        }

        // The final exchange, without faults: every device pushes and pulls until nothing moves.
        proxy.faulty = false
        for _ in 0 ..< 3 {
            for db in devices {
                let r = replicator(db, .pushAndPull, continuous: false, batch: 50)
                r.start()
                let status = await r.waitUntilStopped()
                if let e = status.error { print("seed \(seed): final exchange failed: \(e)"); return (false, proxy.counts, failed) }
            }
        }
        let served = try #require(server.server.database(named: "db")?.database)
        let expected = try snapshot(served)
        var ok = true
        for (i, db) in devices.enumerated() {
            let got = try snapshot(db)
            if got != expected {
                ok = false
                for k in Set(got.keys).union(expected.keys) where got[k] != expected[k] {
                    print("seed \(seed): device\(i) \(k): \(got[k] ?? "-") vs server \(expected[k] ?? "-")")
                }
            }
        }
        return (ok, proxy.counts, failed)
    }
}

/// xorshift64*: a seed replays the same run.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }
}
