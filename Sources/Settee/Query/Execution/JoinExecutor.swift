import Foundation
internal import SetteeStorage

/// How a join's statement is run: every source read from one snapshot (the collections of a
/// database share its store), the first source's live documents as the first rows (those that
/// fail a `WHERE` condition on them alone left out before any pairing), then each join in order,
/// reading its source the cheapest way its `ON` allows (``JoinAccess``):
///
/// - `ON META(j).id = expr`: each row reads the one document its value names;
/// - `ON j.path = expr` where the joined collection has a value index led by `path`: each
///   distinct value of the rows probes the index (covering when the statement reads nothing of
///   `j` but the index's values and `META(j).id`: no document is read);
/// - any other equality between the joined source and earlier ones: a hash join, the joined
///   source's documents hashed once by their side's value;
/// - anything else, and `CROSS JOIN`: every row paired with every document.
///
/// Each pair an equality found is checked with `=` (an index range or a hash groups more than
/// `=` does: collation-equal text), and the rest of the `ON` is evaluated on it. An inner
/// join's documents that fail a `WHERE` condition on them alone are left out before pairing.
/// The last join's rows are not kept: each goes through `WHERE` to the groups (or the result)
/// as it is made. `WHERE`, grouping, ordering and the select list run on the joined rows as on
/// one source's.
///
/// A joined row holds each source's properties under its alias, and its `META()` under
/// ``SelectStatement/metaKey``.
extension QueryExecutor {
    /// How one join reads its source.
    enum JoinAccess {
        /// Every document, each paired with every row the `ON` is then evaluated for.
        case scan
        /// Every document, hashed by its value of the equality's joined side; each row looks up
        /// its value of the other.
        case hash(EquiJoin)
        /// `ON META(j).id = rows`: each row reads the document its value names.
        case byID(EquiJoin)
        /// `ON j.path = rows` with `index` led by `path`: each distinct value probes the index.
        /// `covering`: the index's values the statement reads (a property path's names and its
        /// slot), when that is all it reads of `j` beside `META(j).id`; nil to read documents.
        case index(CompiledIndex, EquiJoin, covering: [(names: [String], slot: Int)]?)
    }

    /// An `ON` that holds an equality between the joined source and earlier ones: its sides,
    /// and the rest of the `ON` (nil: nothing else), evaluated on the pairs the equality makes.
    struct EquiJoin {
        /// The side that reads the joined source alone.
        var joined: QueryExpression
        /// The side that reads earlier sources alone.
        var rows: QueryExpression
        var residual: QueryExpression?
    }

    /// Each join's access, given the indexes ready in `tx` (none when `useIndexes` is off).
    static func joinAccesses(_ s: SelectStatement, _ sources: [DatabaseCore], _ tx: some StoreReading,
                             useIndexes: Bool, restriction: IndexRestriction) throws -> [JoinAccess] {
        var earlier: Set<String> = [s.alias]
        var out: [JoinAccess] = []
        for (j, source) in zip(s.joins, sources) {
            defer { earlier.insert(j.alias) }
            guard j.kind != .cross, let on = j.on, let keys = equiJoinKeys(on, alias: j.alias, earlier: earlier) else {
                out.append(.scan)
                continue
            }
            guard case .property(let path) = keys.joined, path.slot == nil, path.components.count > 1,
                  case .name(let head) = path.components[0] else {
                out.append(.hash(keys))
                continue
            }
            if head == SelectStatement.metaKey + j.alias, path.components == [.name(head), .name(QueryExpression.MetaProperty.id.rawValue)] {
                out.append(.byID(keys))
                continue
            }
            let inDocument = QueryExpression.property(PropertyPath(components: Array(path.components.dropFirst())))
            let ready = useIndexes ? QueryPlanner.candidates(try source.readyIndexes(tx), channels: nil, restriction: restriction) : []
            // A partial index lacks the documents its condition is false for.
            if head == j.alias,
               let index = ready.first(where: { $0.definition.kind == .value && $0.condition == nil && $0.expressions.first == inDocument }) {
                out.append(.index(index, keys, covering: coveringPaths(s, alias: j.alias, index: index)))
            } else {
                out.append(.hash(keys))
            }
        }
        return out
    }

