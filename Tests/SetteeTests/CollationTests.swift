import Foundation
import Testing
@testable import Settee

/// The key order of indexes and queries (Formats/collation.md): CouchDB's view collation, and
/// encoded keys whose byte order is the same order.
@Suite struct CollationTests {
    /// The root collator orders as the Unicode Collation Algorithm's default table: case after
    /// letter, accents after base letters; its sort keys' bytes order the same way.
    @Test func theRootCollatorOrdersByTheUCA() throws {
        var status: Int32 = 0
        let collator = try #require(RootCollator(status: &status))
        #expect(collator.version.0 > 0)
        let ordered = ["a", "A", "á", "b", "B", "resume", "résumé", "z"]
        for (x, y) in zip(ordered, ordered.dropFirst()) {
            var a = x, b = y
            let r = a.withUTF8 { p in b.withUTF8 { q in collator.compare(p, q, status: &status) } }
            #expect(r == -1 && status <= 0, "\(x) < \(y)")
            #expect(sortKey(x, collator).lexicographicallyPrecedes(sortKey(y, collator)), "key of \(x) < key of \(y)")
        }
    }

    private func sortKey(_ s: String, _ collator: RootCollator) -> [UInt8] {
        let utf16 = Array(s.utf16)
        var out = [UInt8](repeating: 0, count: 256)
        let n = utf16.withUnsafeBufferPointer { u in out.withUnsafeMutableBufferPointer { collator.sortKey(u, into: $0) } }
        return Array(out[..<min(n, out.count)])
    }

    /// Signs agree: the comparator and the bytes of the keys.
    private func sign(_ o: ComparisonResult) -> Int {
        switch o {
        case .orderedAscending: -1
        case .orderedSame: 0
        case .orderedDescending: 1
        }
    }

    private func byteSign(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a == b ? 0 : a.lexicographicallyPrecedes(b) ? -1 : 1
    }

    /// CouchDB's documented collation list ("Views Collation"), in order, each one strictly
    /// before the next, by the comparator and by the keys.
    @Test func couchDBsDocumentedOrder() throws {
        let ordered: [JSONValue] = [
            .null, false, true,
            1, 2, 3.5, 4,
            "a", "A", "aa", "b", "B", "ba", "bb",
            ["a"], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"],
            ["a": 1], ["a": 2], ["b": 1], ["b": 2], ["b": 2, "c": 2],
        ]
        for (i, a) in ordered.enumerated() {
            for (j, b) in ordered.enumerated() {
                let expected = i < j ? -1 : i == j ? 0 : 1
                #expect(sign(try JSONCollation.compare(a, b)) == expected, "\(a) against \(b)")
                #expect(byteSign(try JSONCollation.key(a), try JSONCollation.key(b)) == expected, "keys of \(a) and \(b)")
            }
        }
    }

    /// Numbers compare by value: an integer equals the same double, -0 equals 0, and the order
    /// crosses zero and the exponent boundaries.
    @Test func numbersCompareByValue() throws {
        #expect(try JSONCollation.compare(.int(1), .double(1.0)) == .orderedSame)
        #expect(try JSONCollation.key(.int(1)) == JSONCollation.key(.double(1.0)))
        #expect(try JSONCollation.key(.double(-0.0)) == JSONCollation.key(.int(0)))
        let numbers: [JSONValue] = [.double(-1e300), .int(-1_000_000), .double(-1.5), .int(-1), .double(-1e-300), .int(0),
                                    .double(1e-300), .double(0.5), .int(1), .double(1.5), .int(2), .int(Int64(1) << 40),
                                    .double(1e300)]
        for (a, b) in zip(numbers, numbers.dropFirst()) {
            #expect(try JSONCollation.compare(a, b) == .orderedAscending, "\(a) < \(b)")
            #expect(try JSONCollation.key(a).lexicographicallyPrecedes(JSONCollation.key(b)), "key \(a) < key \(b)")
        }
    }

    /// Strings follow the Unicode Collation Algorithm (ICU's root order), not code points.
    @Test func stringsFollowTheUnicodeCollationAlgorithm() throws {
        let ordered: [JSONValue] = ["", " ", "_", "-", "1", "9", "a", "A", "á", "Á", "b", "e", "é", "f", "z", "Z", "α", "ω", "中"]
        for (a, b) in zip(ordered, ordered.dropFirst()) {
            #expect(try JSONCollation.compare(a, b) == .orderedAscending, "\(a) < \(b)")
            #expect(try JSONCollation.key(a).lexicographicallyPrecedes(JSONCollation.key(b)), "key \(a) < key \(b)")
        }
        // Code point order would put "Z" before "a" and "é" after "z".
        #expect(try JSONCollation.compare("Z", "a") == .orderedDescending)
        #expect(try JSONCollation.compare("é", "z") == .orderedAscending)
    }

