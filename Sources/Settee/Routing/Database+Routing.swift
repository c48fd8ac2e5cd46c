internal import SetteeStorage

extension Database {
    /// Sets (or with nil, removes) the function that routes every new revision to channels and
    /// grants (Sync Gateway's sync function, for `settee serve`). Shared by every `Database`
    /// object open on the same files.
    ///
    /// ```swift
    /// db.setRouter { input in
    ///     let channels = input.revision.array(forKey: "channels")?.compactMap(\.stringValue) ?? []
    ///     return RevisionRouting(channels: Set(channels))
    /// }
    /// ```
    ///
    /// Revisions saved while no router is set are not routed: their document keeps the routing it
    /// had (none, for a new one) until ``reroute(batchSize:)`` or a routed save.
    public func setRouter(_ router: Router?) {
        let box = router.map(RouterBox.init)
        core.parts.routing.routerBox.withLock { $0 = box }
    }

    /// The routing the database holds for a document; nil when it holds none: none of its
    /// revisions was routed, or every routed one had no channel and no grant (and the document
    /// never left a channel).
    ///
    /// ```swift
    /// let channels = try db.routing(ofDocumentWithID: "list1")?.current.channels ?? []
    /// ```
    public func routing(ofDocumentWithID id: String) throws -> DocumentRouting? {
        try routing(ofDocumentWithID: id, grants: true)
    }

    /// ``routing(ofDocumentWithID:)`` with the grants left out when `grants` is false: every
    /// ``RevisionRouting`` it holds has its channels only, and a document that grants 100,000
    /// channels costs what one that grants none does (what a feed or a read check needs).
    ///
    /// ```swift
    /// let channels = try db.routing(ofDocumentWithID: "list1", grants: false)?.current.channels ?? []
    /// ```
    @_spi(Server)
    public func routing(ofDocumentWithID id: String, grants: Bool) throws -> DocumentRouting? {
        try checkOpen()
        let key = try validateDocumentID(id)
        func read(_ tx: some StoreReading) throws -> DocumentRouting? {
            guard let meta = try core.meta(tx, id: key),
                  let r = try RoutingRecord.load(tx, core.trees, key: key, sequence: meta.sequence, grants: grants)?.record
            else { return nil }
            return DocumentRouting(current: r.applied, leaves: r.leaves, membership: r.membership, innerChannels: r.inner)
        }
        return try translating { try core.read(snapshot: read, batch: read) }
    }

    /// The entries of several channels' logs, read in one snapshot: for each query, in sequence
    /// order, the documents that entered or changed in the channel (one entry per document, at
    /// its latest change) and those that left it (at the change that took them out).
    ///
    /// ```swift
    /// let last = try db.lastSequence
    /// let logs = try db.channelChanges([ChannelQuery(channel: "a", after: since, through: last, limit: 500)])
    /// ```
    ///
    /// Each query costs the entries it reads: a feed of a few channels never scans the database.
    public func channelChanges(_ queries: [ChannelQuery]) throws -> [[ChannelChange]] {
        try checkOpen()
        for q in queries where q.channel.isEmpty || q.channel.utf8.contains(0) || q.limit < 0 {
            throw SetteeError(.invalidParameter, "a channel query needs a channel name without U+0000 and a limit of 0 or more")
        }
        func read(_ tx: some StoreReading) throws -> [[ChannelChange]] {
            try queries.map { q in
                var out: [ChannelChange] = []
                guard q.limit > 0, q.after < q.through, q.after < .max else { return out }
                let prefix = RoutingKey.channelPrefix(q.channel)
                try tx.forEach(in: core.trees.channels, from: RoutingKey.channel(q.channel, q.after + 1), reverse: false) { k, v in
                    guard k.count == prefix.count + 8, k.starts(with: prefix) else { return false }
                    let seq = UInt64(bigEndian: k.loadUnaligned(fromByteOffset: prefix.count, as: UInt64.self))
                    guard seq <= q.through else { return false }
                    out.append(try RoutingKey.decodeEntry(v, seq: seq) { s in
                        try tx.withValue(forKey: [UInt8](bigEndian: s), in: core.trees.bySequence) { b in try SequenceEntry(decoding: b) }
                    })
                    return out.count < q.limit
                }
                return out
            }
        }
        return try translating { try core.read(snapshot: read, batch: read) }
    }

