import Foundation

/// An expression of a query or an index, the one form both Couchbase Lite's QueryBuilder and
/// SQL++ strings compile to, evaluated against one document with SQL++'s rules for MISSING and
/// NULL.
///
/// A value is a `JSONValue?`: nil is MISSING (a property the document lacks), `.null` is NULL.
/// Most operators give MISSING when an operand is MISSING, else NULL when one is NULL.
///
/// ```swift
/// let e: QueryExpression = .compare(.equal, .property(try PropertyPath("type")), .literal("task"))
/// let matches = try e.evaluate(row, parameters: [:]).isTrue
/// ```
///
/// - Note: A value type; safe to share between threads.
indirect enum QueryExpression: Sendable, Hashable {
    /// A constant.
    case literal(JSONValue)
    /// MISSING itself (SQL++'s `MISSING` literal).
    case missing
    /// A property of the document.
    case property(PropertyPath)
    /// A named parameter (`$list`), given at execution.
    case parameter(String)
    /// A property of the document's metadata (`META().id`).
    case meta(MetaProperty)
    /// `NOT e`.
    case not(QueryExpression)
    /// `a AND b AND …`: two or more terms, none of them an AND itself (``all(_:)`` and
    /// ``and(_:_:)`` make one flat). A chain of a thousand terms is one level, not a thousand:
    /// evaluating, comparing or freeing it recurses only as deep as the expression nests.
    case and([QueryExpression])
    /// `a OR b OR …`: two or more terms, none of them an OR itself (``any(_:)``, ``or(_:_:)``).
    case or([QueryExpression])
    /// `a = b`, `a < b`, …
    case compare(Comparison, QueryExpression, QueryExpression)
    /// `a + b`, …
    case arithmetic(Arithmetic, QueryExpression, QueryExpression)
    /// `-e`.
    case negate(QueryExpression)
    /// `e IS NULL`, `e IS MISSING`, `e IS VALUED` and their negations.
    case test(Test, QueryExpression)
    /// `e BETWEEN low AND high`.
    case between(QueryExpression, QueryExpression, QueryExpression)
    /// `e IN [a, b, …]`.
    case `in`(QueryExpression, [QueryExpression])
    /// `e LIKE pattern` (`%` any run of characters, `_` one character, `\` escapes).
    case like(QueryExpression, QueryExpression)
    /// A function call.
    case function(Function, [QueryExpression])
    /// An aggregate over a group of rows (`count(*)` has no argument). The executor replaces
    /// each one with its value before evaluating a group's row.
    case aggregate(Aggregate, QueryExpression?)
    /// `ANY v IN array SATISFIES condition END`, `EVERY …`, `ANY AND EVERY …`: `condition`
    /// evaluated once per element of `array`, with the element bound to the variable `v`.
    case quantified(Quantifier, variable: String, in: QueryExpression, satisfies: QueryExpression)
    /// A variable bound by an enclosing ``quantified(_:variable:in:satisfies:)``, and a path
    /// into its value (empty for the value itself: `v`, `v.name`, `v[0]`).
    case variable(String, PropertyPath)
    /// `MATCH(index, query)`: whether the document holds the words of the full-text query
    /// (a constant or a parameter) in the full-text index. Only a full-text scan of that index
    /// yields rows, each carrying its score, so on a row it is true when the row has a score
    /// (``SelectStatement/checkFullText()`` keeps it where that holds: in `WHERE`, outside
    /// OR and NOT).
    case match(index: String, query: QueryExpression)
    /// `RANK(index)`: the row's BM25 score in the index its query's `MATCH` searches (higher
    /// is more relevant).
    case rank(index: String)

    /// The quantifiers of `… SATISFIES … END`.
    enum Quantifier: String, Sendable, Hashable, CaseIterable {
        /// True when at least one element satisfies the condition.
        case any = "ANY"
        /// True when no element fails it (so an empty array satisfies it).
        case every = "EVERY"
        /// True when the array has elements and none fails the condition.
        case anyAndEvery = "ANY AND EVERY"
    }

    /// Aggregate functions.
    enum Aggregate: String, Sendable, Hashable, CaseIterable {
        case count, sum, avg, min, max
    }

    /// What `META()` offers.
    enum MetaProperty: String, Sendable, Hashable, CaseIterable {
        case id, sequence, deleted, expiration, revisionID
    }

    /// Comparison operators.
    enum Comparison: String, Sendable, Hashable, CaseIterable {
        case equal = "=", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    }

    /// Arithmetic operators.
    enum Arithmetic: String, Sendable, Hashable, CaseIterable {
        case add = "+", subtract = "-", multiply = "*", divide = "/", modulo = "%"
    }

    /// `IS` tests.
    enum Test: String, Sendable, Hashable, CaseIterable {
        case isNull = "IS NULL", isNotNull = "IS NOT NULL", isMissing = "IS MISSING", isNotMissing = "IS NOT MISSING"
        case isValued = "IS VALUED", isNotValued = "IS NOT VALUED"
    }

    /// A document's partition: its ID up to the first `:` (``MangoQuery/partition``).
    static let partitionOfID = QueryExpression.function(.substr, [.meta(.id), .literal(.int(0)),
                                                                  .function(.position, [.meta(.id), .literal(.string(":"))])])

    /// Functions.
    enum Function: String, Sendable, Hashable, CaseIterable {
        case lower, upper, length, trim, contains
        case abs, floor, ceil, round
        case arrayLength = "array_length", arrayContains = "array_contains"
        /// Whether a regular expression matches somewhere in a string (Couchbase Lite's
        /// `REGEXP_LIKE` searches as `REGEXP_CONTAINS` does: anchor with `^…$` for the whole).
        case regexpLike = "regexp_like", regexpContains = "regexp_contains"
        /// `TYPE(x)`: `"null"`, `"boolean"`, `"number"`, `"string"`, `"array"` or `"object"`.
        case type
        /// Type tests: TRUE or FALSE (MISSING for MISSING).
        case isArray = "isarray", isBoolean = "isboolean", isNumber = "isnumber", isObject = "isobject", isString = "isstring"
        /// `IFMISSINGORNULL(a, b)`: `a` unless it is MISSING or NULL, else `b`.
        case ifMissingOrNull = "ifmissingornull"
        /// `OBJECT_NAMES(o)`: an object's property names, in the collation's order.
        case objectNames = "object_names"
        /// `POSITION(s, sub)`: where `sub` first occurs in `s`, counted in Unicode code points
        /// from 0; -1 when it does not occur.
        case position
        /// `SUBSTR(s, start[, length])`: the code points of `s` from `start` (from 0), all of
        /// them or `length` of them; NULL for a start past the end or a negative length.
        case substr

        /// How many arguments the function takes.
        var arity: ClosedRange<Int> {
            switch self {
            case .contains, .arrayContains, .regexpLike, .regexpContains, .ifMissingOrNull, .position: 2...2
            case .substr: 2...3
            default: 1...1
            }
        }

        /// What an error says it takes.
        var arityText: String {
            let n = arity.lowerBound == arity.upperBound ? "\(arity.lowerBound)" : "\(arity.lowerBound) or \(arity.upperBound)"
            return n + (arity == 1...1 ? " argument" : " arguments")
        }
    }
}

