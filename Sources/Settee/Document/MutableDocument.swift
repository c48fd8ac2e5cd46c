import Foundation
import Synchronization

/// A document being built or edited, saved with `Database.saveDocument(_:)`. It is a ``Document``
/// (as in Couchbase Lite), so it can be passed or returned wherever one is expected: a conflict
/// resolver may return a new `MutableDocument` as its merge.
///
/// ```swift
/// let doc = MutableDocument(id: "task-1")
/// doc.setString("Buy milk", forKey: "title")
/// doc.setBoolean(false, forKey: "done")
/// try db.saveDocument(doc)
/// print(doc.revisionID!)   // the revision just saved
/// ```
///
/// Top-level keys starting with `_` are reserved (`_id`, `_rev`, `_deleted`, …); saving a
/// document that has one throws ``SetteeError/Code/invalidParameter``. The exception is
/// `_attachments`, a dictionary of blobs by name: CouchDB's attachments, as the sync server and
/// Couchbase Lite keep them.
///
/// - Note: Thread-safe: every read and change takes the document's own lock, so it may be handed
///   between tasks; an edit made of several calls is not atomic, so edit a document from one task
///   at a time.
public final class MutableDocument: Document, @unchecked Sendable {
    /// Everything a save reads and writes, under one lock.
    struct State {
        var revisionID: String?
        var sequence: UInt64 = 0
        var isDeletion = false
        var properties: [String: JSONValue]
        /// Blobs set on this document whose content is not yet in the database, by digest.
        var pendingBlobs: [String: Blob] = [:]
        /// Set when the document was made from a stored body that does not parse: saving it
        /// would replace the stored properties with whatever few were set since, so a save
        /// throws this until ``MutableDocument/setData(_:)`` replaces every property.
        var unreadableBody: SetteeError?
    }

    private let state: Mutex<State>

