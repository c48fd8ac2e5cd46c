#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex. The writer's lock is error-checking, so a write transaction opened inside
/// another on the same thread is reported instead of deadlocking.
final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init(errorChecking: Bool = false) {
        mutex = .allocate(capacity: 1)
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        if errorChecking { pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_ERRORCHECK)) }
        pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Locks; returns false when the calling thread already holds an error-checking lock.
    @inline(__always) func lock() -> Bool { pthread_mutex_lock(mutex) == 0 }
    @inline(__always) func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always) func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
