@_spi(Replication) @_spi(Server) import Settee

/// The index CouchDB 3.4 reads for a Mango query, chosen by its rules (`mango_idx`,
/// `mango_idx_view`, `mango_cursor`, `mango_cursor_view`), so that `_find` reads it and
/// `_explain` names it as CouchDB would:
///
/// 1. The selector is normalized (implicit `$and`s made explicit, nested fields joined by dots,
///    negations pushed down to the conditions).
/// 2. The candidates are the `json` indexes without a `partial_filter_selector`, those
///    `use_index` names, and the special `_all_docs`.
/// 3. A `json` index is usable when the selector requires every one of its fields (but the sort
///    fields, `_id` and `_rev`) and the sort is a prefix of its fields once fields the selector
///    holds equal are passed over; `_all_docs` when there is no sort, or a sort by `_id` on a
///    selector that ranges over `_id`.
/// 4. A usable `json` index is read before `_all_docs`: the one whose leading fields match the
///    most of the selector's ranged fields, then the one of fewest fields, then by ddoc and
///    name.
///
/// ```swift
/// let choice = try MangoIndexChoice(selector: selector, sort: ["n"], indexes: indexes, useIndex: nil, allowFallback: true)
/// print(choice.index?.name ?? "_all_docs")
/// ```
///
/// - Note: A value type.
struct MangoIndexChoice {
    /// The index read: nil for `_all_docs`.
    let index: MangoIndex?
    /// The candidates and why each was or was not usable, for `_explain`.
    let candidates: [Candidate]
    /// The selector's fields an index can range over, and the others (`selector_hints`).
    let indexableFields: [String]
    let unindexableFields: [String]

    /// One candidate index and CouchDB's verdict on it.
    struct Candidate {
        /// nil for `_all_docs`.
        var index: MangoIndex?
        var usable: Bool
        /// CouchDB's reasons: `field_mismatch`, `sort_order_mismatch`, `is_partial`,
        /// `less_overlap`, `too_many_fields`, `alphabetically_comes_after`, `unfavored_type`.
        var reasons: [String]
        var ranking: Int
        var covering: Bool?
    }

    /// A selector after CouchDB's normalization: combinations and single conditions on
    /// dotted field paths.
    indirect enum Node {
        case and([Node])
        case or([Node])
        case nor([Node])
        case not(Node)
        case condition(field: String, op: String, arg: JSONValue)
        case empty
    }

    /// The operators a `json` index can range over (`mango_idx_view:indexable/1`).
    static let rangeOperators: Set<String> = ["$lt", "$lte", "$eq", "$gt", "$gte", "$beginsWith", "$exists"]

