import CSystemHelpers

// CPU instructions and memory ordering the engine reaches through the seam's C half: checksums,
// prefetches, the verified-record bitmap's bits, the reader table's loads, stores and fences, and
// SHA-1 with the SHA extensions. The C functions pick the instruction where the CPU has it (x86-64
// today) and a portable version elsewhere (ARM64: Apple's systems and most Android devices).

/// CRC32C (Castagnoli) over raw bytes; `seed` chains a previous result.
@inline(__always) func crc32c(_ seed: UInt32, _ base: UnsafeRawPointer, _ count: Int) -> UInt32 {
    settee_crc32c(seed, base, count)
}

/// The machine-level helpers; every function is inlined where it is called.
package enum CPU {
    /// CRC32C one byte at a time from a table: the reference the fast path is tested against.
    ///
    /// ```swift
    /// let c = CPU.portableCRC32C(0, bytes.baseAddress!, bytes.count)
    /// ```
    package static func portableCRC32C(_ seed: UInt32, _ base: UnsafeRawPointer, _ count: Int) -> UInt32 {
        settee_crc32c_sw(seed, base.assumingMemoryBound(to: UInt8.self), count)
    }

    /// Asks for every cache line of `[p, p + count)` at once.
    @inline(__always) static func prefetch(_ p: UnsafeRawPointer, _ count: Int) { settee_prefetch(p, count) }

    /// Bit `bit` of a shared bitmap, read with relaxed ordering.
    @inline(__always) static func testBit(_ words: UnsafePointer<UInt64>, _ bit: UInt64) -> Bool {
        settee_bit_test(words, bit) != 0
    }

    /// Sets bit `bit` of a shared bitmap with a plain load and store (a lost bit costs a checksum).
    @inline(__always) static func setBit(_ words: UnsafeMutablePointer<UInt64>, _ bit: UInt64) { settee_bit_set(words, bit) }

    @inline(__always) static func loadAcquire(_ p: UnsafePointer<UInt64>) -> UInt64 { settee_load_acquire_u64(p) }
    @inline(__always) static func storeRelaxed(_ p: UnsafeMutablePointer<UInt64>, _ v: UInt64) { settee_store_relaxed_u64(p, v) }
    @inline(__always) static func storeRelease(_ p: UnsafeMutablePointer<UInt64>, _ v: UInt64) { settee_store_release_u64(p, v) }

    @inline(__always) static func loadAcquire(_ p: UnsafePointer<UnsafeMutableRawPointer?>) -> UnsafeMutableRawPointer? {
        settee_load_acquire_ptr(p)
    }

    @inline(__always) static func storeRelease(_ p: UnsafeMutablePointer<UnsafeMutableRawPointer?>, _ v: UnsafeMutableRawPointer) {
        settee_store_release_ptr(p, v)
    }

    /// A full memory fence.
    @inline(__always) static func fence() { settee_fence() }
    /// Keeps the compiler from moving memory accesses across it; no instruction.
    @inline(__always) static func compilerFence() { settee_compiler_fence() }

    /// Hashes `blocks` 64-byte blocks at `data` into the SHA-1 state `state` (five words) with
    /// the CPU's SHA instructions; false, leaving `state` untouched, when the CPU has none (the
    /// caller then hashes in Swift).
    ///
    /// ```swift
    /// if !CPU.sha1Blocks(statePointer, data, blocks: 1) { /* portable rounds */ }
    /// ```
    package static func sha1Blocks(_ state: UnsafeMutablePointer<UInt32>, _ data: UnsafeRawPointer, blocks: Int) -> Bool {
        settee_sha1_blocks(state, data, blocks) != 0
    }
}
