import Foundation

/// How a query reads its rows: every live document, a value index's ranges, a full-text
/// search, or (a view query) a map index's ranges.
///
/// The planner looks at the `WHERE` clause's conjuncts (the terms joined by `AND`): equality
/// with a constant or a parameter (`=`, `IN` of constants) on an index's leading expressions,
/// then a range (`<`, `<=`, `>`, `>=`, `BETWEEN`) on the next one. It prefers the index that
/// fixes the most leading expressions, then one that also gives `ORDER BY`'s order. Every
/// conjunct the ranges do not bound exactly (whatever a value's text) is still evaluated on
/// every row an index yields, so an index can only save work, never change an answer.
///
/// ```swift
/// let plan = QueryPlanner.plan(statement, indexes: ready)
/// print(plan.explanation(statement))
/// ```
///
/// - Note: A value type; safe to share between threads.
struct QueryPlan: Sendable {
    /// The index scan, or nil for a scan of every document.
    var scan: IndexScan?
    /// The full-text search of a query with `MATCH` (which no other plan answers).
    var fullText: FullTextScan?
    /// The rows of a map index, for a statement that reads one (a view query).
    var mapScan: MapScan?
    /// Whether rows come in `ORDER BY` order (no sort needed).
    var ordered = false
    /// Whether `LIMIT`/`OFFSET` can stop the scan early (rows need no grouping, DISTINCT or
    /// sort after it).
    var stopsEarly = false
    /// Whether rows come in `GROUP BY` order (an index scan whose order is the grouping's):
    /// each group is a run of rows, found without hashing every row's key.
    var groupsInOrder = false

    struct IndexScan: Sendable {
        var index: CompiledIndex
        /// Per leading expression, the values it must equal (one for `=`, several for `IN`).
        var equalities: [[QueryExpression]]
        /// A range on the expression after them.
        var lower: Bound?
        var upper: Bound?
        var hasRange: Bool { lower != nil || upper != nil || rangeOnly }
        /// A range with no bound given but implied (`IS VALUED` and the like): every value
        /// from NULL up (MISSING excluded).
        var rangeOnly = false
        /// Read the index backwards (a descending `ORDER BY`).
        var descending = false
        /// The statement rewritten to read the index's values (slots) instead of the document:
        /// set when the query needs nothing else (a covering query).
        var covering: SelectStatement?
        /// Every conjunct of `WHERE` is one the ranges express: a row the ranges yield meets it
        /// without evaluating it (when the equality values are exact keys; ``IndexScanner``
        /// checks that at run time).
        var impliesWhere = false
        /// When `WHERE` is not implied as a whole and the scan reads documents: the conjuncts
        /// a row must still be evaluated for, those the ranges bound exactly left out (a range
        /// on the range expression, its presence, the partial index's condition). Equalities
        /// stay: collation-equal text may differ. A row whose residual reads only `META()`
        /// is not parsed for `WHERE`.
        var residual: [QueryExpression]?
    }

    /// The documents of a full-text index that match a query, in the index's document
    /// order, each with its score.
    struct FullTextScan: Sendable {
        var index: CompiledIndex
        /// The query text: a constant or a parameter.
        var query: QueryExpression
    }

    struct Bound: Sendable, Hashable {
        var value: QueryExpression
        var inclusive: Bool
    }

    /// A map index's rows in the view query's ranges, and how they are read.
    struct MapScan: Sendable {
        var source: SelectStatement.MapSource
        var reading: MapReading
    }

    /// How a map scan reads what its query asks for.
    enum MapReading: Sendable, Hashable {
        /// Each row in the ranges, in order.
        case rows
        /// Every row counted as one group: the index's own count of its rows, no row read.
        case rowCount
        /// Rows counted by groups of this level (1 or 2) from the counts the index keeps of
        /// them: each group wholly inside the range read from its count, the groups at the
        /// range's two ends walked.
        case groupCounts(level: Int)
        /// Each row in the ranges walked, grouped by its stored collation key (values parsed
        /// only when read).
        case groupedRows
    }
}

