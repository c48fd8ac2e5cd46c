import Foundation
import Synchronization
internal import SetteeStorage

/// Runs a ``SelectStatement`` over a database by reading every live document (a full scan:
/// the plan every query has when no index serves it, and the reference the index plans are
/// checked against).
///
/// Rows are filtered by `WHERE`, grouped by `GROUP BY` (or into one group when the select list
/// holds only aggregates), filtered by `HAVING`, made distinct, sorted by `ORDER BY` in the
/// collation's order (MISSING before NULL before every value; ties in the order the rows were read: document ID order for a full scan, the index's for an index scan),
/// then cut by `OFFSET` and `LIMIT`.
///
/// ```swift
/// let rows = try QueryExecutor(database: db, statement: try SQLParser.parse(text), parameters: [:]).run()
/// ```
///
/// - Note: Not thread-safe itself; run one executor from one thread at a time (the database it
///   reads is thread-safe).
struct QueryExecutor {
    let database: Database
    let statement: SelectStatement
    let parameters: [String: JSONValue]
    /// Whether a plan may read indexes (tests turn it off to compare with full scans).
    var useIndexes = true
    /// Patterns compiled once per execution, not once per document.
    let regexes = RegexCache()
    /// The plan of an earlier run, kept by the ``Query`` while its ready indexes stay the same.
    var plans: PlanCache?
    /// ``Query/channels``: only documents currently routed to one of these (nil: all).
    var channels: Set<String>?
    /// ``Query/indexRestriction``: the indexes the plan may read.
    var restriction = IndexRestriction.any
    /// Where the run's counts of what it read go when it ends (``Query/statisticsOfLastRun``).
    var statistics: StatisticsRecord?
    /// Whether each row of a statement whose first column is `META().id` carries its
    /// document's stored JSON, read from the run's snapshot (the sync server sends documents
    /// as stored, without reading each one again).
    var storedBodies = false

    /// One result row: a value (or MISSING) per column of the select list.
    struct Row: Sendable, Equatable {
        var values: [JSONValue?]
        /// Where the row's document body is stored (0: not read from a document).
        var bodyRef: UInt64 = 0
        /// The document's stored JSON, from the run's snapshot, when ``storedBodies`` asks.
        var body: [UInt8]? = nil

        /// Rows are equal when their values are: a live query tells its listeners only of
        /// results that differ, not of a document saved again with the same selected values.
        static func == (a: Row, b: Row) -> Bool { a.values == b.values }
    }

    /// The names of the result's columns, in select-list order.
    var columnNames: [String] { statement.columnNames }

    /// The rows of the result.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a parameter not given, an aggregate
    ///   where there is no group, a LIMIT or OFFSET that is not a non-negative integer; a
    ///   document's own error when its stored body cannot be read (never a shorter result).
    func run() throws -> [Row] { try runCollecting(emit: nil, collecting: false).rows }

    /// The rows, and the IDs of the documents that matched `WHERE` on the way (every match for
    /// a full read; those read before LIMIT stopped the scan otherwise), which live queries
    /// check commits against.
    func runCollecting() throws -> (rows: [Row], matched: [String]) { try runCollecting(emit: nil, collecting: true) }

    /// Hands each row to `emit` (until it returns false) as it is found when the plan needs
    /// no grouping, DISTINCT or sort after the scan; otherwise once they are all known.
    func stream(_ emit: @escaping (Row) throws -> Bool) throws { _ = try runCollecting(emit: emit, collecting: false) }

    private func runCollecting(emit: ((Row) throws -> Bool)?, collecting: Bool) throws -> (rows: [Row], matched: [String]) {
        if !statement.joins.isEmpty {
            let rows = try runJoin()
            if let emit { for r in rows where !(try emit(r)) { break } ; return ([], []) }
            return (rows, [])
        }
        guard database.core.isNamed(bySource: statement.source) else {
            throw SetteeError(.invalidParameter, "query: no data source named \(statement.source) (use _, _default._default, "
                              + "the database's name, or scope.collection of a collection it has)")
        }
        let limit = try count(statement.limit, "LIMIT")
        let offset = try count(statement.offset, "OFFSET") ?? 0
        let grouped = statement.isGrouped
        if !grouped, let having = statement.having, having.containsAggregate {
            throw SetteeError(.invalidParameter, "query: HAVING needs GROUP BY")
        }
        // The plan and the rows from one snapshot: an index the plan chose is whole in it.
        return try database.core.read(snapshot: { tx in try run(tx, grouped: grouped, offset: offset, limit: limit, emit: emit, collecting: collecting) },
                                      batch: { tx in try run(tx, grouped: grouped, offset: offset, limit: limit, emit: emit, collecting: collecting) })
    }

