import Foundation

/// The groups of a grouped statement, made as its rows come: each group keeps its first row
/// and one running value per aggregate, never its rows, so grouping costs memory per group
/// rather than per row.
///
/// Rows group by their `GROUP BY` values under the collation (canonically equivalent strings
/// share a group; MISSING and NULL are groups of their own). Groups come out in the collation
/// order of those values.
///
/// ```swift
/// var groups = try GroupAccumulator(statement, inOrder: false, parameters: [:], regexes: nil)
/// for row in rows { try groups.add(row) }
/// for group in groups.finish() { print(group.resolving(.aggregate(.count, nil))) }
/// ```
///
/// - Note: Not thread-safe; lives for one execution on one thread.
struct GroupAccumulator {
    /// One group: its first row (what non-aggregate expressions read) and its aggregates'
    /// values so far. A class: a group is updated in place per row and handed on without
    /// copying its row.
    final class Group {
        let first: QueryRow
        /// The group values' collation key; nil for a group of an in-order grouping that
        /// never needed it (see ``GroupAccumulator/plainlyDistinct(_:_:)``).
        let key: [UInt8]?
        fileprivate var states: [AggregateState]
        fileprivate let aggregates: [QueryExpression]

        fileprivate init(first: QueryRow, key: [UInt8]?, states: [AggregateState], aggregates: [QueryExpression]) {
            self.first = first
            self.key = key
            self.states = states
            self.aggregates = aggregates
        }

        /// `e` with each aggregate replaced by its value over the group.
        func resolving(_ e: QueryExpression) -> QueryExpression {
            if case .aggregate = e, let i = aggregates.firstIndex(of: e) { return .literal(states[i].value) }
            guard e.containsAggregate else { return e }
            return e.replacing { x in
                guard case .aggregate = x, let i = aggregates.firstIndex(of: x) else { return nil }
                return .literal(states[i].value)
            }
        }
    }

    private let groupBy: [QueryExpression]
    private let aggregates: [QueryExpression]
    /// Each aggregate's argument (nil for `count(*)`).
    private let arguments: [QueryExpression?]
    private let parameters: [String: JSONValue]
    private let regexes: RegexCache?
    /// Rows come in the grouping's order (an index scan): a group ends where the values change.
    private let inOrder: Bool
    private var groups: [Group] = []
    /// Rows in any order: the group of values met before, and of each collation key.
    private var byValues: [[JSONValue?]: Int] = [:]
    private var byKey: [[UInt8]: Int] = [:]
    /// Rows in order: the values of the last row, whose group is the last one.
    private var lastValues: [JSONValue?]?

    /// - Throws: ``SetteeError/Code/invalidParameter`` for an aggregate inside an aggregate.
    init(_ statement: SelectStatement, inOrder: Bool, parameters: [String: JSONValue], regexes: RegexCache?) throws(SetteeError) {
        let found = statement.aggregates
        for case .aggregate(let a, let argument?) in found where argument.containsAggregate {
            throw SetteeError(.invalidParameter, "query: an aggregate inside \(a.rawValue)()")
        }
        groupBy = statement.groupBy
        aggregates = found
        arguments = found.map { e in if case .aggregate(_, let argument) = e { argument } else { nil } }
        self.parameters = parameters
        self.regexes = regexes
        self.inOrder = inOrder
    }

    /// Adds a row to its group; with `continuesLastGroup` (rows in order, ``GroupRuns``), to
    /// the last group without evaluating the grouping.
    mutating func add(_ row: QueryRow, continuesLastGroup: Bool = false) throws(SetteeError) {
        try add(row, toGroup: continuesLastGroup && inOrder && !groups.isEmpty ? groups.count - 1 : try groupIndex(of: row))
    }

    /// Adds `row`, `times` over, to the group at `index`, one ``groupIndex(of:)`` gave for a
    /// row of the same grouping values (a join's rows of one left row, when the grouping reads
    /// only it).
    mutating func add(_ row: QueryRow, toGroup index: Int, times: Int = 1) throws(SetteeError) {
        let group = groups[index]
        for (i, argument) in arguments.enumerated() {
            var v = JSONValue.null
            if let argument {
                // MISSING and NULL are not counted, summed or compared (SQL's rule).
                guard let x = try argument.evaluate(row, parameters: parameters, regexes: regexes), x != .null else { continue }
                v = x
            }
            if times == 1 { try group.states[i].add(v) } else { try group.states[i].add(v, times: times) }
        }
    }