enum QueryPlanner {
    /// The plan for `statement` (aliases resolved) given the ready indexes.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the statement's `MATCH` names no
    ///   ready full-text index.
    static func plan(_ statement: SelectStatement, indexes: [CompiledIndex]) throws(SetteeError) -> QueryPlan {
        if let source = statement.mapSource {
            var plan = QueryPlan(mapScan: .init(source: source, reading: mapReading(source)))
            plan.ordered = true
            plan.stopsEarly = source.grouping == nil
            return plan
        }
        let grouped = statement.isGrouped
        if let match = statement.fullTextMatch {
            guard let index = indexes.first(where: { $0.name == match.index && $0.analyzer != nil }) else {
                let kind = indexes.contains { $0.name == match.index } ? "\(match.index) is a value index, not a full-text index"
                                                                       : "no full-text index named \(match.index) is ready"
                throw SetteeError(.invalidParameter, "query: MATCH(\(match.index), …): \(kind)")
            }
            var plan = QueryPlan(fullText: .init(index: index, query: match.query))
            plan.ordered = statement.orderBy.isEmpty
            plan.stopsEarly = !grouped && !statement.distinct && plan.ordered
            return plan
        }
        let conjuncts = statement.whereClause.map(Self.conjuncts) ?? []
        var best: (score: Int, plan: QueryPlan)?
        for index in indexes where index.definition.kind == .value {
            guard let (scan, score) = match(index, conjuncts: conjuncts) else { continue }
            var plan = QueryPlan(scan: scan)
            var s = score
            if !grouped, let desc = orderedBy(statement.orderBy, scan: scan) {
                plan.ordered = true
                plan.scan?.descending = desc
                s += 1
            }
            if best.map({ s > $0.score }) ?? true { best = (s, plan) }
        }
        var plan = best?.plan ?? QueryPlan()
        if plan.scan == nil { plan.ordered = statement.orderBy.isEmpty }
        if grouped, !statement.groupBy.isEmpty, let scan = plan.scan,
           orderedBy(statement.groupBy.map { .init(expression: $0, descending: false) }, scan: scan) == false {
            plan.groupsInOrder = true
        }
        if let scan = plan.scan {
            plan.scan?.covering = covering(statement, index: scan.index)
            // A covering scan evaluates WHERE on the index's values: nothing to leave out.
            if plan.scan?.covering != nil { plan.scan?.residual = nil }
        }
        plan.stopsEarly = !grouped && !statement.distinct && (plan.ordered || statement.orderBy.isEmpty)
        return plan
    }

    /// The indexes a query may read: with channels (``Query/channels``), only those kept by
    /// channel, whose entries of other channels it never meets (a scan of the channels' own
    /// documents serves it otherwise); every ready index without.
    static func candidates(_ ready: [CompiledIndex], channels: Set<String>?, restriction: IndexRestriction = .any) -> [CompiledIndex] {
        var out = channels == nil ? ready : ready.filter { $0.definition.byChannel || $0.analyzer != nil }
        // A MATCH reads its full-text index whatever else is allowed: there is no other way.
        switch restriction {
        case .any: break
        case .none: out = out.filter { $0.analyzer != nil }
        case .only(let name): out = out.filter { $0.name == name || $0.analyzer != nil }
        }
        return out
    }

    /// Why a full-text search cannot be limited to channels: its ranking counts every
    /// document's words.
    static var fullTextWithChannels: SetteeError {
        SetteeError(.invalidParameter, "query: a full-text search (MATCH) cannot be limited to channels: its ranking reads every document")
    }

    /// The terms of a condition joined by AND.
    static func conjuncts(_ e: QueryExpression) -> [QueryExpression] {
        // An AND is flat (QueryExpression.all): its terms are the conjuncts.
        if case .and(let terms) = e { return terms }
        return [e]
    }

    /// Whether `e` is the same for every row: no property, no META(), no aggregate.
    static func isConstant(_ e: QueryExpression) -> Bool {
        !e.contains { x in
            switch x {
            case .property, .meta, .aggregate, .variable, .match, .rank: true
            default: false
            }
        }
    }