    /// A Swift dictionary has no member order: objects compare in canonical order (by UTF-8
    /// bytes of the names), which is how Settee stores them.
    @Test func objectsCompareInCanonicalMemberOrder() throws {
        let written: JSONValue = ["b": 2, "a": 1]
        #expect(try JSONCollation.compare(written, ["a": 1, "b": 2]) == .orderedSame)
        #expect(try JSONCollation.compare(written, ["a": 2]) == .orderedAscending)
        #expect(try JSONCollation.compare(["a": 1], ["a": 1, "b": 0]) == .orderedAscending)
        #expect(try JSONCollation.compare([:], .array([])) == .orderedDescending)
    }

    /// Sort keys have no zero byte but their last, so a string key never runs into what
    /// follows it, even for text holding U+0000 and for text far longer than the first guess of
    /// the key's size.
    @Test func keysOfUnusualStrings() throws {
        let long = String(repeating: "ü字🙂x", count: 5_000)
        for s in ["a\u{0}b", "\u{0}", long, "\u{FFFF}", "e\u{301}"] {
            let key = try JSONCollation.key(.string(s))
            #expect(key.first == JSONCollation.Tag.string.rawValue)
            #expect(key.last == 0 && !key.dropFirst().dropLast().contains(0), "one zero, at the end, for \(s.prefix(10))")
        }
        // Canonically equivalent text collates equal: é precomposed and e + combining acute.
        #expect(try JSONCollation.compare("\u{E9}", "e\u{301}") == .orderedSame)
        #expect(try JSONCollation.key("\u{E9}") == JSONCollation.key("e\u{301}"))
        // An array holding a string that is a prefix of another's sorts first.
        #expect(try JSONCollation.key(["a", "z"]).lexicographicallyPrecedes(JSONCollation.key(["ab"])))
    }

