import Foundation
internal import SetteeStorage

/// A map index: rows an application function makes of each document (any number per
/// document, each a key and a value), kept in key order (`Formats/collation.md`) in the same
/// commit as every change of a document's current revision. CouchDB's views are map indexes;
/// so were Couchbase Lite 1's.
///
/// ```swift
/// let byList = MapIndexConfiguration(version: "1") { doc in
///     guard doc.properties["type"] == "task", let list = doc.properties["list"] else { return [] }
///     return [MapIndexEmission(key: list, value: doc.properties["title"] ?? nil)]
/// }
/// try db.createIndex(byList, name: "tasks-by-list")
/// try db.mapIndexRows("tasks-by-list", ranges: [.key("groceries")]) { row in
///     print(row.documentID, row.value)
///     return true
/// }
/// ```
///
/// The function is not stored: the catalog keeps the index's rows and `version`. Give the
/// configuration again after every open, before writing (with the same version the rows are
/// kept; with another, the index is rebuilt). A write made while the function is not given
/// cannot keep the index whole: it marks the index for rebuilding, and queries refuse it
/// until the function is given again. Change `version` whenever the function changes what it
/// emits.
///
/// The function runs in the writing thread's commit (keep it short and free of side effects),
/// once for the transaction's documents together (so a read inside ``Database/inBatch(_:)``
/// does not see the rows of the batch's own documents until it commits), and, while an index
/// is built, on the building thread. It sees the current revision of each
/// live document; deleted documents have no rows. When it throws, the document has no rows
/// in the index and the error is logged (swift-log, label `settee`); the write goes on. A key
/// whose entry would be longer than a stored key may be (1,024 bytes with the document ID) is left out and logged.
///
/// - Note: A value type; safe to share between threads. `map` is called from any thread.
public struct MapIndexConfiguration: IndexConfiguration {
    /// What the function is given, and what it returns.
    ///
    /// ```swift
    /// let map: MapIndexConfiguration.Map = { doc in [MapIndexEmission(key: .string(doc.id), value: nil)] }
    /// ```
    public typealias Map = @Sendable (MapIndexDocument) throws -> [MapIndexEmission]

    /// Names what `map` emits: rows made by another version are replaced by rebuilding.
    ///
    /// ```swift
    /// print(MapIndexConfiguration(version: "2") { _ in [] }.version)   // 2
    /// ```
    public let version: String
    /// What a function given many documents at once returns: one list of rows per document,
    /// in the order given.
    ///
    /// ```swift
    /// let batch: MapIndexConfiguration.Batch = { docs in docs.map { [MapIndexEmission(key: .string($0.id), value: nil)] } }
    /// ```
    public typealias Batch = @Sendable ([MapIndexDocument]) throws -> [[MapIndexEmission]]

    /// The function that makes a document's rows.
    ///
    /// ```swift
    /// let rows = try config.map(MapIndexDocument(id: "a", revisionID: "1-x", properties: [:]))
    /// ```
    public let map: Map
    /// The function given many documents at once, when the configuration was made with one.
    let batch: Batch?

    /// A map index made by `map`, named `version`.
    ///
    /// ```swift
    /// let config = MapIndexConfiguration(version: "1") { doc in
    ///     [MapIndexEmission(key: doc.properties["type"] ?? nil, value: 1)]
    /// }
    /// ```
    public init(version: String, map: @escaping Map) {
        self.version = version
        self.map = map
        self.batch = nil
    }

    /// A map index made by a function that takes many documents at once (up to 256; the
    /// documents of a commit, or of a step of a build), for a function whose every call costs
    /// something of its own (a call into another language runtime). It returns one list of rows
    /// per document, in order. When it throws, or returns another number of lists, each
    /// document of the call is given to it alone, so that only those it throws on have no rows.
    ///
    /// ```swift
    /// let config = MapIndexConfiguration(version: "1", mapBatch: { docs in
    ///     docs.map { doc in [MapIndexEmission(key: doc.properties["type"] ?? nil, value: 1)] }
    /// })
    /// ```
    public init(version: String, mapBatch: @escaping Batch) {
        self.version = version
        self.batch = mapBatch
        self.map = { doc in
            let rows = try mapBatch([doc])
            guard rows.count == 1 else {
                throw SetteeError(.invalidParameter, "a batch map function returned \(rows.count) lists of rows for 1 document")
            }
            return rows[0]
        }
    }
}

/// A document as a map function sees it: its ID, current revision and properties.
///
/// ```swift
/// let config = MapIndexConfiguration(version: "1") { doc in
///     [MapIndexEmission(key: .string(doc.revisionID), value: .int(Int64(doc.properties.count)))]
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexDocument: Sendable, Hashable {
    /// The document's ID.
    ///
    /// ```swift
    /// print(doc.id)
    /// ```
    public let id: String
    /// The current revision's ID.
    ///
    /// ```swift
    /// print(doc.revisionID)   // 3-…
    /// ```
    public let revisionID: String
    /// The current revision's properties (`_attachments` included, as stored).
    ///
    /// ```swift
    /// if doc.properties["type"] == "task" { … }
    /// ```
    public let properties: [String: JSONValue]

    /// A document to give a map function (for testing one).
    ///
    /// ```swift
    /// let doc = MapIndexDocument(id: "a", revisionID: "1-x", properties: ["type": "task"])
    /// ```
    public init(id: String, revisionID: String, properties: [String: JSONValue]) {
        self.id = id
        self.revisionID = revisionID
        self.properties = properties
    }
}

