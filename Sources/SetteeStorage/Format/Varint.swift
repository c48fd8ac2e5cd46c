/// Unsigned LEB128, the one variable-length integer every format of the project uses (the log's
/// records, `Formats/storage.md`; the document layer's records, `Formats/documents.md`): 7 bits a
/// byte, low bits first, the high bit set on every byte but the last.
///
/// ```swift
/// var bytes = [UInt8](repeating: 0, count: Varint.maxLength)
/// let n = bytes.withUnsafeMutableBytes { Varint.encode(300, into: $0.baseAddress!) }   // 2
/// let decoded = bytes.withUnsafeBytes { Varint.decode($0.baseAddress!, count: n) }     // (300, 2)
/// ```
///
/// Decoding is strict about the one thing that matters for damaged or hostile bytes: a value
/// must fit in 64 bits, so at most 10 bytes, and the tenth may carry only the top bit (0 or 1).
/// Anything longer or larger is nil, never a truncated value.
///
/// - Note: Stateless; safe to use from any thread.
public enum Varint {
    /// The most bytes a 64-bit value takes.
    ///
    /// ```swift
    /// buffer.reserve(Varint.maxLength)
    /// ```
    ///
    /// A constant the caller's compiler sees (a stored `static let` would be a lazy global,
    /// reached through a call on every use in another module's loops).
    @inlinable public static var maxLength: Int { 10 }

    /// Writes `value` at `p` (which has room for ``maxLength`` bytes); returns the bytes written.
    ///
    /// ```swift
    /// count += Varint.encode(length, into: base + count)
    /// ```
    @inlinable @inline(__always)
    public static func encode(_ value: UInt64, into p: UnsafeMutableRawPointer) -> Int {
        var v = value
        var n = 0
        while v >= 0x80 {
            p.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: n, as: UInt8.self)
            n += 1
            v >>= 7
        }
        p.storeBytes(of: UInt8(v), toByteOffset: n, as: UInt8.self)
        return n + 1
    }

    /// Appends `value` to `bytes`.
    ///
    /// ```swift
    /// var out: [UInt8] = []
    /// Varint.append(42, to: &out)
    /// ```
    @inlinable
    public static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// The value at `p` and the bytes it took, reading at most `count` bytes; nil when it is cut
    /// short or does not fit in 64 bits.
    ///
    /// ```swift
    /// guard let (length, used) = Varint.decode(base + position, count: remaining) else { throw damaged() }
    /// ```
    @inlinable @inline(__always)
    public static func decode(_ p: UnsafeRawPointer, count: Int) -> (value: UInt64, length: Int)? {
        var result: UInt64 = 0
        var i = 0
        while i < count {
            let byte = p.load(fromByteOffset: i, as: UInt8.self)
            if i == maxLength - 1 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << UInt64(7 * i)
            i += 1
            if byte & 0x80 == 0 { return (result, i) }
            if i == maxLength { return nil }
        }
        return nil
    }
}
