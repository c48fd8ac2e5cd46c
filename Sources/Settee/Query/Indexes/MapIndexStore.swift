import Foundation
internal import SetteeStorage

extension DatabaseCore {
    /// Makes the rows of map index `name`'s documents that commits left to be made
    /// (``DatabaseConfiguration/mapTimePerCommit``): a slice at a time, read from a snapshot,
    /// mapped outside the write lock, then written in a short transaction for each document
    /// that has not changed since (a document that changed had its rows made, or was marked
    /// again, by the commit that changed it). Returns once none is left; `busy` when new ones
    /// keep coming faster than they are made.
    func catchUpMapIndex(_ name: String) throws {
        for _ in 0 ..< 256 {
            guard let index = parts.queries.indexSet.withLock({ $0.indexes.first { $0.name == name } }), index.isMap, index.map != nil else { return }
            var items: [(id: String, key: [UInt8], sequence: UInt64?, row: QueryRow?)] = []
            try read { tx in
                for id in try MapIndexStore.pending(tx, tree: index.tree, limit: MapIndexStore.batchSize) {
                    let key = Array(id.utf8)
                    guard let meta = try self.meta(tx, id: key) else {
                        items.append((id, key, nil, nil))
                        continue
                    }
                    let row = meta.flags.contains(.deleted) ? nil : try queryRow(tx, id: id, meta: meta, keys: index.documentKeys)
                    items.append((id, key, meta.sequence, row))
                }
            }
            if items.isEmpty { return }
            let live = items.compactMap(\.row)
            var rows: [String: [MapIndexStore.Row]] = [:]
            for (row, made) in zip(live, MapIndexStore.rows(of: index, rows: live)) { rows[row.id] = made }
            try write { c in
                guard c.participants.indexes.indexes.contains(where: { $0.name == name && $0.record == index.record }) else { return }
                var summaries = MapIndexStore.SummaryDeltas()
                for item in items where try c.tx.value(forKey: [MapIndexStore.pendingTag] + item.key, in: index.tree) != nil {
                    guard try c.meta(item.key)?.sequence == item.sequence else { continue }
                    try MapIndexStore.replace(c.tx, tree: index.tree, id: item.id, with: rows[item.id] ?? [], summaries: &summaries)
                    try MapIndexStore.clearPending(c.tx, tree: index.tree, id: item.id)
                }
                try MapIndexStore.applySummaries(summaries, c.tx, tree: index.tree)
            }
        }
        throw SetteeError(.busy, "map index \(name) is still making the rows of recent changes")
    }

    /// Has the map indexes in `names` caught up in the background (one thread at a time).
    func catchUpLater(_ names: Set<String>) {
        guard !names.isEmpty else { return }
        let start = parts.queries.mapCatchUp.withLock { state -> Bool in
            state.waiting.formUnion(names)
            if state.running { return false }
            state.running = true
            return true
        }
        guard start else { return }
        let thread = Thread { [weak self] in
            while let self {
                let next = self.parts.queries.mapCatchUp.withLock { state -> String? in
                    guard let name = state.waiting.first else {
                        state.running = false
                        return nil
                    }
                    state.waiting.remove(name)
                    return name
                }
                guard let name = next else { return }
                do {
                    try self.catchUpMapIndex(name)
                } catch let e as SetteeError where e.code == .notOpen {
                    self.parts.queries.mapCatchUp.withLock { $0 = (running: false, waiting: []) }
                    return
                } catch {
                    Self.logger.warning("\("map index \(name): the rows of recent changes could not be made yet: \(error)".escapedForLog)")
                }
            }
        }
        thread.name = "settee map index"
        thread.start()
    }

    /// The tree of a ready map index in `tx`'s snapshot.
    func readyMapTree(_ tx: some StoreReading, name: String) throws -> Tree {
        guard let d = try tx.withValue(forKey: Array(name.utf8), in: trees.indexCatalog, { b in try IndexDefinition(decoding: b) }),
              d.kind == .map else {
            throw SetteeError(.notFound, "there is no map index \(name)")
        }
        guard d.state == .ready else {
            throw SetteeError(.busy, "map index \(name) is being built, or waits for its function to be given")
        }
        guard let tree = tx.tree(named: d.treeName) else { throw SetteeError(.corrupted, "map index \(name): its tree is missing") }
        return tree
    }
}

