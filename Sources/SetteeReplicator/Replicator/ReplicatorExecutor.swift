import Foundation

/// The threads replicators run on.
///
/// A replicator's work blocks: an in-process peer reads and writes its database synchronously,
/// and a write waits for `fdatasync`. Swift's cooperative pool has one thread per core and
/// expects tasks never to block, so running there would stall the application's other tasks
/// while a batch commits, and a test suite or app that blocks pool threads itself would stall
/// replication in turn. Every replicator task prefers this executor instead: a few threads of
/// its own (enough to read batch n + 1 while batch n commits, for a few replicators at once),
/// shared by every replicator in the process. Child tasks inherit the preference; the
/// replicator's unstructured tasks name it.
///
/// Thread-safe: jobs may be enqueued from any thread.
final class ReplicatorExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = ReplicatorExecutor(threads: 4)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var head = 0

    init(threads: Int) {
        for n in 0..<threads {
            let thread = Thread { [self] in self.work() }
            thread.name = "settee.replicator.\(n)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while head == jobs.count { condition.wait() }
            let job = jobs[head]
            head += 1
            // Compact the queue once it is drained, so it does not grow for ever.
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            condition.unlock()
            job.runSynchronously(on: executor)
        }
    }
}
