internal import SetteeStorage

extension DatabaseCore {
    /// A document as queries and indexes see it, read from `tx`: its current revision's
    /// properties parsed from the stored body (only those named by `keys`, when given: the
    /// others are skipped, not built).
    func queryRow(_ tx: some StoreReading, id: String, meta: DocMeta, keys: Set<String>? = nil) throws -> QueryRow {
        var row = QueryRow(id: id, revisionID: meta.revisionID, sequence: meta.sequence, isDeleted: meta.flags.contains(.deleted),
                           expiration: nil, properties: try properties(tx, bodyRef: meta.bodyRef, keys: keys))
        row.bodyRef = meta.bodyRef
        return row
    }

    /// The properties of the body at `bodyRef` (none for ref 0); with `keys`, only those (so
    /// none, and the body is not read, for no keys).
    func properties(_ tx: some StoreReading, bodyRef: UInt64, keys: Set<String>? = nil) throws -> [String: JSONValue] {
        if bodyRef == 0 || keys?.isEmpty == true { return [:] }
        return try tx.withValue(at: ValueRef(rawValue: bodyRef)) { b throws(SetteeError) in try Self.properties(parsing: b, keys: keys) }
    }

    /// The values at `level`'s paths in the current body of document `id`, probed from its
    /// bytes (``JSONParser/probe(_:level:into:)``); nil when it is deleted or gone.
    func probeCurrent(id: String, level: JSONParser.ProbeLevel) throws -> [JSONParser.Probed]? {
        try read { tx -> [JSONParser.Probed]? in
            guard let meta = try self.meta(tx, id: Array(id.utf8)), !meta.flags.contains(.deleted) else { return nil }
            func probe(_ b: UnsafeRawBufferPointer) throws -> [JSONParser.Probed] {
                var found: [JSONParser.Probed] = []
                try JSONParser.probe(b, level: level, into: &found)
                return found
            }
            if meta.bodyRef == 0 { return try Self.emptyBody.withUnsafeBytes(probe) }
            return try tx.withValue(at: ValueRef(rawValue: meta.bodyRef), probe)
        }
    }

    /// The properties of the stored body `b`; with `keys`, only those.
    static func properties(parsing b: UnsafeRawBufferPointer, keys: Set<String>?) throws(SetteeError) -> [String: JSONValue] {
        if let keys { return try JSONParser.parseMembers(b, keys: keys) }
        guard case .object(let o) = try JSONParser.parse(b) else {
            throw SetteeError(.corrupted, "a stored document body is not a JSON object")
        }
        return o
    }

    /// ``queryRow(_:id:meta:keys:)`` for a scan of the by-ID tree (`key`, and `encodedMeta` its
    /// value), or nil when the document is deleted or `prefilter` rejects its body: that
    /// decides from the body's bytes, so a rejected document is neither parsed nor has its
    /// metadata decoded or its ID made a `String`. The body is read once either way. `matches`:
    /// the prefilter found the clause TRUE, and the row holds only `keysWhenMatched` (what the
    /// query reads beyond its clause).
    func queryRow(_ tx: some StoreReading, key: UnsafeRawBufferPointer, encodedMeta: UnsafeRawBufferPointer, keys: Set<String>?,
                  admitting prefilter: BodyPrefilter?, keysWhenMatched: Set<String>?) throws -> (row: QueryRow, matches: Bool)? {
        guard let prefilter else {
            let meta = try DocMeta(decoding: encodedMeta)
            if meta.flags.contains(.deleted) { return nil }
            return (try queryRow(tx, id: String(decoding: key, as: UTF8.self), meta: meta, keys: keys), false)
        }
        guard let flags = encodedMeta.first else { throw SetteeError(.corrupted, "document metadata is malformed") }
        if DocFlags(rawValue: flags).contains(.deleted) { return nil }
        let bodyRef = try DocMeta.refs(in: encodedMeta).body
        func read(_ b: UnsafeRawBufferPointer) throws(SetteeError) -> (properties: [String: JSONValue], matches: Bool)? {
            switch try prefilter.admission(b) {
            case .rejected: return nil
            case .matches: return (keysWhenMatched?.isEmpty == true ? [:] : try Self.properties(parsing: b, keys: keysWhenMatched), true)
            case .undecided: return (try Self.properties(parsing: b, keys: keys), false)
            }
        }
        // The metadata is kept aside while the body is read: the engine may reuse the buffer it
        // lent for it.
        return try withUnsafeTemporaryAllocation(byteCount: encodedMeta.count, alignment: 8) { copy throws -> (row: QueryRow, matches: Bool)? in
            copy.copyMemory(from: encodedMeta)
            let found: (properties: [String: JSONValue], matches: Bool)?
            if bodyRef == 0 {
                found = try Self.emptyBody.withUnsafeBytes { b throws(SetteeError) in try read(b) }
            } else {
                found = try tx.withValue(at: ValueRef(rawValue: bodyRef)) { b throws(SetteeError) in try read(b) }
            }
            guard let found else { return nil }
            let meta = try DocMeta(decoding: UnsafeRawBufferPointer(copy))
            var row = QueryRow(id: String(decoding: key, as: UTF8.self), revisionID: meta.revisionID, sequence: meta.sequence,
                               isDeleted: false, expiration: nil, properties: found.properties)
            row.bodyRef = meta.bodyRef
            return (row, found.matches)
        }
    }

