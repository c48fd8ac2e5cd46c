internal import SetteeStorage

/// A validation function (seed 003): sees each new revision before it is stored, with the
/// document's current revision (nil for a new document), and rejects it by throwing.
///
/// ```swift
/// db.addValidation(named: "created_at") { newRevision, current in
///     if newRevision.isDeleted { return }
///     if let s = newRevision.string(forKey: "created_at"), JSONDate.date(from: s) == nil {
///         throw SetteeError.forbidden("invalid date \(s)")
///     }
/// }
/// ```
///
/// Any error other than a ``SetteeError`` with code ``SetteeError/Code/forbidden`` is reported
/// as `forbidden` with the error's description as the message.
public typealias Validation = @Sendable (_ newRevision: Document, _ current: Document?) throws -> Void

/// The largest document body accepted, in bytes of canonical JSON (CouchDB's default is 8 MB;
/// large content belongs in blobs).
let maxBodySize = 16 << 20

/// A body ready to store and what it references: canonical JSON written from properties, or a
/// replicated revision's JSON, checked and kept as it came.
struct PreparedBody {
    /// The properties, when the body was written from them (a checked JSON body is not parsed).
    var properties: [String: JSONValue]?
    var bytes: [UInt8]
    var blobDigests: [String]
    /// No properties: stored as no body at all (ref 0).
    var isEmpty: Bool

    init(_ properties: [String: JSONValue], checkReserved: Bool = true) throws(SetteeError) {
        if checkReserved, let k = properties.keys.first(where: { $0.utf8.first == UInt8(ascii: "_") && $0 != attachmentsKey }) {
            throw reservedKey(k)
        }
        if let a = properties[attachmentsKey], case .object = a {} else if properties[attachmentsKey] != nil {
            throw SetteeError(.invalidParameter, "'_attachments' must be a dictionary of blobs by name")
        }
        self.properties = properties
        var digests: [String] = []
        self.bytes = try JSONWriter.body(properties, blobDigests: &digests)
        try Self.checkSize(bytes)
        blobDigests = digests
        isEmpty = properties.isEmpty
    }

    /// A JSON body as received: it must be an object the parser accepts, with no reserved
    /// top-level key, within the size limit.
    init(json: [UInt8]) throws(SetteeError) {
        try Self.checkSize(json)
        let scan = try json.withUnsafeBytes { b in Swift.Result { () throws(SetteeError) in try JSONParser.scanBody(b) } }.get()
        properties = nil
        bytes = json
        blobDigests = scan.blobDigests
        isEmpty = scan.isEmpty
    }

    private static func checkSize(_ bytes: [UInt8]) throws(SetteeError) {
        guard bytes.count <= maxBodySize else {
            throw SetteeError(.tooLarge, "document body is \(bytes.count) bytes; the limit is \(maxBodySize) (store large content in blobs)")
        }
    }

    static func collect(_ v: JSONValue, into out: inout [String]) {
        switch v {
        case .object(let o):
            if o["@type"] == .string("blob"), case .string(let d)? = o["digest"] { out.append(d) }
            for x in o.values { collect(x, into: &out) }
        case .array(let a):
            for x in a { collect(x, into: &out) }
        default: break
        }
    }

}

/// Document IDs: non-empty, at most 1,000 bytes of UTF-8, no leading `_` (reserved, as in CouchDB)
/// except design documents' `_design/…`, which CouchDB stores and replicates like any other.
func validateDocumentID(_ id: String) throws(SetteeError) -> [UInt8] {
    let key = Array(id.utf8)
    let r: Swift.Result<Void, SetteeError> = key.withUnsafeBytes { b in Swift.Result { () throws(SetteeError) in try validateDocumentID(b) } }
    try r.get()
    return key
}

private let designPrefix = Array("_design/".utf8)

func validateDocumentID(_ key: UnsafeRawBufferPointer) throws(SetteeError) {
    guard !key.isEmpty else { throw SetteeError(.invalidParameter, "document IDs cannot be empty") }
    guard key.count <= 1000 else { throw SetteeError(.invalidParameter, "document IDs are at most 1000 bytes") }
    guard key[0] != UInt8(ascii: "_") || (key.count > designPrefix.count && key.starts(with: designPrefix)) else {
        throw SetteeError(.invalidParameter, "document IDs cannot start with '_' (reserved), except design documents' _design/")
    }
}