    private func run(_ tx: some StoreReading, grouped: Bool, offset: Int, limit: Int?,
                     emit given: ((Row) throws -> Bool)?, collecting: Bool) throws -> (rows: [Row], matched: [String]) {
        let core = database.core
        let counts = ScanCounts()
        // Read as the run goes: a consumer that stops a streamed run early sees what it read.
        statistics?.start(counts)
        // Bodies are read in the run's snapshot, as its rows go out.
        let bodies = storedBodies && statement.items.first == .expression(.meta(.id), name: "_id") && !statement.isGrouped
        let emit: ((Row) throws -> Bool)? = bodies ? given.map { e in { row in try e(try withBody(row, tx)) } } : given
        do {
            // Without indexes (tests comparing plans) a MATCH still has its full-text index.
            let ready = QueryPlanner.candidates(try core.readyIndexes(tx), channels: channels, restriction: restriction)
            let prepared = try plans?.cached(ready, useIndexes: useIndexes) ?? { () throws -> PreparedPlan in
                let plan = try QueryPlanner.plan(statement, indexes: useIndexes ? ready : ready.filter { $0.analyzer != nil })
                let prepared = PreparedPlan(plan: plan, statement: plan.executed(statement))
                plans?.keep(prepared, for: ready, useIndexes: useIndexes)
                return prepared
            }()
            if channels != nil, prepared.plan.fullText != nil { throw QueryPlanner.fullTextWithChannels }
            let plan = prepared.plan
            let covering = plan.scan?.covering
            let s = prepared.statement
            let keys = prepared.documentKeys
            let wanted: Int? = plan.stopsEarly ? limit.map { $0 > Int.max - offset ? Int.max : offset + $0 } : nil
            let kept = Kept(grouping: grouped ? try GroupAccumulator(s, inOrder: plan.groupsInOrder, parameters: parameters, regexes: regexes) : nil)
            // Grouping in index order by index values alone: rows whose leading key values are
            // the last group's join it without their values being decoded for it.
            let runs = grouped && covering != nil && plan.groupsInOrder ? prepared.groupRuns.map {
                GroupRuns(components: $0.components, slotsWithinGroup: $0.slotsWithinGroup)
            } : nil
            let streaming = emit != nil && plan.stopsEarly
            // `SELECT count(*)` alone: rows are counted, not kept (unless a live query needs
            // their IDs); an index range that implies WHERE then yields no rows at all.
            let countOnly = !collecting && prepared.isCountOnly
            // With channels the rows come from them, never from the rest: an index kept by
            // channel yields only their entries (the planner was given no other index), a scan
            // reads the documents their logs list. WHERE runs on no other document, so neither its
            // errors nor its cost can tell anything about one.
            let byChannel = channels != nil && plan.scan?.index.definition.byChannel == true
            // A local function changing nothing but `kept` (a class): no local variable is
            // captured, so no access is checked at run time per row.
            func addPending() throws {
                guard let runs, runs.pending > 0 else { return }
                kept.found += runs.pending
                try kept.grouping!.addToLastGroup(rows: runs.pending)
                runs.pending = 0
            }
            let idPrefix = s.documentIDPrefix.map { Array($0.utf8) }
            func keep(_ row: QueryRow, _ implied: Bool, _ continuesGroup: Bool) throws -> Bool {
                try addPending()
                if let idPrefix, !row.id.utf8.starts(with: idPrefix) { return true }
                if !implied, let w = s.whereClause, !(try w.evaluate(row, parameters: parameters, regexes: regexes)).isTrue { return true }
                kept.found += 1
                if countOnly { return true }
                if streaming, let emit {
                    // Rows go out as they are found: nothing is kept.
                    if kept.found > offset, !(try emit(try project(row, s) { $0 })) { return false }
                } else if kept.grouping != nil {
                    // A group keeps its first row and running aggregates, not its rows.
                    try kept.grouping!.add(row, continuesLastGroup: continuesGroup)
                    runs?.accept()
                    if collecting { kept.matchedIDs.append(row.id) }
                } else {
                    kept.matches.append(row)
                }
                return wanted.map { kept.found < $0 } ?? true
            }
            if wanted != 0 {
                if let scan = plan.scan {
                    var scanner = IndexScanner(core: core, tx: tx, scan: scan, parameters: parameters,
                                               fetch: covering == nil, expiration: prepared.readsExpiration)
                    scanner.counts = counts
                    scanner.slotsBeyondWhere = prepared.slotsBeyondWhere
                    scanner.documentKeys = keys
                    scanner.documentKeysBeyondWhere = prepared.documentKeysBeyondWhere
                    // Where the ranges imply WHERE, documents are rarely evaluated: no prefilter is made.
                    if covering == nil && !scan.impliesWhere { scanner.prefilter = BodyPrefilter(s.whereClause, parameters: parameters) }
                    scanner.rowsNeeded = !countOnly
                    if byChannel { scanner.channels = channels }
                    scanner.groupRuns = runs
                    scanner.idsNeeded = covering == nil || collecting || prepared.readsID || idPrefix != nil
                    scanner.countsGroupRuns = runs?.slotsWithinGroup.isEmpty == true && !scanner.idsNeeded && wanted == nil
                    if countOnly, wanted == nil, idPrefix == nil, let n = try scanner.countWithoutRows() {
                        kept.found += n
                        counts.addKeys(n)
                    } else {
                        try scanner.run(keep)
                    }
                    try addPending()
                } else if let fullText = plan.fullText {
                    try fullTextScan(core: core, tx: tx, scan: fullText, keys: keys, expiration: prepared.readsExpiration, counts: counts) { try keep($0, false, false) }
                } else if let channels {
                    try channelScan(core: core, tx: tx, channels: channels, keys: keys, expiration: prepared.readsExpiration, counts: counts,
                                    prefilter: BodyPrefilter(s.whereClause, parameters: parameters),
                                    keysWhenMatched: prepared.documentKeysBeyondWhere) { try keep($0, $1, false) }
                } else {
                    try fullScan(core: core, tx: tx, idPrefix: idPrefix, keys: keys, expiration: prepared.readsExpiration, counts: counts,
                                 prefilter: BodyPrefilter(s.whereClause, parameters: parameters),
                                 keysWhenMatched: prepared.documentKeysBeyondWhere) { try keep($0, $1, false) }
                }
            }
            if streaming { return ([], []) }
            if countOnly {
                let row = Row(values: Array(repeating: .int(Int64(kept.found)), count: s.items.count))
                let rows = offset > 0 || limit == 0 ? [] : [row]
                if let emit { for r in rows where !(try emit(r)) { break } ; return ([], []) }
                return (rows, [])
            }
            var rows = try finish(kept.matches, groups: kept.grouping?.finish(), statement: s, sorted: plan.ordered, offset: offset, limit: limit)
            if bodies && emit == nil { rows = try rows.map { try withBody($0, tx) } }
            if let emit {
                for r in rows where !(try emit(r)) { break }
                return ([], [])
            }
            return (rows, kept.grouping == nil ? kept.matches.map(\.id) : kept.matchedIDs)
        }
    }

