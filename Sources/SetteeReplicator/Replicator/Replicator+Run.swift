import Foundation
@_spi(Replication) import Settee
import Synchronization

/// A batch read from the source and ready to insert: the rows it covers and the revisions the
/// target lacks (already filtered, their blobs already sent).
struct PreparedBatch: Sendable {
    var rows: [PeerChange]
    var revisions: [ReplicatedRevision]
    var lastSequence: ReplicationSequence
    /// Rows of a pull whose document the peer's user may no longer read: purged locally.
    var removals: [PeerChange] = []
    /// Revisions the source sent in a form that cannot be stored: each its document's failure.
    var fetchFailures: [FetchFailure] = []
    var missingChecked = 0
    var missingFound = 0
}

/// What inserting a batch did.
struct CommittedBatch: Sendable {
    var lastSequence: ReplicationSequence
    var rows = 0
    var read = 0
    var written = 0
    var failures = 0
}

/// Fired once; waiters resume then (or at once if already fired), or when their task is cancelled.
final class OneShotSignal: Sendable {
    private let state = Mutex<(fired: Bool, waiters: [UInt64: CheckedContinuation<Void, Never>], next: UInt64)>((false, [:], 0))

    func fire() {
        let waiters = state.withLock { s in
            s.fired = true
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume() }
    }

    func wait() async {
        let id = state.withLock { s in s.next += 1; return s.next }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.fired || Task.isCancelled { return true }
                    s.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let w = state.withLock { $0.waiters.removeValue(forKey: id) }
            w?.resume()
        }
    }
}

extension Replicator {
    /// One run: attempts until one ends (caught up, stopped, or failed for good). An attempt that
    /// finds the peer unreachable sends the replicator offline and is retried from the
    /// checkpoints after a wait that doubles from one second up to the configured maximum.
    func run(number: UInt64, reset: Bool) async {
        var failure: ReplicatorError?
        var attempt = 0
        var fresh = reset
        let limit = config.maxAttempts > 0 ? config.maxAttempts : (config.continuous ? Int.max : 10)
        while true {
            attempt += 1
            update { $0.reachedPeer = false }
            do {
                try await runAttempt(reset: fresh)
                failure = nil
                break
            } catch is CancellationError {
                break
            } catch {
                let e = ReplicatorError.wrapping(error)
                failure = e
                // An attempt that got through to the peer before failing starts the count again.
                if state.withLock({ $0.reachedPeer }) { attempt = 1 }
                guard e.isTransient, attempt < limit, !isStopRequested else { break }
                fresh = false
                let wait = min(config.maxAttemptWaitTime, .seconds(1) * (1 << min(attempt - 1, 20)))
                config.log(.warning, "replication of \(config.database.name) with \(remote.identifier): \(e); retrying in \(wait)")
                update { s in
                    s.status.error = e
                    for d in s.directions.keys { s.directions[d] = .offline }
                    if s.directions.isEmpty { s.directions[.pull] = .offline }
                }
                do { try await Task.sleep(for: wait) } catch { break }
                if isStopRequested { break }
            }
        }
        if let failure, !(failure.isTransient && isStopRequested) {
            config.log(.error, "replication of \(config.database.name) with \(remote.identifier) failed: \(failure)")
        }
        finish(number: number, error: isStopRequested && failure?.isTransient == true ? nil : failure)
    }

    /// One attempt: both directions at once, until caught up (one-shot) or stopped.
    private func runAttempt(reset: Bool) async throws {
        let kind = config.replicatorType
        var resolver: ConflictPass?
        if kind.pulls {
            let pass = try ConflictPass(replicator: self, replicationID: replicationID(.pull))
            // Conflicts a resolver failed on in an earlier run are tried again first (seed 000).
            try await pass.retryPending()
            resolver = pass
        }
        // One-shot push-and-pull: the push makes a last pass once the pull has caught up (to send
        // what the pull's resolutions wrote), and the pull a last pass once the push is done (to
        // see its own echo in the target's feed), so both checkpoints end at the end of both feeds
        // and the next run with nothing new is the fast no-op. A continuous run hears of both as
        // changes anyway.
        let staged = kind == .pushAndPull && !config.continuous
        let pullCaughtUp = OneShotSignal(), pushDone = OneShotSignal()
        let conflicts = resolver
        try await withThrowingTaskGroup(of: Void.self) { group in
            if kind.pulls {
                group.addTask {
                    defer { pullCaughtUp.fire() }
                    try await self.runDirection(.pull, reset: reset, conflicts: conflicts,
                                                caughtUp: pullCaughtUp, after: staged ? pushDone : nil)
                }
            }
            if kind.pushes {
                group.addTask {
                    defer { pushDone.fire() }
                    try await self.runDirection(.push, reset: reset, conflicts: nil,
                                                caughtUp: nil, after: staged ? pullCaughtUp : nil)
                }
            }
            try await group.waitForAll()
        }
    }

