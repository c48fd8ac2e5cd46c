import Foundation
internal import SetteeStorage

/// Little helpers to build and read the binary records of `Formats/documents.md`. Reading is
/// bounds-checked everywhere: these bytes come from disk and may be damaged or hostile.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u64(_ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func varint(_ v: UInt64) { Varint.append(v, to: &bytes) }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func raw(_ b: UnsafeRawBufferPointer) { bytes.append(contentsOf: b) }
}

/// A byte buffer for the hot encoders (canonical JSON, revision trees): memory it grows itself,
/// so an append is a bounds check and a store (an array's append also checks uniqueness and goes
/// through generic code, which was most of the cost of writing short keys and strings). Its
/// owner calls ``release()``; only the finished bytes are copied into an array.
struct ByteBuffer {
    private var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    /// 512 bytes hold a typical document without regrowing.
    init(capacity: Int = 512) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    mutating func release() { base.deallocate() }

    var array: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    func append(to out: inout [UInt8]) { out.append(contentsOf: UnsafeBufferPointer(start: base, count: count)) }

    @inline(__always) mutating func reserve(_ extra: Int) {
        if capacity - count < extra { grow(extra) }
    }

    @inline(never) private mutating func grow(_ extra: Int) {
        let larger = max(capacity * 2, count + extra)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.update(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    @inline(__always) mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always) mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let from = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).update(from: from, count: bytes.count)
        count += bytes.count
    }

    mutating func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Unsigned LEB128 (the engine's ``Varint``, the one codec of every format).
    @inline(__always) mutating func varint(_ v: UInt64) {
        reserve(Varint.maxLength)
        count += Varint.encode(v, into: UnsafeMutableRawPointer(base + count))
    }

    @inline(__always) mutating func u64(_ v: UInt64) {
        reserve(8)
        UnsafeMutableRawPointer(base + count).storeBytes(of: v.littleEndian, as: UInt64.self)
        count += 8
    }
}

/// A bounds-checked cursor over stored bytes; every read returns nil past the end.
struct ByteReader {
    let buffer: UnsafeRawBufferPointer
    var position = 0

    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    var atEnd: Bool { position >= buffer.count }
    var remaining: Int { buffer.count - position }

    mutating func u8() -> UInt8? {
        guard position < buffer.count else { return nil }
        defer { position += 1 }
        return buffer[position]
    }

    mutating func u64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        defer { position += 8 }
        return UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: position, as: UInt64.self))
    }

    mutating func varint() -> UInt64? {
        // Most varints here are short lengths: one byte, read without the general loop.
        if position < buffer.count, case let first = buffer[position], first < 0x80 {
            position += 1
            return UInt64(first)
        }
        guard remaining > 0, let (v, n) = Varint.decode(buffer.baseAddress! + position, count: remaining) else { return nil }
        position += n
        return v
    }

    /// A varint that must fit in `limit` (a count or length), or nil.
    mutating func count(limit: Int) -> Int? {
        guard let v = varint(), v <= UInt64(limit) else { return nil }
        return Int(v)
    }

    mutating func bytes(_ n: Int) -> UnsafeRawBufferPointer? {
        guard n >= 0, remaining >= n else { return nil }
        defer { position += n }
        return UnsafeRawBufferPointer(rebasing: buffer[position ..< position + n])
    }

    /// A length-prefixed UTF-8 string; nil when cut short or not valid UTF-8.
    mutating func string() -> String? {
        guard let n = count(limit: remaining), let b = bytes(n) else { return nil }
        return makeString(b)
    }

    mutating func rest() -> UnsafeRawBufferPointer {
        defer { position = buffer.count }
        return UnsafeRawBufferPointer(rebasing: buffer[min(position, buffer.count)...])
    }
}

extension Array where Element == UInt8 {
    /// Big-endian, so byte order is numeric order in a tree.
    init(bigEndian v: UInt64) {
        self = Swift.withUnsafeBytes(of: v.bigEndian) { Array($0) }
    }
}

extension UnsafeRawBufferPointer {
    /// A big-endian UInt64 key, or nil when the length is wrong.
    var bigEndianU64: UInt64? {
        guard count == 8 else { return nil }
        return UInt64(bigEndian: loadUnaligned(as: UInt64.self))
    }
}

/// A String from stored UTF-8, or nil when it is not valid UTF-8. IDs are almost always ASCII,
/// which needs no validation beyond the high bits (and skips the generic validating path).
@inline(__always)
func makeString(_ b: UnsafeRawBufferPointer) -> String? {
    guard let base = b.baseAddress, !b.isEmpty else { return "" }
    var i = 0
    var high: UInt64 = 0
    while i + 8 <= b.count {
        high |= b.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        i += 8
    }
    while i < b.count {
        high |= UInt64(b[i])
        i += 1
    }
    let u = UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: b.count)
    if high & 0x8080_8080_8080_8080 == 0 { return String(decoding: u, as: UTF8.self) }
    return String(validating: u, as: UTF8.self)
}

/// Byte-string order (unsigned, a prefix first), the engine's key order, with `memcmp`.
enum Bytes {
    /// Negative, zero or positive as `a` sorts before, with or after `b`.
    static func compare(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
        b.withUnsafeBytes { b in compare(a, b) }
    }

    /// Whether `a` and `b` are the same bytes.
    static func equal(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        a.count == b.count && compare(a, b) == 0
    }

    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        if n > 0, let pa = a.baseAddress, let pb = b.baseAddress {
            let c = memcmp(pa, pb, n)
            if c != 0 { return Int(c) }
        }
        return a.count - b.count
    }
}
