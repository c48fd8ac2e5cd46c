// Compiled only into fuzzing and test builds (`SETTEE_DECODER_FUZZING`: debug builds, and
// `scripts/fuzz`), never into the library an application ships.
#if SETTEE_DECODER_FUZZING
/// The fuzz entry points of the query languages (`Tests/Fuzz`, `scripts/fuzz`): SQL++ text and
/// Mango queries, the text users and servers hand the library. Whatever compiles is planned,
/// written back as SQL++ text and evaluated on a few documents. An error is fine; a crash, a
/// hang, a runaway allocation, an evaluation that answers differently the second time, or a
/// statement whose WHERE the planner splits into other terms than it holds is a finding.
package enum QueryFuzzing {
    /// An input's SQL++ statement (or, when it is not one, expression).
    package static func sql(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        if let statement = try? SQLParser.parse(text) {
            exercise(statement)
        } else if let e = try? SQLParser.parseExpression(text) {
            var s = SelectStatement()
            s.whereClause = e
            exercise(s)
        }
    }

    /// An input's Mango query (a `_find` body's `selector`, `sort`, `fields`, `limit`, `skip`).
    package static func mango(_ data: UnsafeRawBufferPointer) {
        guard let json = try? JSONParser.parse(data), let statement = try? MangoCompiler.statement(MangoQuery(parsing: json)) else { return }
        exercise(statement)
    }

    /// Plans the statement, writes it as text and evaluates its WHERE on every sample document.
    private static func exercise(_ s: SelectStatement) {
        _ = try? QueryPlanner.plan(s, indexes: [])
        if let w = s.whereClause {
            _ = w.sqlText
            let conjuncts = QueryPlanner.conjuncts(w)
            precondition(!conjuncts.isEmpty, "a WHERE splits into no conjuncts")
            for c in conjuncts {
                if case .and = c { preconditionFailure("an AND holds an AND: the tree is not flat") }
            }
            let regexes = RegexCache()
            for row in samples {
                let first = try? w.evaluate(row, parameters: [:], regexes: regexes)
                let again = try? w.evaluate(row, parameters: [:], regexes: regexes)
                precondition(first == again, "a WHERE answers differently the second time")
            }
        }
        for case .expression(let e, _) in s.items { _ = try? e.evaluate(samples[0], parameters: [:]) }
    }

    /// Documents of the shapes queries read: scalars of each type, arrays, nested objects, and
    /// nothing at all.
    private static let samples: [QueryRow] = [
        QueryRow(id: "a", revisionID: "1-a", sequence: 1, isDeleted: false, expiration: nil,
                 properties: ["a": 1, "b": "text", "c": [1, 2, "x"], "d": ["e": .null, "f": [["g": 2.5]]], "t": true]),
        QueryRow(id: "b", revisionID: "2-b", sequence: 2, isDeleted: false, expiration: nil,
                 properties: ["a": "1", "b": .null, "c": [], "d": [:], "n": -9_007_199_254_740_993]),
        QueryRow(id: "c", revisionID: "3-c", sequence: 3, isDeleted: true, expiration: nil, properties: [:]),
    ]

    /// Seeds for the fuzzer: ordinary queries, and queries at and past the bounds of width and
    /// depth (what a hostile client sends).
    package static func seedInputs() -> [(name: String, sql: Bool, bytes: [UInt8])] {
        var out: [(String, Bool, [UInt8])] = []
        func sql(_ name: String, _ text: String) { out.append((name, true, Array(text.utf8))) }
        func mango(_ name: String, _ text: String) { out.append((name, false, Array(text.utf8))) }
        sql("select", "SELECT META().id, title FROM _ WHERE type = 'task' AND NOT done ORDER BY createdAt DESC LIMIT 20")
        sql("functions", "SELECT lower(b), count(*) FROM _ WHERE ANY x IN c SATISFIES x > 1 END OR b LIKE 't%' GROUP BY b HAVING count(*) > 1")
        sql("wide-or", (0 ..< 3000).map { "a = \($0)" }.joined(separator: " OR "))
        sql("too-wide-and", (0 ..< 5001).map { "a=\($0 % 10)" }.joined(separator: " AND "))
        sql("deep-parentheses", String(repeating: "(", count: 300) + "a" + String(repeating: ")", count: 300))
        sql("long-in", "a IN [" + (0 ..< 5000).map(String.init).joined(separator: ",") + "]")
        mango("selector", #"{"selector": {"type": "task", "n": {"$gt": 3}, "$or": [{"a": 1}, {"b": {"$regex": "^t"}}]}, "sort": ["n"], "limit": 5}"#)
        mango("operators", #"{"selector": {"c": {"$elemMatch": {"$gte": 2}}, "d": {"$exists": true}, "$nor": [{"a": {"$in": [1, 2]}}], "b": {"$not": {"$size": 0}}}}"#)
        func branches(_ op: String, _ n: Int) -> String {
            #"{"selector":{""# + op + #"":["# + (0 ..< n).map { #"{"a":\#($0 % 10)}"# }.joined(separator: ",") + "]}}"
        }
        mango("wide-or", branches("$or", 2000))
        mango("too-wide-and", branches("$and", 5000))
        mango("too-wide-nor", branches("$nor", 5000))
        mango("many-fields", #"{"selector":{"# + (0 ..< 5000).map { #""f\#($0)":1"# }.joined(separator: ",") + "}}")
        mango("deep-not", #"{"selector": "# + String(repeating: #"{"$not": "#, count: 100) + #"{"a": 1}"# + String(repeating: "}", count: 100) + "}")
        mango("deep-and", #"{"selector": "# + String(repeating: #"{"$and": ["#, count: 60) + #"{"a": 1}"# + String(repeating: "]}", count: 60) + "}")
        return out
    }
}
#endif
