import Foundation
import Synchronization
import Testing
@testable import Settee

/// Small async writes queued together share one commit (group commit), and each caller still
/// gets its own answer.
@Suite struct GroupCommitTests {
    /// Holds the worker busy until released, so writes queue up behind it.
    func blockWorker(_ db: Database) async throws -> (release: @Sendable () -> Void, done: Task<Void, any Error>) {
        let gate = DispatchSemaphore(value: 0)
        let started = Mutex(false)
        // The worker is the database's own thread, not the cooperative pool: blocking it is safe.
        let done = Task { try await db.inBatch { _ in started.withLock { $0 = true }; gate.wait() } }
        for _ in 0 ..< 2000 where !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(started.withLock { $0 })
        return ({ gate.signal() }, done)
    }

    func waitUntilQueued(_ db: Database, _ n: Int) async throws {
        for _ in 0 ..< 2000 where db.core.worker.queuedCount < n { try await Task.sleep(for: .milliseconds(5)) }
        #expect(db.core.worker.queuedCount >= n)
    }

    @Test func queuedSavesShareOneCommit() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir, fullSync: true)
        let commits = Mutex(0)
        let token = db.addChangeListener { _ in commits.withLock { $0 += 1 } }
        defer { token.remove() }
        let (release, blocker) = try await blockWorker(db)
        let saves = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0 ..< 50 { group.addTask { try await db.saveDocument(MutableDocument(id: "d\(i)", data: ["i": .int(Int64(i))])) } }
                try await group.waitForAll()
            }
        }
        try await waitUntilQueued(db, 50)
        release()
        try await blocker.value
        try await saves.value
        #expect(try db.count == 50)
        #expect(try db.lastSequence == 50)
        // Every save was answered after the one commit that holds them all.
        for _ in 0 ..< 400 where commits.withLock({ $0 }) < 1 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(commits.withLock { $0 } == 1, "the 50 queued saves committed together")
    }

    @Test func aRefusedWriteInAGroupFailsAloneAndTheOthersCommit() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.addValidation(named: "no-evil") { new, _ in if new.bool(forKey: "evil") { throw SetteeError.forbidden("evil") } }
        try await db.saveDocument(MutableDocument(id: "existing", data: ["v": 0]))
        let stale = try #require(try await db.document(withID: "existing")).toMutable()
        try await db.saveDocument(MutableDocument(id: "existing", data: ["v": 1]))
        let (release, blocker) = try await blockWorker(db)
        let good = Task { try await db.saveDocument(MutableDocument(id: "good", data: ["v": 1])) }
        let evil = Task { try await db.saveDocument(MutableDocument(id: "evil", data: ["evil": true])) }
        let conflicted = Task { () async throws -> Bool in
            stale.setInt(2, forKey: "v")
            return try await db.saveDocument(stale, concurrencyControl: .failOnConflict)
        }
        let deleted = Task { try await db.deleteDocument(try #require(try await db.document(withID: "existing"))) }
        try await waitUntilQueued(db, 4)
        release()
        try await blocker.value
        try await good.value
        await #expect(throws: SetteeError.self) { try await evil.value }
        #expect(try await conflicted.value == false)
        try await deleted.value
        #expect(try await db.document(withID: "good") != nil)
        #expect(try await db.document(withID: "evil") == nil)
        #expect(try await db.document(withID: "existing") == nil)   // deleted in the same group
    }
}
