import CJavaScriptCore
import Foundation

/// What stops a function: its CPU time past the engine's time limit, or the server's resident
/// memory grown past the engine's memory limit since the call began.
///
/// JavaScriptCore calls ``check(_:_:)`` on the thread running the script each time the script has
/// used a ``slice`` of CPU time; the check compares the call's CPU time and the process's resident
/// size with their limits and either stops the script or arms the next slice. (This
/// JavaScriptCore calls a callback that returns false only once: arming again from inside the
/// callback is what makes it call the next.)
///
/// Not thread-safe: one per VM, used by the thread holding the VM.
struct Watchdog {
    enum Stop { case time, memory }

    /// CPU time between two checks.
    static let slice = 0.02

    let group: JSContextGroupRef
    let timeLimit: Double
    let memoryLimit: Int
    /// Thread CPU seconds and resident bytes when the current call began.
    private var startCPU: Double = 0
    private var startResident: Int = 0
    /// Why the last script was stopped; nil when it was not.
    var stopped: Stop?

    init(group: JSContextGroupRef, timeLimit: Double, memoryLimit: Int) {
        self.group = group
        self.timeLimit = timeLimit
        self.memoryLimit = memoryLimit
    }

    /// Marks the start of a call into the VM (each entry restarts JavaScriptCore's timer).
    mutating func start() {
        stopped = nil
        startCPU = Self.threadCPUSeconds()
        startResident = Self.residentBytes() ?? 0
    }

    /// Bytes the server's resident memory grew by since the current call began (negative when
    /// it shrank); 0 where the system does not say.
    var growthSinceStart: Int {
        guard let now = Self.residentBytes(), startResident > 0 else { return 0 }
        return now - startResident
    }

    /// Sets the next check for the group `watchdog` watches.
    static func arm(_ watchdog: UnsafeMutablePointer<Watchdog>) {
        JSContextGroupSetExecutionTimeLimit(watchdog.pointee.group, slice, check, watchdog)
    }

    /// JavaScriptCore's callback: true stops the script.
    static let check: JSShouldTerminateCallback = { _, context in
        guard let w = context?.assumingMemoryBound(to: Watchdog.self) else { return true }
        if threadCPUSeconds() - w.pointee.startCPU >= w.pointee.timeLimit {
            w.pointee.stopped = .time
            return true
        }
        if let resident = residentBytes(), resident - w.pointee.startResident > w.pointee.memoryLimit {
            w.pointee.stopped = .memory
            return true
        }
        arm(w)
        return false
    }

    /// The calling thread's CPU time, in seconds.
    static func threadCPUSeconds() -> Double {
        var t = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0 else { return 0 }
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// The process's resident memory in bytes; nil where it cannot be read cheaply (only Linux's
    /// `/proc/self/statm` is read: on systems without it, such as macOS, the file does not open
    /// and the memory limit is not enforced).
    static func residentBytes() -> Int? {
        guard statm >= 0 else { return nil }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { buffer -> Int? in
            // One read from the start of the file kept open: a call costs one system call here.
            let n = pread(statm, buffer.baseAddress, buffer.count, 0)
            guard n > 0 else { return nil }
            // "size resident shared …" in pages: the second number.
            let fields = buffer.prefix(n).split(separator: UInt8(ascii: " "), maxSplits: 2)
            guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
            return pages.multipliedReportingOverflow(by: pageSize).overflow ? nil : pages * pageSize
        }
    }

    private static let pageSize = max(1, sysconf(Int32(_SC_PAGESIZE)))

    /// `/proc/self/statm`, open for the life of the process (-1 when it cannot be opened).
    private static let statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
}
