import Dispatch
@_spi(Replication) import Settee
import Synchronization

/// Replicates a local `Database` with a ``ReplicationPeer``: push, pull or both, one-shot or
/// continuous, resolving the conflicts it pulls (Couchbase Lite's `Replicator`, seeds 000–003).
///
/// ```swift
/// var config = ReplicatorConfiguration(database: molly, target: DatabaseEndpoint(database: naomi))
/// config.replicatorType = .pushAndPull
/// config.continuous = true
/// let replicator = Replicator(config: config)
/// let token = replicator.addChangeListener { status in
///     print(status.activity, status.progress.completed, "/", status.progress.total)
/// }
/// replicator.start()
/// …
/// replicator.stop()
/// ```
///
/// Each direction follows the CouchDB replication protocol: read the checkpoints on both sides,
/// then batches of changes (`style=all_docs`), `_revs_diff`, the missing revisions with their
/// history and the blobs the receiver lacks, `_bulk_docs` with `new_edits=false`, and a new
/// checkpoint. The next batch is fetched while the current one is inserted. A one-shot run with
/// nothing new reads the two checkpoints and the source's last sequence and stops: no scan.
/// A continuous replicator waits on the database's change events (no polling) and is
/// ``ReplicatorActivity/idle`` while caught up.
///
/// Conflicts arriving by pull are resolved as they arrive (``ConflictResolver``; DESIGN
/// "Semantics decided" 3); pushes leave conflicts on the target, as CouchDB does, for its own
/// replicators to resolve. In a push-and-pull one-shot run the push goes on until it has sent the
/// resolutions the pull wrote, so both sides end converged.
///
/// - Note: Thread-safe: call any method from any thread or task. Listeners are called on a serial
///   background queue, in order; the status stream may be consumed from any task. The replication
///   runs in Swift tasks; its writes go through the database's `async` API, which commits on the
///   database's own worker thread, so no task waits for `fdatasync` on the cooperative pool. A
///   conflict resolver and the filters run in those tasks and should be quick.
public final class Replicator: Sendable {
    /// The configuration, as given when the replicator was created.
    ///
    /// ```swift
    /// print(replicator.config.replicatorType)
    /// ```
    public let config: ReplicatorConfiguration

    let local: DatabaseEndpoint
    /// The configuration's target as this replicator uses it (with its credentials).
    let remote: any ReplicationPeer
    let state = Mutex(State())
    private let listenerQueue = DispatchQueue(label: "settee.replicator.listeners")

    struct State {
        var status = ReplicatorStatus(activity: .stopped, progress: ReplicatorProgress(), error: nil)
        var run: Task<Void, Never>?
        var runNumber: UInt64 = 0
        var stopRequested = false
        var directions: [ReplicationDirection: ReplicatorActivity] = [:]
        /// The push direction's last committed source sequence in the current or last run.
        var pushedThrough: UInt64?
        /// Whether the current attempt reached the peer (its backoff starts over when it did).
        var reachedPeer = false
        var nextToken: UInt64 = 0
        var statusListeners: [UInt64: @Sendable (ReplicatorStatus) -> Void] = [:]
        var documentListeners: [UInt64: @Sendable (DocumentReplication) -> Void] = [:]
        var streams: [UInt64: AsyncStream<ReplicatorStatus>.Continuation] = [:]
        var stopWaiters: [CheckedContinuation<ReplicatorStatus, Never>] = []
    }

    /// A replicator for `config` (not started).
    ///
    /// ```swift
    /// let replicator = Replicator(config: config)
    /// ```
    public init(config: ReplicatorConfiguration) {
        self.config = config
        self.local = DatabaseEndpoint(database: config.database)
        self.remote = config.target.configured(for: config)
        self.collection = nil
        // Several collections (or a named one): one replicator each, whose statuses this one
        // sums and whose document events it passes on.
        self.parts = config.collectionPeers.map { part in
            Replicator(config: config.configuration(for: part),
                       collection: (part.configuration.collection.scope.name, part.configuration.collection.name))
        }
        for part in parts {
            part.addChangeListener { [weak self] _ in self?.partChanged() }
            part.addDocumentReplicationListener { [weak self] replication in self?.publish(replication) }
        }
    }

    /// One collection's replicator, of a replicator of several.
    private init(config: ReplicatorConfiguration, collection: (scope: String, name: String)) {
        self.config = config
        self.local = DatabaseEndpoint(database: config.database)
        self.remote = config.target.configured(for: config)
        self.collection = collection
        self.parts = []
    }

