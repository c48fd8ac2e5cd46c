import Foundation
import Synchronization
internal import SetteeStorage

/// The one ordering of JSON values that indexes, `ORDER BY` and views use: CouchDB's view
/// collation (`Formats/collation.md`).
///
/// null < false < true < numbers < strings < arrays < objects. Numbers compare by value as
/// doubles (`1` and `1.0` are equal); strings by the Unicode Collation Algorithm through ICU's
/// root collator with its default settings, as CouchDB applies it; arrays element by element,
/// a prefix first; objects member by member (name, then value) in Settee's canonical member
/// order, fewer members first.
///
/// ``key(_:)`` encodes a value so that comparing two keys byte by byte (`memcmp`, the engine's
/// order) gives the same answer as ``compare(_:_:)``.
///
/// ```swift
/// let order = try JSONCollation.compare("a", "B")   // .orderedAscending
/// let key = try JSONCollation.key(["list", 7])       // bytes in index order
/// ```
///
/// - Note: Stateless for its callers; safe to use from any thread (ICU collators are kept in a
///   pool, one per concurrent caller).
enum JSONCollation {
    /// The type bytes that begin every encoded value; 0 ends an array or an object, below every
    /// type so that a prefix sorts first.
    enum Tag: UInt8 {
        case end = 0x00
        case null = 0x01
        case `false` = 0x02
        case `true` = 0x03
        case number = 0x04
        case string = 0x05
        case array = 0x06
        case object = 0x07
    }

    /// Begins each member of an encoded object (above ``Tag/end``, so fewer members sort first).
    static let memberMarker: UInt8 = 0x01

    /// Compares two values in collation order.
    ///
    /// ```swift
    /// let sorted = try values.sorted { try JSONCollation.compare($0, $1) == .orderedAscending }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/unavailable`` when ICU cannot compare two strings (it has
    ///   no collator, or runs out of memory); never a guessed order.
    static func compare(_ a: JSONValue, _ b: JSONValue) throws(SetteeError) -> ComparisonResult {
        let (ra, rb) = (rank(a), rank(b))
        if ra != rb { return ra < rb ? .orderedAscending : .orderedDescending }
        switch (a, b) {
        case (.null, _), (.bool, _):
            return .orderedSame
        case (.string(let x), .string(let y)):
            return try compareStrings(x, y)
        case (.array(let x), .array(let y)):
            for (u, v) in zip(x, y) {
                let c = try compare(u, v)
                if c != .orderedSame { return c }
            }
            return order(x.count, y.count)
        case (.object(let x), .object(let y)):
            let (mx, my) = (canonicalOrder(x), canonicalOrder(y))
            for (u, v) in zip(mx, my) {
                let c = try compareStrings(u.key, v.key)
                if c != .orderedSame { return c }
                let d = try compare(u.value, v.value)
                if d != .orderedSame { return d }
            }
            return order(mx.count, my.count)
        default:
            // Both numbers (the ranks are equal).
            return order(number(a), number(b))
        }
    }

    /// The length of the first `count` encoded values at the start of `key` (a value index
    /// key's leading values, MISSING being the single byte 00); nil when `key` is shorter,
    /// malformed or nested deeper than 64 levels.
    static func lengthOfValues(_ count: Int, in key: UnsafeRawBufferPointer) -> Int? {
        let n = key.count
        /// Past a sort key: up to and with its only zero byte.
        func sortKeyEnd(_ from: Int) -> Int? {
            var j = from
            while j < n, key[j] != 0 { j += 1 }
            return j < n ? j + 1 : nil
        }
        var i = 0
        for _ in 0 ..< max(count, 0) {
            // Open containers: bit d set when the one at depth d + 1 is an object.
            var depth = 0
            var objects: UInt64 = 0
            while true {
                if depth > 0, objects & (1 << UInt64(depth - 1)) != 0 {
                    // In an object: its end, or a member's name before the member's value.
                    guard i < n else { return nil }
                    if key[i] == Tag.end.rawValue {
                        i += 1
                        depth -= 1
                        if depth == 0 { break }
                        continue
                    }
                    guard key[i] == memberMarker, let e = sortKeyEnd(i + 1) else { return nil }
                    i = e
                }
                guard i < n else { return nil }
                let tag = key[i]
                i += 1
                switch tag {
                case Tag.end.rawValue:
                    // MISSING at the top; inside, the end of an array.
                    if depth > 0 { depth -= 1 }
                case Tag.null.rawValue, Tag.false.rawValue, Tag.true.rawValue:
                    break
                case Tag.number.rawValue:
                    guard n - i >= 8 else { return nil }
                    i += 8
                case Tag.string.rawValue:
                    guard let e = sortKeyEnd(i) else { return nil }
                    i = e
                case Tag.array.rawValue, Tag.object.rawValue:
                    guard depth < 64 else { return nil }
                    if tag == Tag.object.rawValue { objects |= 1 << UInt64(depth) } else { objects &= ~(1 << UInt64(depth)) }
                    depth += 1
                    continue
                default:
                    return nil
                }
                if depth == 0 { break }
            }
        }
        return i
    }

