internal import SetteeStorage

/// One revision in a document's revision tree.
///
/// ```swift
/// for rev in try db.revisionTree(withID: "doc")!.revisions where rev.isLeaf { print(rev.revisionID) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct RevisionInfo: Sendable, Hashable {
    /// The revision ID.
    ///
    /// ```swift
    /// print(rev.revisionID)   // "2-877…"
    /// ```
    public var revisionID: String
    /// The generation (the number before the dash).
    ///
    /// ```swift
    /// print(rev.generation)   // 2
    /// ```
    public var generation: UInt64
    /// The parent's revision ID; nil for the oldest revision kept on its branch.
    ///
    /// ```swift
    /// print(rev.parentRevisionID ?? "root")
    /// ```
    public var parentRevisionID: String?
    /// Whether it is a tombstone.
    ///
    /// ```swift
    /// if rev.isDeleted { … }
    /// ```
    public var isDeleted: Bool
    /// Whether no revision descends from it.
    ///
    /// ```swift
    /// let leaves = tree.revisions.filter(\.isLeaf)
    /// ```
    public var isLeaf: Bool
    /// Whether its body is still stored (readable with `Database.document(withID:revisionID:)`).
    ///
    /// ```swift
    /// if parent.hasBody { threeWayMerge() }
    /// ```
    public var hasBody: Bool
}

/// Every known revision of a document.
///
/// ```swift
/// if let tree = try db.revisionTree(withID: "doc") {
///     print(tree.currentRevisionID, tree.revisions.count)
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct RevisionTree: Sendable, Hashable {
    /// The document ID.
    ///
    /// ```swift
    /// print(tree.documentID)
    /// ```
    public var documentID: String
    /// The current (winning) revision.
    ///
    /// ```swift
    /// print(tree.currentRevisionID)
    /// ```
    public var currentRevisionID: String
    /// Every revision, parents before children.
    ///
    /// ```swift
    /// for r in tree.revisions { print(r.revisionID, r.parentRevisionID ?? "-") }
    /// ```
    public var revisions: [RevisionInfo]
    /// The leaves in winner order: the current revision first.
    ///
    /// ```swift
    /// let losers = tree.leafRevisionIDs.dropFirst()
    /// ```
    public var leafRevisionIDs: [String]
    /// Whether two or more leaves are not deleted.
    ///
    /// ```swift
    /// if tree.isConflicted { resolve() }
    /// ```
    public var isConflicted: Bool
}

extension Database {
    /// The revision tree of a document; nil when the ID is unknown.
    ///
    /// ```swift
    /// let tree = try db.revisionTree(withID: "doc")
    /// ```
    public func revisionTree(withID id: String) throws -> RevisionTree? {
        try checkOpen()
        let key = try validateDocumentID(id)
        return try core.read { tx -> RevisionTree? in
            guard let meta = try core.meta(tx, id: key) else { return nil }
            let tree = try core.tree(tx, meta)
            let leaf = tree.leafMask()
            let infos = tree.revs.indices.map { i in
                let r = tree.revs[i]
                return RevisionInfo(revisionID: r.id, generation: r.generation,
                                    parentRevisionID: r.parent >= 0 ? tree.revs[r.parent].id : nil,
                                    isDeleted: r.deleted, isLeaf: leaf[i], hasBody: r.hasBody)
            }
            return RevisionTree(documentID: id, currentRevisionID: meta.revisionID, revisions: infos,
                                leafRevisionIDs: tree.sortedLeaves().map { tree.revs[$0].id },
                                isConflicted: tree.isConflicted())
        }
    }

    /// A revision of a document by ID, while its body is kept (until compaction for a non-leaf:
    /// so the common ancestor of a conflict is readable for a three-way merge). Nil when the
    /// revision is unknown or its body is gone. Tombstones are returned too (``Document/isDeleted``).
    ///
    /// ```swift
    /// let tree = try db.revisionTree(withID: "doc")!
    /// let current = tree.revisions.first { $0.revisionID == tree.currentRevisionID }!
    /// let parent = try db.document(withID: "doc", revisionID: current.parentRevisionID!)
    /// ```
    public func document(withID id: String, revisionID: String) throws -> Document? {
        try checkOpen()
        let key = try validateDocumentID(id)
        return try core.read { tx -> Document? in
            guard let meta = try core.meta(tx, id: key) else { return nil }
            let tree = try core.tree(tx, meta)
            guard let i = tree.index(of: revisionID), tree.revs[i].hasBody else { return nil }
            return try core.document(tx, id: id, tree: tree, index: i,
                                     sequence: revisionID == meta.revisionID ? meta.sequence : 0)
        }
    }