    /// The revision this document was loaded from (or last saved as); nil for a new document.
    /// Saving creates a child of it, and a save finds a conflict when the database's current
    /// revision is a different one.
    ///
    /// ```swift
    /// let m = doc.toMutable(); print(m.revisionID == doc.revisionID)   // true
    /// ```
    public override var revisionID: String? { state.withLock { $0.revisionID } }
    /// The sequence of the last save through this object, 0 before.
    ///
    /// ```swift
    /// try db.saveDocument(doc); print(doc.sequence)
    /// ```
    public override var sequence: UInt64 { state.withLock { $0.sequence } }
    /// Whether saving writes a tombstone (``isDeletion``).
    ///
    /// ```swift
    /// m.isDeletion = true; print(m.isDeleted)   // true
    /// ```
    public override var isDeleted: Bool { isDeletion }
    /// When true, saving writes a tombstone that keeps this document's properties (seeds 003 and
    /// 004: a deletion that still carries, say, the `worker_id` a filtered replication routes on).
    ///
    /// ```swift
    /// let m = doc.toMutable()
    /// m.setData(["worker_id": doc["worker_id"] ?? nil, "deleted_at": "2026-11-21"])
    /// m.isDeletion = true
    /// try db.saveDocument(m)   // document(withID:) now returns nil
    /// ```
    public var isDeletion: Bool {
        get { state.withLock { $0.isDeletion } }
        set { state.withLock { $0.isDeletion = newValue } }
    }

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
        state = Mutex(State(properties: data))
        super.init(id: id ?? UUID().uuidString.lowercased(), revisionID: nil, sequence: 0, isDeleted: false,
                   body: [], blobs: nil)
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
        self.init(id: id, data: try JSONCoding.encodeObject(value))
    }

    init(id: String, revisionID: String?, isDeleted: Bool, properties: [String: JSONValue], blobs: BlobStore?,
         unreadableBody: SetteeError? = nil, pendingBlobs: [String: Blob] = [:]) {
        state = Mutex(State(revisionID: revisionID, properties: properties, pendingBlobs: pendingBlobs,
                            unreadableBody: unreadableBody))
        super.init(id: id, revisionID: nil, sequence: 0, isDeleted: false, body: [], blobs: blobs)
    }

    // MARK: - What a save reads and writes

    /// One consistent view of what a save needs.
    var snapshot: State { state.withLock { $0 } }

    /// What a save stores: refused while the properties stand for a stored body that could not
    /// be read.
    func snapshotToSave() throws(SetteeError) -> State {
        let s = snapshot
        if let damaged = s.unreadableBody {
            throw SetteeError(.corrupted, "\(damaged.message); replace every property with setData(_:) to save over it")
        }
        return s
    }

    /// Records the revision a save stored (or landed on).
    func didSave(revisionID: String?, sequence: UInt64?) {
        state.withLock {
            $0.revisionID = revisionID
            if let sequence { $0.sequence = sequence }
        }
    }

    // MARK: - Reading

    /// The property `key`, or nil.
    ///
    /// ```swift
    /// let v = doc.value(forKey: "title")
    /// ```
    public override func value(forKey key: String) -> JSONValue? { state.withLock { $0.properties[key] } }

    /// Every property.
    ///
    /// ```swift
    /// let dict = doc.toDictionary()
    /// ```
    public override func toDictionary() -> [String: JSONValue] { state.withLock { $0.properties } }

    /// Always nil: the properties are in memory. A document copied from an unreadable body says so
    /// when it is saved.
    ///
    /// ```swift
    /// print(MutableDocument().bodyError == nil)   // true
    /// ```
    public override var bodyError: SetteeError? { nil }

    /// A blob under `key`, or nil.
    ///
    /// ```swift
    /// let photo = doc.blob(forKey: "photo")
    /// ```
    public override func blob(forKey key: String) -> Blob? {
        state.withLock { s in
            guard case .object(let o)? = s.properties[key], let b = Blob(properties: o, store: blobs) else { return nil }
            return s.pendingBlobs[b.digest] ?? b
        }
    }

    /// An independent copy, with the same ID, base revision and properties.
    ///
    /// ```swift
    /// let draft = doc.toMutable()   // doc is left as it is
    /// ```
    public override func toMutable() -> MutableDocument {
        let s = snapshot
        let copy = MutableDocument(id: id, revisionID: s.revisionID, isDeleted: false, properties: s.properties,
                                   blobs: blobs, unreadableBody: s.unreadableBody, pendingBlobs: s.pendingBlobs)
        copy.isDeletion = s.isDeletion
        return copy
    }

    // MARK: - Writing

    // Each setter returns the document, so that calls chain as Couchbase Lite's do:
    // `MutableDocument().setString("SDK", forKey: "type").setInt(2, forKey: "version")`.

    /// Sets `key` to a value (nil removes the key).
    ///
    /// ```swift
    /// doc.setValue(["apples", "milk"], forKey: "items")
    /// ```
    @discardableResult
    public func setValue(_ value: JSONValue?, forKey key: String) -> MutableDocument {
        state.withLock { s in
            if let value {
                s.properties[key] = value
            } else {
                s.properties.removeValue(forKey: key)
            }
        }
        return self
    }

    /// Sets a string (nil removes the key).
    ///
    /// ```swift
    /// doc.setString("Buy milk", forKey: "title")
    /// ```
    @discardableResult
    public func setString(_ value: String?, forKey key: String) -> MutableDocument {
        setValue(value.map(JSONValue.string), forKey: key)
        return self
    }

    /// Sets an integer.
    ///
    /// ```swift
    /// doc.setInt(3, forKey: "count")
    /// ```
    @discardableResult
    public func setInt(_ value: Int, forKey key: String) -> MutableDocument {
        setValue(.int(Int64(value)), forKey: key)
        return self
    }

    /// Sets a 64-bit integer.
    ///
    /// ```swift
    /// doc.setInt64(1 << 40, forKey: "bytes")
    /// ```
    @discardableResult
    public func setInt64(_ value: Int64, forKey key: String) -> MutableDocument {
        setValue(.int(value), forKey: key)
        return self
    }

    /// Sets a double (saving fails if it is NaN or infinite: JSON cannot hold them).
    ///
    /// ```swift
    /// doc.setDouble(2.5, forKey: "price")
    /// ```
    @discardableResult
    public func setDouble(_ value: Double, forKey key: String) -> MutableDocument {
        setValue(.double(value), forKey: key)
        return self
    }

    /// Sets a float, stored as a double (Couchbase Lite's setter; saving fails if it is NaN or
    /// infinite).
    ///
    /// ```swift
    /// let doc = MutableDocument().setFloat(2.0, forKey: "version").setString("SDK", forKey: "type")
    /// ```
    @discardableResult
    public func setFloat(_ value: Float, forKey key: String) -> MutableDocument {
        setValue(.double(Double(value)), forKey: key)
    }

    /// Sets a boolean.
    ///
    /// ```swift
    /// doc.setBool(true, forKey: "done")
    /// ```
    @discardableResult
    public func setBool(_ value: Bool, forKey key: String) -> MutableDocument {
        setValue(.bool(value), forKey: key)
        return self
    }

    /// Sets a boolean (Couchbase Lite's name for ``setBool(_:forKey:)``).
    ///
    /// ```swift
    /// doc.setBoolean(true, forKey: "done")
    /// ```
    @discardableResult
    public func setBoolean(_ value: Bool, forKey key: String) -> MutableDocument {
        setBool(value, forKey: key)
        return self
    }

    /// Sets a date, stored as an ISO-8601 string in UTC with milliseconds (nil removes the key).
    ///
    /// ```swift
    /// doc.setDate(Date(), forKey: "created_at")
    /// ```
    @discardableResult
    public func setDate(_ value: Date?, forKey key: String) -> MutableDocument {
        setValue(value.map { .string(JSONDate.string(from: $0)) }, forKey: key)
        return self
    }

    /// Sets an array (nil removes the key).
    ///
    /// ```swift
    /// doc.setArray(["a", "b"], forKey: "tags")
    /// ```
    @discardableResult
    public func setArray(_ value: [JSONValue]?, forKey key: String) -> MutableDocument {
        setValue(value.map(JSONValue.array), forKey: key)
        return self
    }

    /// Sets a dictionary (nil removes the key).
    ///
    /// ```swift
    /// doc.setDictionary(["city": "Paris"], forKey: "address")
    /// ```
    @discardableResult
    public func setDictionary(_ value: [String: JSONValue]?, forKey key: String) -> MutableDocument {
        setValue(value.map(JSONValue.object), forKey: key)
        return self
    }

    /// Sets a blob; its content is stored in the database's blob store when the document is saved.
    /// (A blob nested inside an array or dictionary is set with ``setValue(_:forKey:)`` and its
    /// ``Blob/properties``, after `Database.saveBlob(_:)` stored its content.)
    ///
    /// ```swift
    /// doc.setBlob(Blob(contentType: "image/jpeg", data: jpeg), forKey: "photo")
    /// ```
    @discardableResult
    public func setBlob(_ blob: Blob?, forKey key: String) -> MutableDocument {
        state.withLock { s in
            guard let blob else { s.properties.removeValue(forKey: key); return }
            s.properties[key] = .object(blob.properties)
            if blob.needsInstall { s.pendingBlobs[blob.digest] = blob }
        }
        return self
    }

    /// Replaces every property (and so makes a copy of an unreadable stored body savable: see
    /// ``Document/bodyError``).
    ///
    /// ```swift
    /// doc.setData(["title": "New title"])
    /// ```
    @discardableResult
    public func setData(_ data: [String: JSONValue]) -> MutableDocument {
        state.withLock {
            $0.properties = data
            $0.unreadableBody = nil
        }
        return self
    }

    /// Removes `key`.
    ///
    /// ```swift
    /// doc.removeValue(forKey: "draft")
    /// ```
    public func removeValue(forKey key: String) { setValue(nil, forKey: key) }

    /// Reads or sets the property `key` (setting nil removes it).
    ///
    /// ```swift
    /// doc["title"] = "Buy milk"
    /// ```
    public subscript(key: String) -> JSONValue? {
        get { value(forKey: key) }
        set { setValue(newValue, forKey: key) }
    }

    /// An immutable snapshot of the current properties (not saved).
    ///
    /// ```swift
    /// let snapshot = doc.toDocument()
    /// ```
    public func toDocument() -> Document {
        let s = snapshot
        // The body is only parsed again if the properties are not at hand, and they are.
        return Document(id: id, revisionID: s.revisionID, sequence: s.sequence, isDeleted: s.isDeletion,
                        properties: s.properties, body: [], blobs: blobs)
    }

    /// ID and base revision, never the properties.
    ///
    /// ```swift
    /// print(doc)   // MutableDocument(task-1, from rev 1-…)
    /// ```
    public override var description: String { "MutableDocument(\(id), from rev \(revisionID ?? "none"))" }
}
