import Dispatch
@_spi(Replication) import Settee
import Synchronization

/// A document's current revision before a pull batch touched it.
struct LocalHead: Sendable, Hashable {
    var revisionID: String
    var isDeleted: Bool
}

/// Detects and resolves the conflicts a pull creates in the local database (DESIGN "Semantics
/// decided" 3), and remembers those a resolver failed on so the next run tries them again.
///
/// A pulled document is in conflict when the remote's current revision is now a leaf of the local
/// tree and either another live leaf exists beside it (both sides edited), or the local current
/// revision from before the batch is still a leaf and exactly one of the two is deleted (a deletion
/// against an edit: "deletes always win" by default).
final class ConflictPass: Sendable {
    private let replicator: Replicator
    private let database: Database
    /// `_local/settee-conflicts-<pull replication ID>`: `{"pending": {docID: {"local", "remote"}}}`.
    private let pendingID: String
    private let pending: Mutex<[String: (local: String, remote: String)]>
    /// Where the resolver runs. It is the app's code and may block (a slow merge, a wait on the
    /// app's own state): on Swift's cooperative pool, whose few threads the whole app shares, a
    /// blocked resolver would hold up every other task, the replicator's own included.
    private let resolving = DispatchQueue(label: "settee.replicator.conflict-resolver")

    init(replicator: Replicator, replicationID: String) throws {
        self.replicator = replicator
        self.database = replicator.config.database
        self.pendingID = "_local/settee-conflicts-" + replicationID
        var loaded: [String: (local: String, remote: String)] = [:]
        if case .object(let o)? = try database.localDocument(withID: pendingID)?["pending"] {
            for (id, v) in o {
                if let l = v.objectValue?["local"]?.stringValue, let r = v.objectValue?["remote"]?.stringValue { loaded[id] = (l, r) }
            }
        }
        pending = Mutex(loaded)
    }

    /// Tries again every conflict an earlier run's resolver failed on.
    func retryPending() async throws {
        let todo = pending.withLock { $0 }
        guard !todo.isEmpty else { return }
        var documents: [ReplicatedDocument] = []
        for (id, p) in todo.sorted(by: { $0.key < $1.key }) {
            if let failure = await resolveIfConflicted(id: id, remote: p.remote, before: LocalHead(revisionID: p.local, isDeleted: false)) {
                documents.append(failure)
            } else if let tree = try await database.revisionTree(withID: id) {
                let deleted = tree.revisions.first { $0.revisionID == tree.currentRevisionID }?.isDeleted ?? false
                documents.append(ReplicatedDocument(id: id, revisionID: tree.currentRevisionID, flags: deleted ? .deleted : [], error: nil))
            }
        }
        replicator.publish(DocumentReplication(direction: .pull, documents: documents))
    }

    /// The current revision of each document in a batch, read just before it is inserted.
    func heads(of revisions: [ReplicatedRevision]) throws -> [String: LocalHead] {
        var out: [String: LocalHead] = [:]
        for r in revisions where out[r.documentID] == nil {
            guard let tree = try database.revisionTree(withID: r.documentID) else { continue }
            let deleted = tree.revisions.first { $0.revisionID == tree.currentRevisionID }?.isDeleted ?? false
            out[r.documentID] = LocalHead(revisionID: tree.currentRevisionID, isDeleted: deleted)
        }
        return out
    }

