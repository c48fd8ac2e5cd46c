@_spi(Replication) import Settee

/// One side of a replication, seen through the calls of the CouchDB replication protocol: database
/// information, the changes feed (`style=all_docs`), `_revs_diff`, revisions with their history
/// (`_bulk_get` / `open_revs` with `revs=true`), blobs (attachments), `_bulk_docs` with
/// `new_edits=false`, and `_local` checkpoint documents.
///
/// ``DatabaseEndpoint`` implements it over a `Database` in this process; a transport over HTTP
/// implements the same calls against a CouchDB-compatible server, and the ``Replicator`` drives
/// either without knowing which. The calls are `async` wherever a remote peer has to wait.
///
/// ```swift
/// let peer: any ReplicationPeer = DatabaseEndpoint(database: other)
/// let info = try await peer.info()
/// let page = try await peer.changes(ChangesRequest(since: .zero, limit: 100))
/// print(info.lastSequence, page.changes.map(\.documentID))
/// ```
///
/// - Note: Conforming types must be safe to call from several tasks at once (the replicator's
///   push and pull run concurrently, and a batch is fetched while the previous one is inserted).
public protocol ReplicationPeer: Sendable {
    /// A stable name of the peer for replication IDs: the same database must give the same string
    /// every time (a URL for a remote peer; `settee:<uuid>` for a local database).
    ///
    /// ```swift
    /// print(peer.identifier)   // "settee:3f1c…"
    /// ```
    var identifier: String { get }

    /// What the peer reports about itself (CouchDB's `GET /db`).
    ///
    /// ```swift
    /// let last = try await peer.info().lastSequence
    /// ```
    func info() async throws -> PeerInfo

    /// One page of the changes feed after `request.since`, one row per document with all its
    /// leaves (CouchDB's `_changes?style=all_docs&since=…&limit=…`, with its filter options).
    ///
    /// ```swift
    /// let page = try await peer.changes(ChangesRequest(since: checkpoint, limit: 500))
    /// ```
    func changes(_ request: ChangesRequest) async throws -> ChangesPage

    /// Returns once the feed may have something after `sequence` (a long poll), or throws
    /// `CancellationError` when the calling task is cancelled.
    ///
    /// ```swift
    /// try await peer.waitForChanges(after: page.lastSequence)
    /// ```
    func waitForChanges(after sequence: ReplicationSequence) async throws

    /// Which of the given revisions the peer lacks (CouchDB's `_revs_diff`); documents lacking
    /// nothing are left out.
    ///
    /// ```swift
    /// let diff = try await target.revsDiff(["doc": ["2-877"]])
    /// ```
    @_spi(Replication)
    func revsDiff(_ revisions: [String: [String]]) async throws -> [String: RevsDiffResult]

    /// The requested revisions with their bodies and histories, newest first (CouchDB's
    /// `_bulk_get?revs=true`). Revisions the peer no longer has are left out.
    ///
    /// ```swift
    /// let revs = try await source.revisions([RevisionRequest(documentID: "doc", revisionIDs: ["2-877"])])
    /// ```
    @_spi(Replication)
    func revisions(_ requests: [RevisionRequest]) async throws -> [ReplicatedRevision]

    /// As ``revisions(_:)``, and the revisions the peer sent in a form that cannot be stored
    /// (a history that does not count down, a generation past 2^53 − 1, a body nested deeper
    /// than JSON is read): each is that document's failure, reported as a refused write is, while
    /// the batch goes on. The default fetches with ``revisions(_:)`` and reports none.
    ///
    /// ```swift
    /// let fetched = try await source.fetch(requests)
    /// for f in fetched.failures { print(f.documentID, f.error) }
    /// ```
    @_spi(Replication)
    func fetch(_ requests: [RevisionRequest]) async throws -> RevisionFetch

    /// The digests among `digests` whose content the peer does not have, so only those are sent.
    ///
    /// ```swift
    /// let toSend = try await target.missingBlobs(["sha1-…"])
    /// ```
    func missingBlobs(_ digests: [String]) async throws -> [String]

    /// A blob's content by digest; nil when the peer does not have it.
    ///
    /// ```swift
    /// if let blob = try await source.blob(withDigest: d) { try await target.saveBlob(blob) }
    /// ```
    func blob(withDigest digest: String) async throws -> Blob?

    /// Stores a blob's content (before the revisions that reference it are inserted).
    ///
    /// ```swift
    /// try await target.saveBlob(blob)
    /// ```
    func saveBlob(_ blob: Blob) async throws

    /// Stores replicated revisions as they are (CouchDB's `_bulk_docs` with `new_edits=false`),
    /// reporting each one's outcome; a rejected revision does not stop the others.
    ///
    /// ```swift
    /// let outcomes = try await target.insertRevisions(fetched)
    /// ```
    @_spi(Replication)
    func insertRevisions(_ revisions: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome]

