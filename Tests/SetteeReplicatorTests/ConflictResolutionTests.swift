import Foundation
@_spi(Replication) import Settee
import Testing
@_spi(Replication) @testable import SetteeReplicator

struct LocalWinsResolver: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? { conflict.localDocument }
}

struct RemoteWinsResolver: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? { conflict.remoteDocument }
}

/// Seed 002's merge: the union of both, the local value kept for a key in both.
struct MergeResolver: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? {
        let local = conflict.localDocument?.toDictionary() ?? [:]
        let remote = conflict.remoteDocument?.toDictionary() ?? [:]
        return MutableDocument(id: conflict.documentID, data: local.merging(remote) { current, _ in current }).toDocument()
    }
}

struct DeletingResolver: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? { nil }
}

struct ResolverFailure: Error {}

/// Throws while `failing` is set; counts its calls.
final class ThrowingResolver: ConflictResolver {
    let failing = Locked(true)
    let calls = Locked(0)
    func resolve(_ conflict: Conflict) throws -> Document? {
        calls.withLock { $0 += 1 }
        if failing.value { throw ResolverFailure() }
        return conflict.remoteDocument
    }
}

struct WrongIDResolver: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? {
        MutableDocument(id: "not-" + conflict.documentID, data: ["resolved": true]).toDocument()
    }
}

struct ForeignResolver: ConflictResolver {
    let other: Database
    func resolve(_ conflict: Conflict) throws -> Document? { try other.document(withID: conflict.documentID) }
}

/// Blocks until told (at most 120 s: under the full suite's load the test may not run for a while),
/// so a test can stop the replicator while it resolves.
final class SlowResolver: ConflictResolver {
    let entered = Locked(false)
    let release = DispatchSemaphore(value: 0)
    /// Whether the wait ended by its limit rather than by `release`.
    let gaveUp = Locked(false)
    func resolve(_ conflict: Conflict) throws -> Document? {
        entered.withLock { $0 = true }
        if release.wait(timeout: .now() + 120) == .timedOut { gaveUp.withLock { $0 = true } }
        return conflict.localDocument
    }
}

@Suite struct ConflictResolutionTests {
    /// `a` and `b` share document `doc` at generation 1, then each saves its own edit.
    func conflicted(_ dir: TestDirectory, local: [String: JSONValue], remote: [String: JSONValue],
                    localEdits: Int = 1) async throws -> (Database, Database, localRev: String, remoteRev: String) {
        let a = try dir.open("a"), b = try dir.open("b")
        try save(a, "doc", ["v": 0, "shared": true])
        #expect(await replicate(a, b, .push).error == nil)
        var localRev = ""
        for i in 0 ..< localEdits { localRev = try save(a, "doc", local.merging(["edit": .int(Int64(i))]) { x, _ in x }) }
        let remoteRev = try save(b, "doc", remote)
        return (a, b, localRev, remoteRev)
    }

    @Test func seed004TwoDevicesConverge() async throws {
        // Molly creates DocumentA; it syncs to Naomi; both change it; they sync both ways.
        let dir = try TestDirectory()
        let molly = try dir.open("molly"), naomi = try dir.open("naomi")
        try save(molly, "DocumentA", ["title": "groceries"])
        let replicator = Replicator(config: ReplicatorConfiguration(database: molly, target: DatabaseEndpoint(database: naomi)))
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        #expect(try await naomi.document(withID: "DocumentA")?.string(forKey: "title") == "groceries")
        let x = try save(molly, "DocumentA", ["title": "groceries", "by": "molly"])
        let y = try save(naomi, "DocumentA", ["title": "groceries", "by": "naomi"])
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        let expected = try RevisionRanking.ranksAbove(y, x) ? "naomi" : "molly"
        for db in [molly, naomi] {
            let tree = try #require(try await db.revisionTree(withID: "DocumentA"))
            #expect(!tree.isConflicted)
            #expect(try await db.document(withID: "DocumentA")?.string(forKey: "by") == expected)
            #expect(try await db.conflictingRevisions(withID: "DocumentA").count == 1)
        }
        #expect(try shapes(molly) == shapes(naomi))
        // Both revisions stay in the tree: the loser as a tombstoned branch.
        let tree = try #require(try await molly.revisionTree(withID: "DocumentA"))
        #expect(Set(tree.revisions.map(\.revisionID)).isSuperset(of: [x, y]))
    }

