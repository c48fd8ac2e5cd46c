import Glibc

/// Elapsed time on CLOCK_MONOTONIC.
struct Stopwatch {
    private let start = Stopwatch.now()

    var elapsedNanoseconds: UInt64 { Stopwatch.now() - start }
    var elapsedSeconds: Double { Double(elapsedNanoseconds) / 1e9 }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
