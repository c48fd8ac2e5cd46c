import Foundation

/// A document being built or edited, saved with `Database.saveDocument(_:)`.
///
/// ```swift
/// let doc = MutableDocument(id: "task-1")
/// doc.setString("Buy milk", forKey: "title")
/// doc.setBool(false, forKey: "done")
/// try db.saveDocument(doc)
/// print(doc.revisionID!)   // the revision just saved
/// ```
///
/// Top-level keys starting with `_` are reserved (`_id`, `_rev`, `_deleted`, …); saving a
/// document that has one throws ``SetteeError/Code/invalidParameter``.
///
/// - Note: Not thread-safe: use a `MutableDocument` from one thread or task at a time (it is
///   not `Sendable`). Save it, then share the ``Document`` the database returns.
public final class MutableDocument: DocumentReading, CustomStringConvertible {
    /// The document ID.
    ///
    /// ```swift
    /// let doc = MutableDocument()
    /// print(doc.id)   // a new UUID
    /// ```
    public let id: String
    /// The revision this document was loaded from (or last saved as); nil for a new document.
    /// Saving creates a child of it, and a save finds a conflict when the database's current
    /// revision is a different one.
    ///
    /// ```swift
    /// let m = doc.toMutable(); print(m.revisionID == doc.revisionID)   // true
    /// ```
    public internal(set) var revisionID: String?
    /// The sequence of the last save through this object, 0 before.
    ///
    /// ```swift
    /// try db.saveDocument(doc); print(doc.sequence)
    /// ```
    public internal(set) var sequence: UInt64 = 0
    /// When true, saving writes a tombstone that keeps this document's properties (seeds 003 and
    /// 004: a deletion that still carries, say, the `worker_id` a filtered replication routes on).
    ///
    /// ```swift
    /// let m = doc.toMutable()
    /// m.setData(["worker_id": doc["worker_id"] ?? nil, "deleted_at": "2026-11-21"])
    /// m.isDeletion = true
    /// try db.saveDocument(m)   // document(withID:) now returns nil
    /// ```
    public var isDeletion = false

    var properties: [String: JSONValue]
    /// Blobs set on this document whose content is not yet in the database, by digest.
    var pendingBlobs: [String: Blob] = [:]
    let blobs: BlobStore?

    /// A new document with a random UUID as its ID.
    ///
    /// ```swift
    /// let doc = MutableDocument()
    /// ```
    public convenience init() { self.init(id: nil) }

    /// A new document with the given ID (nil: a random UUID).
    ///
    /// ```swift
    /// let doc = MutableDocument(id: "978-0061120053")
    /// ```
    public convenience init(id: String?) { self.init(id: id, data: [:]) }

    /// A new document with the given ID and properties.
    ///
    /// ```swift
    /// let doc = MutableDocument(id: "book-1", data: ["title": "Little, Big", "published": 1982])
    /// ```
    public init(id: String?, data: [String: JSONValue]) {
        self.id = id ?? UUID().uuidString.lowercased()
        self.properties = data
        self.blobs = nil
    }

    /// A new document with a random ID and the given properties.
    ///
    /// ```swift
    /// let doc = MutableDocument(data: ["type": "list", "title": "Groceries"])
    /// ```
    public convenience init(data: [String: JSONValue]) { self.init(id: nil, data: data) }

    /// A new document whose properties are an `Encodable` value's (it must encode as an object;
    /// dates become ISO-8601 strings, data base64).
    ///
    /// ```swift
    /// struct Task: Codable { var title: String; var done: Bool }
    /// let doc = try MutableDocument(id: "task-1", encoding: Task(title: "Buy milk", done: false))
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the value does not encode as an object.
    public convenience init(id: String? = nil, encoding value: some Encodable) throws {
        guard case .object(let o) = try JSONCoding.encode(value) else {
            throw SetteeError(.invalidParameter, "a document must encode as a JSON object")
        }
        self.init(id: id, data: o)
    }

    init(id: String, revisionID: String?, isDeleted: Bool, properties: [String: JSONValue], blobs: BlobStore?) {
        self.id = id
        self.revisionID = revisionID
        self.isDeletion = false
        self.properties = properties
        self.blobs = blobs
    }

    // MARK: - Reading

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

    /// A blob under `key`, or nil.
    ///
    /// ```swift
    /// let photo = doc.blob(forKey: "photo")
    /// ```
    public func blob(forKey key: String) -> Blob? {
        guard case .object(let o)? = properties[key], let b = Blob(properties: o, store: blobs) else { return nil }
        return pendingBlobs[b.digest] ?? b
    }

    // MARK: - Writing

