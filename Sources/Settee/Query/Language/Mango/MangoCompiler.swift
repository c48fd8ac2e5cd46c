import Foundation

/// Compiles CouchDB's Mango queries (``MangoQuery``: the body of `_find`, `selector`, `sort`,
/// `fields`, `limit`, `skip`) to the statement SQL++ and QueryBuilder compile to, so that one
/// planner and one key order answer all three.
///
/// A selector matches as CouchDB 3 matches (`Formats/http-api.md`, "Mango"): a condition on a
/// field the document lacks is false (except `$exists: false`); `$eq` and the order operators
/// compare in the collation's order, across types (`null` sorts first, so `{"$lt": 5}` matches
/// `null`); `$in`, `$nin` and `$all` look inside an array field; `$not` and `$nor` are pushed
/// down to the fields as CouchDB normalizes them. Sorting by a field keeps only documents that
/// have it (as a CouchDB sort, which reads an index holding the field, does).
///
/// ```swift
/// let statement = try MangoCompiler.statement(MangoQuery(parsing: ["selector": ["type": "task"]]))
/// ```
enum MangoCompiler {
    /// The deepest nesting of operators compiled (a bound for hostile selectors).
    static let maxDepth = 64
    /// The most terms a query may hold: every field, operator and branch of its selector, every
    /// value of an `$in`, `$nin` or `$all`, every sort and `fields` entry counts one. A bound on
    /// width, as ``maxDepth`` bounds depth, so that what one query asks of each document it
    /// reads stays small (real selectors hold tens of terms; an `$in` of a few thousand IDs
    /// fits).
    static let maxTerms = 4096

    static func statement(_ query: MangoQuery) throws(SetteeError) -> SelectStatement {
        let fieldCount = query.fields?.count ?? 0
        guard query.selector.terms <= maxTerms - min(maxTerms, fieldCount + query.sort.count) else { throw tooManyTerms() }
        var condition = query.selector.condition
        var s = SelectStatement()
        s.items = [.expression(.meta(.id), name: "_id"), .expression(.meta(.revisionID), name: "_rev")]
        if let fields = query.fields {
            for name in fields { s.items.append(.expression(documentValue(try path(name)), name: name)) }
        } else {
            s.items.append(.all)
        }
        if !query.sort.isEmpty {
            var present: [QueryExpression] = []
            for key in query.sort {
                let value = documentValue(key.path)
                // CouchDB sorts by reading an index that holds the field: documents without it
                // are not in the answer.
                present.append(.test(.isNotMissing, value))
                s.orderBy.append(.init(expression: value, descending: key.descending))
            }
            condition = .all([condition] + present)
        }
        if let partition = query.partition {
            // The equality lets the planner read a partitioned index; the ID prefix is exact
            // where the collation's equality is not.
            condition = .all([condition, .compare(.equal, .partitionOfID, .literal(.string(partition)))])
            s.documentIDPrefix = partition + ":"
        }
        s.whereClause = condition
        s.limit = query.limit.map { .literal(.int(Int64($0))) }
        s.offset = query.skip > 0 ? .literal(.int(Int64(query.skip))) : nil
        return s
    }

    /// A selector's condition and the terms it holds.
    static func selector(_ json: JSONValue) throws(SetteeError) -> (QueryExpression, Int) {
        var compiler = Compiler()
        let condition = try compiler.selector(json, base: .document, negated: false, depth: 0)
        return (condition, compiler.terms)
    }

    static func tooManyTerms() -> SetteeError {
        fail("the query holds more than \(maxTerms) terms (fields, operators, branches and listed values)")
    }

    /// A Mango field name as a path: dots separate names, `\.` is a dot inside one.
    static func path(_ field: String) throws(SetteeError) -> PropertyPath {
        var components: [PropertyPath.Component] = []
        var name = ""
        var escaped = false
        for ch in field {
            if escaped {
                name.append(ch)
                escaped = false
            } else if ch == "\\" {
                escaped = true
            } else if ch == "." {
                guard !name.isEmpty else { throw fail("invalid field name \(field): an empty name") }
                components.append(step(name))
                name = ""
            } else {
                name.append(ch)
            }
        }
        guard !name.isEmpty, !escaped else { throw fail("invalid field name \(field): an empty name or a dangling \\") }
        guard !field.unicodeScalars.contains("\u{0}") else { throw fail("invalid field name: a NUL character") }
        components.append(step(name))
        guard components.count <= PropertyPath.maxComponents else { throw fail("field name \(field) has too many parts") }
        return PropertyPath(components: components)
    }

