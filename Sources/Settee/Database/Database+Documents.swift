import Foundation
internal import SetteeStorage

/// How a save or delete treats a document that changed since it was read.
///
/// ```swift
/// let saved = try db.saveDocument(doc, concurrencyControl: .failOnConflict)
/// if !saved { /* re-read, re-apply, retry */ }
/// ```
public enum ConcurrencyControl: Sendable {
    /// The save or delete goes ahead over the newer revision, except that a save never
    /// resurrects a document deleted meanwhile ("deletes always win").
    case lastWriteWins
    /// The save or delete is refused (returns false) when the document changed.
    ///
    /// A document read from a conflict's losing leaf (``Database/conflictingRevisions(withID:)``,
    /// ``Database/document(withID:revisionID:)``) is not refused while that leaf is still one: its
    /// save continues that branch (as CouchDB's update of a leaf does), its deletion closes it.
    case failOnConflict
}

extension Database {
    // MARK: - Reading

    /// The current revision of a document; nil when there is none or it is deleted.
    ///
    /// ```swift
    /// guard let doc = try db.document(withID: "task-1") else { return }
    /// print(doc.string(forKey: "title") ?? "")
    /// ```
    ///
    /// One tree lookup and one read of the body, which is parsed when first used.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a malformed ID, ``SetteeError/Code/notOpen``,
    ///   ``SetteeError/Code/corrupted``.
    public func document(withID id: String) throws -> Document? {
        try checkOpen()
        var utf8ID = id
        // The hot path: the key is the string's own UTF-8, no copy.
        return try utf8ID.withUTF8 { utf8 -> Document? in
            let key = UnsafeRawBufferPointer(utf8)
            try validateDocumentID(key)
            // Closures, not one local function passed twice: that made Swift box the captures on
            // the heap for every call.
            let core = self.core
            return try core.read(snapshot: { tx in try core.currentDocument(tx, id: id, key: key) },
                                 batch: { tx in try core.currentDocument(tx, id: id, key: key) })
        }
    }

    /// The current revision even when it is a tombstone; nil only when the ID is unknown.
    func currentRevision(id: String, key: [UInt8]) throws -> Document? {
        try core.read { tx -> Document? in
            guard let meta = try core.meta(tx, id: key) else { return nil }
            return try core.document(tx, id: id, meta: meta)
        }
    }

    // MARK: - Saving

    /// Saves a document as a new revision, last write wins.
    ///
    /// ```swift
    /// let doc = MutableDocument(id: "task-1", data: ["title": "Buy milk"])
    /// try db.saveDocument(doc)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/conflict`` when the document was deleted since it was read
    ///   (deletes always win), ``SetteeError/Code/forbidden`` from a validation,
    ///   ``SetteeError/Code/invalidParameter`` for a reserved `_` key or a bad ID.
    public func saveDocument(_ document: MutableDocument) throws {
        guard try saveDocument(document, concurrencyControl: .lastWriteWins) else {
            throw SetteeError(.conflict, "the document was deleted since it was read; deletes win")
        }
    }

    /// Saves a document as a new revision with the given concurrency control; returns false when
    /// it conflicts.
    ///
    /// ```swift
    /// if try !db.saveDocument(doc, concurrencyControl: .failOnConflict) {
    ///     let fresh = try db.document(withID: doc.id)   // re-read and retry
    /// }
    /// ```
    ///
    /// A conflict is a change to the document's current revision since `document` was read.
    /// Under ``ConcurrencyControl/lastWriteWins`` the save goes ahead on top of it, unless it is a
    /// deletion: then nothing is saved and the result is false. A new document (never saved through
    /// this object) over an ID that holds only a tombstone continues the tombstone's branch: that
    /// is not a conflict.
    ///
    /// - Throws: ``SetteeError/Code/forbidden`` from a validation, ``SetteeError/Code/invalidParameter``,
    ///   ``SetteeError/Code/notFound`` for a blob whose content is missing.
    public func saveDocument(_ document: MutableDocument, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try checkOpen()
        let key = try validateDocumentID(document.id)
        let edit = try document.snapshotToSave()
        let body = try PreparedBody(edit.properties)
        try installBlobs(edit, body)
        let outcome = try core.write { c in
            try save(document, edit, key: key, body: body, context: c, conflict: { current in
                switch concurrencyControl {
                case .failOnConflict: return .refuse
                case .lastWriteWins: return current.flags.contains(.deleted) ? .refuse : .overwrite
                }
            })
        }
        if case .saved = outcome { return true }
        return false
    }

