import Foundation
import Testing
@testable import SetteeStorage

/// Thousands of random puts, deletes, commits, aborts, checkpoints and reopens, checked against a
/// dictionary. Fixed seeds always run, plus one fresh seed that is printed so a failure replays.
@Suite struct ModelTests {
    struct Aborted: Error {}

    static let freshSeed = UInt64.random(in: 1...UInt64.max)

    @Test(arguments: [1, 2, 3, 42, ModelTests.freshSeed])
    func randomOperationsMatchADictionary(seed: UInt64) throws {
        print("ModelTests seed \(seed) (replay: run randomOperationsMatchADictionary with this seed)")
        let dir = TemporaryDirectory("model"); defer { dir.cleanup() }
        var rng = SeededGenerator(seed: seed)
        var config = smallConfiguration(checkpointInterval: 1 << 16)
        config.compressionThreshold = 64
        var store = try Store(directory: dir.path, configuration: config)
        var model: [String: [[UInt8]: [UInt8]]] = ["a": [:], "b": [:]]
        func randomKey() -> [UInt8] {
            // A small key space so puts overwrite and deletes hit.
            let i = Int.random(in: 0..<600, using: &rng)
            return i % 5 == 0 ? bytes("k\(i)") : paddedKey("key-", i, width: 6)
        }
        func randomValue() -> [UInt8] {
            let n = [0, 3, 20, 200, 600, 1500].randomElement(using: &rng)!
            let fill = UInt8.random(in: 0...255, using: &rng)
            return (0..<n).map { i in i % 3 == 0 ? fill : UInt8(truncatingIfNeeded: i) }
        }
        func verify() throws {
            try store.read { tx throws in
                for (name, entries) in model {
                    guard let tree = tx.tree(named: name) else {
                        #expect(entries.isEmpty, "tree \(name) missing (seed \(seed))")
                        continue
                    }
                    let all = try tx.all(tree)
                    #expect(all.count == entries.count, "seed \(seed)")
                    #expect(all.map(\.0) == entries.keys.sorted { $0.lexicographicallyPrecedes($1) }, "seed \(seed)")
                    for (k, v) in all where entries[k] != v {
                        Issue.record("value mismatch for a key (seed \(seed))")
                    }
                    #expect(try tx.count(in: tree) == entries.count)
                }
            }
        }
        for step in 0..<1500 {
            let action = Int.random(in: 0..<100, using: &rng)
            if action < 80 {
                // A transaction of 1 to 20 operations, sometimes aborted.
                let abort = Int.random(in: 0..<10, using: &rng) == 0
                var staged = model
                do {
                    try store.write { tx throws in
                        for _ in 0..<Int.random(in: 1...20, using: &rng) {
                            let name = Bool.random(using: &rng) ? "a" : "b"
                            let tree = try tx.createTree(named: name)
                            let key = randomKey()
                            if Int.random(in: 0..<3, using: &rng) == 0 {
                                let existed = try tx.delete(key, in: tree)
                                #expect(existed == (staged[name]![key] != nil), "seed \(seed) step \(step)")
                                staged[name]![key] = nil
                            } else {
                                let value = randomValue()
                                try tx.put(key, value, in: tree)
                                staged[name]![key] = value
                            }
                            // Reads inside the transaction see its writes.
                            #expect(try tx.value(forKey: key, in: tree) == staged[name]![key], "seed \(seed) step \(step)")
                        }
                        if abort { throw Aborted() }
                    }
                    model = staged
                } catch is Aborted {}
            } else if action < 88 {
                try verify()
            } else if action < 93 {
                try store.checkpoint()
            } else if action < 97 {
                try store.close()
                store = try Store(directory: dir.path, configuration: config)
            } else {
                // A crash: no checkpoint, no trim; everything committed must come back.
                store.abandon()
                store = try Store(directory: dir.path, configuration: config)
            }
        }
        try verify()
        _ = try store.check()
        try store.close()
    }
}
