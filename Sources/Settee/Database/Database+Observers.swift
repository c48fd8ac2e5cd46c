import Dispatch

extension Database {
    /// Calls `listener` after each committed change (a save, delete, purge, batch or replicated
    /// batch), on a serial background queue, in commit order.
    ///
    /// ```swift
    /// let token = db.addChangeListener { change in
    ///     print("changed:", change.documentIDs)
    /// }
    /// token.remove()
    /// ```
    @discardableResult
    public func addChangeListener(_ listener: @escaping @Sendable (DatabaseChange) -> Void) -> ListenerToken {
        core.hub.add(listener)
    }

    /// Calls `listener` after each committed change to one document: a new revision, a deletion,
    /// the document entering or leaving conflict, a purge.
    ///
    /// ```swift
    /// let token = db.addDocumentChangeListener(withID: "task-1") { change in
    ///     print("new revision \(change.revisionID ?? "-"), conflict: \(change.isConflicted)")
    /// }
    /// ```
    @discardableResult
    public func addDocumentChangeListener(withID id: String,
                                          _ listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        core.hub.add(documentID: id, listener)
    }

    /// The committed changes from now on, as an async sequence that merges what a slow reader
    /// has not taken yet (``DatabaseChanges``); it ends when the database closes.
    ///
    /// ```swift
    /// Task {
    ///     for try await change in db.changeEvents() { refresh(change.documentIDs) }
    /// }
    /// ```
    ///
    /// To start with the database's current state, use ``changeEvents(since:)``.
    public func changeEvents() -> DatabaseChanges {
        core.hub.stream()
    }

    /// The current state of every document changed after `sequence` (0: every document, deleted
    /// ones as tombstones), in sequence order and in elements of up to 500, then each committed
    /// change as ``changeEvents()`` yields them: nothing missed between the two, and nothing
    /// delivered twice unless it changed again. Ends when the database closes.
    ///
    /// ```swift
    /// var seen = try db.lastSequence            // or 0 to list everything first
    /// for try await change in db.changeEvents(since: seen) {
    ///     for c in change.changes { index(c.documentID); seen = max(seen, c.sequence) }
    /// }
    /// ```
    ///
    /// The current state is read (a page at a time) by the task iterating, as other reads are.
    public func changeEvents(since sequence: UInt64) -> DatabaseChanges {
        // Subscribed before the first page is read, so no commit in between is missed.
        let live = core.hub.stream()
        return DatabaseChanges(ticks: live.ticks, pending: live.pending, catchUp: (self, sequence))
    }

    /// A document's state as it changes: first its current state (nil when it does not exist or
    /// is deleted), then its state after each committed change to it. A reader that falls behind
    /// gets the latest state, not every intermediate one; the sequence ends when the database
    /// closes, and throws when a read fails.
    ///
    /// ```swift
    /// for try await doc in db.documentChanges(withID: "list-1") {
    ///     title = doc?.string(forKey: "title") ?? "(deleted)"
    /// }
    /// ```
    public func documentChanges(withID id: String) -> DocumentObservation {
        // Subscribed before the first read, so no change between the two is missed.
        DocumentObservation(database: self, id: id, ticks: core.hub.ticks(documentID: id))
    }

    /// Calls `listener` after each committed change, on `queue` (a serial queue keeps commit
    /// order), as Couchbase Lite's `addChangeListener(withQueue:listener:)`.
    ///
    /// ```swift
    /// let token = db.addChangeListener(on: .main) { change in tableView.reload(change.documentIDs) }
    /// ```
    @discardableResult
    public func addChangeListener(on queue: DispatchQueue, _ listener: @escaping @Sendable (DatabaseChange) -> Void) -> ListenerToken {
        core.hub.add { change in queue.async { listener(change) } }
    }

    /// Calls `listener` after each committed change to one document, on `queue`.
    ///
    /// ```swift
    /// db.addDocumentChangeListener(withID: "task-1", on: .main) { change in refresh(change.revisionID) }
    /// ```
    @discardableResult
    public func addDocumentChangeListener(withID id: String, on queue: DispatchQueue,
                                          _ listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        core.hub.add(documentID: id) { change in queue.async { listener(change) } }
    }

    /// Adds (or replaces) a validation function, run on every new revision: local saves and
    /// deletions, resolutions and replicated revisions alike (seed 003). A rejection makes the
    /// save throw ``SetteeError/Code/forbidden`` with the validation's message.
    ///
    /// ```swift
    /// db.addValidation(named: "owner") { new, current in
    ///     guard new.isDeleted || new.string(forKey: "owner") != nil else {
    ///         throw SetteeError.forbidden("a document needs an owner")
    ///     }
    /// }
    /// ```
    ///
    /// Validations run inside the write transaction: they must not write to the database.
    public func addValidation(named name: String, _ validation: @escaping Validation) {
        core.validations.withLock { v in
            v.removeAll { $0.name == name }
            v.append((name, validation))
        }
    }

    /// Removes a validation function.
    ///
    /// ```swift
    /// db.removeValidation(named: "owner")
    /// ```
    public func removeValidation(named name: String) {
        core.validations.withLock { $0.removeAll { $0.name == name } }
    }
}

/// A document's states as it changes, from ``Database/documentChanges(withID:)``: its current
/// state first, then the latest state after each change.
///
/// ```swift
/// for try await doc in db.documentChanges(withID: "list-1") { show(doc) }
/// ```
///
/// - Note: Sendable; iterate it from one task (it has a single reader).
public struct DocumentObservation: AsyncSequence, Sendable {
    /// The document's state: nil when it does not exist or is deleted.
    public typealias Element = Document?
    let database: Database
    let id: String
    let ticks: AsyncStream<Void>

    /// Reads the states as they come.
    ///
    /// ```swift
    /// var it = db.documentChanges(withID: "a").makeAsyncIterator()
    /// let current = try await it.next()
    /// ```
    public struct AsyncIterator: AsyncIteratorProtocol {
        let database: Database
        let id: String
        var ticks: AsyncStream<Void>.Iterator
        var started = false

        /// The current state first, then the state after the next change; nil once the
        /// database closed.
        ///
        /// ```swift
        /// while let state = try await iterator.next() { show(state) }
        /// ```
        public mutating func next() async throws -> Document?? {
            if started {
                guard await ticks.next() != nil else { return nil }
            }
            started = true
            let read: () throws -> Document? = { [database, id] in try database.document(withID: id) }
            do {
                return .some(try read())
            } catch let e as SetteeError where e.code == .notOpen {
                return nil   // closed: the sequence ends, as it does when the close comes later
            }
        }
    }

    /// Starts reading.
    ///
    /// ```swift
    /// for try await doc in observation { show(doc) }
    /// ```
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(database: database, id: id, ticks: ticks.makeAsyncIterator())
    }
}