    /// One part of a field name: a number from 0 (`favorites.3`) is also an array's element,
    /// as CouchDB's `mango_doc:get_field` reads it (a sign is allowed, as Erlang's
    /// `list_to_integer` allows it).
    static func step(_ name: String) -> PropertyPath.Component {
        if let n = Int(name), n >= 0 { return .nameOrIndex(name, index: n) }
        return .name(name)
    }

    /// A field of the document: `_id` and `_rev` are its ID and current revision, as in
    /// CouchDB's documents.
    static func documentValue(_ path: PropertyPath) -> QueryExpression {
        if path.components.count == 1, case .name(let n) = path.components[0] {
            if n == "_id" { return .meta(.id) }
            if n == "_rev" { return .meta(.revisionID) }
        }
        return .property(path)
    }

    static func fail(_ message: String) -> SetteeError { SetteeError(.invalidParameter, "mango: " + message) }

    /// An operator given what it cannot take, in CouchDB's words ("Bad argument for operator
    /// $in: 3"), so that a server can answer as CouchDB does.
    static func badArgument(_ op: String, _ arg: JSONValue) -> SetteeError {
        fail("Bad argument for operator \(op): \((try? arg.jsonText()) ?? "?")")
    }

    /// An operator Mango does not have, or one given an argument CouchDB does not read as that
    /// operator's ("Invalid operator: $bogus").
    static func invalidOperator(_ op: String) -> SetteeError { fail("Invalid operator: \(op)") }

    /// The `$type` names a value has; any other name matches nothing, as in CouchDB.
    static let typeNames: Set<String> = ["null", "boolean", "number", "string", "array", "object"]

    /// Operators CouchDB knows and refuses.
    static let unsupported: Set<String> = ["$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere"]

    /// What a field's conditions apply to: the document, or the element (or key) an
    /// `$elemMatch`, `$allMatch` or `$keyMapMatch` is looking at.
    enum Base {
        case document
        case variable(String)

        func value(_ path: PropertyPath) -> QueryExpression {
            switch self {
            case .document: MangoCompiler.documentValue(path)
            case .variable(let v): .variable(v, path)
            }
        }
    }

    private struct Compiler {
        var variables = 0
        /// Terms counted so far (``MangoCompiler/maxTerms``).
        var terms = 0

        /// Counts `n` more terms; past the bound, the query is refused before more is compiled.
        mutating func count(_ n: Int = 1) throws(SetteeError) {
            terms += min(n, MangoCompiler.maxTerms + 1)
            guard terms <= MangoCompiler.maxTerms else { throw MangoCompiler.tooManyTerms() }
        }

        mutating func fresh() -> String {
            variables += 1
            return "mango\(variables)"
        }

        /// A selector: an object whose members all hold (an empty one matches everything).
        /// `negated` compiles its negation the way CouchDB normalizes one: pushed down to the
        /// fields (De Morgan; `$lt` becomes `$gte`, `$in` `$nin`, `$exists: true` `false`, and
        /// so on), so a field the document lacks fails a negated condition too.
        mutating func selector(_ value: JSONValue, base: Base, negated: Bool, depth: Int) throws(SetteeError) -> QueryExpression {
            guard depth < MangoCompiler.maxDepth else { throw fail("a selector nested more than \(MangoCompiler.maxDepth) levels") }
            guard case .object(let members) = value else { throw fail("a selector is a JSON object, not \(value.jsonTextOrType)") }
            try count(members.count)
            var parts: [QueryExpression] = []
            // A sorted order makes the compiled statement (and its plan) the same every time.
            for (key, v) in members.sorted(by: { $0.key < $1.key }) {
                if key.hasPrefix("$") {
                    parts.append(try combination(key, v, base: base, negated: negated, depth: depth))
                } else {
                    parts.append(try field(MangoCompiler.path(key), v, base: base, negated: negated, depth: depth))
                }
            }
            return negated ? disjunction(parts) : conjunction(parts)
        }