    /// Sets `key` to a value (nil removes the key).
    ///
    /// ```swift
    /// doc.setValue(["apples", "milk"], forKey: "items")
    /// ```
    public func setValue(_ value: JSONValue?, forKey key: String) {
        if let value {
            properties[key] = value
        } else {
            properties.removeValue(forKey: key)
        }
    }

    /// Sets a string (nil removes the key).
    ///
    /// ```swift
    /// doc.setString("Buy milk", forKey: "title")
    /// ```
    public func setString(_ value: String?, forKey key: String) { setValue(value.map(JSONValue.string), forKey: key) }

    /// Sets an integer.
    ///
    /// ```swift
    /// doc.setInt(3, forKey: "count")
    /// ```
    public func setInt(_ value: Int, forKey key: String) { setValue(.int(Int64(value)), forKey: key) }

    /// Sets a 64-bit integer.
    ///
    /// ```swift
    /// doc.setInt64(1 << 40, forKey: "bytes")
    /// ```
    public func setInt64(_ value: Int64, forKey key: String) { setValue(.int(value), forKey: key) }

    /// Sets a double (saving fails if it is NaN or infinite: JSON cannot hold them).
    ///
    /// ```swift
    /// doc.setDouble(2.5, forKey: "price")
    /// ```
    public func setDouble(_ value: Double, forKey key: String) { setValue(.double(value), forKey: key) }

    /// Sets a boolean.
    ///
    /// ```swift
    /// doc.setBool(true, forKey: "done")
    /// ```
    public func setBool(_ value: Bool, forKey key: String) { setValue(.bool(value), forKey: key) }

    /// Sets a date, stored as an ISO-8601 string in UTC with milliseconds (nil removes the key).
    ///
    /// ```swift
    /// doc.setDate(Date(), forKey: "created_at")
    /// ```
    public func setDate(_ value: Date?, forKey key: String) {
        setValue(value.map { .string(JSONDate.string(from: $0)) }, forKey: key)
    }

    /// Sets an array (nil removes the key).
    ///
    /// ```swift
    /// doc.setArray(["a", "b"], forKey: "tags")
    /// ```
    public func setArray(_ value: [JSONValue]?, forKey key: String) { setValue(value.map(JSONValue.array), forKey: key) }

    /// Sets a dictionary (nil removes the key).
    ///
    /// ```swift
    /// doc.setDictionary(["city": "Paris"], forKey: "address")
    /// ```
    public func setDictionary(_ value: [String: JSONValue]?, forKey key: String) {
        setValue(value.map(JSONValue.object), forKey: key)
    }

    /// Sets a blob; its content is stored in the database's blob store when the document is saved.
    /// (A blob nested inside an array or dictionary is set with ``setValue(_:forKey:)`` and its
    /// ``Blob/properties``, after `Database.saveBlob(_:)` stored its content.)
    ///
    /// ```swift
    /// doc.setBlob(Blob(contentType: "image/jpeg", data: jpeg), forKey: "photo")
    /// ```
    public func setBlob(_ blob: Blob?, forKey key: String) {
        guard let blob else { properties.removeValue(forKey: key); return }
        properties[key] = .object(blob.properties)
        if blob.needsInstall { pendingBlobs[blob.digest] = blob }
    }

    /// Replaces every property.
    ///
    /// ```swift
    /// doc.setData(["title": "New title"])
    /// ```
    public func setData(_ data: [String: JSONValue]) {
        properties = data
    }

    /// Removes `key`.
    ///
    /// ```swift
    /// doc.removeValue(forKey: "draft")
    /// ```
    public func removeValue(forKey key: String) { properties.removeValue(forKey: key) }

    /// Reads or sets the property `key` (setting nil removes it).
    ///
    /// ```swift
    /// doc["title"] = "Buy milk"
    /// ```
    public subscript(key: String) -> JSONValue? {
        get { properties[key] }
        set { setValue(newValue, forKey: key) }
    }

    /// An immutable snapshot of the current properties (not saved).
    ///
    /// ```swift
    /// let snapshot = doc.toDocument()
    /// ```
    public func toDocument() -> Document {
        let body = (try? JSONWriter.bytes(.object(properties))) ?? Array("{}".utf8)
        return Document(id: id, revisionID: revisionID, sequence: sequence, isDeleted: isDeletion,
                        properties: properties, body: body, blobs: blobs)
    }

    /// ID and base revision, never the properties.
    ///
    /// ```swift
    /// print(doc)   // MutableDocument(task-1, from rev 1-…)
    /// ```
    public var description: String { "MutableDocument(\(id), from rev \(revisionID ?? "none"))" }
}
