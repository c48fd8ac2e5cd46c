import Foundation
internal import SetteeStorage

/// How a join's statement is run: every source read from one snapshot (the collections of a
/// database share its store), the first source's live documents as the first rows, then each
/// join in order. An `ON` that compares a value of the joined source with one of the rows so
/// far (`l.id = t.listID`, either way round) is a hash join: the joined source's documents are
/// hashed once by their side's value, and each row looks its value up (the `ON` is still
/// evaluated on every pair found, so a hash that groups more than `=` does changes nothing).
/// Any other `ON`, and `CROSS JOIN`, pairs every row with every document. `WHERE`, grouping,
/// ordering and the select list then run on the joined rows as on one source's.
///
/// A joined row holds each source's properties under its alias, and its `META()` under
/// ``SelectStatement/metaKey``.
extension QueryExecutor {
    /// The plan of a join, as ``Query/explain()`` shows it.
    static func joinExplanation(_ s: SelectStatement) -> String {
        var lines = ["SCAN ALL DOCUMENTS OF \(s.source) AS \(s.alias)"]
        for j in s.joins {
            let how: String
            if j.kind == .cross {
                how = "every pair"
            } else if let on = j.on, equiJoinKeys(on, alias: j.alias, earlier: Set(s.aliases.prefix { $0 != j.alias })) != nil {
                how = "HASH on the ON condition's value of \(j.alias), each row probing it"
            } else {
                how = "NESTED LOOP, the ON condition evaluated on every pair"
            }
            lines.append("\(j.kind.rawValue) JOIN \(j.source) AS \(j.alias): SCAN ALL DOCUMENTS; \(how)")
        }
        if s.whereClause != nil { lines.append("FILTER the joined rows by WHERE") }
        if s.isGrouped { lines.append("GROUP the joined rows") }
        if !s.orderBy.isEmpty { lines.append("SORT the joined rows") }
        return lines.joined(separator: "\n")
    }

    /// The join's rows, projected, sorted and cut.
    func runJoin() throws -> [Row] {
        let limit = try count(statement.limit, "LIMIT")
        let offset = try count(statement.offset, "OFFSET") ?? 0
        if statement.items.contains(where: { if case .expression(let e, _) = $0 { return e.containsMatch } ; return false })
            || statement.whereClause?.containsMatch == true {
            throw SetteeError(.invalidParameter, "query: MATCH() is not supported in a join")
        }
        guard database.core.isNamed(bySource: statement.source) else {
            throw SetteeError(.invalidParameter, "query: no data source named \(statement.source) (use _, _default._default, "
                              + "the database's name, or scope.collection of a collection it has)")
        }
        // Each joined source's collection (the first source is this executor's database).
        let sources: [DatabaseCore] = try statement.joins.map { j in
            let target = try database.queryTarget(j.source)
            guard target.core.isNamed(bySource: j.source) else {
                throw SetteeError(.invalidParameter, "query: no data source named \(j.source) to join (use scope.collection of a collection the database has)")
            }
            try target.checkOpen()
            return target.core
        }
        let core = database.core
        let statement = self.statement
        return try core.read(snapshot: { tx in try join(tx, core, sources, statement, offset: offset, limit: limit) },
                             batch: { tx in try join(tx, core, sources, statement, offset: offset, limit: limit) })
    }

    private func join(_ tx: some StoreReading, _ first: DatabaseCore, _ sources: [DatabaseCore], _ s: SelectStatement,
                      offset: Int, limit: Int?) throws -> [Row] {
        var rows = try Self.documents(tx, first, keys: Self.keysRead(s, alias: s.alias)).map { Self.combine(nil, s.alias, $0) }
        var earlier: Set<String> = [s.alias]
        for (j, source) in zip(s.joins, sources) {
            let documents = try Self.documents(tx, source, keys: Self.keysRead(s, alias: j.alias))
            var next: [QueryRow] = []
            if j.kind == .cross {
                // Every pair: its count is known before any is made.
                let (pairs, overflow) = rows.count.multipliedReportingOverflow(by: documents.count)
                try Self.checkRows(overflow ? Int.max : pairs)
                for row in rows { for d in documents { next.append(Self.combine(row, j.alias, d)) } }
            } else if let on = j.on, let keys = Self.equiJoinKeys(on, alias: j.alias, earlier: earlier) {
                var table: [[UInt8]: [Int]] = [:]
                for (i, d) in documents.enumerated() {
                    // NULL and MISSING equal nothing.
                    guard let v = try keys.joined.evaluate(Self.combine(nil, j.alias, d), parameters: parameters, regexes: regexes),
                          v != .null else { continue }
                    table[try Self.key([v]), default: []].append(i)
                }
                for row in rows {
                    var matched = false
                    if let v = try keys.rows.evaluate(row, parameters: parameters, regexes: regexes), v != .null,
                       let hits = table[try Self.key([v])] {
                        for i in hits {
                            let combined = Self.combine(row, j.alias, documents[i])
                            if try on.evaluate(combined, parameters: parameters, regexes: regexes).isTrue {
                                try Self.checkRows(next.count + 1)
                                next.append(combined)
                                matched = true
                            }
                        }
                    }
                    if !matched && j.kind == .leftOuter { next.append(row) }
                }
            } else {
                for row in rows {
                    var matched = false
                    for d in documents {
                        let combined = Self.combine(row, j.alias, d)
                        if try j.on?.evaluate(combined, parameters: parameters, regexes: regexes).isTrue ?? true {
                            try Self.checkRows(next.count + 1)
                            next.append(combined)
                            matched = true
                        }
                    }
                    if !matched && j.kind == .leftOuter { next.append(row) }
                }
            }
            rows = next
            earlier.insert(j.alias)
        }
        if let w = s.whereClause {
            rows = try rows.filter { try w.evaluate($0, parameters: parameters, regexes: regexes).isTrue }
        }
        var groups: [GroupAccumulator.Group]?
        if s.isGrouped {
            var grouping = try GroupAccumulator(s, inOrder: false, parameters: parameters, regexes: regexes)
            for row in rows { try grouping.add(row, continuesLastGroup: false) }
            groups = try grouping.finish()
        }
        return try finish(rows, groups: groups, statement: s, sorted: false, offset: offset, limit: limit)
    }

