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

    /// An index of `expressions`, optionally only of documents meeting `where`.
    ///
    /// ```swift
    /// let config = ValueIndexConfiguration(["type", "list.id"])
    /// ```
    public init(_ expressions: [String], where: String? = nil) {
        self.expressions = expressions
        self.where = `where`
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
