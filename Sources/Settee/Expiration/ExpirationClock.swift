import Foundation

/// Where the expiry sweeper of a database reads the time, and how it sleeps until a due time.
///
/// The library uses ``SystemExpirationClock`` (the wall clock). Tests inject a clock of their own
/// (through `Database.init(name:config:openFile:clock:)`) that they move forward by hand, so
/// expirations come due without waiting:
///
/// ```swift
/// final class ManualClock: ExpirationClock, @unchecked Sendable {
///     private let lock = NSLock()
///     private var time = Date(timeIntervalSince1970: 1_000_000)
///     private var alarms: [SweepAlarm] = []
///     func now() -> Date { lock.withLock { time } }
///     func sleep(until deadline: Date?, alarm: SweepAlarm) {
///         lock.withLock { if !alarms.contains(where: { $0 === alarm }) { alarms.append(alarm) } }
///         if let deadline, now() >= deadline { return }
///         alarm.wait(until: nil)   // until `advance` rings it
///     }
///     func advance(by seconds: TimeInterval) {
///         let rung = lock.withLock { time += seconds; return alarms }
///         for a in rung { a.ring() }
///     }
/// }
/// ```
///
/// - Note: Implementations must be thread-safe: `now()` is called from writers (tombstone
///   eviction times) and from the sweeper's thread.
package protocol ExpirationClock: Sendable {
    /// The current time.
    func now() -> Date

    /// Blocks the sweeper's thread until `deadline` has come on this clock (nil: indefinitely),
    /// or until `alarm` rings or is stopped, whichever comes first. It may return early: the
    /// sweeper looks at the clock and the index again and sleeps again if nothing is due.
    ///
    /// A clock that does not follow real time waits with `alarm.wait(until: nil)` and rings the
    /// alarms of its sleepers whenever its time moves.
    func sleep(until deadline: Date?, alarm: SweepAlarm)
}

/// The wall clock: `Date()`, and timed waits on the alarm (which follow changes of the system
/// time, as expiration times are wall-clock times).
///
/// ```swift
/// let clock: any ExpirationClock = SystemExpirationClock()
/// print(clock.now())
/// ```
///
/// - Note: A value type without state; thread-safe.
package struct SystemExpirationClock: ExpirationClock {
    package init() {}

    package func now() -> Date { Date() }

    package func sleep(until deadline: Date?, alarm: SweepAlarm) {
        alarm.wait(until: deadline)
    }
}

/// What a sleeping expiry sweeper waits on: rung by a commit that adds an earlier due time, by
/// a clock whose time moved, or stopped when the database closes. A ring that comes while the
/// sweeper is awake is kept, so its next sleep returns at once: no wake-up is lost.
///
/// ```swift
/// alarm.ring()   // the sweeper looks at the clock and the index again
/// ```
///
/// - Note: Thread-safe.
package final class SweepAlarm: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var rung = false
    private var stopped = false
    private var sleeping = false
    /// The due time (whole seconds) the sweeper sleeps towards; `.max` while it is awake or has
    /// nothing to wait for, so that any new due time rings.
    private var target = UInt64.max
    /// The longest timed wait, in seconds.
    static let longestWait: TimeInterval = 3600

    init() {}

    /// Wakes the sweeper (or, if it is awake, makes its next sleep return at once).
    ///
    /// ```swift
    /// alarm.ring()
    /// ```
    package func ring() {
        condition.lock()
        rung = true
        condition.broadcast()
        condition.unlock()
    }

    /// Blocks until the alarm rings or stops, or until the wall-clock `deadline` (nil: no
    /// deadline; a deadline more than an hour away: an hour). For
    /// ``ExpirationClock/sleep(until:alarm:)``.
    ///
    /// ```swift
    /// alarm.wait(until: Date(timeIntervalSinceNow: 5))
    /// ```
    package func wait(until deadline: Date?) {
        // A far deadline (an expiration in the year 4001, say) is waited for an hour at a time:
        // a timed wait cannot take every date, and the sweeper just looks again.
        let deadline = deadline.map { min($0, Date(timeIntervalSinceNow: Self.longestWait)) }
        condition.lock()
        defer { condition.unlock() }
        sleeping = true
        condition.broadcast()   // for `settle`
        defer { sleeping = false }
        while !rung && !stopped {
            if let deadline {
                if !condition.wait(until: deadline) { break }
            } else {
                condition.wait()
            }
        }
    }

    /// Rings when `due` is earlier than what the sweeper sleeps towards.
    func note(due: UInt64) {
        condition.lock()
        if due < target {
            rung = true
            condition.broadcast()
        }
        condition.unlock()
    }

    /// Starts a pass: forgets earlier rings (the pass reads the index after this) and lets every
    /// new due time ring. False once stopped.
    func beginPass() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        rung = false
        target = .max
        return !stopped
    }

    /// Records what the sweeper is about to sleep towards (nil: nothing due at all).
    func willSleep(until due: UInt64?) {
        condition.lock()
        target = due ?? .max
        condition.unlock()
    }

    var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// Blocks until the sweeper sleeps with no ring pending (it has seen every ring and every
    /// clock move so far), or is stopped. For tests with a manual clock.
    func settle() {
        condition.lock()
        while !(sleeping && !rung) && !stopped { condition.wait() }
        condition.unlock()
    }
}