/// One document as an expression sees it.
struct QueryRow: Sendable {
    var id: String
    var revisionID: String
    var sequence: UInt64
    var isDeleted: Bool
    /// Seconds since 1970, when the document expires.
    var expiration: Date?
    var properties: [String: JSONValue]
    /// A covering index scan's row: the entry's values, by position (MISSING as nil).
    var slots: [JSONValue?] = []
    /// The row's score when it comes from a full-text scan (what `MATCH` and `RANK` read).
    var fullTextScore: Double? = nil
    /// Where the document's current body is stored, when the row was read from it (0
    /// otherwise: a covering scan's row, a constant's).
    var bodyRef: UInt64 = 0

    /// A row of nothing: what constants are evaluated on, and what a count gets per entry.
    static let empty = QueryRow(id: "", revisionID: "", sequence: 0, isDeleted: false, expiration: nil, properties: [:])
}

extension Optional where Wrapped == JSONValue {
    /// Whether a condition holds: `true` and every other value SQL++ counts as true (a non-zero
    /// number, a non-empty string, array or object); never MISSING, NULL or `false`.
    var isTrue: Bool {
        guard let v = self else { return false }
        return QueryExpression.truthiness(v) ?? false
    }
}

/// What an expression is evaluated against: one row, the query's parameters, the variables
/// the enclosing `ANY`/`EVERY` bind, and the execution's compiled regular expressions.
struct EvaluationScope {
    let row: QueryRow
    let parameters: [String: JSONValue]
    /// nil: each regular expression is compiled where it is used (one-off evaluations).
    let regexes: RegexCache?
    /// Innermost last, so that an inner `ANY x` hides an outer one.
    var variables: [(name: String, value: JSONValue)] = []
}