    /// Resolves document `id` if the pull left it in conflict with the remote revision `remote`;
    /// returns the document's event entry when resolving failed (nil when there was nothing to do
    /// or it worked).
    ///
    /// `inserted` holds the revisions of the document this pull batch inserted. One of them can be
    /// the remote's deletion while the remote's current revision is our own edit: the push running
    /// beside this pull gave the remote that edit first, and a live leaf beats a deleted one in
    /// the remote's tree. A deleted leaf inserted here that branches off the history of our live
    /// current revision is then that deletion against our edit, as if it had arrived first. (A
    /// resolution's tombstone branches off a losing leaf instead, never off the winner's history.)
    func resolveIfConflicted(id: String, remote announced: String, before: LocalHead?, inserted: Set<String> = []) async -> ReplicatedDocument? {
        let config = replicator.config
        var remote = announced
        // The local side, once known: what a failure records for the next run.
        var local = before?.revisionID ?? ""
        do {
            guard let tree = try await database.revisionTree(withID: id) else { await forget(id); return nil }
            var deleted: [String: Bool] = [:]
            for r in tree.revisions where r.isLeaf { deleted[r.revisionID] = r.isDeleted }
            guard let announcedDeleted = deleted[remote] else { await forget(id); return nil }
            var remoteDeleted = announcedDeleted
            var localID: String?
            if !remoteDeleted, let other = tree.leafRevisionIDs.first(where: { $0 != remote && deleted[$0] == false }) {
                // Both sides edited: prefer the revision that was current here.
                if let b = before?.revisionID, b != remote, deleted[b] == false { localID = b } else { localID = other }
            } else if let b = before?.revisionID, b != remote, let bDeleted = deleted[b], bDeleted != remoteDeleted {
                localID = b
            } else if !remoteDeleted, let b = before?.revisionID, b == remote, deleted[b] == false,
                      let deletion = Self.deletionBeside(b, in: tree, among: inserted, deleted: deleted) {
                localID = b
                remote = deletion
                remoteDeleted = true
            }
            guard let localID else { await forget(id); return nil }
            local = localID
            let localDeleted = deleted[localID] ?? false
            let localDocument = localDeleted ? nil : try await database.document(withID: id, revisionID: localID)
            let remoteDocument = remoteDeleted ? nil : try await database.document(withID: id, revisionID: remote)
            let conflict = Conflict(
                documentID: id,
                localDocument: localDocument,
                remoteDocument: remoteDocument,
                localRevisionID: localID, remoteRevisionID: remote)
            let result: Document?
            do {
                result = try await resolve(conflict)
            } catch {
                config.log(.warning, "the conflict resolver threw for document \(id): \(error); the conflict stays until the replicator starts again")
                await remember(id, local: localID, remote: remote)
                return ReplicatedDocument(id: id, revisionID: remote, flags: remoteDeleted ? .deleted : [],
                                          error: ReplicatorError(.conflictResolverFailed, "the conflict resolver threw: \(error)", documentID: id))
            }
            try await write(result, for: conflict, localDeleted: localDeleted, remoteDeleted: remoteDeleted)
            await forget(id)
            return nil
        } catch let e as ReplicatorError {
            await remember(id, local: local, remote: remote)
            return ReplicatedDocument(id: id, revisionID: remote, flags: [], error: e)
        } catch {
            config.log(.warning, "resolving the conflict of document \(id) failed: \(error)")
            await remember(id, local: local, remote: remote)
            return ReplicatedDocument(id: id, revisionID: remote, flags: [],
                                      error: ReplicatorError(.resolutionFailed, "writing the resolution failed", documentID: id,
                                                             underlying: error as? SetteeError))
        }
    }

