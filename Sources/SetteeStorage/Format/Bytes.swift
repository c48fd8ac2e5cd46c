
// Little-endian integer access and LEB128 varints over raw memory. Every multi-byte integer in the
// file is little-endian (see Formats/storage.md).

extension UnsafeRawPointer {
    @inline(__always) func u8(_ at: Int) -> UInt8 { load(fromByteOffset: at, as: UInt8.self) }
    @inline(__always) func u16(_ at: Int) -> UInt16 { UInt16(littleEndian: loadUnaligned(fromByteOffset: at, as: UInt16.self)) }
    @inline(__always) func u32(_ at: Int) -> UInt32 { UInt32(littleEndian: loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
    @inline(__always) func u64(_ at: Int) -> UInt64 { UInt64(littleEndian: loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
}

extension UnsafeMutableRawPointer {
    @inline(__always) func u8(_ at: Int) -> UInt8 { UnsafeRawPointer(self).u8(at) }
    @inline(__always) func u16(_ at: Int) -> UInt16 { UnsafeRawPointer(self).u16(at) }
    @inline(__always) func u32(_ at: Int) -> UInt32 { UnsafeRawPointer(self).u32(at) }
    @inline(__always) func u64(_ at: Int) -> UInt64 { UnsafeRawPointer(self).u64(at) }
    @inline(__always) func setU8(_ v: UInt8, at: Int) { storeBytes(of: v, toByteOffset: at, as: UInt8.self) }
    @inline(__always) func setU16(_ v: UInt16, at: Int) { storeBytes(of: v.littleEndian, toByteOffset: at, as: UInt16.self) }
    @inline(__always) func setU32(_ v: UInt32, at: Int) { storeBytes(of: v.littleEndian, toByteOffset: at, as: UInt32.self) }
    @inline(__always) func setU64(_ v: UInt64, at: Int) { storeBytes(of: v.littleEndian, toByteOffset: at, as: UInt64.self) }
}

/// Reads from a bounded buffer; every read is checked, so hostile bytes end in `nil`, never a trap.
struct ByteReader {
    let base: UnsafeRawPointer
    let count: Int
    var position: Int = 0

    init(_ base: UnsafeRawPointer, count: Int) {
        self.base = base
        self.count = count
    }

    var remaining: Int { count - position }

    mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { position += 1 }
        return base.u8(position)
    }

    mutating func u16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { position += 2 }
        return base.u16(position)
    }

    mutating func u32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { position += 4 }
        return base.u32(position)
    }

    mutating func u64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        defer { position += 8 }
        return base.u64(position)
    }

    /// A varint (``Varint``): at most 10 bytes, fitting in 64 bits.
    mutating func varint() -> UInt64? {
        guard let (v, n) = Varint.decode(base + position, count: remaining) else { return nil }
        position += n
        return v
    }

    /// A varint that must be at most `limit`.
    mutating func length(max limit: Int) -> Int? {
        guard let v = varint(), v <= UInt64(limit) else { return nil }
        return Int(v)
    }

    mutating func bytes(_ n: Int) -> UnsafeRawBufferPointer? {
        guard n >= 0, remaining >= n else { return nil }
        defer { position += n }
        return UnsafeRawBufferPointer(start: base + position, count: n)
    }
}

/// A growable byte buffer that is reused from one transaction to the next (not thread-safe).
final class ByteWriter {
    private(set) var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    var count: Int = 0

    init(capacity: Int = 1 << 16) {
        self.capacity = max(capacity, 64)
        self.base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    func reserve(_ extra: Int) {
        let needed = count + extra
        guard needed > capacity else { return }
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newBase.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Drops the content and, when the buffer grew very large, gives the memory back.
    func reset(keepingCapacity limit: Int = 1 << 24) {
        count = 0
        if capacity > limit {
            base.deallocate()
            capacity = 1 << 16
            base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        }
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    @inline(__always) func u8(_ v: UInt8) { reserve(1); base.setU8(v, at: count); count += 1 }
    @inline(__always) func u16(_ v: UInt16) { reserve(2); base.setU16(v, at: count); count += 2 }
    @inline(__always) func u32(_ v: UInt32) { reserve(4); base.setU32(v, at: count); count += 4 }
    @inline(__always) func u64(_ v: UInt64) { reserve(8); base.setU64(v, at: count); count += 8 }

    func varint(_ value: UInt64) {
        reserve(Varint.maxLength)
        count += Varint.encode(value, into: base + count)
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, let src = bytes.baseAddress else { return }
        reserve(bytes.count)
        (base + count).copyMemory(from: src, byteCount: bytes.count)
        count += bytes.count
    }

    func zeros(_ n: Int) {
        guard n > 0 else { return }
        reserve(n)
        (base + count).initializeMemory(as: UInt8.self, repeating: 0, count: n)
        count += n
    }
}

@inline(__always) func alignUp(_ value: Int, _ alignment: Int) -> Int {
    (value + alignment - 1) & ~(alignment - 1)
}

@inline(__always) func alignUp(_ value: UInt64, _ alignment: UInt64) -> UInt64 {
    (value + alignment - 1) & ~(alignment - 1)
}

/// Lexicographic comparison of two byte strings (bytes, then length).
@inline(__always) func compareBytes(_ a: UnsafeRawPointer, _ aCount: Int, _ b: UnsafeRawPointer, _ bCount: Int) -> Int {
    let c = compareMemory(a, b, min(aCount, bCount))
    if c != 0 { return c }
    return aCount == bCount ? 0 : (aCount < bCount ? -1 : 1)
}

/// The order of the first `n` bytes at `a` and at `b`: -1, 0 or 1. Keys and their suffixes are
/// short, so eight bytes at a time in line beats a call to `memcmp`, whose set-up is most of the
/// work at these lengths; long runs still go to `memcmp`.
@inline(__always) func compareMemory(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Int {
    if n > 32 {
        let c = libcCompare(a, b, n)
        return c == 0 ? 0 : (c < 0 ? -1 : 1)
    }
    var i = 0
    while i + 8 <= n {
        let x = UInt64(bigEndian: a.loadUnaligned(fromByteOffset: i, as: UInt64.self))
        let y = UInt64(bigEndian: b.loadUnaligned(fromByteOffset: i, as: UInt64.self))
        if x != y { return x < y ? -1 : 1 }
        i += 8
    }
    if i + 4 <= n {
        let x = UInt32(bigEndian: a.loadUnaligned(fromByteOffset: i, as: UInt32.self))
        let y = UInt32(bigEndian: b.loadUnaligned(fromByteOffset: i, as: UInt32.self))
        if x != y { return x < y ? -1 : 1 }
        i += 4
    }
    while i < n {
        let x = a.load(fromByteOffset: i, as: UInt8.self)
        let y = b.load(fromByteOffset: i, as: UInt8.self)
        if x != y { return x < y ? -1 : 1 }
        i += 1
    }
    return 0
}