    /// Every live document, in document ID order. `prefilter` decides documents from their
    /// bodies' bytes before they are parsed: those it rejects are skipped, those it finds
    /// matching go to `body` with true (`WHERE` need not be evaluated) and hold only
    /// `keysWhenMatched`.
    /// With `idPrefix`, only the documents whose IDs begin with it: their range alone is read.
    private func fullScan(core: DatabaseCore, tx: some StoreReading, idPrefix: [UInt8]? = nil, keys: Set<String>?, expiration: Bool,
                          counts: ScanCounts, prefilter: BodyPrefilter?, keysWhenMatched: Set<String>?,
                          _ body: (QueryRow, Bool) throws -> Bool) throws {
        try tx.forEach(in: core.trees.byID, from: idPrefix, reverse: false) { k, v in
            if let idPrefix, !k.starts(with: idPrefix) { return false }
            // Every ID is a key read; every live document's body is looked at.
            counts.addKeys(1)
            if let flags = v.first, !DocFlags(rawValue: flags).contains(.deleted) { counts.addDocuments(1) }
            guard let found = try core.queryRow(tx, key: k, encodedMeta: v, keys: keys, admitting: prefilter,
                                                keysWhenMatched: keysWhenMatched) else { return true }
            var row = found.row
            if expiration { row.expiration = try core.expiration(tx, key: k) }
            return try body(row, found.matches)
        }
    }