extension WriteContext {
    var trees: Trees { core.trees }

    func meta(_ key: [UInt8]) throws -> DocMeta? { try core.meta(tx, id: key) }

    /// The tree a write starts from. One that holds a revision twice (which no merge makes, but
    /// damage or another writer can) is made whole first, so the write stores it repaired.
    func tree(_ meta: DocMeta?) throws -> RevTree {
        guard let meta else { return RevTree() }
        let tree = try core.tree(tx, meta)
        return tree.revs.count > 1 && !tree.duplicateIDs().isEmpty ? tree.removingDuplicates() : tree
    }

    /// Runs every validation on a new revision.
    func validate(id: String, revisionID: String, deleted: Bool, body: PreparedBody, old: DocMeta?) throws {
        let validations = core.validations.withLock { $0 }
        guard !validations.isEmpty else { return }
        let new = body.properties.map {
            Document(id: id, revisionID: revisionID, sequence: 0, isDeleted: deleted, properties: $0, body: body.bytes, blobs: core.blobs)
        } ?? Document(id: id, revisionID: revisionID, sequence: 0, isDeleted: deleted, body: body.bytes, blobs: core.blobs)
        let current = try old.map { try core.document(tx, id: id, meta: $0) }
        for v in validations {
            do {
                try v.body(new, current)
            } catch let e as SetteeError where e.code == .forbidden {
                throw e
            } catch {
                throw SetteeError.forbidden("\(v.name): \(error)")
            }
        }
    }

    func checkBlobs(_ body: PreparedBody) throws {
        for d in body.blobDigests where try !core.blobs.contains(digest: d) {
            guard BlobStore.fileName(forDigest: d) != nil else {
                throw SetteeError(.invalidParameter, "a blob property has a malformed digest")
            }
            throw SetteeError(.notFound, "blob \(d) is not in the database; save the document that carries it or call saveBlob first")
        }
    }

    /// Adds a locally created revision under `parent` (an index in `tree`, or nil for a first
    /// revision) and commits the document. Returns nil when an identical revision already exists
    /// (identical edits give identical IDs: nothing to store). `revisionID`, when given, is the ID
    /// already computed for this parent, body and deletion.
    func addLocalRevision(id: String, key: [UInt8], old: DocMeta?, tree: inout RevTree, parent: Int?,
                          body: PreparedBody, deleted: Bool, revisionID: String? = nil) throws -> (meta: DocMeta, revisionID: String)? {
        let parentID = parent.map { tree.revs[$0].id }
        let generation = try RevisionID.child(of: parent.map { tree.revs[$0].generation } ?? 0)
        let revID = revisionID ?? RevisionID.make(parent: parentID, generation: generation, deleted: deleted, canonicalBody: body.bytes)
        if tree.index(of: revID) != nil { return nil }
        try checkBlobs(body)
        try validate(id: id, revisionID: revID, deleted: deleted, body: body, old: old)
        try route(id: id, key: key, revisionID: revID, deleted: deleted, body: body, tree: tree, parent: parent)
        let ref = body.isEmpty ? 0 : try tx.appendValue(body.bytes).rawValue
        tree.add(id: revID, generation: generation, parent: parent, deleted: deleted,
                 hasAttachments: !body.blobDigests.isEmpty, bodyRef: ref)
        // The document's metadata names its winner, which need not be the revision added.
        return (try commit(id: id, key: key, old: old, tree: &tree, added: body.properties.map { (revID, $0) }), revID)
    }