    /// A `_local` document (replication checkpoints); nil when there is none.
    ///
    /// ```swift
    /// let checkpoint = try await peer.localDocument(withID: "_local/" + replicationID)
    /// ```
    @_spi(Replication)
    func localDocument(withID id: String) async throws -> [String: JSONValue]?

    /// Creates or replaces a `_local` document.
    ///
    /// ```swift
    /// try await peer.saveLocalDocument(checkpoint, withID: "_local/" + replicationID)
    /// ```
    @_spi(Replication)
    func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) async throws

    /// The peer as a replicator with `configuration` uses it: a remote peer takes the
    /// configuration's authenticator, headers and pinned certificate; the default is the peer itself.
    ///
    /// ```swift
    /// let remote = config.target.configured(for: config)
    /// ```
    func configured(for configuration: ReplicatorConfiguration) -> any ReplicationPeer

    /// The peer that holds the collection of the same scope and name as `collection`, which a
    /// replicator of several collections replicates it with (Couchbase Lite 3 pairs
    /// collections by name): a URL's keyspace, a database's collection. The default collection
    /// is the peer itself.
    ///
    /// ```swift
    /// let tasks = try target.peer(forCollection: "tasks", scope: "store")
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` when the peer has no such collection
    ///   or cannot name one.
    func peer(forCollection name: String, scope: String) throws -> any ReplicationPeer
}

extension ReplicationPeer {
    /// ``revisions(_:)``, with no failures of its own.
    ///
    /// ```swift
    /// let fetched = try await source.fetch(requests)
    /// ```
    @_spi(Replication)
    public func fetch(_ requests: [RevisionRequest]) async throws -> RevisionFetch {
        RevisionFetch(revisions: try await revisions(requests), failures: [])
    }

    /// The peer itself: a peer in this process needs no credentials.
    ///
    /// ```swift
    /// let same = endpoint.configured(for: config)
    /// ```
    public func configured(for configuration: ReplicatorConfiguration) -> any ReplicationPeer { self }

    /// The peer itself for the default collection; another collection is refused (a peer
    /// that serves collections names them itself).
    ///
    /// ```swift
    /// let same = try endpoint.peer(forCollection: "_default", scope: "_default")
    /// ```
    public func peer(forCollection name: String, scope: String) throws -> any ReplicationPeer {
        guard name == Collection.defaultCollectionName && scope == Scope.defaultScopeName else {
            throw ReplicatorError(.invalidRequest, "\(identifier) serves no collection \(scope).\(name)")
        }
        return self
    }
}

/// A position in a peer's changes feed. Settee's sequences are integers; other servers (CouchDB
/// 2.x and later) use opaque strings, kept and sent back as they are.
///
/// ```swift
/// let since = ReplicationSequence(42)
/// let couch = ReplicationSequence(opaque: "12-g1AAAA…")
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ReplicationSequence: Sendable, Hashable, CustomStringConvertible {
    /// The sequence as JSON, as it appears in checkpoints (`source_last_seq`).
    ///
    /// ```swift
    /// checkpoint["source_last_seq"] = seq.json
    /// ```
    public let json: JSONValue

    /// The start of every feed.
    ///
    /// ```swift
    /// let page = try await peer.changes(ChangesRequest(since: .zero))
    /// ```
    public static let zero = ReplicationSequence(0)

    /// An integer sequence (Settee's).
    ///
    /// ```swift
    /// let s = ReplicationSequence(try db.lastSequence)
    /// ```
    public init(_ value: UInt64) { json = .int(Int64(clamping: value)) }

    /// An opaque sequence (CouchDB 2.x and later).
    ///
    /// ```swift
    /// let s = ReplicationSequence(opaque: "12-g1AAAA…")
    /// ```
    public init(opaque: String) { json = .string(opaque) }

    /// A sequence read back from JSON: a non-negative integer or a string; nil otherwise.
    ///
    /// ```swift
    /// let s = ReplicationSequence(json: checkpoint["source_last_seq"] ?? .null)
    /// ```
    public init?(json: JSONValue) {
        switch json {
        case .int(let n) where n >= 0: self.json = json
        case .string: self.json = json
        default: return nil
        }
    }

    /// The integer value, for Settee's sequences; nil for an opaque one.
    ///
    /// ```swift
    /// let n = seq.integerValue ?? 0
    /// ```
    public var integerValue: UInt64? {
        if case .int(let n) = json, n >= 0 { return UInt64(n) }
        return nil
    }

    /// The number or the opaque string.
    ///
    /// ```swift
    /// print(seq)   // 42
    /// ```
    public var description: String {
        switch json {
        case .int(let n): return String(n)
        case .string(let s): return s
        default: return "?"
        }
    }
}

