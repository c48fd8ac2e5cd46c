import Foundation
import Testing
import SetteeCrashKit
@_spi(Replication) @_spi(Server) @testable import Settee

/// Mango queries (`Database.createQuery(mango:)`) against a matcher written here from CouchDB 3's
/// rules: negations pushed down to the fields, then each condition matched on the field's value
/// (a field a document lacks matches only `$exists: false`), comparisons in the collation's order.
@Suite struct MangoQueryTests {
    // MARK: The reference: CouchDB's normalization and matching, on JSON values

    /// `{"$not": …}` and `$nor` pushed down to the fields, as CouchDB's `norm_negations` does.
    static func negate(_ selector: JSONValue) -> JSONValue {
        guard case .object(let o) = selector else { return selector }
        if o.count != 1 { return ["$or": .array(o.sorted { $0.key < $1.key }.map { negate(.object([$0.key: $0.value])) })] }
        let (k, v) = o.first!
        switch k {
        case "$not": return normalize(v)
        case "$nor": if case .array(let a) = v { return ["$or": .array(a.map(normalize))] }
        case "$and": if case .array(let a) = v { return ["$or": .array(a.map(negate))] }
        case "$or": if case .array(let a) = v { return ["$and": .array(a.map(negate))] }
        case "$lt": return ["$gte": v]
        case "$lte": return ["$gt": v]
        case "$gt": return ["$lte": v]
        case "$gte": return ["$lt": v]
        case "$eq": return ["$ne": v]
        case "$ne": return ["$eq": v]
        case "$in": return ["$nin": v]
        case "$nin": return ["$in": v]
        case "$exists": if case .bool(let b) = v { return ["$exists": .bool(!b)] }
        default:
            if k.hasPrefix("$") { return ["$not": selector] }
            return [k: negateCondition(v)]
        }
        return ["$not": selector]
    }

    /// A field's condition negated: operators as above, a plain value as `$ne`.
    static func negateCondition(_ c: JSONValue) -> JSONValue {
        if case .object(let o) = c, let first = o.keys.first, first.hasPrefix("$") { return negate(c) }
        if case .object(let o) = c, !o.isEmpty { return negate(c) }
        return ["$ne": c]
    }

    static func normalize(_ selector: JSONValue) -> JSONValue {
        guard case .object(let o) = selector else { return selector }
        var parts: [JSONValue] = []
        for (k, v) in o {
            switch k {
            case "$not": parts.append(negate(v))
            case "$nor": if case .array(let a) = v { parts.append(["$and": .array(a.map(negate))]) }
            case "$and", "$or": if case .array(let a) = v { parts.append([k: .array(a.map(normalize))]) }
            default: parts.append(k.hasPrefix("$") ? [k: v] : [k: normalizeCondition(v)])
            }
        }
        return parts.count == 1 ? parts[0] : ["$and": .array(parts)]
    }

    static func normalizeCondition(_ c: JSONValue) -> JSONValue {
        guard case .object(let o) = c else { return c }
        var parts: [JSONValue] = []
        for (k, v) in o {
            if k == "$not" { parts.append(negateCondition(v)) } else { parts.append([k: k.hasPrefix("$") ? v : normalizeCondition(v)]) }
        }
        return parts.count == 1 ? parts[0] : ["$and": .array(parts)]
    }

    static func cmp(_ a: JSONValue, _ b: JSONValue) -> Int {
        switch try! JSONCollation.compare(a, b) {
        case .orderedAscending: -1
        case .orderedSame: 0
        case .orderedDescending: 1
        }
    }