    /// The undeleted leaf revisions of a document, the current one first: more than one means a
    /// conflict. Empty when the document is unknown or deleted.
    ///
    /// ```swift
    /// let revs = try db.conflictingRevisions(withID: "doc")
    /// if revs.count > 1 { print("in conflict:", revs.map { $0.revisionID! }) }
    /// ```
    public func conflictingRevisions(withID id: String) throws -> [Document] {
        try checkOpen()
        let key = try validateDocumentID(id)
        return try core.read { tx -> [Document] in
            guard let meta = try core.meta(tx, id: key) else { return [] }
            let tree = try core.tree(tx, meta)
            return try tree.sortedLeaves().filter { !tree.revs[$0].deleted }.map { i in
                try core.document(tx, id: id, tree: tree, index: i,
                                  sequence: tree.revs[i].id == meta.revisionID ? meta.sequence : 0)
            }
        }
    }

    /// Resolves a conflict in one transaction: writes a new revision on the winning leaf (its own
    /// body, or `mergedProperties`) and a tombstone on every other undeleted leaf, so the result
    /// replicates and every peer converges. Returns the document as now current.
    ///
    /// ```swift
    /// let revs = try db.conflictingRevisions(withID: "task")
    /// var merged = revs[0].toDictionary()
    /// for r in revs.dropFirst() { merged.merge(r.toDictionary()) { mine, _ in mine } }
    /// try db.resolveConflict(withID: "task", mergedProperties: merged)
    /// ```
    ///
    /// - Parameters:
    ///   - id: the document in conflict.
    ///   - winningRevisionID: the leaf to keep (default: the current revision).
    ///   - mergedProperties: the body of the resolved revision (default: the winning leaf's).
    /// - Throws: ``SetteeError/Code/notFound`` for an unknown document or a winning revision that
    ///   is not an undeleted leaf; ``SetteeError/Code/forbidden`` from a validation.
    @discardableResult
    public func resolveConflict(withID id: String, winningRevisionID: String? = nil,
                                mergedProperties: [String: JSONValue]? = nil) throws -> Document {
        try checkOpen()
        let key = try validateDocumentID(id)
        let merged = try mergedProperties.map { try PreparedBody($0) }
        let empty = try PreparedBody([:])
        try core.write { c in
            guard let old = try c.meta(key) else { throw SetteeError(.notFound, "no document with that ID") }
            var tree = try c.tree(old)
            let leaves = tree.sortedLeaves().filter { !tree.revs[$0].deleted }
            let winnerID = winningRevisionID ?? old.revisionID
            guard let w = leaves.first(where: { tree.revs[$0].id == winnerID }) else {
                throw SetteeError(.notFound, "the winning revision is not an undeleted leaf of the document")
            }
            var meta = old
            let winnerBody: PreparedBody
            if let merged {
                winnerBody = merged
            } else {
                let bytes = tree.revs[w].hasBody ? try core.body(c.tx, ref: tree.revs[w].bodyRef) : Array("{}".utf8)
                guard case .object(let o) = try JSONParser.parse(bytes) else {
                    throw SetteeError(.corrupted, "a stored body is not a JSON object")
                }
                winnerBody = try PreparedBody(o, checkReserved: false)
            }
            let loserIDs = leaves.filter { $0 != w }.map { tree.revs[$0].id }
            for loserID in loserIDs {
                if let m = try c.addLocalRevision(id: id, key: key, old: meta, tree: &tree,
                                                  parent: tree.index(of: loserID), body: empty, deleted: true) {
                    meta = m.meta
                }
            }
            if leaves.count > 1 || merged != nil {
                if let m = try c.addLocalRevision(id: id, key: key, old: meta, tree: &tree,
                                                  parent: tree.index(of: winnerID), body: winnerBody, deleted: false) {
                    meta = m.meta
                }
            }
        }
        guard let doc = try currentRevision(id: id, key: key) else { throw SetteeError(.notFound, "no document with that ID") }
        return doc
    }
}
