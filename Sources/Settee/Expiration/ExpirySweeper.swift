import Foundation
import Synchronization
internal import Logging

/// The expiry sweeper of one open database core: a thread that sleeps until the earliest due
/// time in `doc.expiry` (no polling), purges what is due in short batches, and sleeps again.
/// A commit that adds an earlier due time rings its alarm; closing the database stops it.
///
/// The first pass runs as soon as the thread starts, so expirations that passed while the
/// database was closed are purged right after it opens.
///
/// - Note: Thread-safe. `start` is called once; `stop` may be called from any thread but the
///   sweeper's own.
final class ExpirySweeper: @unchecked Sendable {
    /// One pass: purges everything due at `now` (in batches, giving up early when `stopping`
    /// says so) and returns the next due time, in whole seconds.
    typealias Pass = @Sendable (_ now: Date, _ stopping: @escaping () -> Bool) throws -> UInt64?

    let clock: any ExpirationClock
    let alarm = SweepAlarm()
    private let exited = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    private let joined = Atomic<Bool>(false)
    private let thread = Mutex<pthread_t?>(nil)
    /// The last error a pass threw (it is retried later); nil after a pass that succeeded.
    let lastError = Mutex<SetteeError?>(nil)
    /// Passes completed, for tests.
    let passes = Atomic<Int>(0)

    /// The database's name, for log messages.
    private let name: String

    init(clock: any ExpirationClock, name: String) {
        self.clock = clock
        self.name = name
    }

    /// Starts the thread.
    func start(name: String, pass: @escaping Pass) {
        guard started.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        let t = Thread { [self] in
            thread.withLock { $0 = pthread_self() }
            run(pass)
            exited.signal()
        }
        t.name = "settee.expiry \(name)"
        t.start()
    }

    private func run(_ pass: Pass) {
        var failures = 0
        while alarm.beginPass() {
            let now = clock.now()
            var next: UInt64?
            do {
                next = try pass(now) { [alarm] in alarm.isStopped }
                failures = 0
                lastError.withLock { $0 = nil }
            } catch {
                let e = error as? SetteeError ?? SetteeError(.io, "\(error)")
                if e.code == .notOpen { return }
                lastError.withLock { $0 = e }
                DatabaseCore.logger.error("expiry sweep failed; it is tried again",
                                          metadata: ["database": "\(name)", "error": "\(e)", "attempt": "\(failures + 1)"])
                // Try again later: 1 s, 2 s, 4 s … at most a minute, or sooner if rung.
                failures += 1
                let delay = Double(1 << min(failures - 1, 6))
                next = UInt64(max(0, (now.timeIntervalSince1970 + min(delay, 60)).rounded(.up)))
            }
            passes.wrappingAdd(1, ordering: .releasing)
            alarm.willSleep(until: next)
            clock.sleep(until: next.map { Date(timeIntervalSince1970: Double($0)) }, alarm: alarm)
        }
    }

    /// Tells the sweeper that a commit added an entry due at `due`: it wakes if that is earlier
    /// than what it sleeps towards.
    func note(due: UInt64?) {
        guard let due else { return }
        alarm.note(due: due)
    }

    /// Stops the thread and waits for it to end (a batch in progress finishes first).
    func stop() {
        alarm.stop()
        guard started.load(ordering: .relaxed),
              joined.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
        else { return }
        if let t = thread.withLock({ $0 }), pthread_equal(t, pthread_self()) != 0 {
            return   // on the sweeper's own thread (it never closes a database): it ends when it sees the flag
        }
        exited.wait()
    }
}