    /// What an empty body (ref 0) reads as.
    static let emptyBody: [UInt8] = Array("{}".utf8)
}

extension WriteContext {
    /// Moves every index's entry of a document from its old current revision to its new one
    /// (none when it is deleted or purged), in the commit that makes the change, so a query
    /// never sees one without the other. Costs nothing when the database has no index, or when
    /// the current revision stays the same (a losing branch was added). Index entries kept by
    /// channel follow the document's channels before and after (``CommittedDocument/channels``).
    func updateIndexes(_ change: CommittedDocument) throws {
        let indexes = participants.indexes.indexes
        guard !indexes.isEmpty else { return }
        let id = change.id
        let old = change.old
        let wasLive = change.wasLive
        let channels = change.channels
        let winnerDeleted = change.new?.flags.contains(.deleted) ?? true
        // The same revision stays current: only the entries kept by channel can move (rerouted).
        let sameRevision = change.new != nil && old?.revisionID == change.new?.revisionID && wasLive == !winnerDeleted
        if sameRevision && (channels.old == channels.new || !indexes.contains(where: \.definition.byChannel)) { return }
        if change.new == nil && !wasLive { return }
        let keys = participants.indexes.indexedKeys
        // Only full-text indexes read the old revision; the others find what it had in their
        // own records (a value index's back entry, a map index's row keys).
        let oldRow = try old.flatMap { o in
            wasLive && indexes.contains(where: { $0.analyzer != nil }) ? try core.queryRow(tx, id: id, meta: o, keys: keys) : nil
        }
        var newRow: QueryRow?
        if let new = change.new, !winnerDeleted {
            // A local save's properties are at hand; a replicated body is parsed once.
            let properties = try change.winnerProperties ?? core.properties(tx, bodyRef: new.bodyRef, keys: keys)
            newRow = QueryRow(id: id, revisionID: new.revisionID, sequence: change.sequence, isDeleted: false, expiration: nil,
                              properties: properties)
        }
        for index in indexes {
            if sameRevision && !index.definition.byChannel { continue }
            if index.isMap {
                try updateMapIndex(index, id: id, row: newRow)
                continue
            }
            if index.analyzer != nil {
                let before = try oldRow.flatMap { (r) throws(SetteeError) in try index.textEntry(for: r) }
                let after = try newRow.flatMap { (r) throws(SetteeError) in try index.textEntry(for: r) }
                if before != after { try FullTextIndexStore.update(tx, tree: index.tree, id: id, old: before, new: after) }
                continue
            }
            let back = IndexEntry.backKey(id)
            let before = try wasLive ? storedEntry(index, back: back) : nil
            let after = try newRow.flatMap { (r) throws(SetteeError) in try index.entry(for: r) }
            if index.definition.byChannel {
                try updateChannelRecords(index, id: id, old: IndexEntry.channelRecords(before, id: id, channels: channels.old),
                                         new: IndexEntry.channelRecords(after, id: id, channels: channels.new))
            }
            if before == after { continue }
            if let before, before.key != after?.key { _ = try tx.delete(before.key, in: index.tree) }
            if let after { try tx.put(after.key, after.value, in: index.tree) }
            if before?.key != after?.key {
                if let after { try tx.put(back, after.key, in: index.tree) } else { _ = try tx.delete(back, in: index.tree) }
            }
        }
    }