    /// One direction: checkpoints, then batches until caught up; a continuous one then idles
    /// until the source has changes. `caughtUp` is fired after the first pass; `after`: one more
    /// pass once it fires.
    func runDirection(_ direction: ReplicationDirection, reset: Bool, conflicts: ConflictPass?,
                      caughtUp passed: OneShotSignal?, after: OneShotSignal?) async throws {
        let push = direction == .push
        let source: any ReplicationPeer = push ? local : remote
        let target: any ReplicationPeer = push ? remote : local
        update { $0.directions[direction] = .connecting }
        var checkpoint = Checkpointer(replicationID: replicationID(direction), source: source, target: target)
        var since = try await checkpoint.load(reset: reset)
        let info = try await source.info()
        // A push checks that the target exists before it reads any checkpoint there (CouchDB's
        // replicator opens both sides): a missing database stops the run with that error.
        if push { _ = try await target.info() }
        // The error that sent the run offline stays in the status until the peer answers again, so
        // no one reads an offline or connecting status without its cause.
        update { $0.reachedPeer = true; $0.status.error = nil }
        var stats = SessionStats()
        var pending = after
        // The fast no-op: the checkpoint is at the source's last sequence, nothing to scan.
        var caughtUp = since == info.lastSequence
        update { $0.directions[direction] = .busy }
        defer { if push { update { $0.pushedThrough = since.integerValue } } }
        while !isStopRequested {
            if !caughtUp {
                since = try await pipeline(direction, source: source, target: target, since: since,
                                           checkpoint: &checkpoint, stats: &stats, conflicts: conflicts)
                if isStopRequested { break }
            }
            caughtUp = false
            passed?.fire()
            if let signal = pending {
                update { $0.directions[direction] = .idle }
                await signal.wait()
                pending = nil
                update { $0.directions[direction] = .busy }
                // Only a new scan if the source changed meanwhile.
                caughtUp = try await source.info().lastSequence == since
                continue
            }
            guard config.continuous else { break }
            try await saveCheckpoint(&checkpoint, since, stats)
            update { $0.directions[direction] = .idle }
            do {
                try await source.waitForChanges(after: since)
            } catch is CancellationError {
                break
            }
            update { $0.directions[direction] = .busy }
        }
        try await saveCheckpoint(&checkpoint, since, stats)
        update { $0.directions[direction] = .stopped }
    }

    /// Saves a checkpoint outside the run task's cancellation (a stop must still record it).
    private func saveCheckpoint(_ checkpoint: inout Checkpointer, _ sequence: ReplicationSequence,
                                _ stats: SessionStats) async throws {
        let copy = checkpoint
        checkpoint = try await Task {
            var c = copy
            try await c.save(sequence, stats: stats)
            return c
        }.value
    }