    /// How `index` serves the conjuncts, and how well (0: not at all).
    private static func match(_ index: CompiledIndex, conjuncts: [QueryExpression]) -> (QueryPlan.IndexScan, Int)? {
        // A partial index holds only the documents its condition is true for: the query must
        // ask for no others.
        if let condition = index.condition, !conjuncts.contains(condition) { return nil }
        var scan = QueryPlan.IndexScan(index: index, equalities: [])
        var ranges = 1
        for e in index.expressions {
            guard let values = equality(on: e, in: conjuncts) else { break }
            // A product of IN lists past a thousand ranges is read as a range of the first ones.
            guard ranges * values.count <= 1000 else { break }
            ranges *= values.count
            scan.equalities.append(values)
        }
        if scan.equalities.count < index.expressions.count {
            let e = index.expressions[scan.equalities.count]
            for c in conjuncts { narrow(&scan, on: e, by: c) }
        }
        if scan.equalities.isEmpty && !scan.hasRange { return nil }
        scan.impliesWhere = conjuncts.allSatisfy { implied($0, by: scan) }
        if !scan.impliesWhere { scan.residual = conjuncts.filter { !boundExactly($0, by: scan) } }
        return (scan, scan.equalities.count * 4 + (scan.hasRange ? 2 : 0))
    }

    /// Whether every row the scan's ranges yield meets the conjunct `c`, whatever its text:
    /// the partial index's condition, the range itself, or the presence of the range's
    /// expression (MISSING is in no range; NULL in none with a lower bound).
    private static func boundExactly(_ c: QueryExpression, by scan: QueryPlan.IndexScan) -> Bool {
        if c == scan.index.condition { return true }
        let exprs = scan.index.expressions
        guard scan.equalities.count < exprs.count, scan.lower != nil || scan.upper != nil else { return false }
        let e = exprs[scan.equalities.count]
        switch c {
        case .test(.isNotMissing, let x) where x == e: return true
        case .test(.isValued, let x) where x == e, .test(.isNotNull, let x) where x == e: return scan.lower != nil
        default: break
        }
        return isScanRange(c, scan)
    }

    /// Whether the scan's ranges alone guarantee the conjunct `c`.
    private static func implied(_ c: QueryExpression, by scan: QueryPlan.IndexScan) -> Bool {
        if c == scan.index.condition { return true }
        let exprs = scan.index.expressions
        for (i, values) in scan.equalities.enumerated() where equality(on: exprs[i], in: [c]) == values { return true }
        return isScanRange(c, scan)
    }

    /// Whether `c` is a range on the expression after the equalities that the scan's bounds
    /// hold exactly (a conjunct they were narrowed by).
    private static func isScanRange(_ c: QueryExpression, _ scan: QueryPlan.IndexScan) -> Bool {
        let exprs = scan.index.expressions
        guard scan.equalities.count < exprs.count, scan.lower != nil || scan.upper != nil else { return false }
        var probe = QueryPlan.IndexScan(index: scan.index, equalities: [])
        narrow(&probe, on: exprs[scan.equalities.count], by: c)
        guard !probe.rangeOnly, probe.lower != nil || probe.upper != nil else { return false }
        return (probe.lower == nil || probe.lower == scan.lower) && (probe.upper == nil || probe.upper == scan.upper)
    }

    /// The values a conjunct requires `e` to equal.
    private static func equality(on e: QueryExpression, in conjuncts: [QueryExpression]) -> [QueryExpression]? {
        for c in conjuncts {
            switch c {
            case .compare(.equal, let a, let b) where a == e && isConstant(b): return [b]
            case .compare(.equal, let a, let b) where b == e && isConstant(a): return [a]
            case .in(let a, let list) where a == e && !list.isEmpty && list.allSatisfy(isConstant): return list
            default: continue
            }
        }
        return nil
    }

    /// Tightens the scan's range on `e` by one conjunct, when it is a range on `e`.
    private static func narrow(_ scan: inout QueryPlan.IndexScan, on e: QueryExpression, by c: QueryExpression) {
        func lower(_ v: QueryExpression, _ inclusive: Bool) { if scan.lower == nil { scan.lower = .init(value: v, inclusive: inclusive) } }
        func upper(_ v: QueryExpression, _ inclusive: Bool) { if scan.upper == nil { scan.upper = .init(value: v, inclusive: inclusive) } }
        switch c {
        case .compare(let op, let a, let b) where a == e && isConstant(b):
            switch op {
            case .greater: lower(b, false)
            case .greaterOrEqual: lower(b, true)
            case .less: upper(b, false)
            case .lessOrEqual: upper(b, true)
            default: break
            }
        case .compare(let op, let a, let b) where b == e && isConstant(a):
            switch op {
            case .greater: upper(a, false)
            case .greaterOrEqual: upper(a, true)
            case .less: lower(a, false)
            case .lessOrEqual: lower(a, true)
            default: break
            }
        case .between(let x, let lo, let hi) where x == e && isConstant(lo) && isConstant(hi):
            lower(lo, true)
            upper(hi, true)
        case .test(.isValued, let x) where x == e, .test(.isNotMissing, let x) where x == e,
             .test(.isNotNull, let x) where x == e:
            // Every document with a value: the whole range of values (NULL included; the
            // condition itself, evaluated per row, drops what it must).
            scan.rangeOnly = true
        default:
            break
        }
    }

