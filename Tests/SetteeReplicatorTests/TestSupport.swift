import Foundation
import SetteeCrashKit
@_spi(Replication) import Settee
import Synchronization
import Testing
@_spi(Replication) @testable import SetteeReplicator

/// A directory for one test's databases, in /dev/shm when there is one (tests never wait on a
/// disk), removed when the test ends.
final class TestDirectory: Sendable {
    let path: String
    init() throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        path = base + "settee-repl-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// A database named `name` in this directory, `fullSync` off; revision trees kept 1,000 deep
    /// unless asked, so pruning never differs between peers in a test that does not want it to.
    func open(_ name: String, maxRevTreeDepth: Int = 1000) throws -> Database {
        var config = DatabaseConfiguration(directory: path)
        config.fullSync = false
        config.maxRevTreeDepth = maxRevTreeDepth
        // Many databases are open at once across the suite: each reserves 8 GiB of address space.
        config.maximumSize = 8 << 30
        return try Database(name: name, config: config)
    }
}

/// A value shared with listeners and tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    @discardableResult
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}

/// Collects a replicator's document events and log messages.
final class Recorder: Sendable {
    let documents = Locked<[(ReplicationDirection, ReplicatedDocument)]>([])
    let logs = Locked<[(ReplicatorLogLevel, String)]>([])
    let statuses = Locked<[ReplicatorStatus]>([])

    func attach(_ replicator: Replicator) {
        replicator.addDocumentReplicationListener { r in
            self.documents.withLock { d in for doc in r.documents { d.append((r.direction, doc)) } }
        }
        replicator.addChangeListener { s in self.statuses.withLock { $0.append(s) } }
    }

    var logHandler: @Sendable (ReplicatorLogLevel, String) -> Void {
        { level, message in self.logs.withLock { $0.append((level, message)) } }
    }

    /// Events are delivered on a background queue: wait until `condition` holds (up to 10 s).
    func waitFor(_ condition: @escaping ([(ReplicationDirection, ReplicatedDocument)]) -> Bool) async -> Bool {
        for _ in 0 ..< 2000 {
            if condition(documents.value) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }
}

/// Runs a one-shot replication of `db` with `other` and returns its final status.
@discardableResult
func replicate(_ db: Database, _ other: any ReplicationPeer, _ type: ReplicatorType = .pushAndPull, reset: Bool = false,
               recorder: Recorder? = nil, configure: (inout ReplicatorConfiguration) -> Void = { _ in }) async -> ReplicatorStatus {
    var config = ReplicatorConfiguration(database: db, target: other)
    config.replicatorType = type
    // Warnings go to the recorder, or nowhere: a test that expects one checks the recorder.
    config.logHandler = recorder?.logHandler ?? { @Sendable _, _ in }
    configure(&config)
    let replicator = Replicator(config: config)
    recorder?.attach(replicator)
    replicator.start(reset: reset)
    return await replicator.waitUntilStopped()
}

@discardableResult
func replicate(_ db: Database, _ other: Database, _ type: ReplicatorType = .pushAndPull, reset: Bool = false,
               recorder: Recorder? = nil, configure: (inout ReplicatorConfiguration) -> Void = { _ in }) async -> ReplicatorStatus {
    await replicate(db, DatabaseEndpoint(database: other), type, reset: reset, recorder: recorder, configure: configure)
}

/// Waits until the replicator reports `activity` (see ``eventually(hangGuard:_:)``).
func waitFor(_ replicator: Replicator, _ activity: ReplicatorActivity) async -> Bool {
    await eventually { replicator.status.activity == activity }
}

/// Waits until `condition` holds.
func eventually(hangGuard: Duration = .seconds(600), _ condition: () throws -> Bool) async rethrows -> Bool {
    // The event, not a guessed time: see SetteeHTTPTests' `eventually` (parallel tests on a
    // two-thread cooperative pool); the guard only ends a test that would never finish.
    let deadline = ContinuousClock.now + hangGuard
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try condition()
}

/// What replication must make equal: each revision and its parent, the leaves with their deletion
/// flags, the current revision. (Which inner revisions keep a body, and whether an ancestor known
/// only from a history is flagged deleted, are each database's own.)
struct TreeShape: Equatable, CustomStringConvertible {
    var current: String
    var edges: Set<String>
    var leaves: [String: Bool]

    init(_ tree: RevisionTree) {
        current = tree.currentRevisionID
        edges = Set(tree.revisions.map { "\($0.parentRevisionID ?? "-")>\($0.revisionID)" })
        leaves = Dictionary(uniqueKeysWithValues: tree.revisions.filter(\.isLeaf).map { ($0.revisionID, $0.isDeleted) })
    }

