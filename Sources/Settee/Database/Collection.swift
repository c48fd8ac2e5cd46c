import Dispatch
import Foundation

/// Couchbase Lite 3's names for a database's documents: a database holds scopes, a scope holds
/// collections, and every document is in one collection. Every database has the scope
/// `_default` with the collection `_default`, which holds what the database-level calls
/// (``Database/saveDocument(_:)``, ``Database/document(withID:)``…) read and write: code written
/// for Couchbase Lite 3 that starts with ``Database/defaultCollection()`` and code that calls the
/// database directly see the same documents. Other collections are made with
/// ``Database/createCollection(name:scope:)``; each keeps its own documents, sequences, indexes
/// and listeners, and one ``Database/inBatch(_:)`` writes any of them in one transaction.
///
/// ```swift
/// let tasks = try db.createCollection(name: "tasks", scope: "store")
/// try tasks.save(document: MutableDocument(id: "task-1", data: ["title": "Milk"]))
/// print(try tasks.count)
/// ```
///
/// - Note: Immutable; safe to share between threads (each call is the database's call). A
///   deleted collection's object answers ``SetteeError/Code/notOpen``.
public final class Collection: Sendable, Hashable, CustomStringConvertible {
    /// The name of every database's default collection, and of its scope.
    ///
    /// ```swift
    /// let tasks = try db.collection(name: Collection.defaultCollectionName)
    /// ```
    public static let defaultCollectionName = "_default"

    /// The collection's name.
    ///
    /// ```swift
    /// print(try db.defaultCollection().name)   // "_default"
    /// ```
    public let name: String
    /// The scope the collection is in.
    ///
    /// ```swift
    /// print(collection.scope.name)   // "_default"
    /// ```
    public let scope: Scope
    /// The database the collection is in.
    ///
    /// ```swift
    /// let db = collection.database
    /// ```
    public var database: Database { scope.database }
    /// `scope.collection`, as SQL++'s `FROM` names it.
    ///
    /// ```swift
    /// let query = try db.createQuery("SELECT * FROM \(collection.fullName)")
    /// ```
    public var fullName: String { scope.name + "." + name }

    /// What the collection's calls go through: the database itself for the default collection,
    /// an object over the collection's own trees for a named one (``Database/owner``).
    let store: Database

    /// The collection as a `Database` object over its documents alone: every document, query,
    /// index, listener and replication call of `Database` reads and writes this collection.
    /// What the sync server serves a keyspace with, and the replicator replicates.
    ///
    /// ```swift
    /// let count = try collection.documents.count
    /// ```
    @_spi(Server) @_spi(Replication) public var documents: Database { store }

    init(name: String, scope: Scope, store: Database) {
        self.name = name
        self.scope = scope
        self.store = store
    }

    /// `database/scope.collection`.
    ///
    /// ```swift
    /// print(collection)   // "todo/_default._default"
    /// ```
    public var description: String { database.name + "/" + fullName }

    /// Collections are equal when they are the same collection of the same database files.
    ///
    /// ```swift
    /// try db.defaultCollection() == db.defaultCollection()   // true
    /// ```
    public static func == (a: Collection, b: Collection) -> Bool {
        a.fullName == b.fullName && a.database.path == b.database.path
    }

