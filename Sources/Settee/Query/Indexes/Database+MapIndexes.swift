import Foundation
internal import SetteeStorage

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
        let scan = try mapScan(.init(index: name, ranges: ranges, descending: descending, grouping: nil, readingValues: true))
        func run(_ tx: some StoreReading) throws { try MapIndexScanner(tx: tx, tree: try core.readyMapTree(tx, name: name), scan: scan).rows(body) }
        try core.read(snapshot: run, batch: run)
    }

    /// The plan of a view query over a map index whose rows are made (rows a commit left to be
    /// made after it are made first: a read never sees a document's old rows beside its new
    /// revision).
    func mapScan(_ source: SelectStatement.MapSource) throws -> QueryPlan.MapScan {
        try checkOpen()
        try core.catchUpMapIndex(source.index)
        // The one planner decides how the rows are read, as for every other query.
        guard let scan = try QueryPlanner.plan(source.statement, indexes: []).mapScan else {
            throw SetteeError(.corrupted, "a view query was planned without its map index")
        }
        return scan
    }

    /// Reads the rows of the map index `name` in `ranges` by groups of consecutive rows with one
    /// group key (what a view's built-in reduce reads), from one snapshot, without parsing a row
    /// it is not asked for: `value` gets each row's value when `readingValues` (before the
    /// group it is in is closed), `group` each group's key and row count as the group closes,
    /// and returns false to stop. Rows are compared by their stored collation keys, so a group
    /// costs no comparison of JSON values; a group may run across two ranges. Every row of the
    /// index counted as one group is read from the count the index keeps; without values, in one
    /// range, whole groups at levels 1 and 2 (and, for ``MapIndexGrouping/all``, at level 1) are
    /// read from the counts the index keeps of them, so the cost is that of the groups, not of
    /// the rows.
    ///
    /// ```swift
    /// var counts: [(JSONValue, Int)] = []
    /// try db.mapIndexGroups("by-date", grouping: .level(1), readingValues: false, value: { _ in }) { key, rows in
    ///     counts.append((key, rows))
    ///     return true
    /// }
    /// ```
    ///
    /// - Throws: as ``mapIndexRows(_:ranges:descending:_:)``; ``SetteeError/Code/invalidParameter``
    ///   for a level below 1.
    @_spi(Server) public func mapIndexGroups(_ name: String, ranges: [MapIndexRange] = [MapIndexRange()], descending: Bool = false,
                                             grouping: MapIndexGrouping, readingValues: Bool,
                                             value: (JSONValue) throws -> Void,
                                             group: (_ key: JSONValue, _ rows: Int) throws -> Bool) throws {
        if case .level(let n) = grouping, n < 1 { throw SetteeError(.invalidParameter, "a group level is at least 1") }
        let scan = try mapScan(.init(index: name, ranges: ranges, descending: descending, grouping: grouping, readingValues: readingValues))
        func run(_ tx: some StoreReading) throws {
            try MapIndexScanner(tx: tx, tree: try core.readyMapTree(tx, name: name), scan: scan).groups(value: value, group: group)
        }
        try core.read(snapshot: run, batch: run)
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
        let attached = core.parts.queries.indexSet.withLock { $0.indexes.first { $0.name == name }?.map != nil }
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
