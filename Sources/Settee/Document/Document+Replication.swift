// What the replicator (SetteeReplicator, same package) needs of documents beyond the public API:
// documents that were never stored (a pulled revision shown to a filter, a merged resolution),
// and which database a document was read from (a resolver must not return another database's).

extension Document {
    /// A document that no database holds: its body is the canonical JSON of `properties`.
    package convenience init(unsavedID id: String, revisionID: String?, isDeleted: Bool,
                             properties: [String: JSONValue]) {
        // Properties that arrived by replication were already checked by the sender's writer; a
        // value JSON cannot hold leaves the body empty rather than failing a filter call.
        let body = (try? JSONWriter.bytes(.object(properties))) ?? Array("{}".utf8)
        self.init(id: id, revisionID: revisionID, sequence: 0, isDeleted: isDeleted, properties: properties,
                  body: body, blobs: nil)
    }

    /// The canonical JSON of the properties as stored (a server answers with it without parsing
    /// and writing it again); for a ``MutableDocument``, its properties written now.
    package var storedJSON: [UInt8] {
        get throws {
            if self is MutableDocument { return try JSONWriter.bytes(.object(toDictionary())) }
            return body.isEmpty ? Array("{}".utf8) : body
        }
    }

    /// Whether this document was read from (or made from a document read from) a database other
    /// than `database`. Documents that no database holds are not from another one. `Database`
    /// objects open on the same files share their blob store, so they count as one database.
    package func isFromAnotherDatabase(than database: Database) -> Bool {
        guard let blobs else { return false }
        return blobs !== database.core.blobs
    }

}

extension Database {
    /// The properties a conflict resolution writes from a resolver's result: a ``MutableDocument``'s
    /// pending blobs are stored first, and a result whose properties stand for a body that could
    /// not be read is refused (`corrupted`) rather than written as an empty merge.
    package func propertiesForResolution(_ result: Document) async throws -> [String: JSONValue] {
        if let m = result as? MutableDocument {
            let edit = try m.snapshotToSave()
            for blob in edit.pendingBlobs.values { try await saveBlob(blob) }
            return edit.properties
        }
        if let damaged = result.bodyError { throw damaged }
        return result.toDictionary()
    }
}