    /// Stores a document's tree and tells the commit's participants (routing, indexes, expiry)
    /// of its new winner. `added`: the revision just added and its properties, when a local
    /// save has them (the indexes do not parse its body again if it wins).
    func commit(id: String, key: [UInt8], old: DocMeta?, tree: inout RevTree,
                added: (revisionID: String, properties: [String: JSONValue])? = nil) throws -> DocMeta {
        tree.prune(maxDepth: core.maxRevTreeDepth)
        let (w, flags) = tree.winnerAndFlags()
        let winner = tree.revs[w]
        let seq = nextSequence()
        if let old {
            // The old tree is superseded; the old winner's body goes at the next compaction
            // unless that revision is still a leaf (or an open conflict's base, rarely).
            try addDead(old.treeRef)
            if old.bodyRef != 0, let i = tree.index(of: old.revisionID), tree.revs.contains(where: { $0.parent == i }) {
                try addDead(old.bodyRef)
            }
        }
        // A document with one revision stores no tree: its metadata implies it.
        let treeRef = tree.isImpliedByMetadata ? 0 : try tx.appendValue(tree.encoded()).rawValue
        let meta = DocMeta(flags: flags, sequence: seq, revisionID: winner.id,
                           bodyRef: winner.hasBody ? winner.bodyRef : 0, treeRef: treeRef)
        try tx.put(key, meta.encoded(), in: trees.byID)
        var change = CommittedDocument(id: id, key: key, old: old, new: meta, tree: tree, winner: w, sequence: seq,
                                       winnerProperties: added.flatMap { $0.revisionID == winner.id ? $0.properties : nil })
        for p in participants.all { try p.documentChanged(&change, in: self) }
        if let old { try tx.delete([UInt8](bigEndian: old.sequence), in: trees.bySequence) }
        try tx.put([UInt8](bigEndian: seq), SequenceEntry(flags: flags, documentID: id, revisionID: winner.id).encoded(routing: change.routing),
                   in: trees.bySequence)
        let wasConflicted = old?.flags.contains(.conflicted) ?? false
        if flags.contains(.conflicted) && !wasConflicted {
            try tx.put(key, [], in: trees.conflicts)
        } else if !flags.contains(.conflicted) && wasConflicted {
            try tx.delete(key, in: trees.conflicts)
        }
        let wasLive = change.wasLive
        if wasLive != !winner.deleted {
            liveCount = wasLive ? liveCount &- 1 : liveCount &+ 1
        }
        changes.append(DocumentChange(documentID: id, revisionID: winner.id, sequence: seq, isDeleted: winner.deleted,
                                      isConflicted: flags.contains(.conflicted), isPurged: false))
        return meta
    }

    /// Removes every trace of a document; returns false when it was not there.
    func purge(id: String, key: [UInt8]) throws -> Bool {
        guard let old = try meta(key) else { return false }
        try purge(id: id, key: key, meta: old)
        return true
    }

    /// Removes every trace of a document whose metadata was just read: the participants' records
    /// first (routing reads the document's sequence entry), then its by-ID, by-sequence and
    /// conflict entries. Takes a sequence and reports a purge change.
    func purge(id: String, key: [UInt8], meta old: DocMeta) throws {
        let seq = nextSequence()
        var change = CommittedDocument(id: id, key: key, old: old, new: nil, tree: nil, winner: 0, sequence: seq, winnerProperties: nil)
        for p in participants.all { try p.documentChanged(&change, in: self) }
        try addDead(old.treeRef)
        try addDead(old.bodyRef)
        try tx.delete(key, in: trees.byID)
        try tx.delete([UInt8](bigEndian: old.sequence), in: trees.bySequence)
        if old.flags.contains(.conflicted) { try tx.delete(key, in: trees.conflicts) }
        if !old.flags.contains(.deleted) { liveCount &-= 1 }
        changes.append(DocumentChange(documentID: id, revisionID: nil, sequence: seq, isDeleted: false,
                                      isConflicted: false, isPurged: true))
    }
}

extension RevTree {
    /// The winner and the document flags stored for this tree (the metadata and changes entry of
    /// a commit; what the check expects of them).
    func winnerAndFlags() -> (winner: Int, flags: DocFlags) {
        let order = sortedLeaves()
        let winner = revs[order[0]]
        var flags: DocFlags = []
        if winner.deleted { flags.insert(.deleted) }
        if winner.hasAttachments { flags.insert(.hasAttachments) }
        if order.count > 1 { flags.insert(.multipleLeaves) }
        if order.count > 1 && !revs[order[1]].deleted { flags.insert(.conflicted) }
        return (order[0], flags)
    }
}
