import Synchronization
internal import SetteeStorage

/// What ``Database/allDocuments(_:)`` returns: a key range or prefix, paging, order, and modes.
///
/// ```swift
/// var options = AllDocumentsOptions()
/// options.prefix = "task:"
/// options.limit = 50
/// let cursor = try db.allDocuments(options)
/// while let doc = try cursor.next() { print(doc.id) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct AllDocumentsOptions: Sendable, Equatable {
    /// The first document ID (the highest when ``descending``), inclusive.
    ///
    /// ```swift
    /// options.startKey = "b"
    /// ```
    public var startKey: String?
    /// The last document ID (the lowest when ``descending``), inclusive.
    ///
    /// ```swift
    /// options.endKey = "c"
    /// ```
    public var endKey: String?
    /// Only IDs starting with this prefix.
    ///
    /// ```swift
    /// options.prefix = "user:"
    /// ```
    public var prefix: String?
    /// At most this many documents (nil: no limit).
    ///
    /// ```swift
    /// options.limit = 100
    /// ```
    public var limit: Int?
    /// Skip this many matching documents first.
    ///
    /// ```swift
    /// options.skip = 100
    /// ```
    public var skip: Int = 0
    /// Highest ID first.
    ///
    /// ```swift
    /// options.descending = true
    /// ```
    public var descending = false
    /// Include deleted documents (their tombstones, ``Document/isDeleted`` true).
    ///
    /// ```swift
    /// options.includeDeleted = true
    /// ```
    public var includeDeleted = false
    /// Only documents in conflict (seed 001's `onlyConflicts` mode); costs O(conflicts), not
    /// O(documents).
    ///
    /// ```swift
    /// options.onlyConflicts = true
    /// ```
    public var onlyConflicts = false

    /// Every document, ascending by ID.
    ///
    /// ```swift
    /// let all = try db.allDocuments(AllDocumentsOptions())
    /// ```
    public init() {}
}

/// The documents matching ``AllDocumentsOptions``, from one snapshot of the database, read in
/// batches as they are asked for: a throwing cursor, and an `AsyncSequence`.
///
/// ```swift
/// let cursor = try db.allDocuments()
/// while let doc = try cursor.next() { print(doc.id, doc.revisionID ?? "") }
/// ```
///
/// ```swift
/// for try await doc in try db.allDocuments() { print(doc.id) }
/// ```
///
/// Every error reaches the caller: the first batch's from ``Database/allDocuments(_:)``, a later
/// one's from ``next()`` (a closed database throws ``SetteeError/Code/notOpen``). The cursor sees
/// the commit that was current when it was made, whatever is written meanwhile; it keeps that
/// commit's memory until it is released. Made inside `Database.inBatch(_:)` on the batch's
/// thread, it reads the batch's transaction instead, with the batch's own writes.
///
/// - Note: Thread-safe: the cursor may be used from any thread or task (calls are serialized);
///   share one cursor between tasks only if they are meant to split its documents.
public final class DocumentCursor: AsyncSequence, Sendable {
    /// What the cursor yields.
    public typealias Element = Document

    private struct State {
        var page: AllDocumentsPage
        var position = 0
    }

    private let database: Database
    private let options: AllDocumentsOptions
    /// The commit every batch is read from; nil when made inside a batch (read through it).
    private let held: StoreSnapshot?
    private let state: Mutex<State>

    init(database: Database, options: AllDocumentsOptions, held: StoreSnapshot?, first: AllDocumentsPage) {
        self.database = database
        self.options = options
        self.held = held
        self.state = Mutex(State(page: first))
    }

    /// The next document, or nil at the end.
    ///
    /// ```swift
    /// while let doc = try cursor.next() { index(doc) }
    /// ```
    ///
    /// - Throws: what reading the next batch throws (``SetteeError/Code/notOpen`` once the
    ///   database is closed, ``SetteeError/Code/corrupted``, ``SetteeError/Code/io``).
    public func next() throws -> Document? {
        try state.withLock { s throws -> Document? in
            while true {
                if s.position < s.page.documents.count {
                    defer { s.position += 1 }
                    return s.page.documents[s.position]
                }
                guard let resume = s.page.resume else { return nil }
                s.page = try database.page(options, resume: resume, held: held)
                s.position = 0
            }
        }
    }

    /// The documents not read yet, all at once (for small results: they are held in memory).
    ///
    /// ```swift
    /// let ids = try db.allDocuments(options).readAll().map(\.id)
    /// ```
    ///
    /// - Throws: as ``next()``.
    public func readAll() throws -> [Document] {
        var out: [Document] = []
        while let d = try next() { out.append(d) }
        return out
    }

    /// Iterates the cursor's remaining documents asynchronously.
    ///
    /// ```swift
    /// var it = cursor.makeAsyncIterator()
    /// while let doc = try await it.next() { print(doc.id) }
    /// ```
    public struct AsyncIterator: AsyncIteratorProtocol {
        let cursor: DocumentCursor

        /// The next document, or nil at the end.
        ///
        /// ```swift
        /// let doc = try await iterator.next()
        /// ```
        public mutating func next() async throws -> Document? {
            try Task.checkCancellation()
            return try cursor.next()
        }
    }