    /// The live documents whose current revision is in at least one of `channels`, in document
    /// ID order (a full scan's): their IDs read from the channels' logs, then each document. It
    /// costs what the channels hold, not what the database holds. `prefilter` as a full scan's.
    private func channelScan(core: DatabaseCore, tx: some StoreReading, channels: Set<String>, keys: Set<String>?, expiration: Bool,
                             counts: ScanCounts, prefilter: BodyPrefilter?, keysWhenMatched: Set<String>?, _ body: (QueryRow, Bool) throws -> Bool) throws {
        var ids = Set<[UInt8]>()
        for channel in channels where !channel.isEmpty && !channel.utf8.contains(0) {
            let prefix = RoutingKey.channelPrefix(channel)
            try tx.forEach(in: core.trees.channels, from: prefix, reverse: false) { k, v in
                guard k.count == prefix.count + 8, k.starts(with: prefix) else { return false }
                // A member entry is the flags byte alone, at the document's current sequence; the
                // others record a document that left the channel.
                guard v.count == 1 else { return true }
                counts.addKeys(1)
                let seq = UInt64(bigEndian: k.loadUnaligned(fromByteOffset: prefix.count, as: UInt64.self))
                guard let entry = try tx.withValue(forKey: [UInt8](bigEndian: seq), in: core.trees.bySequence, { b in
                    try SequenceEntry(decoding: b)
                }) else {
                    throw SetteeError(.corrupted, "the log of channel \(channel) names sequence \(seq), which no document has")
                }
                if !entry.flags.contains(.deleted) { ids.insert(Array(entry.documentID.utf8)) }
                return true
            }
        }
        for key in ids.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            counts.addDocuments(1)
            let found = try key.withUnsafeBytes { k in
                try tx.withValue(forKey: k, in: core.trees.byID) { v in
                    try core.queryRow(tx, key: k, encodedMeta: v, keys: keys, admitting: prefilter, keysWhenMatched: keysWhenMatched)
                }
            }
            guard case let (row, matches)?? = found else { continue }
            var kept = row
            if expiration { kept.expiration = try key.withUnsafeBytes { try core.expiration(tx, key: $0) } }
            guard try body(kept, matches) else { return }
        }
    }

    /// The documents a full-text search matches, in the index's document order, each row
    /// with its score.
    private func fullTextScan(core: DatabaseCore, tx: some StoreReading, scan: QueryPlan.FullTextScan, keys: Set<String>?, expiration: Bool,
                              counts: ScanCounts, _ body: (QueryRow) throws -> Bool) throws {
        let name = scan.index.name
        let none = QueryRow.empty
        guard case .string(let text)? = try scan.query.evaluate(none, parameters: parameters) else {
            throw SetteeError(.invalidParameter, "query: the search of MATCH(\(name), …) must be a string")
        }
        guard let analyzer = scan.index.analyzer else { return }
        let query = try FullTextQuery(text, analyzer: analyzer)
        let postings = try StoredFullTextPostings(tx: tx, tree: scan.index.tree, name: name)
        let evaluator = try FullTextEvaluator(query: query, postings: postings)
        while let match = try evaluator.next() {
            let key = try postings.documentID(of: match.document)
            counts.addKeys(1)
            counts.addDocuments(1)
            let id = String(decoding: key, as: UTF8.self)
            guard let meta = try core.meta(tx, id: key), !meta.flags.contains(.deleted) else {
                throw SetteeError(.corrupted, "full-text index \(name) names document \(id), which is not in the database; check(repair: true) rebuilds the index")
            }
            var row = try core.queryRow(tx, id: id, meta: meta, keys: keys)
            row.fullTextScore = match.score
            if expiration { row.expiration = try key.withUnsafeBytes { try core.expiration(tx, key: $0) } }
            guard try body(row) else { return }
        }
    }

    /// Projects (each group, or each row when not grouped), makes distinct, sorts (unless the
    /// rows came sorted) and cuts.
    func finish(_ matches: [QueryRow], groups: [GroupAccumulator.Group]?, statement: SelectStatement, sorted: Bool,
                        offset: Int, limit: Int?) throws -> [Row] {
        // Each output row with the values it sorts by.
        var out: [(row: Row, sort: [JSONValue?])] = []
        let needsSort = !statement.orderBy.isEmpty && !sorted
        if let groups {
            for group in groups {
                let first = group.first
                func resolved(_ e: QueryExpression) -> QueryExpression { group.resolving(e) }
                if let having = statement.having, !(try resolved(having).evaluate(first, parameters: parameters, regexes: regexes)).isTrue { continue }
                let row = try project(first, statement) { resolved($0) }
                let sort = needsSort ? try statement.orderBy.map { try resolved($0.expression).evaluate(first, parameters: parameters, regexes: regexes) } : []
                out.append((row, sort))
            }
        } else {
            for m in matches {
                out.append((try project(m, statement) { $0 },
                            needsSort ? try statement.orderBy.map { try $0.expression.evaluate(m, parameters: parameters, regexes: regexes) } : []))
            }
        }
        if statement.distinct {
            var seen = Set<[UInt8]>()
            var kept: [(row: Row, sort: [JSONValue?])] = []
            for o in out where seen.insert(try Self.key(o.row.values)).inserted { kept.append(o) }
            out = kept
        }
        if needsSort {
            // Sort keys once, then compare bytes: a comparator that throws cannot drive `sort`.
            let keyed = try out.enumerated().map { (i, o) in (i, try Self.sortKey(o.sort, descending: statement.orderBy.map(\.descending))) }
            let order = keyed.sorted { a, b in a.1 == b.1 ? a.0 < b.0 : a.1.lexicographicallyPrecedes(b.1) }
            out = order.map { out[$0.0] }
        }
        let rows = out.dropFirst(min(offset, out.count)).map(\.row)
        return limit.map { Array(rows.prefix($0)) } ?? Array(rows)
    }

    /// The select list's values for one row (`*` is the document's properties).
    private func project(_ row: QueryRow, _ statement: SelectStatement, _ resolve: (QueryExpression) throws -> QueryExpression) throws -> Row {
        var values: [JSONValue?] = []
        for item in statement.items {
            switch item {
            case .all: values.append(.object(row.properties))
            case .expression(let e, _): values.append(try resolve(e).evaluate(row, parameters: parameters, regexes: regexes))
            }
        }
        return Row(values: values, bodyRef: row.bodyRef)
    }

    /// `row` with its document's stored JSON from `tx`: from where the scan read the body, or
    /// (a covering scan's row) from the document's metadata, found by the ID in the first
    /// column. Without a document (deleted since, or no ID), as it was.
    private func withBody(_ row: Row, _ tx: some StoreReading) throws -> Row {
        var out = row
        var ref = row.bodyRef
        if ref == 0 {
            guard case .string(let id)?? = row.values.first, let meta = try database.core.meta(tx, id: Array(id.utf8)),
                  !meta.flags.contains(.deleted) else { return row }
            ref = meta.bodyRef
        }
        guard ref != 0 else { return row }
        out.body = try tx.withValue(at: ValueRef(rawValue: ref)) { Array($0) }
        return out
    }

    /// Values with MISSING (below NULL) encoded in collation order, for grouping and DISTINCT.
    static func key(_ values: [JSONValue?]) throws(SetteeError) -> [UInt8] {
        try key(values[...])
    }

    /// ``key(_:)`` of some of the values (an index entry's key values, before its covering ones).
    static func key(_ values: ArraySlice<JSONValue?>) throws(SetteeError) -> [UInt8] {
        var out: [UInt8] = []
        // Most keys are short: one allocation instead of a few as they grow.
        out.reserveCapacity(64)
        for v in values {
            if let v {
                try JSONCollation.append(v, to: &out)
            } else {
                out.append(JSONCollation.Tag.end.rawValue)
            }
        }
        return out
    }

    /// A key whose byte order is the ORDER BY order: a descending column's bytes are inverted
    /// and closed by 0xFF, so that a shorter value still sorts after a longer one it prefixes.
    static func sortKey(_ values: [JSONValue?], descending: [Bool]) throws(SetteeError) -> [UInt8] {
        var out: [UInt8] = []
        for (v, desc) in zip(values, descending) {
            let column = try key([v])
            if desc {
                out.append(contentsOf: column.map { ~$0 })
                out.append(0xFF)
            } else {
                out.append(contentsOf: column)
            }
        }
        return out
    }

    /// LIMIT and OFFSET: constants or parameters holding a non-negative integer.
    func count(_ e: QueryExpression?, _ what: String) throws -> Int? {
        guard let e else { return nil }
        let empty = QueryRow.empty
        switch try e.evaluate(empty, parameters: parameters) {
        case .int(let n)? where n >= 0: return n > Int64(Int.max) ? Int.max : Int(n)
        case .double(let d)? where d >= 0 && d.rounded() == d: return d >= 9.2e18 ? Int.max : Int(d)
        default: throw SetteeError(.invalidParameter, "query: \(what) must be a non-negative integer")
        }
    }
}