    /// Adds `count` rows to the last group when its aggregates read nothing of a row
    /// (``GroupRuns/pending``: rows that continue it and meet `WHERE`).
    mutating func addToLastGroup(rows count: Int) throws(SetteeError) {
        guard count > 0, let group = groups.last else { return }
        for (i, argument) in arguments.enumerated() {
            let v: JSONValue
            if let argument {
                guard let c = try argument.evaluate(.empty, parameters: parameters, regexes: regexes), c != .null else { continue }
                v = c
            } else {
                v = .null
            }
            try group.states[i].add(v, times: count)
        }
    }

    /// The groups in the collation order of their values. Without `GROUP BY` there is always
    /// one group (aggregates over no rows: `count` 0), read on a row of nothing but MISSING.
    func finish() -> [Group] {
        if groupBy.isEmpty { return groups.isEmpty ? [newGroup(.empty, key: [])] : groups }
        if inOrder { return groups }
        return groups.sorted { ($0.key ?? []).lexicographicallyPrecedes($1.key ?? []) }
    }

    private func newGroup(_ row: QueryRow, key: [UInt8]?) -> Group {
        Group(first: row, key: key, states: aggregates.map { e in
            guard case .aggregate(let a, _) = e else { preconditionFailure("only aggregates are collected") }
            return AggregateState(a)
        }, aggregates: aggregates)
    }

    /// Whether two different lists of grouping values are different groups without their
    /// collation keys: strings of printable ASCII only, each character of which has weights of
    /// its own in the root collation (none ignorable, no contraction), so different text is a
    /// different key. (Control characters are ignorable: "a\u{1}b" groups with "ab".)
    static func plainlyDistinct(_ a: [JSONValue?], _ b: [JSONValue?]) -> Bool {
        guard a.count == b.count else { return false }
        func printable(_ v: JSONValue?) -> Bool {
            guard case .string(let s)? = v else { return false }
            return s.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
        }
        return a.allSatisfy(printable) && b.allSatisfy(printable)
    }

    /// The index of `row`'s group, made (with `row` as its first) when it has none yet.
    mutating func groupIndex(of row: QueryRow) throws(SetteeError) -> Int {
        if groupBy.isEmpty {
            if groups.isEmpty { groups.append(newGroup(row, key: [])) }
            return 0
        }
        var values: [JSONValue?] = []
        values.reserveCapacity(groupBy.count)
        for e in groupBy { values.append(try e.evaluate(row, parameters: parameters, regexes: regexes)) }
        if inOrder {
            guard let previous = lastValues, let last = groups.last else {
                lastValues = values
                groups.append(newGroup(row, key: try QueryExecutor.key(values)))
                return groups.count - 1
            }
            if previous == values { return groups.count - 1 }
            lastValues = values
            if Self.plainlyDistinct(previous, values) {
                groups.append(newGroup(row, key: nil))
                return groups.count - 1
            }
            // Values that differ may still be equal under the collation (canonically
            // equivalent strings, ignorable characters): their keys decide.
            let key = try QueryExecutor.key(values)
            let lastKey: [UInt8]
            if let k = last.key { lastKey = k } else { lastKey = try QueryExecutor.key(previous) }
            if lastKey == key { return groups.count - 1 }
            groups.append(newGroup(row, key: key))
            return groups.count - 1
        }
        if let i = byValues[values] { return i }
        let key = try QueryExecutor.key(values)
        let i: Int
        if let known = byKey[key] {
            i = known
        } else {
            i = groups.count
            groups.append(newGroup(row, key: key))
            byKey[key] = i
        }
        byValues[values] = i
        return i
    }
}

/// The running value of one aggregate over a group's rows: `count` counts values; `sum` and
/// `avg` add numbers (NULL when a value is not a number, or when there is none); `min` and
/// `max` keep the first of the least or greatest values under the collation.
struct AggregateState {
    private let kind: QueryExpression.Aggregate
    private var count: Int64 = 0
    /// nil once a value could not be added: the sum is NULL from then on.
    private var total: JSONValue? = .int(0)
    private var best: JSONValue?

    init(_ kind: QueryExpression.Aggregate) { self.kind = kind }

