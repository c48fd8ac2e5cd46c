import Foundation
import SetteeCrashKit
import Synchronization
import Testing
@_spi(Replication) @testable import Settee

// Shared helpers for the document-layer tests (TemporaryDirectory lives in DocumentBasicsTests.swift).

/// Opens a database in `dir`; `fullSync` off by default so tests do not wait on `fdatasync`.
func openDatabase(_ dir: TemporaryDirectory, _ name: String = "db", fullSync: Bool = false,
                  maxRevTreeDepth: Int? = nil) throws -> Database {
    var config = DatabaseConfiguration(directory: dir.path)
    config.fullSync = fullSync
    if let maxRevTreeDepth { config.maxRevTreeDepth = maxRevTreeDepth }
    return try Database(name: name, config: config)
}

/// Saves document `id` once per value of its property `v`, each revision on the previous one;
/// returns the revision IDs in order.
func saveRevisions(_ db: Database, id: String, values: [Int]) throws -> [String] {
    let m = MutableDocument(id: id)
    var revisions: [String] = []
    for v in values {
        m.setInt(v, forKey: "v")
        try db.saveDocument(m)
        revisions.append(try #require(m.revisionID))
    }
    return revisions
}

/// A value shared with listeners and threads.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}

/// Waits up to `seconds` for `semaphore`; true when it was signalled.
func wait(_ semaphore: DispatchSemaphore, seconds: Double = 5) -> Bool {
    semaphore.wait(timeout: .now() + seconds) == .success
}

/// What a one-shot push from `source` to `target` does, with the replication entry points only:
/// the changes feed since 0, `revsDiff` on the target, each missing revision with its history
/// from the source, then `insertRevisions` on the target. Returns the outcomes.
@discardableResult
func replicate(from source: Database, to target: Database) throws -> [RevisionInsertOutcome] {
    let changes = try source.changes(since: 0)
    var wanted: [String: [String]] = [:]
    for c in changes { wanted[c.documentID] = c.leafRevisionIDs }
    let diff = try target.revsDiff(wanted)
    var batch: [ReplicatedRevision] = []
    for (id, result) in diff.sorted(by: { $0.key < $1.key }) {
        let leaves = try source.leafRevisions(withID: id)
        for rev in result.missing {
            if let r = leaves.first(where: { $0.revisionID == rev }) {
                batch.append(r)
            } else if let r = try source.revision(withID: id, revisionID: rev) {
                batch.append(r)
            }
        }
    }
    guard !batch.isEmpty else { return [] }
    return try target.insertRevisions(batch)
}

/// A replicated revision in one line.
func rev(_ id: String, _ revisionID: String, _ history: [String]? = nil, deleted: Bool = false,
         _ properties: [String: JSONValue] = [:]) -> ReplicatedRevision {
    ReplicatedRevision(documentID: id, revisionID: revisionID, history: history ?? [revisionID],
                       isDeleted: deleted, properties: properties)
}

/// The process's resident set size in bytes (`VmRSS` of /proc/self/status).
func residentMemoryBytes() -> UInt64 {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let digits = line.dropFirst(6).filter(\.isNumber)
        return (UInt64(String(digits)) ?? 0) * 1024
    }
    return 0
}

/// The error a throwing expression threw, as a SetteeError (nil if it did not throw one).
func setteeError(_ body: () throws -> Void) -> SetteeError? {
    do {
        try body()
        return nil
    } catch let e as SetteeError {
        return e
    } catch {
        Issue.record("expected a SetteeError, got \(error)")
        return nil
    }
}

/// The crash kit's SplitMix64, so a failing randomized test replays from its seed.
typealias SeededGenerator = SplitMix

/// Tests that must not run beside each other: they measure resident memory or build very large
/// databases. Nested suites in other files extend it.
@Suite(.serialized) enum HeavyTests {}