    /// The top-level properties of source `alias` the statement reads; nil when it reads the
    /// whole document (`SELECT *`, `alias` itself): only those are parsed from each body.
    static func keysRead(_ s: SelectStatement, alias: String) -> Set<String>? {
        var expressions: [QueryExpression] = []
        for case .expression(let e, _) in s.items { expressions.append(e) }
        expressions += [s.whereClause, s.having].compactMap { $0 } + s.groupBy + s.orderBy.map(\.expression) + s.joins.compactMap(\.on)
        var keys = Set<String>()
        var whole = false
        for e in expressions {
            e.forEachPath { path in
                guard case .name(alias)? = path.components.first else { return }
                guard path.components.count > 1, case .name(let key) = path.components[1] else {
                    whole = true
                    return
                }
                keys.insert(key)
            }
        }
        return whole ? nil : keys
    }

    /// The most rows a join makes before `WHERE` (each join's): a join of two large collections
    /// without a selective `ON` (a `CROSS JOIN` of two of a million) would otherwise take the
    /// process's memory. Past it the query fails, and nothing else is held up.
    static let maxJoinedRows = 5_000_000

    private static func checkRows(_ count: Int) throws(SetteeError) {
        guard count <= maxJoinedRows else {
            throw SetteeError(.tooLarge, "query: the join makes more than \(maxJoinedRows) rows; give its ON a condition that matches fewer")
        }
    }

    /// The live documents of a collection, in ID order, with only `keys` of their properties
    /// (nil: all).
    private static func documents(_ tx: some StoreReading, _ core: DatabaseCore, keys: Set<String>?) throws -> [Source] {
        var out: [Source] = []
        try tx.forEach(in: core.trees.byID, from: nil, reverse: false) { k, v in
            if let found = try core.queryRow(tx, key: k, encodedMeta: v, keys: keys, admitting: nil, keysWhenMatched: nil) {
                out.append(Source(found.row))
            }
            return true
        }
        return out
    }

    /// One document of a source, with what a joined row holds of it, made once.
    struct Source {
        let row: QueryRow
        let value: JSONValue
        let meta: JSONValue

        init(_ row: QueryRow) {
            self.row = row
            value = .object(row.properties)
            var meta: [String: JSONValue] = ["id": .string(row.id), "sequence": .int(Int64(clamping: row.sequence)),
                                             "deleted": .bool(row.isDeleted), "revisionID": .string(row.revisionID)]
            if let e = row.expiration { meta["expiration"] = .int(Int64(clamping: Int64(e.timeIntervalSince1970 * 1000))) }
            self.meta = .object(meta)
        }
    }

    /// `row` (nil: none yet) with `document` added under `alias`, and its META() beside.
    private static func combine(_ row: QueryRow?, _ alias: String, _ document: Source) -> QueryRow {
        var combined = row ?? QueryRow(id: document.row.id, revisionID: document.row.revisionID, sequence: document.row.sequence,
                                       isDeleted: document.row.isDeleted, expiration: document.row.expiration, properties: [:])
        combined.properties[alias] = document.value
        combined.properties[SelectStatement.metaKey + alias] = document.meta
        return combined
    }

    /// For `ON a = b` (or `ON … AND a = b AND …`) where one side reads only the joined source
    /// `alias` and the other only `earlier` ones: the two sides, the joined source's first.
    static func equiJoinKeys(_ on: QueryExpression, alias: String, earlier: Set<String>) -> (joined: QueryExpression, rows: QueryExpression)? {
        switch on {
        case .and(let terms):
            for t in terms { if let k = equiJoinKeys(t, alias: alias, earlier: earlier) { return k } }
            return nil
        case .compare(.equal, let a, let b):
            let sa = a.aliasesRead, sb = b.aliasesRead
            if sa == [alias] && !sb.isEmpty && sb.isSubset(of: earlier) { return (a, b) }
            if sb == [alias] && !sa.isEmpty && sa.isSubset(of: earlier) { return (b, a) }
            return nil
        default:
            return nil
        }
    }
}

extension QueryExpression {
    /// The aliases a joined row's expression reads (the first name of each path, or of META's);
    /// a parameter or a constant reads none.
    var aliasesRead: Set<String> {
        var out = Set<String>()
        forEachPath { path in
            if case .name(let head)? = path.components.first {
                out.insert(head.hasPrefix(SelectStatement.metaKey) ? String(head.dropFirst(SelectStatement.metaKey.count)) : head)
            }
        }
        return out
    }

    /// Calls `body` with every property path the expression reads.
    func forEachPath(_ body: (PropertyPath) -> Void) {
        _ = contains { e in
            if case .property(let path) = e { body(path) }
            return false
        }
    }

    /// Whether the expression holds a `MATCH()`.
    var containsMatch: Bool { contains { if case .match = $0 { true } else { false } } }
}