/// The entries of a map index's tree (`Formats/indexes.md`, "Map index entries").
///
/// - `0x00`: the number of rows, 8 bytes little-endian.
/// - `0x01 ‖ collation key ‖ document ID ‖ ID length (2 bytes) ‖ ordinal (2 bytes)`, all
///   big-endian: a row, whose value is the JSON array `[key, value]`. The ordinal tells apart
///   a document's rows of equal keys, in the order they were emitted.
/// - `0x02 ‖ document ID`: the keys of the document's rows, each a varint length and the key,
///   so a write removes them without running the function on the old revision.
/// - `0x03 ‖ document ID` (empty value): the document's rows wait to be made, after the commit
///   that changed it ran out of map time (``DatabaseConfiguration/mapTimePerCommit``); until
///   they are, the rows listed under `0x02` are its old revision's and no read may use the index.
/// - `0x04 ‖ level ‖ group bytes` (level 1 or 2): how many rows have that group at that
///   `group_level` (``groupBytes(_:_:)``), 8 bytes little-endian, absent at 0: what a count of
///   whole groups reads instead of their rows.
enum MapIndexStore {
    static let countKey: [UInt8] = [0]
    static let rowTag: UInt8 = 1
    static let documentTag: UInt8 = 2
    static let pendingTag: UInt8 = 3
    static let summaryTag: UInt8 = 4
    /// The group levels whose row counts the index keeps (CouchDB's `group_level` 1 and 2,
    /// the common ones); other groupings read rows.
    static let summaryLevels = 1 ... 2

    /// Changes to the group counts, by summary key, gathered over a transaction's documents
    /// and written once (``applySummaries(_:_:tree:)``).
    typealias SummaryDeltas = [[UInt8]: Int]
    /// Rows one document may emit into one index (the ordinal's range).
    static let maxRowsPerDocument = 1 << 16

    struct Row: Equatable {
        var key: [UInt8]
        var value: [UInt8]
    }

    /// Documents per call of a batch function.
    static let batchSize = 256

    /// The rows `index`'s function makes of each of `rows` (none for a document it throws on:
    /// logged), in order; a batch function gets them 256 at a time.
    static func rows(of index: CompiledIndex, rows: [QueryRow]) -> [[Row]] {
        Self.rows(of: index, rows: rows, until: nil).map { $0 ?? [] }
    }

