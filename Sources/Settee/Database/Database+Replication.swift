internal import SetteeStorage

/// One row of the changes feed: a document's latest change.
///
/// ```swift
/// for c in try db.changes(since: checkpoint) { print(c.sequence, c.documentID, c.leafRevisionIDs) }
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Replication)
public struct ChangeEntry: Sendable, Hashable {
    /// The sequence of the document's latest change.
    ///
    /// ```swift
    /// checkpoint = entry.sequence
    /// ```
    public var sequence: UInt64
    /// The document ID.
    ///
    /// ```swift
    /// print(entry.documentID)
    /// ```
    public var documentID: String
    /// The current (winning) revision.
    ///
    /// ```swift
    /// print(entry.revisionID)
    /// ```
    public var revisionID: String
    /// Whether the current revision is a tombstone.
    ///
    /// ```swift
    /// if entry.isDeleted { … }
    /// ```
    public var isDeleted: Bool
    /// Whether the document has conflicting leaves.
    ///
    /// ```swift
    /// if entry.isConflicted { … }
    /// ```
    public var isConflicted: Bool
    /// Every leaf revision, deleted ones included, the current one first (CouchDB's
    /// `style=all_docs`).
    ///
    /// ```swift
    /// let revs = entry.leafRevisionIDs
    /// ```
    public var leafRevisionIDs: [String] { [revisionID] + otherLeafRevisionIDs }
    /// The leaves other than the current one (usually none), in winner order.
    ///
    /// ```swift
    /// if !entry.otherLeafRevisionIDs.isEmpty { fetchConflicts(entry.documentID) }
    /// ```
    public var otherLeafRevisionIDs: [String]
}

/// What ``Database/revsDiff(_:visible:)`` reports for one document.
///
/// ```swift
/// let diff = try db.revsDiff(["doc": ["3-abc"]])
/// print(diff["doc"]?.missing ?? [])
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Replication)
public struct RevsDiffResult: Sendable, Hashable {
    /// The revisions this database does not have.
    ///
    /// ```swift
    /// let toFetch = result.missing
    /// ```
    public var missing: [String]
    /// Leaves this database has that may be ancestors of the missing ones (a sender can omit
    /// history and blobs below them).
    ///
    /// ```swift
    /// let known = result.possibleAncestors
    /// ```
    public var possibleAncestors: [String]

    /// A result (as a remote peer's `_revs_diff` answers it).
    ///
    /// ```swift
    /// let r = RevsDiffResult(missing: ["2-b"], possibleAncestors: ["1-a"])
    /// ```
    public init(missing: [String], possibleAncestors: [String]) {
        self.missing = missing
        self.possibleAncestors = possibleAncestors
    }
}

/// A revision with its history, as replicators move them (CouchDB's `open_revs` with
/// `revs=true`, and `_bulk_docs` with `new_edits=false`).
///
/// ```swift
/// let rev = ReplicatedRevision(documentID: "doc", revisionID: "2-877", history: ["2-877", "1-5ac"],
///                              isDeleted: false, properties: ["title": "Naomi's"])
/// try db.insertRevision(rev)
/// ```
///
/// Its body is either properties or JSON text as it came over the wire
/// (``init(documentID:revisionID:history:isDeleted:json:)``). A JSON body is stored as it is after
/// `Database.insertRevisions(_:)` has checked it, never parsed and written again; revisions a
/// ``Database`` hands out (``Database/revision(withID:revisionID:)``) carry their stored JSON, so
/// one database's revisions move into another without being parsed.
///
/// Two revisions are equal when their IDs, histories, deletion flags and properties are; a JSON
/// body and properties with the same content are equal.
///
/// - Note: A value type; safe to share between threads.
@_spi(Replication)
public struct ReplicatedRevision: Sendable, Hashable {
    /// The document ID.
    ///
    /// ```swift
    /// print(rev.documentID)
    /// ```
    public var documentID: String
    /// The revision ID (any `N-<opaque>` form).
    ///
    /// ```swift
    /// print(rev.revisionID)
    /// ```
    public var revisionID: String
    /// The revision and its ancestors, newest first: `history[0] == revisionID`, and each entry's
    /// generation is one less than the one before it.
    ///
    /// ```swift
    /// print(rev.history)   // ["3-c", "2-b", "1-a"]
    /// ```
    public var history: [String]
    /// Whether the revision is a tombstone.
    ///
    /// ```swift
    /// if rev.isDeleted { … }
    /// ```
    public var isDeleted: Bool

