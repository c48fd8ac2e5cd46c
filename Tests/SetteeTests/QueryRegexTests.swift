import Foundation
import Testing
@testable import Settee

/// `REGEXP_LIKE`, `REGEXP_CONTAINS` and QueryBuilder's `regex`: a match anywhere unless the
/// pattern anchors itself, MISSING and NULL rules, bounded patterns and matching, invalid
/// patterns named in the error, one compilation per pattern and execution.
@Suite struct QueryRegexTests {
    let row = QueryRow(id: "d", revisionID: "1-a", sequence: 1, isDeleted: false, expiration: nil, properties: [
        "title": "2024-05-01 Buy milk", "n": 7, "nothing": .null, "pattern": "[0-9]{4}", "hostile": .string(String(repeating: "a", count: 40) + "!"),
    ])

    private func eval(_ text: String) throws(SetteeError) -> JSONValue? {
        try SQLParser.parseExpression(text).evaluate(row, parameters: [:])
    }

    private func expectInvalid(_ text: String, naming name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try eval(text)
            Issue.record("no error for \(text)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .invalidParameter && error.message.contains(name), "\(error.message)", sourceLocation: sourceLocation)
        }
    }

    @Test func matchesAnywhereUnlessAnchored() throws {
        for f in ["REGEXP_LIKE", "regexp_contains"] {
            #expect(try eval("\(f)(title, 'milk')") == true)
            #expect(try eval("\(f)(title, '^[0-9]{4}-[0-9]{2}')") == true)
            #expect(try eval("\(f)(title, '^milk')") == false)
            #expect(try eval("\(f)(title, '^.*milk$')") == true)
            #expect(try eval("\(f)(title, '(?i)BUY')") == true)
            #expect(try eval("\(f)(title, 'BUY')") == false)
            #expect(try eval("\(f)(title, pattern)") == true)
            #expect(try eval("\(f)('', '^$')") == true)
            // MISSING in, MISSING out; NULL or a value that is not a string, NULL.
            #expect(try eval("\(f)(nope, 'a')") == nil)
            #expect(try eval("\(f)(title, nope)") == nil)
            #expect(try eval("\(f)(nothing, 'a')") == .some(.null))
            #expect(try eval("\(f)(n, '7')") == .some(.null))
            #expect(try eval("\(f)(title, 7)") == .some(.null))
        }
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression("REGEXP_LIKE(title)") }
    }

    @Test func badPatternsAreNamedErrors() throws {
        expectInvalid("REGEXP_LIKE(title, '(unclosed')", naming: "\"(unclosed\"")
        expectInvalid("REGEXP_CONTAINS(title, '[z-a]')", naming: "[z-a]")
        let long = String(repeating: "a", count: RegexCache.maxPatternLength + 1)
        expectInvalid("REGEXP_LIKE(title, '\(long)')", naming: "longer than 1000")
        #expect(try eval("REGEXP_LIKE(title, '\(String(repeating: "a?", count: 500))')") == true)
        // Exponential backtracking is stopped and reported, not waited out.
        let start = Date()
        expectInvalid("REGEXP_LIKE(hostile, '^(a+)+$')", naming: "too long")
        #expect(Date().timeIntervalSince(start) < 30)
    }

    @Test func aPatternIsCompiledOncePerExecution() throws {
        let cache = RegexCache()
        let first = try cache.regex("[0-9]+")
        #expect(try cache.regex("[0-9]+") === first)
        // Patterns that differ per document are compiled each, and the cache stays bounded.
        for i in 0 ..< RegexCache.capacity * 2 { _ = try cache.regex("x\(i)") }
        #expect(try cache.regex("[0-9]+") === first)
        #expect(throws: SetteeError.self) { try cache.regex("(") }
    }

    @Test func inQueriesAndQueryBuilder() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for (id, title) in [("a", "2024-05-01 Milk"), ("b", "bread"), ("c", "2023 taxes")] {
            try db.saveDocument(MutableDocument(id: id, data: ["title": .string(title)]))
        }
        try db.saveDocument(MutableDocument(id: "d", data: ["title": 2024]))
        let text = try db.createQuery("SELECT META().id FROM _ WHERE REGEXP_LIKE(title, $p) ORDER BY META().id")
        let built = QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.database(db))
            .where(Expression.property("title").regex(Expression.parameter("p"))).orderBy(Ordering.expression(Meta.id))
        for (pattern, expected) in [("^[0-9]{4}", ["a", "c"]), ("(?i)^b", ["b"]), ("x{2}", [])] {
            for q in [text, built] {
                q.parameters = Parameters().setString(pattern, forName: "p")
                #expect(try q.execute().allResults().compactMap { $0.string(at: 0) } == expected, "\(pattern)")
            }
        }
        for q in [text, built] {
            q.parameters = Parameters().setString("*", forName: "p")
            #expect {
                try q.execute()
            } throws: { error in
                (error as? SetteeError).map { $0.code == .invalidParameter && $0.message.contains("\"*\"") } ?? false
            }
        }
    }
}