    /// The same, made until `deadline`: nil for each document not mapped by then (the calls
    /// already begun finish).
    static func rows(of index: CompiledIndex, rows: [QueryRow], until deadline: ContinuousClock.Instant?) -> [[Row]?] {
        guard let config = index.map else { return rows.map { _ in [] } }
        func late() -> Bool { deadline.map { ContinuousClock.now >= $0 } ?? false }
        func one(_ row: QueryRow) -> [MapIndexEmission] {
            if row.isDeleted { return [] }
            do {
                return try config.map(MapIndexDocument(id: row.id, revisionID: row.revisionID, properties: row.properties))
            } catch {
                DatabaseCore.logger.warning("\("map index \(index.name): document \(row.id): \(error)".escapedForLog)")
                return []
            }
        }
        var out: [[Row]?] = []
        out.reserveCapacity(rows.count)
        guard let batch = config.batch else {
            for row in rows { out.append(late() ? nil : encode(one(row), of: row, index: index)) }
            return out
        }
        var start = 0
        // Under a deadline, calls grow from one document as the time each took allows: a call
        // already begun is not stopped, so one never asks for much more than the time left.
        var size = deadline == nil ? batchSize : 1
        while start < rows.count {
            let slice = rows[start ..< min(start + size, rows.count)]
            start += slice.count
            if late() {
                out.append(contentsOf: slice.map { _ in nil })
                continue
            }
            let began = ContinuousClock.now
            defer {
                if let deadline {
                    let spent = max(ContinuousClock.now - began, .microseconds(1))
                    let left = deadline - ContinuousClock.now
                    let fits = left > .zero ? Int((left / spent) * Double(slice.count)) : 1
                    size = max(1, min(batchSize, min(size * 2, fits)))
                }
            }
            let chunk = slice.filter { !$0.isDeleted }
            var emitted: [[MapIndexEmission]?]
            do {
                let made = try batch(chunk.map { MapIndexDocument(id: $0.id, revisionID: $0.revisionID, properties: $0.properties) })
                if made.count != chunk.count {
                    throw SetteeError(.invalidParameter, "a batch map function returned \(made.count) lists of rows for \(chunk.count) documents")
                }
                emitted = made
            } catch {
                DatabaseCore.logger.warning("\("map index \(index.name): a call for \(chunk.count) documents failed (\(error)); each is mapped alone".escapedForLog)")
                emitted = chunk.map { late() ? nil : one($0) }
            }
            var byID: [String: [Row]?] = [:]
            for (row, e) in zip(chunk, emitted) { byID[row.id] = e.map { encode($0, of: row, index: index) } }
            out.append(contentsOf: slice.map { $0.isDeleted ? [] : byID[$0.id] ?? nil })
        }
        return out
    }

    /// Marks document `id`'s rows as waiting to be made (their revision ran out of map time).
    static func markPending(_ tx: WriteTransaction, tree: Tree, id: String) throws {
        try tx.put([pendingTag] + Array(id.utf8), [], in: tree)
    }

    /// Clears the mark of document `id`; true when there was one.
    @discardableResult
    static func clearPending(_ tx: WriteTransaction, tree: Tree, id: String) throws -> Bool {
        try tx.delete([pendingTag] + Array(id.utf8), in: tree)
    }

    /// Up to `limit` documents whose rows wait to be made, in ID order.
    static func pending(_ tx: some StoreReading, tree: Tree, limit: Int) throws -> [String] {
        var out: [String] = []
        try tx.forEach(in: tree, from: [pendingTag], reverse: false) { k, _ in
            guard k.first == pendingTag else { return false }
            out.append(String(decoding: UnsafeRawBufferPointer(rebasing: k[1...]), as: UTF8.self))
            return out.count < limit
        }
        return out
    }

    /// The rows `index`'s function makes of `row`.
    static func rows(of index: CompiledIndex, row: QueryRow) -> [Row] { rows(of: index, rows: [row])[0] }

    /// The stored rows of what a document emitted.
    private static func encode(_ emitted: [MapIndexEmission], of row: QueryRow, index: CompiledIndex) -> [Row] {
        let id = Array(row.id.utf8)
        var out: [Row] = []
        out.reserveCapacity(emitted.count)
        for e in emitted {
            guard out.count < maxRowsPerDocument else {
                DatabaseCore.logger.warning("\("map index \(index.name): document \(row.id) emitted over \(maxRowsPerDocument) rows; the rest are left out".escapedForLog)")
                break
            }
            do {
                var key: [UInt8] = [rowTag]
                try JSONCollation.append(e.key, to: &key)
                key.append(contentsOf: id)
                key.append(UInt8(truncatingIfNeeded: id.count >> 8))
                key.append(UInt8(truncatingIfNeeded: id.count))
                key.append(UInt8(truncatingIfNeeded: out.count >> 8))
                key.append(UInt8(truncatingIfNeeded: out.count))
                guard key.count <= StoreConfiguration.maxKeyLength else {
                    DatabaseCore.logger.warning("\("map index \(index.name): document \(row.id) emitted a key too long to index; left out".escapedForLog)")
                    continue
                }
                out.append(Row(key: key, value: try JSONValue.array([e.key, e.value]).jsonBytes()))
            } catch {
                DatabaseCore.logger.warning("\("map index \(index.name): document \(row.id): \(error)".escapedForLog)")
            }
        }
        return out
    }