    enum Body: Sendable {
        case properties([String: JSONValue])
        case json([UInt8])
    }

    var body: Body

    /// The body (no reserved `_` keys).
    ///
    /// ```swift
    /// let title = try rev.properties["title"]
    /// ```
    ///
    /// A revision made from JSON parses it on every read of this property (read it once).
    ///
    /// - Throws: ``SetteeError/Code/invalidJSON`` when a JSON body is not an object the parser
    ///   accepts (`Database.insertRevisions(_:)` rejects such a revision the same way); it never
    ///   reads as empty.
    public var properties: [String: JSONValue] {
        get throws(SetteeError) {
            switch body {
            case .properties(let properties):
                return properties
            case .json(let bytes):
                guard case .object(let o) = try JSONParser.parse(bytes) else {
                    throw SetteeError(.invalidJSON, "a revision's body must be a JSON object")
                }
                return o
            }
        }
    }

    /// Replaces the body (a JSON body included) with `properties`.
    ///
    /// ```swift
    /// var edited = rev
    /// edited.setProperties(["title": "Naomi's"])
    /// ```
    public mutating func setProperties(_ properties: [String: JSONValue]) { body = .properties(properties) }

    /// The body as JSON text (UTF-8), when the revision was made from JSON; nil when it was made
    /// from properties.
    ///
    /// ```swift
    /// if let json = rev.json { forward(json) }
    /// ```
    public var json: [UInt8]? {
        if case .json(let bytes) = body { return bytes }
        return nil
    }

    /// A revision with its history.
    ///
    /// ```swift
    /// let r = ReplicatedRevision(documentID: "d", revisionID: "1-a", history: ["1-a"], isDeleted: false, properties: [:])
    /// ```
    public init(documentID: String, revisionID: String, history: [String], isDeleted: Bool, properties: [String: JSONValue]) {
        self.documentID = documentID
        self.revisionID = revisionID
        self.history = history
        self.isDeleted = isDeleted
        self.body = .properties(properties)
    }

    /// A revision whose body is JSON text (UTF-8), such as a body received from a peer: it must
    /// be a JSON object (strict RFC 8259, as `JSONValue(parsing:)` reads it) with no
    /// top-level key starting with `_`. It is checked when inserted, not here, and stored as it is.
    ///
    /// ```swift
    /// let r = ReplicatedRevision(documentID: "d", revisionID: "1-a", history: ["1-a"], isDeleted: false,
    ///                            json: Array(#"{"title":"Naomi's"}"#.utf8))
    /// try db.insertRevision(r)
    /// ```
    public init(documentID: String, revisionID: String, history: [String], isDeleted: Bool, json: [UInt8]) {
        self.documentID = documentID
        self.revisionID = revisionID
        self.history = history
        self.isDeleted = isDeleted
        self.body = .json(json)
    }

    /// Equal IDs, histories, deletion flags and properties (JSON bodies compared as their values,
    /// unless their bytes are the same; a JSON body that does not parse equals only the same bytes).
    ///
    /// ```swift
    /// assert(fetched == expected)
    /// ```
    public static func == (a: ReplicatedRevision, b: ReplicatedRevision) -> Bool {
        guard a.documentID == b.documentID, a.revisionID == b.revisionID, a.isDeleted == b.isDeleted,
              a.history == b.history else { return false }
        if case .json(let x) = a.body, case .json(let y) = b.body, x == y { return true }
        // A body that does not parse equals nothing but its own bytes (above).
        guard let pa = try? a.properties, let pb = try? b.properties else { return false }
        return pa == pb
    }

