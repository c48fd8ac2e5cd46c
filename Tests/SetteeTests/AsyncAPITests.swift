import Foundation
import Synchronization
import Testing
@_spi(Replication) @testable import Settee

/// The `async` API: writes run on the database's own worker thread, so they finish while every
/// thread of Swift's cooperative pool is blocked; a task cancelled before its write starts
/// writes nothing, one cancelled while it runs writes it whole; a closed database throws.
@Suite struct AsyncAPITests {
    /// A few threads of the test's own that run tasks preferring them, so the test's tasks do
    /// not need the cooperative pool it blocks.
    final class TestExecutor: TaskExecutor, @unchecked Sendable {
        private let condition = NSCondition()
        private var jobs: [UnownedJob] = []

        init(threads: Int) {
            for n in 0 ..< threads {
                let t = Thread { [self] in work() }
                t.name = "async-api-test.\(n)"
                t.start()
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
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }

    /// The suite's one test that blocks the cooperative pool on purpose: it depends on nothing
    /// that runs there, and it lets the pool go when it ends.
    @Test func concurrentSavesAndReadsFinishWhileTheCooperativePoolIsBlocked() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, fullSync: true)
        // Hold every cooperative thread: this test's own (it waits below) and the others.
        let release = DispatchSemaphore(value: 0)
        let blockers = max(ProcessInfo.processInfo.activeProcessorCount - 1, 1)
        for _ in 0 ..< blockers { Task.detached { release.wait() } }
        let executor = TestExecutor(threads: 4)
        let finished = DispatchSemaphore(value: 0)
        let failures = Locked<[String]>([])
        let count = 1000
        for i in 0 ..< count {
            Task(executorPreference: executor) {
                do {
                    let id = "doc-\(i % 100)"
                    let doc = try await db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
                    doc.setInt(i, forKey: "last")
                    try await db.saveDocument(doc) { mine, current in
                        mine.setInt(max(i, current?.int(forKey: "last") ?? 0), forKey: "last")
                        return true
                    }
                    guard try await db.document(withID: id) != nil else { throw SetteeError(.notFound, "\(id) vanished") }
                } catch {
                    failures.withLock { $0.append("\(i): \(error)") }
                }
                finished.signal()
            }
        }
        var done = 0
        for _ in 0 ..< count where finished.wait(timeout: .now() + 60) == .success { done += 1 }
        for _ in 0 ..< blockers { release.signal() }
        #expect(done == count, "\(count - done) saves never finished")
        #expect(failures.value.isEmpty, "\(failures.value.prefix(5))")
        #expect(try db.count == 100)
        for n in 0 ..< 100 {
            let last = try #require(try db.document(withID: "doc-\(n)")).int(forKey: "last")
            #expect(last >= 900 + n, "doc-\(n) ends at \(last)")
        }
    }

    /// Waits without holding a cooperative thread (tests run in parallel, and a blocked pool
    /// thread could be the one another test's task needs).
    private func waitUntil(_ flag: Locked<Bool>) async throws {
        while !flag.value { try await Task.sleep(for: .milliseconds(1)) }
    }

    @Test func cancelledBeforeItStartsWritesNothing() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        // Keep the worker busy until released, so the save below waits in its queue. Only the
        // worker thread blocks.
        let started = Locked(false)
        let release = DispatchSemaphore(value: 0)
        let busy = Task { try await db.inBatch { db in
            started.withLock { $0 = true }
            release.wait()
            try db.saveDocument(MutableDocument(id: "first"))
        } }
        try await waitUntil(started)
        let save = Task { try await db.saveDocument(MutableDocument(id: "cancelled", data: ["v": 1])) }
        try await Task.sleep(for: .milliseconds(50))
        save.cancel()
        let outcome = await save.result
        release.signal()
        try await busy.value
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(try await db.document(withID: "first") != nil)
        #expect(try await db.document(withID: "cancelled") == nil)
        // An already cancelled task writes nothing either.
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await db.saveDocument(MutableDocument(id: "late"))
        }
        let lateOutcome = await late.result
        #expect(throws: CancellationError.self) { try lateOutcome.get() }
        #expect(try await db.document(withID: "late") == nil)
    }

    @Test func cancelledWhileRunningWritesWhole() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let running = Locked(false)
        let release = DispatchSemaphore(value: 0)
        let batch = Task {
            try await db.inBatch { db in
                try db.saveDocument(MutableDocument(id: "a"))
                running.withLock { $0 = true }
                release.wait()
                try db.saveDocument(MutableDocument(id: "b"))
            }
        }
        try await waitUntil(running)
        batch.cancel()
        release.signal()
        try await batch.value   // it had started: it finishes, and reports no cancellation
        #expect(try await db.document(withID: "a") != nil)
        #expect(try await db.document(withID: "b") != nil)
    }

    @Test func everyFormRunsAndAClosedDatabaseThrows() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let doc = MutableDocument(id: "d", data: ["v": 1])
        try await db.saveDocument(doc)
        #expect(doc.revisionID?.hasPrefix("1-") == true)
        doc.setInt(2, forKey: "v")
        #expect(try await db.saveDocument(doc, concurrencyControl: .failOnConflict))
        let stale = try #require(try await db.document(withID: "d")).toMutable()
        doc.setInt(3, forKey: "v")
        try await db.saveDocument(doc)
        stale.setInt(9, forKey: "w")
        #expect(try await !db.saveDocument(stale, concurrencyControl: .failOnConflict))
        #expect(try await db.saveDocument(stale) { mine, current in
            mine.setInt(current?.int(forKey: "v") ?? 0, forKey: "v")
            return true
        })
        #expect(try await db.document(withID: "d")?.toDictionary() == ["v": 3, "w": 9])
        let blob = Blob(contentType: "text/plain", data: Data("hello".utf8))
        try await db.saveBlob(blob)
        #expect(try await db.blob(withDigest: blob.digest)?.content == Data("hello".utf8))
        try await db.inBatch { db in
            try db.saveDocument(MutableDocument(id: "x"))
            try db.saveDocument(MutableDocument(id: "y"))
        }
        try await db.setDocumentExpiration(withID: "x", expiration: Date(timeIntervalSinceNow: 3600))
        #expect(try await db.getDocumentExpiration(withID: "x") != nil)
        try await db.deleteDocument(try #require(try await db.document(withID: "x")))
        try await db.purgeDocument(withID: "y")
        #expect(try await db.document(withID: "x") == nil)
        #expect(try await db.revisionTree(withID: "y") == nil)
        _ = try await db.compact()
        #expect(try await db.check().isHealthy)
        try db.close()
        await #expect(throws: SetteeError.self) { try await db.saveDocument(MutableDocument(id: "after")) }
        await #expect(throws: SetteeError.self) { _ = try await db.document(withID: "d") }
    }
}