/// What a peer reports about itself.
///
/// ```swift
/// let info = try await peer.info()
/// if info.lastSequence == checkpoint { print("nothing new") }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct PeerInfo: Sendable, Hashable {
    /// The peer's unique database identifier, when it has one.
    ///
    /// ```swift
    /// print(info.uuid ?? "-")
    /// ```
    public var uuid: String?
    /// The sequence of its latest change (CouchDB's `update_seq`).
    ///
    /// ```swift
    /// print(info.lastSequence)
    /// ```
    public var lastSequence: ReplicationSequence
    /// Live documents (CouchDB's `doc_count`).
    ///
    /// ```swift
    /// print(info.documentCount)
    /// ```
    public var documentCount: UInt64

    /// Peer information.
    ///
    /// ```swift
    /// let info = PeerInfo(uuid: db.uuid, lastSequence: ReplicationSequence(try db.lastSequence), documentCount: try db.count)
    /// ```
    public init(uuid: String?, lastSequence: ReplicationSequence, documentCount: UInt64) {
        self.uuid = uuid
        self.lastSequence = lastSequence
        self.documentCount = documentCount
    }
}

/// A request for one page of the changes feed, with the filter options a peer may support
/// (document IDs, channels, a named filter function with parameters: seed 003).
///
/// ```swift
/// var request = ChangesRequest(since: .zero, limit: 500)
/// request.filterName = "by_owner"
/// request.filterParameters = ["owner": "molly"]
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ChangesRequest: Sendable, Hashable {
    /// Rows after this sequence.
    ///
    /// ```swift
    /// request.since = checkpoint
    /// ```
    public var since: ReplicationSequence
    /// At most this many rows of the unfiltered feed are read for the page.
    ///
    /// ```swift
    /// request.limit = 1000
    /// ```
    public var limit: Int
    /// Only these documents (CouchDB's `filter=_doc_ids`); nil: all.
    ///
    /// ```swift
    /// request.documentIDs = ["profile", "settings"]
    /// ```
    public var documentIDs: [String]?
    /// Only documents in one of these channels (a `channels` property holding a string or an
    /// array of strings, as Sync Gateway routes); nil: all.
    ///
    /// ```swift
    /// request.channels = ["team-a"]
    /// ```
    public var channels: [String]?
    /// A filter function registered on the peer, by name; nil: none.
    ///
    /// ```swift
    /// request.filterName = "by_owner"
    /// ```
    public var filterName: String?
    /// Parameters given to that filter function (CouchDB's query parameters).
    ///
    /// ```swift
    /// request.filterParameters = ["owner": "molly"]
    /// ```
    public var filterParameters: [String: JSONValue]

    /// A request with no filter.
    ///
    /// ```swift
    /// let r = ChangesRequest(since: .zero, limit: 200)
    /// ```
    public init(since: ReplicationSequence, limit: Int = 500, documentIDs: [String]? = nil, channels: [String]? = nil,
                filterName: String? = nil, filterParameters: [String: JSONValue] = [:]) {
        self.since = since
        self.limit = limit
        self.documentIDs = documentIDs
        self.channels = channels
        self.filterName = filterName
        self.filterParameters = filterParameters
    }
}

/// One row of a peer's changes feed: a document's latest change and every leaf revision.
///
/// ```swift
/// for row in page.changes { print(row.sequence, row.documentID, row.leafRevisionIDs) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct PeerChange: Sendable, Hashable {
    /// The row's sequence.
    ///
    /// ```swift
    /// print(row.sequence)
    /// ```
    public var sequence: ReplicationSequence
    /// The document ID.
    ///
    /// ```swift
    /// print(row.documentID)
    /// ```
    public var documentID: String
    /// The peer's current (winning) revision of the document.
    ///
    /// ```swift
    /// print(row.revisionID)
    /// ```
    public var revisionID: String
    /// Whether that revision is a tombstone.
    ///
    /// ```swift
    /// if row.isDeleted { … }
    /// ```
    public var isDeleted: Bool
    /// Every leaf, the current one first (`style=all_docs`).
    ///
    /// ```swift
    /// let wanted = [row.documentID: row.leafRevisionIDs]
    /// ```
    public var leafRevisionIDs: [String]
    /// Whether the row says the peer's user may no longer read the document (Sync Gateway's
    /// `"removed": [channels]` for a document outside every channel the user reads): a pull
    /// purges it locally instead of fetching it.
    ///
    /// ```swift
    /// if row.isRemoved { purge(row.documentID) }
    /// ```
    public var isRemoved: Bool

    /// A row.
    ///
    /// ```swift
    /// let row = PeerChange(sequence: ReplicationSequence(7), documentID: "doc", revisionID: "2-b",
    ///                      isDeleted: false, leafRevisionIDs: ["2-b"])
    /// ```
    public init(sequence: ReplicationSequence, documentID: String, revisionID: String, isDeleted: Bool,
                leafRevisionIDs: [String], isRemoved: Bool = false) {
        self.sequence = sequence
        self.documentID = documentID
        self.revisionID = revisionID
        self.isDeleted = isDeleted
        self.leafRevisionIDs = leafRevisionIDs
        self.isRemoved = isRemoved
    }
}

