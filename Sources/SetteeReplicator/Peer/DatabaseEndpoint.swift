@_spi(Replication) import Settee

/// A filter function a ``DatabaseEndpoint`` runs on its own changes feed when a replication asks
/// for it by name (seed 003's parameterized filters): the document's current revision
/// (tombstones included, with whatever properties they kept) and the replication's parameters.
///
/// ```swift
/// let byOwner: PeerFilterFunction = { doc, params in doc["owner"] == params["owner"] }
/// ```
public typealias PeerFilterFunction = @Sendable (Document, [String: JSONValue]) -> Bool

/// A ``ReplicationPeer`` over a `Database` in this process: every call of the replication
/// protocol answered by the database's replication entry points, with nothing serialized.
///
/// ```swift
/// let other = try Database(name: "naomi", config: DatabaseConfiguration(directory: dir))
/// var config = ReplicatorConfiguration(database: molly, target: DatabaseEndpoint(database: other))
/// config.replicatorType = .pushAndPull
/// let replicator = Replicator(config: config)
/// replicator.start()
/// ```
///
/// Named filter functions (``PeerFilterFunction``) answer a pulling replicator's
/// ``ReplicatorConfiguration/filterName`` and ``ReplicatorConfiguration/filterParameters``,
/// as a CouchDB server's design-document filters do:
///
/// ```swift
/// let server = DatabaseEndpoint(database: shared, filters: [
///     "by_worker": { doc, params in doc["worker_id"] == params["worker_id"] },
/// ])
/// ```
///
/// - Note: Thread-safe (a `Database` is); the calls run synchronously on the calling task, and
///   block it while the database reads or commits (a replicator calls them from its own threads).
public struct DatabaseEndpoint: ReplicationPeer {
    /// The database this endpoint serves.
    ///
    /// ```swift
    /// print(endpoint.database.name)
    /// ```
    public let database: Database
    /// Filter functions by name.
    ///
    /// ```swift
    /// print(endpoint.filters.keys.sorted())
    /// ```
    public let filters: [String: PeerFilterFunction]

    /// An endpoint serving `database`, with optional named filter functions.
    ///
    /// ```swift
    /// let endpoint = DatabaseEndpoint(database: db)
    /// ```
    public init(database: Database, filters: [String: PeerFilterFunction] = [:]) {
        self.database = database
        self.filters = filters
    }

    /// The endpoint of the database's collection `scope.name`, which must exist.
    ///
    /// ```swift
    /// let tasks = try DatabaseEndpoint(database: other).peer(forCollection: "tasks", scope: "store")
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` when the database has no such collection.
    public func peer(forCollection name: String, scope: String) throws -> any ReplicationPeer {
        let collection: Collection?
        do {
            collection = try database.collection(name: name, scope: scope)
        } catch {
            throw ReplicatorError(.invalidRequest, "\(database.name): \(error)")
        }
        guard let collection else {
            throw ReplicatorError(.invalidRequest, "database \(database.name) has no collection \(scope).\(name)")
        }
        return DatabaseEndpoint(database: collection.documents, filters: filters)
    }

    /// `settee:` followed by the database's UUID: stable across opens, unique per database.
    ///
    /// ```swift
    /// print(endpoint.identifier)
    /// ```
    public var identifier: String { "settee:" + database.uuid }

    /// The database's UUID, last sequence and document count.
    ///
    /// ```swift
    /// let info = try await endpoint.info()
    /// ```
    public func info() async throws -> PeerInfo {
        PeerInfo(uuid: database.uuid, lastSequence: ReplicationSequence(try database.lastSequence),
                 documentCount: try database.count)
    }

