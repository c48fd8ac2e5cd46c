import Foundation
import Synchronization

/// A saved revision of a document, read from a ``Database``: immutable.
///
/// ```swift
/// if let doc = try db.document(withID: "list-1") {
///     print(doc.id, doc.revisionID ?? "-", doc.string(forKey: "title") ?? "")
///     let editable = doc.toMutable()
/// }
/// ```
///
/// The body is kept as stored and parsed on first access to a property.
///
/// - Note: `Document` is immutable and thread-safe; share it freely between threads and tasks.
public final class Document: DocumentReading, Sendable, CustomStringConvertible {
    /// The document ID.
    ///
    /// ```swift
    /// print(doc.id)   // "list-1"
    /// ```
    public let id: String
    /// The revision this document is (`<generation>-<digest>`).
    ///
    /// ```swift
    /// print(doc.revisionID ?? "")   // "2-3f1c…"
    /// ```
    public let revisionID: String?
    /// The database sequence of the change that made this the current revision (0 for an older
    /// revision read with `Database.document(withID:revisionID:)`).
    ///
    /// ```swift
    /// print(doc.sequence)
    /// ```
    public let sequence: UInt64
    /// Whether this revision is a tombstone (a deletion, possibly keeping some properties).
    ///
    /// ```swift
    /// if doc.isDeleted { print("deleted") }
    /// ```
    public let isDeleted: Bool

    /// Canonical JSON of the properties.
    let body: [UInt8]
    let blobs: BlobStore?
    private let parsed = Mutex<[String: JSONValue]?>(nil)

    init(id: String, revisionID: String?, sequence: UInt64, isDeleted: Bool, body: [UInt8], blobs: BlobStore?) {
        self.id = id
        self.revisionID = revisionID
        self.sequence = sequence
        self.isDeleted = isDeleted
        self.body = body
        self.blobs = blobs
    }

    init(id: String, revisionID: String?, sequence: UInt64, isDeleted: Bool, properties: [String: JSONValue],
         body: [UInt8], blobs: BlobStore?) {
        self.id = id
        self.revisionID = revisionID
        self.sequence = sequence
        self.isDeleted = isDeleted
        self.body = body
        self.blobs = blobs
        parsed.withLock { $0 = properties }
    }

    private var properties: [String: JSONValue] {
        parsed.withLock { cached in
            if let cached { return cached }
            // Bodies are checked when they are written; a body that no longer parses was damaged
            // on disk, and reads as empty rather than crashing the application.
            var dict: [String: JSONValue] = [:]
            if !body.isEmpty, case .object(let o)? = try? JSONParser.parse(body) { dict = o }
            cached = dict
            return dict
        }
    }

    /// The property `key`, or nil.
    ///
    /// ```swift
    /// let v = doc.value(forKey: "title")
    /// ```
    public func value(forKey key: String) -> JSONValue? { properties[key] }

    /// Every property.
    ///
    /// ```swift
    /// let dict = doc.toDictionary()
    /// ```
    public func toDictionary() -> [String: JSONValue] { properties }

    /// A blob stored under `key` (a dictionary with `"@type": "blob"`), or nil.
    ///
    /// ```swift
    /// if let photo = doc.blob(forKey: "photo"), let bytes = photo.content { show(bytes) }
    /// ```
    public func blob(forKey key: String) -> Blob? {
        guard case .object(let o)? = value(forKey: key) else { return nil }
        return Blob(properties: o, store: blobs)
    }

    /// A mutable copy, to change and save as the next revision.
    ///
    /// ```swift
    /// let m = doc.toMutable()
    /// m.setString("done", forKey: "status")
    /// try db.saveDocument(m)
    /// ```
    public func toMutable() -> MutableDocument {
        MutableDocument(id: id, revisionID: revisionID, isDeleted: isDeleted, properties: properties, blobs: blobs)
    }

    /// ID, revision and deletion, never the body.
    ///
    /// ```swift
    /// print(doc)   // Document(task-1, rev 2-…)
    /// ```
    public var description: String {
        "Document(\(id), rev \(revisionID ?? "none")\(isDeleted ? ", deleted" : ""))"
    }
}
