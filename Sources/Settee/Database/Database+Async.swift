import Foundation

// The `async` API. Every write (each save form, delete, purge, batch, blob store, conflict
// resolution, expiration, compaction, check) runs on the database's own worker thread
// (`DatabaseWorker`): it waits for `fdatasync`, and the caller's actor, Swift's cooperative
// pool or an event loop must never wait for that. Reads run on the calling task: they take no
// lock, never wait for a writer, and read a memory-mapped snapshot, so handing them to another
// thread would only add the hop's latency.
//
// A task cancelled before its write starts gets `CancellationError` and nothing is written; a
// write that has started finishes (whole or absent, never half). The document a save is given
// is used by the worker while the caller is suspended, and updated (revision ID, sequence)
// before the call returns, as the synchronous save does.

extension Database {
    /// Runs a synchronous read on the calling task. Through a synchronous closure, so that the
    /// call inside is the synchronous form, not this file's `async` one.
    private func inline<R>(_ read: () throws -> R) rethrows -> R { try read() }

    /// The executor of the database's worker thread, where `async` writes run. A task that makes
    /// many writes in a row can prefer it: its code then runs on that thread, and each write runs
    /// inline instead of being handed over and awaited (two thread wake-ups per write saved).
    ///
    /// ```swift
    /// try await withTaskExecutorPreference(db.writeExecutor) {
    ///     for item in feed { try await db.saveDocument(MutableDocument(id: item.id, data: item.body)) }
    /// }
    /// ```
    ///
    /// While such a task runs, other writers wait for it: keep work that is not the database's
    /// (network, parsing) outside the preference. Reads and actors are unaffected.
    public var writeExecutor: any TaskExecutor { core.worker }

    // MARK: - Reading

    /// The current revision of a document, or nil when it does not exist or is deleted.
    ///
    /// ```swift
    /// if let doc = try await db.document(withID: "list-1") { print(doc["title"] ?? "") }
    /// ```
    ///
    /// Runs on the calling task: a read takes no lock and never waits for a writer.
    public func document(withID id: String) async throws -> Document? {
        try inline { try self.document(withID: id) }
    }

    /// A given revision of a document (current, conflicting or older while its body is kept).
    ///
    /// ```swift
    /// let old = try await db.document(withID: "list-1", revisionID: "1-a3f…")
    /// ```
    public func document(withID id: String, revisionID: String) async throws -> Document? {
        try inline { try self.document(withID: id, revisionID: revisionID) }
    }

    /// The document's revision tree, or nil when there is no such document.
    ///
    /// ```swift
    /// let tree = try await db.revisionTree(withID: "list-1")
    /// ```
    public func revisionTree(withID id: String) async throws -> RevisionTree? {
        try inline { try self.revisionTree(withID: id) }
    }

    /// The undeleted leaves of a document, the current one first.
    ///
    /// ```swift
    /// let sides = try await db.conflictingRevisions(withID: "list-1")
    /// ```
    public func conflictingRevisions(withID id: String) async throws -> [Document] {
        try inline { try self.conflictingRevisions(withID: id) }
    }

    /// A stored blob by digest, or nil.
    ///
    /// ```swift
    /// let photo = try await db.blob(withDigest: digest, contentType: "image/jpeg")
    /// ```
    public func blob(withDigest digest: String, contentType: String = "application/octet-stream") async throws -> Blob? {
        try inline { try self.blob(withDigest: digest, contentType: contentType) }
    }

    /// A document's expiration, or nil when it has none.
    ///
    /// ```swift
    /// let due = try await db.getDocumentExpiration(withID: "session-7")
    /// ```
    public func getDocumentExpiration(withID id: String) async throws -> Date? {
        try inline { try self.getDocumentExpiration(withID: id) }
    }

    // MARK: - Writing

    /// Saves the document as a new revision, last write wins; throws
    /// ``SetteeError/Code/conflict`` when it was deleted meanwhile (deletes win).
    ///
    /// ```swift
    /// let doc = MutableDocument(id: "list-1", data: ["title": "Groceries"])
    /// try await db.saveDocument(doc)
    /// print(doc.revisionID ?? "")
    /// ```
    ///
    /// Runs on the database's worker thread; the caller is suspended, never blocked.
    public func saveDocument(_ document: MutableDocument) async throws {
        try await core.onWorker(groupable: true) { try self.saveDocument(document) }
    }

    /// Saves the document with a concurrency control; false when the control refused the save.
    ///
    /// ```swift
    /// if try await !db.saveDocument(doc, concurrencyControl: .failOnConflict) { retry() }
    /// ```
    public func saveDocument(_ document: MutableDocument, concurrencyControl: ConcurrencyControl) async throws -> Bool {
        return try await core.onWorker(groupable: true) { try self.saveDocument(document, concurrencyControl: concurrencyControl) }
    }