    /// Chooses, or throws CouchDB's 400 when no index can serve the query (a sort none can
    /// serve, or a `use_index` that cannot be used with `allow_fallback: false`).
    /// `partitioned`: in a partitioned database, whether the query is a partition's (then only
    /// partitioned indexes are candidates) or not (then only global ones); nil elsewhere.
    init(selector: JSONValue, sort: [String], fields: [String]?, indexes given: [MangoIndex],
         useIndex: (ddoc: String, name: String?)?, allowFallback: Bool, partitioned: Bool? = nil) throws {
        let indexes = partitioned.map { p in given.filter { $0.partitioned == p } } ?? given
        let node = Self.normalized(selector)
        self.node = node
        let ranged = Self.indexableFields(node)
        indexableFields = ranged
        unindexableFields = Set(Self.fields(node)).subtracting(ranged).sorted()
        func named(_ m: MangoIndex?) -> Bool {
            guard let useIndex, let m else { return false }
            return m.ddoc == useIndex.ddoc && (useIndex.name == nil || m.name == useIndex.name)
        }
        func key(_ m: MangoIndex?) -> String { m?.libraryName ?? "" }
        // The candidates: `_all_docs`, json indexes without a partial selector, and those
        // use_index names (`get_usable_indexes`).
        let pool: [MangoIndex?] = [nil] + indexes.filter { $0.partial == nil || named($0) }
        var why: [String: [String]] = [:]
        var usable: [MangoIndex?] = []
        for m in pool {
            var reasons: [String] = []
            if let m {
                let columns = m.fields.map(\.field)
                let required = Set(columns).subtracting(sort).subtracting(["_id", "_rev"])
                if !Self.hasRequiredFields(node, required) { reasons.append("field_mismatch") }
                if !Self.canUseSort(columns[...], sort[...], node) { reasons.append("sort_order_mismatch") }
            } else if !sort.isEmpty {
                if !ranged.contains("_id") { reasons.append("field_mismatch") }
                if sort != ["_id"] { reasons.append("sort_order_mismatch") }
            }
            if reasons.isEmpty { usable.append(m) } else { why[key(m)] = reasons }
        }
        guard !usable.isEmpty else {
            let kind = partitioned.map { $0 ? "partitioned " : "global " } ?? ""
            throw CouchError(.badRequest, "no_usable_index", "No \(kind)index exists for this sort, try indexing by the sort fields.")
        }
        // `use_index` narrows the usable ones to those it names; when it names none of them,
        // they are all read from only when falling back is allowed (`mango_cursor:create`).
        var filtered = usable.filter(named)
        if filtered.isEmpty {
            guard allowFallback || (useIndex == nil && usable.count > 1) else {
                guard let useIndex else {
                    throw CouchError(.badRequest, "invalid_index", "You must specify an index with the `use_index` parameter.")
                }
                let what = useIndex.name.map { "\(useIndex.ddoc), \($0)" } ?? useIndex.ddoc
                throw CouchError(.badRequest, "invalid_index", "\(what) specified by `use_index` could not be found or it is not suitable.")
            }
            filtered = usable
        }
        // json indexes are read before `_all_docs`; among them the one whose leading fields
        // match the most ranged fields, then the fewest fields, then by ddoc and name.
        let json = filtered.compactMap { $0 }
        func distance(_ m: MangoIndex) -> Int { ranged.count - Self.prefixLength(m, ranged) }
        let sorted = json.sorted { a, b in
            if distance(a) != distance(b) { return distance(a) < distance(b) }
            if a.fields.count != b.fields.count { return a.fields.count < b.fields.count }
            return (a.ddoc, a.name) < (b.ddoc, b.name)
        }
        index = sorted.first
        // `_explain`'s candidates, every index but the one read, with CouchDB's reasons and
        // rankings (`extract_candidate_indexes`).
        let ofType: [MangoIndex?] = json.isEmpty ? [nil] : json
        let unfavored = filtered.filter { m in !ofType.contains { key($0) == key(m) } }
        let excluded = usable.filter { m in !filtered.contains { key($0) == key(m) } }
        let notUsable = pool.filter { why[key($0)] != nil }
        let unfavoredRank = max(1, json.isEmpty ? 1 : sorted.count)
        let excludedRank = unfavoredRank + (unfavored.isEmpty ? 0 : 1)
        let notUsableRank = excludedRank + (excluded.isEmpty ? 0 : 1)
        let partialRank = notUsableRank + (notUsable.isEmpty ? 0 : 1)
        func covers(_ m: MangoIndex?) -> Bool? {
            guard let m else { return nil }
            guard let fields else { return false }
            return Set(fields).isSubset(of: Set(["_id"] + m.fields.map(\.field)))
        }
        var out: [Candidate] = []
        for m in [nil] + indexes {
            let k = key(m)
            if k == key(index) && (index != nil || json.isEmpty) { continue }
            if let reasons = why[k] {
                out.append(Candidate(index: m, usable: false, reasons: reasons, ranking: notUsableRank, covering: covers(m)))
            } else if m?.partial != nil, !named(m) {
                out.append(Candidate(index: m, usable: false, reasons: ["is_partial"], ranking: partialRank, covering: covers(m)))
            } else if excluded.contains(where: { key($0) == k }) {
                out.append(Candidate(index: m, usable: true, reasons: ["excluded_by_user"], ranking: excludedRank, covering: covers(m)))
            } else if unfavored.contains(where: { key($0) == k }) {
                out.append(Candidate(index: m, usable: true, reasons: ["unfavored_type"], ranking: unfavoredRank, covering: covers(m)))
            } else if let m, let position = sorted.firstIndex(where: { $0.libraryName == k }), let winner = index {
                let reason = distance(m) > 0 ? "less_overlap" : m.fields.count > winner.fields.count ? "too_many_fields" : "alphabetically_comes_after"
                out.append(Candidate(index: m, usable: true, reasons: [reason], ranking: position, covering: covers(m)))
            }
        }
        candidates = out
        covering = covers(index) ?? false
    }

    /// The normalized selector.
    let node: Node