    /// Saves a document, calling `conflictHandler` when the document changed since it was read.
    ///
    /// The handler gets the document being saved and the current one (nil if it was deleted).
    /// It may change the document (merge the current properties in, say) and return true to save
    /// it on top of the current revision, or return false to cancel (the call returns false). What
    /// it throws is rethrown. If the document changes again meanwhile, the handler is called again.
    ///
    /// ```swift
    /// let doc = try db.document(withID: "xyz")!.toMutable()
    /// doc.setString("apples", forKey: "name")
    /// try db.saveDocument(doc) { new, current in
    ///     let merged = new.toDictionary().merging(current?.toDictionary() ?? [:]) { mine, _ in mine }
    ///     new.setData(merged)
    ///     return true
    /// }
    /// ```
    ///
    /// The handler runs outside the database's write lock: it may read the database, and
    /// other writers are not held up while it runs.
    @discardableResult
    public func saveDocument(_ document: MutableDocument,
                             conflictHandler: (_ document: MutableDocument, _ current: Document?) throws -> Bool) throws -> Bool {
        try checkOpen()
        let key = try validateDocumentID(document.id)
        while true {
            let edit = try document.snapshotToSave()
            let body = try PreparedBody(edit.properties)
            try installBlobs(edit, body)
            let outcome = try core.write { c in
                try save(document, edit, key: key, body: body, context: c, conflict: { _ in .refuse })
            }
            guard case .conflict(let current) = outcome else { return true }
            let currentDocument = current.isDeleted ? nil : current
            guard try conflictHandler(document, currentDocument) else { return false }
            // The merge is based on what the handler saw; a later change makes another conflict.
            document.didSave(revisionID: current.revisionID, sequence: nil)
        }
    }

    /// Saves several documents in one transaction (one durable commit), each as
    /// `saveDocument(_:concurrencyControl:)` would; returns each one's outcome (false: refused
    /// by the concurrency control). An error (a validation, a reserved key, a bad ID) saves none.
    ///
    /// ```swift
    /// let docs = items.map { MutableDocument(id: $0.id, data: $0.properties) }
    /// try db.saveDocuments(docs)
    /// ```
    ///
    /// Each document's canonical JSON, blob list and revision ID are prepared before the write
    /// lock is taken, so other writers wait only for the commit. The `async` form prepares on the
    /// calling task: several batches in flight are prepared on other cores while one commits.
    @discardableResult
    public func saveDocuments(_ documents: [MutableDocument],
                              concurrencyControl: ConcurrencyControl = .lastWriteWins) throws -> [Bool] {
        try commitSaves(try prepareSaves(documents), concurrencyControl)
    }

    /// What a save can work out without the database: done outside the write lock.
    struct PreparedSave: @unchecked Sendable {
        // @unchecked: the document is only touched through its lock (MutableDocument is
        // thread-safe); the rest are values.
        let document: MutableDocument
        let edit: MutableDocument.State
        let key: [UInt8]
        let body: PreparedBody
        /// The revision ID the save makes when the document's current revision is still the one
        /// it was loaded from (or, for a new document, when there is none).
        let expectedRevisionID: String
    }