    /// Adds one value that is neither MISSING nor NULL (for `count(*)`, NULL per row).
    mutating func add(_ v: JSONValue) throws(SetteeError) {
        count += 1
        switch kind {
        case .count:
            break
        case .sum, .avg:
            guard let t = total else { return }
            let next = QueryExpression.arithmetic(.add, t, v)
            total = next == .null ? nil : next
        case .min, .max:
            guard let b = best else { best = v; return }
            let order = try JSONCollation.compare(v, b)
            if kind == .min ? order == .orderedAscending : order == .orderedDescending { best = v }
        }
    }

    /// Adds `v` as `times` rows' value: a count in one step, the others row by row (a sum's
    /// overflow to a double happens where it would).
    mutating func add(_ v: JSONValue, times: Int) throws(SetteeError) {
        if kind == .count {
            let (sum, overflow) = count.addingReportingOverflow(Int64(times))
            guard !overflow else { throw SetteeError(.invalidParameter, "query: count(*) past \(Int64.max)") }
            count = sum
            return
        }
        for _ in 0 ..< times { try add(v) }
    }

    /// The aggregate's value (NULL for a sum, average, minimum or maximum of no values).
    var value: JSONValue {
        switch kind {
        case .count:
            return .int(count)
        case .sum, .avg:
            guard count > 0, let total else { return .null }
            if kind == .sum { return total }
            switch QueryExpression.arithmetic(.divide, total, .int(count)) {
            case .int(let i)?: return .double(Double(i))
            case let v?: return v
            case nil: return .null
            }
        case .min, .max:
            return best ?? .null
        }
    }
}

/// Rows of an index scan grouped in index order when the grouping values are the first
/// `components` values of each entry's key: an entry whose leading key bytes are those of the
/// last row the grouping took joins that row's group (equal keys are the same group, as
/// grouping compares collation keys) without its grouping values being decoded or compared.
///
/// ```swift
/// let continues = runs.continues(valueKey)   // the scanner, per entry
/// runs.accept()                             // the executor, once the row is in a group
/// ```
///
/// - Note: Not thread-safe; shared by one execution's scanner and executor on one thread.
final class GroupRuns {
    let components: Int
    /// The values a row needs when it continues a group (what the aggregates read).
    let slotsWithinGroup: Set<Int>
    /// The leading key bytes of the last row taken, when known. (One thread: no dynamic
    /// exclusivity checks per row.)
    @exclusivity(unchecked) private var last: [UInt8]?
    /// Those of the row being offered, when it starts a run.
    @exclusivity(unchecked) private var offered: [UInt8]?
    /// Rows the scanner found to continue the last group and meet `WHERE`, not yet added to
    /// it (when ``slotsWithinGroup`` is empty they need no row: the executor adds them
    /// before the next row it is given, and at the end).
    @exclusivity(unchecked) var pending = 0

    /// ``slotsWithinGroup`` as bits (``IndexEntry/mask(_:)``).
    let maskWithinGroup: UInt64

    init(components: Int, slotsWithinGroup: Set<Int>) {
        self.components = components
        self.slotsWithinGroup = slotsWithinGroup
        maskWithinGroup = IndexEntry.mask(slotsWithinGroup)
    }

    /// Whether the entry of this value key continues the last group taken.
    func continues(_ valueKey: UnsafeRawBufferPointer) -> Bool {
        // Each value's key delimits itself, so a key starting with the last row's leading
        // values has those values first: no need to find where they end.
        if let last, !last.isEmpty, valueKey.count >= last.count,
           last.withUnsafeBytes({ memcmp($0.baseAddress!, valueKey.baseAddress!, $0.count) == 0 }) {
            offered = nil
            return true
        }
        guard let n = JSONCollation.lengthOfValues(components, in: valueKey) else {
            // Unknown bytes: the row is grouped by its values, after which nothing continues.
            offered = nil
            last = nil
            return false
        }
        let leading = UnsafeRawBufferPointer(rebasing: valueKey[..<n])
        if let last, last.count == n, n > 0, last.withUnsafeBytes({ memcmp($0.baseAddress!, leading.baseAddress!, n) == 0 }) {
            offered = nil
            return true
        }
        offered = Array(leading)
        return false
    }

    /// The leading key bytes of the last group taken, when known.
    var leading: [UInt8]? { last }

    /// The offered row was taken into a group.
    func accept() {
        if let offered { last = offered }
        offered = nil
    }

    /// A row not offered (from outside the key stream) is being grouped: the next one starts
    /// afresh.
    func interrupt() {
        last = nil
        offered = nil
    }
}