/// One row a map function makes of a document (CouchDB's `emit(key, value)`).
///
/// ```swift
/// MapIndexEmission(key: ["2026", 11], value: 1)
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexEmission: Sendable, Hashable {
    /// What the row is found and ordered by.
    ///
    /// ```swift
    /// print(MapIndexEmission(key: "a", value: nil).key)   // "a"
    /// ```
    public var key: JSONValue
    /// What the row carries.
    ///
    /// ```swift
    /// print(MapIndexEmission(key: "a", value: 2).value)   // 2
    /// ```
    public var value: JSONValue

    /// A row of `key` and `value`.
    ///
    /// ```swift
    /// let row = MapIndexEmission(key: .string(doc.id), value: nil)
    /// ```
    public init(key: JSONValue, value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// A row read from a map index.
///
/// ```swift
/// try db.mapIndexRows("by-type") { row in
///     print(row.key, row.documentID, row.value)
///     return true
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexRow: Sendable, Hashable {
    /// The emitted key.
    ///
    /// ```swift
    /// print(row.key)
    /// ```
    public let key: JSONValue
    /// The emitted value.
    ///
    /// ```swift
    /// print(row.value)
    /// ```
    public let value: JSONValue
    /// The document that emitted the row.
    ///
    /// ```swift
    /// let doc = try db.document(withID: row.documentID)
    /// ```
    public let documentID: String
}

/// A slice of a map index, in the order it is read: from `startKey` (and, among rows of that
/// key, `startDocumentID`) to `endKey` (and `endDocumentID`), as CouchDB's `startkey`,
/// `startkey_docid`, `endkey`, `endkey_docid` and `inclusive_end`. When reading descending,
/// the start is the higher end.
///
/// ```swift
/// var range = MapIndexRange()
/// range.startKey = ["2026", 1]
/// range.endKey = ["2026", 12, [:] as JSONValue]
/// try db.mapIndexRows("by-date", ranges: [range]) { row in print(row.key); return true }
/// ```
///
/// Rows of equal keys are ordered by document ID (its UTF-8 bytes).
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexRange: Sendable, Hashable {
    /// The first key; nil for the first row (the last when descending).
    ///
    /// ```swift
    /// range.startKey = "b"
    /// ```
    public var startKey: JSONValue?
    /// Among the rows of `startKey`, the first document ID; ignored without `startKey`.
    ///
    /// ```swift
    /// range.startDocumentID = "doc-17"
    /// ```
    public var startDocumentID: String?
    /// The last key; nil for the last row (the first when descending).
    ///
    /// ```swift
    /// range.endKey = "m"
    /// ```
    public var endKey: JSONValue?
    /// Among the rows of `endKey`, the last document ID; ignored without `endKey`.
    ///
    /// ```swift
    /// range.endDocumentID = "doc-90"
    /// ```
    public var endDocumentID: String?
    /// Whether rows at the end bound are read.
    ///
    /// ```swift
    /// range.inclusiveEnd = false   // up to "m", without it
    /// ```
    public var inclusiveEnd = true
    /// Only keys that are arrays whose first element is this value (CouchDB's partitioned
    /// views keep `[partition, key]`): without `startKey` or `endKey`, the range starts or ends
    /// where those keys do, so it reads them alone.
    ///
    /// ```swift
    /// range.firstElement = "sensor-17"
    /// range.startKey = ["sensor-17", 100]
    /// ```
    @_spi(Server) public var firstElement: JSONValue?

    /// Every row.
    ///
    /// ```swift
    /// try db.mapIndexRows("by-type", ranges: [MapIndexRange()]) { _ in true }
    /// ```
    public init() {}

    /// The rows whose key is `key` (collation-equal).
    ///
    /// ```swift
    /// try db.mapIndexRows("by-type", ranges: [.key("task")]) { row in print(row.documentID); return true }
    /// ```
    public static func key(_ key: JSONValue) -> MapIndexRange {
        var r = MapIndexRange()
        r.startKey = key
        r.endKey = key
        return r
    }
}

/// What ``Database/mapIndexInfo(forName:)`` tells of a map index.
///
/// ```swift
/// if let info = try db.mapIndexInfo(forName: "by-type"), info.version != "2" { … }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexInfo: Sendable, Hashable {
    /// The version its rows were (or are being) made with.
    ///
    /// ```swift
    /// print(info.version)
    /// ```
    public let version: String
    /// Whether it is whole and can be read (false while it is built, or when it was written
    /// to while its function was not given).
    ///
    /// ```swift
    /// if !info.isReady { try db.createIndex(config, name: "by-type") }
    /// ```
    public let isReady: Bool
    /// Whether this process has given its function (writes keep it whole).
    ///
    /// ```swift
    /// print(info.isAttached)
    /// ```
    public let isAttached: Bool
    /// The rows it holds.
    ///
    /// ```swift
    /// print("\(info.rowCount) rows")
    /// ```
    public let rowCount: Int
}