        /// One flat AND of the parts, however many (no level per part).
        func conjunction(_ parts: [QueryExpression]) -> QueryExpression { .all(parts) }

        /// As CouchDB: an empty `$or` matches everything.
        func disjunction(_ parts: [QueryExpression]) -> QueryExpression {
            parts.isEmpty ? .literal(.bool(true)) : .any(parts)
        }

        /// TRUE where `e` is TRUE, FALSE everywhere else (MISSING and NULL included): what a
        /// negation negates.
        func truth(_ e: QueryExpression) -> QueryExpression {
            .compare(.equal, .function(.ifMissingOrNull, [e, .literal(.bool(false))]), .literal(.bool(true)))
        }

        /// `$and`, `$or`, `$nor` (arrays of selectors) and `$not` (a selector).
        mutating func combination(_ op: String, _ v: JSONValue, base: Base, negated: Bool, depth: Int) throws(SetteeError) -> QueryExpression {
            switch op {
            case "$and", "$or", "$nor":
                guard case .array(let list) = v else { throw MangoCompiler.badArgument(op, v) }
                try count(list.count)
                // $nor is $and of the negations.
                let inner = op == "$nor" ? !negated : negated
                var parts: [QueryExpression] = []
                for s in list { parts.append(try selector(s, base: base, negated: inner, depth: depth + 1)) }
                let all = (op == "$and" || op == "$nor") != negated
                return all ? conjunction(parts) : disjunction(parts)
            case "$not":
                return try selector(v, base: base, negated: !negated, depth: depth + 1)
            default:
                if MangoCompiler.unsupported.contains(op) { throw fail("Unsupported operator: \(op)") }
                throw MangoCompiler.invalidOperator(op)
            }
        }

        /// A field's condition: an object of operators, an object of sub-fields (`{"a": {"b":
        /// 1}}` is `a.b` equal to 1), or a value it must equal.
        mutating func field(_ path: PropertyPath, _ v: JSONValue, base: Base, negated: Bool, depth: Int) throws(SetteeError) -> QueryExpression {
            guard depth < MangoCompiler.maxDepth else { throw fail("a selector nested more than \(MangoCompiler.maxDepth) levels") }
            guard case .object(let members) = v, !members.isEmpty else {
                return try condition("$eq", v, path: path, base: base, negated: negated, depth: depth)
            }
            try count(members.count)
            let operators = members.keys.filter { $0.hasPrefix("$") }
            var parts: [QueryExpression] = []
            if operators.isEmpty {
                for (key, sub) in members.sorted(by: { $0.key < $1.key }) {
                    let subPath = try MangoCompiler.path(key)
                    parts.append(try field(PropertyPath(components: path.components + subPath.components), sub, base: base,
                                           negated: negated, depth: depth + 1))
                }
            } else {
                guard operators.count == members.count else { throw fail("a field's condition mixes operators and field names") }
                for (op, arg) in members.sorted(by: { $0.key < $1.key }) {
                    parts.append(try condition(op, arg, path: path, base: base, negated: negated, depth: depth))
                }
            }
            return negated ? disjunction(parts) : conjunction(parts)
        }

        /// The operators a negation turns into another (CouchDB's normalization).
        static let opposites: [String: String] = ["$lt": "$gte", "$gte": "$lt", "$lte": "$gt", "$gt": "$lte",
                                                   "$eq": "$ne", "$ne": "$eq", "$in": "$nin", "$nin": "$in"]