extension QueryExpression {
    /// Evaluates the expression on `row`; nil is MISSING.
    ///
    /// - Parameter regexes: where the regular expressions compiled for one execution are kept.
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a parameter not given, an unbound
    ///   variable, an invalid or too costly regular expression;
    ///   ``SetteeError/Code/unavailable`` when ICU cannot compare two strings.
    func evaluate(_ row: QueryRow, parameters: [String: JSONValue], regexes: RegexCache? = nil) throws(SetteeError) -> JSONValue? {
        // A leaf (a select list's property, slot or META()) needs no scope, whose copy of the
        // row would retain and release each of the row's parts.
        if let leaf = try leafValue(row, parameters) { return leaf }
        return try evaluate(in: EvaluationScope(row: row, parameters: parameters, regexes: regexes))
    }

    /// The value of a leaf expression (a literal, MISSING, a property, a parameter, `META()`):
    /// `.some(value)`, where the value is nil for MISSING; nil for any other expression.
    @inline(__always)
    private func leafValue(_ row: QueryRow, _ parameters: [String: JSONValue]) throws(SetteeError) -> JSONValue?? {
        switch self {
        case .literal(let v): return .some(v)
        case .missing: return .some(nil)
        case .property(let path):
            if let slot = path.slot { return .some(slot < row.slots.count ? row.slots[slot] : nil) }
            // The empty path is the document itself (QueryBuilder's `Expression.all()`).
            return .some(path.components.isEmpty ? .object(row.properties) : path.value(in: row.properties))
        case .parameter(let name):
            guard let v = parameters[name] else {
                throw SetteeError(.invalidParameter, "the query's parameter $\(name) has no value")
            }
            return .some(v)
        case .meta(let m):
            switch m {
            case .id: return .some(.string(row.id))
            case .revisionID: return .some(.string(row.revisionID))
            case .sequence: return .some(row.sequence <= UInt64(Int64.max) ? .int(Int64(row.sequence)) : .double(Double(row.sequence)))
            case .deleted: return .some(.bool(row.isDeleted))
            case .expiration: return .some(row.expiration.map { .double(($0.timeIntervalSince1970 * 1000).rounded()) } ?? .null)
            }
        default:
            return nil
        }
    }