    /// The key of a group's count.
    static func summaryKey(level: Int, group: UnsafeRawBufferPointer) -> [UInt8] {
        var k: [UInt8] = [summaryTag, UInt8(truncatingIfNeeded: level)]
        k.append(contentsOf: group)
        return k
    }

    /// Counts a stored row key (`rowTag ‖ collation key ‖ …`) into or out of its groups.
    static func noteSummaries(_ rowKey: [UInt8], _ delta: Int, into deltas: inout SummaryDeltas) throws {
        try rowKey.withUnsafeBytes { raw in
            guard let (key, _) = split(raw) else { throw SetteeError(.corrupted, "a map index row is malformed") }
            for level in summaryLevels {
                deltas[summaryKey(level: level, group: try groupBytes(key, .level(level))), default: 0] += delta
            }
        }
    }

    /// Writes the count changes a transaction gathered. A count that would fall below zero is
    /// damage: the write is refused (``Database/check(repair:)`` reports and mends it).
    static func applySummaries(_ deltas: SummaryDeltas, _ tx: WriteTransaction, tree: Tree) throws {
        for (key, delta) in deltas where delta != 0 {
            let now = try summaryCount(tx, tree: tree, key: key) ?? 0
            let (next, overflow) = now.addingReportingOverflow(delta)
            guard !overflow, next >= 0 else {
                throw SetteeError(.corrupted, "a map index's group count is out of step with its rows; a repair of the database mends it")
            }
            if next == 0 {
                _ = try tx.delete(key, in: tree)
            } else {
                try tx.put(key, withUnsafeBytes(of: UInt64(next).littleEndian, Array.init), in: tree)
            }
        }
    }

    /// The count stored under a summary key; nil when there is none.
    static func summaryCount(_ tx: some StoreReading, tree: Tree, key: [UInt8]) throws -> Int? {
        try storedCount(tx, tree: tree, key: key, "a map index's group count is malformed")
    }

    /// An 8-byte little-endian count stored under `key`; nil when there is none.
    private static func storedCount(_ tx: some StoreReading, tree: Tree, key: [UInt8], _ malformed: String) throws -> Int? {
        guard let v = try tx.withValue(forKey: key, in: tree, { b -> UInt64? in
            b.count == 8 ? UInt64(littleEndian: b.loadUnaligned(as: UInt64.self)) : nil
        }) else { return nil }
        guard let v, v <= UInt64(Int.max) else { throw SetteeError(.corrupted, malformed) }
        return Int(v)
    }

    /// The group counts the rows of `tree` make, by summary key (what the check compares with
    /// the stored ones, and a repair writes).
    static func countedSummaries(_ tx: some StoreReading, tree: Tree) throws -> [[UInt8]: Int] {
        var counts: SummaryDeltas = [:]
        try tx.forEach(in: tree, from: [rowTag], reverse: false) { k, _ in
            guard k.first == rowTag else { return false }
            try noteSummaries(Array(k), 1, into: &counts)
            return true
        }
        return counts
    }

    /// The group counts stored in `tree`, by summary key.
    static func storedSummaries(_ tx: some StoreReading, tree: Tree) throws -> [[UInt8]: Int] {
        var out: [[UInt8]: Int] = [:]
        try tx.forEach(in: tree, from: [summaryTag], reverse: false) { k, v in
            guard k.first == summaryTag else { return false }
            guard v.count == 8 else { throw SetteeError(.corrupted, "a map index's group count is malformed") }
            let n = UInt64(littleEndian: v.loadUnaligned(as: UInt64.self))
            out[Array(k)] = n <= UInt64(Int.max) ? Int(n) : -1
            return true
        }
        return out
    }

