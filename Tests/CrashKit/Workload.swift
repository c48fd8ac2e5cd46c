import SetteeStorage

/// SplitMix64: small, fast and deterministic, so every run replays from its seed.
package struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A value in `0..<bound` (bound > 0).
    package mutating func next(below bound: UInt64) -> UInt64 { next() % bound }
    package mutating func chance(_ percent: UInt64) -> Bool { next(below: 100) < percent }
    package mutating func shuffle<T>(_ a: inout [T]) {
        guard a.count > 1 else { return }
        for i in stride(from: a.count - 1, to: 0, by: -1) { a.swapAt(i, Int(next(below: UInt64(i + 1)))) }
    }
    /// Mixes two numbers into a seed (a workload step, a cycle).
    package static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        var g = SplitMix(seed: a ^ (b &* 0xD6E8_FEB8_6659_FD93))
        _ = g.next()
        return g.next()
    }
}

/// The contents of a database: tree name → key → value. Trees that are absent are empty.
package typealias Contents = [String: [[UInt8]: [UInt8]]]

/// One operation of a workload step.
package enum Operation {
    case put(tree: String, key: [UInt8], value: [UInt8])
    case delete(tree: String, key: [UInt8])
}

/// One write transaction of a workload: committed unless `aborts`, in which case it throws after
/// its operations and must leave nothing. `checkpoint` asks for an explicit checkpoint after it.
package struct Step {
    package var operations: [Operation]
    package var aborts: Bool
    package var checkpoint: Bool
}

/// A seeded random workload: single puts, multi-put transactions, deletes, long keys, values
/// from empty to a few hundred KiB (compressible or not), aborted transactions and checkpoints.
/// Step `i` depends only on the seed and `i`, so a parent process can replay what its child did.
package struct Workload {
    package static let trees = ["alpha", "beta", "gamma"]
    package let seed: UInt64
    /// The largest value a step may write.
    package var maxValue: Int

    package init(seed: UInt64, maxValue: Int = 256 << 10) {
        self.seed = seed
        self.maxValue = maxValue
    }

    package func step(_ index: Int) -> Step {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(index)))
        let count: Int
        switch r.next(below: 10) {
        case 0..<5: count = 1
        case 5..<9: count = 2 + Int(r.next(below: 19))
        default: count = 20 + Int(r.next(below: 281))
        }
        var ops: [Operation] = []
        ops.reserveCapacity(count)
        for _ in 0..<count {
            let tree = Self.trees[Int(r.next(below: 3))]
            let key = Self.key(&r)
            if r.chance(20) {
                ops.append(.delete(tree: tree, key: key))
            } else {
                ops.append(.put(tree: tree, key: key, value: value(&r)))
            }
        }
        return Step(operations: ops, aborts: r.chance(5), checkpoint: r.chance(2))
    }

    private static func key(_ r: inout SplitMix) -> [UInt8] {
        let n = r.next(below: 600)
        var k = Array("k\(n)".utf8)
        if r.chance(4) {
            // Long keys, up to the limit, sharing long prefixes.
            let length = 200 + Int(r.next(below: UInt64(StoreConfiguration.maxKeyLength - 200 + 1)))
            k = Array("long-\(n % 40)-".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: length)
            k = Array(k.prefix(length))
        }
        return k
    }

    private func value(_ r: inout SplitMix) -> [UInt8] {
        let length: Int
        switch r.next(below: 100) {
        case 0..<40: length = Int(r.next(below: 65))
        case 40..<70: length = 65 + Int(r.next(below: 448))
        case 70..<90: length = 513 + Int(r.next(below: 7680))
        case 90..<98: length = 8192 + Int(r.next(below: 57345))
        default: length = 65536 + Int(r.next(below: UInt64(max(1, maxValue - 65536 + 1))))
        }
        var v = [UInt8](repeating: 0, count: min(length, maxValue))
        if r.chance(50) {
            // Compressible: a short random phrase repeated.
            let phrase = (0..<(1 + Int(r.next(below: 16)))).map { _ in UInt8(truncatingIfNeeded: r.next()) }
            for i in v.indices { v[i] = phrase[i % phrase.count] }
        } else {
            var i = 0
            while i < v.count {
                var word = r.next()
                for _ in 0..<8 where i < v.count { v[i] = UInt8(truncatingIfNeeded: word); word >>= 8; i += 1 }
            }
        }
        return v
    }

    /// Runs `s` against `store` as one write transaction; returns whether it committed. An
    /// explicit checkpoint the step asks for is left to the caller, so a failure there is not
    /// mistaken for a failed commit.
    package func run(_ s: Step, on store: Store) throws -> Bool {
        do {
            try store.write { tx in
                for op in s.operations {
                    switch op {
                    case .put(let name, let key, let value):
                        let tree = try tx.tree(named: name) ?? tx.createTree(named: name)
                        try tx.put(key, value, in: tree)
                    case .delete(let name, let key):
                        if let tree = tx.tree(named: name) { _ = try tx.delete(key, in: tree) }
                    }
                }
                if s.aborts { throw AbortedStep() }
            }
        } catch is AbortedStep {
            return false
        }
        return true
    }

    /// Applies step `index` to `contents` (nothing when it aborts).
    package func apply(_ index: Int, to contents: inout Contents) {
        let s = step(index)
        guard !s.aborts else { return }
        for op in s.operations {
            switch op {
            case .put(let tree, let key, let value): contents[tree, default: [:]][key] = value
            case .delete(let tree, let key): contents[tree]?[key] = nil
            }
        }
    }
}