    /// The keys `_explain`'s `mrargs` show for the index read: each leading field's bounds from
    /// the selector's conditions on it (`null` below all, `"<MAX>"` above all), in the sort's
    /// direction; for `_all_docs`, `_id`'s.
    func keyRange(descending: Bool) -> (start: JSONValue, end: JSONValue) {
        func bounds(_ field: String) -> (low: JSONValue, high: JSONValue) {
            var low: JSONValue = .null, high: JSONValue = "<MAX>"
            func walk(_ n: Node) {
                switch n {
                case .and(let xs): xs.forEach(walk)
                case .condition(let f, let op, let arg) where f == field:
                    switch op {
                    case "$eq": low = arg; high = arg
                    case "$gt", "$gte": low = arg
                    case "$lt", "$lte": high = arg
                    case "$beginsWith":
                        low = arg
                        if case .string(let p) = arg { high = .string(p + "\u{FFFF}") }
                    default: break
                    }
                default: break
                }
            }
            walk(node)
            return (low, high)
        }
        guard let index else {
            let b = indexableFields.contains("_id") ? bounds("_id") : (.null, "<MAX>")
            return descending ? (b.high, b.low) : (b.low, b.high)
        }
        let leading = index.fields.prefix(Self.prefixLength(index, indexableFields)).map { bounds($0.field) }
        if descending { return (.array(leading.map(\.high) + ["<MAX>"]), .array(leading.map(\.low))) }
        // No leading field ranged over: the whole index, to its end.
        return (.array(leading.map(\.low)), .array(leading.isEmpty ? ["<MAX>"] : leading.map(\.high)))
    }

    /// Whether the index read holds every field asked for (`fields`), so no document is read
    /// (`mango_idx_view:covers`); never for `_all_docs`.
    let covering: Bool

    /// How many of an index's leading fields the selector ranges over (`composite_prefix`).
    static func prefixLength(_ m: MangoIndex, _ ranged: [String]) -> Int {
        var n = 0
        for f in m.fields {
            guard ranged.contains(f.field) else { break }
            n += 1
        }
        return n
    }

    // MARK: - Normalization (mango_selector:normalize)

    /// The normalized selector.
    static func normalized(_ selector: JSONValue) -> Node {
        negations(node(selector, path: nil))
    }

    /// `norm_ops` and `norm_fields`: members become an explicit `$and`, fields nested in
    /// objects join with dots, a bare value is `$eq`.
    static func node(_ v: JSONValue, path: String?) -> Node {
        guard case .object(let members) = v else {
            return path.map { .condition(field: $0, op: "$eq", arg: v) } ?? .empty
        }
        if members.isEmpty { return path.map { .condition(field: $0, op: "$eq", arg: v) } ?? .empty }
        if members.count > 1 {
            return .and(members.sorted { $0.key < $1.key }.map { node(.object([$0.key: $0.value]), path: path) })
        }
        guard let (key, value) = members.first else { return .empty }
        func list() -> [Node] {
            if case .array(let a) = value { return a.map { node($0, path: path) } }
            return []
        }
        switch key {
        case "$and": return .and(list())
        case "$or": return .or(list())
        case "$nor": return .nor(list())
        case "$not": return .not(node(value, path: path))
        case let op where op.hasPrefix("$"):
            return path.map { .condition(field: $0, op: op, arg: value) } ?? .empty
        default:
            return node(value, path: path.map { $0 + "." + key } ?? key)
        }
    }

    /// `norm_negations`: `$not` and `$nor` pushed down to the conditions (De Morgan).
    static func negations(_ n: Node) -> Node {
        switch n {
        case .not(let x): return negate(x)
        case .nor(let xs): return .and(xs.map(negate))
        case .and(let xs): return .and(xs.map(negations))
        case .or(let xs): return .or(xs.map(negations))
        case .condition, .empty: return n
        }
    }

    static let opposites = ["$lt": "$gte", "$lte": "$gt", "$eq": "$ne", "$ne": "$eq", "$gte": "$lt", "$gt": "$lte",
                            "$in": "$nin", "$nin": "$in"]