    /// The replicators of each collection, when this one replicates several (or a named one).
    let parts: [Replicator]
    /// The collection this replicator replicates, when it is one of a replicator of several:
    /// its document events name it.
    let collection: (scope: String, name: String)?

    deinit {
        state.withLock { $0.run?.cancel() }
    }

    // MARK: - Running

    /// Starts replicating from the saved checkpoints; does nothing while already running.
    ///
    /// ```swift
    /// replicator.start()
    /// ```
    public func start() { start(reset: false) }

    /// Starts replicating; with `reset` true the checkpoints are ignored and every change since
    /// the beginning of the feeds is considered again (what is already there is not copied again:
    /// `_revs_diff` filters it out). Does nothing while already running.
    ///
    /// ```swift
    /// replicator.start(reset: true)   // e.g. after a purge, or after changing a filter closure
    /// ```
    public func start(reset: Bool) {
        if !parts.isEmpty { return startParts(reset: reset) }
        state.withLock { s in
            guard s.run == nil else { return }
            s.runNumber += 1
            s.stopRequested = false
            s.directions = [:]
            s.status = ReplicatorStatus(activity: .connecting, progress: ReplicatorProgress(), error: nil)
            let number = s.runNumber
            // Announced before the run exists, so no status of the run can be announced ahead of it.
            announce(s)
            s.run = Task { [self] in await self.run(number: number, reset: reset) }
        }
    }

    /// Asks the replicator to stop and returns at once. It stops after the batch in flight is
    /// inserted and the conflicts found in it are resolved (seed 002: apps "should expect to see
    /// some delay"), then saves its checkpoint; the status becomes ``ReplicatorActivity/stopped``.
    /// Await ``waitUntilStopped()`` to wait for it.
    ///
    /// ```swift
    /// replicator.stop()
    /// let final = await replicator.waitUntilStopped()
    /// ```
    public func stop() {
        let run = state.withLock { s -> Task<Void, Never>? in
            s.stopRequested = true
            return s.run
        }
        // Cancelling interrupts only waits (an idle continuous replicator); a batch and its
        // resolutions run in tasks of their own and finish.
        run?.cancel()
        for part in parts { part.stop() }
    }