    /// Evaluates the expression in `scope`; nil is MISSING.
    func evaluate(in scope: EvaluationScope) throws(SetteeError) -> JSONValue? {
        switch self {
        case .literal, .missing, .property, .parameter, .meta:
            // Never nil for a leaf.
            return try leafValue(scope.row, scope.parameters) ?? nil
        case .not(let e):
            guard let v = try e.evaluate(in: scope) else { return nil }
            guard let t = Self.truthiness(v) else { return .null }
            return .bool(!t)
        case .and(let terms):
            // FALSE as soon as one term is: the rest cannot change the answer.
            var result: JSONValue? = .bool(true)
            for t in terms {
                result = Self.and(result, try t.evaluate(in: scope))
                if result == .bool(false) { return result }
            }
            return result
        case .or(let terms):
            var result: JSONValue? = .bool(false)
            for t in terms {
                result = Self.or(result, try t.evaluate(in: scope))
                if result == .bool(true) { return result }
            }
            return result
        case .compare(let op, let a, let b):
            return try Self.compare(op, try a.evaluate(in: scope), try b.evaluate(in: scope))
        case .arithmetic(let op, let a, let b):
            return Self.arithmetic(op, try a.evaluate(in: scope), try b.evaluate(in: scope))
        case .negate(let e):
            return Self.arithmetic(.subtract, .int(0), try e.evaluate(in: scope))
        case .test(let t, let e):
            let v = try e.evaluate(in: scope)
            switch t {
            case .isNull: return v.map { .bool($0 == .null) }
            case .isNotNull: return v.map { .bool($0 != .null) }
            case .isMissing: return .bool(v == nil)
            case .isNotMissing: return .bool(v != nil)
            case .isValued: return .bool(v != nil && v != .null)
            case .isNotValued: return .bool(v == nil || v == .null)
            }
        case .between(let e, let low, let high):
            let v = try e.evaluate(in: scope)
            return Self.and(try Self.compare(.greaterOrEqual, v, try low.evaluate(in: scope)),
                            try Self.compare(.lessOrEqual, v, try high.evaluate(in: scope)))
        case .in(let e, let list):
            guard let v = try e.evaluate(in: scope) else { return nil }
            if v == .null { return .null }
            var sawNull = false
            for item in list {
                switch try Self.compare(.equal, v, try item.evaluate(in: scope)) {
                case .bool(true)?: return .bool(true)
                case .null?: sawNull = true
                default: break
                }
            }
            return sawNull ? .null : .bool(false)
        case .like(let e, let p):
            let (v, pattern) = (try e.evaluate(in: scope), try p.evaluate(in: scope))
            guard let v, let pattern else { return nil }
            guard case .string(let s) = v, case .string(let pat) = pattern else { return .null }
            return .bool(Self.like(Array(s.unicodeScalars), Array(pat.unicodeScalars)))
        case .function(let f, let args):
            guard f.arity.contains(args.count) else {
                throw SetteeError(.invalidParameter, "\(f.rawValue)() takes \(f.arityText), not \(args.count)")
            }
            var values: [JSONValue?] = []
            for a in args { values.append(try a.evaluate(in: scope)) }
            if f == .regexpLike || f == .regexpContains { return try Self.regexpContains(values, regexes: scope.regexes) }
            if f == .ifMissingOrNull {
                if let first = values[0], first != JSONValue.null { return first }
                return values[1]
            }
            if f == .objectNames, case .object(let o)? = values[0] {
                var keys: [(text: String, key: [UInt8])] = []
                for k in o.keys { keys.append((k, try JSONCollation.key(.string(k)))) }
                return .array(keys.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { .string($0.text) })
            }
            return Self.call(f, values)
        case .aggregate(let a, _):
            throw SetteeError(.invalidParameter, "\(a.rawValue)() is an aggregate: it needs a group (GROUP BY, or a select list of aggregates only)")
        case .quantified(let q, let name, let source, let condition):
            return try Self.quantified(q, name, try source.evaluate(in: scope), condition, scope)
        case .match:
            return .bool(scope.row.fullTextScore != nil)
        case .rank:
            return scope.row.fullTextScore.map { .double($0) } ?? .null
        case .variable(let name, let path):
            guard let bound = scope.variables.last(where: { $0.name == name }) else {
                throw SetteeError(.invalidParameter, "query: the variable \(name) is used outside the ANY or EVERY that binds it")
            }
            return path.value(in: bound.value)
        }
    }

