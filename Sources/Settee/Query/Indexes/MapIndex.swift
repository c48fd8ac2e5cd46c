import Foundation
internal import SetteeStorage

/// A map index: rows an application function makes of each document (any number per
/// document, each a key and a value), kept in key order (`Formats/collation.md`) in the same
/// commit as every change of a document's current revision. CouchDB's views are map indexes;
/// so were Couchbase Lite 1's.
///
/// ```swift
/// let byList = MapIndexConfiguration(version: "1") { doc in
///     guard doc.properties["type"] == "task", let list = doc.properties["list"] else { return [] }
///     return [MapIndexEmission(key: list, value: doc.properties["title"] ?? nil)]
/// }
/// try db.createIndex(byList, name: "tasks-by-list")
/// try db.mapIndexRows("tasks-by-list", ranges: [.key("groceries")]) { row in
///     print(row.documentID, row.value)
///     return true
/// }
/// ```
///
/// The function is not stored: the catalog keeps the index's rows and `version`. Give the
/// configuration again after every open, before writing (with the same version the rows are
/// kept; with another, the index is rebuilt). A write made while the function is not given
/// cannot keep the index whole: it marks the index for rebuilding, and queries refuse it
/// until the function is given again. Change `version` whenever the function changes what it
/// emits.
///
/// The function runs in the writing thread's commit (keep it short and free of side effects),
/// once for the transaction's documents together (so a read inside ``Database/inBatch(_:)``
/// does not see the rows of the batch's own documents until it commits), and, while an index
/// is built, on the building thread. It sees the current revision of each
/// live document; deleted documents have no rows. When it throws, the document has no rows
/// in the index and the error is logged (swift-log, label `settee`); the write goes on. A key
/// whose entry would be longer than a stored key may be (1,024 bytes with the document ID) is left out and logged.
///
/// - Note: A value type; safe to share between threads. `map` is called from any thread.
public struct MapIndexConfiguration: IndexConfiguration {
    /// What the function is given, and what it returns.
    ///
    /// ```swift
    /// let map: MapIndexConfiguration.Map = { doc in [MapIndexEmission(key: .string(doc.id), value: nil)] }
    /// ```
    public typealias Map = @Sendable (MapIndexDocument) throws -> [MapIndexEmission]

    /// Names what `map` emits: rows made by another version are replaced by rebuilding.
    ///
    /// ```swift
    /// print(MapIndexConfiguration(version: "2") { _ in [] }.version)   // 2
    /// ```
    public let version: String
    /// What a function given many documents at once returns: one list of rows per document,
    /// in the order given.
    ///
    /// ```swift
    /// let batch: MapIndexConfiguration.Batch = { docs in docs.map { [MapIndexEmission(key: .string($0.id), value: nil)] } }
    /// ```
    public typealias Batch = @Sendable ([MapIndexDocument]) throws -> [[MapIndexEmission]]

    /// The function that makes a document's rows.
    ///
    /// ```swift
    /// let rows = try config.map(MapIndexDocument(id: "a", revisionID: "1-x", properties: [:]))
    /// ```
    public let map: Map
    /// The function given many documents at once, when the configuration was made with one.
    let batch: Batch?

    /// A map index made by `map`, named `version`.
    ///
    /// ```swift
    /// let config = MapIndexConfiguration(version: "1") { doc in
    ///     [MapIndexEmission(key: doc.properties["type"] ?? nil, value: 1)]
    /// }
    /// ```
    public init(version: String, map: @escaping Map) {
        self.version = version
        self.map = map
        self.batch = nil
    }

    /// A map index made by a function that takes many documents at once (up to 256; the
    /// documents of a commit, or of a step of a build), for a function whose every call costs
    /// something of its own (a call into another language runtime). It returns one list of rows
    /// per document, in order. When it throws, or returns another number of lists, each
    /// document of the call is given to it alone, so that only those it throws on have no rows.
    ///
    /// ```swift
    /// let config = MapIndexConfiguration(version: "1", mapBatch: { docs in
    ///     docs.map { doc in [MapIndexEmission(key: doc.properties["type"] ?? nil, value: 1)] }
    /// })
    /// ```
    public init(version: String, mapBatch: @escaping Batch) {
        self.version = version
        self.batch = mapBatch
        self.map = { doc in
            let rows = try mapBatch([doc])
            guard rows.count == 1 else {
                throw SetteeError(.invalidParameter, "a batch map function returned \(rows.count) lists of rows for 1 document")
            }
            return rows[0]
        }
    }
}

