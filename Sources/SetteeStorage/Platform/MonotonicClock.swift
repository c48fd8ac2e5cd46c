#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif

/// Time for the engine's own pacing (not for anything stored: dates are the document layer's).
enum MonotonicClock {
    /// Microseconds since an arbitrary moment, never going back.
    static func microseconds() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Int64(t.tv_sec) * 1_000_000 + Int64(t.tv_nsec) / 1_000
    }

    /// Blocks the calling thread for about `microseconds`.
    static func sleep(microseconds: Int64) {
        usleep(UInt32(clamping: max(0, microseconds)))
    }
}
