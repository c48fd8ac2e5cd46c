@_spi(Replication) import Settee

/// What a replicator is doing (seed 003's stopped / offline / idle / active, with Couchbase Lite
/// 2's connecting and busy).
///
/// ```swift
/// if replicator.status.activity == .idle { print("caught up") }
/// ```
///
/// - Note: A value type; safe to share between threads.
public enum ReplicatorActivity: String, Sendable, CaseIterable {
    /// Not running: never started, finished (one-shot), stopped, or failed (see the status's error).
    case stopped
    /// The peer cannot be reached; a continuous replicator retries.
    case offline
    /// Reading checkpoints and the peers' information.
    case connecting
    /// Continuous and caught up: waiting for changes.
    case idle
    /// Copying changes.
    case busy
}

/// How far a replicator has got: changes handled out of changes seen so far in this run. The total
/// grows as more of the feed is read, so the fraction can move back (seed 003: "might jump around").
///
/// ```swift
/// let p = replicator.status.progress
/// print("\(p.completed) / \(p.total)")
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ReplicatorProgress: Sendable, Hashable {
    /// Changes handled.
    ///
    /// ```swift
    /// print(progress.completed)
    /// ```
    public var completed: UInt64 = 0
    /// Changes seen.
    ///
    /// ```swift
    /// print(progress.total)
    /// ```
    public var total: UInt64 = 0
}

/// A replicator's activity, progress and last error.
///
/// ```swift
/// let token = replicator.addChangeListener { status in
///     if let error = status.error { print("replication failed:", error) }
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ReplicatorStatus: Sendable, Equatable {
    /// What it is doing.
    ///
    /// ```swift
    /// print(status.activity)
    /// ```
    public var activity: ReplicatorActivity
    /// How far it has got.
    ///
    /// ```swift
    /// print(status.progress.completed)
    /// ```
    public var progress: ReplicatorProgress
    /// The error that stopped it (or sent it offline), if any; nil after a clean run.
    ///
    /// ```swift
    /// if let e = status.error { print(e.message) }
    /// ```
    public var error: ReplicatorError?
}

/// Which way a document went.
///
/// ```swift
/// if replication.direction == .pull { refresh(replication.documents.map(\.id)) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public enum ReplicationDirection: String, Sendable, CaseIterable {
    /// From the local database to the target.
    case push
    /// From the target into the local database.
    case pull
}

/// One document a replicator pushed or pulled, or failed to (Couchbase Lite's
/// `ReplicatedDocument`).
///
/// ```swift
/// for doc in replication.documents where doc.flags.contains(.deleted) { print(doc.id, "deleted") }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ReplicatedDocument: Sendable, Equatable {
    /// The document ID.
    ///
    /// ```swift
    /// print(doc.id)
    /// ```
    public var id: String
    /// The revision replicated (for a conflict, the remote revision it was about).
    ///
    /// ```swift
    /// print(doc.revisionID)
    /// ```
    public var revisionID: String
    /// Flags of that revision (deleted).
    ///
    /// ```swift
    /// if doc.flags.contains(.deleted) { … }
    /// ```
    public var flags: DocumentFlags
    /// Why it failed: a rejection by the receiving side's validation, a conflict resolver that
    /// threw or returned another database's document; nil on success.
    ///
    /// ```swift
    /// if let e = doc.error { print(e.code, e.message) }
    /// ```
    public var error: ReplicatorError?
    /// The scope of the document's collection (Couchbase Lite 3): `_default` unless the
    /// replicator replicates named collections.
    ///
    /// ```swift
    /// print("\(doc.scope).\(doc.collection)/\(doc.id)")
    /// ```
    public var scope: String = Scope.defaultScopeName
    /// The document's collection (Couchbase Lite 3).
    ///
    /// ```swift
    /// if doc.collection == "tasks" { refresh(doc.id) }
    /// ```
    public var collection: String = Collection.defaultCollectionName
}

/// Documents a replicator pushed or pulled in one batch (Couchbase Lite's `DocumentReplication`).
///
/// ```swift
/// replicator.addDocumentReplicationListener { replication in
///     print(replication.direction, replication.documents.count)
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DocumentReplication: Sendable, Equatable {
    /// Push or pull.
    ///
    /// ```swift
    /// print(replication.direction)
    /// ```
    public var direction: ReplicationDirection
    /// The documents.
    ///
    /// ```swift
    /// for doc in replication.documents { print(doc.id) }
    /// ```
    public var documents: [ReplicatedDocument]
    /// Whether they were pushed.
    ///
    /// ```swift
    /// if replication.isPush { … }
    /// ```
    public var isPush: Bool { direction == .push }
}
