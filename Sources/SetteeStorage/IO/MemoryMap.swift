/// A read-only shared mapping of the log, reserved once far larger than the file so that it never
/// moves: pointers handed to readers stay valid while the file grows. Only offsets below a
/// snapshot's committed end are ever touched, so the unbacked part is never read.
///
/// The mapping is never extended or moved (that would invalidate every pointer a reader holds),
/// so the file must never grow past it: ``checkCovers(_:)`` is asked before every append and
/// refuses one that would (`io`, `EFBIG`), and the space written ahead stops at the reservation.
final class MemoryMap: @unchecked Sendable {
    let base: UnsafeRawPointer
    let reserved: Int

    /// Maps `descriptor`, reserving `reservation` bytes (rounded up to whole pages) when given
    /// (``StoreConfiguration/mapReservation``, for tests), otherwise the largest of
    /// ``VirtualMemory/reservations`` (1 TiB down to 1 GiB) the system grants.
    init(descriptor: Int32, reservation: Int? = nil) throws(StorageError) {
        let sizes: [Int]
        if let reservation {
            let page = VirtualMemory.pageSize
            guard reservation > 0, reservation <= 1 << 40 else {
                throw StorageError(code: .invalidArgument, reason: "a map reservation of \(reservation) bytes is out of range")
            }
            sizes = [(reservation + page - 1) / page * page]
        } else {
            sizes = VirtualMemory.reservations
        }
        for size in sizes {
            if let p = VirtualMemory.mapSharedReadOnly(descriptor, size: size) {
                base = p
                reserved = size
                return
            }
        }
        throw StorageError.io("mmap", errno: System.lastError)
    }

    deinit { VirtualMemory.unmap(base, size: reserved) }

    /// Throws unless a file of `size` bytes lies wholly inside the mapping: a record past its end
    /// could not be read (the mapping cannot grow in place, and moving it would pull the memory
    /// from under every reader), so the append must be refused before anything is written.
    func checkCovers(_ size: UInt64) throws(StorageError) {
        guard size > UInt64(reserved) else { return }
        let reason = "the log would grow to \(size) bytes, past the \(reserved) bytes of address space "
            + "reserved for its memory map; compacting the database shrinks it"
        throw StorageError(code: .io, reason: reason, errno: System.fileTooLarge, operation: "grow the log")
    }
}

/// One bit per 64 bytes of file: set once the node record starting there has passed its checksum
/// and structure checks, so each node is verified once per process, not on every read.
final class VerifiedBitmap: @unchecked Sendable {
    let words: UnsafeMutablePointer<UInt64>
    private let byteCount: Int
    let coveredBytes: UInt64

    init(coveringBytes: Int) throws(StorageError) {
        byteCount = max(4096, coveringBytes / 64 / 8)
        words = try VirtualMemory.mapAnonymous(size: byteCount).assumingMemoryBound(to: UInt64.self)
        coveredBytes = UInt64(byteCount) * 8 * 64
    }

    deinit { VirtualMemory.unmap(words, size: byteCount) }

    @inline(__always) func insert(_ offset: UInt64) {
        if offset < coveredBytes { CPU.setBit(words, offset >> 6) }
    }
}