    /// The bytes of `value` in collation order (`Formats/collation.md`).
    ///
    /// ```swift
    /// try tx.put(JSONCollation.key(value) + docID, …)
    /// ```
    static func key(_ value: JSONValue) throws(SetteeError) -> [UInt8] {
        var out: [UInt8] = []
        try append(value, to: &out)
        return out
    }

    /// Appends the encoding of `value` to `out`.
    static func append(_ value: JSONValue, to out: inout [UInt8]) throws(SetteeError) {
        switch value {
        case .null: out.append(Tag.null.rawValue)
        case .bool(let b): out.append(b ? Tag.true.rawValue : Tag.false.rawValue)
        case .int, .double:
            out.append(Tag.number.rawValue)
            appendNumber(number(value), to: &out)
        case .string(let s):
            out.append(Tag.string.rawValue)
            try appendSortKey(s, to: &out)
        case .array(let elements):
            out.append(Tag.array.rawValue)
            for e in elements { try append(e, to: &out) }
            out.append(Tag.end.rawValue)
        case .object(let members):
            out.append(Tag.object.rawValue)
            for (name, member) in canonicalOrder(members) {
                out.append(memberMarker)
                try appendSortKey(name, to: &out)
                try append(member, to: &out)
            }
            out.append(Tag.end.rawValue)
        }
    }

    /// The order of the types.
    private static func rank(_ v: JSONValue) -> Int {
        switch v {
        case .null: 0
        case .bool(false): 1
        case .bool(true): 2
        case .int, .double: 3
        case .string: 4
        case .array: 5
        case .object: 6
        }
    }

    private static func number(_ v: JSONValue) -> Double {
        switch v {
        case .int(let i): Double(i)
        case .double(let d): d
        default: 0
        }
    }