    /// Hashes what ``==`` compares.
    ///
    /// ```swift
    /// let seen: Set<Collection> = [try db.defaultCollection()]
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(database.path)
        hasher.combine(fullName)
    }

    /// The number of live documents (deleted ones are not counted).
    ///
    /// ```swift
    /// print(try collection.count)
    /// ```
    ///
    /// - Throws: as ``Database/count`` (Couchbase Lite's does not throw; a closed database or
    ///   a damaged count is an error here, not 0).
    public var count: UInt64 { get throws { try store.count } }

    // MARK: Async observation

    /// The collection's committed changes from now on, as an async sequence (as
    /// ``Database/changeEvents()`` for the database's); it ends when the collection is deleted
    /// or the database closes.
    ///
    /// ```swift
    /// Task {
    ///     for try await change in tasks.changeEvents() { refresh(change.documentIDs) }
    /// }
    /// ```
    public func changeEvents() -> DatabaseChanges { store.changeEvents() }

    /// The current state of every document of the collection changed after `sequence` (the
    /// collection's own sequences), then each committed change (as
    /// ``Database/changeEvents(since:)``).
    ///
    /// ```swift
    /// for try await change in tasks.changeEvents(since: 0) { index(change.documentIDs) }
    /// ```
    public func changeEvents(since sequence: UInt64) -> DatabaseChanges { store.changeEvents(since: sequence) }

    /// A document's state as it changes (as ``Database/documentChanges(withID:)``).
    ///
    /// ```swift
    /// for try await doc in tasks.documentChanges(id: "task-1") { title = doc?.string(forKey: "title") ?? "" }
    /// ```
    public func documentChanges(id: String) -> DocumentObservation { store.documentChanges(withID: id) }

    // MARK: Documents

    /// The current revision of document `id`; nil when it does not exist or is deleted.
    ///
    /// ```swift
    /// if let doc = try collection.document(id: "task-1") { print(doc.string(forKey: "title") ?? "") }
    /// ```
    ///
    /// - Throws: as ``Database/document(withID:)``.
    public func document(id: String) throws -> Document? { try store.document(withID: id) }

    /// Saves `document` as a new revision; the last write wins over a concurrent one.
    ///
    /// ```swift
    /// try collection.save(document: MutableDocument(id: "task-1", data: ["title": "Milk"]))
    /// ```
    ///
    /// - Throws: as ``Database/saveDocument(_:)``.
    public func save(document: MutableDocument) throws { try store.saveDocument(document) }

    /// Saves `document`; with ``ConcurrencyControl/failOnConflict``, returns false (and saves
    /// nothing) when another revision was saved since it was read.
    ///
    /// ```swift
    /// let saved = try collection.save(document: doc, concurrencyControl: .failOnConflict)
    /// ```
    ///
    /// - Throws: as ``Database/saveDocument(_:concurrencyControl:)``.
    @discardableResult
    public func save(document: MutableDocument, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try store.saveDocument(document, concurrencyControl: concurrencyControl)
    }

    /// Saves `document`, calling `conflictHandler` when another revision was saved since it was
    /// read: it edits `document` from `current` and returns true to save again, false to give
    /// up (the result is then false).
    ///
    /// ```swift
    /// try collection.save(document: doc) { mine, current in
    ///     mine.setInt((current?.int(forKey: "count") ?? 0) + 1, forKey: "count")
    ///     return true
    /// }
    /// ```
    ///
    /// - Throws: as ``Database/saveDocument(_:conflictHandler:)``.
    @discardableResult
    public func save(document: MutableDocument,
                     conflictHandler: (_ document: MutableDocument, _ current: Document?) throws -> Bool) throws -> Bool {
        try store.saveDocument(document, conflictHandler: conflictHandler)
    }

    /// Deletes `document` (a tombstone revision, which replicates); the last write wins.
    ///
    /// ```swift
    /// if let doc = try collection.document(id: "task-1") { try collection.delete(document: doc) }
    /// ```
    ///
    /// - Throws: as ``Database/deleteDocument(_:)``.
    public func delete(document: Document) throws { try store.deleteDocument(document) }

    /// Deletes `document`; with ``ConcurrencyControl/failOnConflict``, returns false when
    /// another revision was saved since it was read.
    ///
    /// ```swift
    /// let deleted = try collection.delete(document: doc, concurrencyControl: .failOnConflict)
    /// ```
    ///
    /// - Throws: as ``Database/deleteDocument(_:concurrencyControl:)``.
    @discardableResult
    public func delete(document: Document, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try store.deleteDocument(document, concurrencyControl: concurrencyControl)
    }

    /// Removes `document` and its history without a trace (nothing replicates).
    ///
    /// ```swift
    /// try collection.purge(document: doc)
    /// ```
    ///
    /// - Throws: as ``Database/purgeDocument(_:)``.
    public func purge(document: Document) throws { try store.purgeDocument(document) }

    /// Removes document `id` and its history without a trace.
    ///
    /// ```swift
    /// try collection.purge(id: "task-1")
    /// ```
    ///
    /// - Throws: as ``Database/purgeDocument(withID:)``.
    public func purge(id: String) throws { try store.purgeDocument(withID: id) }

    /// Purges document `id` at `expiration` (nil: never).
    ///
    /// ```swift
    /// try collection.setDocumentExpiration(id: "session", expiration: Date().addingTimeInterval(3600))
    /// ```
    ///
    /// - Throws: as ``Database/setDocumentExpiration(withID:expiration:)``.
    public func setDocumentExpiration(id: String, expiration: Date?) throws {
        try store.setDocumentExpiration(withID: id, expiration: expiration)
    }

    /// When document `id` is purged; nil when never.
    ///
    /// ```swift
    /// let due = try collection.getDocumentExpiration(id: "session")
    /// ```
    ///
    /// - Throws: as ``Database/getDocumentExpiration(withID:)``.
    public func getDocumentExpiration(id: String) throws -> Date? {
        try store.getDocumentExpiration(withID: id)
    }

    // MARK: Listeners

    /// Calls `listener` after each committed change to the collection, on a serial background
    /// queue, in commit order.
    ///
    /// ```swift
    /// let token = collection.addChangeListener { change in print(change.documentIDs) }
    /// token.remove()
    /// ```
    @discardableResult
    public func addChangeListener(listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken {
        store.addChangeListener { [self] change in listener(CollectionChange(collection: self, change: change)) }
    }

    /// Calls `listener` after each committed change to the collection, on `queue` (nil: a serial
    /// background queue).
    ///
    /// ```swift
    /// let token = collection.addChangeListener(queue: .main) { change in reload(change.documentIDs) }
    /// ```
    @discardableResult
    public func addChangeListener(queue: DispatchQueue?,
                                  listener: @escaping @Sendable (CollectionChange) -> Void) -> ListenerToken {
        guard let queue else { return addChangeListener(listener: listener) }
        return store.addChangeListener(on: queue) { [self] change in listener(CollectionChange(collection: self, change: change)) }
    }

    /// Calls `listener` after each committed change to document `id`.
    ///
    /// ```swift
    /// let token = collection.addDocumentChangeListener(id: "task-1") { change in print(change.revisionID ?? "-") }
    /// ```
    @discardableResult
    public func addDocumentChangeListener(id: String, listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        store.addDocumentChangeListener(withID: id, listener)
    }

    /// Calls `listener` after each committed change to document `id`, on `queue` (nil: a serial
    /// background queue).
    ///
    /// ```swift
    /// collection.addDocumentChangeListener(id: "task-1", queue: .main) { change in refresh(change) }
    /// ```
    @discardableResult
    public func addDocumentChangeListener(id: String, queue: DispatchQueue?,
                                          listener: @escaping @Sendable (DocumentChange) -> Void) -> ListenerToken {
        guard let queue else { return addDocumentChangeListener(id: id, listener: listener) }
        return store.addDocumentChangeListener(withID: id, on: queue, listener)
    }

    // MARK: Indexes

    /// The names of the collection's indexes, sorted.
    ///
    /// ```swift
    /// print(try collection.indexes())
    /// ```
    ///
    /// - Throws: as ``Database/indexes``.
    public func indexes() throws -> [String] { try store.indexes }

    /// Creates index `name` from `config`, or does nothing when the same index exists.
    ///
    /// ```swift
    /// try collection.createIndex(withName: "by-title", config: ValueIndexConfiguration(["title"]))
    /// ```
    ///
    /// - Throws: as ``Database/createIndex(_:name:)``.
    public func createIndex(withName name: String, config: some IndexConfiguration) throws {
        try store.createIndex(config, name: name)
    }

    /// Deletes index `name` (nothing when there is none).
    ///
    /// ```swift
    /// try collection.deleteIndex(forName: "by-title")
    /// ```
    ///
    /// - Throws: as ``Database/deleteIndex(forName:)``.
    public func deleteIndex(forName name: String) throws { try store.deleteIndex(forName: name) }
}

