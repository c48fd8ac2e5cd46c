import CLZ4

/// LZ4 block compression of out-of-line values. Used only when it pays (see ``StoreConfiguration``).
enum LZ4 {
    static func bound(_ count: Int) -> Int { Int(LZ4_compressBound(Int32(count))) }

    /// Compresses into `dst` (at least `bound(src.count)` bytes); returns the compressed size, or nil.
    static func compress(_ src: UnsafeRawBufferPointer, into dst: UnsafeMutableRawPointer, capacity: Int) -> Int? {
        guard let s = src.baseAddress, src.count > 0 else { return nil }
        let n = LZ4_compress_default(s.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self), Int32(src.count), Int32(capacity))
        return n > 0 ? Int(n) : nil
    }

    /// Decompresses exactly `rawCount` bytes; returns false when the input is damaged.
    static func decompress(_ src: UnsafeRawPointer, count: Int, into dst: UnsafeMutableRawPointer, rawCount: Int) -> Bool {
        let n = LZ4_decompress_safe(src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self), Int32(count), Int32(rawCount))
        return n == Int32(rawCount)
    }
}