    /// A page of `Database.changes(since:limit:)` after the request's filters.
    ///
    /// ```swift
    /// let page = try await endpoint.changes(ChangesRequest(since: .zero, limit: 100))
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` for an opaque sequence or an unknown
    ///   filter name; a `SetteeError` from the database.
    public func changes(_ request: ChangesRequest) async throws -> ChangesPage {
        try changesPage(request)
    }

    /// The synchronous body of ``changes(_:)`` (also used by the replicator on its own database).
    func changesPage(_ request: ChangesRequest) throws -> ChangesPage {
        guard let since = request.since.integerValue else {
            throw ReplicatorError(.invalidRequest, "a Settee database's sequences are integers, not '\(request.since)'")
        }
        var filter: PeerFilterFunction?
        if let name = request.filterName {
            guard let f = filters[name] else { throw ReplicatorError(.invalidRequest, "no filter function named '\(name)'") }
            filter = f
        }
        let limit = max(1, request.limit)
        let rows = try database.changes(since: since, limit: limit)
        let last = rows.last.map { ReplicationSequence($0.sequence) } ?? request.since
        let ids = request.documentIDs.map(Set.init)
        let channels = request.channels.map(Set.init)
        var out: [PeerChange] = []
        out.reserveCapacity(rows.count)
        for row in rows {
            if let ids, !ids.contains(row.documentID) { continue }
            if channels != nil || filter != nil {
                // Tombstones are read too: one that kept its routing properties still passes.
                guard let doc = try database.document(withID: row.documentID, revisionID: row.revisionID) else { continue }
                if let channels, !Self.channels(of: doc).contains(where: channels.contains) { continue }
                if let filter, !filter(doc, request.filterParameters) { continue }
            }
            out.append(PeerChange(sequence: ReplicationSequence(row.sequence), documentID: row.documentID,
                                  revisionID: row.revisionID, isDeleted: row.isDeleted,
                                  leafRevisionIDs: row.leafRevisionIDs))
        }
        return ChangesPage(changes: out, lastSequence: last, reachedEnd: rows.count < limit)
    }

    /// A document's channels: its `channels` property, a string or an array of strings.
    static func channels(of doc: Document) -> [String] {
        switch doc["channels"] {
        case .string(let s)?: return [s]
        case .array(let a)?: return a.compactMap(\.stringValue)
        default: return []
        }
    }

    /// Returns when the database's last sequence passes `sequence`; waits on the database's
    /// change events, never polls.
    ///
    /// ```swift
    /// try await endpoint.waitForChanges(after: ReplicationSequence(db.lastSequence))
    /// ```
    ///
    /// - Throws: `CancellationError` when the task is cancelled; `SetteeError.Code.notOpen`
    ///   when the database closes meanwhile.
    public func waitForChanges(after sequence: ReplicationSequence) async throws {
        let after = sequence.integerValue ?? 0
        // Subscribed before the check, so a commit between the two is not missed.
        let events = database.changeEvents()
        if try database.lastSequence > after { return }
        for try await _ in events {
            if try database.lastSequence > after { return }
        }
        try Task.checkCancellation()
        throw SetteeError(.notOpen, "the database closed while a replicator waited for changes")
    }

    /// `Database.revsDiff(_:)`.
    ///
    /// ```swift
    /// let diff = try await endpoint.revsDiff(["doc": ["2-877"]])
    /// ```
    @_spi(Replication)
    public func revsDiff(_ revisions: [String: [String]]) async throws -> [String: RevsDiffResult] {
        try database.revsDiff(revisions)
    }

    /// Each requested revision with body and history: all leaves in one read when several are
    /// wanted, otherwise `Database.revision(withID:revisionID:)`.
    ///
    /// ```swift
    /// let revs = try await endpoint.revisions([RevisionRequest(documentID: "doc", revisionIDs: ["2-877"])])
    /// ```
    @_spi(Replication)
    public func revisions(_ requests: [RevisionRequest]) async throws -> [ReplicatedRevision] {
        try fetch(requests)
    }

    func fetch(_ requests: [RevisionRequest]) throws -> [ReplicatedRevision] {
        var out: [ReplicatedRevision] = []
        out.reserveCapacity(requests.count)
        for r in requests {
            if r.revisionIDs.count == 1 {
                if let rev = try database.revision(withID: r.documentID, revisionID: r.revisionIDs[0]) { out.append(rev) }
                continue
            }
            let leaves = try database.leafRevisions(withID: r.documentID)
            for id in r.revisionIDs {
                if let rev = leaves.first(where: { $0.revisionID == id }) {
                    out.append(rev)
                } else if let rev = try database.revision(withID: r.documentID, revisionID: id) {
                    out.append(rev)
                }
            }
        }
        return out
    }

    /// The digests whose content is not in the database's blob store.
    ///
    /// ```swift
    /// let missing = try await endpoint.missingBlobs([blob.digest])
    /// ```
    public func missingBlobs(_ digests: [String]) async throws -> [String] {
        try digests.filter { try database.blob(withDigest: $0) == nil }
    }

    /// `Database.blob(withDigest:contentType:)`; its content streams from the store's file.
    ///
    /// ```swift
    /// let blob = try await endpoint.blob(withDigest: digest)
    /// ```
    public func blob(withDigest digest: String) async throws -> Blob? {
        try await database.blob(withDigest: digest)
    }

    /// `Database.saveBlob(_:)`.
    ///
    /// ```swift
    /// try await endpoint.saveBlob(blob)
    /// ```
    public func saveBlob(_ blob: Blob) async throws {
        try await database.saveBlob(blob)
    }

    /// `Database.insertRevisions(_:)`: one transaction for the whole batch.
    ///
    /// ```swift
    /// let outcomes = try await endpoint.insertRevisions(batch)
    /// ```
    @_spi(Replication)
    public func insertRevisions(_ revisions: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome] {
        try await database.insertRevisions(revisions)
    }

    /// `Database.localDocument(withID:)`.
    ///
    /// ```swift
    /// let cp = try await endpoint.localDocument(withID: "_local/abc")
    /// ```
    @_spi(Replication)
    public func localDocument(withID id: String) async throws -> [String: JSONValue]? {
        try database.localDocument(withID: id)
    }

    /// `Database.saveLocalDocument(_:withID:)`.
    ///
    /// ```swift
    /// try await endpoint.saveLocalDocument(["source_last_seq": 10], withID: "_local/abc")
    /// ```
    @_spi(Replication)
    public func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) async throws {
        try await database.saveLocalDocument(properties, withID: id)
    }
}
