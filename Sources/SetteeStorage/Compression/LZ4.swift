import CLZ4

/// LZ4 block compression of out-of-line values. Used only when it pays (see ``StoreConfiguration``).
enum LZ4 {
    static func bound(_ count: Int) -> Int { Int(LZ4_compressBound(Int32(count))) }

    /// A compression state reused from one value to the next: a fast reset instead of clearing
    /// its 16 KiB table for every value (a quarter of the time of a small value's compression).
    /// Not thread-safe; the writer owns one.
    final class Compressor {
        private let stream: UnsafeMutablePointer<LZ4_stream_t>
        /// Values in a row that did not compress enough. After a run of them only one value in
        /// `sampleEvery` is tried, so data that never compresses costs almost nothing; one success
        /// resumes trying every value.
        private var misses = 0
        private var skipped = 0
        static let missesBeforeSampling = 16
        static let sampleEvery = 64

        init() {
            stream = .allocate(capacity: 1)
            LZ4_initStream(stream, MemoryLayout<LZ4_stream_t>.size)
        }

        deinit { stream.deallocate() }

        /// Compresses into `dst` (at least `bound(src.count)` bytes) when that saves at least an
        /// eighth; returns the compressed size, or nil to store the value raw.
        func compressIfWorthwhile(_ src: UnsafeRawBufferPointer, into dst: UnsafeMutableRawPointer, capacity: Int) -> Int? {
            if misses >= Compressor.missesBeforeSampling {
                skipped += 1
                if skipped < Compressor.sampleEvery { return nil }
                skipped = 0
            }
            if let n = compress(src, into: dst, capacity: capacity), n <= src.count - src.count / 8 {
                misses = 0
                return n
            }
            misses += 1
            return nil
        }

        /// Compresses into `dst` (at least `bound(src.count)` bytes); returns the compressed size, or nil.
        func compress(_ src: UnsafeRawBufferPointer, into dst: UnsafeMutableRawPointer, capacity: Int) -> Int? {
            guard let s = src.baseAddress, src.count > 0 else { return nil }
            LZ4_resetStream_fast(stream)
            let n = LZ4_compress_fast_continue(stream, s.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self),
                                               Int32(src.count), Int32(capacity), 1)
            return n > 0 ? Int(n) : nil
        }
    }

    /// Whether `stored` compressed bytes can decode to `raw` bytes: LZ4 expands by at most about
    /// 255 times. Checked before allocating the output, so a damaged or crafted length cannot ask
    /// for more memory than the input could ever produce.
    static func canExpand(_ stored: Int, to raw: Int) -> Bool {
        raw <= stored * 255 + 64
    }

    /// Decompresses exactly `rawCount` bytes; returns false when the input is damaged.
    static func decompress(_ src: UnsafeRawPointer, count: Int, into dst: UnsafeMutableRawPointer, rawCount: Int) -> Bool {
        let n = LZ4_decompress_safe(src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self), Int32(count), Int32(rawCount))
        return n == Int32(rawCount)
    }
}