/// A collection's committed change: Couchbase Lite 3's `CollectionChange`.
///
/// ```swift
/// collection.addChangeListener { change in
///     print(change.collection.name, change.documentIDs)
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct CollectionChange: Sendable {
    /// The collection changed.
    ///
    /// ```swift
    /// print(change.collection.fullName)
    /// ```
    public let collection: Collection
    /// Every document changed, in commit order.
    ///
    /// ```swift
    /// let purged = change.changes.filter(\.isPurged)
    /// ```
    public let changes: [DocumentChange]
    /// The IDs of the changed documents.
    ///
    /// ```swift
    /// reload(change.documentIDs)
    /// ```
    public var documentIDs: [String] { changes.map(\.documentID) }

    init(collection: Collection, change: DatabaseChange) {
        self.collection = collection
        self.changes = change.changes
    }
}

/// A scope: a namespace of collections. Every database has the scope `_default`.
///
/// ```swift
/// let scope = try db.defaultScope()
/// for collection in try scope.collections() { print(collection.name) }
/// ```
///
/// - Note: Immutable; safe to share between threads.
public final class Scope: Sendable, Hashable, CustomStringConvertible {
    /// The name of every database's default scope.
    ///
    /// ```swift
    /// let scope = try db.scope(name: Scope.defaultScopeName)
    /// ```
    public static let defaultScopeName = "_default"