    /// Random values (nested arrays and objects, mixed types, Unicode): the comparator and the
    /// keys agree on every pair, and the comparator is a total order on them.
    @Test func keysAgreeWithTheComparatorOnRandomValues() throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("CollationTests.keysAgreeWithTheComparatorOnRandomValues seed \(seed)")
        var generator = SeededGenerator(seed: seed)
        func below(_ n: Int) -> Int { Int(generator.next(below: UInt64(n))) }
        let alphabet = ["a", "A", "b", "é", "e\u{301}", "z", "Z", "1", " ", "中", "🙂", "ß", "ss"]
        func string() -> String {
            (0 ..< below(4)).map { _ in alphabet[below(alphabet.count)] }.joined()
        }
        func value(_ depth: Int) -> JSONValue {
            switch below(depth > 2 ? 5 : 7) {
            case 0: return .null
            case 1: return .bool(below(2) == 0)
            case 2: return .int(Int64(below(7)) - 3)
            case 3: return .double(Double(below(13)) / 4 - 1.5)
            case 4: return .string(string())
            case 5: return .array((0 ..< below(4)).map { _ in value(depth + 1) })
            default:
                var o: [String: JSONValue] = [:]
                for _ in 0 ..< below(3) { o[string()] = value(depth + 1) }
                return .object(o)
            }
        }
        let values = (0 ..< 300).map { _ in value(0) }
        let keys = try values.map { try JSONCollation.key($0) }
        // Keys are self-delimiting: the length of the leading values of a key made of several
        // (and MISSING, the single byte 00) is found from the bytes alone; cut short, none.
        for i in values.indices {
            let j = (i + 1) % values.count
            let joined = keys[i] + [0] + keys[j] + Array("doc".utf8)
            joined.withUnsafeBytes { b in
                #expect(JSONCollation.lengthOfValues(1, in: b) == keys[i].count, "seed \(seed): \(values[i])")
                #expect(JSONCollation.lengthOfValues(2, in: b) == keys[i].count + 1, "seed \(seed)")
                #expect(JSONCollation.lengthOfValues(3, in: b) == keys[i].count + 1 + keys[j].count, "seed \(seed): \(values[j])")
            }
            keys[i].dropLast().withUnsafeBytes { b in
                #expect(JSONCollation.lengthOfValues(1, in: b) == nil, "seed \(seed): \(values[i]) cut short")
            }
        }
        for i in values.indices {
            for j in values.indices where j >= i {
                let c = sign(try JSONCollation.compare(values[i], values[j]))
                #expect(c == byteSign(keys[i], keys[j]), "seed \(seed): \(values[i]) against \(values[j])")
                #expect(-c == sign(try JSONCollation.compare(values[j], values[i])), "seed \(seed): antisymmetric")
            }
        }
    }

    /// Short strings' keys are kept with each collator: a key from the cache is the key ICU
    /// makes, for exactly that text (canonically equivalent text, bytes apart, is looked up
    /// apart), also after the cache filled and started again.
    @Test func cachedKeysAreTheKeysOfTheSameText() throws {
        let strings = (0 ..< 3000).map { "list-\($0)" } + ["\u{E9}", "e\u{301}", "task", "Task", "task\u{1}"]
        let first = try strings.map { try JSONCollation.key(.string($0)) }
        for _ in 0 ..< 2 {
            #expect(try strings.map { try JSONCollation.key(.string($0)) } == first)
        }
        // The order still holds between keys made fresh and keys from the cache.
        #expect(first[3000].lexicographicallyPrecedes(try JSONCollation.key(.string("f"))))
        #expect(try JSONCollation.key(.string("task")) != JSONCollation.key(.string("Task")))
    }

    /// Many threads collate at once, each with a collator of its own from the pool, and get the
    /// same answers.
    @Test func concurrentCallersGetTheSameKeys() async throws {
        let words: [JSONValue] = ["apple", "Äpfel", "zebra", "中文", "éclair", ["x", 1]]
        let expected = try words.map { try JSONCollation.key($0) }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0 ..< 8 {
                group.addTask {
                    for _ in 0 ..< 200 {
                        guard try words.map({ try JSONCollation.key($0) }) == expected else { return false }
                    }
                    return true
                }
            }
            for try await same in group { #expect(same) }
        }
    }

    /// ASCII text's keys are made without ICU, and are ICU's bytes: every string of one or two
    /// ASCII characters (control characters included) and random strings of runs that pass
    /// each level's compression limits, capitals among them (seed printed). Other text goes to
    /// ICU, and a refused string leaves the key being made as it was.
    @Test func asciiKeysAreICUsKeys() throws {
        #if os(Linux)
        let ascii = try #require(ASCIISortKeys.shared, "the ASCII model does not give this ICU's keys")
        #else
        guard let ascii = ASCIISortKeys.shared else { return }
        #endif
        func icu(_ s: String) throws -> [UInt8] {
            try JSONCollation.withRootCollator { (c: RootCollator) throws(SetteeError) -> [UInt8] in try JSONCollation.icuSortKey(s, with: c) }
        }
        func fast(_ s: String) -> [UInt8]? {
            var out: [UInt8] = [9]
            guard ascii.append(s.utf8, to: &out) else { return out == [9] ? nil : [] }
            return Array(out.dropFirst())
        }
        let chars = (0 ..< 128).map { String(UnicodeScalar(UInt8($0))) }
        var mismatches = 0
        for a in chars {
            if try fast(a) != icu(a) { mismatches += 1 }
            for b in chars where try fast(a + b) != icu(a + b) { mismatches += 1 }
        }
        #expect(mismatches == 0)
        let seed = UInt64.random(in: 0 ... .max)
        print("CollationTests.asciiKeysAreICUsKeys seed \(seed)")
        var generator = SeededGenerator(seed: seed)
        let classes = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
                       "\u{0}\u{1}\u{7}\t\n\r\u{1B}\u{7F}"].map { Array($0.unicodeScalars) }
        for _ in 0 ..< 3000 {
            var s = String.UnicodeScalarView()
            for _ in 0 ..< Int.random(in: 0 ... 6, using: &generator) {
                let c = classes[Int.random(in: 0 ..< classes.count, using: &generator)]
                for _ in 0 ..< Int.random(in: 1 ... 120, using: &generator) { s.append(c[Int.random(in: 0 ..< c.count, using: &generator)]) }
            }
            let text = String(s)
            #expect(try fast(text) == icu(text), "seed \(seed): \(text.debugDescription)")
        }
        #expect(fast("caf\u{E9}") == nil && fast("\u{E9}") == nil && fast("a\u{301}") == nil)
    }

    /// What in-order grouping relies on to skip collation keys: printable ASCII strings that
    /// differ have different keys (every string of one or two such characters, checked
    /// against ICU), while control characters are ignorable and do not make a string differ.
    @Test func differentPrintableASCIIStringsHaveDifferentKeys() throws {
        let printable = (0x20 ... 0x7E).map { String(UnicodeScalar(UInt8($0))) }
        var strings = printable
        for a in printable { for b in printable { strings.append(a + b) } }
        var keys = Set<[UInt8]>()
        for s in strings { keys.insert(try JSONCollation.key(.string(s))) }
        #expect(keys.count == strings.count)
        #expect(GroupAccumulator.plainlyDistinct(["ab", "x"], ["aB", "x"]))
        #expect(!GroupAccumulator.plainlyDistinct(["ab"], ["a\u{1}b"]))
        #expect(!GroupAccumulator.plainlyDistinct([1], [1.0]))
        #expect(try JSONCollation.key("ab") == JSONCollation.key("a\u{1}b"))

        // Grouped in index order, the ignorable variant joins its group.
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for (i, s) in ["ab", "a\u{1}b", "ab", "ac", "b"].enumerated() {
            try db.saveDocument(MutableDocument(id: "d\(i)", data: ["s": .string(s), "t": "x"]))
        }
        try db.createIndex(ValueIndexConfiguration(["t", "s"]), name: "ts")
        let rows = try db.createQuery("SELECT count(*) FROM _ WHERE t = 'x' GROUP BY s").execute().allResults().map { $0.int(at: 0) }
        #expect(rows == [3, 1, 1])
    }
}