    /// Whether the scan yields rows in `orderBy`'s order, and then in which direction.
    private static func orderedBy(_ orderBy: [SelectStatement.Ordering], scan: QueryPlan.IndexScan) -> Bool? {
        guard let first = orderBy.first else { return nil }
        let desc = first.descending
        guard orderBy.allSatisfy({ $0.descending == desc }) else { return nil }
        var terms = orderBy.map(\.expression)[...]
        let exprs = scan.index.expressions
        var j = 0
        while j < exprs.count, !terms.isEmpty {
            if j < scan.equalities.count {
                let fixed = scan.equalities[j].count == 1
                if terms.first == exprs[j] {
                    terms.removeFirst()
                    // Several values are read range by range, in order: ordered only if the
                    // ORDER BY ends here.
                    if !fixed && !terms.isEmpty { return nil }
                } else if !fixed {
                    return nil
                }
                j += 1
                continue
            }
            // The range's expression, or later ones (in a range every value may occur, so
            // later expressions are ordered only within equal values).
            guard terms.first == exprs[j] else { return nil }
            terms.removeFirst()
            j += 1
        }
        // Past every expression entries are in the byte order of their document IDs, which is
        // not the order `ORDER BY META().id` sorts them in (the collation's, as any string:
        // "a" < "B" < "é" < "ß"): a term on META().id left over needs a sort.
        return terms.isEmpty ? desc : nil
    }

    /// How a view query's rows are best read: counted from the counts the index keeps when
    /// only counts are asked for in one range (groups may run across ranges), else walked.
    static func mapReading(_ source: SelectStatement.MapSource) -> QueryPlan.MapReading {
        guard let grouping = source.grouping else { return .rows }
        if !source.readingValues, source.ranges.count == 1 {
            switch grouping {
            case .all where source.ranges[0] == MapIndexRange(): return .rowCount
            case .all: return .groupCounts(level: 1)
            case .level(let n) where MapIndexStore.summaryLevels.contains(n): return .groupCounts(level: n)
            default: break
            }
        }
        return .groupedRows
    }

    /// The statement rewritten to read the index's values, when it reads nothing else.
    private static func covering(_ s: SelectStatement, index: CompiledIndex) -> SelectStatement? {
        // A META() other than the ID, which no index holds as such, reads the document: known
        // before the statement is rewritten (a `_find`, which reads `_rev`, is never covered).
        func metaBeyondID(_ e: QueryExpression) -> Bool {
            e.contains { x in if case .meta(let m) = x { m != .id } else { false } }
        }
        if !(index.expressions + index.coveringExpressions).contains(where: metaBeyondID) {
            for item in s.items {
                guard case .expression(let e, _) = item else { return nil }
                if metaBeyondID(e) { return nil }
            }
        }
        // Slots number the entry's values: the indexed expressions', then the covering ones'.
        let slots = Dictionary((index.expressions + index.coveringExpressions).enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        func rewrite(_ e: QueryExpression) -> QueryExpression { e.replacing { slots[$0].map(QueryExpression.slot) } }
        var r = s
        for (i, item) in r.items.enumerated() {
            guard case .expression(let e, let name) = item else { return nil }
            r.items[i] = .expression(rewrite(e), name: name)
        }
        r.whereClause = r.whereClause.map(rewrite)
        r.groupBy = r.groupBy.map(rewrite)
        r.having = r.having.map(rewrite)
        r.orderBy = r.orderBy.map { .init(expression: rewrite($0.expression), descending: $0.descending) }
        var all: [QueryExpression] = r.groupBy + r.orderBy.map(\.expression) + [r.whereClause, r.having].compactMap { $0 }
        for case .expression(let e, _) in r.items { all.append(e) }
        let readsDocument = all.contains { e in
            e.contains { x in
                switch x {
                case .property(let p): !p.isSlot
                case .meta(let m): m != .id
                default: false
                }
            }
        }
        return readsDocument ? nil : r
    }
}

extension QueryExpression {
    /// A reference to the `n`th value of an index entry (a covering query's rows hold only
    /// those), as a property path no document path can spell.
    static func slot(_ n: Int) -> QueryExpression { .property(PropertyPath(slot: n)) }

