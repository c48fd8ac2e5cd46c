import Dispatch
import Synchronization

/// One document's change, as observers and the changes feed see it.
///
/// ```swift
/// db.addChangeListener { change in
///     for c in change.changes where c.isConflicted { print("\(c.documentID) is in conflict") }
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DocumentChange: Sendable, Hashable {
    /// The document ID.
    ///
    /// ```swift
    /// print(change.documentID)
    /// ```
    public var documentID: String
    /// The document's current revision after the change; nil when it was purged.
    ///
    /// ```swift
    /// print(change.revisionID ?? "purged")
    /// ```
    public var revisionID: String?
    /// The sequence the change was given.
    ///
    /// ```swift
    /// print(change.sequence)
    /// ```
    public var sequence: UInt64
    /// Whether the current revision is now a tombstone.
    ///
    /// ```swift
    /// if change.isDeleted { removeRow(change.documentID) }
    /// ```
    public var isDeleted: Bool
    /// Whether the document now has conflicting leaves.
    ///
    /// ```swift
    /// if change.isConflicted { resolveLater(change.documentID) }
    /// ```
    public var isConflicted: Bool
    /// Whether the document was purged (removed with every trace).
    ///
    /// ```swift
    /// if change.isPurged { forget(change.documentID) }
    /// ```
    public var isPurged: Bool
}

/// The changes of one committed transaction (a save, a delete, a batch, a replicated batch).
///
/// ```swift
/// for try await change in db.changeEvents() { print(change.documentIDs) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DatabaseChange: Sendable {
    /// The database name.
    ///
    /// ```swift
    /// print(change.database)
    /// ```
    public var database: String
    /// Every document changed, in commit order.
    ///
    /// ```swift
    /// let conflicted = change.changes.filter(\.isConflicted)
    /// ```
    public var changes: [DocumentChange]
    /// The IDs of the changed documents.
    ///
    /// ```swift
    /// reload(change.documentIDs)
    /// ```
    public var documentIDs: [String] { changes.map(\.documentID) }
}

/// Removes the listener it was returned for.
///
/// ```swift
/// let token = db.addChangeListener { _ in refresh() }
/// token.remove()
/// ```
///
/// - Note: Thread-safe; removing twice does nothing.
public final class ListenerToken: Sendable {
    private let removal: Mutex<(@Sendable () -> Void)?>

    /// `package`: the replicator's listeners hand out the same tokens.
    package init(_ removal: @escaping @Sendable () -> Void) { self.removal = Mutex(removal) }

    /// Stops the listener; it is not called after this returns (a call already running may end).
    ///
    /// ```swift
    /// token.remove()
    /// ```
    public func remove() {
        let r = removal.withLock { r in defer { r = nil }; return r }
        r?()
    }
}

/// Fans committed changes out to listeners, on one serial queue per database so each listener
/// sees changes in commit order, never on the committing thread.
final class ChangeHub: Sendable {
    private struct State {
        var next: UInt64 = 0
        var listeners: [UInt64: @Sendable (DatabaseChange) -> Void] = [:]
        var documentListeners: [String: [UInt64: @Sendable (DocumentChange) -> Void]] = [:]
        var streams: [UInt64: CoalescingChanges] = [:]
        /// Per document: wake-ups for document observations (one pending at most each).
        var documentTicks: [String: [UInt64: AsyncStream<Void>.Continuation]] = [:]
        /// Set at close: sequences asked for later end at once instead of waiting forever.
        var finished = false
    }
    private let state = Mutex(State())
    let queue = DispatchQueue(label: "settee.database.changes")

    func add(_ listener: @escaping @Sendable (DatabaseChange) -> Void) -> ListenerToken {
        let id = state.withLock { s in s.next += 1; s.listeners[s.next] = listener; return s.next }
        return ListenerToken { [weak self] in self?.state.withLock { _ = $0.listeners.removeValue(forKey: id) } }
    }

    func add(documentID: String, _ listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        let id = state.withLock { s in s.next += 1; s.documentListeners[documentID, default: [:]][s.next] = listener; return s.next }
        return ListenerToken { [weak self] in
            self?.state.withLock { s in
                s.documentListeners[documentID]?.removeValue(forKey: id)
                if s.documentListeners[documentID]?.isEmpty == true { s.documentListeners.removeValue(forKey: documentID) }
            }
        }
    }

    func stream() -> DatabaseChanges {
        let (ticks, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let pending = CoalescingChanges(wake: continuation)
        let id = state.withLock { s -> UInt64? in
            if s.finished { return nil }
            s.next += 1; s.streams[s.next] = pending; return s.next
        }
        guard let id else {
            continuation.finish()
            return DatabaseChanges(ticks: ticks, pending: pending, catchUp: nil)
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.streams.removeValue(forKey: id) } }
        return DatabaseChanges(ticks: ticks, pending: pending, catchUp: nil)
    }

