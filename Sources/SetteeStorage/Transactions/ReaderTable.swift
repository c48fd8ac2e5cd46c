import CSystemHelpers
import Glibc
import Synchronization

/// Numbers the threads that read, so that each has a slot of its own in every store's
/// ``ReaderTable``. A number goes back to the pool when its thread exits.
enum ReaderThread {
    /// Threads numbered at or above this read through a table's locked overflow path.
    static let capacity = ReaderTable.chunkCount * ReaderTable.slotsPerChunk

    private struct Numbers {
        var next: UInt32 = 1
        var free: [UInt32] = []
    }

    private static let numbers = Mutex(Numbers())

    /// Holds the calling thread's number; its destructor returns the number when the thread exits.
    /// (A `__thread` variable in the C shim would be cheaper, but each object file Swift emits
    /// would get its own copy of it.)
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { value in
            ReaderThread.numbers.withLock { $0.free.append(UInt32(truncatingIfNeeded: UInt(bitPattern: value))) }
        }
        return key
    }()

    /// The calling thread's number, from 1 on; `key` is ``key``, passed in so that the hot path
    /// does not check a global's initialization.
    @inline(__always) static func current(_ key: pthread_key_t) -> Int {
        let n = Int(bitPattern: pthread_getspecific(key))
        return n != 0 ? n : assign(key)
    }

    private static func assign(_ key: pthread_key_t) -> Int {
        let n = numbers.withLock { numbers -> UInt32 in
            if let n = numbers.free.popLast() { return n }
            defer { numbers.next &+= 1 }
            return numbers.next
        }
        // A destructor of another key that reads again on an exiting thread sets it anew, and
        // the destructor of this one runs again (POSIX repeats destructors while values remain).
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: UInt(n)))
        return Int(n)
    }
}

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
    static let asymmetric: Bool = settee_membarrier_register() != 0

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
        let chunk = settee_load_acquire_ptr(directory + (t / Self.slotsPerChunk)) ?? addChunk(t / Self.slotsPerChunk)
        return chunk.assumingMemoryBound(to: UInt64.self) + (t % Self.slotsPerChunk) * Self.slotWords
    }

    private func addChunk(_ i: Int) -> UnsafeMutableRawPointer {
        growLock.withLock {
            if let chunk = directory[i] { return chunk }
            let words = Self.slotsPerChunk * Self.slotWords
            let chunk = UnsafeMutableRawPointer.allocate(byteCount: words * 8, alignment: 64)
            chunk.initializeMemory(as: UInt64.self, repeating: 0, count: words)
            settee_store_release_ptr(directory + i, chunk)
            if i >= chunkLimit.load(ordering: .relaxed) { chunkLimit.store(i + 1, ordering: .releasing) }
            return chunk
        }
    }

    /// The smallest epoch any reader has pinned, `.max` when none reads, or 0 when the readers'
    /// announcements cannot be ordered (nothing may then be released). The caller has already
    /// published the snapshot that replaces the ones it means to release.
    func oldestPinnedEpoch() -> UInt64 {
        if asymmetric {
            guard settee_membarrier() != 0 else { return 0 }
        } else {
            settee_fence()
        }
        var oldest = UInt64.max
        for i in 0..<chunkLimit.load(ordering: .acquiring) {
            guard let chunk = settee_load_acquire_ptr(directory + i) else { continue }
            let words = chunk.assumingMemoryBound(to: UInt64.self)
            for s in 0..<Self.slotsPerChunk {
                let pinned = settee_load_acquire_u64(words + s * Self.slotWords)
                if pinned != 0 && pinned < oldest { oldest = pinned }
            }
        }
        return overflow.withLock { pins in pins.keys.reduce(oldest, min) }
    }
}