    var description: String { "current \(current), leaves \(leaves.sorted { $0.key < $1.key }), \(edges.count) revisions: \(edges.sorted())" }

    /// What every peer shows whatever it pruned: the current revision and the leaves.
    struct Visible: Equatable {
        var current: String
        var leaves: [String: Bool]
    }

    var visible: Visible { Visible(current: current, leaves: leaves) }

    /// Each revision's parent, for the revisions that have one here.
    var parents: [String: String] {
        var out: [String: String] = [:]
        for e in edges {
            let parts = e.split(separator: ">", maxSplits: 1).map(String.init)
            if parts[0] != "-" { out[parts[1]] = parts[0] }
        }
        return out
    }

    /// A revision both trees hold with a parent, whose parents differ; nil when there is none.
    func parentClash(with other: TreeShape) -> String? {
        let mine = parents, theirs = other.parents
        for (rev, p) in mine where theirs[rev].map({ $0 != p }) == true {
            return "\(rev) has parent \(p) here and \(theirs[rev]!) there"
        }
        return nil
    }
}

/// Every document's tree shape, by ID.
func shapes(_ db: Database) throws -> [String: TreeShape] {
    var out: [String: TreeShape] = [:]
    var since: UInt64 = 0
    while case let rows = try db.changes(since: since, limit: 1000), let last = rows.last {
        for row in rows { out[row.documentID] = TreeShape(try #require(try db.revisionTree(withID: row.documentID))) }
        since = last.sequence
    }
    return out
}

/// A peer that forwards to another and counts (and can intercept) what it is asked.
final class CountingPeer: ReplicationPeer {
    let inner: any ReplicationPeer
    struct Counts: Sendable {
        var changesCalls = 0
        var changesRows = 0
        var sinceRequested: [ReplicationSequence] = []
        var revsDiffDocuments: [String] = []
        var inserted: [String] = []
        var insertCalls = 0
        var infoCalls = 0
        var blobsSaved = 0
    }
    let counts = Locked(Counts())
    /// Called inside insertRevisions, before forwarding, with the call's number (from 1).
    let onInsert = Locked<(@Sendable (Int) -> Void)?>(nil)

    init(_ inner: any ReplicationPeer) { self.inner = inner }

    var identifier: String { inner.identifier }
    func info() async throws -> PeerInfo {
        counts.withLock { $0.infoCalls += 1 }
        return try await inner.info()
    }
    func changes(_ request: ChangesRequest) async throws -> ChangesPage {
        let page = try await inner.changes(request)
        counts.withLock { $0.changesCalls += 1; $0.changesRows += page.changes.count; $0.sinceRequested.append(request.since) }
        return page
    }
    func waitForChanges(after sequence: ReplicationSequence) async throws { try await inner.waitForChanges(after: sequence) }
    func revsDiff(_ revisions: [String: [String]]) async throws -> [String: RevsDiffResult] {
        counts.withLock { $0.revsDiffDocuments += revisions.keys }
        return try await inner.revsDiff(revisions)
    }
    func revisions(_ requests: [RevisionRequest]) async throws -> [ReplicatedRevision] { try await inner.revisions(requests) }
    func missingBlobs(_ digests: [String]) async throws -> [String] { try await inner.missingBlobs(digests) }
    func blob(withDigest digest: String) async throws -> Blob? { try await inner.blob(withDigest: digest) }
    func saveBlob(_ blob: Blob) async throws {
        counts.withLock { $0.blobsSaved += 1 }
        try await inner.saveBlob(blob)
    }
    func insertRevisions(_ revisions: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome] {
        let n = counts.withLock { c in c.insertCalls += 1; return c.insertCalls }
        onInsert.value?(n)
        let outcomes = try await inner.insertRevisions(revisions)
        counts.withLock { c in
            for (r, o) in zip(revisions, outcomes) where o == .inserted { c.inserted.append(r.documentID) }
        }
        return outcomes
    }
    func localDocument(withID id: String) async throws -> [String: JSONValue]? { try await inner.localDocument(withID: id) }
    func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) async throws {
        try await inner.saveLocalDocument(properties, withID: id)
    }
}

/// Saves `properties` as the next revision of `id` (creating it if needed); returns the revision.
@discardableResult
func save(_ db: Database, _ id: String, _ properties: [String: JSONValue]) throws -> String {
    let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
    m.setData(properties)
    try db.saveDocument(m)
    return try #require(m.revisionID)
}

/// The crash kit's SplitMix64, so a failing randomized test replays from its seed.
typealias SeededGenerator = SplitMix