    private static func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
        a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame
    }

    /// Object members in the order canonical JSON writes them (by UTF-8 bytes): a `[String:
    /// JSONValue]` has no order of its own, and stored documents are canonical.
    private static func canonicalOrder(_ members: [String: JSONValue]) -> [(key: String, value: JSONValue)] {
        members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }

    /// A double as 8 bytes whose unsigned big-endian order is numeric order: the sign bit
    /// flipped for positives, every bit flipped for negatives; -0 is 0.
    private static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        let bits = (d == 0 ? 0.0 : d).bitPattern
        let ordered = bits & (1 << 63) == 0 ? bits | (1 << 63) : ~bits
        withUnsafeBytes(of: ordered.bigEndian) { out.append(contentsOf: $0) }
    }

    // MARK: Strings, through ICU

    /// The version of ICU's root collator ("a.b.c.d"): string keys made under one version may
    /// sort differently under another, so each index records it and is rebuilt when it changes.
    ///
    /// ```swift
    /// let v = try JSONCollation.collatorVersion()   // "153.120.0.0" or similar
    /// ```
    static func collatorVersion() throws(SetteeError) -> String {
        try withCollator { (collator: RootCollator) throws(SetteeError) -> String in
            let info = collator.version
            return "\(info.0).\(info.1).\(info.2).\(info.3)"
        }
    }

    private static func compareStrings(_ a: String, _ b: String) throws(SetteeError) -> ComparisonResult {
        // Equal text is equal under any collation; most index comparisons meet it.
        if a == b { return .orderedSame }
        return try withCollator { (collator: RootCollator) throws(SetteeError) -> ComparisonResult in
            var a = a, b = b
            var status: Int32 = 0
            let r = a.withUTF8 { x in b.withUTF8 { y in collator.compare(x, y, status: &status) } }
            guard status <= 0 else {
                throw SetteeError(.unavailable, "ICU could not compare two strings (status \(status))")
            }
            return r < 0 ? .orderedAscending : (r > 0 ? .orderedDescending : .orderedSame)
        }
    }

    /// ICU's sort key of `s`: bytes with no zero but the last, whose order is the collator's.
    /// ASCII text gets the same bytes without ICU (``ASCIISortKeys``).
    private static func appendSortKey(_ s: String, to out: inout [UInt8]) throws(SetteeError) {
        if let ascii = ASCIISortKeys.shared, ascii.append(s.utf8, to: &out) { return }
        try withCollator { (collator: Collator) throws(SetteeError) in
            // Index builds and loads meet the same short strings again and again ("task", a
            // list's ID): their keys are kept with the collator, by the string's bytes.
            let cacheable = s.utf8.count <= Collator.cachedLength
            if cacheable, let key = collator.cache[BytewiseString(s)] {
                out.append(contentsOf: key)
                return
            }
            let start = out.count
            try appendSortKey(s, with: collator.handle, to: &out)
            if cacheable {
                if collator.cache.count >= Collator.cacheCapacity { collator.cache.removeAll(keepingCapacity: true) }
                collator.cache[BytewiseString(s)] = Array(out[start...])
            }
        }
    }

    /// ICU's sort key of `s`, from ICU (what ``ASCIISortKeys`` is made from and checked against).
    static func icuSortKey(_ s: String, with collator: RootCollator) throws(SetteeError) -> [UInt8] {
        var out: [UInt8] = []
        try appendSortKey(s, with: collator, to: &out)
        return out
    }

    /// Runs `body` with a root collator of the pool.
    static func withRootCollator<R>(_ body: (RootCollator) throws(SetteeError) -> R) throws(SetteeError) -> R {
        try withCollator(body)
    }

    private static func appendSortKey(_ s: String, with collator: RootCollator, to out: inout [UInt8]) throws(SetteeError) {
        let utf16 = Array(s.utf16)
        guard utf16.count <= Int(Int32.max / 4) else {
            throw SetteeError(.invalidParameter, "a string too long to collate")
        }
        // A sort key is rarely more than a few bytes per UTF-16 unit; ICU says how many it
        // needs when the first guess is short.
        var capacity = max(32, utf16.count * 4 + 16)
        for _ in 0 ..< 2 {
            let start = out.count
            out.append(contentsOf: repeatElement(0, count: capacity))
            let written = out.withUnsafeMutableBufferPointer { buffer -> Int in
                // Never nil: `capacity` (at least 32) bytes were just appended.
                guard let base = buffer.baseAddress else { return 0 }
                return utf16.withUnsafeBufferPointer { u in
                    collator.sortKey(u, into: UnsafeMutableBufferPointer(start: base + start, count: capacity))
                }
            }
            guard written > 0 else { break }
            if written <= capacity {
                out.removeLast(capacity - written)
                return
            }
            out.removeLast(capacity)
            capacity = written
        }
        throw SetteeError(.unavailable, "ICU could not make a sort key")
    }

    /// A string compared and hashed by its UTF-8 bytes, not by canonical equivalence as
    /// `String` is: a cached sort key is for exactly the text it was made from.
    private struct BytewiseString: Hashable {
        let text: String
        init(_ text: String) { self.text = text }

        static func == (a: Self, b: Self) -> Bool { a.text.utf8.elementsEqual(b.text.utf8) }

        func hash(into hasher: inout Hasher) {
            var text = text
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// Collators not in use. ICU's collators may be shared for reading in recent versions, but
    /// its documentation still asks for one per thread: a pool gives each caller its own.
    private static let pool = Mutex<[Collator]>([])

    private static func withCollator<R>(_ body: (RootCollator) throws(SetteeError) -> R) throws(SetteeError) -> R {
        try withCollator { (c: Collator) throws(SetteeError) -> R in try body(c.handle) }
    }

    private static func withCollator<R>(_ body: (Collator) throws(SetteeError) -> R) throws(SetteeError) -> R {
        let collator: Collator
        if let pooled = pool.withLock({ $0.popLast() }) { collator = pooled } else { collator = try Collator() }
        defer { pool.withLock { if $0.count < 64 { $0.append(collator) } } }
        return try body(collator)
    }

    /// An open root collator (the Unicode Collation Algorithm's default order, CouchDB's), with
    /// the sort keys of short strings it made last. Used by one caller at a time (the pool
    /// hands it out), so its cache needs no lock.
    private final class Collator: @unchecked Sendable {
        let handle: RootCollator
        /// Strings of at most this many UTF-8 bytes have their keys kept...
        static let cachedLength = 48
        /// ...up to this many (then the cache starts again): at most about 150 KiB a collator.
        static let cacheCapacity = 1024
        var cache: [BytewiseString: [UInt8]] = [:]

        init() throws(SetteeError) {
            var status: Int32 = 0
            guard let h = RootCollator(status: &status) else {
                throw SetteeError(.unavailable, "ICU's root collator cannot be opened (status \(status))")
            }
            handle = h
        }
    }
}

extension JSONValue {
    /// The order of two values in CouchDB's collation (`Formats/collation.md`): the order of
    /// index keys, `ORDER BY` and view rows. `1` and `1.0` are equal here.
    ///
    /// ```swift
    /// try JSONValue.collationOrder("a", "B")     // .orderedAscending
    /// try JSONValue.collationOrder(1, 1.0)       // .orderedSame
    /// try JSONValue.collationOrder(nil, false)   // .orderedAscending: null sorts first
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/unavailable`` when ICU's collator cannot be opened.
    public static func collationOrder(_ a: JSONValue, _ b: JSONValue) throws -> ComparisonResult {
        try JSONCollation.compare(a, b)
    }
}
