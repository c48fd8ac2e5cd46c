import Foundation

/// What an index is built from: ``ValueIndexConfiguration`` (values of expressions, in key
/// order) or ``FullTextIndexConfiguration`` (words of text). Pass one to
/// ``Database/createIndex(_:name:)``.
///
/// ```swift
/// try db.createIndex(ValueIndexConfiguration(["type", "list.id", "createdAt"]), name: "tasks")
/// ```
///
/// Settee's own configurations are the only conforming types the database accepts; another
/// type is refused with ``SetteeError/Code/invalidParameter``.
///
/// - Note: Conforming types are values; safe to share between threads.
public protocol IndexConfiguration: Sendable {}

/// A value index, as Couchbase Lite names it: the values of one or more SQL++ expressions of
/// each document, kept in CouchDB's collation order (`Formats/collation.md`) in the same commit
/// as every change of a document's current revision. A query whose `WHERE` compares the first
/// expressions with constants or parameters, or orders by them, reads the index instead of
/// every document (``Query/explain()`` says so).
///
/// ```swift
/// try db.createIndex(ValueIndexConfiguration(["type", "list.id", "createdAt"]), name: "tasks")
/// try db.createIndex(ValueIndexConfiguration(["lower(title)"]), name: "titles")
/// // Only the documents the condition holds for (a partial index):
/// try db.createIndex(ValueIndexConfiguration(["createdAt"], where: "type = 'task'"), name: "task-dates")
/// ```
///
/// A document is in the index when its first expression has a value (not MISSING: a document
/// without the property is not in a single-property index) and, for a partial index, its
/// `where` condition is true. Later expressions may be MISSING. Deleted documents are never in
/// an index. Expressions are SQL++ (``Database/createQuery(_:)``) without parameters,
/// aggregates or `META()` properties other than `META().id`.
///
/// - Note: A value type; safe to share between threads.
public struct ValueIndexConfiguration: IndexConfiguration, Hashable {
    /// The indexed expressions, in key order.
    ///
    /// ```swift
    /// print(ValueIndexConfiguration(["type", "createdAt"]).expressions)   // ["type", "createdAt"]
    /// ```
    public let expressions: [String]
    /// The condition a document must meet to be indexed (a partial index); nil for every
    /// document.
    ///
    /// ```swift
    /// let c = ValueIndexConfiguration(["createdAt"], where: "type = 'task'")
    /// print(c.where ?? "every document")
    /// ```
    public let `where`: String?
    /// Whether the index also keeps each entry under every channel of its document (as the
    /// router routed the current revision: ``Database/setRouter(_:)``), so that a query
    /// restricted to a few channels (``Query/channels``) reads only their entries instead of
    /// every entry and the routing of each.
    ///
    /// ```swift
    /// try db.createIndex(ValueIndexConfiguration(["createdAt"], byChannel: true), name: "dates")
    /// let q = try db.createQuery("SELECT META().id FROM _ WHERE createdAt >= $from ORDER BY createdAt LIMIT 20")
    /// q.channels = ["list-7"]   // reads list-7's entries only
    /// ```
    ///
    /// Such an index costs one more entry per channel of each document, written in the same
    /// commit; queries without channels read it as any other.
    public let byChannel: Bool
    /// More expressions whose values each entry keeps beside its key (not part of it, so they
    /// neither order the entries nor narrow a range): a query that reads only the indexed and
    /// covering expressions and `META().id` answers from the index alone, reading no document
    /// (``Query/explain()`` says `COVERING`). Couchbase Lite has no such option; a
    /// configuration without it is Couchbase Lite's.
    ///
    /// ```swift
    /// try db.createIndex(ValueIndexConfiguration(["type", "list.id", "createdAt"], covering: ["title"]), name: "tasks")
    /// // Reads no document: every row comes from the index's entries.
    /// let q = try db.createQuery("""
    ///     SELECT META().id, title FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 20
    ///     """)
    /// ```
    ///
    /// Each entry grows by its covering values' JSON, written in the same commit as the rest
    /// of the entry.
    public let covering: [String]