    /// Saves the document, calling `conflictHandler` when the current revision changed since it
    /// was read (seed 002): the handler may merge into the document and return true to save, or
    /// false to give up; what it throws is rethrown.
    ///
    /// ```swift
    /// try await db.saveDocument(doc) { mine, current in
    ///     mine.setData(current?.toDictionary().merging(mine.toDictionary()) { _, m in m } ?? mine.toDictionary())
    ///     return true
    /// }
    /// ```
    ///
    /// The handler runs on the database's worker thread, inside the save.
    @discardableResult
    public func saveDocument(_ document: MutableDocument,
                             conflictHandler: @escaping @Sendable (_ document: MutableDocument, _ current: Document?) throws -> Bool)
    async throws -> Bool {
        return try await core.onWorker { try self.saveDocument(document, conflictHandler: conflictHandler) }
    }

    /// The current revision of a document decoded as `type`, or nil (`record(withID:as:)`).
    ///
    /// ```swift
    /// let task = try await db.record(withID: "task-1", as: Task.self)?.value
    /// ```
    ///
    /// Runs on the calling task, as other reads do.
    public func record<T: Decodable>(withID id: String, as type: T.Type = T.self) async throws -> StoredRecord<T>? {
        try inline { try self.record(withID: id, as: type) }
    }

    /// Saves a value with a concurrency control (`saveRecord(_:basedOn:concurrencyControl:)`);
    /// nil when the control refused it.
    ///
    /// ```swift
    /// try await db.saveRecord(Task(id: "task-2", title: "Call the bank", done: false))
    /// ```
    @discardableResult
    public func saveRecord<T: Encodable & Identifiable & Sendable>(_ value: T, basedOn revisionID: String? = nil,
                                                                   concurrencyControl: ConcurrencyControl = .lastWriteWins)
    async throws -> StoredRecord<T>? {
        try await core.onWorker(groupable: true) { try self.saveRecord(value, basedOn: revisionID, concurrencyControl: concurrencyControl) }
    }

    /// Saves a record read earlier, its revision as the base (`saveRecord(_:concurrencyControl:)`).
    ///
    /// ```swift
    /// var stored = try await db.record(withID: "task-1", as: Task.self)!
    /// stored.value.done = true
    /// try await db.saveRecord(stored, concurrencyControl: .failOnConflict)
    /// ```
    @discardableResult
    public func saveRecord<T: Encodable & Identifiable & Sendable>(_ record: StoredRecord<T>,
                                                                   concurrencyControl: ConcurrencyControl = .lastWriteWins)
    async throws -> StoredRecord<T>? {
        try await core.onWorker(groupable: true) { try self.saveRecord(record, concurrencyControl: concurrencyControl) }
    }

    /// Saves a value, calling `conflictHandler` on a conflict
    /// (`saveRecord(_:basedOn:conflictHandler:)`).
    ///
    /// ```swift
    /// try await db.saveRecord(task, basedOn: stored.revisionID) { mine, current in
    ///     mine.title = current?.title ?? mine.title
    ///     return true
    /// }
    /// ```
    ///
    /// The handler runs on the database's worker thread, inside the save.
    @discardableResult
    public func saveRecord<T: Codable & Identifiable & Sendable>(
        _ value: T, basedOn revisionID: String? = nil,
        conflictHandler: @escaping @Sendable (_ mine: inout T, _ current: T?) throws -> Bool
    ) async throws -> StoredRecord<T>? {
        try await core.onWorker { try self.saveRecord(value, basedOn: revisionID, conflictHandler: conflictHandler) }
    }

    /// Saves several documents in one transaction (`saveDocuments(_:concurrencyControl:)`).
    ///
    /// ```swift
    /// try await withThrowingTaskGroup(of: Void.self) { group in
    ///     for batch in batches { group.addTask { try await db.saveDocuments(batch) } }
    ///     try await group.waitForAll()
    /// }
    /// ```
    ///
    /// The documents are prepared (canonical JSON, blob list, revision IDs) on the calling task,
    /// then committed on the database's worker thread: with several batches in flight, one
    /// commits while the next is prepared on another core. Batches commit in the order their
    /// preparation ends.
    @discardableResult
    public func saveDocuments(_ documents: [MutableDocument],
                              concurrencyControl: ConcurrencyControl = .lastWriteWins) async throws -> [Bool] {
        let prepared = try prepareSaves(documents)
        try Task.checkCancellation()
        return try await core.onWorker { try self.commitSaves(prepared, concurrencyControl) }
    }

    /// Deletes the document (a tombstone revision), last write wins.
    ///
    /// ```swift
    /// if let doc = try await db.document(withID: "list-1") { try await db.deleteDocument(doc) }
    /// ```
    public func deleteDocument(_ document: Document) async throws {
        try await core.onWorker(groupable: true) { try self.deleteDocument(document) }
    }

    /// Deletes the document with a concurrency control; false when the control refused it.
    ///
    /// ```swift
    /// let deleted = try await db.deleteDocument(doc, concurrencyControl: .failOnConflict)
    /// ```
    public func deleteDocument(_ document: Document, concurrencyControl: ConcurrencyControl) async throws -> Bool {
        try await core.onWorker(groupable: true) { try self.deleteDocument(document, concurrencyControl: concurrencyControl) }
    }