    @Test(arguments: ["local", "remote", "merge", "delete"])
    func customResolvers(_ kind: String) async throws {
        let dir = try TestDirectory()
        let (a, b, _, _) = try await conflicted(dir, local: ["v": 1, "mine": "a"], remote: ["v": 2, "theirs": "b"])
        let resolver: any ConflictResolver = switch kind {
        case "local": LocalWinsResolver()
        case "remote": RemoteWinsResolver()
        case "merge": MergeResolver()
        default: DeletingResolver()
        }
        let status = await replicate(a, b, .pull) { $0.conflictResolver = resolver }
        #expect(status.error == nil)
        let doc = try await a.document(withID: "doc")
        switch kind {
        case "local": #expect(doc?.toDictionary() == ["v": 1, "mine": "a", "edit": 0])
        case "remote": #expect(doc?.toDictionary() == ["v": 2, "theirs": "b"])
        case "merge": #expect(doc?.toDictionary() == ["v": 1, "mine": "a", "theirs": "b", "edit": 0])
        default: #expect(doc == nil)
        }
        #expect(try await a.revisionTree(withID: "doc")?.isConflicted == false)
        // The resolution is revisions: pushing it resolves the other side the same way.
        #expect(await replicate(a, b, .pushAndPull) { $0.conflictResolver = resolver }.error == nil)
        #expect(try shapes(a) == shapes(b))
        #expect(try await b.document(withID: "doc")?.toDictionary() == doc?.toDictionary())
        #expect(try await b.revisionTree(withID: "doc")?.isConflicted == false)
    }

