import Testing
@testable import Settee

/// SQL++ for Mobile text parsed into the statement QueryBuilder also builds; errors name the
/// position; hostile text is bounded.
@Suite struct SQLParserTests {
    private func p(_ path: String) throws -> QueryExpression { .property(try PropertyPath(path)) }

    @Test func theIssuesExampleQuery() throws {
        let s = try SQLParser.parse("SELECT META().id, title FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 20")
        #expect(s.items == [.expression(.meta(.id), name: "id"), .expression(try p("title"), name: "title")])
        #expect(s.source == "_" && s.alias == "_")
        #expect(s.whereClause == .and(.compare(.equal, try p("type"), .literal("task")),
                                      .compare(.equal, try p("list.id"), .parameter("list"))))
        #expect(s.orderBy == [.init(expression: try p("createdAt"), descending: true)])
        #expect(s.limit == .literal(20))
        #expect(s.offset == nil && !s.distinct && s.groupBy.isEmpty)
    }

    @Test func precedenceAndAssociativity() throws {
        #expect(try SQLParser.parseExpression("a OR b AND NOT c") == .or(try p("a"), .and(try p("b"), .not(try p("c")))))
        #expect(try SQLParser.parseExpression("1 + 2 * 3 - 4") ==
                .arithmetic(.subtract, .arithmetic(.add, .literal(1), .arithmetic(.multiply, .literal(2), .literal(3))), .literal(4)))
        #expect(try SQLParser.parseExpression("(1 + 2) * -x") ==
                .arithmetic(.multiply, .arithmetic(.add, .literal(1), .literal(2)), .negate(try p("x"))))
        #expect(try SQLParser.parseExpression("n + 1 > 2 * m") ==
                .compare(.greater, .arithmetic(.add, try p("n"), .literal(1)), .arithmetic(.multiply, .literal(2), try p("m"))))
        #expect(try SQLParser.parseExpression("-5") == .literal(-5))
        #expect(try SQLParser.parseExpression("-9223372036854775808") == .literal(.double(-9223372036854775808)))
    }

    @Test func predicates() throws {
        #expect(try SQLParser.parseExpression("x IS NULL") == .test(.isNull, try p("x")))
        #expect(try SQLParser.parseExpression("x IS NOT MISSING") == .test(.isNotMissing, try p("x")))
        #expect(try SQLParser.parseExpression("x IS VALUED") == .test(.isValued, try p("x")))
        #expect(try SQLParser.parseExpression("x IS 3") == .compare(.equal, try p("x"), .literal(3)))
        #expect(try SQLParser.parseExpression("x NOT BETWEEN 1 AND 5") == .not(.between(try p("x"), .literal(1), .literal(5))))
        #expect(try SQLParser.parseExpression("x IN ('a', 'b')") == .in(try p("x"), [.literal("a"), .literal("b")]))
        #expect(try SQLParser.parseExpression("x NOT IN ['a']") == .not(.in(try p("x"), [.literal("a")])))
        #expect(try SQLParser.parseExpression("title LIKE 'Buy%'") == .like(try p("title"), .literal("Buy%")))
        #expect(try SQLParser.parseExpression("x <> 1 AND y == 2") ==
                .and(.compare(.notEqual, try p("x"), .literal(1)), .compare(.equal, try p("y"), .literal(2))))
        #expect(try SQLParser.parseExpression("lower(title) = 'x'") == .compare(.equal, .function(.lower, [try p("title")]), .literal("x")))
        #expect(try SQLParser.parseExpression("ARRAY_CONTAINS(tags, \"b\")") == .function(.arrayContains, [try p("tags"), .literal("b")]))
    }

    @Test func literalsAndPaths() throws {
        #expect(try SQLParser.parseExpression("'it''s'") == .literal("it's"))
        #expect(try SQLParser.parseExpression("2.5e3") == .literal(2500.0))
        #expect(try SQLParser.parseExpression("TRUE AND false OR null OR MISSING") ==
                .or(.or(.and(.literal(true), .literal(false)), .literal(.null)), .missing))
        #expect(try SQLParser.parseExpression("[1, 'a', [true]]") == .literal([1, "a", [true]]))
        #expect(try SQLParser.parseExpression("contacts[1].phones[-1]") == p("contacts[1].phones[-1]"))
        #expect(try SQLParser.parseExpression("`odd name`.`a.b`") == .property(PropertyPath(components: [.name("odd name"), .name("a.b")])))
        #expect(try SQLParser.parseExpression("x /* a comment */ = -- to the end\n 1") == .compare(.equal, try p("x"), .literal(1)))
    }

    @Test func clausesAliasesAndColumnNames() throws {
        let s = try SQLParser.parse("""
            SELECT DISTINCT t.list.id AS list, count, t.*, n + 1 FROM tasks AS t
            WHERE t.done = false GROUP BY t.list.id HAVING n > 1 ORDER BY list, n ASC OFFSET 10 LIMIT 5
            """)
        #expect(s.distinct && s.source == "tasks" && s.alias == "t")
        #expect(s.items == [.expression(try p("list.id"), name: "list"), .expression(try p("count"), name: "count"), .all,
                            .expression(.arithmetic(.add, try p("n"), .literal(1)), name: "$4")])
        #expect(s.whereClause == .compare(.equal, try p("done"), .literal(false)))
        #expect(s.groupBy == [try p("list.id")])
        #expect(s.having == .compare(.greater, try p("n"), .literal(1)))
        #expect(s.orderBy.map(\.descending) == [false, false])
        #expect(s.offset == .literal(10) && s.limit == .literal(5))
        #expect(try SQLParser.parse("select * from _default d where d.x = 1").whereClause == .compare(.equal, try p("x"), .literal(1)))
    }

    @Test func errorsNameThePosition() throws {
        let cases: [(String, String)] = [
            ("SELECT FROM _", "at position 7"),
            ("SELECT a FROM _ WHERE", "at the end"),
            ("SELECT a FROM _ WHERE a = ", "at the end"),
            ("SELECT a FROM _ WHERE (a = 1", "at the end"),
            ("SELECT a FROM _ WHERE a = 'open", "position 26"),
            ("SELECT a FROM _ WHERE a ? 1", "position 24"),
            ("SELECT a FROM _ WHERE nofunc(a)", "position 22"),
            ("SELECT a FROM _ WHERE lower(a, b)", "position 22"),
            ("SELECT a FROM _ WHERE META().nope", "nope"),
            ("SELECT a FROM _ LIMIT 1 garbage", "position 24"),
            ("SELECT a, FROM _", "position 10"),
            ("SELECT a FROM _ WHERE $ = 1", "position 22"),
        ]
        for (text, expected) in cases {
            #expect {
                try SQLParser.parse(text)
            } throws: { error in
                guard let e = error as? SetteeError else { return false }
                return e.code == .invalidParameter && e.message.contains(expected)
            }
        }
    }

    /// Nesting and chains that would make a recursive evaluator (or the tree's release)
    /// overflow the stack are refused; long flat lists are fine.
    @Test func hostileTextIsBounded() throws {
        let nested = String(repeating: "(", count: 10_000) + "1" + String(repeating: ")", count: 10_000)
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression(nested) }
        let chain = (0 ..< 10_000).map { "a = \($0)" }.joined(separator: " OR ")
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression(chain) }
        let sum = Array(repeating: "1", count: 10_000).joined(separator: " + ")
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression(sum) }
        let nots = String(repeating: "NOT ", count: 10_000) + "a"
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression(nots) }
        let negations = String(repeating: "-", count: 10_000) + "a"
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression(negations) }
        #expect(throws: SetteeError.self) { try SQLParser.parse(String(repeating: " ", count: SQLParser.maxLength + 1)) }
        let list = "x IN (" + (0 ..< 5_000).map(String.init).joined(separator: ", ") + ")"
        guard case .in(_, let items) = try SQLParser.parseExpression(list) else { Issue.record("not an IN"); return }
        #expect(items.count == 5_000)
        let modest = (0 ..< 100).map { "a = \($0)" }.joined(separator: " OR ")
        #expect(throws: Never.self) { try SQLParser.parseExpression(modest) }
        // A chain is one flat OR (or AND), bounded by its operands, not by depth.
        let long = (0 ..< 4_000).map { "a = \($0)" }.joined(separator: " OR ")
        guard case .or(let terms) = try SQLParser.parseExpression(long) else { Issue.record("not one OR"); return }
        #expect(terms.count == 4_000)
        let mixed = try SQLParser.parseExpression("a AND b AND (c AND d) OR e OR (f OR g)")
        #expect(mixed == .or([.and([try p("a"), try p("b"), try p("c"), try p("d")]), try p("e"), try p("f"), try p("g")]))
        let wide = (0 ..< SQLParser.maxTerms / 2 + 1).map { "a = \($0)" }.joined(separator: " AND ")
        #expect {
            try SQLParser.parseExpression(wide)
        } throws: { error in
            (error as? SetteeError)?.message.contains("more than \(SQLParser.maxTerms) operands") == true
        }
        let manyColumns = "SELECT " + Array(repeating: "a", count: SQLParser.maxTerms + 1).joined(separator: ", ") + " FROM _"
        #expect(throws: SetteeError.self) { try SQLParser.parse(manyColumns) }
    }
}