    /// Replaces every group count of `tree` by what its rows make.
    static func rewriteSummaries(_ tx: WriteTransaction, tree: Tree) throws {
        var stale: [[UInt8]] = []
        try tx.forEach(in: tree, from: [summaryTag], reverse: false) { k, _ in
            guard k.first == summaryTag else { return false }
            stale.append(Array(k))
            return true
        }
        for k in stale { _ = try tx.delete(k, in: tree) }
        try applySummaries(try countedSummaries(tx, tree: tree), tx, tree: tree)
    }

    /// Replaces the rows of document `id` with `rows`, gathering what that changes of the group
    /// counts in `summaries` (written by the caller once for all its documents).
    static func replace(_ tx: WriteTransaction, tree: Tree, id: String, with rows: [Row], summaries: inout SummaryDeltas) throws {
        let documentKey = [documentTag] + Array(id.utf8)
        var removed = 0
        if let old = try tx.value(forKey: documentKey, in: tree) {
            guard let keys = decodeKeys(old) else { throw SetteeError(.corrupted, "a map index's document entry is malformed") }
            // Unchanged rows are left as they are: most writes do not move a document's rows.
            if keys.count == rows.count, zip(keys, rows).allSatisfy({ $0 == $1.key }) {
                var same = true
                for r in rows where try tx.value(forKey: r.key, in: tree) != r.value {
                    same = false
                    break
                }
                if same { return }
            }
            for k in keys where try tx.delete(k, in: tree) {
                removed += 1
                try noteSummaries(k, -1, into: &summaries)
            }
        }
        var list = ByteWriter(capacity: rows.count * 32)
        for r in rows {
            try tx.put(r.key, r.value, in: tree)
            try noteSummaries(r.key, 1, into: &summaries)
            list.varint(UInt64(r.key.count))
            list.bytes.append(contentsOf: r.key)
        }
        if rows.isEmpty {
            _ = try tx.delete(documentKey, in: tree)
        } else {
            try tx.put(documentKey, list.bytes, in: tree)
        }
        if removed != rows.count {
            let count = try rowCount(tx, tree: tree) - removed + rows.count
            try tx.put(countKey, withUnsafeBytes(of: UInt64(max(0, count)).littleEndian, Array.init), in: tree)
        }
    }

    static func decodeKeys(_ b: [UInt8]) -> [[UInt8]]? {
        b.withUnsafeBytes { raw -> [[UInt8]]? in
            var r = ByteReader(raw)
            var keys: [[UInt8]] = []
            while !r.atEnd {
                guard let n = r.count(limit: r.remaining), let k = r.bytes(n) else { return nil }
                keys.append(Array(k))
            }
            return keys
        }
    }

    static func rowCount(_ tx: some StoreReading, tree: Tree) throws -> Int {
        try storedCount(tx, tree: tree, key: countKey, "a map index's row count is malformed") ?? 0
    }

    /// Where a row is against a bound: its key's collation bytes, then (when the bound has
    /// one) its document ID.
    private static func order(_ key: UnsafeRawBufferPointer, _ id: UnsafeRawBufferPointer,
                              _ boundKey: [UInt8], _ boundID: [UInt8]?) -> Int {
        let c = Bytes.compare(key, boundKey)
        if c != 0 { return c }
        guard let boundID else { return 0 }
        return Bytes.compare(id, boundID)
    }

    /// The collation key and document ID of a stored row key; nil when malformed.
    static func split(_ key: UnsafeRawBufferPointer) -> (key: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer)? {
        guard key.count >= 6, key[0] == rowTag else { return nil }
        let n = Int(key[key.count - 4]) << 8 | Int(key[key.count - 3])
        guard n > 0, n <= key.count - 5 else { return nil }
        let idStart = key.count - 4 - n
        return (UnsafeRawBufferPointer(rebasing: key[1 ..< idStart]), UnsafeRawBufferPointer(rebasing: key[idStart ..< key.count - 4]))
    }

    /// Reads the rows of one range; false when `body` stopped.
    static func scan(_ tx: some StoreReading, tree: Tree, range: MapIndexRange, descending: Bool,
                     _ body: (MapIndexRow) throws -> Bool) throws -> Bool {
        try scanEntries(tx, tree: tree, range: range, descending: descending) { _, id, v in
            try body(try row(v, id: id))
        }
    }

