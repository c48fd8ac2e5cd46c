import Foundation
import Synchronization

/// The thread a database owns for its `async` writes. A write waits for `fdatasync`; run on
/// Swift's cooperative pool (one thread per core) or on an event loop it would stall every other
/// task meanwhile, so the `async` API hands each write to this thread and suspends the caller
/// until it is done. Writes are serialized by the database anyway, so one thread loses nothing.
///
/// The thread starts with the first job and ends when the database closes; jobs queued by then
/// still run (and find the database closed).
///
/// It is also a `TaskExecutor`: a task that prefers it runs on this thread, and its writes then
/// run inline, without handing off and waking two threads per write
/// (``Database/writeExecutor``).
///
/// Thread-safe: jobs may be submitted from any thread.
final class DatabaseWorker: TaskExecutor, @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [any WorkerJobProtocol] = []
    private var head = 0
    private var running = false
    private var stopped = false
    private let name: String
    /// Jobs submitted, for the worker's brief spin before it sleeps (read without the lock).
    private let submitted = Atomic<UInt64>(0)

    init(name: String) { self.name = name }

    /// The most writes one group commit takes.
    static let maxGroup = 256

    /// Runs `body` in one write transaction of the database (its batch); set by the database.
    /// Guarded by `condition`.
    private var groupRunner: (@Sendable (() throws -> Void) throws -> Void)?

    func setGroupRunner(_ runner: @escaping @Sendable (() throws -> Void) throws -> Void) {
        condition.lock()
        groupRunner = runner
        condition.unlock()
    }

    /// Runs several small writes in one transaction; each caller is answered after the commit,
    /// with its own result, or with the error that failed the commit.
    private func runGroup(_ group: [any WorkerJobProtocol], _ runner: @Sendable (() throws -> Void) throws -> Void) {
        var answers: [((any Error)?) -> Void] = []
        do {
            try runner {
                for job in group { answers.append(try job.runInGroup()) }
            }
            for answer in answers { answer(nil) }
        } catch {
            for answer in answers { answer(error) }
            for job in group { job.fail(error) }
        }
    }

    /// How long the worker looks for the next job before it sleeps.
    static let spinNanoseconds: UInt64 = 50_000

    /// Queues `job`; false when the worker has stopped (the database closed), and the job was
    /// not queued.
    func submit(_ job: any WorkerJobProtocol) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopped else { return false }
        jobs.append(job)
        submitted.add(1, ordering: .releasing)
        if !running {
            running = true
            let thread = Thread { [self] in work() }
            thread.name = "settee.db.\(name)"
            thread.start()
        }
        condition.signal()
        return true
    }

    /// Jobs waiting (for tests).
    var queuedCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count - head
    }

    /// Whether the caller is this worker's thread.
    var isCurrentThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
    }
    // Guarded by `condition`: the running thread.
    private var thread: pthread_t?

    /// Runs a task's job on this thread. After the database closed there is no thread: the job
    /// goes to Swift's global executor instead, since a task's job must run somewhere.
    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        if !submit(TaskJob(job: unowned, executor: asUnownedTaskExecutor())) {
            globalConcurrentExecutor.enqueue(unowned)
        }
    }

    /// Lets the queued jobs run, then ends the thread; later submissions are refused.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    private func work() {
        condition.lock()
        thread = pthread_self()
        condition.unlock()
        var seen: UInt64 = 0
        while true {
            // A caller that awaits each write submits the next one a moment after the last
            // finished. Waking a sleeping thread costs tens of microseconds on a virtual machine
            // (an interprocessor interrupt), as much as a fast commit, so look for it briefly
            // before sleeping.
            let deadline = DispatchTime.now().uptimeNanoseconds + Self.spinNanoseconds
            while submitted.load(ordering: .acquiring) == seen && DispatchTime.now().uptimeNanoseconds < deadline {}
            condition.lock()
            while head == jobs.count && !stopped { condition.wait() }
            if head == jobs.count {
                running = false
                thread = nil
                condition.unlock()
                return
            }
            var group = [jobs[head]]
            head += 1
            // Small writes queued together share one commit and its sync (group commit).
            if group[0].groupable, groupRunner != nil {
                while head < jobs.count, jobs[head].groupable, group.count < Self.maxGroup {
                    group.append(jobs[head])
                    head += 1
                }
            }
            seen = submitted.load(ordering: .relaxed)
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            let runner = groupRunner
            condition.unlock()
            if group.count == 1 || runner == nil {
                for job in group { job.run() }
            } else if let runner {
                runGroup(group, runner)
            }
        }
    }
}

protocol WorkerJobProtocol: Sendable {
    func run()
    /// Whether the job is one small write that may share a commit with the writes queued beside
    /// it (group commit): a single-document save or delete.
    var groupable: Bool { get }
    /// Runs the job inside a group's transaction and returns what answers its caller once the
    /// group's commit is known: called with nil when it committed (the job's own result), or with
    /// the error that failed the group. Throws only what must abort the whole group (the job is
    /// then answered by `fail`).
    func runInGroup() throws -> (((any Error)?) -> Void)
    /// Answers a job of a group that failed as a whole.
    func fail(_ error: any Error)
}

