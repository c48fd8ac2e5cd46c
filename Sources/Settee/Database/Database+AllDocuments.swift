import SetteeStorage

/// What ``Database/allDocuments(_:)`` returns: a key range or prefix, paging, order, and modes.
///
/// ```swift
/// var options = AllDocumentsOptions()
/// options.prefix = "task:"
/// options.limit = 50
/// for doc in try db.allDocuments(options) { print(doc.id) }
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

/// The documents matching ``AllDocumentsOptions``, read in batches as the sequence is iterated
/// (each batch is a consistent snapshot; a long iteration may see later commits in later
/// batches).
///
/// ```swift
/// for doc in try db.allDocuments() { print(doc.id, doc.revisionID ?? "") }
/// ```
///
/// Errors reading the first batch are thrown by ``Database/allDocuments(_:)``; an error in a
/// later batch ends the iteration, and the iterator's ``Iterator/error`` says what it was. Use
/// ``Database/forEachDocument(_:_:)`` to have every error thrown.
///
/// - Note: A value type; safe to share between threads. Each iterator belongs to one thread.
public struct AllDocumentsSequence: Sequence, Sendable {
    let database: Database
    let options: AllDocumentsOptions
    let first: AllDocumentsPage

    /// Iterates the documents.
    ///
    /// ```swift
    /// var it = try db.allDocuments().makeIterator()
    /// while let doc = it.next() { print(doc.id) }
    /// if let e = it.error { throw e }
    /// ```
    public struct Iterator: IteratorProtocol {
        let database: Database
        let options: AllDocumentsOptions
        var page: AllDocumentsPage
        var position = 0
        /// The error that ended the iteration early, if any.
        ///
        /// ```swift
        /// if let e = iterator.error { print(e) }
        /// ```
        public private(set) var error: (any Error)?

        /// The next document, or nil at the end.
        ///
        /// ```swift
        /// let doc = iterator.next()
        /// ```
        public mutating func next() -> Document? {
            while true {
                if position < page.documents.count {
                    defer { position += 1 }
                    return page.documents[position]
                }
                guard let resume = page.resume else { return nil }
                do {
                    page = try database.page(options, resume: resume)
                    position = 0
                } catch {
                    self.error = error
                    return nil
                }
            }
        }
    }

    /// Starts an iteration.
    ///
    /// ```swift
    /// var it = sequence.makeIterator()
    /// ```
    public func makeIterator() -> Iterator {
        Iterator(database: database, options: options, page: first)
    }
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

    /// The documents matching `options`, streamed in batches.
    ///
    /// ```swift
    /// var options = AllDocumentsOptions()
    /// options.onlyConflicts = true
    /// for doc in try db.allDocuments(options) { try resolve(doc.id) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a negative skip or limit,
    ///   ``SetteeError/Code/notOpen``, ``SetteeError/Code/corrupted``.
    public func allDocuments(_ options: AllDocumentsOptions = AllDocumentsOptions()) throws -> AllDocumentsSequence {
        try checkOpen()
        guard options.skip >= 0, (options.limit ?? 0) >= 0 else {
            throw SetteeError(.invalidParameter, "skip and limit cannot be negative")
        }
        let first = try page(options, resume: AllDocumentsPage.Resume(after: [], skip: options.skip, remaining: options.limit))
        return AllDocumentsSequence(database: self, options: options, first: first)
    }

    /// Calls `body` with each document matching `options`, stopping when it returns false; every
    /// error is thrown.
    ///
    /// ```swift
    /// try db.forEachDocument(AllDocumentsOptions()) { doc in print(doc.id); return true }
    /// ```
    public func forEachDocument(_ options: AllDocumentsOptions, _ body: (Document) throws -> Bool) throws {
        var it = try allDocuments(options).makeIterator()
        while let d = it.next() {
            guard try body(d) else { return }
        }
        if let e = it.error { throw e }
    }

    func page(_ o: AllDocumentsOptions, resume: AllDocumentsPage.Resume) throws -> AllDocumentsPage {
        try checkOpen()
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
        try core.read { tx in
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