    func prepareSaves(_ documents: [MutableDocument]) throws -> [PreparedSave] {
        try checkOpen()
        return try documents.map { document in
            let key = try validateDocumentID(document.id)
            let edit = try document.snapshotToSave()
            let body = try PreparedBody(edit.properties)
            try installBlobs(edit, body)
            let parentGeneration = try edit.revisionID.map { id throws(SetteeError) -> UInt64 in
                guard let g = RevisionID.generation(of: id, limit: .max) else {
                    throw SetteeError(.invalidParameter, "malformed revision ID (expected <generation>-<digest>)")
                }
                return g
            } ?? 0
            let generation = try RevisionID.child(of: parentGeneration)
            let revisionID = RevisionID.make(parent: edit.revisionID, generation: generation, deleted: edit.isDeletion,
                                             canonicalBody: body.bytes)
            return PreparedSave(document: document, edit: edit, key: key, body: body, expectedRevisionID: revisionID)
        }
    }

    func commitSaves(_ saves: [PreparedSave], _ concurrencyControl: ConcurrencyControl) throws -> [Bool] {
        try checkOpen()
        do {
            return try writeSaves(saves, concurrencyControl)
        } catch {
            // Nothing was saved: the documents saved before the failure go back to the revision
            // they had, so none names a revision the database does not hold.
            for p in saves { p.document.didSave(revisionID: p.edit.revisionID, sequence: p.edit.sequence) }
            throw error
        }
    }

    private func writeSaves(_ saves: [PreparedSave], _ concurrencyControl: ConcurrencyControl) throws -> [Bool] {
        try core.write { c in
            try saves.map { p in
                let outcome = try save(p.document, p.edit, key: p.key, body: p.body, context: c,
                                       expectedRevisionID: p.expectedRevisionID, conflict: { current in
                    switch concurrencyControl {
                    case .failOnConflict: return .refuse
                    case .lastWriteWins: return current.flags.contains(.deleted) ? .refuse : .overwrite
                    }
                })
                if case .saved = outcome { return true }
                return false
            }
        }
    }

    enum SaveOutcome {
        case saved
        case conflict(Document)
    }

    enum ConflictDecision { case refuse, overwrite }

    /// The save protocol of DESIGN "Semantics decided" 4.
    private func save(_ document: MutableDocument, _ edit: MutableDocument.State, key: [UInt8], body: PreparedBody,
                      context c: WriteContext, expectedRevisionID: String? = nil,
                      conflict: (DocMeta) -> ConflictDecision) throws -> SaveOutcome {
        // Compaction deletes unreferenced blob files under the write lock this runs under: it may
        // have deleted one the install before the lock found already stored (written before the
        // compaction began, referenced by nothing yet). Installing again here puts it back; a file
        // that is there costs one access(2).
        try installBlobs(edit, body)
        let old = try c.meta(key)
        var tree = try c.tree(old)
        var parent: Int? = nil
        if let old {
            if old.revisionID == edit.revisionID {
                parent = tree.index(of: old.revisionID)
            } else if edit.revisionID == nil && old.flags.contains(.deleted) {
                parent = tree.index(of: old.revisionID)   // continues the tombstone's branch
            } else if let losing = losingLeaf(edit.revisionID, of: old, in: tree), conflict(old) == .refuse {
                // Read from a conflict's losing leaf (conflictingRevisions, document(withID:revisionID:)):
                // the edit continues that branch, as CouchDB's update of a leaf does and as a
                // deletion of it does here. Last write wins instead saves on the current revision.
                parent = losing
            } else {
                switch conflict(old) {
                case .refuse: return .conflict(try core.document(c.tx, id: document.id, meta: old))
                case .overwrite:
                    if let from = edit.revisionID, let p = tree.index(of: from),
                       RevisionID.make(parent: from, generation: try RevisionID.child(of: tree.revs[p].generation), deleted: edit.isDeletion,
                                       canonicalBody: body.bytes) == old.revisionID {
                        // The current revision is this very edit of this parent, saved already
                        // (identical edits give identical revision IDs, seed 004 FAQ): last write
                        // wins, and it is already the last write. Nothing to store.
                        document.didSave(revisionID: old.revisionID, sequence: old.sequence)
                        return .saved
                    }
                    parent = tree.index(of: old.revisionID)
                }
            }
        } else if edit.revisionID != nil {
            // Purged since it was read: nothing to conflict with, so it starts again.
            parent = nil
        }
        // The ID prepared outside the lock holds when the parent is the revision it assumed.
        let prepared = expectedRevisionID.flatMap { parent.map { tree.revs[$0].id } == edit.revisionID ? $0 : nil }
        let added = try c.addLocalRevision(id: document.id, key: key, old: old, tree: &tree, parent: parent,
                                           body: body, deleted: edit.isDeletion, revisionID: prepared)
        if let (meta, revisionID) = added {
            // The revision saved: not the current one when it continues a conflict's losing
            // branch (a deletion of that leaf).
            document.didSave(revisionID: revisionID, sequence: meta.sequence)
        } else if let p = parent {
            // An identical revision exists already: the save is a no-op that lands on it.
            let gen = try RevisionID.child(of: tree.revs[p].generation)
            document.didSave(revisionID: RevisionID.make(parent: tree.revs[p].id, generation: gen, deleted: edit.isDeletion,
                                                         canonicalBody: body.bytes), sequence: nil)
        }
        return .saved
    }

