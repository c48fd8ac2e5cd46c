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