    /// The scope's name.
    ///
    /// ```swift
    /// print(scope.name)   // "_default"
    /// ```
    public let name: String
    /// The database the scope is in.
    ///
    /// ```swift
    /// let db = scope.database
    /// ```
    public let database: Database

    init(name: String, database: Database) {
        self.name = name
        self.database = database
    }

    /// `database/scope`.
    ///
    /// ```swift
    /// print(scope)   // "todo/_default"
    /// ```
    public var description: String { database.name + "/" + name }

    /// Scopes are equal when they are the same scope of the same database files.
    ///
    /// ```swift
    /// try db.defaultScope() == db.defaultScope()   // true
    /// ```
    public static func == (a: Scope, b: Scope) -> Bool { a.name == b.name && a.database.path == b.database.path }

    /// Hashes what ``==`` compares.
    ///
    /// ```swift
    /// let seen: Set<Scope> = [try db.defaultScope()]
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(database.path)
        hasher.combine(name)
    }

    /// The scope's collections, by name.
    ///
    /// ```swift
    /// let names = try scope.collections().map(\.name)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen``.
    public func collections() throws -> [Collection] { try database.collections(scope: name) }

    /// The collection `name` of this scope; nil when there is none.
    ///
    /// ```swift
    /// let tasks = try scope.collection(name: "_default")
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a name Couchbase Lite would refuse;
    ///   ``SetteeError/Code/notOpen``.
    public func collection(name: String) throws -> Collection? { try database.collection(name: name, scope: self.name) }
}

extension Database {
    /// The scope `_default`.
    ///
    /// ```swift
    /// let scope = try db.defaultScope()
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen``.
    public func defaultScope() throws -> Scope {
        try base.checkOpen()
        return Scope(name: Scope.defaultScopeName, database: base)
    }

    /// The collection `_default` of scope `_default`: the documents the database-level calls
    /// read and write.
    ///
    /// ```swift
    /// let collection = try db.defaultCollection()
    /// try collection.save(document: MutableDocument(id: "a"))
    /// try db.document(withID: "a") != nil   // true: the same documents
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen``.
    public func defaultCollection() throws -> Collection {
        Collection(name: Collection.defaultCollectionName, scope: try defaultScope(), store: base)
    }

    /// The database opened by name, when this object stands for a named collection.
    var base: Database { owner ?? self }

    /// The collection `name` of scope `scope`, created (empty, with no indexes) when the
    /// database has none; creating one that exists returns it.
    ///
    /// ```swift
    /// let tasks = try db.createCollection(name: "tasks", scope: "store")
    /// try tasks.save(document: MutableDocument(id: "task-1", data: ["title": "Milk"]))
    /// let rows = try db.createQuery("SELECT title FROM store.tasks").execute()
    /// ```
    ///
    /// A collection keeps its documents, sequences, indexes, local documents and channel
    /// records in trees of its own, so a scan, a count or a changes feed of one costs what it
    /// holds. Its sequences are its own (as in Couchbase Lite): two collections' documents can
    /// have the same sequence.
    ///
    /// - Parameters:
    ///   - name: 1 to 251 characters of `A-Z a-z 0-9 _ - %`, not starting with `_` or `%`.
    ///   - scope: the scope's name, by the same rule; nil or `_default` for the default scope.
    ///     A scope exists while it has a collection.
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a name Couchbase Lite would refuse,
    ///   or when called inside ``inBatch(_:)`` (a collection is made in a transaction of its
    ///   own); ``SetteeError/Code/notOpen``; ``SetteeError/Code/io``.
    @discardableResult
    public func createCollection(name: String, scope: String? = Scope.defaultScopeName) throws -> Collection {
        let scopeName = scope ?? Scope.defaultScopeName
        try Self.checkKeyspaceName(name, of: "collection")
        try Self.checkKeyspaceName(scopeName, of: "scope")
        try base.checkOpen()
        if scopeName == Scope.defaultScopeName && name == Collection.defaultCollectionName { return try defaultCollection() }
        let core = try core.file.createCollection(scope: scopeName, name: name)
        return collection(core)
    }