extension SelectStatement {
    /// Whether the statement only counts rows: `SELECT count(*)` (one or more times), no
    /// grouping, `HAVING` or DISTINCT.
    var isCountOnly: Bool {
        groupBy.isEmpty && having == nil && !distinct && !items.isEmpty && items.allSatisfy { item in
            if case .expression(.aggregate(.count, nil), _) = item { true } else { false }
        }
    }

    /// The index values (slots) a covering statement reads anywhere but in `WHERE`: what a row
    /// the ranges imply `WHERE` for needs decoded.
    var slotsBeyondWhere: Set<Int> {
        var all: [QueryExpression] = groupBy + orderBy.map(\.expression) + [having].compactMap { $0 }
        for case .expression(let e, _) in items { all.append(e) }
        var slots = Set<Int>()
        for e in all { e.collectSlots(into: &slots) }
        return slots
    }

    /// The aggregates of the select list, `HAVING` and `ORDER BY`, each once.
    var aggregates: [QueryExpression] {
        var found: [QueryExpression] = []
        for case .expression(let e, _) in items { e.collectAggregates(into: &found) }
        having?.collectAggregates(into: &found)
        for o in orderBy { o.expression.collectAggregates(into: &found) }
        return found
    }

    /// Whether any expression of the statement reads `META().property`.
    func mentions(_ property: QueryExpression.MetaProperty) -> Bool {
        var all: [QueryExpression] = groupBy + orderBy.map(\.expression)
        for case .expression(let e, _) in items { all.append(e) }
        all += [whereClause, having].compactMap { $0 }
        return all.contains { $0.contains(where: { if case .meta(let m) = $0 { m == property } else { false } }) }
    }
}