    /// The configured resolver's answer, computed on ``resolving``.
    private func resolve(_ conflict: Conflict) async throws -> Document? {
        let config = replicator.config
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<Document?, any Error>) in
            resolving.async(execute: { @Sendable in
                do {
                    c.resume(returning: try (config.conflictResolver ?? DefaultConflictResolver()).resolve(conflict: conflict))
                } catch {
                    c.resume(throwing: error)
                }
            })
        }
    }

    /// A deleted leaf among `inserted` whose parent is `head` or one of its ancestors, except
    /// `head` itself (deleting `head` would have made it no leaf).
    private static func deletionBeside(_ head: String, in tree: RevisionTree, among inserted: Set<String>,
                                       deleted: [String: Bool]) -> String? {
        guard !inserted.isEmpty else { return nil }
        let parents = Dictionary(tree.revisions.map { ($0.revisionID, $0.parentRevisionID) }, uniquingKeysWith: { a, _ in a })
        var history: Set<String> = []
        var next: String? = head
        while let r = next, history.insert(r).inserted { next = parents[r] ?? nil }
        return inserted.sorted().first { r in
            deleted[r] == true && r != head && (parents[r] ?? nil).map(history.contains) == true
        }
    }

    /// Writes a resolver's result as revisions: the winning branch gets the result, the other live
    /// branches tombstones (`Database.resolveConflict(withID:winningRevisionID:mergedProperties:)`);
    /// nil tombstones every live branch.
    private func write(_ result: Document?, for conflict: Conflict, localDeleted: Bool, remoteDeleted: Bool) async throws {
        let id = conflict.documentID
        let config = replicator.config
        guard let result else { return try await deleteEveryBranch(id) }
        if result.isFromAnotherDatabase(than: database) {
            config.log(.error, "the conflict resolver returned a document from another database for document \(id); the conflict stays")
            throw ReplicatorError(.resolverReturnedForeignDocument,
                                  "the conflict resolver returned a document from another database", documentID: id)
        }
        var sameID = true
        if result.id != id {
            config.log(.warning, "the conflict resolver returned document '\(result.id)' for a conflict of '\(id)'; its properties are saved as '\(id)'")
            sameID = false
        }
        if sameID, !result.isDeleted {
            // The local or remote revision itself, unchanged: its branch wins as it is.
            for (side, revisionID, deleted) in [(conflict.remoteDocument, conflict.remoteRevisionID, remoteDeleted),
                                                (conflict.localDocument, conflict.localRevisionID, localDeleted)]
            where !deleted && result.revisionID == revisionID && side?.toDictionary() == result.toDictionary() {
                try await database.resolveConflict(withID: id, winningRevisionID: revisionID)
                return
            }
        }
        if result.isDeleted { return try await deleteEveryBranch(id) }
        // A merge goes on the branch the default rule picks, so peers merging alike write alike.
        let branch: String
        switch (localDeleted, remoteDeleted) {
        case (false, false):
            branch = try RevisionRanking.ranksAbove(conflict.remoteRevisionID, conflict.localRevisionID)
                ? conflict.remoteRevisionID : conflict.localRevisionID
        case (true, false): branch = conflict.remoteRevisionID
        case (false, true): branch = conflict.localRevisionID
        case (true, true): return
        }
        try await database.resolveConflict(withID: id, winningRevisionID: branch,
                                           mergedProperties: database.propertiesForResolution(result))
    }

    /// A tombstone on every live leaf, in one transaction.
    private func deleteEveryBranch(_ id: String) async throws {
        try await database.inBatch { database in
            for leaf in try database.conflictingRevisions(withID: id) {
                _ = try database.deleteDocument(leaf, concurrencyControl: .lastWriteWins)
            }
        }
    }

    private func remember(_ id: String, local: String, remote: String) async {
        let snapshot = pending.withLock { p -> [String: (local: String, remote: String)]? in
            if let old = p[id], old == (local, remote) { return nil }
            p[id] = (local, remote)
            return p
        }
        if let snapshot { await save(snapshot) }
    }

    private func forget(_ id: String) async {
        let snapshot = pending.withLock { p -> [String: (local: String, remote: String)]? in
            p.removeValue(forKey: id) == nil ? nil : p
        }
        if let snapshot { await save(snapshot) }
    }

    private func save(_ pending: [String: (local: String, remote: String)]) async {
        var o: [String: JSONValue] = [:]
        for (id, p) in pending { o[id] = .object(["local": .string(p.local), "remote": .string(p.remote)]) }
        do {
            try await database.saveLocalDocument(["pending": .object(o)], withID: pendingID)
        } catch {
            replicator.config.log(.warning, "could not record the conflicts left to resolve: \(error)")
        }
    }
}