        /// One operator on one field.
        mutating func condition(_ op: String, _ arg: JSONValue, path: PropertyPath, base: Base, negated: Bool, depth: Int) throws(SetteeError) -> QueryExpression {
            let value = base.value(path)
            let present = QueryExpression.test(.isNotMissing, value)
            if negated {
                if let opposite = Self.opposites[op] { return try condition(opposite, arg, path: path, base: base, negated: false, depth: depth) }
                switch op {
                case "$exists":
                    guard case .bool(let b) = arg else { throw MangoCompiler.badArgument(op, arg) }
                    return try condition(op, .bool(!b), path: path, base: base, negated: false, depth: depth)
                case "$not":
                    return try field(path, arg, base: base, negated: false, depth: depth + 1)
                case "$and", "$or", "$nor":
                    break
                default:
                    // What has no opposite is negated on a field the document has. `_id` and
                    // `_rev` are strings every document has: a prefix or a pattern on them is
                    // TRUE or FALSE, never MISSING or NULL, so nothing more is evaluated.
                    let plain = try condition(op, arg, path: path, base: base, negated: false, depth: depth)
                    if case .meta(let m) = value, m == .id || m == .revisionID {
                        return .not(op == "$beginsWith" || op == "$regex" ? plain : truth(plain))
                    }
                    return .and(present, .not(truth(plain)))
                }
            }
            switch op {
            case "$eq":
                return arg == .null ? .test(.isNull, value) : .compare(.equal, value, .literal(arg))
            case "$ne":
                return arg == .null ? .test(.isValued, value) : .or(.test(.isNull, value), .compare(.notEqual, value, .literal(arg)))
            case "$gt":
                return arg == .null ? .test(.isValued, value) : .compare(.greater, value, .literal(arg))
            case "$gte":
                return arg == .null ? present : .compare(.greaterOrEqual, value, .literal(arg))
            case "$lt":
                // NULL sorts before every other value.
                return arg == .null ? .literal(.bool(false)) : .or(.test(.isNull, value), .compare(.less, value, .literal(arg)))
            case "$lte":
                return arg == .null ? .test(.isNull, value) : .or(.test(.isNull, value), .compare(.lessOrEqual, value, .literal(arg)))
            case "$exists":
                guard case .bool(let b) = arg else { throw MangoCompiler.badArgument(op, arg) }
                return .test(b ? .isNotMissing : .isMissing, value)
            case "$type":
                guard case .string(let t) = arg else { throw MangoCompiler.badArgument(op, arg) }
                guard MangoCompiler.typeNames.contains(t) else { return .literal(.bool(false)) }
                return .compare(.equal, .function(.type, [value]), .literal(.string(t)))
            case "$in":
                return try inList(arg, value, op: op)
            case "$nin":
                return .and(present, .not(truth(try inList(arg, value, op: op))))
            case "$size":
                guard case .int(let n) = arg, n >= 0 else { throw MangoCompiler.badArgument(op, arg) }
                return .compare(.equal, .function(.arrayLength, [value]), .literal(.int(n)))
            case "$mod":
                guard case .array(let a) = arg, a.count == 2, case .int(let divisor) = a[0], case .int(let remainder) = a[1] else {
                    throw MangoCompiler.badArgument(op, arg)
                }
                guard divisor != 0 else { throw fail("$mod: the divisor must not be 0") }
                // An integer field only, as CouchDB: a whole value, not one with a fraction.
                return .and(.compare(.equal, .function(.round, [value]), value),
                            .compare(.equal, .arithmetic(.modulo, value, .literal(.int(divisor))), .literal(.int(remainder))))
            case "$regex":
                guard case .string = arg else { throw MangoCompiler.invalidOperator(op) }
                return .function(.regexpContains, [value, .literal(arg)])
            case "$beginsWith":
                guard case .string(let prefix) = arg else { throw MangoCompiler.invalidOperator(op) }
                var pattern = ""
                for ch in prefix {
                    if ch == "%" || ch == "_" || ch == "\\" { pattern.append("\\") }
                    pattern.append(ch)
                }
                return .like(value, .literal(.string(pattern + "%")))
            case "$all":
                guard case .array(let wanted) = arg else { throw MangoCompiler.badArgument(op, arg) }
                try count(wanted.count)
                if wanted.isEmpty { return .literal(.bool(false)) }
                let isArray = QueryExpression.compare(.equal, .function(.isArray, [value]), .literal(.bool(true)))
                var parts: [QueryExpression] = [isArray]
                for w in wanted {
                    if w == .null {
                        let v = fresh()
                        parts.append(.quantified(.any, variable: v, in: value, satisfies: .test(.isNull, .variable(v, PropertyPath(components: [])))))
                    } else {
                        parts.append(.function(.arrayContains, [value, .literal(w)]))
                    }
                }
                let all = conjunction(parts)
                // `{"$all": [[…]]}` also matches the array itself.
                if wanted.count == 1, case .array = wanted[0] { return .or(all, .compare(.equal, value, .literal(wanted[0]))) }
                return all
            case "$elemMatch", "$allMatch":
                let v = fresh()
                let inner = try selectorOrConditions(arg, op: op, base: .variable(v), depth: depth + 1)
                return .quantified(op == "$elemMatch" ? .any : .anyAndEvery, variable: v, in: value, satisfies: inner)
            case "$keyMapMatch":
                let v = fresh()
                let inner = try selectorOrConditions(arg, op: op, base: .variable(v), depth: depth + 1)
                return .quantified(.any, variable: v, in: .function(.objectNames, [value]), satisfies: inner)
            case "$not":
                return try field(path, arg, base: base, negated: true, depth: depth + 1)
            case "$and", "$or", "$nor":
                guard case .array(let list) = arg else { throw MangoCompiler.badArgument(op, arg) }
                try count(list.count)
                let inner = op == "$nor" ? !negated : negated
                var parts: [QueryExpression] = []
                for c in list { parts.append(try field(path, c, base: base, negated: inner, depth: depth + 1)) }
                let all = (op == "$and" || op == "$nor") != negated
                return all ? conjunction(parts) : disjunction(parts)
            case "$text":
                throw fail("$text needs a text index, which this server does not have")
            default:
                if MangoCompiler.unsupported.contains(op) { throw fail("Unsupported operator: \(op)") }
                throw MangoCompiler.invalidOperator(op)
            }
        }