    /// Deletes the collection `name` of scope `scope` with its documents and indexes, in one
    /// transaction; nothing when the database has none. Its ``Collection`` objects answer
    /// ``SetteeError/Code/notOpen`` from then on, and its listeners hear nothing more.
    ///
    /// ```swift
    /// try db.deleteCollection(name: "tasks", scope: "store")
    /// try db.collection(name: "tasks", scope: "store") == nil   // true
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a name Couchbase Lite would refuse,
    ///   for the default collection (which cannot be deleted), or inside ``inBatch(_:)``;
    ///   ``SetteeError/Code/notOpen``; ``SetteeError/Code/io``.
    public func deleteCollection(name: String, scope: String? = Scope.defaultScopeName) throws {
        let scopeName = scope ?? Scope.defaultScopeName
        try Self.checkKeyspaceName(name, of: "collection")
        try Self.checkKeyspaceName(scopeName, of: "scope")
        try base.checkOpen()
        _ = try core.file.deleteCollection(scope: scopeName, name: name)
    }

    /// The ``Collection`` of a named collection's core.
    private func collection(_ core: DatabaseCore) -> Collection {
        Collection(name: core.collectionName, scope: Scope(name: core.scopeName, database: base),
                   store: Database(collection: core, of: base))
    }

    /// The database's scopes, by name: `_default`, and every scope with a collection.
    ///
    /// ```swift
    /// for scope in try db.scopes() { print(scope.name) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen``.
    public func scopes() throws -> [Scope] {
        let names = Set(core.file.namedCores(scope: nil).map(\.scopeName)).subtracting([Scope.defaultScopeName])
        return [try defaultScope()] + names.sorted().map { Scope(name: $0, database: base) }
    }

    /// The scope `name`; nil when the database has none of that name.
    ///
    /// ```swift
    /// let scope = try db.scope(name: "store")
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a name Couchbase Lite would refuse;
    ///   ``SetteeError/Code/notOpen``.
    public func scope(name: String) throws -> Scope? {
        try Self.checkKeyspaceName(name, of: "scope")
        if name == Scope.defaultScopeName { return try defaultScope() }
        try base.checkOpen()
        return core.file.namedCores(scope: name).isEmpty ? nil : Scope(name: name, database: base)
    }

    /// The collections of scope `scope`, by name (none for a scope the database does not have).
    ///
    /// ```swift
    /// let names = try db.collections(scope: "store").map(\.name)   // ["lists", "tasks"]
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a scope name Couchbase Lite would
    ///   refuse; ``SetteeError/Code/notOpen``.
    public func collections(scope: String? = Scope.defaultScopeName) throws -> [Collection] {
        let scopeName = scope ?? Scope.defaultScopeName
        guard try self.scope(name: scopeName) != nil else { return [] }
        let named = core.file.namedCores(scope: scopeName).map(collection)
        return scopeName == Scope.defaultScopeName ? [try defaultCollection()] + named : named
    }

    /// The collection `name` of scope `scope`; nil when there is none.
    ///
    /// ```swift
    /// guard let tasks = try db.collection(name: "tasks", scope: "store") else { return }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a name Couchbase Lite would refuse
    ///   (1 to 251 characters of `A-Z a-z 0-9 _ - %`, not starting with `_` or `%`, `_default`
    ///   aside); ``SetteeError/Code/notOpen``.
    public func collection(name: String, scope: String? = Scope.defaultScopeName) throws -> Collection? {
        let scopeName = scope ?? Scope.defaultScopeName
        try Self.checkKeyspaceName(name, of: "collection")
        try Self.checkKeyspaceName(scopeName, of: "scope")
        try base.checkOpen()
        if scopeName == Scope.defaultScopeName && name == Collection.defaultCollectionName { return try defaultCollection() }
        return core.file.core(scope: scopeName, collection: name).map(collection)
    }

    /// Couchbase Lite's rule for scope and collection names (the sync server checks the names
    /// in its keyspace paths with it).
    @_spi(Server) public static func checkKeyspaceName(_ name: String, of kind: String) throws(SetteeError) {
        if name == Collection.defaultCollectionName { return }
        let bytes = Array(name.utf8)
        // The characters first: once they are ASCII, bytes are characters and the length below is
        // told in the unit the rule speaks of.
        guard bytes.allSatisfy({ b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x2D || b == 0x25
        }) else {
            throw SetteeError(.invalidParameter, "a \(kind) name has only the characters A-Z, a-z, 0-9, _, - and %: '\(name.prefix(40))'")
        }
        guard (1 ... 251).contains(bytes.count) else {
            throw SetteeError(.invalidParameter, "a \(kind) name has 1 to 251 characters; '\(name.prefix(40))' has \(bytes.count)")
        }
        guard bytes[0] != 0x5F && bytes[0] != 0x25 else {
            throw SetteeError(.invalidParameter, "a \(kind) name starts with neither _ nor % (_default aside): '\(name.prefix(40))'")
        }
    }
}