    /// `ANY`, `EVERY`, `ANY AND EVERY` over `array`: an element satisfies the condition when it
    /// is true (NULL and MISSING do not). MISSING gives MISSING and NULL gives NULL, as every
    /// operator does; any other value that is not an array is FALSE for all three quantifiers
    /// (it has no elements to satisfy ANY, and is not the array EVERY speaks of).
    static func quantified(_ q: Quantifier, _ name: String, _ array: JSONValue?, _ condition: QueryExpression,
                           _ scope: EvaluationScope) throws(SetteeError) -> JSONValue? {
        guard let array else { return nil }
        guard case .array(let elements) = array else { return array == .null ? .null : .bool(false) }
        var inner = scope
        let slot = inner.variables.count
        inner.variables.append((name, .null))
        for element in elements {
            inner.variables[slot].value = element
            let satisfied = try condition.evaluate(in: inner).isTrue
            switch q {
            case .any: if satisfied { return .bool(true) }
            case .every, .anyAndEvery: if !satisfied { return .bool(false) }
            }
        }
        switch q {
        case .any: return .bool(false)
        case .every: return .bool(true)
        case .anyAndEvery: return .bool(!elements.isEmpty)
        }
    }

    /// `a AND b`, flattened: the terms of either that is an AND themselves become terms.
    static func and(_ a: QueryExpression, _ b: QueryExpression) -> QueryExpression { all([a, b]) }

    /// `a OR b`, flattened as ``and(_:_:)``.
    static func or(_ a: QueryExpression, _ b: QueryExpression) -> QueryExpression { any([a, b]) }

    /// Every term joined by AND, in one flat ``and(_:)``: TRUE for none, the term itself for one.
    ///
    /// ```swift
    /// let condition = QueryExpression.all(fields.map { .test(.isValued, .property($0)) })
    /// ```
    static func all(_ terms: [QueryExpression]) -> QueryExpression { joined(terms, and: true) }

    /// Every term joined by OR, in one flat ``or(_:)``: FALSE for none, the term itself for one.
    static func any(_ terms: [QueryExpression]) -> QueryExpression { joined(terms, and: false) }

    /// The terms joined by AND (or OR), the terms of any that is one themselves.
    private static func joined(_ terms: [QueryExpression], and: Bool) -> QueryExpression {
        var flat: [QueryExpression] = []
        flat.reserveCapacity(terms.count)
        for t in terms {
            switch (t, and) {
            case (.and(let inner), true), (.or(let inner), false): flat.append(contentsOf: inner)
            default: flat.append(t)
            }
        }
        switch flat.count {
        case 0: return .literal(.bool(and))
        case 1: return flat[0]
        default: return and ? .and(flat) : .or(flat)
        }
    }

    /// SQL++'s truth of a value: false for `false`, 0, "", [] and {}; nil for NULL.
    static func truthiness(_ v: JSONValue) -> Bool? {
        switch v {
        case .null: nil
        case .bool(let b): b
        case .int(let i): i != 0
        case .double(let d): d != 0
        case .string(let s): !s.isEmpty
        case .array(let a): !a.isEmpty
        case .object(let o): !o.isEmpty
        }
    }

    /// FALSE if either side is false; else MISSING if either is MISSING; else NULL if either is
    /// NULL; else TRUE.
    static func and(_ x: JSONValue?, _ y: JSONValue?) -> JSONValue? {
        let (tx, ty) = (x.flatMap(truthiness), y.flatMap(truthiness))
        if tx == false || ty == false { return .bool(false) }
        if x == nil || y == nil { return nil }
        if tx == nil || ty == nil { return .null }
        return .bool(true)
    }

    /// TRUE if either side is true; else NULL if either is NULL; else MISSING if either is
    /// MISSING; else FALSE.
    static func or(_ x: JSONValue?, _ y: JSONValue?) -> JSONValue? {
        let (tx, ty) = (x.flatMap(truthiness), y.flatMap(truthiness))
        if tx == true || ty == true { return .bool(true) }
        if x == .some(.null) || y == .some(.null) { return .null }
        if x == nil || y == nil { return nil }
        return .bool(false)
    }