    /// Hashes the IDs, history and deletion flag (not the body, whose two forms compare equal).
    ///
    /// ```swift
    /// let unique = Set(fetched)
    /// ```
    public func hash(into hasher: inout Hasher) {
        hasher.combine(documentID)
        hasher.combine(revisionID)
        hasher.combine(history)
        hasher.combine(isDeleted)
    }

    /// The digests of the blobs the body references (objects with `"@type": "blob"` and a string
    /// `digest`), found without parsing a JSON body; empty when a JSON body is malformed.
    package var blobDigests: [String] {
        switch body {
        case .properties(let properties):
            var out: [String] = []
            for v in properties.values { PreparedBody.collect(v, into: &out) }
            return out
        case .json(let bytes):
            let scan = bytes.withUnsafeBytes { b in
                Swift.Result { () throws(SetteeError) in try JSONParser.scanBody(b, checkReserved: false) }
            }
            return (try? scan.get())?.blobDigests ?? []
        }
    }
}

/// What happened to one revision given to `Database.insertRevisions(_:)`.
///
/// ```swift
/// for case .rejected(let error) in try db.insertRevisions(batch) { print(error.message) }
/// ```
@_spi(Replication)
public enum RevisionInsertOutcome: Sendable, Equatable {
    /// Stored (possibly as a new conflicting branch); or, for a revision the database already
    /// had, its history linked revisions the tree held apart, which may change the leaves.
    case inserted
    /// The database already had this revision and everything its history says; nothing changed.
    case alreadyPresent
    /// Refused: a validation rejected it (``SetteeError/Code/forbidden``), it references a blob
    /// whose content is missing, or it is malformed.
    case rejected(SetteeError)
}

extension Database {
    /// The documents changed after `since`, in sequence order, one entry per document (its latest
    /// change), up to `limit` entries. Purged documents do not appear.
    ///
    /// ```swift
    /// var since: UInt64 = 0
    /// while case let batch = try db.changes(since: since, limit: 500), !batch.isEmpty {
    ///     process(batch)
    ///     since = batch.last!.sequence
    /// }
    /// ```
    ///
    /// The leaves of a document with a single leaf come straight from the sequence index; only
    /// documents with several leaves cost a read of their revision tree.
    @_spi(Replication)
    public func changes(since: UInt64, limit: Int? = nil) throws -> [ChangeEntry] {
        try checkOpen()
        guard (limit ?? 0) >= 0 else { throw SetteeError(.invalidParameter, "limit cannot be negative") }
        var out: [ChangeEntry] = []
        if limit == 0 || since == .max { return out }
        out.reserveCapacity(min(limit ?? 1024, 1 << 16))
        func scan(_ tx: some StoreReading) throws {
            try tx.forEach(in: core.trees.bySequence, from: [UInt8](bigEndian: since + 1), reverse: false) { k, v in
                guard let seq = k.bigEndianU64 else { throw SetteeError(.corrupted, "a sequence key is malformed") }
                let e = try SequenceEntry(decoding: v)
                // An empty array costs no allocation: most documents have a single leaf.
                var others: [String] = []
                if e.flags.contains(.multipleLeaves) {
                    guard let meta = try core.meta(tx, id: Array(e.documentID.utf8)) else {
                        throw SetteeError(.corrupted, "the sequence index names a missing document")
                    }
                    let tree = try core.tree(tx, meta)
                    others = tree.sortedLeaves().dropFirst().map { tree.revs[$0].id }
                }
                out.append(ChangeEntry(sequence: seq, documentID: e.documentID, revisionID: e.revisionID,
                                       isDeleted: e.flags.contains(.deleted), isConflicted: e.flags.contains(.conflicted),
                                       otherLeafRevisionIDs: others))
                if let limit, out.count >= limit { return false }
                return true
            }
        }
        try core.read(snapshot: scan, batch: scan)
        return out
    }