extension QueryExpression {
    /// The direct subexpressions.
    var children: [QueryExpression] {
        switch self {
        case .literal, .missing, .property, .parameter, .meta, .variable, .rank: []
        case .match(_, let query): [query]
        case .not(let e), .negate(let e), .test(_, let e): [e]
        case .quantified(_, _, let array, let condition): [array, condition]
        case .and(let terms), .or(let terms): terms
        case .compare(_, let a, let b), .arithmetic(_, let a, let b), .like(let a, let b): [a, b]
        case .between(let e, let a, let b): [e, a, b]
        case .in(let e, let list): [e] + list
        case .function(_, let args): args
        case .aggregate(_, let e): e.map { [$0] } ?? []
        }
    }

    /// Whether `self` or a subexpression satisfies `test`.
    func contains(where test: (QueryExpression) -> Bool) -> Bool {
        test(self) || children.contains { $0.contains(where: test) }
    }

    /// Whether an aggregate appears anywhere in the expression.
    var containsAggregate: Bool { contains(where: { if case .aggregate = $0 { true } else { false } }) }

    /// The aggregates the expression holds (each once, outermost first).
    func collectAggregates(into list: inout [QueryExpression]) {
        _ = contains { e in
            if case .aggregate = e, !list.contains(e) { list.append(e) }
            return false
        }
    }

    /// Adds the index values (slots) the expression reads to `slots`.
    func collectSlots(into slots: inout Set<Int>) {
        _ = contains { e in
            if case .property(let p) = e, let slot = p.slot { slots.insert(slot) }
            return false
        }
    }
}