    /// Wake-ups for one document's observation: at most one pending, so a slow reader re-reads
    /// the latest state once instead of every intermediate one. Finished when the database closes.
    func ticks(documentID: String) -> AsyncStream<Void> {
        let (ticks, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { s -> UInt64? in
            if s.finished { return nil }
            s.next += 1; s.documentTicks[documentID, default: [:]][s.next] = continuation; return s.next
        }
        guard let id else {
            continuation.finish()
            return ticks
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { s in
                s.documentTicks[documentID]?.removeValue(forKey: id)
                if s.documentTicks[documentID]?.isEmpty == true { s.documentTicks.removeValue(forKey: documentID) }
            }
        }
        return ticks
    }

    /// Called with the database's write lock held, so changes are queued in commit order.
    func publish(_ change: DatabaseChange) {
        guard !change.changes.isEmpty else { return }
        let (listeners, streams, perDocument, ticks) = state.withLock { s in
            var perDocument: [(@Sendable (DocumentChange) -> Void, DocumentChange)] = []
            if !s.documentListeners.isEmpty {
                for c in change.changes {
                    for l in s.documentListeners[c.documentID]?.values ?? [:].values { perDocument.append((l, c)) }
                }
            }
            var ticks: [AsyncStream<Void>.Continuation] = []
            if !s.documentTicks.isEmpty {
                for c in change.changes { ticks += s.documentTicks[c.documentID]?.values ?? [:].values }
            }
            return (Array(s.listeners.values), Array(s.streams.values), perDocument, ticks)
        }
        for s in streams { s.add(change) }
        for t in ticks { t.yield() }
        guard !listeners.isEmpty || !perDocument.isEmpty else { return }
        let calls = perDocument.map { pair in { @Sendable in pair.0(pair.1) } }
        queue.async {
            for l in listeners { l(change) }
            for c in calls { c() }
        }
    }

    func finish() {
        let (streams, ticks) = state.withLock { s in
            defer { s.streams = [:]; s.listeners = [:]; s.documentListeners = [:]; s.documentTicks = [:]; s.finished = true }
            return (Array(s.streams.values), s.documentTicks.values.flatMap(\.values))
        }
        for s in streams { s.finish() }
        for t in ticks { t.finish() }
    }
}

/// The committed changes of a database as an async sequence that ends when the database closes
/// (``Database/changeEvents()`` from the moment it was asked for, ``Database/changeEvents(since:)``
/// starting with the current state of every document changed after a sequence).
///
/// ```swift
/// for try await change in db.changeEvents() { refresh(change.documentIDs) }
/// ```
///
/// It never buffers without bound: changes committed while the reader is busy are merged into
/// the next element, one entry per document (its latest change), in the order the documents
/// first changed.
///
/// - Note: Sendable; iterate it from one task (it has a single reader).
public struct DatabaseChanges: AsyncSequence, Sendable {
    /// What the sequence yields.
    public typealias Element = DatabaseChange
    let ticks: AsyncStream<Void>
    let pending: CoalescingChanges
    /// Where the current state starts, for ``Database/changeEvents(since:)``.
    let catchUp: (database: Database, since: UInt64)?

    /// Reads the merged changes as they come.
    ///
    /// ```swift
    /// var it = db.changeEvents().makeAsyncIterator()
    /// let next = try await it.next()
    /// ```
    public struct AsyncIterator: AsyncIteratorProtocol {
        var ticks: AsyncStream<Void>.Iterator
        let pending: CoalescingChanges
        var catchUp: (database: Database, cursor: UInt64)?
        /// Live changes at or below this sequence were delivered by the catch-up already.
        var caughtUpTo: UInt64 = 0

        /// The next changes, merged; nil once the database closed.
        ///
        /// ```swift
        /// while let change = try await iterator.next() { print(change.documentIDs) }
        /// ```
        ///
        /// - Throws: a ``SetteeError`` when reading the current state fails (only sequences from
        ///   ``Database/changeEvents(since:)`` read the database).
        public mutating func next() async throws -> DatabaseChange? {
            if let (database, cursor) = catchUp {
                let page: [ChangeEntry]
                do {
                    page = try database.changes(since: cursor, limit: 500)
                } catch let e as SetteeError where e.code == .notOpen {
                    catchUp = nil
                    return nil
                }
                if let last = page.last {
                    catchUp = (database, last.sequence)
                    return DatabaseChange(database: database.name, changes: page.map(DocumentChange.init(current:)))
                }
                caughtUpTo = cursor
                catchUp = nil
            }
            while await ticks.next() != nil {
                if let change = pending.take(after: caughtUpTo) { return change }
            }
            return pending.take(after: caughtUpTo)
        }
    }

    /// Starts reading.
    ///
    /// ```swift
    /// for try await change in db.changeEvents() { print(change) }
    /// ```
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(ticks: ticks.makeAsyncIterator(), pending: pending,
                      catchUp: catchUp.map { ($0.database, $0.since) })
    }
}

extension DocumentChange {
    /// A document's current state as the changes feed reports it.
    init(current e: ChangeEntry) {
        self.init(documentID: e.documentID, revisionID: e.revisionID, sequence: e.sequence, isDeleted: e.isDeleted,
                  isConflicted: e.isConflicted, isPurged: false)
    }
}

/// The changes committed since a change stream's reader last took them, merged (one entry per
/// document, its latest), and the wake-up that tells the reader there are some.
final class CoalescingChanges: Sendable {
    private let lock = Mutex<(order: [String], latest: [String: DocumentChange], database: String?)>(([], [:], nil))
    private let wake: AsyncStream<Void>.Continuation

    init(wake: AsyncStream<Void>.Continuation) { self.wake = wake }

    func add(_ change: DatabaseChange) {
        lock.withLock { p in
            p.database = change.database
            for c in change.changes {
                if p.latest.updateValue(c, forKey: c.documentID) == nil { p.order.append(c.documentID) }
            }
        }
        wake.yield()
    }

    /// The merged changes, leaving out those at or below `delivered` (a purge has no sequence
    /// of its own and is always kept); nil when nothing is left.
    func take(after delivered: UInt64 = 0) -> DatabaseChange? {
        lock.withLock { p in
            guard let database = p.database, !p.order.isEmpty else { return nil }
            defer { p.order.removeAll(keepingCapacity: true); p.latest.removeAll(keepingCapacity: true) }
            let changes = p.order.compactMap { p.latest[$0] }.filter { $0.isPurged || $0.sequence > delivered }
            return changes.isEmpty ? nil : DatabaseChange(database: database, changes: changes)
        }
    }

    func finish() { wake.finish() }
}