    /// Deletes the document being edited (a tombstone), updating its revision ID.
    ///
    /// ```swift
    /// try await db.deleteDocument(editing, concurrencyControl: .lastWriteWins)
    /// ```
    @discardableResult
    public func deleteDocument(_ document: MutableDocument, concurrencyControl: ConcurrencyControl = .lastWriteWins) async throws -> Bool {
        return try await core.onWorker(groupable: true) { try self.deleteDocument(document, concurrencyControl: concurrencyControl) }
    }

    /// Removes every trace of the document (not replicated).
    ///
    /// ```swift
    /// try await db.purgeDocument(withID: "draft-3")
    /// ```
    public func purgeDocument(withID id: String) async throws {
        try await core.onWorker { try self.purgeDocument(withID: id) }
    }

    /// Removes every trace of the document (not replicated).
    ///
    /// ```swift
    /// try await db.purgeDocument(doc)
    /// ```
    public func purgeDocument(_ document: Document) async throws {
        try await core.onWorker { try self.purgeDocument(document) }
    }

    /// Runs `body` as one all-or-nothing transaction on the database's worker thread: the saves,
    /// deletions and purges it makes (with the synchronous API, on the database it is given)
    /// commit together, or none does when it throws.
    ///
    /// ```swift
    /// try await db.inBatch { db in
    ///     for item in items { try db.saveDocument(MutableDocument(id: item.id, data: item.properties)) }
    /// }
    /// ```
    public func inBatch(_ body: @escaping @Sendable (Database) throws -> Void) async throws {
        try await core.onWorker { try self.inBatch { try body(self) } }
    }

    /// Stores a blob's content ahead of the document that will reference it.
    ///
    /// ```swift
    /// try await db.saveBlob(Blob(contentType: "image/png", data: png))
    /// ```
    public func saveBlob(_ blob: Blob) async throws {
        try await core.onWorker { try self.saveBlob(blob) }
    }

    /// Resolves a conflict: the winning leaf (or the default rule's) keeps its body, or takes
    /// `mergedProperties`, and every other live leaf gets a tombstone.
    ///
    /// ```swift
    /// let resolved = try await db.resolveConflict(withID: "list-1", winningRevisionID: pick)
    /// ```
    @discardableResult
    public func resolveConflict(withID id: String, winningRevisionID: String? = nil,
                                mergedProperties: [String: JSONValue]? = nil) async throws -> Document {
        try await core.onWorker {
            try self.resolveConflict(withID: id, winningRevisionID: winningRevisionID, mergedProperties: mergedProperties)
        }
    }

    /// Sets or clears a document's expiration.
    ///
    /// ```swift
    /// try await db.setDocumentExpiration(withID: "session-7", expiration: Date(timeIntervalSinceNow: 3600))
    /// ```
    public func setDocumentExpiration(withID id: String, expiration: Date?) async throws {
        try await core.onWorker { try self.setDocumentExpiration(withID: id, expiration: expiration) }
    }

    /// Compacts the database on a thread of its own (reads and writes, `async` ones included, go
    /// on meanwhile); `progress` is called there and may return false to cancel.
    ///
    /// ```swift
    /// let report = try await db.compact()
    /// print(report.sizeBefore, "→", report.sizeAfter)
    /// ```
    public func compact(progress: (@Sendable (CompactionProgress) -> Bool)? = nil) async throws -> CompactionReport {
        try await core.onOwnThread { try self.compact(progress: progress) }
    }

    /// The document layer's check (`check(repair:)`), on a thread of its own.
    ///
    /// ```swift
    /// let report = try await db.check()
    /// ```
    public func check(repair: Bool = false) async throws -> DatabaseCheckReport {
        try await core.onOwnThread { try self.check(repair: repair) }
    }

    // MARK: - Replication (SPI)

    /// `insertRevisions(_:)` on the database's worker thread.
    ///
    /// ```swift
    /// let outcomes = try await db.insertRevisions(fetched)
    /// ```
    @_spi(Replication)
    public func insertRevisions(_ revisions: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome] {
        try await core.onWorker { try self.insertRevisions(revisions) }
    }

    /// `saveLocalDocument(_:withID:)` on the database's worker thread.
    ///
    /// ```swift
    /// try await db.saveLocalDocument(["last_seq": 42], withID: "checkpoint")
    /// ```
    @_spi(Replication)
    @discardableResult
    public func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) async throws -> String {
        try await core.onWorker { try self.saveLocalDocument(properties, withID: id) }
    }

    /// `deleteLocalDocument(withID:)` on the database's worker thread.
    ///
    /// ```swift
    /// try await db.deleteLocalDocument(withID: "checkpoint")
    /// ```
    @_spi(Replication)
    public func deleteLocalDocument(withID id: String) async throws {
        try await core.onWorker { try self.deleteLocalDocument(withID: id) }
    }
}
