import Foundation
import Hummingbird
@_spi(Replication) @_spi(Server) import Settee

extension CouchAPI {
    // MARK: - Writes for a principal

    /// Saves edits (failOnConflict) for `principal`: through the writer that tells the sync
    /// function and `validate_doc_update` who writes when either needs to know; otherwise by the
    /// batch path that prepares bodies outside the write lock.
    func saveEdits(_ edits: [MutableDocument], _ db: ServedDatabase, as principal: Principal) async throws -> [Bool] {
        for edit in edits { try checkDesignWrite(edit.id, properties: edit.toDictionary(), db, principal) }
        let saved: [Bool]
        if db.routing.needsWriter {
            let list = edits
            saved = try await db.write(as: principal) { d in try d.saveDocuments(list, concurrencyControl: .failOnConflict) }
        } else if edits.count == 1 {
            saved = [try await db.database.saveDocument(edits[0], concurrencyControl: .failOnConflict)]
        } else {
            saved = try await db.database.saveDocuments(edits, concurrencyControl: .failOnConflict)
        }
        for edit in edits where edit.id.hasPrefix("_design/") { db.reloadDesign(edit.id) }
        return saved
    }

    func saveEdit(_ edit: MutableDocument, _ db: ServedDatabase, as principal: Principal) async throws -> Bool {
        try await saveEdits([edit], db, as: principal)[0]
    }

    /// Inserts replicated revisions (`new_edits=false`) for `principal`.
    ///
    /// Under the default sync function, a user may not add a branch to a document whose
    /// current revision it cannot read: the branch would win over that revision or stand in
    /// conflict with it, changing a document the user cannot see. Such a revision is refused
    /// (`forbidden`), unless the document already holds it. A custom sync function decides for
    /// itself (it is given the revision it would replace as `oldDoc`, and may `requireUser` or
    /// `requireAccess` on it). The check runs in the write's turn, so no write comes between.
    func insert(_ revisions: [ReplicatedRevision], _ db: ServedDatabase, as principal: Principal) async throws -> [RevisionInsertOutcome] {
        var allowed: [ReplicatedRevision] = []
        var refusals: [Int: RevisionInsertOutcome] = [:]
        for (i, r) in revisions.enumerated() {
            do {
                try checkDesignWrite(r.documentID, properties: r.isDeleted ? [:] : try r.properties, db, principal)
                allowed.append(r)
            } catch let e as CouchError {
                refusals[i] = .rejected(SetteeError(e.status == .forbidden ? .forbidden : .invalidParameter, e.reason))
            }
        }
        let outcomes: [RevisionInsertOutcome]
        let guarded = db.config.sync == nil ? try Reader(db, principal) : nil
        if let reader = guarded, !reader.readsAll {
            let list = allowed
            outcomes = try await db.write(as: principal) { d in
                var checked: [ReplicatedRevision] = []
                var hidden: Set<Int> = []
                for (i, r) in list.enumerated() {
                    if try Self.changesAHiddenDocument(r, d, reader) { hidden.insert(i) } else { checked.append(r) }
                }
                var inserted = try d.insertRevisions(checked).makeIterator()
                return list.indices.map { i in
                    hidden.contains(i) ? .rejected(SetteeError(.forbidden, "the document holds revisions this user cannot read"))
                        : inserted.next() ?? .alreadyPresent
                }
            }
        } else if db.routing.needsWriter {
            let list = allowed
            outcomes = try await db.write(as: principal) { d in try d.insertRevisions(list) }
        } else {
            outcomes = try await db.database.insertRevisions(allowed)
        }
        for r in allowed where r.documentID.hasPrefix("_design/") { db.reloadDesign(r.documentID) }
        var merged: [RevisionInsertOutcome] = []
        var next = outcomes.makeIterator()
        for i in revisions.indices { merged.append(refusals[i] ?? next.next() ?? .alreadyPresent) }
        return merged
    }

    /// Whether `revision` would change a document whose current revision `reader` cannot read
    /// (a document that exists, tombstones included, and does not hold the revision yet).
    static func changesAHiddenDocument(_ revision: ReplicatedRevision, _ db: Database, _ reader: Reader) throws -> Bool {
        guard let tree = try db.revisionTree(withID: revision.documentID) else { return false }
        if tree.revisions.contains(where: { $0.revisionID == revision.revisionID }) { return false }
        return try reader.readability(of: revision.documentID, revision: nil) != .readable
    }

    /// Design documents are written through the admin port only (as in CouchDB, where only
    /// admins may), and their functions must compile (CouchDB's `compilation_error`).
    /// Every write passes here: in a partitioned database it checks the ID's partition too.
    func checkDesignWrite(_ id: String, properties: [String: JSONValue], _ db: ServedDatabase, _ principal: Principal) throws {
        try Self.checkPartitionedID(id, in: db)
        guard id.hasPrefix("_design/") else { return }
        guard principal == .admin else {
            throw CouchError.forbidden("Only admins may write design documents (use the admin port).")
        }
        if let options = properties["options"] {
            guard case .object(let o) = options else { throw CouchError(.badRequest, "invalid_design_doc", "`options` field must have object type") }
            switch o["partitioned"] {
            case nil, .bool(false)?: break
            case .bool(true)?:
                guard db.partitioned else {
                    throw CouchError(.badRequest, "invalid_design_doc", "partitioned option cannot be true in a non-partitioned database.")
                }
            default: throw CouchError(.badRequest, "invalid_design_doc", "`options.partitioned` field must have boolean type")
            }
        }
        do {
            _ = try RoutingState.compileDesign(properties, id: id, engine: db.routing.engine, strict: true)
        } catch let e as CouchError {
            throw e
        } catch {
            throw CouchError(.badRequest, "compilation_error", "\(error)")
        }
    }

    /// `POST /{db}/_resync` (admin): the sync function runs again over every document; each
    /// document whose channels or grants change takes a new sequence, so that every feed sends
    /// what became visible to its user (and removal rows for what did not stay). Answers
    /// `{"changes": N}`, the documents whose routing changed.
    func resync(_ db: ServedDatabase) async throws -> Response {
        let database = db.database
        // Long and synchronous: on a thread of its own, not one of the request threads.
        let changed: Int = try await withCheckedThrowingContinuation { c in
            Thread.detachNewThread {
                c.resume(with: Swift.Result { try database.reroute() })
            }
        }
        db.wakeFeeds()
        return try jsonResponse(["changes": .int(Int64(changed))])
    }
}