    /// The index values the statement reads of source `alias`, when it reads nothing else of
    /// it but `META(alias).id`: each path it reads starts with the property path of one of the
    /// index's values. Those paths, shortest first, none under another; nil otherwise.
    static func coveringPaths(_ s: SelectStatement, alias: String, index: CompiledIndex) -> [(names: [String], slot: Int)]? {
        var indexed: [(names: [String], slot: Int)] = []
        for (slot, e) in (index.expressions + index.coveringExpressions).enumerated() {
            guard case .property(let p) = e, p.slot == nil else { continue }
            var names: [String] = []
            for c in p.components { if case .name(let n) = c { names.append(n) } else { break } }
            if names.count == p.components.count, !names.isEmpty { indexed.append((names, slot)) }
        }
        var used: [(names: [String], slot: Int)] = []
        var covered = true
        let meta = SelectStatement.metaKey + alias
        for e in statementExpressions(s) {
            e.forEachPath { path in
                guard covered, case .name(let head)? = path.components.first else { return }
                let rest = path.components.dropFirst()
                if head == meta {
                    if Array(rest) != [.name(QueryExpression.MetaProperty.id.rawValue)] { covered = false }
                    return
                }
                guard head == alias else { return }
                guard let found = indexed.first(where: { i in
                    i.names.count <= rest.count && zip(i.names, rest).allSatisfy { n, c in c == .name(n) }
                }) else {
                    covered = false
                    return
                }
                if !used.contains(where: { $0.slot == found.slot }) { used.append(found) }
            }
        }
        guard covered else { return nil }
        used.sort { $0.names.count < $1.names.count }
        var out: [(names: [String], slot: Int)] = []
        for u in used where !out.contains(where: { o in u.names.starts(with: o.names) }) { out.append(u) }
        return out
    }

    /// The plan of a join, as ``Query/explain()`` shows it.
    static func joinExplanation(_ s: SelectStatement, database: Database, restriction: IndexRestriction) throws -> String {
        let sources = try joinedSources(s, database)
        let accesses = try database.core.read { tx in try joinAccesses(s, sources, tx, useIndexes: true, restriction: restriction) }
        let pushed = pushedConditions(s)
        var lines = ["SCAN ALL DOCUMENTS OF \(s.source) AS \(s.alias)"]
        if pushed[s.alias] != nil { lines.append("  FILTER by the WHERE conditions on \(s.alias) alone") }
        for (number, (j, access)) in zip(s.joins, accesses).enumerated() {
            let head = "\(j.kind.rawValue) JOIN \(j.source) AS \(j.alias): "
            switch access {
            case .scan where j.kind == .cross:
                lines.append(head + "SCAN ALL DOCUMENTS; every pair")
            case .scan:
                lines.append(head + "SCAN ALL DOCUMENTS; NESTED LOOP, the ON condition evaluated on every pair")
            case .hash:
                lines.append(head + "SCAN ALL DOCUMENTS; HASH on the ON condition's value of \(j.alias), each row probing it")
            case .byID:
                lines.append(head + "READ BY ID, each row reading the document the ON condition names")
            case .index(let index, let equi, let covering):
                let exprs = index.expressions.map(\.sqlText).joined(separator: ", ")
                lines.append(head + "SCAN INDEX \(index.name) (\(exprs)), each distinct value of the rows probing it")
                let filtered = j.kind == .inner && pushed[j.alias] != nil
                if pairsCounted(covering: covering != nil, sourceRead: readsSourceAfterPairing(s, join: number, condition: equi.residual),
                                condition: equi.residual, filtered: filtered) {
                    lines.append("  COUNTING: each row stands for as many rows as entries equal its value, no entry kept")
                } else if covering != nil {
                    lines.append("  COVERING: \(j.alias) from the index's values, no document read")
                }
            }
            if j.kind == .inner, pushed[j.alias] != nil { lines.append("  FILTER \(j.alias) by the WHERE conditions on it alone") }
        }
        if s.whereClause != nil { lines.append("FILTER the joined rows by WHERE") }
        if s.isGrouped { lines.append("GROUP the joined rows") }
        if !s.orderBy.isEmpty { lines.append("SORT the joined rows") }
        return lines.joined(separator: "\n")
    }