    /// Which of the given revisions this database lacks (CouchDB's `_revs_diff`). Documents with
    /// nothing missing are left out of the result.
    ///
    /// ```swift
    /// let diff = try db.revsDiff(["doc-1": ["2-a", "3-b"], "doc-2": ["1-c"]])
    /// for (id, r) in diff { request(id, r.missing) }
    /// ```
    ///
    /// `visible`, when given, says which revisions the peer may know of (a server's user reads
    /// only some): a revision it may not know is reported missing, as if the database lacked it,
    /// and is never offered as a possible ancestor.
    @_spi(Replication)
    public func revsDiff(_ revisions: [String: [String]],
                         visible: ((_ documentID: String, _ revisionID: String) -> Bool)? = nil) throws -> [String: RevsDiffResult] {
        try checkOpen()
        var out: [String: RevsDiffResult] = [:]
        try core.read { tx in
            for (id, revs) in revisions {
                guard let key = try? validateDocumentID(id) else { continue }
                guard let meta = try core.meta(tx, id: key) else {
                    out[id] = RevsDiffResult(missing: Array(Set(revs)).sorted(), possibleAncestors: [])
                    continue
                }
                let tree = try core.tree(tx, meta)
                func known(_ i: Int) -> Bool { visible?(id, tree.revs[i].id) ?? true }
                let missing = Array(Set(revs.filter { tree.index(of: $0).map(known) != true })).sorted()
                guard !missing.isEmpty else { continue }
                let top = missing.compactMap { RevisionID.generation(of: $0) }.max() ?? 0
                let ancestors = tree.leaves().filter { tree.revs[$0].generation < top && known($0) }.map { tree.revs[$0].id }
                out[id] = RevsDiffResult(missing: missing, possibleAncestors: ancestors.sorted())
            }
        }
        return out
    }

    /// Stores one replicated revision with its history (CouchDB's `new_edits=false`): the whole
    /// history is merged into the document's revision tree (every revision it names linked to its
    /// parent, so a leaf it names as an ancestor stops being one); with no ancestor in common it
    /// starts a new branch, which makes a conflict when the document has another undeleted leaf.
    /// Returns false when the revision was already there and its history changed nothing.
    ///
    /// ```swift
    /// try db.insertRevision(ReplicatedRevision(documentID: "doc", revisionID: "2-877",
    ///                                          history: ["2-877", "1-5ac"], isDeleted: false,
    ///                                          properties: ["v": 2]))
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/forbidden`` when a validation rejects it,
    ///   ``SetteeError/Code/invalidParameter`` when it is malformed.
    @discardableResult
    @_spi(Replication)
    public func insertRevision(_ revision: ReplicatedRevision) throws -> Bool {
        switch try insertRevisions([revision])[0] {
        case .inserted: return true
        case .alreadyPresent: return false
        case .rejected(let e): throw e
        }
    }