    /// Batches until the source's feed is exhausted: batch n + 1 is read, diffed, fetched and its
    /// blobs sent while batch n is inserted. Returns the last sequence inserted.
    private func pipeline(_ direction: ReplicationDirection, source: any ReplicationPeer, target: any ReplicationPeer,
                          since start: ReplicationSequence, checkpoint: inout Checkpointer, stats: inout SessionStats,
                          conflicts: ConflictPass?) async throws -> ReplicationSequence {
        var since = start
        var committed = start
        var inFlight: Task<CommittedBatch, any Error>?
        var lastCheckpoint = ContinuousClock.now
        func absorb(_ done: CommittedBatch) async throws {
            committed = done.lastSequence
            stats.docsRead += Int64(done.read)
            stats.docsWritten += Int64(done.written)
            stats.docWriteFailures += Int64(done.failures)
            update {
                $0.status.progress.completed += UInt64(done.rows)
                if direction == .push { $0.pushedThrough = committed.integerValue }
            }
            if ContinuousClock.now - lastCheckpoint > .milliseconds(500) {
                try await saveCheckpoint(&checkpoint, committed, stats)
                lastCheckpoint = .now
            }
        }
        do {
            while !isStopRequested {
                var request = ChangesRequest(since: since, limit: max(1, config.batchSize),
                                             documentIDs: config.documentIDs, channels: config.channels)
                if direction == .pull {
                    request.filterName = config.filterName
                    request.filterParameters = config.filterParameters
                }
                let page = try await source.changes(request)
                update { $0.status.progress.total += UInt64(page.changes.count) }
                let batch = try await prepare(direction, page: page, source: source, target: target)
                stats.missingChecked += Int64(batch.missingChecked)
                stats.missingFound += Int64(batch.missingFound)
                if let f = inFlight {
                    inFlight = nil
                    try await absorb(try await f.value)
                }
                // Stopping drops the batch read ahead; the one in flight was inserted.
                if isStopRequested { break }
                if page.changes.isEmpty && page.lastSequence == since { break }
                inFlight = Task { [self] in try await self.commit(direction, batch, target: target, conflicts: conflicts) }
                since = page.lastSequence
                if page.reachedEnd { break }
            }
        } catch {
            // The batch in flight still counts (and its conflicts are resolved) before the error.
            if let f = inFlight, let done = try? await f.value { try? await absorb(done) }
            try? await saveCheckpoint(&checkpoint, committed, stats)
            throw error
        }
        if let f = inFlight { try await absorb(try await f.value) }
        return committed
    }

    /// Reads what the target lacks of a page: push filter, `_revs_diff`, the revisions with their
    /// history, pull filter, then the blobs they reference that the target does not have.
    private func prepare(_ direction: ReplicationDirection, page: ChangesPage, source: any ReplicationPeer,
                         target: any ReplicationPeer) async throws -> PreparedBatch {
        var batch = PreparedBatch(rows: page.changes, revisions: [], lastSequence: page.lastSequence)
        if direction == .push, config.pushFilter != nil {
            batch.rows = try batch.rows.filter { row in
                try isPushable(id: row.documentID, revisionID: row.revisionID, deleted: row.isDeleted)
            }
        }
        if direction == .pull {
            batch.removals = batch.rows.filter(\.isRemoved)
            if !batch.removals.isEmpty { batch.rows.removeAll(where: \.isRemoved) }
        }
        guard !batch.rows.isEmpty else { return batch }
        var wanted: [String: [String]] = [:]
        wanted.reserveCapacity(batch.rows.count)
        for row in batch.rows { wanted[row.documentID] = row.leafRevisionIDs }
        batch.missingChecked = wanted.count
        let diff = try await target.revsDiff(wanted)
        guard !diff.isEmpty else { return batch }
        var requests: [RevisionRequest] = []
        requests.reserveCapacity(diff.count)
        for row in batch.rows {
            guard let d = diff[row.documentID] else { continue }
            batch.missingFound += d.missing.count
            requests.append(RevisionRequest(documentID: row.documentID, revisionIDs: d.missing, knownAncestors: d.possibleAncestors))
        }
        let fetched = try await source.fetch(requests)
        batch.fetchFailures = fetched.failures
        var revisions = fetched.revisions
        if direction == .pull, let filter = config.pullFilter {
            revisions = revisions.filter { r in
                // A body that does not parse goes on to the insertion, which rejects it and
                // reports it for the document; the filter sees only what parses.
                guard let properties = try? r.properties else { return true }
                return filter(Document(unsavedID: r.documentID, revisionID: r.revisionID, isDeleted: r.isDeleted,
                                       properties: properties), r.isDeleted ? .deleted : [])
            }
        }
        var digests = Set<String>()
        for r in revisions { digests.formUnion(r.blobDigests) }
        if !digests.isEmpty {
            for digest in try await target.missingBlobs(digests.sorted()) {
                // A blob the source lacks leaves the revision to be rejected (not found), reported per document.
                if let blob = try await source.blob(withDigest: digest) { try await target.saveBlob(blob) }
            }
        }
        batch.revisions = revisions
        return batch
    }

