#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif
import CSystemHelpers
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

/// `membarrier(2)`: the writer makes every running thread of the process execute a full barrier,
/// so readers need none of their own (Linux and Android). Elsewhere, and in the portable path,
/// ``register()`` is false and readers fence after announcing (``ReaderTable``).
enum ProcessBarrier {
    /// Registers the process for expedited barriers; false where the system has none or refuses
    /// (a kernel older than 4.14, a seccomp filter, Darwin, the portable path).
    static func register() -> Bool {
        guard System.processBarriers else { return false }
        return settee_membarrier_register() != 0
    }

    /// Runs the barrier on every thread of the process; false when it failed.
    static func run() -> Bool { settee_membarrier() != 0 }
}