    /// Stores replicated revisions in one transaction, reporting each one's outcome: a rejected
    /// revision does not stop the others (as CouchDB's `_bulk_docs` reports per document).
    ///
    /// A body given as properties is stored as its canonical JSON; a body given as JSON
    /// (``ReplicatedRevision/json``) is checked without being parsed (a JSON object, strict
    /// RFC 8259, no duplicate keys, at most 256 levels deep, no top-level `_` key, at most 16 MiB)
    /// and stored byte for byte; one that fails is rejected with ``SetteeError/Code/invalidJSON``
    /// (``SetteeError/Code/invalidParameter`` for a reserved key, ``SetteeError/Code/tooLarge``).
    ///
    /// ```swift
    /// let outcomes = try db.insertRevisions(fetched)
    /// ```
    ///
    /// An `_attachments` entry `{"stub": true, …}` (CouchDB's "the receiver has this one", sent
    /// for attachments older than the revisions it named in `atts_since`) is replaced, in the
    /// transaction, by the entry of the same name in the newest revision of its history whose body
    /// the database keeps; failing that, by an entry of any kept revision of the document whose
    /// `md5` equals the stub's `md5-` `digest`. A stub that matches nothing rejects the revision
    /// with ``SetteeError/Code/notFound`` and a message starting `missing_stub`.
    ///
    /// - Throws: only for failures of the database itself (I/O, corruption, closed).
    @_spi(Replication)
    public func insertRevisions(_ revisions: [ReplicatedRevision]) throws -> [RevisionInsertOutcome] {
        try checkOpen()
        // A body with attachment stubs is prepared in the transaction, once they are resolved.
        var prepared: [Swift.Result<(key: [UInt8], gen: UInt64, body: PreparedBody?), SetteeError>] = []
        prepared.reserveCapacity(revisions.count)
        for r in revisions {
            prepared.append(Swift.Result { () throws(SetteeError) in
                let key = try validateDocumentID(r.documentID)
                let gen = try RevisionID.validate(r.revisionID)
                guard !r.history.isEmpty, r.history[0] == r.revisionID, r.history.count <= 100_000 else {
                    throw SetteeError(.invalidParameter, "history must start with the revision itself")
                }
                for (i, h) in r.history.enumerated() where try RevisionID.validate(h) != gen &- UInt64(i) || UInt64(i) >= gen {
                    throw SetteeError(.invalidParameter, "history generations must count down by one")
                }
                switch r.body {
                case .properties(let properties):
                    return (key, gen, Self.hasAttachmentStubs(properties) ? nil : try PreparedBody(properties))
                case .json(let json): return (key, gen, try PreparedBody(json: json))
                }
            })
        }
        return try core.write { c -> [RevisionInsertOutcome] in
            var outcomes: [RevisionInsertOutcome] = []
            outcomes.reserveCapacity(revisions.count)
            for (r, p) in zip(revisions, prepared) {
                switch p {
                case .failure(let e): outcomes.append(.rejected(e))
                case .success(let (key, gen, ready)):
                    do {
                        let old = try c.meta(key)
                        var tree = try c.tree(old)
                        if tree.index(of: r.revisionID) != nil {
                            // Known: its history may still link what the tree holds apart (a
                            // branch stored truncated, from a peer that had pruned it).
                            guard tree.merge(history: r.history, generation: gen, deleted: r.isDeleted,
                                             hasAttachments: false, bodyRef: nil) else {
                                outcomes.append(.alreadyPresent)
                                continue
                            }
                            _ = try c.commit(id: r.documentID, key: key, old: old, tree: &tree)
                            outcomes.append(.inserted)
                            continue
                        }
                        let body = try ready ?? PreparedBody(resolvingStubs(of: r, in: tree, c.tx))
                        try c.checkBlobs(body)
                        try c.validate(id: r.documentID, revisionID: r.revisionID, deleted: r.isDeleted, body: body, old: old)
                        try c.route(id: r.documentID, key: key, revisionID: r.revisionID, deleted: r.isDeleted, body: body,
                                    tree: tree, parent: r.history.dropFirst().lazy.compactMap { tree.index(of: $0) }.first)
                        let ref = body.isEmpty ? 0 : try c.tx.appendValue(body.bytes).rawValue
                        tree.merge(history: r.history, generation: gen, deleted: r.isDeleted,
                                   hasAttachments: !body.blobDigests.isEmpty, bodyRef: ref)
                        _ = try c.commit(id: r.documentID, key: key, old: old, tree: &tree)
                        outcomes.append(.inserted)
                    } catch let e as SetteeError where e.code == .forbidden || e.code == .unauthorized || e.code == .notFound
                                || e.code == .invalidParameter {
                        c.participants.routing.pending = nil
                        outcomes.append(.rejected(e))
                    }
                }
            }
            return outcomes
        }
    }

    /// A revision with its history and body (CouchDB's `open_revs=[rev]&revs=true`); nil when the
    /// revision is unknown or its body is no longer kept. The body comes as the stored JSON
    /// (``ReplicatedRevision/json``), parsed only if ``ReplicatedRevision/properties`` is read.
    ///
    /// ```swift
    /// if let r = try db.revision(withID: "doc", revisionID: "2-877") { send(r) }
    /// ```
    @_spi(Replication)
    public func revision(withID id: String, revisionID: String) throws -> ReplicatedRevision? {
        try checkOpen()
        let key = try validateDocumentID(id)
        return try core.read { tx -> ReplicatedRevision? in
            guard let meta = try core.meta(tx, id: key) else { return nil }
            let tree = try core.tree(tx, meta)
            guard let i = tree.index(of: revisionID), tree.revs[i].hasBody else { return nil }
            return try replicated(tx, id: id, tree: tree, index: i)
        }
    }

