import Foundation
import Synchronization

/// The threads PBKDF2 runs on: a few of their own, never the event loops or the cooperative pool,
/// so that a storm of logins or sign-ups waits its turn here while every other request is served
/// as before (PBKDF2 costs tens of milliseconds of a core by design).
///
/// The pool has half the machine's cores (one on a two-core machine) and a bounded queue: past
/// ``maxWaiting`` checks waiting, a new one is refused at once (503) rather than queued for
/// minutes.
///
/// ```swift
/// let hash = try await PasswordHasher.shared.hash("s3cret")
/// let ok = try await PasswordHasher.shared.check("s3cret", against: hash)
/// ```
///
/// Thread-safe: jobs are queued under a lock and run by the pool's threads.
final class PasswordHasher: Sendable {
    /// The process's pool (hashing is a property of the machine, not of one server).
    static let shared = PasswordHasher(threads: max(1, ProcessInfo.processInfo.activeProcessorCount / 2))

    /// Checks waiting beyond which a new one is refused.
    static let maxWaiting = 2048

    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var waiting: Int { jobs.count - head }
    }
    private let queue = Mutex(Queue())
    private let ready = DispatchSemaphore(value: 0)
    let threadCount: Int
    /// Hashes computed, and the nanoseconds they took (for `/_metrics`).
    let computed = Atomic<UInt64>(0)
    let nanoseconds = Atomic<UInt64>(0)
    /// Checks refused because too many were waiting.
    let refused = Atomic<UInt64>(0)

    init(threads: Int) {
        threadCount = threads
        for i in 0 ..< threads {
            let thread = Thread { [self] in self.work() }
            thread.name = "settee-pbkdf2-\(i)"
            thread.start()
        }
    }

    /// How many checks are waiting for a thread.
    var waiting: Int { queue.withLock { $0.waiting } }

    private func work() {
        while true {
            ready.wait()
            let job = queue.withLock { q -> (@Sendable () -> Void)? in
                guard q.head < q.jobs.count else { return nil }
                let job = q.jobs[q.head]
                q.head += 1
                // Drop what was run once it is half the array, so the queue's memory stays bounded.
                if q.head > 64 && q.head * 2 > q.jobs.count {
                    q.jobs.removeFirst(q.head)
                    q.head = 0
                }
                return job
            }
            job?()
        }
    }

    /// Runs `body` on the pool and returns what it returns.
    ///
    /// - Throws: ``CouchError`` 503 when ``maxWaiting`` checks are already waiting.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = queue.withLock { q -> Bool in
                guard q.waiting < Self.maxWaiting else { return false }
                q.jobs.append { [self] in
                    let start = DispatchTime.now().uptimeNanoseconds
                    let result = body()
                    computed.add(1, ordering: .relaxed)
                    nanoseconds.add(DispatchTime.now().uptimeNanoseconds &- start, ordering: .relaxed)
                    continuation.resume(returning: result)
                }
                return true
            }
            if accepted {
                ready.signal()
            } else {
                refused.add(1, ordering: .relaxed)
                continuation.resume(throwing: CouchError(.serviceUnavailable, "service_unavailable",
                                                         "Too many password checks are waiting: try again in a moment."))
            }
        }
    }

    /// A new salted hash of `password`.
    func hash(_ password: String) async throws -> PasswordHash {
        try await run { PasswordHash(password: password) }
    }

    /// Whether `password` is the one `hash` was made from.
    func check(_ password: String, against hash: PasswordHash) async throws -> Bool {
        try await run { hash.matches(password) }
    }

    /// Spends a check's time for a name that has no password to check, so that an unknown
    /// name and a wrong password cost the same.
    func spendCheckTime() async throws {
        try await run { PasswordHash.spendCheckTime() }
    }
}