    /// The first index a join reads (``Query/indexUsed()``), nil when it reads none.
    static func joinIndexUsed(_ s: SelectStatement, database: Database, restriction: IndexRestriction) throws -> String? {
        let sources = try joinedSources(s, database)
        let accesses = try database.core.read { tx in try joinAccesses(s, sources, tx, useIndexes: true, restriction: restriction) }
        for case .index(let index, _, _) in accesses { return index.name }
        return nil
    }

    /// Each joined source's collection (the first source is `database` itself).
    private static func joinedSources(_ s: SelectStatement, _ database: Database) throws -> [DatabaseCore] {
        guard database.core.isNamed(bySource: s.source) else {
            throw SetteeError(.invalidParameter, "query: no data source named \(s.source) (use _, _default._default, "
                              + "the database's name, or scope.collection of a collection it has)")
        }
        return try s.joins.map { j in
            let target = try database.queryTarget(j.source)
            guard target.core.isNamed(bySource: j.source) else {
                throw SetteeError(.invalidParameter, "query: no data source named \(j.source) to join (use scope.collection of a collection the database has)")
            }
            try target.checkOpen()
            return target.core
        }
    }

    /// The conjuncts of `WHERE` that read one source alone (or none), by that source's alias:
    /// they can be decided on its documents before any pairing. Those reading no source go
    /// with the first.
    static func pushedConditions(_ s: SelectStatement) -> [String: [QueryExpression]] {
        guard let w = s.whereClause else { return [:] }
        var out: [String: [QueryExpression]] = [:]
        for c in QueryPlanner.conjuncts(w) {
            let read = c.aliasesRead
            if read.isEmpty { out[s.alias, default: []].append(c) } else if read.count == 1, let a = read.first { out[a, default: []].append(c) }
        }
        return out
    }

    /// The join's rows, projected, sorted and cut.
    func runJoin() throws -> [Row] {
        let limit = try count(statement.limit, "LIMIT")
        let offset = try count(statement.offset, "OFFSET") ?? 0
        if statement.items.contains(where: { if case .expression(let e, _) = $0 { return e.containsMatch } ; return false })
            || statement.whereClause?.containsMatch == true {
            throw SetteeError(.invalidParameter, "query: MATCH() is not supported in a join")
        }
        if channels != nil {
            throw SetteeError(.invalidParameter, "query: a join cannot be limited to channels; query each collection with its channels instead")
        }
        let sources = try Self.joinedSources(statement, database)
        let core = database.core
        let statement = self.statement
        return try core.read(snapshot: { tx in try join(tx, core, sources, statement, offset: offset, limit: limit) },
                             batch: { tx in try join(tx, core, sources, statement, offset: offset, limit: limit) })
    }