    /// How many channels have a log: every channel a document is in or has left. Costs one
    /// seek per channel (its entries are stepped over), never a walk of their entries.
    ///
    /// ```swift
    /// print(try db.channelCount())
    /// ```
    @_spi(Server)
    public func channelCount() throws -> Int {
        try checkOpen()
        func read(_ tx: some StoreReading) throws -> Int {
            var count = 0
            var from: [UInt8]? = nil
            while true {
                var next: [UInt8]?
                try tx.forEach(in: core.trees.channels, from: from, reverse: false) { k, _ in
                    guard let zero = k.firstIndex(of: 0) else { throw SetteeError(.corrupted, "a channel log key is malformed") }
                    // The next channel's entries start after every key of this one: its name and 1.
                    next = Array(k[..<zero]) + [1]
                    return false
                }
                guard let n = next else { return count }
                count += 1
                from = n
            }
        }
        return try translating { try core.read(snapshot: read, batch: read) }
    }

    /// What documents grant a principal (a user's name for ``GrantKind/channels`` and
    /// ``GrantKind/roles``, a role's for ``GrantKind/roleChannels``): every channel or role a
    /// document's current revision grants, and
    /// those a document granted once and no longer does (``Grant/isRevoked``, with the sequence
    /// of the revocation).
    ///
    /// ```swift
    /// let granted = try db.grants(to: "alice", kind: .channels).filter { !$0.isRevoked }.map(\.name)
    /// ```
    public func grants(to principal: String, kind: GrantKind) throws -> [Grant] {
        try checkOpen()
        guard !principal.isEmpty, !principal.utf8.contains(0) else {
            throw SetteeError(.invalidParameter, "a principal name cannot be empty or hold U+0000")
        }
        let prefix = RoutingKey.grantPrefix(kind, principal)
        func read(_ tx: some StoreReading) throws -> [Grant] {
            var out: [Grant] = []
            try tx.forEach(in: core.trees.grants, from: prefix, reverse: false) { k, v in
                guard k.count == prefix.count + 20, k.starts(with: prefix) else { return k.starts(with: prefix) }
                let (id, names) = try RoutingKey.decodeGrants(v)
                for (n, s) in names { out.append(Grant(documentID: id, name: n, sequence: s.seq, isRevoked: s.revoked)) }
                return true
            }
            return out
        }
        return try translating { try core.read(snapshot: read, batch: read) }
    }

    /// A number that changes whenever a commit changes what documents grant
    /// (``grants(to:kind:)``): what was computed from grants holds while it stays the same. It
    /// counts in memory from 0 each time the database is opened.
    ///
    /// ```swift
    /// if cached.version != db.grantsVersion { cached = (db.grantsVersion, try compute()) }
    /// ```
    public var grantsVersion: UInt64 { core.parts.routing.grantsVersion.load(ordering: .acquiring) }

    /// The principals whose grants changed in the commits after ``grantsVersion`` was
    /// `version`, by kind (a user's name under ``GrantKind/channels`` and ``GrantKind/roles``, a
    /// role's under ``GrantKind/roleChannels``); nil when that is further back than the last few
    /// hundred such commits are remembered, or one of them changed thousands of principals
    /// (then anyone's may have changed). What was computed from one principal's grants at
    /// `version` still holds when the answer does not name it.
    ///
    /// ```swift
    /// let now = db.grantsVersion
    /// if let changed = db.grantChanges(after: cached.version), changed[.channels]?.contains("alice") != true {
    ///     cached.version = now   // alice's grants are as they were
    /// }
    /// ```
    @_spi(Server)
    public func grantChanges(after version: UInt64) -> [GrantKind: Set<String>]? {
        let routing = core.parts.routing
        return routing.grantLog.withLock { log in
            guard version < routing.grantsVersion.load(ordering: .relaxed) else { return [:] }
            // Complete only when its oldest entry is at most the next version.
            guard let first = log.first, first.version <= version + 1 else { return nil }
            var out: [GrantKind: Set<String>] = [:]
            for entry in log where entry.version > version {
                guard let changes = entry.changes else { return nil }
                for (kind, names) in changes { out[kind, default: []].formUnion(names) }
            }
            return out
        }
    }