    /// An index of `expressions`, optionally only of documents meeting `where`, with
    /// `byChannel` also kept per channel, and keeping the values of `covering` in each entry.
    ///
    /// ```swift
    /// let config = ValueIndexConfiguration(["type", "list.id"])
    /// let covered = ValueIndexConfiguration(["list.id", "createdAt"], covering: ["title", "done"])
    /// ```
    public init(_ expressions: [String], where: String? = nil, byChannel: Bool = false, covering: [String] = []) {
        self.expressions = expressions
        self.where = `where`
        self.byChannel = byChannel
        self.covering = covering
    }
}

/// A full-text index, as Couchbase Lite names it: the words of one or more string
/// expressions of each document, for `MATCH(index, 'query')` in SQL++ and
/// ``FullTextFunction/match(index:query:)`` in QueryBuilder, ranked by
/// `RANK(index)` (BM25: higher is more relevant). Kept in the same commit as every change of
/// a document's current revision, like a value index.
///
/// ```swift
/// try db.createIndex(FullTextIndexConfiguration(["title", "notes"], language: "english"), name: "text")
/// let q = try db.createQuery("""
///     SELECT META().id, title FROM _ WHERE MATCH(text, 'buy milk*') ORDER BY RANK(text) DESC LIMIT 20
///     """)
/// ```
///
/// A document is in the index when at least one expression gives a string (other values are
/// not indexed) and, for a partial index, its `where` condition is true. Words are split at
/// what is not a letter or digit and folded (`Formats/indexes.md`): lower case, Unicode
/// compatibility forms, accents removed with `ignoreAccents`. A `language` ("fr", "en-US",
/// "french"…) that Snowball stems (28 of them, Couchbase Lite's 15 among them) adds its stemmer
/// ("running" finds "runs", "chanteurs" finds "chanteur") and its stop words; any other
/// language, and nil, indexes words as they are. On Apple's systems, which have no Snowball,
/// English is stemmed by Settee's Porter2 and other languages are not stemmed. Unlike Couchbase Lite,
/// nil does not mean the device's language: an index must give the same words on every
/// device that opens the database.
///
/// - Note: A value type; safe to share between threads.
public struct FullTextIndexConfiguration: IndexConfiguration, Hashable {
    /// The indexed expressions; their words are indexed one after the other (a phrase never
    /// spans two of them).
    ///
    /// ```swift
    /// print(FullTextIndexConfiguration(["title", "notes"]).expressions)   // ["title", "notes"]
    /// ```
    public let expressions: [String]
    /// The condition a document must meet to be indexed; nil for every document.
    ///
    /// ```swift
    /// let c = FullTextIndexConfiguration(["notes"], where: "type = 'task'")
    /// print(c.where ?? "every document")
    /// ```
    public let `where`: String?
    /// Whether accents are removed from words and queries ("cafe" finds "café").
    ///
    /// ```swift
    /// print(FullTextIndexConfiguration(["name"], ignoreAccents: true).ignoreAccents)   // true
    /// ```
    public let ignoreAccents: Bool
    /// The language code that chooses stop words and stemming ("en", "fr-CA", "german"); nil
    /// for none.
    ///
    /// ```swift
    /// print(FullTextIndexConfiguration(["title"], language: "en").language ?? "none")   // en
    /// ```
    public let language: String?

    /// A full-text index of `expressions`.
    ///
    /// ```swift
    /// let config = FullTextIndexConfiguration(["title", "notes"], language: "english")
    /// ```
    public init(_ expressions: [String], where: String? = nil, ignoreAccents: Bool = false, language: String? = nil) {
        self.expressions = expressions
        self.where = `where`
        self.ignoreAccents = ignoreAccents
        self.language = language
    }
}

/// How far ``Database/createIndex(_:name:progress:)`` has come building a new index over the
/// documents already in the database.
///
/// ```swift
/// try db.createIndex(config, name: "tasks") { p in
///     print("\(p.documentsIndexed) of about \(p.documentsTotal)")
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct IndexBuildProgress: Sendable, Hashable {
    /// Documents read so far (deleted ones are skipped and not counted).
    ///
    /// ```swift
    /// let done = progress.documentsIndexed
    /// ```
    public var documentsIndexed: Int
    /// The live documents when the build started (writes during the build move the real
    /// figure; the build indexes those too).
    ///
    /// ```swift
    /// let fraction = Double(p.documentsIndexed) / Double(max(p.documentsTotal, 1))
    /// ```
    public var documentsTotal: Int
}
