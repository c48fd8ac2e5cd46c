import Synchronization

/// Where a store's readers announce what they read, so that the writer releases a replaced
/// snapshot only once no reader can still be using it (epoch-based reclamation, as LMDB's reader
/// table does for pages).
///
/// Each reading thread owns one slot, a cache line of its own: word 0 is the epoch its outermost
/// read pinned (0 while it reads nothing), word 1 how deep its reads nest. The reader writes both
/// with plain stores and no locked instruction: a locked instruction waits for every load before
/// it, and a point read is a chain of loads, so even one per read costs a large part of it.
/// Ordering the announcement before the reader's load of the current snapshot is the writer's
/// job: before it looks at the slots it calls `membarrier(2)`, which runs a full barrier on every
/// thread of the process that is running. Where the kernel refuses `membarrier`, readers fence
/// after announcing instead.
///
/// Thread-safety: any thread may call ``slot()`` and read through its own slot; the writer (holding
/// the store's writer lock) calls ``oldestPinnedEpoch()``.
final class ReaderTable: @unchecked Sendable {
    static let slotsPerChunk = 64
    static let chunkCount = 1024
    /// Words per slot: a cache line, so no two readers' stores share one.
    static let slotWords = 8

    /// Whether the writer's `membarrier` orders the readers' announcements (decided once per process).
    static let asymmetric: Bool = ProcessBarrier.register()

    /// Chunks of `slotsPerChunk` slots, allocated when a thread of their range first reads.
    private let directory: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// One past the highest chunk allocated; only grows.
    private let chunkLimit = Atomic<Int>(0)
    private let growLock = Lock()
    /// Pins of readers past ``ReaderThread/capacity``: epoch → count, under the lock.
    let overflow = Mutex<[UInt64: Int]>([:])
    /// ``asymmetric``, kept here so that a read does not check a global's initialization.
    let asymmetric = ReaderTable.asymmetric
    private let threadKey = ReaderThread.key

    init() {
        directory = .allocate(capacity: Self.chunkCount)
        directory.initialize(repeating: nil, count: Self.chunkCount)
    }

    deinit {
        for i in 0..<Self.chunkCount { directory[i]?.deallocate() }
        directory.deallocate()
    }

    /// The calling thread's slot, or nil when its number is beyond the table (it then pins
    /// through ``overflow``).
    @inline(__always) func slot() -> UnsafeMutablePointer<UInt64>? {
        let t = ReaderThread.current(threadKey)
        guard t < ReaderThread.capacity else { return nil }
        let chunk = CPU.loadAcquire(directory + (t / Self.slotsPerChunk)) ?? addChunk(t / Self.slotsPerChunk)
        return chunk.assumingMemoryBound(to: UInt64.self) + (t % Self.slotsPerChunk) * Self.slotWords
    }

    private func addChunk(_ i: Int) -> UnsafeMutableRawPointer {
        growLock.withLock {
            if let chunk = directory[i] { return chunk }
            let words = Self.slotsPerChunk * Self.slotWords
            let chunk = UnsafeMutableRawPointer.allocate(byteCount: words * 8, alignment: 64)
            chunk.initializeMemory(as: UInt64.self, repeating: 0, count: words)
            CPU.storeRelease(directory + i, chunk)
            if i >= chunkLimit.load(ordering: .relaxed) { chunkLimit.store(i + 1, ordering: .releasing) }
            return chunk
        }
    }

    /// The smallest epoch any reader has pinned, `.max` when none reads, or 0 when the readers'
    /// announcements cannot be ordered (nothing may then be released). The caller has already
    /// published the snapshot that replaces the ones it means to release.
    func oldestPinnedEpoch() -> UInt64 {
        if asymmetric {
            guard ProcessBarrier.run() else { return 0 }
        } else {
            CPU.fence()
        }
        var oldest = UInt64.max
        for i in 0..<chunkLimit.load(ordering: .acquiring) {
            guard let chunk = CPU.loadAcquire(directory + i) else { continue }
            let words = chunk.assumingMemoryBound(to: UInt64.self)
            for s in 0..<Self.slotsPerChunk {
                let pinned = CPU.loadAcquire(words + s * Self.slotWords)
                if pinned != 0 && pinned < oldest { oldest = pinned }
            }
        }
        return overflow.withLock { pins in pins.keys.reduce(oldest, min) }
    }
}