    /// The index of `revisionID` when it is a live leaf of a conflicted tree other than the current one.
    private func losingLeaf(_ revisionID: String?, of old: DocMeta, in tree: RevTree) -> Int? {
        guard let revisionID, revisionID != old.revisionID, old.flags.contains(.multipleLeaves),
              let i = tree.index(of: revisionID), !tree.revs[i].deleted, tree.leafMask()[i] else { return nil }
        return i
    }

    private func installBlobs(_ edit: MutableDocument.State, _ body: PreparedBody) throws {
        guard !body.blobDigests.isEmpty else { return }
        for d in Set(body.blobDigests) {
            if let b = edit.pendingBlobs[d] { try core.blobs.install(b) }
        }
    }

    /// Stores a blob's content in the database's blob store, so documents can reference it from
    /// anywhere in their properties (`blob.properties`), and replicated revisions can carry it.
    ///
    /// ```swift
    /// let page = Blob(contentType: "image/png", data: png)
    /// try db.saveBlob(page)
    /// doc.setValue(.array([.object(page.properties)]), forKey: "pages")
    /// ```
    public func saveBlob(_ blob: Blob) throws {
        try checkOpen()
        try core.blobs.install(blob)
    }

    /// A stored blob by digest, or nil when its content is not in this database.
    ///
    /// ```swift
    /// if let b = try db.blob(withDigest: digest, contentType: "image/png") { show(b.content) }
    /// ```
    public func blob(withDigest digest: String, contentType: String = "application/octet-stream") throws -> Blob? {
        try checkOpen()
        guard let length = try core.blobs.length(forDigest: digest) else { return nil }
        return Blob(contentType: contentType, digest: digest, length: length, source: .stored(core.blobs))
    }

    // MARK: - Deleting

    /// Deletes a document (writes a tombstone revision), last write wins.
    ///
    /// ```swift
    /// if let doc = try db.document(withID: "task-1") { try db.deleteDocument(doc) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notFound`` when the document is not in the database.
    public func deleteDocument(_ document: Document) throws {
        _ = try deleteDocument(document, concurrencyControl: .lastWriteWins)
    }

    /// Deletes a document with the given concurrency control; returns false when it changed since
    /// it was read and `concurrencyControl` is ``ConcurrencyControl/failOnConflict``. Under
    /// ``ConcurrencyControl/lastWriteWins`` a deletion wins over a concurrent update.
    ///
    /// Given a losing leaf of a conflict (from `conflictingRevisions(withID:)`), it tombstones
    /// that branch only: deleting every loser resolves the conflict in favour of the current
    /// revision (seed 004, "pick a winner").
    ///
    /// ```swift
    /// let deleted = try db.deleteDocument(doc, concurrencyControl: .failOnConflict)
    /// ```
    ///
    /// To delete while keeping some properties in the tombstone, save a ``MutableDocument`` with
    /// ``MutableDocument/isDeletion`` set.
    public func deleteDocument(_ document: Document, concurrencyControl: ConcurrencyControl) throws -> Bool {
        try delete(id: document.id, expected: document.revisionID, concurrencyControl)
    }