    private func join(_ tx: some StoreReading, _ first: DatabaseCore, _ sources: [DatabaseCore], _ s: SelectStatement,
                      offset: Int, limit: Int?) throws -> [Row] {
        let accesses = try Self.joinAccesses(s, sources, tx, useIndexes: useIndexes, restriction: restriction)
        let pushed = Self.pushedConditions(s)
        let metas = Set(s.aliases.filter { Self.readsMeta(s, alias: $0) })
        func admits(_ alias: String, _ d: Source) throws -> Bool {
            guard let conditions = pushed[alias] else { return true }
            let row = Self.combine(nil, alias, d, meta: true)
            for c in conditions where !(try c.evaluate(row, parameters: parameters, regexes: regexes).isTrue) { return false }
            return true
        }
        let firstReading = Reading(keys: Self.keysRead(s, alias: s.alias), expiration: Self.readsExpiration(s, alias: s.alias),
                                   properties: true, meta: metas.contains(s.alias))
        var rows = try documents(tx, first, firstReading).filter { try admits(s.alias, $0) }
            .map { Self.combine(nil, s.alias, $0, meta: firstReading.meta) }
        // The last join's rows are not kept: each goes through WHERE to the groups (or the
        // kept rows) as it is made, in a row mutated in place.
        var kept: [QueryRow] = []
        var grouping = s.isGrouped ? try GroupAccumulator(s, inOrder: false, parameters: parameters, regexes: regexes) : nil
        let lastAlias = s.joins.last?.alias
        // A grouping that reads none of the last join's source gives all of one left row's
        // rows the same group: it is found once per left row.
        let groupedByLeft = s.groupBy.allSatisfy { lastAlias.map($0.aliasesRead.contains) == false }
        var made = 0
        for (number, ((j, source), access)) in zip(zip(s.joins, sources), accesses).enumerated() {
            let isLast = number == s.joins.count - 1
            // An inner join's documents failing a condition on them alone make no row.
            let filtered = j.kind == .inner && pushed[j.alias] != nil
            let keys = Self.keysRead(s, alias: j.alias)
            let expiration = Self.readsExpiration(s, alias: j.alias)
            let metaKey = SelectStatement.metaKey + j.alias
            let withMeta = metas.contains(j.alias)
            // What is evaluated on each pair beyond the equality that made it (all of the ON
            // without one), and whether anything reads the joined source's values after it.
            let equi: EquiJoin?
            switch access {
            case .scan: equi = nil
            case .hash(let e), .byID(let e), .index(_, let e, _): equi = e
            }
            let condition = equi.map(\.residual) ?? j.on
            let sourceRead = Self.readsSourceAfterPairing(s, join: number, condition: condition)
            var next: [QueryRow] = []
            /// Takes `row` as `times` rows (identical pairs, of a source nothing reads).
            func emit(_ row: QueryRow, group: inout Int?, times: Int = 1) throws {
                let (total, overflow) = made.addingReportingOverflow(times)
                try Self.checkRows(overflow ? Int.max : total)
                made = total
                guard isLast else {
                    for _ in 0 ..< times { next.append(row) }
                    return
                }
                if let w = s.whereClause, !(try w.evaluate(row, parameters: parameters, regexes: regexes).isTrue) { return }
                guard var groups = grouping else {
                    for _ in 0 ..< times { kept.append(row) }
                    return
                }
                // Moved out and back so the accumulator is not copied.
                grouping = nil
                defer { grouping = groups }
                if !groupedByLeft { group = nil }
                let index = try group ?? groups.groupIndex(of: row)
                group = index
                try groups.add(row, toGroup: index, times: times)
            }
            /// Pairs `row` with each candidate the ON holds for; `probe`: the row's value of the
            /// equality, which each candidate's ``Source/joinValue`` must equal (nil: no equality
            /// to check, the candidates meet it).
            func pair(_ row: QueryRow, _ candidates: some Sequence<Source>, equalTo probe: JSONValue? = nil) throws {
                var matched = false
                var group: Int?
                var scratch = row
                for d in candidates {
                    if let probe, try QueryExpression.compare(.equal, d.joinValue, probe) != .bool(true) { continue }
                    if sourceRead {
                        scratch.properties[j.alias] = d.value
                        if withMeta { scratch.properties[metaKey] = d.meta }
                    }
                    if try condition?.evaluate(scratch, parameters: parameters, regexes: regexes).isTrue ?? true {
                        try emit(scratch, group: &group)
                        matched = true
                    }
                }
                if !matched && j.kind == .leftOuter { try emit(row, group: &group) }
            }
            func joinValue(_ e: QueryExpression, _ d: Source) throws -> JSONValue? {
                try e.evaluate(Self.combine(nil, j.alias, d, meta: true), parameters: parameters, regexes: regexes)
            }
            let reading = Reading(keys: keys, expiration: expiration, properties: sourceRead, meta: withMeta)
            switch access {
            case .scan where j.kind == .cross:
                let documents = try documents(tx, source, reading).filter { try !filtered || admits(j.alias, $0) }
                // Every pair: its count is known before any is made.
                let (pairs, overflow) = rows.count.multipliedReportingOverflow(by: documents.count)
                try Self.checkRows(overflow || made > Self.maxJoinedRows - pairs ? Int.max : made + pairs)
                for row in rows { try pair(row, documents) }
            case .scan:
                let documents = try documents(tx, source, reading).filter { try !filtered || admits(j.alias, $0) }
                for row in rows { try pair(row, documents) }
            case .hash(let equi):
                let documents = try documents(tx, source, reading, joined: (equi.joined, j.alias)).filter { try !filtered || admits(j.alias, $0) }
                var table: [[UInt8]: [Int]] = [:]
                for (i, d) in documents.enumerated() {
                    // NULL and MISSING equal nothing.
                    guard let v = d.joinValue, v != .null else { continue }
                    table[try Self.key([v]), default: []].append(i)
                }
                for row in rows {
                    guard let v = try value(equi.rows, row), let hits = table[try Self.key([v])] else {
                        try pair(row, [])
                        continue
                    }
                    try pair(row, hits.lazy.map { documents[$0] }, equalTo: v)
                }
            case .byID(let equi):
                // The document read is the one whose ID is the row's value: the equality holds.
                var found: [String: Source?] = [:]
                for row in rows {
                    guard case .string(let id)? = try value(equi.rows, row) else {
                        try pair(row, [])
                        continue
                    }
                    let d: Source?
                    if let known = found[id] {
                        d = known
                    } else {
                        d = try Self.document(tx, source, id: id, reading).flatMap { try !filtered || admits(j.alias, $0) ? $0 : nil }
                        found[id] = .some(d)
                    }
                    try pair(row, d.map { [$0] } ?? [])
                }
            case .index(let index, let equi, let covering):
                // Each distinct value's documents, read once: at most the collection's documents
                // in all (a value index has one entry per document). When nothing but the
                // equality is asked of them, only how many there are.
                let counting = Self.pairsCounted(covering: covering != nil, sourceRead: sourceRead, condition: condition, filtered: filtered)
                var probed: [[UInt8]: [Source]] = [:]
                var counted: [[UInt8]: Int] = [:]
                for row in rows {
                    guard let v = try value(equi.rows, row) else {
                        try pair(row, [])
                        continue
                    }
                    let k = try Self.key([v])
                    if counting {
                        let n = try counted[k] ?? Self.matches(tx, source, index, v)
                        counted[k] = n
                        var group: Int?
                        if n > 0 { try emit(row, group: &group, times: n) } else if j.kind == .leftOuter { try emit(row, group: &group) }
                        continue
                    }
                    let candidates: [Source]
                    if let known = probed[k] {
                        candidates = known
                    } else {
                        var found: [Source] = []
                        var scanner = IndexScanner(core: source, tx: tx, scan: QueryPlan.IndexScan(index: index, equalities: [[.literal(v)]]),
                                                   parameters: [:], fetch: covering == nil, expiration: expiration)
                        scanner.documentKeys = keys
                        scanner.idsNeeded = sourceRead || covering == nil
                        try scanner.run { r, _, _ in
                            var d: Source
                            if let covering {
                                // The entry's first value is the joined side's (the index is led by it).
                                d = sourceRead ? Source(id: r.id, covering: covering, values: r.slots, meta: withMeta) : Source(id: r.id, joinValue: nil)
                                d.joinValue = r.slots.first ?? nil
                            } else {
                                d = Source(r, properties: true, meta: true)
                                d.joinValue = try joinValue(equi.joined, d)
                                if !sourceRead || !withMeta { d = Source(r, properties: sourceRead, meta: withMeta, joinValue: d.joinValue) }
                            }
                            if try !filtered || admits(j.alias, d) { found.append(d) }
                            return true
                        }
                        probed[k] = found
                        candidates = found
                    }
                    try pair(row, candidates, equalTo: v)
                }
            }
            rows = next
        }
        var groups: [GroupAccumulator.Group]?
        if let grouping { groups = grouping.finish() }
        return try finish(kept, groups: groups, statement: s, sorted: false, offset: offset, limit: limit)
    }

