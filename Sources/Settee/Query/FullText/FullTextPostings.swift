/// The number that identifies a document in a full-text index (see ``FullTextPostings``):
/// postings are sorted by it.
///
/// ```swift
/// let id: FullTextDocumentID = 42
/// ```
typealias FullTextDocumentID = UInt64

/// Where a full-text query reads the index: for each term, the documents that contain it in
/// ascending document order, with the term's frequency and positions; and the counts BM25
/// needs. ``FullTextEvaluator`` runs a ``FullTextQuery`` over any conforming type.
///
/// ```swift
/// var postings = InMemoryFullTextPostings(analyzer: FullTextAnalyzer(language: "en"))
/// postings.index(1, fields: ["Running shoes", "Light and fast"])
/// let query = try FullTextQuery("run*", analyzer: postings.analyzer)
/// let matches = try FullTextEvaluator(query: query, postings: postings).allMatches()
/// ```
///
/// ## Designed for a sorted key-value store
///
/// The protocol asks for nothing a B-tree cannot answer with one range or one seek. The
/// layout the storage side is expected to use (all keys in one tree per index, each kind
/// behind its own one-byte tag):
///
/// - postings: `term ‖ 0x00 ‖ documentKey` → term frequency and delta-encoded positions.
///   Terms contain no 0x00 byte (the tokenizer only emits letters and digits), so one term's
///   keys are one contiguous range, sorted by document key: a ``Cursor`` is a B-tree cursor
///   over that range, ``FullTextPostingCursor/seek(atLeast:)`` a seek to
///   `term ‖ 0x00 ‖ target`.
/// - terms: `term` → document frequency (kept up to date with the postings), giving
///   ``documentFrequency(of:)`` in one lookup and ``forEachTerm(withPrefix:_:)`` as the
///   range `[prefix, prefix ‖ 0xFF)`.
/// - lengths: `documentKey` → the document's number of indexed terms, for
///   ``documentLength(of:)``; and one record with the document count and the total length.
///
/// The evaluator combines cursors with sorted merges only (intersection by seeking,
/// union with a heap, difference by seeking the excluded side), reads positions only for
/// phrase candidates, and looks up a document's length only once it matches: nothing is
/// materialised beyond one cursor per query term (and per term a prefix expands to).
///
/// ## Document numbers
///
/// Documents are identified by a ``FullTextDocumentID`` (UInt64), not by their string IDs:
/// the storage side gives each indexed document a number (kept in a `documentID → number`
/// and a `number → documentID` range of the same tree) and writes it big-endian in the keys,
/// so that key order is number order. Why a number: it is the key suffix of every posting, so
/// a long document ID would be repeated once per term of the document, where a number is 8
/// bytes (and delta-encodes if postings are ever packed in blocks); and the evaluator's
/// merges compare plain integers (Couchbase Lite's SQLite FTS uses the rowid the same way).
///
/// - Note: Thread-safety is the conforming type's; ``FullTextEvaluator`` calls it from one
///   thread at a time (inside one read transaction, for the storage implementation).
protocol FullTextPostings {
    /// Walks one term's documents in ascending order.
    associatedtype Cursor: FullTextPostingCursor

    /// The number of documents in the index (documents with no indexed term included, if
    /// the store counts them: they lower the average length).
    ///
    /// ```swift
    /// let n = try postings.documentCount()
    /// ```
    func documentCount() throws -> Int

    /// The number of indexed terms of all documents together (occurrences, not distinct
    /// terms), for the average document length.
    ///
    /// ```swift
    /// let average = Double(try postings.totalDocumentLength()) / Double(try postings.documentCount())
    /// ```
    func totalDocumentLength() throws -> Int

    /// The number of indexed terms of one document (stop words not counted).
    ///
    /// ```swift
    /// let length = try postings.documentLength(of: 42)
    /// ```
    func documentLength(of document: FullTextDocumentID) throws -> Int

    /// How many documents contain `term` (0 when none does).
    ///
    /// ```swift
    /// let df = try postings.documentFrequency(of: "run")
    /// ```
    func documentFrequency(of term: String) throws -> Int

    /// A cursor on the first document containing `term`, or an exhausted one when none does.
    ///
    /// ```swift
    /// var cursor = try postings.cursor(forTerm: "run")
    /// while let doc = cursor.document { print(doc, cursor.termFrequency); try cursor.next() }
    /// ```
    func cursor(forTerm term: String) throws -> Cursor

    /// Calls `body` with each term starting with `prefix` (byte-wise, on UTF-8), in ascending
    /// byte order, until it returns false.
    ///
    /// ```swift
    /// try postings.forEachTerm(withPrefix: "data") { term in print(term); return true }
    /// ```
    func forEachTerm(withPrefix prefix: String, _ body: (String) throws -> Bool) throws
}

/// A position in one term's list of documents, in ascending document order.
///
/// ```swift
/// var cursor = try postings.cursor(forTerm: "shoe")
/// try cursor.seek(atLeast: 10)
/// if let doc = cursor.document { print(doc, try cursor.positions()) }
/// ```
///
/// - Note: A cursor is used by one thread at a time; a storage cursor is valid for the read
///   transaction that made it.
protocol FullTextPostingCursor {
    /// The document the cursor is on; nil once past the last.
    ///
    /// ```swift
    /// while let doc = cursor.document { …; try cursor.next() }
    /// ```
    var document: FullTextDocumentID? { get }

    /// How many times the term occurs in ``document`` (at least 1).
    ///
    /// ```swift
    /// let tf = cursor.termFrequency
    /// ```
    var termFrequency: Int { get }

    /// The term's positions in ``document``, ascending (decoded on demand: only phrases ask).
    ///
    /// ```swift
    /// let positions = try cursor.positions()   // [0, 17]
    /// ```
    func positions() throws -> [Int]

    /// Moves to the next document (or past the last).
    ///
    /// ```swift
    /// try cursor.next()
    /// ```
    mutating func next() throws

    /// Moves to the first document at or after `target`; never backwards (a cursor already
    /// at or after `target` stays).
    ///
    /// ```swift
    /// try cursor.seek(atLeast: 100)
    /// ```
    mutating func seek(atLeast target: FullTextDocumentID) throws
}
