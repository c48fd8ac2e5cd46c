import CLZ4
import Glibc

/// A read-only shared mapping of the log, reserved once far larger than the file so that it never
/// moves: pointers handed to readers stay valid while the file grows. Only offsets below a
/// snapshot's committed end are ever touched, so the unbacked part is never read.
final class MemoryMap: @unchecked Sendable {
    let base: UnsafeRawPointer
    let reserved: Int

    init(descriptor: Int32) throws(StorageError) {
        // Try a generous reservation first; fall back on systems that limit address space.
        for shift in [40, 38, 36, 34, 32] {
            let size = 1 << shift
            let p = mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0)
            if let p, p != MAP_FAILED {
                base = UnsafeRawPointer(p)
                reserved = size
                return
            }
        }
        throw StorageError.io("mmap", errno: Glibc.errno)
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), reserved) }
}

/// One bit per 64 bytes of file: set once the node record starting there has passed its checksum
/// and structure checks, so each node is verified once per process, not on every read.
final class VerifiedBitmap: @unchecked Sendable {
    let words: UnsafeMutablePointer<UInt64>
    private let byteCount: Int
    let coveredBytes: UInt64

    init(coveringBytes: Int) throws(StorageError) {
        byteCount = max(4096, coveringBytes / 64 / 8)
        let p = mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let p, p != MAP_FAILED else { throw StorageError.io("mmap(bitmap)", errno: Glibc.errno) }
        words = p.assumingMemoryBound(to: UInt64.self)
        coveredBytes = UInt64(byteCount) * 8 * 64
    }

    deinit { munmap(words, byteCount) }

    @inline(__always) func insert(_ offset: UInt64) {
        if offset < coveredBytes { settee_bit_set(words, offset >> 6) }
    }
}