    /// A document's entry in a value index, found through its back entry `back`; nil when it
    /// has none. An entry the back entry names but the tree lacks (damage ``Database/check(repair:)``
    /// reports) reads with an empty value, which no entry has: the commit writes the new one
    /// whole rather than refuse the document's writes.
    func storedEntry(_ index: CompiledIndex, back: [UInt8]) throws -> IndexEntry? {
        guard let key = try tx.value(forKey: back, in: index.tree) else { return nil }
        return IndexEntry(stored: key, value: try tx.value(forKey: key, in: index.tree) ?? [])
    }

    /// Replaces a document's by-channel records: removes those it no longer has, writes those
    /// that are new or changed.
    func updateChannelRecords(_ index: CompiledIndex, id: String, old: [[UInt8]: [UInt8]], new: [[UInt8]: [UInt8]]) throws {
        for k in old.keys where new[k] == nil { _ = try tx.delete(k, in: index.tree) }
        for (k, v) in new where old[k] != v { try tx.put(k, v, in: index.tree) }
    }

    /// The properties any of `indexes` reads (nil: all).
    static func documentKeys(_ indexes: [CompiledIndex]) -> Set<String>? {
        var keys = Set<String>()
        for index in indexes {
            guard let k = index.documentKeys else { return nil }
            keys.formUnion(k)
        }
        return keys
    }
}

extension WriteContext {
    /// Replaces a document's rows in a map index by what its function makes of `row` (none
    /// for nil: deleted or purged). A detached index (its function not given in this process)
    /// cannot be kept whole: it is marked for rebuilding in this commit, and stays out of
    /// queries until ``Database/createIndex(_:name:)`` gives the function again.
    func updateMapIndex(_ index: CompiledIndex, id: String, row: QueryRow?) throws {
        guard index.map != nil else {
            let key = Array(index.name.utf8)
            let state = try tx.withValue(forKey: key, in: core.trees.indexCatalog) { b in try IndexDefinition(decoding: b).state }
            if state == .ready {
                var d = index.definition
                d.state = .building
                try tx.put(key, d.encoded(), in: core.trees.indexCatalog)
                DatabaseCore.logger.warning("\("map index \(index.name) was written to before its function was given: it will be rebuilt".escapedForLog)")
            }
            return
        }
        // Made when the transaction commits (``flushMapIndexes()``), with the commit's other documents.
        let work = participants.indexes
        if work.pendingMaps[index.name] == nil { work.pendingMaps[index.name] = (index, [:]) }
        work.pendingMaps[index.name]?.documents.updateValue(row, forKey: id)
    }

    /// Makes and writes the rows of the documents this transaction changed, index by index,
    /// for at most ``DatabaseConfiguration/mapTimePerCommit``: the documents not mapped by then
    /// are marked (``MapIndexStore/markPending(_:tree:id:)``) and mapped after the commit,
    /// outside the write lock (``DatabaseCore/catchUpMapIndex(_:)``).
    func flushMapIndexes() throws {
        let work = participants.indexes
        guard !work.pendingMaps.isEmpty else { return }
        let pending = work.pendingMaps
        work.pendingMaps = [:]
        let deadline = ContinuousClock.now + .milliseconds(Int64(max(0, core.configuration.mapTimePerCommit) * 1000))
        for (name, p) in pending.sorted(by: { $0.key < $1.key }) {
            let ids = Array(p.documents.keys)
            let live = ids.compactMap { id in p.documents[id] ?? nil }
            let made = MapIndexStore.rows(of: p.index, rows: live, until: deadline)
            var rowsByID: [String: [MapIndexStore.Row]?] = [:]
            var summaries = MapIndexStore.SummaryDeltas()
            for (row, rows) in zip(live, made) { rowsByID[row.id] = rows }
            for id in ids {
                // Deleted or purged: no rows (nothing to map). Not mapped in time: marked.
                guard let rows = rowsByID[id] ?? [] else {
                    try MapIndexStore.markPending(tx, tree: p.index.tree, id: id)
                    work.deferredMaps.insert(name)
                    continue
                }
                try MapIndexStore.replace(tx, tree: p.index.tree, id: id, with: rows, summaries: &summaries)
                try MapIndexStore.clearPending(tx, tree: p.index.tree, id: id)
            }
            try MapIndexStore.applySummaries(summaries, tx, tree: p.index.tree)
        }
    }
}