    static func negate(_ n: Node) -> Node {
        switch n {
        case .not(let x): return negations(x)
        case .nor(let xs): return .or(xs.map(negations))
        case .and(let xs): return .or(xs.map(negate))
        case .or(let xs): return .and(xs.map(negate))
        case .condition(let f, let op, let arg):
            if let o = opposites[op] { return .condition(field: f, op: o, arg: arg) }
            if op == "$exists", case .bool(let b) = arg { return .condition(field: f, op: op, arg: .bool(!b)) }
            // Any other condition keeps its negation (`{"$not": {op: arg}}`): no index ranges
            // over it.
            return .condition(field: f, op: "$not", arg: .object([op: arg]))
        case .empty: return .empty
        }
    }

    /// A normalized selector as a selector again.
    static func json(_ n: Node) -> JSONValue {
        switch n {
        case .and(let xs): return ["$and": .array(xs.map(json))]
        case .or(let xs): return ["$or": .array(xs.map(json))]
        case .nor(let xs): return ["$nor": .array(xs.map(json))]
        case .not(let x): return ["$not": json(x)]
        case .condition(let f, let op, let arg): return .object([f: .object([op: arg])])
        case .empty: return .object([:])
        }
    }

    /// The normalized selector with every condition on a field `replace` says to replace made
    /// true: it matches every document the selector matches, and maybe more. Negations are
    /// on the conditions themselves after normalization, so a condition made true only
    /// widens.
    static func widened(_ n: Node, replacing replace: (String) -> Bool) -> Node {
        switch n {
        case .and(let xs): return .and(xs.map { widened($0, replacing: replace) })
        case .or(let xs): return .or(xs.map { widened($0, replacing: replace) })
        case .nor, .not, .empty: return n
        // An empty `$and` inside a selector matches every document.
        case .condition(let f, _, _): return replace(f) ? .and([]) : n
        }
    }

    // MARK: - What the rules read of a normalized selector

    /// The fields an index can range over: conditions seen through `$and` only
    /// (`mango_idx_view:indexable_fields`), sorted, each once.
    static func indexableFields(_ n: Node) -> [String] {
        var out = Set<String>()
        func walk(_ n: Node) {
            switch n {
            case .and(let xs): xs.forEach(walk)
            case .condition(let f, let op, _) where rangeOperators.contains(op): out.insert(f)
            default: break
            }
        }
        walk(n)
        return out.sorted()
    }

    /// Every field the selector names, outside `$elemMatch` and the like.
    static func fields(_ n: Node) -> [String] {
        switch n {
        case .and(let xs), .or(let xs), .nor(let xs): return xs.flatMap(fields)
        case .not(let x): return fields(x)
        case .condition(let f, _, _): return [f]
        case .empty: return []
        }
    }

    /// Whether every field of `required` must exist for a document to match
    /// (`mango_selector:has_required_fields`): seen through `$and`, and through `$or` when
    /// every branch requires it; `$exists: false` requires nothing.
    static func hasRequiredFields(_ n: Node, _ required: Set<String>) -> Bool {
        remaining([n], required).isEmpty
    }

    private static func remaining(_ nodes: [Node], _ required: Set<String>) -> Set<String> {
        var left = required
        for n in nodes {
            if left.isEmpty { return left }
            switch n {
            case .and(let xs): left = remaining(xs, left)
            case .or(let xs):
                // Each branch must require a field; an empty `$or` leaves none required, as
                // CouchDB's fold over no branches does.
                var union = Set<String>()
                for x in xs { union.formUnion(remaining([x], left)) }
                left = union
            case .condition(let f, let op, let arg):
                if op == "$exists", arg == .bool(false) { continue }
                left.remove(f)
            case .nor, .not, .empty: break
            }
        }
        return left
    }

    /// Whether the selector holds `field` equal to one value (`$eq`), seen through `$and`.
    static func isConstant(_ n: Node, _ field: String) -> Bool {
        switch n {
        case .and(let xs): return xs.contains { isConstant($0, field) }
        case .condition(let f, let op, _) where f == field: return op == "$eq"
        default: return false
        }
    }

    /// Whether an index of `columns` serves the sort (`mango_idx_view:can_use_sort`): the sort
    /// fields are a prefix of its columns once leading columns the selector holds constant are
    /// passed over.
    static func canUseSort(_ columns: ArraySlice<String>, _ sort: ArraySlice<String>, _ n: Node) -> Bool {
        if sort.isEmpty { return true }
        guard let first = columns.first else { return false }
        if first == sort.first { return columns.starts(with: sort) }
        return isConstant(n, first) && canUseSort(columns.dropFirst(), sort, n)
    }
}