    /// An iterator over the cursor's remaining documents.
    ///
    /// ```swift
    /// for try await doc in cursor { print(doc.id) }
    /// ```
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(cursor: self) }
}

/// One batch of rows and where the next starts.
struct AllDocumentsPage: Sendable {
    var documents: [Document] = []
    var resume: Resume?

    struct Resume: Sendable {
        var after: [UInt8]
        var skip: Int
        var remaining: Int?
    }
}

extension Database {
    static let pageSize = 256

    /// The documents matching `options`, from one snapshot, as a cursor.
    ///
    /// ```swift
    /// var options = AllDocumentsOptions()
    /// options.onlyConflicts = true
    /// let conflicted = try db.allDocuments(options)
    /// while let doc = try conflicted.next() { try db.resolveConflict(withID: doc.id) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a negative skip or limit,
    ///   ``SetteeError/Code/notOpen``, ``SetteeError/Code/corrupted``.
    public func allDocuments(_ options: AllDocumentsOptions = AllDocumentsOptions()) throws -> DocumentCursor {
        try checkOpen()
        guard options.skip >= 0, (options.limit ?? 0) >= 0 else {
            throw SetteeError(.invalidParameter, "skip and limit cannot be negative")
        }
        let held = core.batchTransactionOnThisThread() == nil ? core.store.snapshot() : nil
        let first = try page(options, resume: AllDocumentsPage.Resume(after: [], skip: options.skip, remaining: options.limit), held: held)
        return DocumentCursor(database: self, options: options, held: held, first: first)
    }

    /// Calls `body` with each document matching `options`, stopping when it returns false; every
    /// error is thrown.
    ///
    /// ```swift
    /// try db.forEachDocument(AllDocumentsOptions()) { doc in print(doc.id); return true }
    /// ```
    public func forEachDocument(_ options: AllDocumentsOptions, _ body: (Document) throws -> Bool) throws {
        let cursor = try allDocuments(options)
        while let d = try cursor.next() {
            guard try body(d) else { return }
        }
    }

    /// One batch, from the held commit (or through the batch when there is none).
    func page(_ o: AllDocumentsOptions, resume: AllDocumentsPage.Resume, held: StoreSnapshot?) throws -> AllDocumentsPage {
        try checkOpen()
        if let held { return try translating { try held.read { tx in try page(tx, o, resume: resume) } } }
        return try core.read { tx in try page(tx, o, resume: resume) }
    }

    private func page(_ tx: some StoreReading, _ o: AllDocumentsOptions, resume: AllDocumentsPage.Resume) throws -> AllDocumentsPage {
        var out = AllDocumentsPage()
        if resume.remaining == 0 { return out }
        let prefix = o.prefix.map { Array($0.utf8) }
        let startKey = o.startKey.map { Array($0.utf8) }
        let endKey = o.endKey.map { Array($0.utf8) }
        var from: [UInt8]? = resume.after.isEmpty ? nil : resume.after
        if from == nil {
            if o.descending {
                from = startKey
                if let p = prefix, from == nil || from!.lexicographicallyPrecedes(p + [0xff]) == false {
                    from = p + [0xff]   // IDs are UTF-8, which never holds 0xff
                }
            } else {
                from = startKey
                if let p = prefix, from == nil || from!.lexicographicallyPrecedes(p) { from = p }
            }
        }
        var skip = resume.skip
        var remaining = resume.remaining
        var last: [UInt8] = []
        var full = false
        let tree = o.onlyConflicts ? core.trees.conflicts : core.trees.byID
        do {
            try tx.forEach(in: tree, from: from, reverse: o.descending) { k, v in
                let key = Array(k)
                if !resume.after.isEmpty && key == resume.after { return true }
                if let p = prefix {
                    guard key.starts(with: p) else {
                        // Outside the prefix: before it we keep going, past it we stop.
                        return o.descending ? !key.lexicographicallyPrecedes(p) : key.lexicographicallyPrecedes(p)
                    }
                }
                if let e = endKey {
                    if o.descending ? key.lexicographicallyPrecedes(e) : e.lexicographicallyPrecedes(key) { return false }
                }
                if out.documents.count >= Self.pageSize {
                    full = true
                    return false
                }
                last = key
                let meta: DocMeta
                if o.onlyConflicts {
                    guard let m = try core.meta(tx, id: key) else {
                        throw SetteeError(.corrupted, "the conflicts index names a missing document")
                    }
                    meta = m
                } else {
                    meta = try DocMeta(decoding: v)
                }
                if meta.flags.contains(.deleted) && !o.includeDeleted { return true }
                if skip > 0 { skip -= 1; return true }
                guard let id = key.withUnsafeBytes(makeString) else {
                    throw SetteeError(.corrupted, "a document ID is not UTF-8")
                }
                out.documents.append(try core.document(tx, id: id, meta: meta))
                if let r = remaining {
                    remaining = r - 1
                    if r - 1 == 0 { return false }
                }
                return true
            }
        }
        if full && remaining != 0 {
            out.resume = AllDocumentsPage.Resume(after: last, skip: skip, remaining: remaining)
        }
        return out
    }
}