    /// Waits until the replicator is stopped (at once if it is) and returns the final status.
    ///
    /// ```swift
    /// replicator.start()
    /// let status = await replicator.waitUntilStopped()   // a one-shot run ends by itself
    /// if let error = status.error { print(error) }
    /// ```
    public func waitUntilStopped() async -> ReplicatorStatus {
        await withCheckedContinuation { (c: CheckedContinuation<ReplicatorStatus, Never>) in
            let now = state.withLock { s -> ReplicatorStatus? in
                if s.run == nil { return s.status }
                s.stopWaiters.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// The current activity, progress and last error.
    ///
    /// ```swift
    /// print(replicator.status.activity)
    /// ```
    public var status: ReplicatorStatus { state.withLock { $0.status } }

    var isStopRequested: Bool { state.withLock { $0.stopRequested } }

    // MARK: - Listeners

    /// Calls `listener` with each new status (activity, progress or error changed), on a serial
    /// background queue, in order.
    ///
    /// ```swift
    /// let token = replicator.addChangeListener { status in
    ///     if status.activity == .stopped { print("done", status.error.map(String.init(describing:)) ?? "") }
    /// }
    /// token.remove()
    /// ```
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (ReplicatorStatus) -> Void) -> ListenerToken {
        let id = state.withLock { s in s.nextToken += 1; s.statusListeners[s.nextToken] = listener; return s.nextToken }
        return ListenerToken { [weak self] in self?.state.withLock { _ = $0.statusListeners.removeValue(forKey: id) } }
    }

    /// The statuses from now on, starting with the current one; the stream stays open across
    /// runs and ends when the consuming task is cancelled.
    ///
    /// ```swift
    /// for await status in replicator.statusChanges() where status.activity == .idle { break }
    /// ```
    public func statusChanges() -> AsyncStream<ReplicatorStatus> {
        let (stream, continuation) = AsyncStream<ReplicatorStatus>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { s in
            s.nextToken += 1
            s.streams[s.nextToken] = continuation
            continuation.yield(s.status)
            return s.nextToken
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.streams.removeValue(forKey: id) } }
        return stream
    }

    /// Calls `listener` with the documents of each batch pushed or pulled (and each conflict
    /// resolved or failed), on a serial background queue, in order.
    ///
    /// ```swift
    /// let token = replicator.addDocumentReplicationListener { replication in
    ///     for doc in replication.documents where doc.error != nil { print("failed:", doc.id) }
    /// }
    /// ```
    @discardableResult
    public func addDocumentReplicationListener(_ listener: @escaping @Sendable (DocumentReplication) -> Void) -> ListenerToken {
        let id = state.withLock { s in s.nextToken += 1; s.documentListeners[s.nextToken] = listener; return s.nextToken }
        return ListenerToken { [weak self] in self?.state.withLock { _ = $0.documentListeners.removeValue(forKey: id) } }
    }

    // MARK: - Pending documents

    /// The IDs of local documents changed since the push last recorded its progress (and that
    /// its filters let through): what a push has still to send. Documents sent in a batch after
    /// the last checkpoint of an earlier run count as pending until the push sees them again.
    ///
    /// ```swift
    /// let waiting = try replicator.pendingDocumentIDs()
    /// print("\(waiting.count) documents not yet pushed")
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/unsupported`` for a pull-only replicator; a
    ///   `SetteeError` from the database.
    public func pendingDocumentIDs() throws -> Set<String> {
        if !parts.isEmpty { return try part(for: try config.database.defaultCollection()).pendingDocumentIDs() }
        let since = try pushProgress()
        var ids = Set<String>()
        var from = since
        while true {
            let rows = try config.database.changes(since: from, limit: 1000)
            for row in rows where try isPushable(id: row.documentID, revisionID: row.revisionID, deleted: row.isDeleted) {
                ids.insert(row.documentID)
            }
            guard let last = rows.last, rows.count == 1000 else { break }
            from = last.sequence
        }
        return ids
    }

    /// Whether a local document has changes a push has still to send (see
    /// ``pendingDocumentIDs()``); false for an unknown ID.
    ///
    /// ```swift
    /// if try replicator.isDocumentPending("task-1") { showSyncBadge() }
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/unsupported`` for a pull-only replicator.
    public func isDocumentPending(_ id: String) throws -> Bool {
        if !parts.isEmpty { return try part(for: try config.database.defaultCollection()).isDocumentPending(id) }
        let since = try pushProgress()
        guard let tree = try config.database.revisionTree(withID: id),
              let current = try config.database.document(withID: id, revisionID: tree.currentRevisionID),
              current.sequence > since else { return false }
        return try isPushable(id: id, revisionID: tree.currentRevisionID, deleted: current.isDeleted)
    }

    /// Where the push stands: this run's progress, else the local checkpoint's.
    /// ``pendingDocumentIDs()`` of one of the collections this replicator replicates.
    ///
    /// ```swift
    /// let waiting = try replicator.pendingDocumentIDs(collection: tasks)
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` for a collection it does not
    ///   replicate; as ``pendingDocumentIDs()``.
    public func pendingDocumentIDs(collection: Collection) throws -> Set<String> {
        try part(for: collection).pendingDocumentIDs()
    }

    /// ``isDocumentPending(_:)`` of one of the collections this replicator replicates.
    ///
    /// ```swift
    /// if try replicator.isDocumentPending("task-1", collection: tasks) { showSpinner() }
    /// ```
    ///
    /// - Throws: as ``pendingDocumentIDs(collection:)``.
    public func isDocumentPending(_ id: String, collection: Collection) throws -> Bool {
        try part(for: collection).isDocumentPending(id)
    }

    /// The replicator of `collection`: this one when it replicates the default collection alone.
    private func part(for collection: Collection) throws -> Replicator {
        if parts.isEmpty, collection.fullName == "_default._default", collection.database.path == config.database.path { return self }
        guard let part = parts.first(where: { p in
            p.collection.map { $0.scope == collection.scope.name && $0.name == collection.name } == true
                && p.config.database.path == collection.database.path
        }) else {
            throw ReplicatorError(.invalidRequest, "this replicator does not replicate collection \(collection.fullName)")
        }
        return part
    }

    private func pushProgress() throws -> UInt64 {
        guard config.replicatorType.pushes else {
            throw ReplicatorError(.unsupported, "pending documents are those a push has to send; this replicator only pulls")
        }
        let recorded = try config.database.localDocument(withID: "_local/" + replicationID(.push))?["source_last_seq"]
            .flatMap(ReplicationSequence.init(json:))?.integerValue ?? 0
        return max(recorded, state.withLock { $0.pushedThrough } ?? 0)
    }

    /// Whether the push's filters let the document's current revision through.
    func isPushable(id: String, revisionID: String, deleted: Bool) throws -> Bool {
        if let ids = config.documentIDs, !ids.contains(id) { return false }
        guard config.channels != nil || config.pushFilter != nil else { return true }
        guard let doc = try config.database.document(withID: id, revisionID: revisionID) else { return false }
        if let channels = config.channels, !DatabaseEndpoint.channels(of: doc).contains(where: channels.contains) { return false }
        if let filter = config.pushFilter, !filter(doc, deleted ? .deleted : []) { return false }
        return true
    }

    func replicationID(_ direction: ReplicationDirection) -> String {
        direction == .push
            ? ReplicationID.make(source: local.identifier, target: remote.identifier, config: config, push: true)
            : ReplicationID.make(source: remote.identifier, target: local.identifier, config: config, push: false)
    }

    // MARK: - Status

    /// Changes the state and tells listeners when the status changed.
    func update(_ body: (inout State) -> Void) {
        state.withLock { s in
            let before = s.status
            body(&s)
            if s.run != nil {
                let activities = Array(s.directions.values)
                if activities.contains(.busy) {
                    s.status.activity = .busy
                } else if activities.contains(.offline) {
                    s.status.activity = .offline
                } else if activities.contains(.connecting) {
                    s.status.activity = .connecting
                } else if !activities.isEmpty, activities.allSatisfy({ $0 == .idle || $0 == .stopped }),
                          activities.contains(.idle) {
                    s.status.activity = .idle
                }
            }
            if s.status != before { announce(s) }
        }
    }

    /// Hands the status in `s` to streams and listeners. Called with the state locked, so that
    /// statuses reach them in the order they were set: announcing after unlocking let a thread
    /// that read an older status deliver it after a newer one.
    private func announce(_ s: State) {
        let status = s.status
        for c in s.streams.values { c.yield(status) }
        guard !s.statusListeners.isEmpty else { return }
        let listeners = Array(s.statusListeners.values)
        listenerQueue.async { for l in listeners { l(status) } }
    }

    func publish(_ replication: DocumentReplication) {
        guard !replication.documents.isEmpty else { return }
        var stamped = replication
        if let collection {
            for i in stamped.documents.indices {
                stamped.documents[i].scope = collection.scope
                stamped.documents[i].collection = collection.name
            }
        }
        let replication = stamped
        // Queued with the state locked, like statuses, so batches reach listeners in order.
        state.withLock { s in
            guard !s.documentListeners.isEmpty else { return }
            let listeners = Array(s.documentListeners.values)
            listenerQueue.async { for l in listeners { l(replication) } }
        }
    }

    // MARK: - Several collections

    /// Starts every collection's replicator; the run ends when they all have stopped, with the
    /// first error any of them stopped with.
    private func startParts(reset: Bool) {
        state.withLock { s in
            guard s.run == nil else { return }
            s.runNumber += 1
            s.stopRequested = false
            s.status = ReplicatorStatus(activity: .connecting, progress: ReplicatorProgress(), error: nil)
            let number = s.runNumber
            announce(s)
            s.run = Task { [self] in
                for part in parts { part.start(reset: reset) }
                var error: ReplicatorError?
                for part in parts {
                    let status = await part.waitUntilStopped()
                    if error == nil { error = status.error }
                }
                partChanged()
                finish(number: number, error: error)
            }
        }
    }

    /// Sums the collections' statuses: the busiest activity, the progress added up, the first
    /// error.
    private func partChanged() {
        let statuses = parts.map(\.status)
        state.withLock { s in
            guard s.run != nil else { return }
            let before = s.status
            let activities = statuses.map(\.activity)
            for a in [ReplicatorActivity.busy, .connecting, .offline, .idle] where activities.contains(a) {
                s.status.activity = a
                break
            }
            var progress = ReplicatorProgress()
            for status in statuses {
                progress.completed &+= status.progress.completed
                progress.total &+= status.progress.total
            }
            s.status.progress = progress
            s.status.error = statuses.lazy.compactMap(\.error).first
            if s.status != before { announce(s) }
        }
    }

    /// Ends a run: stopped, with its error; wakes whoever waits.
    func finish(number: UInt64, error: ReplicatorError?) {
        let (waiters, status) = state.withLock { s -> ([CheckedContinuation<ReplicatorStatus, Never>], ReplicatorStatus) in
            guard s.runNumber == number else { return ([], s.status) }
            s.run = nil
            s.status.activity = .stopped
            s.status.error = error
            s.directions = [:]
            announce(s)
            defer { s.stopWaiters = [] }
            return (s.stopWaiters, s.status)
        }
        for w in waiters { w.resume(returning: status) }
    }
}
