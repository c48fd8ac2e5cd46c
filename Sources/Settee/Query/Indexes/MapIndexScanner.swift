internal import SetteeStorage

/// Runs a view query's plan (``QueryPlan/MapScan``) over a map index's tree in one snapshot:
/// its rows one by one, or its groups, read as the planner chose (``QueryPlan/MapReading``).
///
/// ```swift
/// let plan = try QueryPlanner.plan(source.statement, indexes: [])
/// try MapIndexScanner(tx: tx, tree: tree, scan: plan.mapScan!).rows { row in print(row.key); return true }
/// ```
///
/// - Note: Not thread-safe; lives for one read on one thread.
struct MapIndexScanner<Reader: StoreReading> {
    let tx: Reader
    let tree: Tree
    let scan: QueryPlan.MapScan

    private var source: SelectStatement.MapSource { scan.source }

    /// Calls `body` with each row of the ranges, one range after the other, until it returns false.
    func rows(_ body: (MapIndexRow) throws -> Bool) throws {
        for range in source.ranges {
            guard try MapIndexStore.scan(tx, tree: tree, range: range, descending: source.descending, body) else { return }
        }
    }

    /// Calls `group` with each group's key and row count as it closes (until it returns
    /// false), and, when the source reads values, `value` with each row's value before the
    /// group it is in closes.
    func groups(value: (JSONValue) throws -> Void, group: (_ key: JSONValue, _ rows: Int) throws -> Bool) throws {
        guard let grouping = source.grouping else {
            throw SetteeError(.invalidParameter, "a map index's rows are read one by one, not by groups")
        }
        switch scan.reading {
        case .rowCount:
            let rows = try MapIndexStore.rowCount(tx, tree: tree)
            if rows > 0 { _ = try group(.null, rows) }
        case .groupCounts(let level) where grouping == .all:
            var total = 0
            _ = try MapIndexStore.countGroups(tx, tree: tree, range: source.ranges[0], descending: source.descending, level: level) { _, rows in
                let (sum, overflow) = total.addingReportingOverflow(rows)
                guard !overflow else { throw SetteeError(.corrupted, "a map index's group counts are malformed") }
                total = sum
                return true
            }
            if total > 0 { _ = try group(.null, total) }
        case .groupCounts(let level):
            _ = try MapIndexStore.countGroups(tx, tree: tree, range: source.ranges[0], descending: source.descending, level: level) { first, rows in
                try group(MapIndexStore.groupKey(try MapIndexStore.pair(first).key, grouping), rows)
            }
        case .rows, .groupedRows:
            try walkGroups(grouping, value: value, group: group)
        }
    }

    /// Groups the rows of every range by their stored collation keys: a group costs no
    /// comparison of JSON values, and may run across two ranges.
    private func walkGroups(_ grouping: MapIndexGrouping, value: (JSONValue) throws -> Void,
                            group: (_ key: JSONValue, _ rows: Int) throws -> Bool) throws {
        let readingValues = source.readingValues
        // The open group: its bytes (copied: the row's are lent), key and rows so far.
        var bytes: [UInt8] = []
        var open: (key: JSONValue, rows: Int)?
        for range in source.ranges {
            let going = try MapIndexStore.scanEntries(tx, tree: tree, range: range, descending: source.descending) { k, _, v in
                let g = try MapIndexStore.groupBytes(k, grouping)
                if let o = open, g.count != bytes.count || Bytes.compare(g, bytes) != 0 {
                    open = nil
                    guard try group(o.key, o.rows) else { return false }
                }
                if open == nil {
                    let row = try MapIndexStore.pair(v)
                    bytes = Array(g)
                    open = (MapIndexStore.groupKey(row.key, grouping), 0)
                    if readingValues { try value(row.value) }
                } else if readingValues {
                    try value(try MapIndexStore.pair(v).value)
                }
                open?.rows += 1
                return true
            }
            if !going { return }
        }
        if let o = open { _ = try group(o.key, o.rows) }
    }
}