    /// The expression with every subexpression `transform` gives a replacement for replaced
    /// (outermost first).
    func replacing(_ transform: (QueryExpression) -> QueryExpression?) -> QueryExpression {
        if let r = transform(self) { return r }
        func r(_ e: QueryExpression) -> QueryExpression { e.replacing(transform) }
        switch self {
        case .literal, .missing, .property, .parameter, .meta: return self
        case .not(let e): return .not(r(e))
        case .negate(let e): return .negate(r(e))
        case .test(let t, let e): return .test(t, r(e))
        case .and(let terms): return .all(terms.map(r))
        case .or(let terms): return .any(terms.map(r))
        case .compare(let op, let a, let b): return .compare(op, r(a), r(b))
        case .arithmetic(let op, let a, let b): return .arithmetic(op, r(a), r(b))
        case .like(let a, let b): return .like(r(a), r(b))
        case .between(let e, let a, let b): return .between(r(e), r(a), r(b))
        case .in(let e, let list): return .in(r(e), list.map(r))
        case .function(let f, let args): return .function(f, args.map(r))
        case .aggregate(let a, let e): return .aggregate(a, e.map(r))
        case .quantified(let q, let v, let array, let condition): return .quantified(q, variable: v, in: r(array), satisfies: r(condition))
        case .variable, .rank: return self
        case .match(let index, let query): return .match(index: index, query: r(query))
        }
    }
}

extension PropertyPath {
    /// The path of a covering query's slot: a name starting with a NUL, which no parsed path
    /// holds.
    init(slot n: Int) { self.init(components: [.name("\u{0}\(n)")], slot: n) }

    var isSlot: Bool { slot != nil }
}

extension SelectStatement {
    /// Whether rows are grouped (GROUP BY, HAVING, or aggregates in the select list).
    var isGrouped: Bool {
        !groupBy.isEmpty || having != nil || items.contains { item in
            if case .expression(let e, _) = item { return e.containsAggregate } else { return false }
        }
    }
}

extension QueryPlan {
    /// The statement a run of this plan executes for `s`: the covering rewrite, or `s` with
    /// `WHERE` cut to the scan's residual conjuncts, or `s` itself.
    func executed(_ s: SelectStatement) -> SelectStatement {
        if let covering = scan?.covering { return covering }
        guard let residual = scan?.residual else { return s }
        var cut = s
        cut.whereClause = residual.isEmpty ? nil : residual.count == 1 ? residual[0] : .all(residual)
        return cut
    }