    /// Whether anything after the pairing of join `number` reads its source: the rest of its
    /// `ON` (`condition`) or any other expression of the statement.
    static func readsSourceAfterPairing(_ s: SelectStatement, join number: Int, condition: QueryExpression?) -> Bool {
        let alias = s.joins[number].alias
        return condition?.aliasesRead.contains(alias) == true
            || statementExpressions(s, leavingOut: number).contains { $0.aliasesRead.contains(alias) }
    }

    /// Whether an index join's pairs of one row are only counted: the index covers the join,
    /// nothing reads the source after the pairing, the equality is the whole `ON`, and no
    /// `WHERE` condition is decided on the source's documents alone. Each row then stands for
    /// as many identical rows as the index holds entries equal to its value.
    static func pairsCounted(covering: Bool, sourceRead: Bool, condition: QueryExpression?, filtered: Bool) -> Bool {
        covering && !sourceRead && condition == nil && !filtered
    }

    /// How many entries of `index` (led by the join's property) hold a value `=` to `value`:
    /// counted by the engine where the value's key is exact, else entry by entry, those whose
    /// stored value differs from it in bytes compared with `=`.
    private static func matches(_ tx: some StoreReading, _ core: DatabaseCore, _ index: CompiledIndex, _ value: JSONValue) throws -> Int {
        var scan = QueryPlan.IndexScan(index: index, equalities: [[.literal(value)]])
        scan.impliesWhere = true
        var scanner = IndexScanner(core: core, tx: tx, scan: scan, parameters: [:], fetch: false, expiration: false)
        scanner.rowsNeeded = false
        scanner.idsNeeded = false
        // Text, arrays and objects share keys with values `=` tells apart: their entries are read.
        switch value {
        case .string, .array, .object: break
        default: if let n = try scanner.countWithoutRows() { return n }
        }
        var n = 0
        try scanner.run { r, meets, _ in
            if try meets || QueryExpression.compare(.equal, r.slots.first ?? nil, value) == .bool(true) { n += 1 }
            return true
        }
        return n
    }