    @Test func defaultResolutionRules() async throws {
        // More revisions win, even against a higher revision ID.
        do {
            let dir = try TestDirectory()
            let (a, b, _, _) = try await conflicted(dir, local: ["v": 1], remote: ["v": 2], localEdits: 2)
            #expect(await replicate(a, b).error == nil)
            for db in [a, b] { #expect(try await db.document(withID: "doc")?["v"] == 1) }
            #expect(try shapes(a) == shapes(b))
        }
        // A deletion wins against an edit, whichever side deleted.
        for deleter in ["local", "remote"] {
            let dir = try TestDirectory()
            let a = try dir.open("a"), b = try dir.open("b")
            try save(a, "doc", ["v": 0])
            #expect(await replicate(a, b).error == nil)
            let (deleting, editing) = deleter == "local" ? (a, b) : (b, a)
            // The editor makes two edits: the deletion still wins.
            try save(editing, "doc", ["v": 1])
            try save(editing, "doc", ["v": 2])
            try await deleting.deleteDocument(try #require(try deleting.document(withID: "doc")))
            #expect(await replicate(a, b).error == nil)
            for db in [a, b] {
                #expect(try await db.document(withID: "doc") == nil, "\(deleter) deletion")
                #expect(try await db.revisionTree(withID: "doc")?.isConflicted == false)
            }
            #expect(try shapes(a) == shapes(b))
        }
        // The same when the edits are pushed before the deletion is pulled (as a push-and-pull run
        // may do): the remote's current revision is then the edit, and the deletion arrives as a
        // leaf beside it.
        do {
            let dir = try TestDirectory()
            let a = try dir.open("a"), b = try dir.open("b")
            try save(a, "doc", ["v": 0])
            #expect(await replicate(a, b).error == nil)
            try save(a, "doc", ["v": 1])
            try save(a, "doc", ["v": 2])
            try await b.deleteDocument(try #require(try b.document(withID: "doc")))
            #expect(await replicate(a, b, .push).error == nil)
            #expect(try await b.document(withID: "doc")?["v"] == 2)   // a live leaf beats a deleted one
            #expect(await replicate(a, b, .pull).error == nil)
            #expect(try await a.document(withID: "doc") == nil)
            #expect(await replicate(a, b).error == nil)
            for db in [a, b] {
                #expect(try await db.document(withID: "doc") == nil)
                #expect(try await db.revisionTree(withID: "doc")?.isConflicted == false)
            }
            #expect(try shapes(a) == shapes(b))
        }
    }

    @Test func throwingResolverLeavesTheConflictUntilRestart() async throws {
        let dir = try TestDirectory()
        let (a, b, localRev, remoteRev) = try await conflicted(dir, local: ["v": 1], remote: ["v": 2])
        let resolver = ThrowingResolver()
        let recorder = Recorder()
        var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
        config.replicatorType = .pull
        config.conflictResolver = resolver
        config.logHandler = recorder.logHandler
        let replicator = Replicator(config: config)
        recorder.attach(replicator)
        replicator.start()
        let first = await replicator.waitUntilStopped()
        #expect(first.error == nil)
        #expect(await recorder.waitFor { $0.contains { $0.1.error?.code == .conflictResolverFailed } })
        let event = try #require(recorder.documents.value.first { $0.1.error != nil })
        #expect(event.0 == .pull && event.1.id == "doc" && event.1.revisionID == remoteRev)
        #expect(recorder.logs.value.contains { $0.0 == .warning && $0.1.contains("doc") })
        // The conflict is still there: both revisions are live leaves.
        await #expect(Set(try a.conflictingRevisions(withID: "doc").compactMap(\.revisionID)) == [localRev, remoteRev])

        // Restarting with nothing new to pull retries it.
        resolver.failing.withLock { $0 = false }
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        #expect(try await a.conflictingRevisions(withID: "doc").count == 1)
        #expect(try await a.document(withID: "doc")?["v"] == 2)
        #expect(await recorder.waitFor { $0.contains { $0.1.id == "doc" && $0.1.error == nil } })
        // Resolved: a third start does not call the resolver again.
        let calls = resolver.calls.value
        replicator.start()
        _ = await replicator.waitUntilStopped()
        #expect(resolver.calls.value == calls)
    }

    @Test func resolverReturningAnotherIDIsAcceptedWithAWarning() async throws {
        let dir = try TestDirectory()
        let (a, b, _, _) = try await conflicted(dir, local: ["v": 1], remote: ["v": 2])
        let recorder = Recorder()
        let status = await replicate(a, b, .pull, recorder: recorder) { $0.conflictResolver = WrongIDResolver() }
        #expect(status.error == nil)
        #expect(try await a.document(withID: "doc")?.toDictionary() == ["resolved": true])
        #expect(try await a.document(withID: "not-doc") == nil)
        #expect(try await a.revisionTree(withID: "doc")?.isConflicted == false)
        #expect(recorder.logs.value.contains { $0.0 == .warning && $0.1.contains("not-doc") })
        #expect(recorder.documents.value.allSatisfy { $0.1.error == nil })
    }

    @Test func resolverReturningAnotherDatabasesDocumentIsAnError() async throws {
        let dir = try TestDirectory()
        let (a, b, _, _) = try await conflicted(dir, local: ["v": 1], remote: ["v": 2])
        let third = try dir.open("third")
        try save(third, "doc", ["v": 3])
        let recorder = Recorder()
        let status = await replicate(a, b, .pull, recorder: recorder) { $0.conflictResolver = ForeignResolver(other: third) }
        #expect(status.error == nil)
        #expect(await recorder.waitFor { $0.contains { $0.1.error?.code == .resolverReturnedForeignDocument } })
        #expect(recorder.logs.value.contains { $0.0 == .error })
        #expect(try await a.conflictingRevisions(withID: "doc").count == 2)
    }

    /// A resolver is the app's code and may block: as many blocked at once as the cooperative pool
    /// has threads leave the pool free (the release below is sent from a task; were the resolvers
    /// on the pool, it could not run until their waits gave up).
    @Test func blockedResolversLeaveTheCooperativePoolFree() async throws {
        let count = max(2, ProcessInfo.processInfo.activeProcessorCount)
        var directories: [TestDirectory] = []   // kept until the end: each removes its files when it goes
        var replicators: [Replicator] = []
        var resolvers: [SlowResolver] = []
        var databases: [Database] = []
        for n in 0 ..< count {
            let sub = try TestDirectory()
            directories.append(sub)
            let (a, b, _, _) = try await conflicted(sub, local: ["v": .int(Int64(n))], remote: ["v": .int(Int64(-n))])
            databases += [a, b]
            let resolver = SlowResolver()
            var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
            config.replicatorType = .pull
            config.conflictResolver = resolver
            let replicator = Replicator(config: config)
            replicator.start()
            replicators.append(replicator)
            resolvers.append(resolver)
        }
        #expect(await eventually { resolvers.allSatisfy { $0.entered.value } })
        // Sent from a task of its own, which needs a pool thread to run.
        let blocked = resolvers
        await Task.detached { for r in blocked { r.release.signal() } }.value
        for replicator in replicators {
            let final = await replicator.waitUntilStopped()
            #expect(final.activity == .stopped && final.error == nil)
        }
        #expect(resolvers.allSatisfy { !$0.gaveUp.value }, "a resolver waited out its limit: it held a pool thread")
        for (n, a) in databases.enumerated() where n % 2 == 0 {
            #expect(try await a.conflictingRevisions(withID: "doc").count == 1)
        }
        withExtendedLifetime(directories) {}
    }

    @Test func stopWaitsForResolutionsInProgress() async throws {
        let dir = try TestDirectory()
        let (a, b, localRev, _) = try await conflicted(dir, local: ["v": 1], remote: ["v": 2])
        let resolver = SlowResolver()
        var config = ReplicatorConfiguration(database: a, target: DatabaseEndpoint(database: b))
        config.replicatorType = .pull
        config.continuous = true
        config.conflictResolver = resolver
        let replicator = Replicator(config: config)
        replicator.start()
        // Wait until the resolver runs (polling: a blocking wait here could hold the thread the
        // replicator needs), then stop while it does.
        #expect(await eventually { resolver.entered.value })
        replicator.stop()
        try await Task.sleep(for: .milliseconds(100))
        #expect(replicator.status.activity != .stopped)   // still resolving
        resolver.release.signal()
        let final = await replicator.waitUntilStopped()
        #expect(final.activity == .stopped && final.error == nil)
        #expect(try await a.conflictingRevisions(withID: "doc").count == 1)
        #expect(try await a.revisionTree(withID: "doc")?.revisions.contains { $0.parentRevisionID == localRev && !$0.isDeleted } == true)
    }
}