    /// What ``Query/explain()`` prints: the data read, the ranges, what is evaluated per row,
    /// and what happens after.
    func explanation(_ s: SelectStatement) -> String {
        var lines: [String] = []
        if let mapScan {
            let source = mapScan.source
            lines.append("SCAN MAP INDEX \(source.index)\(source.descending ? " BACKWARDS" : "")")
            func text(_ v: JSONValue) -> String { (try? v.jsonBytes()).map { String(decoding: $0, as: UTF8.self) } ?? "?" }
            for r in source.ranges {
                let start = r.startKey.map { "\(text($0))\(r.startDocumentID.map { " (from document \($0))" } ?? "")" } ?? "the first key"
                let end = r.endKey.map { "\(text($0))\(r.endDocumentID.map { " (to document \($0))" } ?? "")" } ?? "the last key"
                lines.append("  RANGE \(start) TO \(end)\(r.inclusiveEnd ? "" : ", without the end")")
            }
            let grouping: String = switch source.grouping {
            case nil: ""
            case .all?: "(one group)"
            case .exact?: "BY key"
            case .level(let n)?: "BY the key's first \(n) elements"
            }
            switch mapScan.reading {
            case .rows: lines.append("ROWS in key order: the scan stops once enough rows are found")
            case .rowCount: lines.append("COUNT every row: the index's count, no row read")
            case .groupCounts(let level):
                lines.append("GROUP \(grouping): counted from the index's counts of its level-\(level) groups, the groups at the range's ends walked")
            case .groupedRows:
                lines.append("GROUP \(grouping): rows walked, grouped by their stored keys\(source.readingValues ? ", values parsed" : "")")
            }
            return lines.joined(separator: "\n")
        }
        if let fullText {
            var line = "SEARCH FULL-TEXT INDEX \(fullText.index.name) (\(fullText.index.expressions.map(\.sqlText).joined(separator: ", ")))"
            if let language = fullText.index.definition.text?.language { line += " LANGUAGE \(language)" }
            if fullText.index.definition.text?.ignoreAccents == true { line += " IGNORING ACCENTS" }
            lines.append(line)
            lines.append("  FOR \(fullText.query.sqlText)")
            lines.append("  FETCH each matching document, with its rank")
        } else if let scan {
            let names = scan.index.expressions.map(\.sqlText).joined(separator: ", ")
            let kept = scan.index.coveringExpressions.isEmpty ? ""
                : " KEEPING (\(scan.index.coveringExpressions.map(\.sqlText).joined(separator: ", ")))"
            lines.append("SCAN INDEX \(scan.index.name) (\(names))\(kept)\(scan.descending ? " BACKWARDS" : "")")
            var parts: [String] = []
            for (i, values) in scan.equalities.enumerated() {
                let e = scan.index.expressions[i].sqlText
                parts.append(values.count == 1 ? "\(e) = \(values[0].sqlText)" : "\(e) IN [\(values.map(\.sqlText).joined(separator: ", "))]")
            }
            if scan.hasRange {
                let e = scan.index.expressions[scan.equalities.count].sqlText
                var r: [String] = []
                if let lo = scan.lower { r.append("\(e) \(lo.inclusive ? ">=" : ">") \(lo.value.sqlText)") }
                if let hi = scan.upper { r.append("\(e) \(hi.inclusive ? "<=" : "<") \(hi.value.sqlText)") }
                parts.append(r.isEmpty ? "\(e) IS NOT MISSING" : r.joined(separator: " AND "))
            }
            lines.append("  RANGE \(parts.joined(separator: " AND "))")
            lines.append(scan.covering != nil ? "  COVERING: rows from the index's values, no document read"
                                              : "  FETCH each document the range names")
        } else {
            lines.append("SCAN ALL DOCUMENTS")
        }
        if let w = (scan?.covering == nil ? executed(s) : s).whereClause { lines.append("  FILTER \(w.sqlText)") }
        if s.isGrouped {
            lines.append("GROUP\(s.groupBy.isEmpty ? " (one group)" : " BY " + s.groupBy.map(\.sqlText).joined(separator: ", "))"
                         + (groupsInOrder ? ": in index order, groups are runs of rows" : ""))
            if let h = s.having { lines.append("  HAVING \(h.sqlText)") }
        }
        if s.distinct { lines.append("DISTINCT") }
        if !s.orderBy.isEmpty {
            let terms = s.orderBy.map { "\($0.expression.sqlText)\($0.descending ? " DESC" : "")" }.joined(separator: ", ")
            lines.append(ordered ? "ORDER BY \(terms): in index order, no sort" : "SORT BY \(terms)")
        }
        if s.limit != nil || s.offset != nil {
            let cut = [s.offset.map { "OFFSET \($0.sqlText)" }, s.limit.map { "LIMIT \($0.sqlText)" }].compactMap { $0 }.joined(separator: " ")
            lines.append(stopsEarly ? "\(cut): the scan stops once enough rows are found" : cut)
        }
        return lines.joined(separator: "\n")
    }
}

extension QueryExpression {
    /// A name as SQL++ text: as it is when it reads as an identifier, else in backticks.
    static func identifierText(_ n: String) -> String {
        let plain = n.first.map { $0.isLetter || $0 == "_" } == true && n.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
        return plain ? n : "`" + n.replacingOccurrences(of: "`", with: "``") + "`"
    }

