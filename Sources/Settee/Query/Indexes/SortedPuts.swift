import Foundation
internal import SetteeStorage

/// Key-value pairs gathered for one transaction and put in key order: inserts in key order
/// land in one leaf after another, so each leaf a transaction changes is copied once, where
/// the same inserts in any other order copy a leaf for nearly every one. The pairs are kept
/// in one byte buffer; sorting moves small records, not arrays.
///
/// ```swift
/// var puts = SortedPuts()
/// puts.add(entry.key, entry.value)
/// try puts.write(tx, in: tree)
/// ```
///
/// Each pair may carry a tag (the document it came from, say), so that ``write(_:in:skipping:)``
/// can leave out the pairs of some.
///
/// - Note: A value type for one thread; not thread-safe.
struct SortedPuts {
    private var bytes: [UInt8] = []
    private var records: [Record] = []

    private struct Record {
        /// The key's first eight bytes, big-endian (zero-padded): most comparisons end here.
        var head: UInt64
        var offset: Int
        var keyCount: Int
        var valueCount: Int
        /// The order the pair was added in: of two equal keys, the later is put last and wins.
        var order: Int
        var tag: Int
    }

    /// The bytes of the pairs' keys and values.
    var byteCount: Int { bytes.count }

    mutating func add(_ key: [UInt8], _ value: [UInt8], tag: Int = 0) {
        var head: UInt64 = 0
        for i in 0 ..< 8 { head = head << 8 | UInt64(i < key.count ? key[i] : 0) }
        records.append(Record(head: head, offset: bytes.count, keyCount: key.count, valueCount: value.count, order: records.count, tag: tag))
        bytes.append(contentsOf: key)
        bytes.append(contentsOf: value)
    }

    /// Makes room for `pairs` more pairs of `bytes` bytes in all.
    mutating func reserve(pairs: Int, bytes count: Int) {
        records.reserveCapacity(records.count + pairs)
        bytes.reserveCapacity(bytes.count + count)
    }

    /// The number of pairs.
    var count: Int { records.count }

    /// Adds the pairs of `other` after these, their tags raised by `tagOffset`.
    mutating func append(_ other: SortedPuts, tagOffset: Int) {
        let base = bytes.count, first = records.count
        bytes.append(contentsOf: other.bytes)
        for var r in other.records {
            r.offset += base
            r.order += first
            r.tag += tagOffset
            records.append(r)
        }
    }

    /// Whether pair `a` goes before pair `b` (their bytes at `base`): by key, then the order
    /// they were added in.
    @inline(__always) private static func precedes(_ a: Record, _ b: Record, _ base: UnsafeRawPointer) -> Bool {
        if a.head != b.head { return a.head < b.head }
        let n = min(a.keyCount, b.keyCount)
        let c = n > 8 ? memcmp(base + a.offset + 8, base + b.offset + 8, n - 8) : 0
        if c != 0 { return c < 0 }
        if a.keyCount != b.keyCount { return a.keyCount < b.keyCount }
        return a.order < b.order
    }

    /// Puts the pairs in key order now. A build's reader threads sort their steps so: the
    /// writer's sort of a run of such steps (``append(_:tagOffset:)`` keeps each one's order)
    /// then finds them as sorted runs and only merges them.
    mutating func sort() {
        guard records.count > 1 else { return }
        bytes.withUnsafeBytes { all in
            let base = all.baseAddress!
            records.sort { a, b in Self.precedes(a, b, base) }
        }
    }

    /// Puts every pair in key order, but those whose tag `skipping` is true for.
    func write(_ tx: WriteTransaction, in tree: Tree, skipping: (Int) throws -> Bool = { _ in false }) throws {
        guard !records.isEmpty else { return }
        try bytes.withUnsafeBytes { all in
            let base = all.baseAddress!
            let sorted = records.sorted { a, b in Self.precedes(a, b, base) }
            for r in sorted where !(try skipping(r.tag)) {
                try tx.put(UnsafeRawBufferPointer(start: base + r.offset, count: r.keyCount),
                           UnsafeRawBufferPointer(start: base + r.offset + r.keyCount, count: r.valueCount), in: tree)
            }
        }
    }
}
