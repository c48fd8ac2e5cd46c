import Foundation
import Testing
@testable import Settee

/// QueryBuilder against SQL++ text: every builder method compiles to the plan the equivalent
/// text parses to, and returns the same rows on the same documents; column names; misuse
/// reported by `execute()`, never a crash.
@Suite struct QueryBuilderTests {
    /// The seeds' to-do app, with tags, line items and a few odd documents. The database is
    /// named `db`, so SQL++ text reads `FROM db` as the builder's `DataSource.database(db)`.
    private func todo() throws -> (TemporaryDirectory, Database) {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "list-1", data: ["type": "task-list", "name": "Groceries"]))
        try db.saveDocument(MutableDocument(id: "list-2", data: ["type": "task-list", "name": " chores "]))
        let tasks: [(String, String, String, Bool, Int, [JSONValue])] = [
            ("t1", "list-1", "Milk", false, 5, ["dairy", "urgent"]), ("t2", "list-1", "bread", true, 3, ["bakery"]),
            ("t3", "list-1", "Apples", false, 9, []), ("t4", "list-2", "Dishes", false, 1, ["urgent"]),
            ("t5", "list-2", "laundry", true, 7, ["home", "urgent"]),
        ]
        for (id, list, title, done, created, tags) in tasks {
            try db.saveDocument(MutableDocument(id: id, data: [
                "type": "task", "list": ["id": .string(list)], "title": .string(title), "complete": .bool(done),
                "createdAt": .int(Int64(created)), "tags": .array(tags), "price": .double(Double(created) / 2),
                "items": [["name": "a", "qty": .int(Int64(created))], ["name": "b", "qty": 2]],
            ]))
        }
        try db.saveDocument(MutableDocument(id: "t6", data: ["type": "task", "list": ["id": "list-2"], "title": "Taxes", "complete": false,
                                                             "tags": "urgent"]))
        try db.saveDocument(MutableDocument(id: "t7", data: ["type": "task", "list": ["id": "list-2"], "title": "Nap", "complete": false,
                                                             "createdAt": .null, "tags": .null, "items": []]))
        try db.setDocumentExpiration(withID: "t1", expiration: Date(timeIntervalSince1970: 4_000_000_000))
        return (dir, db)
    }

    /// Runs the built query and the text on `db`: the same plan, the same column names, the
    /// same rows.
    @discardableResult
    private func same(_ db: Database, _ built: Query, _ sql: String, _ parameters: Parameters = Parameters(),
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> [[JSONValue?]] {
        let text = try db.createQuery(sql)
        #expect(try built.plan.get() == text.plan.get(), "\(sql)", sourceLocation: sourceLocation)
        #expect(built.columnNames == text.columnNames, "\(sql)", sourceLocation: sourceLocation)
        built.parameters = parameters
        text.parameters = parameters
        let rows = try built.execute().allResults().map(\.values)
        #expect(rows == (try text.execute().allResults().map(\.values)), "\(sql)", sourceLocation: sourceLocation)
        return rows
    }

    /// Runs `built` and expects ``SetteeError/Code/invalidParameter`` naming `message`.
    private func expectMisuse(_ built: Query, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try built.execute()
            Issue.record("no error; expected one about \(message)", sourceLocation: sourceLocation)
        } catch let e as SetteeError {
            #expect(e.code == .invalidParameter && e.message.contains(message), "\(e.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("not a SetteeError: \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func theIssuesExample() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let query = QueryBuilder
            .select(SelectResult.expression(Meta.id), SelectResult.property("title"))
            .from(DataSource.database(db))
            .where(Expression.property("type").equalTo(Expression.string("task"))
                .and(Expression.property("list.id").equalTo(Expression.parameter("list"))))
            .orderBy(Ordering.property("createdAt").descending())
            .limit(Expression.int(20))
        query.parameters = Parameters().setString("list-1", forName: "list")
        var ids: [String] = []
        for result in try query.execute() { ids.append(result.string(forKey: "id") ?? "") }
        #expect(ids == ["t3", "t1", "t2"])
        #expect(query.columnNames == ["id", "title"])
        try same(db, query, """
            SELECT META().id, title FROM db WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 20
            """, Parameters().setString("list-1", forName: "list"))
        // A parameter without a value, as for text.
        query.parameters = Parameters()
        expectMisuse(query, "$list")
    }

    @Test func everyStage() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let title = SelectResult.property("title")
        let isTask = Expression.property("type").equalTo(Expression.string("task"))
        let source = DataSource.database(db)

        // select alone has no data source; from, where, orderBy, limit with and without offset.
        expectMisuse(QueryBuilder.select(title), "data source")
        try same(db, QueryBuilder.select(title).from(source), "SELECT title FROM db")
        try same(db, QueryBuilder.select([title]).from(source).where(isTask), "SELECT title FROM db WHERE type = 'task'")
        try same(db, QueryBuilder.select(title).from(source).orderBy(Ordering.property("title")), "SELECT title FROM db ORDER BY title")
        try same(db, QueryBuilder.select(title).from(source).orderBy([Ordering.expression(Meta.id).ascending()]),
                 "SELECT title FROM db ORDER BY META().id ASC")
        #expect(try same(db, QueryBuilder.select(title).from(source).where(isTask).orderBy(Ordering.property("createdAt"), Ordering.expression(Meta.id).descending())
                    .limit(Expression.int(3), offset: Expression.parameter("skip")),
                 "SELECT title FROM db WHERE type = 'task' ORDER BY createdAt, META().id DESC LIMIT 3 OFFSET $skip",
                 Parameters().setInt(1, forName: "skip")) == [["Nap"], ["Dishes"], ["bread"]])
        try same(db, QueryBuilder.select(title).from(source).limit(Expression.int(2)), "SELECT title FROM db LIMIT 2")
        try same(db, QueryBuilder.select(title).from(source).where(isTask).limit(Expression.int(2)), "SELECT title FROM db WHERE type = 'task' LIMIT 2")
        try same(db, QueryBuilder.select(title).from(source).orderBy(Ordering.property("title")).limit(Expression.int(2), offset: Expression.int(1)),
                 "SELECT title FROM db ORDER BY title LIMIT 2 OFFSET 1")

        // selectDistinct, both forms.
        #expect(try same(db, QueryBuilder.selectDistinct(SelectResult.property("list.id")).from(source).where(isTask).orderBy(Ordering.property("list.id")),
                         "SELECT DISTINCT list.id FROM db WHERE type = 'task' ORDER BY list.id") == [["list-1"], ["list-2"]])
        try same(db, QueryBuilder.selectDistinct([SelectResult.property("complete")]).from(source), "SELECT DISTINCT complete FROM db")

        // groupBy, having, orderBy by an AS name, aggregates; each stage's own followers.
        let n = SelectResult.expression(Function.count(Expression.all())).as("n")
        let list = SelectResult.property("list.id").as("list")
        let aggregates = [list, n, SelectResult.expression(Function.sum(Expression.property("createdAt"))),
                          SelectResult.expression(Function.avg(Expression.property("createdAt"))),
                          SelectResult.expression(Function.min(Expression.property("title"))),
                          SelectResult.expression(Function.max(Expression.property("createdAt"))),
                          SelectResult.expression(Function.count(Expression.property("createdAt")))]
        let grouped = try same(db, QueryBuilder.select(aggregates).from(source).where(isTask).groupBy(Expression.property("list.id"))
                                .having(Function.count(Expression.all()).greaterThan(Expression.int(1))).orderBy(Ordering.property("n").descending()),
                               """
                               SELECT list.id AS list, count(*) AS n, sum(createdAt), avg(createdAt), min(title), max(createdAt), count(createdAt)
                               FROM db WHERE type = 'task' GROUP BY list.id HAVING count(*) > 1 ORDER BY n DESC
                               """)
        #expect(grouped.map { $0[0] } == ["list-2", "list-1"] && grouped[0][1] == 4 && grouped[1][2] == 17)
        try same(db, QueryBuilder.select(list, n).from(source).groupBy([Expression.property("list.id")]), "SELECT list.id AS list, count(*) AS n FROM db GROUP BY list.id")
        try same(db, QueryBuilder.select(list, n).from(source).groupBy(Expression.property("list.id")).orderBy(Ordering.property("list")),
                 "SELECT list.id AS list, count(*) AS n FROM db GROUP BY list.id ORDER BY list")
        try same(db, QueryBuilder.select(list, n).from(source).groupBy(Expression.property("list.id")).orderBy([Ordering.property("n")]),
                 "SELECT list.id AS list, count(*) AS n FROM db GROUP BY list.id ORDER BY n")
        try same(db, QueryBuilder.select(list, n).from(source).groupBy(Expression.property("list.id")).limit(Expression.int(1)),
                 "SELECT list.id AS list, count(*) AS n FROM db GROUP BY list.id LIMIT 1")
        try same(db, QueryBuilder.select(list, n).from(source).where(isTask).groupBy([Expression.property("list.id")]).having(Function.count(Expression.all()).lessThan(Expression.int(4)))
                    .limit(Expression.int(1)),
                 "SELECT list.id AS list, count(*) AS n FROM db WHERE type = 'task' GROUP BY list.id HAVING count(*) < 4 LIMIT 1")
        try same(db, QueryBuilder.select(list, n).from(source).groupBy(Expression.property("list.id")).having(Function.count(Expression.all()).lessThan(Expression.int(4)))
                    .orderBy([Ordering.property("n")]),
                 "SELECT list.id AS list, count(*) AS n FROM db GROUP BY list.id HAVING count(*) < 4 ORDER BY n")
        try same(db, QueryBuilder.select(list, n).from(source).where(isTask).groupBy(Expression.property("list.id")).orderBy(Ordering.property("n")).limit(Expression.int(1)),
                 "SELECT list.id AS list, count(*) AS n FROM db WHERE type = 'task' GROUP BY list.id ORDER BY n LIMIT 1")
        // Aggregates without groupBy: one row.
        #expect(try same(db, QueryBuilder.select(n).from(source).where(isTask), "SELECT count(*) AS n FROM db WHERE type = 'task'") == [[7]])
    }

    @Test func aliasesAndWholeDocuments() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let t = DataSource.database(db).as("t")
        let rows = try same(db, QueryBuilder.select(SelectResult.all().from("t"), SelectResult.expression(Meta.id.from("t")),
                                                    SelectResult.expression(Expression.property("title").from("t")))
                                .from(t).where(Expression.property("list.id").from("t").equalTo(Expression.string("list-1")))
                                .orderBy(Ordering.expression(Expression.property("createdAt").from("t"))),
                            "SELECT t.*, META(t).id, t.title FROM db AS t WHERE t.list.id = 'list-1' ORDER BY t.createdAt")
        #expect(rows.map { $0[1] } == ["t2", "t1", "t3"])
        #expect(rows.first?.first??.objectValue?["title"] == "bread")
        // An unqualified path starting with the alias is qualified, as in text.
        try same(db, QueryBuilder.select(SelectResult.property("t.title")).from(t), "SELECT t.title FROM db AS t")
        // The database's own name qualifies as its alias does; SelectResult.all() is named by it.
        let named = QueryBuilder.select(SelectResult.all(), SelectResult.expression(Expression.property("title").from("db")))
            .from(DataSource.database(db)).where(Meta.id.equalTo(Expression.string("t1")))
        #expect(named.columnNames == ["db", "title"])
        let r = try #require(try named.execute().next())
        #expect(r.dictionary(forKey: "db")?["title"] == "Milk" && r.string(forKey: "title") == "Milk")
        try same(db, named, "SELECT *, db.title FROM db WHERE META().id = 't1'")
        // Expression.all(): the document as an object, named as `*` is; count of it is count(*).
        try same(db, QueryBuilder.select(SelectResult.expression(Expression.all())).from(t).where(Meta.id.equalTo(Expression.string("t2"))),
                 "SELECT * FROM db AS t WHERE META().id = 't2'")
        try same(db, QueryBuilder.select(SelectResult.expression(Function.count(Expression.all().from("t")))).from(t), "SELECT count(*) FROM db AS t")
        let doc = try QueryBuilder.select(SelectResult.expression(Meta.id)).from(t)
            .where(Expression.all().isValued().and(Meta.id.equalTo(Expression.string("t3")))).execute().allResults()
        #expect(doc.map { $0.string(at: 0) } == ["t3"])
    }

    /// Each operator against its SQL++ form, as a condition and as a column (so that MISSING
    /// and NULL results are compared too).
    @Test func everyOperatorAndFunction() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let p = Expression.property
        let cases: [(any ExpressionProtocol, String)] = [
            (p("createdAt").multiply(Expression.int(2)), "createdAt * 2"),
            (p("createdAt").divide(Expression.int(2)), "createdAt / 2"),
            (p("createdAt").modulo(Expression.int(4)), "createdAt % 4"),
            (p("createdAt").add(Expression.double(0.5)), "createdAt + 0.5"),
            (p("createdAt").subtract(p("price")), "createdAt - price"),
            (p("createdAt").lessThan(Expression.int(5)), "createdAt < 5"),
            (p("createdAt").lessThanOrEqualTo(Expression.int(5)), "createdAt <= 5"),
            (p("title").greaterThan(Expression.string("bread")), "title > 'bread'"),
            (p("createdAt").greaterThanOrEqualTo(Expression.int(5)), "createdAt >= 5"),
            (p("complete").equalTo(Expression.boolean(true)), "complete = TRUE"),
            (p("complete").notEqualTo(Expression.boolean(true)), "complete != TRUE"),
            (p("title").like(Expression.string("%a%")), "title LIKE '%a%'"),
            (p("title").regex(Expression.string("^[A-D]")), "REGEXP_LIKE(title, '^[A-D]')"),
            (p("type").is(Expression.string("task")), "type IS 'task'"),
            (p("type").isNot(Expression.string("task")), "type IS NOT 'task'"),
            (p("createdAt").isValued(), "createdAt IS VALUED"),
            (p("createdAt").isNotValued(), "createdAt IS NOT VALUED"),
            (p("complete").and(p("createdAt").greaterThan(Expression.int(4))), "complete AND createdAt > 4"),
            (p("complete").or(p("createdAt").lessThan(Expression.int(4))), "complete OR createdAt < 4"),
            (p("createdAt").between(Expression.int(3), and: Expression.int(7)), "createdAt BETWEEN 3 AND 7"),
            (p("title").in([Expression.string("Milk"), Expression.string("Nap")]), "title IN ['Milk', 'Nap']"),
            (Expression.not(p("complete")), "NOT complete"),
            (Expression.negated(p("complete")), "NOT complete"),
            (Expression.int64(1 << 40).add(p("createdAt")), "1099511627776 + createdAt"),
            (Expression.float(0.5).multiply(p("createdAt")), "0.5 * createdAt"),
            (Expression.value(nil).isNotValued(), "NULL IS NOT VALUED"),
            (Expression.string(nil).equalTo(p("title")), "NULL = title"),
            (Expression.value(["dairy", 1, true, nil] as [Any?]).equalTo(p("tags")), "['dairy', 1, TRUE, NULL] = tags"),
            (Expression.array(["urgent"]).equalTo(p("tags")), "['urgent'] = tags"),
            (Expression.value(JSONValue.string("Milk")).equalTo(p("title")), "'Milk' = title"),
            (Expression.date(Date(timeIntervalSince1970: 0)), "'1970-01-01T00:00:00.000Z'"),
            (Function.lower(p("title")), "lower(title)"),
            (Function.upper(p("title")), "upper(title)"),
            (Function.length(p("title")), "length(title)"),
            (Function.trim(p("name")), "trim(name)"),
            (Function.contains(p("title"), substring: Expression.string("a")), "contains(title, 'a')"),
            (Function.abs(Expression.int(0).subtract(p("createdAt"))), "abs(0 - createdAt)"),
            (Function.floor(p("price")), "floor(price)"),
            (Function.ceil(p("price")), "ceil(price)"),
            (Function.round(p("price")), "round(price)"),
            (ArrayFunction.contains(p("tags"), value: Expression.string("urgent")), "array_contains(tags, 'urgent')"),
            (ArrayFunction.length(p("tags")), "array_length(tags)"),
            (Meta.sequence, "META().sequence"),
            (Meta.deleted, "META().deleted"),
            (Meta.expiration, "META().expiration"),
            (Meta.revisionID, "META().revisionID"),
        ]
        let source = DataSource.database(db)
        for (e, sql) in cases {
            try same(db, QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.expression(e)).from(source).orderBy(Ordering.expression(Meta.id)),
                     "SELECT META().id, \(sql) FROM db ORDER BY META().id")
            try same(db, QueryBuilder.select(SelectResult.expression(Meta.id)).from(source).where(e).orderBy(Ordering.expression(Meta.id)),
                     "SELECT META().id FROM db WHERE \(sql) ORDER BY META().id")
        }
        // Constants of every kind JSON holds.
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let constants = try QueryBuilder.select(SelectResult.expression(Expression.date(date)), SelectResult.expression(Expression.date(nil)),
                                                SelectResult.expression(Expression.value(UInt8(7))), SelectResult.expression(Expression.value([1, nil] as [Int?])),
                                                SelectResult.expression(Expression.value(["a": ["b": 1.5]])), SelectResult.expression(Expression.value(UInt64.max)))
            .from(source).limit(Expression.int(1)).execute().allResults()
        #expect(constants.first?.values == ["2023-11-14T22:13:20.250Z", .null, 7, [1, nil], ["a": ["b": 1.5]], .double(Double(UInt64.max))])
        let inList = try QueryBuilder.select(SelectResult.expression(Meta.id)).from(source)
            .where(Expression.dictionary(["id": "list-1"]).equalTo(Expression.property("list"))).orderBy(Ordering.expression(Meta.id))
            .execute().allResults()
        #expect(inList.map { $0.string(at: 0) } == ["t1", "t2", "t3"])
    }

    @Test func columnNames() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let query = QueryBuilder.select(
            SelectResult.property("list.id"), SelectResult.expression(Meta.id), SelectResult.expression(Meta.sequence),
            SelectResult.expression(Expression.property("createdAt").add(Expression.int(1))), SelectResult.all(),
            SelectResult.property("title").as("name"), SelectResult.expression(Function.lower(Expression.property("title"))),
            SelectResult.property("tags[0]"), SelectResult.expression(Meta.revisionID).as(nil))
            .from(DataSource.database(db))
        #expect(query.columnNames == ["id", "id", "sequence", "$4", "db", "name", "$7", "tags", "revisionID"])
        try same(db, query, "SELECT list.id, META().id, META().sequence, createdAt + 1, *, title AS name, lower(title), tags[0], META().revisionID FROM db")
        #expect(QueryBuilder.select(SelectResult.all()).from(DataSource.database(db).as("t")).columnNames == ["t"])
        // A query execute() would refuse has no columns.
        #expect(QueryBuilder.select(SelectResult.property("a..b")).from(DataSource.database(db)).columnNames == [])
    }

    @Test func rangePredicatesMatchText() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let v = ArrayExpression.variable
        let cases: [(any ExpressionProtocol, String)] = [
            (ArrayExpression.any(v("t")).in(Expression.property("tags")).satisfies(v("t").equalTo(Expression.string("urgent"))),
             "ANY t IN tags SATISFIES t = 'urgent' END"),
            (ArrayExpression.every(v("t")).in(Expression.property("tags")).satisfies(v("t").equalTo(Expression.string("urgent"))),
             "EVERY t IN tags SATISFIES t = 'urgent' END"),
            (ArrayExpression.anyAndEvery(v("t")).in(Expression.property("tags")).satisfies(v("t").like(Expression.string("%r%"))),
             "ANY AND EVERY t IN tags SATISFIES t LIKE '%r%' END"),
            (ArrayExpression.any(v("i")).in(Expression.property("items")).satisfies(v("i.qty").greaterThan(Expression.int(4))
                .and(v("i.name").equalTo(Expression.string("a")))),
             "ANY i IN items SATISFIES i.qty > 4 AND i.name = 'a' END"),
            (ArrayExpression.every(v("i")).in(Expression.property("items"))
                .satisfies(ArrayExpression.any(v("t")).in(Expression.property("tags")).satisfies(v("t").equalTo(v("i.name")))),
             "EVERY i IN items SATISFIES ANY t IN tags SATISFIES t = i.name END END"),
        ]
        let source = DataSource.database(db)
        for (e, sql) in cases {
            try same(db, QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.expression(e)).from(source).orderBy(Ordering.expression(Meta.id)),
                     "SELECT META().id, \(sql) FROM db ORDER BY META().id")
        }
        #expect(try same(db, QueryBuilder.select(SelectResult.expression(Meta.id)).from(source).where(cases[0].0).orderBy(Ordering.expression(Meta.id)),
                         "SELECT META().id FROM db WHERE \(cases[0].1) ORDER BY META().id").map { $0[0] } == ["t1", "t4", "t5"])
    }

    @Test func misuseIsAnErrorAtExecute() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let source = DataSource.database(db)
        let id = SelectResult.expression(Meta.id)
        expectMisuse(QueryBuilder.select(id), "data source")
        expectMisuse(QueryBuilder.select([]).from(source), "at least one")
        expectMisuse(QueryBuilder.select(SelectResult.property("a..b")).from(source), "a..b")
        expectMisuse(QueryBuilder.select(id).from(source).where(Expression.property("tags[x]").isValued()), "tags[x]")
        expectMisuse(QueryBuilder.select(id).from(source).where(Expression.property("title").from("u").isValued()), "\"u\"")
        expectMisuse(QueryBuilder.select(id).from(source.as("t")).where(Meta.id.from("db2").isValued()), "db2")
        expectMisuse(QueryBuilder.select(SelectResult.all().from("u")).from(source), "SelectResult.all()")
        expectMisuse(QueryBuilder.select(id).from(source.as("")), "empty")
        expectMisuse(QueryBuilder.select(id).from(source).where(ArrayExpression.variable("t").equalTo(Expression.int(1))), "outside")
        expectMisuse(QueryBuilder.select(id).from(source).where(ArrayExpression.any(ArrayExpression.variable("t.x")).in(Expression.property("tags"))
            .satisfies(Expression.boolean(true))), "a name")
        expectMisuse(QueryBuilder.select(SelectResult.expression(Expression.value(URL(fileURLWithPath: "/")))).from(source), "URL")
        expectMisuse(QueryBuilder.select(SelectResult.expression(Expression.double(.nan))).from(source), "nan")
        expectMisuse(QueryBuilder.select(SelectResult.expression(Expression.float(.infinity))).from(source), "inf")
        expectMisuse(QueryBuilder.select(id).from(source).limit(Expression.int(-1)), "LIMIT")
        expectMisuse(QueryBuilder.select(id).from(source).where(Expression.property("title").regex(Expression.string("(unclosed"))), "(unclosed")

        // Types the builder did not make.
        struct Foreign: ExpressionProtocol, SelectResultProtocol, DataSourceProtocol, OrderingProtocol, VariableExpressionProtocol {}
        expectMisuse(QueryBuilder.select(id).from(source).where(Foreign()), "Foreign")
        expectMisuse(QueryBuilder.select(Foreign()).from(source), "Foreign")
        expectMisuse(QueryBuilder.select(id).from(Foreign()), "Foreign")
        expectMisuse(QueryBuilder.select(id).from(source).orderBy(Foreign()), "Foreign")
        expectMisuse(QueryBuilder.select(id).from(source).where(ArrayExpression.any(Foreign()).in(Expression.property("tags"))
            .satisfies(Expression.boolean(true))), "Foreign")

        // Chains as deep as the parser refuses are refused when built, so no deep tree exists.
        var chain: any ExpressionProtocol = Expression.property("n").equalTo(Expression.int(0))
        for i in 1 ..< 10_000 { chain = chain.or(Expression.property("n").equalTo(Expression.int(i))) }
        expectMisuse(QueryBuilder.select(id).from(source).where(chain), "nested")
        var nested: Any = 0
        for _ in 0 ..< 1_000 { nested = [nested] }
        expectMisuse(QueryBuilder.select(SelectResult.expression(Expression.value(nested))).from(source), "nested")
        var modest: any ExpressionProtocol = Expression.boolean(false)
        for i in 0 ..< 100 { modest = modest.or(Meta.id.equalTo(Expression.string("t\(i)"))) }
        #expect(try QueryBuilder.select(id).from(source).where(modest).execute().allResults().count == 7)

        // A closed database: notOpen at execute, as for text.
        let query = QueryBuilder.select(id).from(source)
        try db.close()
        #expect {
            try query.execute()
        } throws: { error in
            (error as? SetteeError)?.code == .notOpen
        }
    }

    @Test func queriesAreSharedAcrossThreads() async throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let query = QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.database(db))
            .where(Expression.property("list.id").equalTo(Expression.parameter("list")))
        query.parameters = Parameters().setString("list-2", forName: "list")
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0 ..< 4 { group.addTask { try query.execute().allResults().count } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counts == [4, 4, 4, 4])
    }
}
