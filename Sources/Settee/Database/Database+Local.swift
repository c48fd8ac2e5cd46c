internal import SetteeStorage

extension Database {
    /// Local documents (CouchDB's `_local/…`): small JSON objects that are never replicated and
    /// have no revision history, such as replication checkpoints. IDs may be given with or without
    /// the `_local/` prefix.
    ///
    /// ```swift
    /// try db.saveLocalDocument(["last_seq": 42], withID: "checkpoint-abc")
    /// let cp = try db.localDocument(withID: "checkpoint-abc")?["last_seq"]
    /// ```
    @_spi(Replication)
    public func localDocument(withID id: String) throws -> [String: JSONValue]? {
        try localDocumentWithRevision(withID: id)?.properties
    }

    /// A local document with its revision (`0-N`, N counting saves), as CouchDB reports it.
    ///
    /// ```swift
    /// if let (props, rev) = try db.localDocumentWithRevision(withID: "cp") { print(rev, props) }
    /// ```
    @_spi(Replication)
    public func localDocumentWithRevision(withID id: String) throws -> (properties: [String: JSONValue], revisionID: String)? {
        try checkOpen()
        let key = try Self.localKey(id)
        return try core.read { tx -> ([String: JSONValue], String)? in
            try tx.withValue(forKey: key, in: core.trees.local) { b throws -> ([String: JSONValue], String) in
                var r = ByteReader(b)
                guard let n = r.varint(), case .object(let o) = try JSONParser.parse(r.rest()) else {
                    throw SetteeError(.corrupted, "a local document is malformed")
                }
                return (o, "0-\(n)")
            }
        }.map { (properties: $0.0, revisionID: $0.1) }
    }

    /// Creates or replaces a local document; returns its new revision (`0-N`).
    ///
    /// ```swift
    /// try db.saveLocalDocument(["session": "x", "last_seq": 10], withID: "_local/repl-1")
    /// ```
    @discardableResult
    @_spi(Replication)
    public func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) throws -> String {
        try checkOpen()
        let key = try Self.localKey(id)
        let body = try JSONWriter.bytes(.object(properties))
        guard body.count <= maxBodySize else { throw SetteeError(.tooLarge, "local document too large") }
        return try core.write { c -> String in
            let n = try c.tx.withValue(forKey: key, in: core.trees.local) { b -> UInt64 in
                var r = ByteReader(b)
                return r.varint() ?? 0
            } ?? 0
            var w = ByteWriter(capacity: body.count + 10)
            w.varint(n + 1)
            w.bytes.append(contentsOf: body)
            try c.tx.put(key, w.bytes, in: core.trees.local)
            return "0-\(n + 1)"
        }
    }

    /// Deletes a local document.
    ///
    /// ```swift
    /// try db.deleteLocalDocument(withID: "checkpoint-abc")
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notFound`` when there is none.
    @_spi(Replication)
    public func deleteLocalDocument(withID id: String) throws {
        try checkOpen()
        let key = try Self.localKey(id)
        try core.write { c in
            guard try c.tx.delete(key, in: core.trees.local) else { throw SetteeError(.notFound, "no local document with that ID") }
        }
    }

    /// Visits local documents in ID order (UTF-8 bytes; descending when asked), from the first
    /// whose ID (without `_local/`) is at or after `start` (at or before it when descending);
    /// `body` gets each ID with its `_local/` prefix, its revision, and its properties when
    /// `includeProperties` is set, and returns false to stop.
    ///
    /// ```swift
    /// try db.forEachLocalDocument(from: "checkpoint-", includeProperties: false) { id, rev, _ in
    ///     guard id.hasPrefix("_local/checkpoint-") else { return false }
    ///     print(id, rev)
    ///     return true
    /// }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/corrupted`` for a damaged local document;
    ///   ``SetteeError/Code/notOpen``; what `body` throws.
    @_spi(Replication)
    public func forEachLocalDocument(from start: String? = nil, descending: Bool = false, includeProperties: Bool,
                                     _ body: (_ id: String, _ revisionID: String, _ properties: [String: JSONValue]?) throws -> Bool) throws {
        try checkOpen()
        let from = start.map { s in Array((s.hasPrefix("_local/") ? String(s.dropFirst(7)) : s).utf8) }
        try core.read { tx in
            try tx.forEach(in: core.trees.local, from: from, reverse: descending) { k, v in
                var r = ByteReader(v)
                guard let n = r.varint() else { throw SetteeError(.corrupted, "a local document is malformed") }
                var properties: [String: JSONValue]?
                if includeProperties {
                    guard case .object(let o) = try JSONParser.parse(r.rest()) else {
                        throw SetteeError(.corrupted, "a local document is malformed")
                    }
                    properties = o
                }
                return try body("_local/" + String(decoding: k, as: UTF8.self), "0-\(n)", properties)
            }
        }
    }

    static func localKey(_ id: String) throws(SetteeError) -> [UInt8] {
        let bare = id.hasPrefix("_local/") ? String(id.dropFirst(7)) : id
        let key = Array(bare.utf8)
        guard !key.isEmpty, key.count <= 1000 else {
            throw SetteeError(.invalidParameter, "local document IDs are 1 to 1000 bytes")
        }
        return key
    }
}