struct AbortedStep: Error {}

/// Reads everything in `store` (every value resolved, so every checksum on the way is verified).
package func readContents(_ store: Store) throws -> Contents {
    try store.read { tx in
        var out: Contents = [:]
        for name in tx.treeNames {
            guard let tree = tx.tree(named: name) else { continue }
            var entries: [[UInt8]: [UInt8]] = [:]
            try tx.forEach(in: tree) { k, v in
                entries[[UInt8](k)] = [UInt8](v)
                return true
            }
            if !entries.isEmpty { out[name] = entries }
        }
        return out
    }
}

/// Drops empty trees, so a tree created and emptied equals one never created.
package func normalized(_ c: Contents) -> Contents { c.filter { !$0.value.isEmpty } }

/// Which of the states a recovered database may be in it actually is: `base` with the first `j`
/// of `steps` applied, for the smallest `j >= atLeast` that matches, or nil when none does (a
/// lost commit, or one partly visible).
package func matchState(_ found: Contents, base: Contents, steps: [Int], atLeast: Int, workload: Workload) -> (Int, Contents)? {
    var state = normalized(base)
    let found = normalized(found)
    for j in 0...steps.count {
        if j > 0 {
            workload.apply(steps[j - 1], to: &state)
            state = normalized(state)
        }
        if j >= atLeast, found == state { return (j, state) }
    }
    return nil
}

/// A short description of how two contents differ, for failure reports.
package func difference(_ found: Contents, _ expected: Contents) -> String {
    for (tree, entries) in expected {
        let f = found[tree] ?? [:]
        for (k, v) in entries where f[k] != v {
            return "tree \(tree), key \(String(decoding: k.prefix(40), as: UTF8.self)): expected \(v.count) bytes, found \(f[k].map { "\($0.count) bytes" } ?? "nothing")"
        }
    }
    for (tree, entries) in found {
        let e = expected[tree] ?? [:]
        for (k, _) in entries where e[k] == nil {
            return "tree \(tree), key \(String(decoding: k.prefix(40), as: UTF8.self)): present but never committed"
        }
    }
    return "no difference"
}

/// What reopening a database after a crash showed.
package enum RecoveryOutcome {
    /// `check()` passed and the contents are `base` with the first `applied` candidate commits.
    case recovered(applied: Int, state: Contents)
    /// Opening or `check()` failed.
    case corruptOpen(String)
    /// The contents match no state the acknowledged commits allow.
    case lost(String)
}

/// Reopens the database in `directory` after a crash and checks it: `check()` passes, and its
/// contents are `base` plus the first `j` of `candidates` (the commits attempted since `base`, in
/// order), for some `j >= acknowledged`: every acknowledged commit is there with exactly its
/// values, and the ones after it are wholly there or wholly absent.
package func verifyRecovered(directory: String, configuration: StoreConfiguration, base: Contents, candidates: [Int], acknowledged: Int, workload: Workload) -> RecoveryOutcome {
    let store: Store
    do {
        store = try Store(directory: directory, configuration: configuration)
    } catch {
        return .corruptOpen("reopening failed: \(error)")
    }
    defer { store.abandon() }
    do {
        _ = try store.check()
    } catch {
        return .corruptOpen("check() failed: \(error)")
    }
    let found: Contents
    do {
        found = try readContents(store)
    } catch {
        return .corruptOpen("reading everything failed: \(error)")
    }
    guard let (j, state) = matchState(found, base: base, steps: candidates, atLeast: acknowledged, workload: workload) else {
        var expected = base
        for s in candidates.prefix(acknowledged) { workload.apply(s, to: &expected) }
        return .lost("the recovered state is not one the acknowledged commits allow (\(acknowledged) acknowledged of \(candidates.count) attempted; \(difference(normalized(found), normalized(expected))))")
    }
    return .recovered(applied: j, state: state)
}