    /// Every leaf revision with its history and body (CouchDB's `open_revs=all&revs=true`), the
    /// current one first; empty when the document is unknown. Bodies come as stored JSON, as in
    /// ``revision(withID:revisionID:)``.
    ///
    /// ```swift
    /// for leaf in try db.leafRevisions(withID: "doc") { print(leaf.revisionID, leaf.isDeleted) }
    /// ```
    @_spi(Replication)
    public func leafRevisions(withID id: String) throws -> [ReplicatedRevision] {
        try checkOpen()
        let key = try validateDocumentID(id)
        return try core.read { tx -> [ReplicatedRevision] in
            guard let meta = try core.meta(tx, id: key) else { return [] }
            let tree = try core.tree(tx, meta)
            return try tree.sortedLeaves().map { try replicated(tx, id: id, tree: tree, index: $0) }
        }
    }

    static func hasAttachmentStubs(_ properties: [String: JSONValue]) -> Bool {
        guard case .object(let attachments)? = properties[attachmentsKey] else { return false }
        return attachments.values.contains { $0.objectValue?["stub"] == true }
    }

    /// The revision's properties with each attachment stub replaced by the entry it stands for
    /// (see ``insertRevisions(_:)``).
    private func resolvingStubs(of r: ReplicatedRevision, in tree: RevTree, _ tx: any StoreReading) throws -> [String: JSONValue] {
        var properties = try r.properties
        guard case .object(var attachments)? = properties[attachmentsKey] else { return properties }
        // Kept bodies to look in: the revision's own ancestors newest first, then every other.
        let ancestors = r.history.dropFirst().compactMap { tree.index(of: $0) }.filter { tree.revs[$0].hasBody }
        let everyOther = tree.revs.indices.filter { tree.revs[$0].hasBody && !ancestors.contains($0) }
        var cache: [Int: [String: JSONValue]] = [:]
        func entries(_ i: Int) throws -> [String: JSONValue] {
            if let e = cache[i] { return e }
            let e = try replicated(tx, id: r.documentID, tree: tree, index: i).properties[attachmentsKey]?.objectValue ?? [:]
            cache[i] = e
            return e
        }
        for (name, value) in attachments {
            guard case .object(let stub) = value, stub["stub"] == true else { continue }
            let md5 = stub["digest"]?.stringValue.flatMap { $0.hasPrefix("md5-") ? $0 : nil }
            func matches(_ e: JSONValue?) -> Bool {
                guard case .object(let o)? = e, o["@type"] == "blob" else { return false }
                guard let md5, case .string(let known)? = o["md5"] else { return true }
                return known == md5
            }
            var found: JSONValue?
            for i in ancestors where found == nil {
                if matches(try entries(i)[name]) { found = try entries(i)[name] }
            }
            if found == nil, md5 != nil {
                for i in ancestors + everyOther where found == nil {
                    found = try entries(i).values.first { matches($0) && $0.objectValue?["md5"] != nil }
                }
            }
            guard let found else {
                throw SetteeError(.notFound, "missing_stub: attachment \(name) of \(r.documentID) \(r.revisionID) names content this database does not have")
            }
            attachments[name] = found
        }
        properties[attachmentsKey] = .object(attachments)
        return properties
    }

    private func replicated(_ tx: any StoreReading, id: String, tree: RevTree, index i: Int) throws -> ReplicatedRevision {
        let r = tree.revs[i]
        // The stored JSON, unparsed: whoever inserts it checks it (a damaged body is rejected
        // there, not stored), and a filter or resolver that reads properties parses it then.
        let json = r.hasBody ? try core.body(tx, ref: r.bodyRef) : [UInt8(ascii: "{"), UInt8(ascii: "}")]
        return ReplicatedRevision(documentID: id, revisionID: r.id, history: tree.history(of: i),
                                  isDeleted: r.deleted, json: json)
    }
}