    /// MISSING or NULL operands give MISSING or NULL; `=` and `!=` compare values exactly (numbers
    /// by value); the order operators use the collation (`Formats/collation.md`), so values of
    /// different types compare by type.
    static func compare(_ op: Comparison, _ x: JSONValue?, _ y: JSONValue?) throws(SetteeError) -> JSONValue? {
        guard let x, let y else { return nil }
        if x == .null || y == .null { return .null }
        switch op {
        case .equal: return .bool(equal(x, y))
        case .notEqual: return .bool(!equal(x, y))
        default:
            let order = try JSONCollation.compare(x, y)
            switch op {
            case .less: return .bool(order == .orderedAscending)
            case .lessOrEqual: return .bool(order != .orderedDescending)
            case .greater: return .bool(order == .orderedDescending)
            default: return .bool(order != .orderedAscending)
            }
        }
    }

    /// Exact equality; an integer equals the double of the same value.
    static func equal(_ x: JSONValue, _ y: JSONValue) -> Bool {
        switch (x, y) {
        // As the collation compares them: by the double's value.
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(a) == b
        case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { equal($0, $1) }
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { k, v in b[k].map { equal(v, $0) } ?? false }
        default: return x == y
        }
    }

    /// Integers stay integers unless the result does not fit (then a double); a division is a
    /// double unless exact; dividing by zero is NULL; a non-number operand is NULL.
    static func arithmetic(_ op: Arithmetic, _ x: JSONValue?, _ y: JSONValue?) -> JSONValue? {
        guard let x, let y else { return nil }
        switch (x, y) {
        case (.int(let a), .int(let b)):
            switch op {
            case .add: let (r, o) = a.addingReportingOverflow(b); return o ? .double(Double(a) + Double(b)) : .int(r)
            case .subtract: let (r, o) = a.subtractingReportingOverflow(b); return o ? .double(Double(a) - Double(b)) : .int(r)
            case .multiply: let (r, o) = a.multipliedReportingOverflow(by: b); return o ? .double(Double(a) * Double(b)) : .int(r)
            case .divide:
                guard b != 0 else { return .null }
                let (q, o) = a.dividedReportingOverflow(by: b)
                if !o, q.multipliedReportingOverflow(by: b) == (a, false) { return .int(q) }
                return .double(Double(a) / Double(b))
            case .modulo:
                guard b != 0 else { return .null }
                let (r, o) = a.remainderReportingOverflow(dividingBy: b)
                return o ? .int(0) : .int(r)
            }
        default:
            guard let a = number(x), let b = number(y) else { return .null }
            switch op {
            case .add: return finite(a + b)
            case .subtract: return finite(a - b)
            case .multiply: return finite(a * b)
            case .divide: return b == 0 ? .null : finite(a / b)
            case .modulo: return b == 0 ? .null : finite(a.truncatingRemainder(dividingBy: b))
            }
        }
    }

