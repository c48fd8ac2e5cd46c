#if canImport(Darwin)
import Compression
#else
import CLZ4
#endif

/// LZ4 block compression of out-of-line values and operation blocks. Used only when it pays (see
/// ``StoreConfiguration``). The stored format is LZ4's raw block format on every platform
/// (Formats/storage.md), so a database file moves between them: liblz4 makes and reads it on
/// Linux and Android, Apple's Compression framework (`COMPRESSION_LZ4_RAW`, the same block
/// format without a frame) on Darwin.
enum LZ4 {
    /// The most a block of `count` bytes can take compressed (liblz4's `LZ4_COMPRESSBOUND`).
    static func bound(_ count: Int) -> Int { count + count / 255 + 16 }

    /// A compression state reused from one value to the next: a fast reset instead of clearing
    /// its 16 KiB table for every value (a quarter of the time of a small value's compression).
    /// Not thread-safe; the writer owns one.
    final class Compressor {
        #if canImport(Darwin)
        /// Compression's working memory for LZ4, allocated once.
        private let scratch: UnsafeMutableRawPointer
        #else
        private let stream: UnsafeMutablePointer<LZ4_stream_t>
        #endif
        /// Values in a row that did not compress enough. After a run of them only one value in
        /// `sampleEvery` is tried, so data that never compresses costs almost nothing; one success
        /// resumes trying every value.
        private var misses = 0
        private var skipped = 0
        static let missesBeforeSampling = 16
        static let sampleEvery = 64

        init() {
            #if canImport(Darwin)
            scratch = .allocate(byteCount: max(1, compression_encode_scratch_buffer_size(COMPRESSION_LZ4_RAW)), alignment: 16)
            #else
            stream = .allocate(capacity: 1)
            LZ4_initStream(stream, MemoryLayout<LZ4_stream_t>.size)
            #endif
        }

        deinit {
            #if canImport(Darwin)
            scratch.deallocate()
            #else
            stream.deallocate()
            #endif
        }
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
            guard let s = src.baseAddress, src.count > 0, src.count <= Int(Int32.max), capacity > 0 else { return nil }
            #if canImport(Darwin)
            let n = compression_encode_buffer(dst.assumingMemoryBound(to: UInt8.self), capacity,
                                              s.assumingMemoryBound(to: UInt8.self), src.count, scratch, COMPRESSION_LZ4_RAW)
            return n > 0 ? n : nil
            #else
            LZ4_resetStream_fast(stream)
            let n = LZ4_compress_fast_continue(stream, s.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self),
                                               Int32(src.count), Int32(clamping: capacity), 1)
            return n > 0 ? Int(n) : nil
            #endif
        }
    }

    /// Whether `stored` compressed bytes can decode to `raw` bytes: LZ4 expands by at most about
    /// 255 times. Checked before allocating the output, so a damaged or crafted length cannot ask
    /// for more memory than the input could ever produce.
    static func canExpand(_ stored: Int, to raw: Int) -> Bool {
        raw <= stored * 255 + 64
    }

    /// Decompresses exactly `rawCount` bytes; returns false when the input is damaged. (Stored
    /// values are checksummed before they are decompressed, so damage seldom gets this far.
    /// Compression's decoder stops at `rawCount` bytes where liblz4's would call a longer
    /// output damaged; either way nothing past `dst + rawCount` is written.)
    static func decompress(_ src: UnsafeRawPointer, count: Int, into dst: UnsafeMutableRawPointer, rawCount: Int) -> Bool {
        guard count > 0, count <= Int(Int32.max), rawCount >= 0, rawCount <= Int(Int32.max) else { return false }
        #if canImport(Darwin)
        let n = compression_decode_buffer(dst.assumingMemoryBound(to: UInt8.self), rawCount,
                                          src.assumingMemoryBound(to: UInt8.self), count, nil, COMPRESSION_LZ4_RAW)
        return n == rawCount
        #else
        let n = LZ4_decompress_safe(src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self), Int32(count), Int32(rawCount))
        return n == Int32(rawCount)
        #endif
    }
}
