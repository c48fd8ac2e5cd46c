import Foundation
import HTTPTypes
import Hummingbird
@_spi(Server) import Settee

/// CouchDB's partitioned databases (`PUT /{db}?partitioned=true`): every document ID but a
/// design document's is `partition:id`, and `/{db}/_partition/{p}/…` reads one partition.
/// A partition is a range of document IDs (`p:` up to `p;`) on this one node: its
/// `_all_docs` reads that range, its `_find` a partitioned index's `[partition, fields…]`
/// entries or that range of documents, and its views the rows keyed `[partition, key]`.
extension CouchAPI {
    /// A document ID as a partitioned database takes it (`couch_partition:validate_docid`):
    /// nothing to check in another database, nor for a design or local document.
    static func checkPartitionedID(_ id: String, in db: ServedDatabase) throws {
        guard db.partitioned, !id.hasPrefix("_design/"), !id.hasPrefix("_local/") else { return }
        guard let colon = id.firstIndex(of: ":") else {
            throw CouchError(.badRequest, "illegal_docid", "Doc id must be of form partition:id")
        }
        try checkPartition(String(id[..<colon]))
        let rest = id[id.index(after: colon)...]
        guard !rest.isEmpty else { throw CouchError(.badRequest, "illegal_docid", "Document id must not be empty") }
        if rest.hasPrefix("_") {
            throw CouchError(.badRequest, "illegal_docid", "Only reserved document ids may start with underscore.")
        }
    }

    /// A partition name as CouchDB takes it (`couch_partition:validate_partition`).
    static func checkPartition(_ p: String) throws {
        guard !p.isEmpty else { throw CouchError(.badRequest, "illegal_partition", "Partition must not be empty") }
        guard !p.hasPrefix("_") else { throw CouchError(.badRequest, "illegal_partition", "Partition must not start with an underscore") }
        guard !p.contains(":") else { throw CouchError(.badRequest, "illegal_partition", "Partition must not contain a colon") }
        // Bounded as the IDs it prefixes are.
        guard p.utf8.count < 1000 else { throw CouchError(.badRequest, "illegal_partition", "Partition is longer than 999 bytes") }
    }

    /// The partition a request reads (its `partition` query parameter, which
    /// `/_partition/{p}/…` sets): nil for the whole database.
    func requestedPartition(_ query: [String: String], _ db: ServedDatabase) throws -> String? {
        guard let p = query["partition"] else { return nil }
        guard !p.isEmpty else { throw CouchError(.badRequest, "query_parse_error", "Invalid value for `partition`.") }
        guard db.partitioned else {
            throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is not supported on this db")
        }
        try Self.checkPartition(p)
        return p
    }

    /// `/{db}/_partition/{p}` and what is under it (`chttpd_db:handle_partition_req`).
    func partitionPath(_ call: inout Call, _ db: ServedDatabase, _ rest: [String]) async throws -> Response {
        let method = call.request.method
        guard rest.count >= 2 else { throw CouchError.badRequest("invalid_partition_req") }
        let p = rest[1]
        if rest.count == 2 {
            if method == .post, p.hasPrefix("_") {
                throw CouchError(.badRequest, "illegal_partition", "Partition must not start with an underscore")
            }
            try allow(method, [.get, .head])
            try Self.checkPartition(p)
            guard db.partitioned else { throw CouchError.badRequest("database is not partitioned") }
            return try jsonResponse(.object(try partitionInfo(db, p, reader: try Reader(db, call.principal))))
        }
        let inner = Array(rest.dropFirst(2))
        // A method the endpoint does not take is 405 before anything else is looked at.
        switch inner[0] {
        case "_all_docs": try allow(method, [.get, .head, .post])
        case "_find", "_explain": try allow(method, [.post])
        case "_design" where inner.count == 4 && inner[2] == "_view": try allow(method, [.get, .head, .post])
        default: break
        }
        guard db.partitioned else { throw CouchError.badRequest("database is not partitioned") }
        try Self.checkPartition(p)
        if let given = call.query["partition"], given != p {
            throw CouchError.badRequest("Conflicting value for `partition` in query string")
        }
        call.query["partition"] = p
        call.path = [call.path[0]] + inner
        switch inner[0] {
        case "_all_docs": return try await allDocs(&call, db)
        case "_find": try allow(method, [.post]); return try await find(&call, db)
        case "_explain": try allow(method, [.post]); return try await explain(&call, db)
        case "_design" where inner.count >= 3 && inner[2].hasPrefix("_"):
            return try await designPath(&call, db, id: "_design/" + inner[1], rest: Array(inner.dropFirst(2)))
        default: throw CouchError.notFound()
        }
    }

    /// `GET /{db}/_partition/{p}`: its documents and deleted documents counted over its range
    /// of IDs (a user who reads only some channels is told no counts, as of the database).
    private func partitionInfo(_ db: ServedDatabase, _ p: String, reader: Reader) throws -> [String: JSONValue] {
        var info: [String: JSONValue] = ["db_name": .string(db.name), "partition": .string(p)]
        guard reader.readsAll else { return info }
        var options = AllDocumentsOptions()
        options.prefix = p + ":"
        options.includeDeleted = true
        let cursor = try db.database.allDocuments(options)
        var (live, deleted) = (0, 0)
        while let doc = try cursor.next() {
            if doc.isDeleted { deleted += 1 } else { live += 1 }
        }
        info["doc_count"] = .int(Int64(live))
        info["doc_del_count"] = .int(Int64(deleted))
        // CouchDB's `sizes` (its shard's bytes for the partition) are not kept per partition
        // here; they are left out rather than guessed.
        return info
    }
}