    /// A row's value of a join key; nil for MISSING and NULL, which equal nothing.
    private func value(_ e: QueryExpression, _ row: QueryRow) throws -> JSONValue? {
        guard let v = try e.evaluate(row, parameters: parameters, regexes: regexes), v != .null else { return nil }
        return v
    }

    /// Every expression of the statement (select list, WHERE, HAVING, grouping, ordering, each
    /// join's ON but the one numbered `join`).
    static func statementExpressions(_ s: SelectStatement, leavingOut join: Int? = nil) -> [QueryExpression] {
        var expressions: [QueryExpression] = []
        for case .expression(let e, _) in s.items { expressions.append(e) }
        expressions += [s.whereClause, s.having].compactMap { $0 } + s.groupBy + s.orderBy.map(\.expression)
        for (i, j) in s.joins.enumerated() where i != join { if let on = j.on { expressions.append(on) } }
        return expressions
    }

    /// Whether the statement reads `META(alias)` at all.
    static func readsMeta(_ s: SelectStatement, alias: String) -> Bool {
        let meta = SelectStatement.metaKey + alias
        return statementExpressions(s).contains { e in
            e.contains { x in
                guard case .property(let p) = x, case .name(let head)? = p.components.first else { return false }
                return head == meta
            }
        }
    }

    /// Whether the statement reads `META(alias).expiration`, which is read apart from the document.
    static func readsExpiration(_ s: SelectStatement, alias: String) -> Bool {
        let meta = SelectStatement.metaKey + alias
        return statementExpressions(s).contains { e in
            e.contains { x in
                guard case .property(let p) = x, case .name(let head)? = p.components.first, head == meta else { return false }
                return p.components.count < 2 || p.components[1] == .name(QueryExpression.MetaProperty.expiration.rawValue)
            }
        }
    }