extension WorkerJobProtocol {
    var groupable: Bool { false }
    func runInGroup() throws -> (((any Error)?) -> Void) { run(); return { _ in } }
    func fail(_ error: any Error) {}
}

/// A task's job, run on the worker for a task that prefers it as its executor.
private struct TaskJob: WorkerJobProtocol, @unchecked Sendable {
    // @unchecked: an unowned job and executor reference are handed to exactly one thread.
    let job: UnownedJob
    let executor: UnownedTaskExecutor
    func run() { job.runSynchronously(on: executor) }
}

/// One call handed to the worker, and the task waiting for it. A task cancelled before its job
/// starts gets `CancellationError` and the job never runs; once it runs it finishes, so a
/// cancelled write is whole or absent.
final class WorkerJob<R: Sendable>: WorkerJobProtocol {
    private enum Phase {
        case created
        case cancelledBeforeQueued
        case queued(CheckedContinuation<R, any Error>)
        case running
        case done
    }

    private let body: @Sendable () throws -> R
    private let phase = Mutex<Phase>(.created)
    let groupable: Bool

    init(groupable: Bool = false, _ body: @escaping @Sendable () throws -> R) {
        self.body = body
        self.groupable = groupable
    }

    /// Errors a single-document write throws before it changes anything (refusals, bad input):
    /// within a group they answer that job alone. Any other error may have left the group's
    /// transaction half-written, so it aborts the group.
    private static func failsAlone(_ error: any Error) -> Bool {
        guard let e = error as? SetteeError else { return false }
        return [.forbidden, .invalidParameter, .conflict, .notFound, .tooLarge, .invalidJSON, .corrupted].contains(e.code)
    }

    func runInGroup() throws -> (((any Error)?) -> Void) {
        let waiting = phase.withLock { p -> CheckedContinuation<R, any Error>? in
            guard case .queued(let c) = p else { return nil }
            p = .running
            return c
        }
        guard let waiting else { return { _ in } }
        let result: Swift.Result<R, any Error>
        do {
            result = .success(try body())
        } catch where Self.failsAlone(error) {
            result = .failure(error)
        } catch {
            // The group is aborted: `fail` answers this job with the group's error.
            phase.withLock { $0 = .queued(waiting) }
            throw error
        }
        return { [self] groupError in
            self.phase.withLock { $0 = .done }
            if let groupError { waiting.resume(throwing: groupError) } else { waiting.resume(with: result) }
        }
    }

    func fail(_ error: any Error) {
        let waiting = phase.withLock { p -> CheckedContinuation<R, any Error>? in
            switch p {
            case .queued(let c):
                p = .done
                return c
            default:
                return nil
            }
        }
        waiting?.resume(throwing: error)
    }

    /// Records the waiting task; false when it was cancelled already (the continuation is then
    /// resumed with `CancellationError`).
    func attach(_ continuation: CheckedContinuation<R, any Error>) -> Bool {
        let cancelled = phase.withLock { p -> Bool in
            if case .cancelledBeforeQueued = p { p = .done; return true }
            p = .queued(continuation)
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    func cancel() {
        let waiting = phase.withLock { p -> CheckedContinuation<R, any Error>? in
            switch p {
            case .created:
                p = .cancelledBeforeQueued
                return nil
            case .queued(let c):
                p = .done
                return c
            case .cancelledBeforeQueued, .running, .done:
                return nil
            }
        }
        waiting?.resume(throwing: CancellationError())
    }

    /// Resumes a job the worker refused (the database closed).
    func refuse(_ error: any Error) {
        let waiting = phase.withLock { p -> CheckedContinuation<R, any Error>? in
            guard case .queued(let c) = p else { return nil }
            p = .done
            return c
        }
        waiting?.resume(throwing: error)
    }

    func run() {
        let waiting = phase.withLock { p -> CheckedContinuation<R, any Error>? in
            guard case .queued(let c) = p else { return nil }
            p = .running
            return c
        }
        guard let waiting else { return }
        let result = Swift.Result { try body() }
        phase.withLock { $0 = .done }
        waiting.resume(with: result)
    }
}

extension DatabaseCore {
    /// Runs `body` on the database's worker thread and returns its result, the calling task
    /// suspended meanwhile.
    func onWorker<R: Sendable>(groupable: Bool = false, _ body: @escaping @Sendable () throws -> R) async throws -> R {
        // A task running on the worker (it prefers `writeExecutor`) writes inline: handing the
        // write to its own thread would only wait for itself.
        if worker.isCurrentThread {
            try Task.checkCancellation()
            return try body()
        }
        return try await run(body, groupable: groupable) { [worker] job in
            if !worker.submit(job) { job.refuse(SetteeError(.notOpen, "the database is closed")) }
        }
    }

    /// Runs `body` on a thread of its own (long jobs that must not hold up queued writes).
    func onOwnThread<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await run(body) { [name] job in
            let thread = Thread { job.run() }
            thread.name = "settee.db.\(name).long"
            thread.start()
        }
    }

    /// Hands `body` to `start` as a job and waits for it, cancellation included.
    private func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R, groupable: Bool = false,
                                  start: (WorkerJob<R>) -> Void) async throws -> R {
        let job = WorkerJob(groupable: groupable, body)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
                if job.attach(continuation) { start(job) }
            }
        } onCancel: {
            job.cancel()
        }
    }
}