    private static func number(_ v: JSONValue) -> Double? {
        switch v {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    /// JSON has no infinity: a result that overflows a double is NULL.
    private static func finite(_ d: Double) -> JSONValue { d.isFinite ? .double(d) : .null }

    /// `%` matches any run of characters, `_` one, `\` makes the next one literal.
    static func like(_ s: [Unicode.Scalar], _ p: [Unicode.Scalar]) -> Bool {
        // Iterative matching with one backtrack point for the last `%`: linear in practice and
        // never exponential on hostile patterns.
        var (si, pi) = (0, 0)
        var star: (p: Int, s: Int)? = nil
        while si < s.count {
            if pi < p.count {
                let c = p[pi]
                if c == "%" {
                    star = (pi + 1, si)
                    pi += 1
                    continue
                }
                if c == "\\", pi + 1 < p.count {
                    if p[pi + 1] == s[si] { pi += 2; si += 1; continue }
                } else if c == "_" || c == s[si] {
                    pi += 1; si += 1; continue
                }
            }
            guard let st = star else { return false }
            star = (st.p, st.s + 1)
            pi = st.p
            si = st.s + 1
        }
        while pi < p.count, p[pi] == "%" { pi += 1 }
        return pi == p.count
    }

    /// The functions: MISSING in, MISSING out; NULL or an argument of the wrong type, NULL out.
    static func call(_ f: Function, _ args: [JSONValue?]) -> JSONValue? {
        guard f.arity.contains(args.count) else { return .null }
        var values: [JSONValue] = []
        for a in args {
            guard let a else { return nil }
            values.append(a)
        }
        switch (f, values[0]) {
        case (.lower, .string(let s)): return .string(s.lowercased())
        case (.upper, .string(let s)): return .string(s.uppercased())
        case (.length, .string(let s)): return .int(Int64(s.count))
        case (.trim, .string(let s)): return .string(s.trimmingCharacters(in: .whitespacesAndNewlines))
        case (.contains, .string(let s)):
            guard case .string(let sub) = values[1] else { return .null }
            return .bool(sub.isEmpty || s.contains(sub))
        case (.abs, .int(let i)): return i == .min ? .double(-Double(i)) : .int(Swift.abs(i))
        case (.abs, .double(let d)): return .double(Swift.abs(d))
        case (.floor, .int), (.ceil, .int), (.round, .int): return values[0]
        case (.floor, .double(let d)): return integral(d.rounded(.down))
        case (.ceil, .double(let d)): return integral(d.rounded(.up))
        case (.round, .double(let d)): return integral(d.rounded(.toNearestOrAwayFromZero))
        case (.type, let v): return .string(typeName(v))
        case (.isArray, let v): return .bool(typeName(v) == "array")
        case (.isBoolean, let v): return .bool(typeName(v) == "boolean")
        case (.isNumber, let v): return .bool(typeName(v) == "number")
        case (.isObject, let v): return .bool(typeName(v) == "object")
        case (.isString, let v): return .bool(typeName(v) == "string")
        case (.arrayLength, .array(let a)): return .int(Int64(a.count))
        case (.position, .string(let s)):
            guard case .string(let sub) = values[1] else { return .null }
            return .int(position(of: sub, in: s))
        case (.substr, .string(let s)):
            return substring(s, values.dropFirst())
        case (.arrayContains, .array(let a)):
            if values[1] == .null { return .null }
            return .bool(a.contains { equal($0, values[1]) })
        default: return .null
        }
    }

    /// `POSITION()`: the code point offset of `sub`'s first occurrence in `s`, or -1.
    private static func position(of sub: String, in s: String) -> Int64 {
        guard let r = s.unicodeScalars.firstRange(of: sub.unicodeScalars) else { return -1 }
        return Int64(s.unicodeScalars.distance(from: s.unicodeScalars.startIndex, to: r.lowerBound))
    }

    /// `SUBSTR()`: `start` and `length` are whole numbers (a fraction, or another type, is
    /// NULL); a negative start counts from the end, as in N1QL.
    private static func substring(_ s: String, _ bounds: ArraySlice<JSONValue>) -> JSONValue {
        func whole(_ v: JSONValue) -> Int? {
            switch v {
            case .int(let i): return Int(clamping: i)
            case .double(let d) where d == d.rounded() && Swift.abs(d) < 9e15: return Int(d)
            default: return nil
            }
        }
        let scalars = s.unicodeScalars
        let count = scalars.count
        guard let first = bounds.first, var start = whole(first) else { return .null }
        if start < 0 { start = start < -count ? -1 : count + start }
        guard start >= 0, start <= count else { return .null }
        var length = count - start
        if bounds.count > 1 {
            guard let l = whole(bounds[bounds.startIndex + 1]), l >= 0 else { return .null }
            length = Swift.min(l, length)
        }
        let from = scalars.index(scalars.startIndex, offsetBy: start)
        let to = scalars.index(from, offsetBy: length)
        return .string(String(scalars[from..<to]))
    }

    /// A value's type as `TYPE()` names it.
    static func typeName(_ v: JSONValue) -> String {
        switch v {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// A whole double as an integer when it fits.
    private static func integral(_ d: Double) -> JSONValue {
        d >= -9.2e18 && d <= 9.2e18 ? .int(Int64(d)) : .double(d)
    }
}
