import Foundation
@_spi(Replication) import Settee

/// Everything a database shows through the public API about the documents a ``DocWorkload``
/// uses: each document's revision tree, current revision (body, deletion, sequence) and leaf
/// bodies, the blobs they reference, local documents, the count, the last sequence and the
/// changes feed. Two databases that ran the same steps have equal snapshots.
package struct DocSnapshot: Equatable {
    package struct DocumentState: Equatable {
        var tree: RevisionTree
        /// The current revision's body; nil when it could not be read (a failure).
        var body: [String: JSONValue]?
        var isDeleted: Bool
        var sequence: UInt64
        /// Bodies of the leaves whose bodies are kept, by revision ID.
        var leafBodies: [String: [String: JSONValue]]
    }

    package struct LocalState: Equatable {
        var properties: [String: JSONValue]
        var revisionID: String
    }

    package var documents: [String: DocumentState] = [:]
    package var locals: [String: LocalState] = [:]
    /// Content of every blob a current revision or a leaf references (nil: missing).
    package var blobs: [String: Data?] = [:]
    package var count: UInt64 = 0
    package var lastSequence: UInt64 = 0
    package var changes: [ChangeEntry] = []
    /// Every document ID the database lists, deleted ones included.
    package var allIDs: [String] = []
    /// IDs for which `document(withID:)` disagrees with the current revision's deletion.
    package var liveLookupMismatches: [String] = []

    package var liveDocuments: Int { documents.values.filter { !$0.isDeleted }.count }
    package var conflicted: Int { documents.values.filter(\.tree.isConflicted).count }

    /// Reads the snapshot; throws what the database throws (a corrupted read, say).
    package init(_ db: Database) throws {
        for id in DocWorkload.documentIDs {
            guard let tree = try db.revisionTree(withID: id) else { continue }
            let current = try db.document(withID: id, revisionID: tree.currentRevisionID)
            var leafBodies: [String: [String: JSONValue]] = [:]
            for leaf in tree.leafRevisionIDs {
                if let d = try db.document(withID: id, revisionID: leaf) { leafBodies[leaf] = d.toDictionary() }
            }
            let body = current?.toDictionary()
            let deleted = current?.isDeleted ?? true
            documents[id] = DocumentState(tree: tree, body: body, isDeleted: deleted, sequence: current?.sequence ?? 0,
                                          leafBodies: leafBodies)
            if (try db.document(withID: id) == nil) != deleted { liveLookupMismatches.append(id) }
            let bodies = [body ?? [:]] + leafBodies.sorted(by: { $0.key < $1.key }).map(\.value)
            for digest in bodies.flatMap({ Self.blobDigests(.object($0)) }) where blobs[digest] == nil {
                blobs[digest] = .some(try db.blob(withDigest: digest)?.content)
            }
        }
        for id in DocWorkload.localIDs {
            if let (p, rev) = try db.localDocumentWithRevision(withID: id) { locals[id] = LocalState(properties: p, revisionID: rev) }
        }
        count = try db.count
        lastSequence = try db.lastSequence
        changes = try db.changes(since: 0)
        var options = AllDocumentsOptions()
        options.includeDeleted = true
        try db.forEachDocument(options) { allIDs.append($0.id); return true }
    }

    /// The snapshot without what compaction may legitimately change: whether revisions that are
    /// not leaves still have their bodies (compaction keeps the leaves' and an open conflict's
    /// common ancestor's, drops the others; a database that compacted at another moment, or never,
    /// keeps more). Leaves' bodies, trees, sequences and everything else stay compared.
    package var comparable: DocSnapshot {
        var s = self
        for (id, var d) in s.documents {
            for i in d.tree.revisions.indices where !d.tree.revisions[i].isLeaf { d.tree.revisions[i].hasBody = false }
            s.documents[id] = d
        }
        return s
    }

    /// An ID short enough for a message.
    static func short(_ id: String) -> String { id.count > 24 ? id.prefix(20) + "…(\(id.utf8.count) bytes)" : id }

    static func blobDigests(_ v: JSONValue) -> [String] {
        switch v {
        case .object(let o):
            var out: [String] = []
            if o["@type"] == .string("blob"), case .string(let d)? = o["digest"] { out.append(d) }
            for x in o.values { out += blobDigests(x) }
            return out
        case .array(let a): return a.flatMap(blobDigests)
        default: return []
        }
    }

    /// What is wrong with the snapshot on its own, whatever the workload did: the changes feed
    /// lists every document (live or deleted) once, in increasing sequence order, with its current
    /// revision and leaves; `count` is the number of live documents; every current revision is
    /// readable and every blob it or a leaf references is stored, its content hashing to its digest.
    package func problems() -> [String] {
        var out: [String] = []
        var seen = Set<String>()
        var last: UInt64 = 0
        for c in changes {
            if c.sequence <= last { out.append("changes: sequence \(c.sequence) after \(last)") }
            last = c.sequence
            if !seen.insert(c.documentID).inserted { out.append("changes: \(Self.short(c.documentID)) listed twice") }
            guard let d = documents[c.documentID] else {
                out.append("changes: \(Self.short(c.documentID)) listed but not in the database")
                continue
            }
            if c.revisionID != d.tree.currentRevisionID || c.isDeleted != d.isDeleted || c.sequence != d.sequence
                || c.leafRevisionIDs != d.tree.leafRevisionIDs || c.isConflicted != d.tree.isConflicted {
                out.append("changes: the entry of \(Self.short(c.documentID)) (\(c.sequence), \(c.revisionID), deleted \(c.isDeleted)) disagrees with the document (\(d.sequence), \(d.tree.currentRevisionID), deleted \(d.isDeleted))")
            }
        }
        for id in documents.keys where !seen.contains(id) { out.append("changes: \(Self.short(id)) missing from the feed") }
        if last > lastSequence { out.append("lastSequence \(lastSequence) is below the feed's \(last)") }
        if count != UInt64(liveDocuments) { out.append("count is \(count), live documents \(liveDocuments)") }
        if Set(allIDs) != Set(documents.keys) || allIDs.count != documents.count {
            out.append("allDocuments lists \(allIDs.count) documents, \(documents.count) known")
        }
        for (fullID, d) in documents.sorted(by: { $0.key < $1.key }) {
            let id = Self.short(fullID)
            if d.body == nil { out.append("\(id): the current revision \(d.tree.currentRevisionID) has no body") }
            if d.tree.leafRevisionIDs.first != d.tree.currentRevisionID { out.append("\(id): the current revision is not the first leaf") }
        }
        for id in liveLookupMismatches { out.append("\(Self.short(id)): document(withID:) disagrees with the current revision's deletion") }
        for (digest, content) in blobs.sorted(by: { $0.key < $1.key }) {
            guard let content else {
                out.append("blob \(digest) is referenced but missing")
                continue
            }
            if Blob(contentType: "", data: content).digest != digest { out.append("blob \(digest) holds content of another digest") }
        }
        return out
    }

    /// The first difference from `expected`, for failure reports.
    package func difference(from expected: DocSnapshot) -> String {
        for fullID in Set(documents.keys).union(expected.documents.keys).sorted() {
            let f = documents[fullID], e = expected.documents[fullID]
            guard f != e else { continue }
            let id = Self.short(fullID)
            guard let f else { return "\(id): expected at \(e!.tree.currentRevisionID) (seq \(e!.sequence)), found absent" }
            guard let e else { return "\(id): expected absent (never saved, or purged), found at \(f.tree.currentRevisionID) (seq \(f.sequence))" }
            if f.tree.currentRevisionID != e.tree.currentRevisionID || f.sequence != e.sequence {
                return "\(id): expected \(e.tree.currentRevisionID) (seq \(e.sequence), deleted \(e.isDeleted)), found \(f.tree.currentRevisionID) (seq \(f.sequence), deleted \(f.isDeleted))"
            }
            if f.tree != e.tree { return "\(id): revision trees differ (leaves \(f.tree.leafRevisionIDs) vs expected \(e.tree.leafRevisionIDs))" }
            if f.body != e.body { return "\(id): the body of \(f.tree.currentRevisionID) differs" }
            return "\(id): leaf bodies or deletion differ"
        }
        if locals != expected.locals {
            for id in Set(locals.keys).union(expected.locals.keys).sorted() where locals[id] != expected.locals[id] {
                return "local \(id): expected \(expected.locals[id]?.revisionID ?? "absent"), found \(locals[id]?.revisionID ?? "absent")"
            }
        }
        if blobs != expected.blobs { return "blobs differ" }
        if count != expected.count { return "count \(count), expected \(expected.count)" }
        if lastSequence != expected.lastSequence { return "lastSequence \(lastSequence), expected \(expected.lastSequence)" }
        if changes != expected.changes { return "the changes feeds differ" }
        if self != expected { return "the documents other than by-ID lookups differ" }
        return "no difference"
    }
}