extension QueryExpression {
    /// Adds the names of the document's top-level properties the expression reads to `keys`;
    /// false when it reads the whole document (an empty path).
    func collectDocumentKeys(into keys: inout Set<String>) -> Bool {
        var whole = false
        _ = contains { e in
            guard case .property(let path) = e else { return false }
            switch path.components.first {
            case nil: whole = true
            case .name(let n)?, .nameOrIndex(let n, _)?: keys.insert(n)
            case .index?: break   // an index into an object: MISSING whatever the body holds
            }
            return whole
        }
        return !whole
    }

    /// The top-level properties a set of expressions reads, or nil for the whole document.
    static func documentKeys(_ expressions: [QueryExpression]) -> Set<String>? {
        var keys = Set<String>()
        for e in expressions where !e.collectDocumentKeys(into: &keys) { return nil }
        return keys
    }
}

extension SelectStatement {
    /// The top-level properties of a document the statement reads, or nil when it needs them
    /// all (`SELECT *`): a scan parses only these from each stored body.
    var documentKeys: Set<String>? {
        var all: [QueryExpression] = groupBy + orderBy.map(\.expression) + [whereClause, having].compactMap { $0 }
        for item in items {
            switch item {
            case .all: return nil
            case .expression(let e, _): all.append(e)
            }
        }
        return QueryExpression.documentKeys(all)
    }

    /// The top-level properties a row that meets `WHERE` without evaluating it still needs:
    /// those the select list, grouping and `HAVING` read, and `ORDER BY` unless the rows come
    /// sorted (`sorted`) and are not grouped.
    func documentKeysBeyondWhere(sorted: Bool) -> Set<String>? {
        var all: [QueryExpression] = groupBy + [having].compactMap { $0 }
        if !sorted || isGrouped { all += orderBy.map(\.expression) }
        for item in items {
            switch item {
            case .all: return nil
            case .expression(let e, _): all.append(e)
            }
        }
        return QueryExpression.documentKeys(all)
    }
}

/// A plan with what running it needs to know of the statement it runs (the covering form when
/// the index covers the query), worked out once.
struct PreparedPlan: Sendable {
    let plan: QueryPlan
    let statement: SelectStatement
    let documentKeys: Set<String>?
    /// Those of a row the index ranges imply `WHERE` for.
    let documentKeysBeyondWhere: Set<String>?
    let readsExpiration: Bool
    let slotsBeyondWhere: Set<Int>
    /// Whether the statement reads `META().id`.
    let readsID: Bool
    /// When every `GROUP BY` term is an index value: how many leading values of an entry's key
    /// decide its group, and the values the aggregates read.
    let groupRuns: (components: Int, slotsWithinGroup: Set<Int>)?
    let isCountOnly: Bool

    init(plan: QueryPlan, statement: SelectStatement) {
        self.plan = plan
        self.statement = statement
        documentKeys = statement.documentKeys
        documentKeysBeyondWhere = statement.documentKeysBeyondWhere(sorted: plan.ordered)
        readsExpiration = statement.mentions(.expiration)
        slotsBeyondWhere = statement.slotsBeyondWhere
        readsID = statement.mentions(.id)
        let groupSlots = statement.groupBy.map { e -> Int? in if case .property(let p) = e { p.slot } else { nil } }
        if !groupSlots.isEmpty, groupSlots.allSatisfy({ $0 != nil }) {
            var read = Set<Int>()
            for a in statement.aggregates { a.collectSlots(into: &read) }
            groupRuns = (groupSlots.compactMap { $0 }.max()! + 1, read)
        } else {
            groupRuns = nil
        }
        isCountOnly = statement.isCountOnly
    }
}

/// A query's last plan, reused while the snapshot's ready indexes are the ones it was made
/// for: planning costs more than reading the twenty rows of a typical indexed query.
///
/// ```swift
/// executor.plans = query.plans
/// ```
///
/// - Note: Thread-safe: a query run on several threads at once shares it.
final class PlanCache: Sendable {
    private struct Entry {
        let indexes: [(name: String, record: [UInt8], tree: Tree)]
        let useIndexes: Bool
        let prepared: PreparedPlan
    }

    private let entry = Mutex<Entry?>(nil)

    init() {}

