import Foundation
import Testing
@testable import SetteeStorage

/// Tree behaviour across node splits, merges, checkpoints and reopen.
@Suite struct BTreeTests {
    @Test func insertLookupAndOrderInRandomOrder() throws {
        let dir = TemporaryDirectory("btree"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        var rng = SeededGenerator(seed: 7)
        let order = (0..<20_000).shuffled(using: &rng)
        for chunk in stride(from: 0, to: order.count, by: 500) {
            try store.write { tx throws in
                for i in order[chunk..<min(chunk + 500, order.count)] {
                    try tx.put(paddedKey("doc-", i), bytes("v\(i)"), in: tree)
                }
            }
        }
        try store.read { tx throws in
            #expect(try tx.count(in: tree) == 20_000)
            for i in stride(from: 0, to: 20_000, by: 37) {
                #expect(try tx.value(forKey: paddedKey("doc-", i), in: tree) == bytes("v\(i)"))
            }
            #expect(try tx.value(forKey: bytes("doc-"), in: tree) == nil)
            #expect(try tx.value(forKey: paddedKey("doc-", 20_000), in: tree) == nil)
            let all = try tx.all(tree)
            #expect(all.count == 20_000)
            #expect(all.map(\.0) == (0..<20_000).map { paddedKey("doc-", $0) })
            let backwards = try tx.all(tree, reverse: true)
            #expect(backwards.map(\.0) == all.map(\.0).reversed())
        }
        let report = try store.check()
        #expect(report.entries == 20_000)
        #expect(report.height >= 2)
        try store.close()
    }

    @Test func rangeScansStartAtTheRightKey() throws {
        let dir = TemporaryDirectory("range"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in
            for i in stride(from: 0, to: 5000, by: 2) { try tx.put(paddedKey("k", i), [1], in: tree) }
        }
        try store.read { tx throws in
            var seen: [[UInt8]] = []
            try tx.forEach(in: tree, from: paddedKey("k", 1001)) { k, _ in
                seen.append([UInt8](k)); return seen.count < 3
            }
            #expect(seen == [paddedKey("k", 1002), paddedKey("k", 1004), paddedKey("k", 1006)])
            seen = []
            try tx.forEach(in: tree, from: paddedKey("k", 1001), reverse: true) { k, _ in
                seen.append([UInt8](k)); return seen.count < 3
            }
            #expect(seen == [paddedKey("k", 1000), paddedKey("k", 998), paddedKey("k", 996)])
            seen = []
            try tx.forEach(in: tree, from: paddedKey("k", 1000), reverse: true) { k, _ in
                seen.append([UInt8](k)); return false
            }
            #expect(seen == [paddedKey("k", 1000)])
            seen = []
            try tx.forEach(in: tree, from: bytes("z")) { k, _ in seen.append([UInt8](k)); return true }
            #expect(seen.isEmpty)
        }
        try store.close()
    }

    @Test func rangeCountsAgreeWithAWalkOnDiskAndInAWriteTransaction() throws {
        let dir = TemporaryDirectory("range-count"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        let seed = UInt64.random(in: 0 ... .max)
        print("rangeCountsAgreeWithAWalk seed: \(seed)")
        var rng = SeededGenerator(seed: seed)
        // Keys of several lengths (so nodes hold different numbers of them), some sharing prefixes.
        var keys = Set<[UInt8]>()
        while keys.count < 6_000 {
            let n = Int.random(in: 1...24, using: &rng)
            keys.insert((0..<n).map { _ in UInt8.random(in: 0x61...0x64, using: &rng) })
        }
        let sorted = keys.sorted { $0.lexicographicallyPrecedes($1) }
        try store.write { tx throws in for k in keys { try tx.put(k, [1], in: tree) } }
        func expected(_ lo: [UInt8]?, _ hi: [UInt8]?) -> Int {
            sorted.filter { k in (lo.map { !k.lexicographicallyPrecedes($0) } ?? true) && (hi.map { k.lexicographicallyPrecedes($0) } ?? true) }.count
        }
        func bound() -> [UInt8]? {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: return nil
            case 1: return []
            case 2: return sorted.randomElement(using: &rng)!
            default: return (0..<Int.random(in: 1...4, using: &rng)).map { _ in UInt8.random(in: 0x60...0x65, using: &rng) }
            }
        }
        let bounds = (0..<400).map { _ in (bound(), bound()) }
        try store.read { tx throws in
            #expect(try tx.count(in: tree, from: nil, to: nil) == sorted.count)
            for (lo, hi) in bounds { #expect(try tx.count(in: tree, from: lo, to: hi) == expected(lo, hi), "\(String(describing: lo)) ..< \(String(describing: hi))") }
        }
        // In a write transaction the tree is part memory nodes, part disk nodes.
        try store.write { tx throws in
            for k in sorted.enumerated().filter({ $0.offset % 3 == 0 }).map(\.element) { _ = try tx.delete(k, in: tree) }
            let left = sorted.enumerated().filter { $0.offset % 3 != 0 }.map(\.element)
            for (lo, hi) in bounds {
                let want = left.filter { k in (lo.map { !k.lexicographicallyPrecedes($0) } ?? true) && (hi.map { k.lexicographicallyPrecedes($0) } ?? true) }.count
                #expect(try tx.count(in: tree, from: lo, to: hi) == want)
            }
        }
        try store.close()
    }

    /// A cursor, placed anywhere and moved either way, meets the entries a walk meets, on disk
    /// and in a write transaction with memory nodes; several cursors move independently; a
    /// change in the write transaction, or its end, ends the cursors made before.
    @Test func cursorsMeetWhatAWalkMeetsOnDiskAndInAWriteTransaction() throws {
        let dir = TemporaryDirectory("cursor"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        let empty = try store.write { try $0.createTree(named: "empty") }
        let seed = UInt64.random(in: 0 ... .max)
        print("cursorsMeetWhatAWalkMeets seed: \(seed)")
        var rng = SeededGenerator(seed: seed)
        var keys = Set<[UInt8]>()
        while keys.count < 5_000 {
            let n = Int.random(in: 1...24, using: &rng)
            keys.insert((0..<n).map { _ in UInt8.random(in: 0x61...0x64, using: &rng) })
        }
        // Some values past the inline limit, stored apart (and compressed): lent all the same.
        func value(_ k: [UInt8]) -> [UInt8] { k.count % 5 == 0 ? [UInt8](repeating: k[0], count: 3_000) + k : k + [UInt8(k.count)] }
        try store.write { tx throws in for k in keys { try tx.put(k, value(k), in: tree) } }
        func start() -> [UInt8]? {
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: return nil
            case 1: return []
            case 2: return Array(keys.randomElement(using: &rng)!)
            default: return (0..<Int.random(in: 1...4, using: &rng)).map { _ in UInt8.random(in: 0x60...0x65, using: &rng) }
            }
        }
        let starts = (0..<150).map { _ in (start(), Bool.random(using: &rng), Int.random(in: 1...400, using: &rng)) }
        func agree(_ walk: (Tree, [UInt8]?, Bool, ([UInt8], [UInt8]) -> Bool) throws -> Void,
                   _ cursor: (Tree, [UInt8]?, Bool) throws -> TreeCursor, label: String) throws {
            for (from, reverse, steps) in starts {
                var walked: [([UInt8], [UInt8])] = []
                try walk(tree, from, reverse) { k, v in walked.append((k, v)); return walked.count < steps }
                let c = try cursor(tree, from, reverse)
                var pulled: [([UInt8], [UInt8])] = []
                while c.isValid, pulled.count < steps {
                    pulled.append((Array(c.key), try c.withValue { Array($0) }))
                    try c.next()
                }
                #expect(pulled.map(\.0) == walked.map(\.0) && pulled.map(\.1) == walked.map(\.1),
                        "seed \(seed) \(label): from \(String(describing: from)) reverse \(reverse)")
            }
            // Two cursors stepped in turn do not disturb each other.
            let a = try cursor(tree, nil, false), b = try cursor(tree, nil, true)
            var ab: [[UInt8]] = [], ba: [[UInt8]] = []
            while a.isValid || b.isValid {
                if a.isValid { ab.append(Array(a.key)); try a.next() }
                if b.isValid { ba.append(Array(b.key)); try b.next() }
            }
            #expect(ab == ba.reversed() && !ab.isEmpty)
            let none = try cursor(empty, nil, false), noneBack = try cursor(empty, [0x61], true)
            #expect(!none.isValid && !noneBack.isValid && none.key.isEmpty)
        }
        try store.read { tx throws in
            try agree({ t, f, r, b in try tx.forEach(in: t, from: f, reverse: r) { b(Array($0), Array($1)) } },
                      { t, f, r in try tx.cursor(in: t, from: f, reverse: r) }, label: "read")
            // Re-placed, a cursor starts over.
            let c = try tx.cursor(in: tree, reverse: true)
            try c.seek(nil)
            let last = Array(c.key)
            try c.seek([0x60])
            #expect(!c.isValid, "nothing is at or before a key below every key: \(Array(c.key))")
            try c.seek([0x61])
            #expect(Array(c.key) == (keys.contains([0x61]) ? [0x61] : []))
            try c.seek([0x65])
            #expect(Array(c.key) == last)
        }
        var left: [[UInt8]] = []
        try store.write { tx throws in
            for (n, k) in keys.sorted(by: { $0.lexicographicallyPrecedes($1) }).enumerated() where n % 3 == 0 { _ = try tx.delete(k, in: tree) }
            try agree({ t, f, r, b in try tx.forEach(in: t, from: f, reverse: r) { b(Array($0), Array($1)) } },
                      { t, f, r in try tx.cursor(in: t, from: f, reverse: r) }, label: "write")
            try tx.forEach(in: tree) { k, _ in left.append(Array(k)); return true }
            let c = try tx.cursor(in: tree)
            #expect(c.isValid)
            try tx.put([0x7A], [1], in: tree)
            #expect(throws: StorageError.self) { try c.next() }
            #expect(throws: StorageError.self) { try c.withValue { $0.count } }
            let fresh = try tx.cursor(in: tree, reverse: true)
            #expect(Array(fresh.key) == [0x7A])
        }
        #expect(left.count == keys.count - (keys.count + 2) / 3)
        // Outlived its transaction: an error, not a read.
        let kept = try store.write { tx in try tx.cursor(in: tree) }
        #expect(throws: StorageError.self) { try kept.next() }
        try store.close()
    }

    @Test func deletingEverythingEmptiesTheTreeAndMergesNodes() throws {
        let dir = TemporaryDirectory("delete"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        try store.write { tx throws in
            for i in 0..<10_000 { try tx.put(paddedKey("k", i), [UInt8](repeating: 7, count: 40), in: tree) }
        }
        var rng = SeededGenerator(seed: 11)
        let order = (0..<10_000).shuffled(using: &rng)
        for (n, i) in order.enumerated() {
            if n % 1000 == 0 { _ = try store.check() }
            let existed = try store.write { try $0.delete(paddedKey("k", i), in: tree) }
            #expect(existed)
            if n == 9000 {
                // Underfull nodes merge: 1000 entries must not keep the nodes 10000 needed.
                let report = try store.check()
                #expect(report.nodes < 60)  // about 130 leaves without merging
            }
        }
        #expect(try store.write { try $0.delete(paddedKey("k", 1), in: tree) } == false)
        try store.read { tx throws in #expect(try tx.count(in: tree) == 0) }
        try store.close()
        let again = try Store(directory: dir.path)
        try again.read { tx throws in #expect(try tx.count(in: tx.tree(named: "t")!) == 0) }
        try again.close()
    }

    @Test func longKeysAndLargeValuesSplitCorrectly() throws {
        let dir = TemporaryDirectory("long"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let tree = try store.write { try $0.createTree(named: "t") }
        var rng = SeededGenerator(seed: 3)
        var model: [[UInt8]: [UInt8]] = [:]
        for _ in 0..<20 {
            try store.write { tx throws in
                for _ in 0..<50 {
                    let klen = Int.random(in: 0...StoreConfiguration.maxKeyLength, using: &rng)
                    let key = (0..<klen).map { _ in UInt8.random(in: 0...3, using: &rng) }
                    let vlen = [0, 1, 100, 511, 512, 513, 5000, 70_000].randomElement(using: &rng)!
                    let value = (0..<vlen).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    try tx.put(key, value, in: tree)
                    model[key] = value
                }
            }
        }
        func verify(_ store: Store) throws {
            try store.read { tx throws in
                let t = tx.tree(named: "t")!
                let all = try tx.all(t)
                #expect(all.count == model.count)
                #expect(all.map(\.0) == model.keys.sorted { $0.lexicographicallyPrecedes($1) })
                for (k, v) in all { #expect(model[k] == v) }
            }
            _ = try store.check()
        }
        try verify(store)
        try store.close()
        let again = try Store(directory: dir.path)
        try verify(again)
        try again.close()
    }

    @Test func valuesShareOneStoredCopyThroughReferences() throws {
        let dir = TemporaryDirectory("refs"); defer { dir.cleanup() }
        let store = try Store(directory: dir.path, configuration: smallConfiguration())
        let body = [UInt8](repeating: 65, count: 3000)
        let a = try store.write { try $0.createTree(named: "a") }
        let b = try store.write { try $0.createTree(named: "b") }
        var stored: ValueRef?
        var seenInside: [UInt8]?
        try store.write { tx throws in
            let ref = try tx.appendValue(body)
            seenInside = try tx.withValue(at: ref) { [UInt8]($0) }
            let raw = withUnsafeBytes(of: ref.rawValue.littleEndian) { [UInt8]($0) }
            try tx.put(bytes("x"), raw, in: a)
            try tx.put(bytes("y"), raw, in: b)
            stored = ref
        }
        let ref = try #require(stored)
        // Visible inside the transaction that wrote it.
        #expect(seenInside == body)
        try store.read { tx throws in
            let ra = try tx.withValue(forKey: bytes("x"), in: a) { $0.loadUnaligned(as: UInt64.self) }
            let rb = try tx.withValue(forKey: bytes("y"), in: b) { $0.loadUnaligned(as: UInt64.self) }
            #expect(ra == rb)
            #expect(try tx.withValue(at: ValueRef(rawValue: ra!)) { [UInt8]($0) } == body)
            #expect(try tx.withValue(at: ref) { $0.count } == 3000)
        }
        try store.close()
    }

    /// The in-line byte comparison that orders keys agrees with `memcmp` then length, at every
    /// length around its 8- and 4-byte steps and its hand-over to `memcmp`, on strings that share
    /// a random prefix and differ (or not) at a random byte.
    /// A transaction replacing many children of committed (frozen) memory nodes: each copy takes
    /// its original's place in the parent's child field, past the fold of the children tables,
    /// while a reader of the older snapshot and an aborted transaction still see the originals.
    @Test func copiesOfFrozenNodesReplaceTheirOriginalsEverywhere() throws {
        let dir = TemporaryDirectory("cow"); defer { dir.cleanup() }
        // No checkpoint during the test: every node stays in memory.
        let store = try Store(directory: dir.path, configuration: smallConfiguration(checkpointInterval: 1 << 30))
        let tree = try store.write { try $0.createTree(named: "t") }
        let n = 6_000
        try store.write { tx throws in
            for i in 0..<n { try tx.put(paddedKey("k", i), bytes("a\(i)"), in: tree) }
        }
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try store.write { tx throws in
                for i in stride(from: 0, to: n, by: 3) { try tx.put(paddedKey("k", i), bytes("x\(i)"), in: tree) }
                throw Abort()
            }
        }
        try store.read { old throws in
            // Every leaf is copied (the branch above them replaces far more than 32 children).
            try store.write { tx throws in
                for i in stride(from: 0, to: n, by: 2) { try tx.put(paddedKey("k", i), bytes("b\(i)"), in: tree) }
                for i in stride(from: 1, to: n, by: 10) { try tx.delete(paddedKey("k", i), in: tree) }
                for i in stride(from: 0, to: n, by: 7) {
                    let expected: [UInt8]? = i % 2 == 0 ? bytes("b\(i)") : (i % 10 == 1 ? nil : bytes("a\(i)"))
                    #expect(try tx.value(forKey: paddedKey("k", i), in: tree) == expected)
                }
            }
            for i in 0..<n {
                #expect(try old.value(forKey: paddedKey("k", i), in: tree) == bytes("a\(i)"))
            }
        }
        try store.read { tx throws in
            let all = try tx.all(tree)
            let expected = (0..<n).filter { $0 % 10 != 1 }.map { i in
                (paddedKey("k", i), i % 2 == 0 ? bytes("b\(i)") : bytes("a\(i)"))
            }
            #expect(all.count == expected.count)
            #expect(all.elementsEqual(expected) { $0.0 == $1.0 && $0.1 == $1.1 })
        }
        #expect(try store.check().entries == n - n / 10)
        try store.close()
    }

    @Test func keyComparisonAgreesWithMemcmp() {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("keyComparisonAgreesWithMemcmp seed \(seed)")
        var rng = SeededGenerator(seed: seed)
        func reference(_ a: [UInt8], _ b: [UInt8]) -> Int {
            let n = min(a.count, b.count)
            let c = n == 0 ? 0 : memcmp(a, b, n)
            if c != 0 { return c < 0 ? -1 : 1 }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        }
        for _ in 0 ..< 20_000 {
            let length = Int.random(in: 0...48, using: &rng)
            let a = (0 ..< length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var b = Array(a.prefix(Int.random(in: 0...length, using: &rng)))
            while b.count < Int.random(in: 0...48, using: &rng) { b.append(UInt8.random(in: 0...255, using: &rng)) }
            if !b.isEmpty, Bool.random(using: &rng) {
                let at = Int.random(in: 0 ..< b.count, using: &rng)
                b[at] = b[at] &+ (Bool.random(using: &rng) ? 1 : 255)
            }
            let got = a.withUnsafeBytes { x in b.withUnsafeBytes { y in
                compareBytes(x.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, x.count,
                             y.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, y.count)
            } }
            #expect(got == reference(a, b), "\(a) vs \(b), seed \(seed)")
            let back = b.withUnsafeBytes { y in a.withUnsafeBytes { x in
                compareBytes(y.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, y.count,
                             x.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, x.count)
            } }
            #expect(back == -got)
        }
    }
}