/// A document as a map function sees it: its ID, current revision and properties.
///
/// ```swift
/// let config = MapIndexConfiguration(version: "1") { doc in
///     [MapIndexEmission(key: .string(doc.revisionID), value: .int(Int64(doc.properties.count)))]
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexDocument: Sendable, Hashable {
    /// The document's ID.
    ///
    /// ```swift
    /// print(doc.id)
    /// ```
    public let id: String
    /// The current revision's ID.
    ///
    /// ```swift
    /// print(doc.revisionID)   // 3-…
    /// ```
    public let revisionID: String
    /// The current revision's properties (`_attachments` included, as stored).
    ///
    /// ```swift
    /// if doc.properties["type"] == "task" { … }
    /// ```
    public let properties: [String: JSONValue]

    /// A document to give a map function (for testing one).
    ///
    /// ```swift
    /// let doc = MapIndexDocument(id: "a", revisionID: "1-x", properties: ["type": "task"])
    /// ```
    public init(id: String, revisionID: String, properties: [String: JSONValue]) {
        self.id = id
        self.revisionID = revisionID
        self.properties = properties
    }
}

/// One row a map function makes of a document (CouchDB's `emit(key, value)`).
///
/// ```swift
/// MapIndexEmission(key: ["2026", 11], value: 1)
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexEmission: Sendable, Hashable {
    /// What the row is found and ordered by.
    ///
    /// ```swift
    /// print(MapIndexEmission(key: "a", value: nil).key)   // "a"
    /// ```
    public var key: JSONValue
    /// What the row carries.
    ///
    /// ```swift
    /// print(MapIndexEmission(key: "a", value: 2).value)   // 2
    /// ```
    public var value: JSONValue

    /// A row of `key` and `value`.
    ///
    /// ```swift
    /// let row = MapIndexEmission(key: .string(doc.id), value: nil)
    /// ```
    public init(key: JSONValue, value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// A row read from a map index.
///
/// ```swift
/// try db.mapIndexRows("by-type") { row in
///     print(row.key, row.documentID, row.value)
///     return true
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexRow: Sendable, Hashable {
    /// The emitted key.
    ///
    /// ```swift
    /// print(row.key)
    /// ```
    public let key: JSONValue
    /// The emitted value.
    ///
    /// ```swift
    /// print(row.value)
    /// ```
    public let value: JSONValue
    /// The document that emitted the row.
    ///
    /// ```swift
    /// let doc = try db.document(withID: row.documentID)
    /// ```
    public let documentID: String
}

/// A slice of a map index, in the order it is read: from `startKey` (and, among rows of that
/// key, `startDocumentID`) to `endKey` (and `endDocumentID`), as CouchDB's `startkey`,
/// `startkey_docid`, `endkey`, `endkey_docid` and `inclusive_end`. When reading descending,
/// the start is the higher end.
///
/// ```swift
/// var range = MapIndexRange()
/// range.startKey = ["2026", 1]
/// range.endKey = ["2026", 12, [:] as JSONValue]
/// try db.mapIndexRows("by-date", ranges: [range]) { row in print(row.key); return true }
/// ```
///
/// Rows of equal keys are ordered by document ID (its UTF-8 bytes).
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexRange: Sendable, Hashable {
    /// The first key; nil for the first row (the last when descending).
    ///
    /// ```swift
    /// range.startKey = "b"
    /// ```
    public var startKey: JSONValue?
    /// Among the rows of `startKey`, the first document ID; ignored without `startKey`.
    ///
    /// ```swift
    /// range.startDocumentID = "doc-17"
    /// ```
    public var startDocumentID: String?
    /// The last key; nil for the last row (the first when descending).
    ///
    /// ```swift
    /// range.endKey = "m"
    /// ```
    public var endKey: JSONValue?
    /// Among the rows of `endKey`, the last document ID; ignored without `endKey`.
    ///
    /// ```swift
    /// range.endDocumentID = "doc-90"
    /// ```
    public var endDocumentID: String?
    /// Whether rows at the end bound are read.
    ///
    /// ```swift
    /// range.inclusiveEnd = false   // up to "m", without it
    /// ```
    public var inclusiveEnd = true

    /// Every row.
    ///
    /// ```swift
    /// try db.mapIndexRows("by-type", ranges: [MapIndexRange()]) { _ in true }
    /// ```
    public init() {}

    /// The rows whose key is `key` (collation-equal).
    ///
    /// ```swift
    /// try db.mapIndexRows("by-type", ranges: [.key("task")]) { row in print(row.documentID); return true }
    /// ```
    public static func key(_ key: JSONValue) -> MapIndexRange {
        var r = MapIndexRange()
        r.startKey = key
        r.endKey = key
        return r
    }
}

/// What ``Database/mapIndexInfo(forName:)`` tells of a map index.
///
/// ```swift
/// if let info = try db.mapIndexInfo(forName: "by-type"), info.version != "2" { … }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct MapIndexInfo: Sendable, Hashable {
    /// The version its rows were (or are being) made with.
    ///
    /// ```swift
    /// print(info.version)
    /// ```
    public let version: String
    /// Whether it is whole and can be read (false while it is built, or when it was written
    /// to while its function was not given).
    ///
    /// ```swift
    /// if !info.isReady { try db.createIndex(config, name: "by-type") }
    /// ```
    public let isReady: Bool
    /// Whether this process has given its function (writes keep it whole).
    ///
    /// ```swift
    /// print(info.isAttached)
    /// ```
    public let isAttached: Bool
    /// The rows it holds.
    ///
    /// ```swift
    /// print("\(info.rowCount) rows")
    /// ```
    public let rowCount: Int
}

extension Database {
    /// Reads the rows of the map index `name` in `ranges`, one range after the other, from one
    /// snapshot; `body` returns false to stop.
    ///
    /// ```swift
    /// var range = MapIndexRange()
    /// range.startKey = "a"
    /// range.endKey = "c"
    /// try db.mapIndexRows("by-name", ranges: [range], descending: false) { row in
    ///     print(row.key, row.documentID)
    ///     return true
    /// }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notFound`` when there is no map index of that name;
    ///   ``SetteeError/Code/busy`` while it is being built or waits for its function;
    ///   ``SetteeError/Code/corrupted`` for a damaged row; ``SetteeError/Code/notOpen``;
    ///   what `body` throws.
    public func mapIndexRows(_ name: String, ranges: [MapIndexRange] = [MapIndexRange()], descending: Bool = false,
                             _ body: (MapIndexRow) throws -> Bool) throws {
        try checkOpen()
        // Rows a commit left to be made after it are made first: a read never sees a
        // document's old rows beside its new revision.
        try core.catchUpMapIndex(name)
        try core.read { tx in
            let tree = try core.readyMapTree(tx, name: name)
            for range in ranges {
                guard try MapIndexStore.scan(tx, tree: tree, range: range, descending: descending, body) else { return }
            }
        }
    }

    /// The version, state and size of the map index `name`; nil when there is none.
    ///
    /// ```swift
    /// let info = try db.mapIndexInfo(forName: "by-type")
    /// print(info?.rowCount ?? 0)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when `name` is another kind of index;
    ///   ``SetteeError/Code/notOpen``.
    public func mapIndexInfo(forName name: String) throws -> MapIndexInfo? {
        try checkOpen()
        let attached = core.indexSet.withLock { $0.indexes.first { $0.name == name }?.map != nil }
        return try core.read { tx -> MapIndexInfo? in
            guard let d = try tx.withValue(forKey: Array(name.utf8), in: core.trees.indexCatalog, { b in try IndexDefinition(decoding: b) })
            else { return nil }
            guard d.kind == .map, let version = d.expressions.first else {
                throw SetteeError(.invalidParameter, "index \(name) is not a map index")
            }
            let tree = tx.tree(named: d.treeName)
            let rows = try tree.map { t in try MapIndexStore.rowCount(tx, tree: t) } ?? 0
            return MapIndexInfo(version: version, isReady: d.state == .ready, isAttached: attached, rowCount: rows)
        }
    }
}

extension DatabaseCore {
    /// Makes the rows of map index `name`'s documents that commits left to be made
    /// (``DatabaseConfiguration/mapTimePerCommit``): a slice at a time, read from a snapshot,
    /// mapped outside the write lock, then written in a short transaction for each document
    /// that has not changed since (a document that changed had its rows made, or was marked
    /// again, by the commit that changed it). Returns once none is left; `busy` when new ones
    /// keep coming faster than they are made.
    func catchUpMapIndex(_ name: String) throws {
        for _ in 0 ..< 256 {
            guard let index = indexSet.withLock({ $0.indexes.first { $0.name == name } }), index.isMap, index.map != nil else { return }
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
                guard c.indexes.contains(where: { $0.name == name && $0.record == index.record }) else { return }
                for item in items where try c.tx.value(forKey: [MapIndexStore.pendingTag] + item.key, in: index.tree) != nil {
                    guard try c.meta(item.key)?.sequence == item.sequence else { continue }
                    try MapIndexStore.replace(c.tx, tree: index.tree, id: item.id, with: rows[item.id] ?? [])
                    try MapIndexStore.clearPending(c.tx, tree: index.tree, id: item.id)
                }
            }
        }
        throw SetteeError(.busy, "map index \(name) is still making the rows of recent changes")
    }

    /// Has the map indexes in `names` caught up in the background (one thread at a time).
    func catchUpLater(_ names: Set<String>) {
        guard !names.isEmpty else { return }
        let start = mapCatchUp.withLock { state -> Bool in
            state.waiting.formUnion(names)
            if state.running { return false }
            state.running = true
            return true
        }
        guard start else { return }
        let thread = Thread { [weak self] in
            while let self {
                let next = self.mapCatchUp.withLock { state -> String? in
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
                    self.mapCatchUp.withLock { $0 = (running: false, waiting: []) }
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
enum MapIndexStore {
    static let countKey: [UInt8] = [0]
    static let rowTag: UInt8 = 1
    static let documentTag: UInt8 = 2
    static let pendingTag: UInt8 = 3
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

    /// Replaces the rows of document `id` with `rows`.
    static func replace(_ tx: WriteTransaction, tree: Tree, id: String, with rows: [Row]) throws {
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
            for k in keys where try tx.delete(k, in: tree) { removed += 1 }
        }
        var list = ByteWriter(capacity: rows.count * 32)
        for r in rows {
            try tx.put(r.key, r.value, in: tree)
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
        guard let v = try tx.withValue(forKey: countKey, in: tree, { b -> UInt64? in
            b.count == 8 ? UInt64(littleEndian: b.loadUnaligned(as: UInt64.self)) : nil
        }) else { return 0 }
        guard let v, v <= UInt64(Int.max) else { throw SetteeError(.corrupted, "a map index's row count is malformed") }
        return Int(v)
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
        let start = try range.startKey.map { (k) throws(SetteeError) in try JSONCollation.key(k) }
        let startID = start == nil ? nil : range.startDocumentID.map { Array($0.utf8) }
        let end = try range.endKey.map { (k) throws(SetteeError) in try JSONCollation.key(k) }
        let endID = end == nil ? nil : range.endDocumentID.map { Array($0.utf8) }
        // Where the engine starts; the exact bounds are checked on every row.
        var from: [UInt8] = [rowTag]
        if let start {
            from += start
            if let startID { from += startID }
            if descending { from += [0xFF, 0xFF, 0xFF, 0xFF, 0xFF] }
        } else if descending {
            from.append(0xFF)
        }
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
            guard case .array(let pair) = try JSONParser.parse(v), pair.count == 2 else {
                throw SetteeError(.corrupted, "a map index row's value is malformed")
            }
            going = try body(MapIndexRow(key: pair[0], value: pair[1], documentID: String(decoding: id, as: UTF8.self)))
            return going
        }
        return going
    }
}
