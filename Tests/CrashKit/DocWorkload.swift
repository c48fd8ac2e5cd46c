import Foundation
@_spi(Replication) import Settee

/// What kinds of document operations a step made (for the round's figures).
package enum DocOperation: String, CaseIterable, Sendable {
    case save, largeSave = "save > 512 B", delete, tombstone = "tombstone with properties", purge
    case batch, abortedBatch = "aborted batch", replicated = "replicated revision", resolve = "conflict resolved"
    case localSave = "local save", localDelete = "local delete", blob = "save with a blob"
}

/// What running one step did: whether it committed (an aborted batch does not) and the
/// operations it made, by kind.
package struct DocStepOutcome: Equatable {
    package var committed = true
    package var operations: [DocOperation: Int] = [:]
    /// The blobs its saves carried, digest to length.
    package var blobs: [String: UInt64] = [:]
    /// Document operations (batches are containers, and large saves are counted among saves).
    package var count: Int {
        operations.filter { ![.batch, .abortedBatch, .largeSave].contains($0.key) }.values.reduce(0, +)
    }
}

/// A seeded random workload of document operations: saves of new and updated documents (bodies
/// from empty to 40 KB, so many are stored out of line), deletions, tombstones keeping
/// properties, purges, `inBatch` batches (some aborted: nothing of them may remain), replicated
/// revisions with histories that extend, branch and conflict, conflict resolution, local
/// documents, and small blobs. Bodies (and half the tombstones) carry the values the rounds'
/// indexes read (``addIndexedValues(_:_:)``), so every kind of write moves index entries.
///
/// Each step is at most one transaction (a blob file may be written before it, and if writing it
/// fails, nothing is: the step changes nothing), and what it does
/// depends only on the seed, its index and the database's contents: a reference database that
/// ran the same steps holds exactly what the crashed one must hold.
package struct DocWorkload {
    package let seed: UInt64

    /// The document IDs the workload uses: short ones, long ones (hundreds of bytes, sharing a
    /// prefix) and a few that are not ASCII.
    package static let documentIDs: [String] = {
        var ids = (0..<120).map { "doc-\(String(format: "%03d", $0))" }
        ids += (0..<6).map { "long-\($0)-" + String(repeating: "x", count: 200 + 97 * $0) }
        ids += ["é-1", "字-2", "🙂-3", "ß-4"]
        return ids
    }()
    package static let localIDs = (0..<12).map { "checkpoint-\($0)" }

    package init(seed: UInt64) { self.seed = seed }

    struct Aborted: Error {}

    /// Runs step `index` on `db`.
    package func run(_ index: Int, on db: Database) throws -> DocStepOutcome {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(index)))
        var out = DocStepOutcome()
        let kind = r.next(below: 100)
        switch kind {
        case 0..<28: try save(db, &r, index, &out)
        case 28..<36: try delete(db, &r, &out)
        case 36..<41: try tombstone(db, &r, index, &out)
        case 41..<45: try purge(db, &r, &out)
        case 45..<60:
            let aborts = r.chance(15)
            let n = 2 + Int(r.next(below: 19))
            var inner = DocStepOutcome()
            do {
                try db.inBatch {
                    for _ in 0..<n { try batchOperation(db, &r, index, &inner) }
                    if aborts { throw Aborted() }
                }
                out.operations.merge(inner.operations, uniquingKeysWith: +)
                out.operations[.batch, default: 0] += 1
            } catch is Aborted {
                out.committed = false
                out.operations[.abortedBatch, default: 0] += 1
            }
        case 60..<72: try replicate(db, &r, index, count: 1 + Int(r.next(below: 4)), &out)
        case 72..<80: try resolve(db, &r, index, &out)
        case 80..<90: try local(db, &r, index, &out)
        default: try saveWithBlob(db, &r, index, &out)
        }
        return out
    }

    private func batchOperation(_ db: Database, _ r: inout SplitMix, _ index: Int, _ out: inout DocStepOutcome) throws {
        switch r.next(below: 100) {
        case 0..<45: try save(db, &r, index, &out)
        case 45..<58: try delete(db, &r, &out)
        case 58..<63: try tombstone(db, &r, index, &out)
        case 63..<68: try purge(db, &r, &out)
        case 68..<83: try replicate(db, &r, index, count: 1, &out)
        case 83..<88: try resolve(db, &r, index, &out)
        default: try local(db, &r, index, &out)
        }
    }

    // MARK: - Operations

    private func pick(_ r: inout SplitMix) -> String {
        Self.documentIDs[Int(r.next(below: UInt64(Self.documentIDs.count)))]
    }

    /// A new revision of a random document: an update of the current one, or a new document
    /// (which continues a tombstone's branch).
    private func save(_ db: Database, _ r: inout SplitMix, _ index: Int, _ out: inout DocStepOutcome) throws {
        let id = pick(&r)
        let props = Self.body(&r, step: index)
        let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
        m.setData(props)
        try db.saveDocument(m)
        out.operations[.save, default: 0] += 1
        if case .string(let s)? = props["text"], s.utf8.count > 512 { out.operations[.largeSave, default: 0] += 1 }
    }

    /// Looks at up to eight random IDs for a live document.
    private func live(_ db: Database, _ r: inout SplitMix) throws -> Document? {
        for _ in 0..<8 {
            if let d = try db.document(withID: pick(&r)) { return d }
        }
        return nil
    }

    private func delete(_ db: Database, _ r: inout SplitMix, _ out: inout DocStepOutcome) throws {
        guard let d = try live(db, &r) else { return }
        try db.deleteDocument(d)
        out.operations[.delete, default: 0] += 1
    }

    /// A deletion that keeps some properties (a `worker_id` a filter could route on).
    private func tombstone(_ db: Database, _ r: inout SplitMix, _ index: Int, _ out: inout DocStepOutcome) throws {
        guard let d = try live(db, &r) else { return }
        let m = d.toMutable()
        var props: [String: JSONValue] = ["worker_id": .int(Int64(r.next(below: 50))), "deleted_at": .string("step \(index)"),
                                          "note": .string(Self.text(&r, length: Int(r.next(below: 700))))]
        // Half keep values the indexes read: a deleted document is in no index all the same.
        if r.chance(50) { Self.addIndexedValues(&props, &r) }
        m.setData(props)
        m.isDeletion = true
        try db.saveDocument(m)
        out.operations[.tombstone, default: 0] += 1
    }

    private func purge(_ db: Database, _ r: inout SplitMix, _ out: inout DocStepOutcome) throws {
        for _ in 0..<8 {
            let id = pick(&r)
            if try db.revisionTree(withID: id) != nil {
                try db.purgeDocument(withID: id)
                out.operations[.purge, default: 0] += 1
                return
            }
        }
    }

    /// Replicated revisions in one call (one transaction): extending the current revision,
    /// branching beside a leaf or from an older revision (a conflict), an unrelated history (a
    /// new root: a conflict too), tombstones, and revisions the database already has.
    private func replicate(_ db: Database, _ r: inout SplitMix, _ index: Int, count: Int, _ out: inout DocStepOutcome) throws {
        var revisions: [ReplicatedRevision] = []
        for _ in 0..<count {
            let id = pick(&r)
            let deleted = r.chance(12)
            let props = deleted && r.chance(70) ? [:] : Self.body(&r, step: index)
            guard let tree = try db.revisionTree(withID: id) else {
                let top = 1 + r.next(below: 4)
                let history = Self.newIDs(&r, top: top, count: Int(1 + r.next(below: top)))
                revisions.append(ReplicatedRevision(documentID: id, revisionID: history[0], history: history,
                                                    isDeleted: deleted, properties: props))
                continue
            }
            let byID = Dictionary(tree.revisions.map { ($0.revisionID, $0) }, uniquingKeysWith: { a, _ in a })
            func chain(_ id: String?) -> [String] {
                var out: [String] = []
                var at = id
                while let a = at, let info = byID[a] { out.append(a); at = info.parentRevisionID }
                return out
            }
            let leaves = tree.revisions.filter(\.isLeaf)
            let base: RevisionInfo?
            switch r.next(below: 100) {
            case 0..<35: base = byID[tree.currentRevisionID]
            case 35..<70: base = leaves[Int(r.next(below: UInt64(leaves.count)))].parentRevisionID.flatMap { byID[$0] }
            case 70..<85: base = tree.revisions[Int(r.next(below: UInt64(tree.revisions.count)))]
            case 85..<92: base = nil
            default:
                // One it already has: nothing changes.
                let leaf = leaves[Int(r.next(below: UInt64(leaves.count)))]
                let history = chain(leaf.revisionID)
                revisions.append(ReplicatedRevision(documentID: id, revisionID: history[0], history: history,
                                                    isDeleted: leaf.isDeleted, properties: props))
                continue
            }
            let fresh = 1 + r.next(below: 3)
            let top = (base?.generation ?? r.next(below: 3)) + fresh
            var history = Self.newIDs(&r, top: top, count: Int(fresh))
            // Peers send a limited history: sometimes only part of the known ancestry.
            let known = chain(base?.revisionID)
            history += known.prefix(r.chance(20) ? Int(r.next(below: UInt64(known.count + 1))) : known.count)
            revisions.append(ReplicatedRevision(documentID: id, revisionID: history[0], history: history,
                                                isDeleted: deleted, properties: props))
        }
        for outcome in try db.insertRevisions(revisions) {
            if case .rejected(let e) = outcome { throw e }
        }
        out.operations[.replicated, default: 0] += revisions.count
    }

    /// Resolves a random conflict: keeping the current revision or another leaf, with the
    /// winner's body or a merged one. With no conflict open, makes one instead.
    private func resolve(_ db: Database, _ r: inout SplitMix, _ index: Int, _ out: inout DocStepOutcome) throws {
        var options = AllDocumentsOptions()
        options.onlyConflicts = true
        let ids = try db.allDocuments(options).readAll().map(\.id)
        guard !ids.isEmpty else { return try replicate(db, &r, index, count: 1, &out) }
        let id = ids[Int(r.next(below: UInt64(ids.count)))]
        let leaves = try db.conflictingRevisions(withID: id)
        let winner = r.chance(50) ? nil : leaves[Int(r.next(below: UInt64(leaves.count)))].revisionID
        let merged = r.chance(50) ? Self.body(&r, step: index) : nil
        try db.resolveConflict(withID: id, winningRevisionID: winner, mergedProperties: merged)
        out.operations[.resolve, default: 0] += 1
    }

    private func local(_ db: Database, _ r: inout SplitMix, _ index: Int, _ out: inout DocStepOutcome) throws {
        let id = Self.localIDs[Int(r.next(below: UInt64(Self.localIDs.count)))]
        let name = r.chance(30) ? "_local/" + id : id
        if r.chance(20), try db.localDocument(withID: id) != nil {
            try db.deleteLocalDocument(withID: name)
            out.operations[.localDelete, default: 0] += 1
        } else {
            var props = Self.body(&r, step: index)
            props["last_seq"] = .int(Int64(index))
            try db.saveLocalDocument(props, withID: name)
            out.operations[.localSave, default: 0] += 1
        }
    }

    /// A save carrying a small blob (its content written to the blob store first); contents are
    /// drawn from a small set, so documents share blobs.
    private func saveWithBlob(_ db: Database, _ r: inout SplitMix, _ index: Int, _ out: inout DocStepOutcome) throws {
        let id = pick(&r)
        var g = SplitMix(seed: r.next(below: 40))
        let content = Data((0..<(1 + Int(g.next(below: 6000)))).map { _ in UInt8(truncatingIfNeeded: g.next()) })
        let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
        m.setData(Self.body(&r, step: index))
        let blob = Blob(contentType: "application/octet-stream", data: content)
        m.setBlob(blob, forKey: "attachment")
        try db.saveDocument(m)
        out.operations[.blob, default: 0] += 1
        out.blobs[blob.digest] = blob.length
    }

    // MARK: - Values

    /// A document body: empty, or a few fields around a text of 0 to 40,000 bytes (random or
    /// repetitive, so compressible), with arrays, nested objects, numbers and non-ASCII text.
    package static func body(_ r: inout SplitMix, step: Int) -> [String: JSONValue] {
        if r.chance(4) { return [:] }
        let length: Int
        switch r.next(below: 100) {
        case 0..<35: length = Int(r.next(below: 64))
        case 35..<60: length = 64 + Int(r.next(below: 449))
        case 60..<90: length = 513 + Int(r.next(below: 3584))
        default: length = 4096 + Int(r.next(below: 36_000))
        }
        var p: [String: JSONValue] = ["step": .int(Int64(step)), "n": .int(Int64(bitPattern: r.next())),
                                      "text": .string(text(&r, length: length))]
        if r.chance(40) { p["tags"] = .array((0..<Int(r.next(below: 6))).map { .string("t\($0 * 7 % 5)") }) }
        if r.chance(30) {
            p["nested"] = .object(["a": .double(Double(r.next(below: 10_000)) / 8), "b": .null, "c": .bool(r.chance(50)),
                                   "d": .array([.int(-1), .string("x\u{0}y\"z\\")])])
        }
        if r.chance(10) { p["unicode"] = .string("é字🙂 — \u{7f}") }
        addIndexedValues(&p, &r)
        return p
    }

    /// The values the rounds' value indexes read (``DocIndexes``), each sometimes missing: a
    /// `kind` from a handful of strings (some equal under the collation's lower levels only), now
    /// and then a number, null, an array or a string long enough that its key beside a long
    /// document ID is over the engine's limit (an overflow entry); a `rank`, mostly a small
    /// integer; an `active` flag (rarely the number 1, which is not TRUE).
    static func addIndexedValues(_ p: inout [String: JSONValue], _ r: inout SplitMix) {
        if !r.chance(8) {
            switch r.next(below: 100) {
            case 0..<80: p["kind"] = .string(["task", "note", "event", "Task", "tâsk", "note "][Int(r.next(below: 6))])
            case 80..<86: p["kind"] = .null
            case 86..<92: p["kind"] = .int(Int64(r.next(below: 4)))
            case 92..<96: p["kind"] = .array([.string("task"), .int(Int64(r.next(below: 3)))])
            default: p["kind"] = .string("long " + text(&r, length: 300 + Int(r.next(below: 700))))
            }
        }
        if !r.chance(10) {
            switch r.next(below: 100) {
            case 0..<75: p["rank"] = .int(Int64(r.next(below: 10)))
            case 75..<85: p["rank"] = .double(Double(r.next(below: 10)) + 0.5)
            case 85..<90: p["rank"] = .null
            case 90..<95: p["rank"] = .string(String(r.next(below: 10)))
            default: p["rank"] = .int(Int64(bitPattern: r.next()))
            }
        }
        if !r.chance(15) { p["active"] = r.chance(8) ? .int(1) : .bool(r.chance(55)) }
    }

    static func text(_ r: inout SplitMix, length: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:-_".utf8)
        var bytes = [UInt8](repeating: 0, count: length)
        if r.chance(40) {
            let phrase = (0..<(1 + Int(r.next(below: 12)))).map { _ in alphabet[Int(r.next(below: UInt64(alphabet.count)))] }
            for i in bytes.indices { bytes[i] = phrase[i % phrase.count] }
        } else {
            for i in bytes.indices { bytes[i] = alphabet[Int(r.next(below: UInt64(alphabet.count)))] }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `count` new revision IDs counting down from generation `top`, as a peer would make them.
    static func newIDs(_ r: inout SplitMix, top: UInt64, count: Int) -> [String] {
        (0..<count).map { i in
            let digest = (0..<2).map { _ in String(r.next(), radix: 16) }.joined()
            return "\(top - UInt64(i))-\(digest)"
        }
    }
}