    /// The expression as SQL++ text (for ``Query/explain()``): parseable, fully parenthesized.
    var sqlText: String {
        switch self {
        case .literal(let v):
            if case .string(let s) = v { return "'" + s.replacingOccurrences(of: "'", with: "''") + "'" }
            var out: [UInt8] = []
            JSONWriter.writeForDescription(v, into: &out)
            return String(decoding: out, as: UTF8.self)
        case .missing: return "MISSING"
        case .property(let p):
            if p.isSlot, case .name(let n) = p.components[0] { return "index value \(n.dropFirst())" }
            return p.components.enumerated().map { i, c -> String in
                switch c {
                case .name(let n): return (i > 0 ? "." : "") + Self.identifierText(n)
                case .index(let n): return "[\(n)]"
                case .nameOrIndex(let n, let at): return (i > 0 ? "." : "") + "(\(Self.identifierText(n)) or [\(at)])"
                }
            }.joined()
        case .parameter(let n): return "$" + n
        case .meta(let m): return "META().\(m.rawValue)"
        case .not(let e): return "(NOT \(e.sqlText))"
        case .and(let terms): return "(" + terms.map(\.sqlText).joined(separator: " AND ") + ")"
        case .or(let terms): return "(" + terms.map(\.sqlText).joined(separator: " OR ") + ")"
        case .compare(let op, let a, let b): return "(\(a.sqlText) \(op.rawValue) \(b.sqlText))"
        case .arithmetic(let op, let a, let b): return "(\(a.sqlText) \(op.rawValue) \(b.sqlText))"
        case .negate(let e): return "(-\(e.sqlText))"
        case .test(let t, let e): return "(\(e.sqlText) \(t.rawValue))"
        case .between(let e, let a, let b): return "(\(e.sqlText) BETWEEN \(a.sqlText) AND \(b.sqlText))"
        case .in(let e, let list): return "(\(e.sqlText) IN [\(list.map(\.sqlText).joined(separator: ", "))])"
        case .like(let a, let b): return "(\(a.sqlText) LIKE \(b.sqlText))"
        case .function(let f, let args): return "\(f.rawValue)(\(args.map(\.sqlText).joined(separator: ", ")))"
        case .aggregate(let a, let e): return "\(a.rawValue)(\(e?.sqlText ?? "*"))"
        case .quantified(let q, let v, let array, let condition):
            return "(\(q.rawValue) \(v) IN \(array.sqlText) SATISFIES \(condition.sqlText) END)"
        case .match(let index, let query): return "MATCH(\(Self.identifierText(index)), \(query.sqlText))"
        case .rank(let index): return "RANK(\(Self.identifierText(index)))"
        case .variable(let v, let path): return path.components.isEmpty ? v : "\(v)" + (path.description.hasPrefix("[") ? "" : ".") + path.description
        }
    }
}

extension SelectStatement {
    /// The statement's `MATCH`: the index it searches and the query text's expression.
    var fullTextMatch: (index: String, query: QueryExpression)? {
        for c in whereClause.map(QueryPlanner.conjuncts) ?? [] {
            if case .match(let index, let query) = c { return (index, query) }
        }
        return nil
    }

    /// Checks where `MATCH` and `RANK` are, as Couchbase Lite does: one `MATCH` at most, in
    /// `WHERE` at its top level or in an `AND` there (a document outside the index cannot be
    /// found by a search, so `NOT MATCH` and `MATCH … OR` have no plan), its query text a
    /// constant or a parameter; `RANK` only of the index `MATCH` searches.
    func checkFullText() throws(SetteeError) {
        var all: [QueryExpression] = groupBy + orderBy.map(\.expression) + [whereClause, having, limit, offset].compactMap { $0 }
        for case .expression(let e, _) in items { all.append(e) }
        var matches: [(String, QueryExpression)] = []
        var ranks: [String] = []
        func visit(_ e: QueryExpression) {
            switch e {
            case .match(let index, let query): matches.append((index, query))
            case .rank(let index): ranks.append(index)
            default: break
            }
            e.children.forEach(visit)
        }
        all.forEach(visit)
        guard !matches.isEmpty || !ranks.isEmpty else { return }
        let top = whereClause.map(QueryPlanner.conjuncts) ?? []
        let topMatches = top.filter { if case .match = $0 { true } else { false } }
        if matches.count > 1 {
            throw SetteeError(.invalidParameter, "query: one MATCH() per query")
        }
        if matches.count > topMatches.count {
            throw SetteeError(.invalidParameter, "query: MATCH() may only be in WHERE, at its top level or in an AND there (not inside OR, NOT or another expression)")
        }
        if let (index, query) = matches.first {
            guard QueryPlanner.isConstant(query) else {
                throw SetteeError(.invalidParameter, "query: the search of MATCH(\(index), …) is a string or a parameter, not a document's value")
            }
        }
        for r in ranks where r != matches.first?.0 {
            throw SetteeError(.invalidParameter, "query: RANK(\(r)) needs MATCH(\(r), …) in WHERE")
        }
    }
}