    /// Inserts a batch, reports its documents, and for a pull resolves the conflicts it made.
    private func commit(_ direction: ReplicationDirection, _ batch: PreparedBatch, target: any ReplicationPeer,
                        conflicts: ConflictPass?) async throws -> CommittedBatch {
        var done = CommittedBatch(lastSequence: batch.lastSequence, rows: batch.rows.count + batch.removals.count,
                                  read: batch.revisions.count)
        let purged = try await purgeRemoved(batch.removals)
        if !purged.isEmpty { publish(DocumentReplication(direction: .pull, documents: purged)) }
        if !batch.fetchFailures.isEmpty {
            done.failures += batch.fetchFailures.count
            publish(DocumentReplication(direction: direction, documents: batch.fetchFailures.map {
                ReplicatedDocument(id: $0.documentID, revisionID: $0.revisionID, flags: [], error: $0.error)
            }))
        }
        guard !batch.revisions.isEmpty else { return done }
        let heads = try conflicts?.heads(of: batch.revisions)
        let outcomes = try await target.insertRevisions(batch.revisions)
        var documents: [String: ReplicatedDocument] = [:]
        var order: [String] = []
        var changed: [String] = []
        var inserted: [String: Set<String>] = [:]
        for (r, outcome) in zip(batch.revisions, outcomes) {
            var entry = ReplicatedDocument(id: r.documentID, revisionID: r.revisionID, flags: r.isDeleted ? .deleted : [], error: nil)
            switch outcome {
            case .inserted:
                done.written += 1
                changed.append(r.documentID)
                inserted[r.documentID, default: []].insert(r.revisionID)
            case .alreadyPresent:
                continue
            case .rejected(let e):
                done.failures += 1
                entry.error = ReplicatorError(.rejected, e.message, documentID: r.documentID, underlying: e)
            }
            if documents[r.documentID] == nil { order.append(r.documentID) }
            // One entry per document: a failure, else the newest revision.
            if let old = documents[r.documentID], old.error != nil, entry.error == nil { continue }
            documents[r.documentID] = entry
        }
        if let conflicts, let heads {
            let winners = Dictionary(batch.rows.map { ($0.documentID, $0.revisionID) }, uniquingKeysWith: { _, b in b })
            for id in Set(changed).sorted() {
                guard let remote = winners[id] else { continue }
                if let failure = await conflicts.resolveIfConflicted(id: id, remote: remote, before: heads[id], inserted: inserted[id] ?? []) {
                    if documents[id] == nil { order.append(id) }
                    documents[id] = failure
                }
            }
        }
        publish(DocumentReplication(direction: direction, documents: order.compactMap { documents[$0] }))
        return done
    }

    /// Purges, in the local database, the documents a pull's peer says its user may no longer
    /// read (Couchbase Lite 2.x's answer to Sync Gateway's channel removals); reports each one it
    /// held. A document the database does not have is skipped.
    private func purgeRemoved(_ rows: [PeerChange]) async throws -> [ReplicatedDocument] {
        guard !rows.isEmpty else { return [] }
        let ids = rows.map(\.documentID)
        let revisions = Dictionary(rows.map { ($0.documentID, $0) }, uniquingKeysWith: { _, b in b })
        let db = config.database
        let done = Mutex<[String]>([])
        try await db.inBatch { db in
            for id in ids where try db.revisionTree(withID: id) != nil {
                try db.purgeDocument(withID: id)
                done.withLock { $0.append(id) }
            }
        }
        return done.withLock { $0 }.map { id in
            let row = revisions[id]
            var flags: DocumentFlags = .accessRemoved
            if row?.isDeleted == true { flags.insert(.deleted) }
            return ReplicatedDocument(id: id, revisionID: row?.revisionID ?? "", flags: flags, error: nil)
        }
    }
}