        /// What `$elemMatch` and the like take: a selector on the element's fields, or
        /// operators on the element itself (`{"$gt": 3}`).
        mutating func selectorOrConditions(_ arg: JSONValue, op: String, base: Base, depth: Int) throws(SetteeError) -> QueryExpression {
            guard case .object(let members) = arg else { throw MangoCompiler.badArgument(op, arg) }
            let combinations: Set<String> = ["$and", "$or", "$nor", "$not"]
            if !members.isEmpty, members.keys.allSatisfy({ $0.hasPrefix("$") && !combinations.contains($0) }) {
                return try field(PropertyPath(components: []), arg, base: base, negated: false, depth: depth)
            }
            return try selector(arg, base: base, negated: false, depth: depth)
        }

        /// `$in`: the field, or (when it is an array) one of its elements, equals one of the
        /// values.
        mutating func inList(_ arg: JSONValue, _ value: QueryExpression, op: String) throws(SetteeError) -> QueryExpression {
            guard case .array(let list) = arg else { throw MangoCompiler.badArgument(op, arg) }
            try count(list.count)
            func matches(_ e: QueryExpression) -> QueryExpression {
                var parts: [QueryExpression] = []
                if list.contains(.null) { parts.append(.test(.isNull, e)) }
                let others = list.filter { $0 != .null }
                if !others.isEmpty { parts.append(.in(e, others.map { .literal($0) })) }
                // An empty list matches nothing (where an empty `$or` matches everything).
                return parts.isEmpty ? .literal(.bool(false)) : disjunction(parts)
            }
            let v = fresh()
            let element = QueryExpression.variable(v, PropertyPath(components: []))
            let notArray = QueryExpression.compare(.equal, .function(.isArray, [value]), .literal(.bool(false)))
            return .or(.and(notArray, matches(value)), .quantified(.any, variable: v, in: value, satisfies: matches(element)))
        }
    }
}

extension JSONValue {
    /// A short description for an error: the value's JSON when short, else its type.
    fileprivate var jsonTextOrType: String {
        if let t = try? jsonText(), t.count <= 40 { return t }
        return QueryExpression.typeName(self)
    }
}
