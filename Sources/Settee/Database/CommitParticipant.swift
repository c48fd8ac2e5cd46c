internal import SetteeStorage

/// What one commit does to one document, as the records kept beside documents see it: what
/// it removes (the old current revision) and what it adds (the new one).
///
/// Participants read it in order and may fill in what those after them read: routing sets
/// ``channels`` (indexes kept by channel need them) and ``routing`` (the document's new
/// sequence entry holds it).
struct CommittedDocument {
    let id: String
    /// `id`'s UTF-8, the document's key in the by-ID tree.
    let key: [UInt8]
    /// The metadata before the commit; nil for a new document.
    let old: DocMeta?
    /// The metadata after the commit; nil when the document is purged.
    let new: DocMeta?
    /// The tree after the commit, and its winner's index; nil when purged.
    let tree: RevTree?
    let winner: Int
    /// The sequence the commit gives the document (or its purge).
    let sequence: UInt64
    /// The new current revision's properties, when a local save has them at hand: they are
    /// not parsed again from the stored body.
    let winnerProperties: [String: JSONValue]?
    /// The document's channels before and after the commit (set by routing).
    var channels: (old: Set<String>, new: Set<String>) = ([], [])
    /// The routing the document's sequence entry holds (set by routing).
    var routing: RevisionRouting?

    /// Whether the document was live (not deleted) before the commit.
    var wasLive: Bool { old.map { !$0.flags.contains(.deleted) } ?? false }
}

/// A part of the database that keeps records beside the documents (channels and grants,
/// indexes, expiry) and takes part in every write transaction through this one protocol; the
/// document core knows none of them. One object per transaction (``CommitParticipants``), so
/// that what it gathers while the transaction runs is its own.
///
/// Called with the write lock held, on the writer's thread.
protocol CommitParticipant: AnyObject {
    /// Brings the participant's records in step with one document's change, in the
    /// transaction that makes it, before the document's sequence entry is written.
    func documentChanged(_ change: inout CommittedDocument, in context: WriteContext) throws
    /// Writes what the participant gathered over the whole transaction, just before it commits.
    func willCommit(_ context: WriteContext) throws
    /// After the transaction committed, before listeners hear of it.
    func didCommit(_ context: WriteContext)
}

/// The long-lived parts of an open collection that keep records beside its documents, shared by
/// every `Database` object open on the same files (the expiry sweeper is the whole database's).
struct DatabaseParts: Sendable {
    let routing: ChannelRouting
    let queries: QueryEngineState
    let expiry: ExpiryKeeper

    /// Reads what the parts keep in memory of the files (the index catalog), as the database
    /// opens; a failure fails the open.
    func opened(_ core: DatabaseCore) throws {
        try queries.opened(core)
    }

    /// Once the database is open: brings indexes built with another collator or analyzer, or
    /// whose build was interrupted, to a usable state (failures are logged, never thrown).
    func ready(_ core: DatabaseCore) {
        core.finishIndexes()
    }

    /// Each part's share of one transaction.
    func beginTransaction(_ core: DatabaseCore) -> CommitParticipants {
        CommitParticipants(routing: RoutingCommit(), indexes: IndexCommit(core: core), expiry: ExpiryCommit())
    }
}

/// The participants of one write transaction, in the order they hear of each change: routing
/// first (the indexes kept by channel read the channels it leaves a document in), then
/// indexes, then expiry.
struct CommitParticipants {
    let routing: RoutingCommit
    let indexes: IndexCommit
    let expiry: ExpiryCommit
    let all: [any CommitParticipant]

    init(routing: RoutingCommit, indexes: IndexCommit, expiry: ExpiryCommit) {
        self.routing = routing
        self.indexes = indexes
        self.expiry = expiry
        all = [routing, indexes, expiry]
    }
}