    /// Deletes the document a ``MutableDocument`` was loaded from (or last saved as).
    ///
    /// ```swift
    /// try db.deleteDocument(mutable, concurrencyControl: .lastWriteWins)
    /// ```
    @discardableResult
    public func deleteDocument(_ document: MutableDocument, concurrencyControl: ConcurrencyControl = .lastWriteWins) throws -> Bool {
        let ok = try delete(id: document.id, expected: document.revisionID, concurrencyControl)
        if ok, let d = try currentRevision(id: document.id, key: validateDocumentID(document.id)) {
            document.didSave(revisionID: d.revisionID, sequence: d.sequence)
        }
        return ok
    }

    private func delete(id: String, expected: String?, _ control: ConcurrencyControl) throws -> Bool {
        try checkOpen()
        let key = try validateDocumentID(id)
        let empty = try PreparedBody([:])
        return try core.write { c in
            guard let old = try c.meta(key) else { throw SetteeError(.notFound, "no document with that ID") }
            if let expected, expected != old.revisionID, old.flags.contains(.multipleLeaves) {
                var tree = try c.tree(old)
                if let i = tree.index(of: expected), !tree.revs[i].deleted, tree.leafMask()[i] {
                    // A losing leaf of a conflict (from conflictingRevisions): tombstone that branch,
                    // so deleting the losers picks the winner (seed 004). Not a conflict.
                    _ = try c.addLocalRevision(id: id, key: key, old: old, tree: &tree, parent: i, body: empty, deleted: true)
                    return true
                }
            }
            if old.revisionID != expected {
                if control == .failOnConflict { return false }
                if old.flags.contains(.deleted) { return true }   // already deleted: the deletion stands
            } else if old.flags.contains(.deleted) {
                return true
            }
            var tree = try c.tree(old)
            _ = try c.addLocalRevision(id: id, key: key, old: old, tree: &tree, parent: tree.index(of: old.revisionID),
                                       body: empty, deleted: true)
            return true
        }
    }

    // MARK: - Purging

    /// Removes every trace of a document locally (not replicated: a peer may bring it back).
    ///
    /// ```swift
    /// try db.purgeDocument(doc)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notFound`` when it is not in the database.
    public func purgeDocument(_ document: Document) throws {
        try purgeDocument(withID: document.id)
    }

    /// Removes every trace of the document `id` locally, its expiration included (the ID saved
    /// again starts without one).
    ///
    /// ```swift
    /// try db.purgeDocument(withID: "task-1")
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notFound`` when it is not in the database.
    public func purgeDocument(withID id: String) throws {
        try checkOpen()
        let key = try validateDocumentID(id)
        try core.write { c in
            guard try c.purge(id: id, key: key) else { throw SetteeError(.notFound, "no document with that ID") }
        }
    }

    // MARK: - Batches

    /// Runs `body` as one transaction: every save, delete and purge it makes (on this thread)
    /// commits together, or, if it throws, none does. Reads inside see the batch's own writes;
    /// listeners hear of the batch once, when it commits.
    ///
    /// ```swift
    /// try db.inBatch {
    ///     for i in 0..<100 { try db.saveDocument(MutableDocument(id: "doc-\(i)", data: ["n": .int(Int64(i))])) }
    /// }
    /// ```
    ///
    /// Other threads' writes wait until the batch ends. Conflict handlers given to saves in a
    /// batch run inside it.
    public func inBatch(_ body: () throws -> Void) throws {
        try checkOpen()
        try core.runBatch(body)
    }
}
