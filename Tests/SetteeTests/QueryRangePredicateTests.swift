import Foundation
import Testing
@testable import Settee

/// `ANY`, `EVERY` and `ANY AND EVERY … SATISFIES … END`: their truth over arrays, empty
/// arrays, MISSING, NULL and other values; variables and paths into them; nesting and
/// shadowing; the parser's forms, errors and depth bound.
@Suite struct QueryRangePredicateTests {
    let row = QueryRow(id: "d", revisionID: "1-a", sequence: 1, isDeleted: false, expiration: nil, properties: [
        "tags": ["a", "b"], "empty": [], "nothing": .null, "word": "a", "number": 1, "object": ["k": "a"],
        "nulls": [.null, "a"], "items": [["name": "x", "qty": 2], ["name": "y", "qty": 5]],
        "lists": [["k": 1, "items": [1, 2]], ["k": 4, "items": [3]]], "x": [1], "k": "a",
    ])

    private func eval(_ text: String) throws -> JSONValue? {
        try SQLParser.parseExpression(text).evaluate(row, parameters: [:])
    }

    @Test func truthOverEveryKindOfValue() throws {
        // array, then ANY, EVERY, ANY AND EVERY of `v = 'a'`.
        let cases: [(String, JSONValue?, JSONValue?, JSONValue?)] = [
            ("tags", true, false, false),
            ("['a', 'a']", true, true, true),
            ("['b']", false, false, false),
            ("empty", false, true, false),
            // MISSING and NULL propagate, as through every operator.
            ("nope", nil, nil, nil),
            ("nothing", .null, .null, .null),
            // A value that is not an array is no collection: false for all three.
            ("word", false, false, false),
            ("number", false, false, false),
            ("object", false, false, false),
            // NULL elements do not satisfy the condition (it is not true for them).
            ("nulls", true, false, false),
        ]
        for (array, any, every, anyAndEvery) in cases {
            #expect(try eval("ANY v IN \(array) SATISFIES v = 'a' END") == any, "ANY over \(array)")
            #expect(try eval("EVERY v IN \(array) SATISFIES v = 'a' END") == every, "EVERY over \(array)")
            #expect(try eval("ANY AND EVERY v IN \(array) SATISFIES v = 'a' END") == anyAndEvery, "ANY AND EVERY over \(array)")
        }
        // NOT of a MISSING predicate stays MISSING, so it matches nothing either way.
        #expect(try eval("NOT (ANY v IN nope SATISFIES v = 'a' END)") == nil)
        #expect(try eval("EVERY v IN nulls SATISFIES v IS NULL OR v = 'a' END") == true)
    }

    @Test func variablesPathsNestingAndShadowing() throws {
        #expect(try eval("ANY i IN items SATISFIES i.qty > 4 AND i.name = 'y' END") == true)
        #expect(try eval("ANY i IN items SATISFIES i.qty > 4 AND i.name = 'x' END") == false)
        #expect(try eval("EVERY i IN items SATISFIES i.qty > 1 END") == true)
        #expect(try eval("ANY i IN items SATISFIES i.missing IS MISSING END") == true)
        #expect(try eval("ANY i IN items SATISFIES i[0] IS MISSING END") == true)
        // The outer variable is visible inside the inner predicate.
        #expect(try eval("ANY l IN lists SATISFIES ANY n IN l.items SATISFIES n = l.k END END") == true)
        #expect(try eval("EVERY l IN lists SATISFIES ANY n IN l.items SATISFIES n = l.k END END") == false)
        // An inner variable hides an outer one of the same name.
        #expect(try eval("ANY v IN lists SATISFIES ANY v IN v.items SATISFIES v = 3 END END") == true)
        // The array is read outside the variable's scope: `x IN x` reads the document's x.
        #expect(try eval("ANY x IN x SATISFIES x = 1 END") == true)
        // Outside the predicate the name is the document's property again.
        #expect(try eval("(ANY k IN tags SATISFIES k = 'b' END) AND k = 'a'") == true)
        // A variable the tree holds without its binder is an error, not MISSING.
        #expect(throws: SetteeError.self) { try QueryExpression.variable("v", PropertyPath(components: [])).evaluate(row, parameters: [:]) }
    }

