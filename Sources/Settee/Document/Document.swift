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
/// The body is kept as stored and parsed on first access to a property. A stored body damaged on
/// disk fails its checksum, so the read that fetches it throws ``SetteeError/Code/corrupted``. One
/// that passes its checksum and still does not parse (a file written by something other than
/// Settee) is reported by ``bodyError``: its accessors read nothing, ``decode(_:)`` throws, and a
/// mutable copy refuses to be saved until ``MutableDocument/setData(_:)`` replaces its properties,
/// so the stored bytes are never overwritten by an edit of nothing.
///
/// ``MutableDocument`` is a `Document` too (as in Couchbase Lite): a resolver or a conflict
/// handler can return either.
///
/// - Note: Thread-safe: a `Document` is immutable; share it freely between threads and tasks. (The
///   class is `@unchecked Sendable` because its one subclass, ``MutableDocument``, guards its
///   mutable state with a lock; apps cannot subclass it.)
public class Document: DocumentReading, @unchecked Sendable, CustomStringConvertible {
    /// The document ID.
    ///
    /// ```swift
    /// print(doc.id)   // "list-1"
    /// ```
    public let id: String
    /// The revision this document is (`<generation>-<digest>`); for a ``MutableDocument``, the
    /// revision it was loaded from or last saved as (nil before its first save).
    ///
    /// ```swift
    /// print(doc.revisionID ?? "")   // "2-3f1c…"
    /// ```
    public var revisionID: String? { storedRevisionID }
    /// The database sequence of the change that made this the current revision (0 for an older
    /// revision read with `Database.document(withID:revisionID:)`, and for a ``MutableDocument``
    /// never saved through that object).
    ///
    /// ```swift
    /// print(doc.sequence)
    /// ```
    public var sequence: UInt64 { storedSequence }
    /// Whether this revision is a tombstone (a deletion, possibly keeping some properties); for a
    /// ``MutableDocument``, whether saving it writes one (``MutableDocument/isDeletion``).
    ///
    /// ```swift
    /// if doc.isDeleted { print("deleted") }
    /// ```
    public var isDeleted: Bool { storedIsDeleted }

    private let storedRevisionID: String?
    private let storedSequence: UInt64
    private let storedIsDeleted: Bool
    /// Canonical JSON of the properties.
    let body: [UInt8]
    let blobs: BlobStore?
    private let parsed = Mutex<Swift.Result<[String: JSONValue], SetteeError>?>(nil)

    init(id: String, revisionID: String?, sequence: UInt64, isDeleted: Bool, body: [UInt8], blobs: BlobStore?) {
        self.id = id
        self.storedRevisionID = revisionID
        self.storedSequence = sequence
        self.storedIsDeleted = isDeleted
        self.body = body
        self.blobs = blobs
    }

    init(id: String, revisionID: String?, sequence: UInt64, isDeleted: Bool, properties: [String: JSONValue],
         body: [UInt8], blobs: BlobStore?) {
        self.id = id
        self.storedRevisionID = revisionID
        self.storedSequence = sequence
        self.storedIsDeleted = isDeleted
        self.body = body
        self.blobs = blobs
        parsed.withLock { $0 = .success(properties) }
    }

    /// The parsed body, parsed once.
    private var parsedBody: Swift.Result<[String: JSONValue], SetteeError> {
        parsed.withLock { cached in
            if let cached { return cached }
            let result: Swift.Result<[String: JSONValue], SetteeError>
            do throws(SetteeError) {
                guard case .object(let o) = try JSONParser.parse(body) else {
                    throw SetteeError(.corrupted, "the stored body of document '\(id)' is not a JSON object")
                }
                result = .success(o)
            } catch {
                result = .failure(SetteeError(.corrupted, "the stored body of document '\(id)' does not parse: \(error.message)"))
            }
            cached = result
            return result
        }
    }

    private var properties: [String: JSONValue] {
        // A body that does not parse reads as no properties here; `bodyError` says so, `decode`
        // throws it, and a mutable copy cannot be saved over the stored bytes.
        (try? parsedBody.get()) ?? [:]
    }

    /// Why the stored body cannot be read, or nil when it can (always nil for a ``MutableDocument``
    /// and for bodies Settee wrote). See the type's discussion.
    ///
    /// ```swift
    /// if let problem = doc.bodyError { log(problem.message) }   // code .corrupted
    /// ```
    public var bodyError: SetteeError? {
        if case .failure(let e) = parsedBody { return e }
        return nil
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
        MutableDocument(id: id, revisionID: revisionID, isDeleted: isDeleted, properties: properties, blobs: blobs,
                        unreadableBody: bodyError)
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