    /// A stored row as the API gives it.
    static func row(_ value: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer) throws -> MapIndexRow {
        let (key, v) = try pair(value)
        return MapIndexRow(key: key, value: v, documentID: String(decoding: id, as: UTF8.self))
    }

    /// The key and value of a stored row's `[key, value]`.
    static func pair(_ value: UnsafeRawBufferPointer) throws -> (key: JSONValue, value: JSONValue) {
        guard case .array(let pair) = try JSONParser.parse(value), pair.count == 2 else {
            throw SetteeError(.corrupted, "a map index row's value is malformed")
        }
        return (pair[0], pair[1])
    }

    /// Reads the entries of one range as stored (collation key, document ID, `[key, value]`
    /// JSON), lent for the call; false when `body` stopped.
    /// `resume`: where the engine starts instead of the range's start (a stored key, or a
    /// position between keys), for a reader that skips rows.
    static func scanEntries(_ tx: some StoreReading, tree: Tree, range: MapIndexRange, descending: Bool, resume: [UInt8]? = nil,
                            _ body: (_ key: UnsafeRawBufferPointer, _ id: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        // `[first, …]` keys all begin with the array's tag and the element's bytes, and go on
        // with a tag or an array's end (never 0xFF): their range is from those bytes up to them
        // followed by 0xFF (the other way round when descending).
        let within = try range.firstElement.map { (e) throws(SetteeError) in Array(try JSONCollation.key(.array([e])).dropLast()) }
        let (low, high) = (within, within.map { $0 + [0xFF] })
        let start = try range.startKey.map { (k) throws(SetteeError) in try JSONCollation.key(k) } ?? (descending ? high : low)
        let startID = range.startKey == nil ? nil : range.startDocumentID.map { Array($0.utf8) }
        let end = try range.endKey.map { (k) throws(SetteeError) in try JSONCollation.key(k) } ?? (descending ? low : high)
        let endID = range.endKey == nil ? nil : range.endDocumentID.map { Array($0.utf8) }
        // Where the engine starts; the exact bounds are checked on every row.
        var from: [UInt8] = [rowTag]
        if let start {
            from += start
            if let startID { from += startID }
            if descending { from += [0xFF, 0xFF, 0xFF, 0xFF, 0xFF] }
        } else if descending {
            from.append(0xFF)
        }
        if let resume { from = resume }
        var going = true
        try tx.forEach(in: tree, from: from, reverse: descending) { k, v in
            guard k.first == rowTag else { return false }
            guard let (key, id) = split(k) else { throw SetteeError(.corrupted, "a map index row is malformed") }
            // Rows before the start (an ID that extends the start's), skipped.
            if let start {
                let c = order(key, id, start, startID)
                if descending ? c > 0 : c < 0 { return true }
            }
            if let end {
                let c = order(key, id, end, endID)
                if descending ? c < 0 : c > 0 { return false }
                if c == 0 && !range.inclusiveEnd { return false }
            }
            going = try body(key, id, v)
            return going
        }
        return going
    }

    /// Reads the groups at `level` (one of ``summaryLevels``) of the rows in `range`, with how
    /// many rows each has there: `body` gets the `[key, value]` JSON of a group's first row
    /// and the count, and returns false to stop (then this does too). A group whose rows all lie
    /// inside the range (every group but those of the range's two ends) is counted from the
    /// count the index keeps, and the walk jumps past its rows; the groups at the ends are
    /// walked. So a count of `g` groups reads about `2g` keys, not every row.
    static func countGroups(_ tx: some StoreReading, tree: Tree, range: MapIndexRange, descending: Bool, level: Int,
                            _ body: (_ first: UnsafeRawBufferPointer, _ rows: Int) throws -> Bool) throws -> Bool {
        func edge(_ k: JSONValue?) throws -> [UInt8]? {
            guard let k else { return nil }
            return try JSONCollation.key(k).withUnsafeBytes { b in Array(try groupBytes(b, .level(level))) }
        }
        let edges = (try edge(range.startKey), try edge(range.endKey))
        var resume: [UInt8]?
        // The group being walked: its bytes (copied: the row's are lent), first row and rows so far.
        var open: (bytes: [UInt8], first: [UInt8], rows: Int)?
        while true {
            var jumped = false
            let going = try scanEntries(tx, tree: tree, range: range, descending: descending, resume: resume) { k, _, v in
                let g = try groupBytes(k, .level(level))
                if let o = open {
                    if Bytes.compare(g, o.bytes) == 0 {
                        open?.rows += 1
                        return true
                    }
                    open = nil
                    guard try o.first.withUnsafeBytes({ f in try body(f, o.rows) }) else { return false }
                }
                let atEdge = edges.0.map { Bytes.compare(g, $0) == 0 } == true || edges.1.map { Bytes.compare(g, $0) == 0 } == true
                if !atEdge, let rows = try summaryCount(tx, tree: tree, key: summaryKey(level: level, group: g)) {
                    guard try body(v, rows) else { return false }
                    // Past the group's rows: each extends its bytes, and none holds 0xFF there
                    // (a collation tag, or a document ID's UTF-8, follows them).
                    resume = [rowTag] + Array(g) + (descending ? [] : [0xFF])
                    jumped = true
                    return false
                }
                open = (Array(g), Array(v), 1)
                return true
            }
            if jumped { continue }
            if !going { return false }
            break
        }
        if let o = open { return try o.first.withUnsafeBytes { f in try body(f, o.rows) } }
        return true
    }

    /// The bytes of a row's group within its collation key: none for one group of every row,
    /// the whole key for exact keys, else, for an array key of at least `level` elements, the
    /// encoding of its first `level` (any other key is a group of its own). Two rows are in
    /// one group exactly when these bytes are equal, as the collation's keys are.
    static func groupBytes(_ key: UnsafeRawBufferPointer, _ grouping: MapIndexGrouping) throws -> UnsafeRawBufferPointer {
        switch grouping {
        case .all: return UnsafeRawBufferPointer(rebasing: key[0 ..< 0])
        case .exact: return key
        case .level(let level):
            guard key.first == JSONCollation.Tag.array.rawValue else { return key }
            var at = 1
            for _ in 0 ..< level {
                guard at < key.count else { throw SetteeError(.corrupted, "a map index row's key is malformed") }
                // The array ends before `level` elements: the whole key is the group.
                if key[at] == JSONCollation.Tag.end.rawValue { return key }
                guard let n = JSONCollation.lengthOfValues(1, in: UnsafeRawBufferPointer(rebasing: key[at...])) else {
                    throw SetteeError(.corrupted, "a map index row's key is malformed")
                }
                at += n
            }
            return UnsafeRawBufferPointer(rebasing: key[0 ..< at])
        }
    }

    /// A group's key as a view gives it: null for one group of every row, the row's key, or
    /// the first `level` elements of an array key.
    static func groupKey(_ key: JSONValue, _ grouping: MapIndexGrouping) -> JSONValue {
        switch grouping {
        case .all: return .null
        case .exact: return key
        case .level(let level):
            if case .array(let a) = key, a.count > level { return .array(Array(a.prefix(level))) }
            return key
        }
    }
}

/// How ``Database/mapIndexGroups(_:ranges:descending:grouping:readingValues:value:group:)``
/// groups rows: CouchDB's `reduce` without `group`, `group=true`, and `group_level`.
///
/// ```swift
/// let byYear = MapIndexGrouping.level(1)   // keys [year, month, day] grouped by year
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Server) public enum MapIndexGrouping: Sendable, Hashable {
    /// One group of every row in the ranges; its key is null.
    case all
    /// One group per distinct key (in the collation: `1` and `1.0` are one key).
    case exact
    /// For an array key, its first `n` elements (n ≥ 1); any other key, or a shorter array,
    /// is a group of its own.
    case level(Int)
}
