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

    /// Whether this document was read from (or made from a document read from) a database other
    /// than `database`. Documents that no database holds are not from another one. `Database`
    /// objects open on the same files share their blob store, so they count as one database.
    package func isFromAnotherDatabase(than database: Database) -> Bool {
        guard let blobs else { return false }
        return blobs !== database.core.blobs
    }
}
