import Foundation
import Testing
@testable import Settee

/// `Database.writeExecutor`: a task that prefers it runs on the database's worker thread and
/// writes inline there.
@Suite struct WriteExecutorTests {
    @Test func aTaskPreferringTheWriteExecutorWritesInline() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let threads = try await withTaskExecutorPreference(db.writeExecutor) { () async throws -> [Bool] in
            var onWorker: [Bool] = []
            for i in 0 ..< 50 {
                try await db.saveDocument(MutableDocument(id: "d\(i)", data: ["i": .int(Int64(i))]))
                onWorker.append(db.core.worker.isCurrentThread)
            }
            try await db.inBatch { db in try db.saveDocument(MutableDocument(id: "batch")) }
            let saved = try await db.saveDocuments([MutableDocument(id: "many-1"), MutableDocument(id: "many-2")])
            #expect(saved == [true, true])
            return onWorker
        }
        #expect(threads.allSatisfy { $0 }, "the task's code ran on the worker thread")
        #expect(try db.count == 53)
        // Writes from other tasks meanwhile are queued behind, and land.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await withTaskExecutorPreference(db.writeExecutor) {
                    for i in 0 ..< 100 { try await db.saveDocument(MutableDocument(id: "p\(i)")) }
                }
            }
            group.addTask {
                for i in 0 ..< 100 { try await db.saveDocument(MutableDocument(id: "q\(i)")) }
            }
            try await group.waitForAll()
        }
        #expect(try db.count == 253)
        #expect(!db.core.worker.isCurrentThread)
    }

    @Test func aCancelledTaskOnTheWriteExecutorWritesNothing() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let task = Task {
            try await withTaskExecutorPreference(db.writeExecutor) {
                withUnsafeCurrentTask { $0?.cancel() }
                try await db.saveDocument(MutableDocument(id: "never"))
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await db.document(withID: "never") == nil)
    }

    @Test func aTaskPreferringTheExecutorOfAClosedDatabaseStillRuns() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let executor = db.writeExecutor
        try db.close()
        let ran = await withTaskExecutorPreference(executor) { () async -> Bool in
            await Task.yield()
            return true
        }
        #expect(ran)
        await #expect(throws: SetteeError.self) {
            try await withTaskExecutorPreference(executor) { try await db.saveDocument(MutableDocument(id: "x")) }
        }
    }
}