/// A page of the changes feed.
///
/// ```swift
/// let page = try await peer.changes(request)
/// request.since = page.lastSequence
/// if page.reachedEnd { print("caught up") }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ChangesPage: Sendable, Hashable {
    /// The rows that passed the request's filters, in sequence order.
    ///
    /// ```swift
    /// for row in page.changes { … }
    /// ```
    public var changes: [PeerChange]
    /// Where the next page starts: the last sequence the peer read, even when a filter dropped
    /// that row (CouchDB's `last_seq`), so a filtered feed still moves on.
    ///
    /// ```swift
    /// request.since = page.lastSequence
    /// ```
    public var lastSequence: ReplicationSequence
    /// Whether the peer's feed had nothing more after this page when it was read.
    ///
    /// ```swift
    /// if page.reachedEnd { goIdle() }
    /// ```
    public var reachedEnd: Bool

    /// A page.
    ///
    /// ```swift
    /// let page = ChangesPage(changes: [], lastSequence: since, reachedEnd: true)
    /// ```
    public init(changes: [PeerChange], lastSequence: ReplicationSequence, reachedEnd: Bool) {
        self.changes = changes
        self.lastSequence = lastSequence
        self.reachedEnd = reachedEnd
    }
}

/// Revisions of one document to fetch with their histories.
///
/// ```swift
/// let request = RevisionRequest(documentID: "doc", revisionIDs: diff.missing,
///                               knownAncestors: diff.possibleAncestors)
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct RevisionRequest: Sendable, Hashable {
    /// The document ID.
    ///
    /// ```swift
    /// print(request.documentID)
    /// ```
    public var documentID: String
    /// The revisions wanted.
    ///
    /// ```swift
    /// print(request.revisionIDs)
    /// ```
    public var revisionIDs: [String]
    /// Revisions the receiver already has (CouchDB's `atts_since`): a peer may leave out what
    /// they imply the receiver holds.
    ///
    /// ```swift
    /// print(request.knownAncestors)
    /// ```
    public var knownAncestors: [String]

    /// A request.
    ///
    /// ```swift
    /// let r = RevisionRequest(documentID: "doc", revisionIDs: ["3-c"])
    /// ```
    public init(documentID: String, revisionIDs: [String], knownAncestors: [String] = []) {
        self.documentID = documentID
        self.revisionIDs = revisionIDs
        self.knownAncestors = knownAncestors
    }
}

/// What ``ReplicationPeer/fetch(_:)`` brought back.
///
/// ```swift
/// let fetched = try await source.fetch(requests)
/// insert(fetched.revisions)
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Replication)
public struct RevisionFetch: Sendable {
    /// The revisions, as ``ReplicationPeer/revisions(_:)`` returns them.
    ///
    /// ```swift
    /// print(fetched.revisions.count)
    /// ```
    public var revisions: [ReplicatedRevision]
    /// The revisions the peer sent that cannot be stored, each with why.
    ///
    /// ```swift
    /// for f in fetched.failures { print(f.documentID, f.revisionID, f.error) }
    /// ```
    public var failures: [FetchFailure]

    /// A fetch's result.
    ///
    /// ```swift
    /// let fetched = RevisionFetch(revisions: revs, failures: [])
    /// ```
    public init(revisions: [ReplicatedRevision], failures: [FetchFailure]) {
        self.revisions = revisions
        self.failures = failures
    }
}

/// A revision a peer sent that cannot be stored: which, and why.
///
/// ```swift
/// let failure = FetchFailure(documentID: "doc", revisionID: "5-e", error: ReplicatorError(.peerFailed, "bad history"))
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Replication)
public struct FetchFailure: Sendable {
    /// The document.
    ///
    /// ```swift
    /// print(failure.documentID)
    /// ```
    public var documentID: String
    /// The revision asked for (or sent).
    ///
    /// ```swift
    /// print(failure.revisionID)
    /// ```
    public var revisionID: String
    /// Why it cannot be stored.
    ///
    /// ```swift
    /// print(failure.error.message)
    /// ```
    public var error: ReplicatorError

    /// A failure.
    ///
    /// ```swift
    /// let f = FetchFailure(documentID: "doc", revisionID: "5-e", error: ReplicatorError(.peerFailed, "bad history"))
    /// ```
    public init(documentID: String, revisionID: String, error: ReplicatorError) {
        self.documentID = documentID
        self.revisionID = revisionID
        self.error = error
    }
}