    static func type(_ v: JSONValue) -> String {
        switch v {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// Whether a normalized selector matches `value` (a document, or an element).
    static func matches(_ selector: JSONValue, _ value: JSONValue?) -> Bool {
        guard case .object(let o) = selector else { return false }
        for (k, v) in o {
            let ok: Bool
            switch k {
            case "$and": if case .array(let a) = v { ok = a.allSatisfy { matches($0, value) } } else { ok = false }
            case "$or": if case .array(let a) = v { ok = a.isEmpty || a.contains { matches($0, value) } } else { ok = false }
            case "$not": ok = !matches(v, value)
            default:
                if k.hasPrefix("$") {
                    ok = op(k, v, value)
                } else {
                    var field = value
                    for part in k.split(separator: ".", omittingEmptySubsequences: false) {
                        if case .object(let d)? = field { field = d[String(part)] } else { field = nil }
                    }
                    ok = condition(v, field)
                }
            }
            if !ok { return false }
        }
        return true
    }

    static func condition(_ c: JSONValue, _ field: JSONValue?) -> Bool {
        guard case .object(let o) = c, !o.isEmpty else { return field.map { cmp($0, c) == 0 } ?? false }
        if o.keys.allSatisfy({ !$0.hasPrefix("$") }) { return matches(c, field) }
        for (k, v) in o {
            switch k {
            case "$and":
                guard case .array(let a) = v, a.allSatisfy({ condition($0, field) }) else { return false }
            case "$or":
                guard case .array(let a) = v, a.isEmpty || a.contains(where: { condition($0, field) }) else { return false }
            case "$not":
                // A field-level `$not` is matched on a field the document has.
                guard field != nil, !condition(v, field) else { return false }
            default:
                guard let field else {
                    if k == "$exists", v == .bool(false) { continue }
                    return false
                }
                if !op(k, v, field) { return false }
            }
        }
        return true
    }

    static func op(_ k: String, _ arg: JSONValue, _ value: JSONValue?) -> Bool {
        guard let value else { return false }
        switch k {
        case "$eq": return cmp(value, arg) == 0
        case "$ne": return cmp(value, arg) != 0
        case "$lt": return cmp(value, arg) < 0
        case "$lte": return cmp(value, arg) <= 0
        case "$gt": return cmp(value, arg) > 0
        case "$gte": return cmp(value, arg) >= 0
        case "$exists": return arg == .bool(true)
        case "$type": return arg == .string(type(value))
        case "$in", "$nin":
            guard case .array(let args) = arg else { return false }
            let found: Bool
            if case .array(let vs) = value { found = args.contains { a in vs.contains { cmp($0, a) == 0 } } }
            else { found = args.contains { cmp(value, $0) == 0 } }
            return k == "$in" ? found : !found
        case "$size": if case .array(let vs) = value, case .int(let n) = arg { return vs.count == n }; return false
        case "$mod":
            guard case .array(let a) = arg, case .int(let d) = a[0], case .int(let r) = a[1] else { return false }
            if case .int(let n) = value { return n % d == r }
            if case .double(let x) = value, x.rounded() == x, abs(x) < 1e15 { return Int64(x) % d == r }
            return false
        case "$all":
            guard case .array(let args) = arg, !args.isEmpty, case .array(let vs) = value else { return false }
            if args.count == 1, args[0] == value { return true }
            return args.allSatisfy { a in vs.contains { cmp($0, a) == 0 } }
        case "$elemMatch", "$allMatch":
            guard case .array(let vs) = value else { return false }
            let each: (JSONValue) -> Bool = { e in
                if case .object(let o) = arg, o.keys.allSatisfy({ $0.hasPrefix("$") && !["$and", "$or", "$not", "$nor"].contains($0) }) {
                    return condition(normalizeCondition(arg), e)
                }
                return matches(normalize(arg), e)
            }
            return k == "$elemMatch" ? vs.contains(where: each) : (!vs.isEmpty && vs.allSatisfy(each))
        case "$beginsWith":
            if case .string(let s) = value, case .string(let p) = arg { return s.unicodeScalars.starts(with: p.unicodeScalars) }
            return false
        case "$regex":
            if case .string(let s) = value, case .string(let p) = arg { return s.range(of: p, options: .regularExpression) != nil }
            return false
        default: Issue.record("the reference has no \(k)"); return false
        }
    }

    // MARK: Random documents and selectors

    static let values: [JSONValue] = [.null, .bool(false), .bool(true), .int(0), .int(1), .int(2), .double(1.5), .int(-3), .int(7),
                                       .string("a"), .string("B"), .string("b"), .string("abc"), .string(""),
                                       .array([]), .array([.int(1), .int(2)]), .array([.string("a"), .null]), .array([.int(2)]),
                                       .object([:]), .object(["x": .int(1)])]

    static func pick<T>(_ a: [T], _ r: inout SplitMix) -> T { a[Int(r.next(below: UInt64(a.count)))] }

    static func document(_ r: inout SplitMix) -> [String: JSONValue] {
        var d: [String: JSONValue] = [:]
        for f in ["a", "b", "tags"] where r.chance(80) {
            d[f] = f == "tags" && r.chance(70) ? .array((0 ..< r.next(below: 4)).map { _ in pick(values, &r) }) : pick(values, &r)
        }
        if r.chance(60) { d["c"] = r.chance(80) ? ["d": pick(values, &r)] : pick(values, &r) }
        return d
    }

    static func scalar(_ r: inout SplitMix) -> JSONValue {
        pick(values.filter { if case .object = $0 { return false }; return true }, &r)
    }

    static func fieldCondition(_ r: inout SplitMix, depth: Int) -> JSONValue {
        switch r.next(below: 16) {
        case 0: return scalar(&r)
        case 1: return ["$eq": scalar(&r)]
        case 2: return ["$ne": scalar(&r)]
        case 3: return [pick(["$lt", "$lte", "$gt", "$gte"], &r): scalar(&r)]
        case 4: return ["$exists": .bool(r.chance(50))]
        case 5: return ["$type": .string(pick(["null", "boolean", "number", "string", "array", "object"], &r))]
        case 6: return [pick(["$in", "$nin"], &r): .array((0 ..< r.next(below: 3)).map { _ in scalar(&r) })]
        case 7: return ["$size": .int(Int64(r.next(below: 3)))]
        case 8: return ["$mod": [.int(2), .int(Int64(r.next(below: 2)))]]
        case 9: return ["$all": .array((0 ..< r.next(below: 3)).map { _ in scalar(&r) })]
        case 10: return ["$elemMatch": r.chance(50) ? [pick(["$gt", "$eq", "$lt"], &r): scalar(&r)] : ["x": scalar(&r)]]
        case 11: return ["$allMatch": [pick(["$gte", "$ne"], &r): scalar(&r)]]
        case 12: return ["$beginsWith": .string(pick(["a", "ab", "", "B"], &r))]
        case 13: return ["$regex": .string(pick(["^a", "b$", "[bc]", "A"], &r))]
        case 14 where depth < 2: return ["$not": fieldCondition(&r, depth: depth + 1)]
        default: return [pick(["$gt", "$lte"], &r): scalar(&r), "$ne": scalar(&r)]
        }
    }

    static func selector(_ r: inout SplitMix, depth: Int = 0) -> JSONValue {
        let field = pick(["a", "b", "tags", "c.d", "c"], &r)
        switch r.next(below: depth < 2 ? 10 : 6) {
        case 0 ..< 5: return [field: fieldCondition(&r, depth: depth)]
        case 5: return [field: fieldCondition(&r, depth: depth), pick(["a", "b"], &r): fieldCondition(&r, depth: depth)]
        case 6: return ["$and": [selector(&r, depth: depth + 1), selector(&r, depth: depth + 1)]]
        case 7: return ["$or": .array((0 ..< r.next(below: 3)).map { _ in selector(&r, depth: depth + 1) })]
        case 8: return ["$nor": [selector(&r, depth: depth + 1), selector(&r, depth: depth + 1)]]
        default: return ["$not": selector(&r, depth: depth + 1)]
        }
    }

    /// Random selectors over random documents, with and without indexes: the IDs the query
    /// returns are those the reference matches.
    @Test func selectorsMatchAsCouchDBMatches() throws {
        let seed = ProcessInfo.processInfo.environment["SETTEE_MANGO_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1 ... .max)
        print("MangoQueryTests.selectorsMatchAsCouchDBMatches seed \(seed) (SETTEE_MANGO_SEED=\(seed) repeats it)")
        var r = SplitMix(seed: seed)
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        var docs: [String: [String: JSONValue]] = [:]
        for i in 0 ..< 150 {
            let d = Self.document(&r)
            let id = String(format: "d%03d", i)
            docs[id] = d
            try db.saveDocument(MutableDocument(id: id, data: d))
        }
        for round in 0 ..< 2 {
            if round == 1 {
                try db.createIndex(ValueIndexConfiguration(["a"]), name: "a")
                try db.createIndex(ValueIndexConfiguration(["b", "a"]), name: "ba")
            }
            for _ in 0 ..< 400 {
                let sel = Self.selector(&r)
                let text = try JSONValue.object(["selector": sel]).jsonText()
                let expected = docs.filter { Self.matches(Self.normalize(sel), .object($0.value)) }.keys.sorted()
                let got = try db.createQuery(mango: text).execute().allResults().compactMap { $0.string(forKey: "_id") }.sorted()
                #expect(got == expected, "seed \(seed), round \(round): \(text)")
                if got != expected { print(try db.createQuery(mango: text).explain()); return }
                // One document at a time (what a feed filtered by a selector asks): the same.
                let query = try db.createQuery(mango: text)
                let one = try docs.filter { try query.matches(id: $0.key, properties: $0.value) }.keys.sorted()
                #expect(one == expected, "seed \(seed), one at a time: \(text)")
            }
        }
    }

    /// A query that reads stored documents gives each match's JSON as stored, from its own
    /// snapshot, whatever the plan: an index scan that reads documents, one that covers the
    /// select list, a full scan, a page read at once or streamed.
    @Test func matchesComeWithTheirStoredDocuments() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 30 {
            try await db.saveDocument(MutableDocument(id: "doc\(i)", data: ["type": i % 2 == 0 ? "task" : "note", "n": .int(Int64(i)), "pad": .string(String(repeating: "x", count: i))]))
        }
        func stored(_ id: String) throws -> [UInt8] { try #require(try db.document(withID: id)).storedJSON }
        let queries = [
            #"{"selector": {"type": "task"}, "fields": ["_id"], "sort": [{"type": "asc"}, {"n": "asc"}], "limit": 5}"#,
            #"{"selector": {"type": "task", "n": {"$gt": 10}}, "limit": 5}"#,
            #"{"selector": {"pad": {"$regex": "^xxx"}}, "fields": ["_id"]}"#,
        ]
        for (k, text) in queries.enumerated() {
            if k == 1 { try await db.createIndex(ValueIndexConfiguration(["type", "n"]), name: "by-type") }
            let q = try db.createQuery(mango: text)
            q.readsStoredDocuments = true
            let results = try q.execute().allResults()
            #expect(!results.isEmpty, "\(text)")
            for r in results {
                let id = try #require(r.string(forKey: "_id"))
                #expect(r.storedJSON == (try stored(id)), "\(text): \(id)")
            }
            var streamed = 0
            for try await r in q.results() {
                #expect(r.storedJSON == (try stored(try #require(r.string(forKey: "_id")))))
                streamed += 1
            }
            #expect(streamed == results.count)
            // Not asked: none.
            q.readsStoredDocuments = false
            #expect(try q.execute().allResults().allSatisfy { $0.storedJSON == nil })
        }
    }

    @Test func sortFieldsLimitAndSkip() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 20 {
            var d: [String: JSONValue] = ["type": i % 2 == 0 ? "task" : "note", "n": .int(Int64(i)), "meta": ["owner": .string("o\(i % 3)")]]
            if i == 4 { d["n"] = nil }
            try db.saveDocument(MutableDocument(id: "doc\(i)", data: d))
        }
        try db.createIndex(ValueIndexConfiguration(["type", "n"]), name: "by-type")
        let q = try db.createQuery(mango: #"{"selector": {"type": "task"}, "sort": [{"n": "desc"}], "fields": ["n", "meta.owner"], "limit": 3, "skip": 1}"#)
        #expect(try q.indexUsed() == "by-type")
        let rows = try q.execute().allResults()
        #expect(rows.map { $0.string(forKey: "_id") } == ["doc16", "doc14", "doc12"])
        #expect(rows.map { $0.int(forKey: "n") } == [16, 14, 12])
        #expect(rows.first?.string(forKey: "meta.owner") == "o1")
        #expect(rows.first?.string(forKey: "_rev")?.hasPrefix("1-") == true)
        // Sorting by a field keeps only documents that have it: doc4 has no n.
        let all = try db.createQuery(mango: #"{"selector": {"type": "task"}, "sort": ["n"]}"#).execute().allResults()
        #expect(all.count == 9 && !all.contains { $0.string(forKey: "_id") == "doc4" })
        // $keyMapMatch: a key of the object matches.
        let keyed = try db.createQuery(mango: #"{"selector": {"meta": {"$keyMapMatch": {"$eq": "owner"}}, "n": {"$lt": 2}}}"#)
        #expect(try keyed.execute().allResults().compactMap { $0.string(forKey: "_id") }.sorted() == ["doc0", "doc1"])
        let none = try db.createQuery(mango: #"{"selector": {"meta": {"$keyMapMatch": {"$regex": "^x"}}}}"#)
        #expect(try none.execute().allResults().isEmpty)
        let ids = try db.createQuery(mango: #"{"selector": {"_id": {"$gt": "doc18"}}, "sort": [{"_id": "desc"}]}"#)
        #expect(try ids.execute().allResults().compactMap { $0.string(forKey: "_id") } == ["doc9", "doc8", "doc7", "doc6", "doc5", "doc4", "doc3", "doc2", "doc19"])
        // Without fields, the whole document.
        let whole = try db.createQuery(mango: #"{"selector": {"n": 3}}"#).execute().allResults()
        #expect(whole.first?.dictionary(forKey: "_")?["type"] == .string("note"))
    }

    /// The typed query the server hands the library: the same statement as its JSON, selectors
    /// combined without compiling again, errors met where each part is made.
    @Test func typedQueryIsItsJSON() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 30 {
            try db.saveDocument(MutableDocument(id: "doc\(i)", data: ["type": i % 3 == 0 ? "task" : "note", "n": .int(Int64(i)), "owner": .string("o\(i % 2)")]))
        }
        let json: JSONValue = ["selector": ["type": "task", "n": ["$gte": 6]], "sort": [["n": "desc"]], "fields": ["n"], "limit": 3, "skip": 1]
        var typed = MangoQuery(selector: try MangoQuery.Selector(["type": "task", "n": ["$gte": 6]]))
        typed.sort = try MangoQuery.sort([["n": "desc"]])
        typed.fields = ["n"]
        typed.limit = 3
        typed.skip = 1
        #expect(try MangoCompiler.statement(typed) == MangoCompiler.statement(MangoQuery(parsing: json)))
        let rows = try db.createQuery(mango: typed).execute().allResults()
        #expect(rows.compactMap { $0.int(forKey: "n") } == [24, 21, 18])
        // Two selectors, each compiled once: both must hold.
        var both = MangoQuery(selector: .all([try MangoQuery.Selector(["type": "task"]), try MangoQuery.Selector(["owner": "o1"])]))
        both.sort = [try MangoQuery.SortField("n")]
        #expect(try db.createQuery(mango: both).execute().allResults().compactMap { $0.string(forKey: "_id") } == ["doc3", "doc9", "doc15", "doc21", "doc27"])
        #expect(try db.createQuery(mango: MangoQuery(selector: .all([]))).execute().allResults().count == 30)
        // Each part refuses what it cannot read, as it is made.
        #expect(throws: SetteeError.self) { try MangoQuery.Selector(["n": ["$bogus": 1]]) }
        #expect(throws: SetteeError.self) { try MangoQuery.SortField("a..b") }
        #expect(throws: SetteeError.self) { try MangoQuery.sort([["a": "asc"], ["b": "desc"]]) }
        #expect(throws: SetteeError.self) { try MangoQuery(parsing: ["selector": [:], "limit": -1]) }
        var badField = MangoQuery(selector: try MangoQuery.Selector([:]))
        badField.fields = ["a."]
        #expect(throws: SetteeError.self) { try db.createQuery(mango: badField) }
        // Negations on `_id` and `_rev` (strings every document has), as CouchDB answers them.
        func ids(_ selector: JSONValue) throws -> [String] {
            try db.createQuery(mango: MangoQuery(selector: try MangoQuery.Selector(selector))).execute().allResults()
                .compactMap { $0.string(forKey: "_id") }.sorted()
        }
        let every = (0 ..< 30).map { "doc\($0)" }.sorted()
        #expect(try ids(["_id": ["$not": ["$beginsWith": "doc1"]]]) == every.filter { !$0.hasPrefix("doc1") })
        #expect(try ids(["_id": ["$not": ["$regex": "^doc2"]]]) == every.filter { !$0.hasPrefix("doc2") })
        // A test that is false on a string (not an array): its negation holds for every document.
        #expect(try ids(["_id": ["$not": ["$size": 1]]]) == every)
        #expect(try ids(["_rev": ["$not": ["$beginsWith": "1-"]]]).isEmpty)
        // Terms of combined selectors count together against the bound.
        let half: JSONValue = ["n": ["$in": .array((0 ..< 2_100).map { JSONValue.int(Int64($0)) })]]
        let wide = MangoQuery(selector: .all([try MangoQuery.Selector(half), try MangoQuery.Selector(half)]))
        #expect(throws: SetteeError.self) { try db.createQuery(mango: wide) }
    }

    @Test(arguments: [
        (#"{"sort": []}"#, "missing required key: selector"),
        (#"{"selector": {"a": {"$foo": 1}}}"#, "Invalid operator: $foo"),
        (#"{"selector": {"$foo": 1}}"#, "Invalid operator: $foo"),
        (#"{"selector": {"a": {"$where": "x"}}}"#, "Unsupported operator: $where"),
        (#"{"selector": {"a": {"$beginsWith": 3}}}"#, "Invalid operator: $beginsWith"),
        (#"{"selector": {"a": {"$regex": 3}}}"#, "Invalid operator: $regex"),
        (#"{"selector": {"$or": {"a": 1}}}"#, "Bad argument for operator $or: {\"a\":1}"),
        (#"{"selector": {"a": {"$elemMatch": 1}}}"#, "Bad argument for operator $elemMatch: 1"),
        (#"{"selector": {"a": {"$gt": 1, "b": 2}}}"#, "mixes operators and field names"),
        (#"{"selector": {"a": {"$in": 3}}}"#, "Bad argument for operator $in: 3"),
        (#"{"selector": {"a": {"$size": -1}}}"#, "Bad argument for operator $size: -1"),
        (#"{"selector": {"a": {"$mod": [0, 1]}}}"#, "divisor must not be 0"),
        (#"{"selector": {"a": {"$type": 3}}}"#, "Bad argument for operator $type: 3"),
        (#"{"selector": {"a": {"$exists": 1}}}"#, "Bad argument for operator $exists: 1"),
        (#"{"selector": {}, "sort": [{"a": "asc"}, {"b": "desc"}]}"#, "single direction"),
        (#"{"selector": {}, "sort": [{"a": "up"}]}"#, "must be \"asc\" or \"desc\""),
        (#"{"selector": {}, "limit": -1}"#, "limit must be a non-negative integer"),
        (#"{"selector": {}, "bookmark": "x"}"#, "unknown member bookmark"),
        (#"{"selector": {"a..b": 1}}"#, "an empty name"),
        (#"{"selector": []}"#, "a selector is a JSON object"),
        (#"{"selector": {"a": {"$text": "x"}}}"#, "$text needs a text index"),
        (#"{"selector": "#, "not JSON"),
    ])
    func faultsAreNamed(_ text: String, _ expected: String) throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        do {
            _ = try db.createQuery(mango: text)
            Issue.record("accepted: \(text)")
        } catch let e as SetteeError {
            #expect(e.code == .invalidParameter && e.message.contains(expected), "\(text): \(e.message)")
        }
    }

    /// A selector nested past the bound is refused, not followed into a stack overflow.
    @Test func deepSelectorsAreRefused() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        var sel: JSONValue = ["a": 1]
        for _ in 0 ..< 200 { sel = ["$not": sel] }
        #expect(throws: SetteeError.self) { try db.createQuery(mango: try JSONValue.object(["selector": sel]).jsonText()) }
    }

    /// A selector's width is bounded as its depth is: 20,000 branches of `$or`, `$and` or
    /// `$nor`, 20,000 fields, or an `$in` of 20,000 values are refused before anything runs,
    /// naming the bound; a wide selector within it compiles to one flat AND or OR, answers as
    /// the reference does, and is evaluated without recursing per branch (the test runs on a
    /// thread of the cooperative pool, whose stack a recursion per branch overflows).
    @Test func wideSelectorsAreBoundedAndFlat() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 60 { try db.saveDocument(MutableDocument(id: String(format: "d%02d", i), data: ["n": .int(Int64(i))])) }
        func branches(_ n: Int, _ make: (Int) -> JSONValue) -> JSONValue { .array((0 ..< n).map(make)) }
        let hostile: [JSONValue] = [
            ["$or": branches(20_000) { ["n": .int(Int64($0))] }],
            ["$and": branches(20_000) { ["n": ["$ne": .int(Int64(-$0))]] }],
            ["$nor": branches(20_000) { ["n": .int(Int64(-$0))] }],
            .object(Dictionary(uniqueKeysWithValues: (0 ..< 20_000).map { ("f\($0)", JSONValue.int(1)) })),
            ["n": ["$in": branches(20_000) { .int(Int64($0)) }]],
            ["n": ["$or": branches(20_000) { ["$eq": .int(Int64($0))] }]],
        ]
        for selector in hostile {
            let text = try JSONValue.object(["selector": selector]).jsonText()
            #expect {
                _ = try db.createQuery(mango: text)
            } throws: { error in
                guard let e = error as? SetteeError else { return false }
                return e.code == .invalidParameter && e.message.contains("more than \(MangoCompiler.maxTerms) terms")
            }
        }
        // Within the bound: 2,000 branches, each one field (4,001 terms).
        let wide: JSONValue = ["$or": branches(2_000) { ["n": .int(Int64($0 * 3))] }]
        let statement = try MangoCompiler.statement(MangoQuery(parsing: ["selector": wide]))
        guard case .or(let terms)? = statement.whereClause else { Issue.record("not one flat OR: \(String(describing: statement.whereClause))"); return }
        #expect(terms.count == 2_000)
        let query = try db.createQuery(mango: try JSONValue.object(["selector": wide]).jsonText())
        let ids = try query.execute().allResults().compactMap { $0.string(forKey: "_id") }
        #expect(ids == stride(from: 0, to: 60, by: 3).map { String(format: "d%02d", $0) })
        #expect(try query.matches(id: "x", properties: ["n": 57]) && !(try query.matches(id: "x", properties: ["n": 58])))
        // Three terms a branch: the branch, its field, its operator.
        let conjunction: JSONValue = ["$and": branches(1_300) { ["n": ["$ne": .int(Int64(-1 - $0))]] }]
        #expect(try db.createQuery(mango: try JSONValue.object(["selector": conjunction]).jsonText()).execute().allResults().count == 60)
        let negated: JSONValue = ["$nor": branches(2_000) { ["n": .int(Int64($0 + 10))] }]
        #expect(try db.createQuery(mango: try JSONValue.object(["selector": negated]).jsonText()).execute().allResults().count == 10)
    }

    /// An AND or OR of a hundred thousand terms built in the library is one level: evaluated,
    /// compared, printed and freed without a recursion per term.
    @Test func flatConditionsDoNotRecursePerTerm() throws {
        let terms = (0 ..< 100_000).map { QueryExpression.compare(.equal, .property(try! PropertyPath("n")), .literal(.int(Int64($0)))) }
        let any = QueryExpression.any(terms)
        let all = QueryExpression.all(terms.map { QueryExpression.not($0) })
        let row = QueryRow(id: "x", revisionID: "1-x", sequence: 1, isDeleted: false, expiration: nil, properties: ["n": 99_999])
        #expect(try any.evaluate(row, parameters: [:]) == .bool(true))
        #expect(try all.evaluate(row, parameters: [:]) == .bool(false))
        #expect(any == QueryExpression.any(terms) && any != all)
        #expect(QueryExpression.and(all, all) == .and(terms.map { .not($0) } + terms.map { .not($0) }))
        #expect(any.sqlText.hasPrefix("((n = 0) OR (n = 1) OR"))
        // MISSING and NULL as the two-term rules give them, in any order.
        let missing = QueryExpression.property(try PropertyPath("none"))
        #expect(try QueryExpression.all([.literal(true), missing, .literal(.null)]).evaluate(row, parameters: [:]) == nil)
        #expect(try QueryExpression.all([.literal(.null), .literal(true)]).evaluate(row, parameters: [:]) == .null)
        #expect(try QueryExpression.any([missing, .literal(.null), .literal(false)]).evaluate(row, parameters: [:]) == .null)
        #expect(try QueryExpression.any([missing, .literal(false)]).evaluate(row, parameters: [:]) == nil)
    }
}
