import Foundation

/// A `Codable` value stored as a document, with the revision it was read or saved as: the base
/// revision a later save of it is checked against (as a ``MutableDocument`` remembers the
/// revision it was loaded from).
///
/// ```swift
/// struct Task: Codable, Identifiable { var id: String; var title: String; var done: Bool }
///
/// try db.saveRecord(Task(id: "task-1", title: "Buy milk", done: false))
/// if var stored = try db.record(withID: "task-1", as: Task.self) {
///     stored.value.done = true
///     if try db.saveRecord(stored, concurrencyControl: .failOnConflict) == nil {
///         // changed by someone else since it was read: read it again and retry
///     }
/// }
/// ```
///
/// The document ID of a value is its `id` as text (`String(describing:)`: a `UUID` gives its
/// upper-case form). Values encode through `JSONEncoder` rules: dates as ISO-8601 strings, data
/// as base64; they must encode as a JSON object without top-level keys starting with `_`.
///
/// - Note: A value type; `Sendable` when `Value` is.
public struct StoredRecord<Value> {
    /// The document ID.
    ///
    /// ```swift
    /// print(stored.id)   // "task-1"
    /// ```
    public let id: String
    /// The revision the value was read or saved as.
    ///
    /// ```swift
    /// print(stored.revisionID)   // "2-3f1c…"
    /// ```
    public let revisionID: String
    /// The database sequence of that revision's save (0 for a save that landed on an identical
    /// revision already stored).
    ///
    /// ```swift
    /// print(stored.sequence)
    /// ```
    public let sequence: UInt64
    /// The value; change it and save the record to write the next revision.
    ///
    /// ```swift
    /// stored.value.done = true
    /// ```
    public var value: Value
}

extension StoredRecord: Sendable where Value: Sendable {}
extension StoredRecord: Equatable where Value: Equatable {}

extension Database {
    /// The current revision of a document decoded as `type`, or nil when it does not exist or is
    /// deleted.
    ///
    /// ```swift
    /// let task = try db.record(withID: "task-1", as: Task.self)?.value
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the properties do not fit the type,
    ///   ``SetteeError/Code/corrupted`` when the stored body cannot be read.
    public func record<T: Decodable>(withID id: String, as type: T.Type = T.self) throws -> StoredRecord<T>? {
        guard let doc = try document(withID: id), let revisionID = doc.revisionID else { return nil }
        return StoredRecord(id: doc.id, revisionID: revisionID, sequence: doc.sequence, value: try doc.decode(type))
    }

    /// Saves a value as the next revision of the document its `id` names, with the concurrency
    /// control a ``MutableDocument`` save has; nil when the control refused it.
    ///
    /// `basedOn` is the revision the value was made from (nil: a new document). With
    /// ``ConcurrencyControl/failOnConflict`` the save is refused when the document's current
    /// revision is another one (for a new document: when it exists); with
    /// ``ConcurrencyControl/lastWriteWins`` it goes ahead over it, unless the document was deleted
    /// meanwhile (deletes win).
    ///
    /// ```swift
    /// try db.saveRecord(Task(id: "task-2", title: "Call the bank", done: false))
    /// let created = try db.saveRecord(task, concurrencyControl: .failOnConflict)   // nil: the ID is taken
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the value does not encode as an
    ///   object or its ID is not a valid document ID; the errors of `saveDocument(_:concurrencyControl:)`.
    @discardableResult
    public func saveRecord<T: Encodable & Identifiable>(_ value: T, basedOn revisionID: String? = nil,
                                                        concurrencyControl: ConcurrencyControl = .lastWriteWins) throws -> StoredRecord<T>? {
        let doc = try recordDocument(value, basedOn: revisionID)
        guard try saveDocument(doc, concurrencyControl: concurrencyControl) else { return nil }
        return try stored(doc, value)
    }

    /// Saves a record read earlier, its revision as the base: nil when the concurrency control
    /// refused it.
    ///
    /// ```swift
    /// var stored = try db.record(withID: "task-1", as: Task.self)!
    /// stored.value.title = "Buy oat milk"
    /// let saved = try db.saveRecord(stored, concurrencyControl: .failOnConflict)
    /// ```
    @discardableResult
    public func saveRecord<T: Encodable & Identifiable>(_ record: StoredRecord<T>,
                                                        concurrencyControl: ConcurrencyControl = .lastWriteWins) throws -> StoredRecord<T>? {
        try saveRecord(record.value, basedOn: record.revisionID, concurrencyControl: concurrencyControl)
    }

    /// Saves a value, calling `conflictHandler` when the document changed since the revision it
    /// is based on (seed 002's conflict handler, for a `Codable` value): the handler may change
    /// the value (merge the current one in) and return true to save it over the current revision,
    /// or return false to give up (the call returns nil). `current` is nil when the document was
    /// deleted. What the handler throws is rethrown.
    ///
    /// ```swift
    /// var stored = try db.record(withID: "task-1", as: Task.self)!
    /// stored.value.done = true
    /// try db.saveRecord(stored.value, basedOn: stored.revisionID) { mine, current in
    ///     mine.title = current?.title ?? mine.title   // keep their title, set my flag
    ///     return true
    /// }
    /// ```
    ///
    /// The handler runs outside the database's write lock, as the document form's does.
    @discardableResult
    public func saveRecord<T: Codable & Identifiable>(_ value: T, basedOn revisionID: String? = nil,
                                                      conflictHandler: (_ mine: inout T, _ current: T?) throws -> Bool)
    throws -> StoredRecord<T>? {
        let doc = try recordDocument(value, basedOn: revisionID)
        var mine = value
        let saved = try saveDocument(doc) { new, current in
            let theirs = try current.map { try $0.decode(T.self) }
            guard try conflictHandler(&mine, theirs) else { return false }
            new.setData(try JSONCoding.encodeObject(mine))
            return true
        }
        return saved ? try stored(doc, mine) : nil
    }

    /// The document a record save writes.
    private func recordDocument<T: Encodable & Identifiable>(_ value: T, basedOn revisionID: String?) throws -> MutableDocument {
        MutableDocument(id: String(describing: value.id), revisionID: revisionID, isDeleted: false,
                        properties: try JSONCoding.encodeObject(value), blobs: nil)
    }

    private func stored<T>(_ doc: MutableDocument, _ value: T) throws -> StoredRecord<T> {
        guard let revisionID = doc.revisionID else {
            throw SetteeError(.notFound, "the revision saved for document '\(doc.id)' is not known")
        }
        return StoredRecord(id: doc.id, revisionID: revisionID, sequence: doc.sequence, value: value)
    }
}