    /// The kept plan, when it was made for these indexes (by name, catalog record and tree:
    /// the engine's trees are those of the store the database has open now).
    func cached(_ indexes: [CompiledIndex], useIndexes: Bool) -> PreparedPlan? {
        entry.withLock { e in
            guard let e, e.useIndexes == useIndexes, e.indexes.count == indexes.count,
                  zip(e.indexes, indexes).allSatisfy({ $0.name == $1.name && $0.record == $1.record && $0.tree == $1.tree }) else { return nil }
            return e.prepared
        }
    }

    /// The plan kept last, whatever indexes it was made for.
    var last: PreparedPlan? { entry.withLock { $0?.prepared } }

    func keep(_ prepared: PreparedPlan, for indexes: [CompiledIndex], useIndexes: Bool) {
        entry.withLock { $0 = Entry(indexes: indexes.map { ($0.name, $0.record, $0.tree) }, useIndexes: useIndexes, prepared: prepared) }
    }
}

/// The value and map indexes a query's plan may read (``Query/indexRestriction``); a
/// full-text search reads its index whatever this says.
///
/// ```swift
/// query.indexRestriction = .none   // every document is read
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Server) public enum IndexRestriction: Sendable, Equatable {
    /// Any index, as the planner chooses.
    case any
    /// None: the plan reads the documents (or, with channels, the channels' documents).
    case none
    /// The index of this name only, when it can serve the query; else none.
    case only(String)
}

/// What a run of a query read: the keys it stepped over (index entries, channel log entries,
/// document IDs of a full scan; those a count took whole without reading them too) and the
/// documents whose bodies it looked at. `_find`'s `execution_stats` are these.
///
/// ```swift
/// _ = try query.execute()
/// if let s = query.statisticsOfLastRun { print(s.keysExamined, s.documentsExamined) }
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Server) public struct QueryStatistics: Sendable, Equatable {
    /// Index entries, channel log entries or document IDs the run read or counted.
    public var keysExamined: Int
    /// Documents whose stored body the run read (to evaluate `WHERE`, or for its columns).
    public var documentsExamined: Int

    /// Counts of a run.
    ///
    /// ```swift
    /// let none = QueryStatistics(keysExamined: 0, documentsExamined: 0)
    /// ```
    public init(keysExamined: Int, documentsExamined: Int) {
        self.keysExamined = keysExamined
        self.documentsExamined = documentsExamined
    }
}

/// A run's counts as it reads. Only the run's thread adds (a relaxed load and store, no
/// locked instruction per entry); another thread may read them at any time.
///
/// ```swift
/// let counts = ScanCounts()
/// counts.addKeys(1)
/// ```
///
/// - Note: Thread-safe for one writer and any readers.
final class ScanCounts: Sendable {
    private let keys = Atomic<Int>(0)
    private let documents = Atomic<Int>(0)

    @inline(__always) func addKeys(_ n: Int) { keys.store(keys.load(ordering: .relaxed) &+ n, ordering: .relaxed) }
    @inline(__always) func addDocuments(_ n: Int) { documents.store(documents.load(ordering: .relaxed) &+ n, ordering: .relaxed) }

    var value: QueryStatistics {
        QueryStatistics(keysExamined: keys.load(ordering: .relaxed), documentsExamined: documents.load(ordering: .relaxed))
    }
}

/// The counts of a query's last run, kept by the ``Query``.
///
/// ```swift
/// executor.statistics = query.statistics
/// ```
///
/// - Note: Thread-safe: runs on other threads start theirs in it.
final class StatisticsRecord: Sendable {
    private let last = Mutex<ScanCounts?>(nil)

    func start(_ counts: ScanCounts) { last.withLock { $0 = counts } }

    var value: QueryStatistics? { last.withLock { $0 }?.value }
}

/// What one execution keeps as rows come: how many matched, the rows (or groups), and the IDs
/// live queries check commits against.
///
/// ```swift
/// let kept = Kept(grouping: nil)
/// kept.found += 1
/// ```
///
/// - Note: Not thread-safe: one execution's scan on one thread, which is why its properties
///   skip dynamic exclusivity checks (one per row each, otherwise).
private final class Kept {
    @exclusivity(unchecked) var found = 0
    @exclusivity(unchecked) var matches: [QueryRow] = []
    @exclusivity(unchecked) var matchedIDs: [String] = []
    @exclusivity(unchecked) var grouping: GroupAccumulator?

    init(grouping: GroupAccumulator?) { self.grouping = grouping }
}