    /// Takes the next sequence without changing a document, and returns it: an application's own
    /// event that must be ordered among document changes (the server's user and role changes,
    /// which decide from when a user reads a channel). Inside ``inBatch(_:)`` it commits with the
    /// batch.
    ///
    /// ```swift
    /// try db.inBatch { let at = try db.takeSequence(); try db.saveLocalDocument(["at": .int(Int64(at))], withID: "mark") }
    /// ```
    @discardableResult
    public func takeSequence() throws -> UInt64 {
        try checkOpen()
        return try core.write { c in c.nextSequence() }
    }

    /// Runs the router again over every document's leaves and brings the channel logs and grants
    /// up to date, in transactions of `batchSize` documents: after the router changed (Sync
    /// Gateway's `_resync`). A document whose current routing changes takes a new sequence, so
    /// that feeds deliver what it now makes visible; one whose routing is unchanged is left alone.
    /// A leaf the router rejects keeps no routing (its document keeps what it had).
    ///
    /// ```swift
    /// db.setRouter(newRouter)
    /// let changed = try db.reroute()
    /// ```
    ///
    /// - Returns: how many documents changed routing.
    /// - Throws: ``SetteeError/Code/invalidParameter`` when no router is set.
    @discardableResult
    public func reroute(batchSize: Int = 1000) throws -> Int {
        try checkOpen()
        guard core.router != nil else { throw SetteeError(.invalidParameter, "no router is set") }
        var after: [UInt8]? = nil
        var changed = 0
        while true {
            var keys: [[UInt8]] = []
            try translating {
                try core.read { tx in
                    try tx.forEach(in: core.trees.byID, from: after, reverse: false) { k, _ in
                        if let a = after, k.elementsEqual(a) { return true }
                        keys.append(Array(k))
                        return keys.count < max(batchSize, 1)
                    }
                }
            }
            guard let last = keys.last else { return changed }
            after = last
            try core.write { c in
                for key in keys where try c.reroute(key: key) { changed += 1 }
            }
        }
    }
}

extension WriteContext {
    /// Routes every leaf of one document again; commits it under a new sequence if its current
    /// routing changed. Returns whether it did.
    func reroute(key: [UInt8]) throws -> Bool {
        guard let router = core.router, let meta = try meta(key) else { return false }
        let id = String(decoding: key, as: UTF8.self)
        let tree = try core.tree(tx, meta)
        let loaded = try RoutingRecord.load(tx, trees, key: key, sequence: meta.sequence)
        var record = loaded?.record ?? RoutingRecord()
        var leaves: [String: RevisionRouting] = [:]
        for leaf in tree.leaves() {
            let r = tree.revs[leaf]
            let ancestor = tree.routingParent(from: r.parent, of: leaf)
            let revision = try core.document(tx, id: id, tree: tree, index: leaf, sequence: meta.sequence)
            let parent = try ancestor.map { try core.document(tx, id: id, tree: tree, index: $0, sequence: 0) }
            // The parent's routing as the router would give it now (it is not a leaf, so none is kept).
            let parentRouting = try ancestor.flatMap { i -> RevisionRouting? in
                let up = tree.bodiedAncestor(from: tree.revs[i].parent)
                let grand = try up.map { try core.document(tx, id: id, tree: tree, index: $0, sequence: 0) }
                let p = try core.document(tx, id: id, tree: tree, index: i, sequence: 0)
                return try? router(RoutingInput(revision: p, parent: grand, parentRouting: nil))
            }
            if let routing = try? router(RoutingInput(revision: revision, parent: parent, parentRouting: parentRouting)),
               (try? routing.check()) != nil {
                leaves[r.id] = routing
            }
        }
        let (w, _) = tree.winnerAndFlags()
        let winnerID = tree.revs[w].id
        let newCurrent = leaves[winnerID] ?? record.applied
        guard newCurrent != record.applied || leaves != record.leaves else { return false }
        record.leaves = leaves
        if newCurrent == record.applied {
            // Kept in `doc.routing` even when simple: the sequence entry is not rewritten here.
            if !record.isEmpty {
                try tx.put(key, record.encoded(), in: trees.routing)
            } else if loaded?.stored == true {
                try tx.delete(key, in: trees.routing)
            }
            return false
        }
        // A new sequence for the document, as any change takes: its by-sequence entry moves too.
        // The commit reads the record with the new leaves from `doc.routing` (and drops it there
        // if the sequence entry can hold it).
        var t = tree
        try tx.put(key, record.encoded(), in: trees.routing)
        _ = try commit(id: id, key: key, old: meta, tree: &t)
        return true
    }
}