    @Test func parsedForms() throws {
        let tags = QueryExpression.property(try PropertyPath("tags"))
        let vEqualsA = QueryExpression.compare(.equal, .variable("v", PropertyPath(components: [])), .literal("a"))
        #expect(try SQLParser.parseExpression("ANY v IN tags SATISFIES v = 'a' END") == .quantified(.any, variable: "v", in: tags, satisfies: vEqualsA))
        #expect(try SQLParser.parseExpression("every v in tags satisfies v = 'a' end") == .quantified(.every, variable: "v", in: tags, satisfies: vEqualsA))
        #expect(try SQLParser.parseExpression("ANY AND EVERY v IN tags SATISFIES v = 'a' END") ==
                .quantified(.anyAndEvery, variable: "v", in: tags, satisfies: vEqualsA))
        #expect(try SQLParser.parseExpression("ANY i IN items SATISFIES i.qty[0] > 1 END") ==
                .quantified(.any, variable: "i", in: .property(try PropertyPath("items")),
                            satisfies: .compare(.greater, .variable("i", try PropertyPath("qty[0]")), .literal(1))))
        // An alias of the data source is taken off inside the predicate too; the variable is not.
        let s = try SQLParser.parse("SELECT META().id FROM _ AS t WHERE ANY v IN t.tags SATISFIES v = t.k END")
        #expect(s.whereClause == .quantified(.any, variable: "v", in: tags,
                                             satisfies: .compare(.equal, .variable("v", PropertyPath(components: [])), .property(try PropertyPath("k")))))
        // A predicate is an expression like any other: a column, a NOT, an operand.
        let c = try SQLParser.parse("SELECT ANY v IN tags SATISFIES v = 'a' END AS hasA, NOT EVERY v IN tags SATISFIES v = 'a' END FROM _")
        #expect(c.columnNames == ["hasA", "$2"])
    }

    @Test func parseErrorsAndDepth() throws {
        for (text, message) in [
            ("ANY v IN tags SATISFIES v = 'a'", "expected END"),
            ("ANY v IN tags v = 'a' END", "expected SATISFIES"),
            ("ANY v tags SATISFIES v = 'a' END", "expected IN"),
            ("ANY IN tags SATISFIES TRUE END", "variable name"),
            ("ANY AND v IN tags SATISFIES TRUE END", "expected EVERY"),
            ("EVERY END IN tags SATISFIES TRUE END", "variable name"),
        ] {
            #expect {
                try SQLParser.parseExpression(text)
            } throws: { error in
                (error as? SetteeError).map { $0.code == .invalidParameter && $0.message.contains(message) } ?? false
            }
        }
        // Nested predicates count toward the parser's depth bound, as parentheses do.
        let deep = String(repeating: "ANY v IN tags SATISFIES ", count: 5_000) + "TRUE" + String(repeating: " END", count: 5_000)
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression(deep) }
        let modest = String(repeating: "ANY v IN tags SATISFIES ", count: 20) + "v = 'a'" + String(repeating: " END", count: 20)
        #expect(try SQLParser.parseExpression(modest).evaluate(row, parameters: [:]) == true)
    }

    @Test func inQueriesOnADatabase() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        let docs: [(String, JSONValue)] = [("a", ["x", "y"]), ("b", []), ("c", "x"), ("d", .null), ("e", ["y"])]
        for (id, tags) in docs { try db.saveDocument(MutableDocument(id: id, data: ["tags": tags])) }
        try db.saveDocument(MutableDocument(id: "f", data: [:]))
        func ids(_ condition: String) throws -> [String] {
            try db.createQuery("SELECT META().id FROM _ WHERE \(condition) ORDER BY META().id").execute().allResults().compactMap { $0.string(at: 0) }
        }
        #expect(try ids("ANY t IN tags SATISFIES t = 'y' END") == ["a", "e"])
        #expect(try ids("EVERY t IN tags SATISFIES t = 'y' END") == ["b", "e"])
        #expect(try ids("ANY AND EVERY t IN tags SATISFIES t = 'y' END") == ["e"])
        #expect(try ids("NOT (ANY t IN tags SATISFIES t = 'y' END)") == ["b", "c"])
        let query = try db.createQuery("SELECT META().id FROM _ WHERE ANY t IN tags SATISFIES t = $tag END ORDER BY META().id")
        query.parameters = Parameters().setString("x", forName: "tag")
        #expect(try query.execute().allResults().compactMap { $0.string(at: 0) } == ["a"])
    }
}