    /// The top-level properties of source `alias` the statement reads; nil when it reads the
    /// whole document (`SELECT *`, `alias` itself): only those are parsed from each body.
    static func keysRead(_ s: SelectStatement, alias: String) -> Set<String>? {
        let expressions = statementExpressions(s)
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

    /// What a join reads of one source's documents, and keeps.
    struct Reading {
        /// The properties parsed from each body (nil: all).
        var keys: Set<String>?
        /// Whether `META().expiration` is read.
        var expiration: Bool
        /// Whether a joined row holds the properties (something after the pairing reads them).
        var properties: Bool
        /// Whether a joined row holds the `META()`.
        var meta: Bool
    }

    /// The live documents of a collection, in ID order, as `reading` says; with their value of
    /// `joined.expression`, a join's side that reads the source `joined.alias` alone, when given.
    private func documents(_ tx: some StoreReading, _ core: DatabaseCore, _ reading: Reading,
                           joined: (expression: QueryExpression, alias: String)? = nil) throws -> [Source] {
        // The side is evaluated on each document's own row, its paths read without the alias.
        let own = joined.flatMap { Self.unqualified($0.expression, alias: $0.alias) }
        var out: [Source] = []
        try tx.forEach(in: core.trees.byID, from: nil, reverse: false) { k, v in
            guard var found = try core.queryRow(tx, key: k, encodedMeta: v, keys: reading.keys, admitting: nil, keysWhenMatched: nil)?.row else {
                return true
            }
            if reading.expiration { found.expiration = try core.expiration(tx, key: k) }
            var value: JSONValue?
            if let own {
                value = try own.evaluate(found, parameters: parameters, regexes: regexes)
            } else if let joined {
                value = try joined.expression.evaluate(Self.combine(nil, joined.alias, Source(found, properties: true, meta: true), meta: true),
                                                       parameters: parameters, regexes: regexes)
            }
            out.append(Source(found, properties: reading.properties, meta: reading.meta, joinValue: value))
            return true
        }
        return out
    }

    /// The live document `id` of a collection, read as ``documents(_:_:_:joined:)`` reads each;
    /// nil when it has none.
    private static func document(_ tx: some StoreReading, _ core: DatabaseCore, id: String, _ reading: Reading) throws -> Source? {
        let key = Array(id.utf8)
        guard let meta = try core.meta(tx, id: key), !meta.flags.contains(.deleted) else { return nil }
        var row = try core.queryRow(tx, id: id, meta: meta, keys: reading.keys)
        if reading.expiration { row.expiration = try key.withUnsafeBytes { try core.expiration(tx, key: $0) } }
        return Source(row, properties: reading.properties, meta: reading.meta)
    }

    /// `e`, which reads the source `alias` alone, as an expression of that source's own rows
    /// (`alias.a.b` as `a.b`, `META(alias).id` as `META().id`); nil when it reads the source
    /// some other way (`META(alias)` whole).
    static func unqualified(_ e: QueryExpression, alias: String) -> QueryExpression? {
        let meta = SelectStatement.metaKey + alias
        var whole = true
        let out = e.replacing { x in
            guard case .property(let p) = x, p.slot == nil, case .name(let head)? = p.components.first else { return nil }
            if head == alias { return .property(PropertyPath(components: Array(p.components.dropFirst()))) }
            if head == meta {
                if p.components.count == 2, case .name(let f) = p.components[1], let m = QueryExpression.MetaProperty(rawValue: f) {
                    return .meta(m)
                }
                whole = false
            }
            return nil
        }
        return whole ? out : nil
    }

    /// One document of a source, with what a joined row holds of it, made once.
    /// Small, as pairing copies it once per pair: what a joined row holds, no more.
    struct Source {
        let id: String
        /// Its properties, as one object (`.null` when nothing reads them).
        let value: JSONValue
        /// Its `META()`, as one object (`.null` when nothing reads it).
        let meta: JSONValue
        /// Its value of the ON's equality (hash and index joins).
        var joinValue: JSONValue?

        /// A document of which only its value of the ON's equality is read.
        init(id: String, joinValue: JSONValue?) {
            self.id = id
            value = .null
            meta = .null
            self.joinValue = joinValue
        }

        /// A document read from an index entry: its `values` at the `covering` paths, and its
        /// ID (all the statement reads of it).
        init(id: String, covering: [(names: [String], slot: Int)], values: [JSONValue?], meta: Bool) {
            var object: [String: JSONValue] = [:]
            for c in covering where c.slot < values.count {
                if let v = values[c.slot] { Self.set(v, at: c.names[...], in: &object) }
            }
            self.id = id
            value = .object(object)
            self.meta = meta ? .object([QueryExpression.MetaProperty.id.rawValue: .string(id)]) : .null
        }

        private static func set(_ v: JSONValue, at path: ArraySlice<String>, in object: inout [String: JSONValue]) {
            guard let head = path.first else { return }
            if path.count == 1 {
                object[head] = v
                return
            }
            var inner: [String: JSONValue] = [:]
            if case .object(let o)? = object[head] { inner = o }
            set(v, at: path.dropFirst(), in: &inner)
            object[head] = .object(inner)
        }

        /// A document read whole: its `properties` and `meta` when asked (`.null` otherwise).
        init(_ row: QueryRow, properties: Bool, meta: Bool, joinValue: JSONValue? = nil) {
            id = row.id
            value = properties ? .object(row.properties) : .null
            if meta {
                var m: [String: JSONValue] = ["id": .string(row.id), "sequence": .int(Int64(clamping: row.sequence)),
                                              "deleted": .bool(row.isDeleted), "revisionID": .string(row.revisionID)]
                if let e = row.expiration { m["expiration"] = .int(Int64(clamping: Int64(e.timeIntervalSince1970 * 1000))) }
                self.meta = .object(m)
            } else {
                self.meta = .null
            }
            self.joinValue = joinValue
        }
    }

    /// `row` (nil: none yet) with `document` added under `alias`, and its META() beside.
    /// (`meta`: whether the statement reads the source's META() at all.)
    private static func combine(_ row: QueryRow?, _ alias: String, _ document: Source, meta: Bool) -> QueryRow {
        // A joined row's own ID and metadata are never read: each source's are under its alias.
        var combined = row ?? QueryRow(id: document.id, revisionID: "", sequence: 0, isDeleted: false, expiration: nil, properties: [:])
        combined.properties[alias] = document.value
        if meta { combined.properties[SelectStatement.metaKey + alias] = document.meta }
        return combined
    }

    /// For `ON a = b` (or `ON … AND a = b AND …`) where one side reads only the joined source
    /// `alias` and the other only `earlier` ones: the two sides, the joined source's first, and
    /// the `ON`'s other terms.
    static func equiJoinKeys(_ on: QueryExpression, alias: String, earlier: Set<String>) -> EquiJoin? {
        func sides(_ e: QueryExpression) -> (QueryExpression, QueryExpression)? {
            guard case .compare(.equal, let a, let b) = e else { return nil }
            let sa = a.aliasesRead, sb = b.aliasesRead
            if sa == [alias] && !sb.isEmpty && sb.isSubset(of: earlier) { return (a, b) }
            if sb == [alias] && !sa.isEmpty && sa.isSubset(of: earlier) { return (b, a) }
            return nil
        }
        if case .and(let terms) = on {
            for (i, t) in terms.enumerated() {
                guard let (joined, rows) = sides(t) else { continue }
                var rest = terms
                rest.remove(at: i)
                return EquiJoin(joined: joined, rows: rows, residual: rest.count == 1 ? rest[0] : .and(rest))
            }
            return nil
        }
        return sides(on).map { EquiJoin(joined: $0.0, rows: $0.1, residual: nil) }
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
