#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif

/// Address space: the log's read-only mapping, anonymous memory for bitmaps, the page size.
enum VirtualMemory {
    /// The system's page size (at least 4096).
    static let pageSize: Int = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)

    /// The reservations tried in turn for a log's mapping when none is configured: a generous
    /// one first, smaller ones on systems that limit address space (an iOS app without the
    /// extended virtual addressing entitlement gets a few GiB at most).
    static let reservations: [Int] = [40, 38, 36, 34, 32, 31, 30].map { 1 << $0 }

    /// Maps `size` bytes of `descriptor` from offset 0, shared and read-only (the file may be
    /// shorter: only the part below its end is ever read); nil with `errno` set when refused.
    static func mapSharedReadOnly(_ descriptor: Int32, size: Int) -> UnsafeRawPointer? {
        guard let p = mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0), p != MAP_FAILED else { return nil }
        return UnsafeRawPointer(p)
    }

    /// `size` bytes of zeroed private memory that take no RAM until touched.
    static func mapAnonymous(size: Int) throws(StorageError) -> UnsafeMutableRawPointer {
        guard let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              p != MAP_FAILED else { throw StorageError.io("mmap(anonymous)", errno: errno) }
        return p
    }

    static func unmap(_ p: UnsafeRawPointer, size: Int) {
        munmap(UnsafeMutableRawPointer(mutating: p), size)
    }
}

/// The C library's `memcmp`: the sign of the first difference of `n` bytes.
@inline(__always) func libcCompare(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Int32 {
    memcmp(a, b, n)
}
