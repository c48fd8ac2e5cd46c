import Foundation
import Testing
@testable import Settee

/// Full-scan execution of SQL++ statements on a real database: filters, projections, ordering
/// in collation order, DISTINCT, OFFSET/LIMIT, GROUP BY with aggregates and HAVING, META().
@Suite struct QueryExecutorTests {
    /// The seeds' to-do app: lists and tasks.
    private func todo() throws -> (TemporaryDirectory, Database) {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "list-1", data: ["type": "task-list", "name": "Groceries"]))
        try db.saveDocument(MutableDocument(id: "list-2", data: ["type": "task-list", "name": "chores"]))
        let tasks: [(String, String, String, Bool, Int)] = [
            ("t1", "list-1", "Milk", false, 5), ("t2", "list-1", "bread", true, 3), ("t3", "list-1", "Apples", false, 9),
            ("t4", "list-2", "Dishes", false, 1), ("t5", "list-2", "laundry", true, 7),
        ]
        for (id, list, title, done, created) in tasks {
            try db.saveDocument(MutableDocument(id: id, data: ["type": "task", "taskList": ["id": .string(list)], "task": .string(title),
                                                               "complete": .bool(done), "createdAt": .int(Int64(created))]))
        }
        // A task without createdAt, one whose createdAt is null, and a deleted one.
        try db.saveDocument(MutableDocument(id: "t6", data: ["type": "task", "taskList": ["id": "list-2"], "task": "Taxes", "complete": false]))
        try db.saveDocument(MutableDocument(id: "t7", data: ["type": "task", "taskList": ["id": "list-2"], "task": "Nap", "complete": false,
                                                             "createdAt": .null]))
        try db.saveDocument(MutableDocument(id: "t8", data: ["type": "task", "taskList": ["id": "list-1"], "task": "Gone"]))
        let gone = try #require(try db.document(withID: "t8"))
        try db.deleteDocument(gone)
        return (dir, db)
    }

    private func run(_ db: Database, _ sql: String, _ parameters: [String: JSONValue] = [:]) throws -> [[JSONValue?]] {
        try QueryExecutor(database: db, statement: try SQLParser.parse(sql), parameters: parameters).run().map(\.values)
    }

    @Test func theIssuesExampleOnTheTodoApp() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let rows = try run(db, """
            SELECT META().id, task FROM _ WHERE type = 'task' AND taskList.id = $list ORDER BY createdAt DESC LIMIT 20
            """, ["list": "list-1"])
        #expect(rows == [["t3", "Apples"], ["t1", "Milk"], ["t2", "bread"]])
        // MISSING, then NULL, then values, ascending; the deleted task is not there.
        let all = try run(db, "SELECT META().id FROM _ WHERE type = 'task' ORDER BY createdAt")
        #expect(all.map { $0[0] } == ["t6", "t7", "t4", "t2", "t1", "t5", "t3"])
        #expect(try run(db, "SELECT META().id FROM _ WHERE type = 'task' ORDER BY createdAt LIMIT 2 OFFSET 5").map { $0[0] } == ["t5", "t3"])
        #expect(try run(db, "SELECT META().id FROM _ WHERE createdAt IS MISSING AND type = 'task'").map { $0[0] } == ["t6"])
        #expect(try run(db, "SELECT META().id FROM _ WHERE createdAt IS NULL").map { $0[0] } == ["t7"])
    }

    @Test func stringsSortByTheCollation() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        // ICU order, not code points: "Apples" < "bread" < "Dishes" < "laundry" < "Milk"…
        #expect(try run(db, "SELECT task FROM _ WHERE type = 'task' ORDER BY task").map { $0[0] } ==
                ["Apples", "bread", "Dishes", "laundry", "Milk", "Nap", "Taxes"])
        #expect(try run(db, "SELECT name FROM _ WHERE type = 'task-list' ORDER BY name DESC").map { $0[0] } == ["Groceries", "chores"])
        #expect(try run(db, "SELECT META().id FROM _ WHERE task LIKE '%a%' ORDER BY META().id").map { $0[0] } == ["t2", "t5", "t6", "t7"])
    }

    @Test func selectStarDistinctAndMeta() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let star = try run(db, "SELECT * FROM _ WHERE META().id = 'list-1'")
        #expect(star == [[.object(["type": "task-list", "name": "Groceries"])]])
        #expect(QueryExecutor(database: db, statement: try SQLParser.parse("SELECT *, name AS n FROM _ AS lists"), parameters: [:]).columnNames
                == ["lists", "n"])
        #expect(try run(db, "SELECT DISTINCT taskList.id FROM _ WHERE type = 'task' ORDER BY taskList.id") == [["list-1"], ["list-2"]])
        let meta = try run(db, "SELECT META().sequence, META().deleted, META().revisionID FROM _ WHERE META().id = 't1'")
        #expect(meta.count == 1 && meta[0][1] == false && meta[0][2]?.stringValue?.hasPrefix("1-") == true)
    }

    @Test func groupByWithAggregatesAndHaving() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        let rows = try run(db, """
            SELECT taskList.id AS list, count(*) AS n, sum(createdAt), avg(createdAt), min(task), max(createdAt)
            FROM _ WHERE type = 'task' GROUP BY taskList.id ORDER BY list
            """)
        #expect(rows == [["list-1", 3, 17, .double(17.0 / 3), "Apples", 9], ["list-2", 4, 8, 4.0, "Dishes", 7]])
        #expect(try run(db, "SELECT taskList.id, count(*) FROM _ WHERE type = 'task' GROUP BY taskList.id HAVING count(*) > 3")
                == [["list-2", 4]])
        #expect(try run(db, "SELECT count(*), count(createdAt) FROM _ WHERE type = 'task'") == [[7, 5]])
        #expect(try run(db, "SELECT count(*), sum(createdAt), max(task) FROM _ WHERE type = 'none'") == [[0, .null, .null]])
        #expect(try run(db, "SELECT complete, count(*) FROM _ WHERE type = 'task' GROUP BY complete ORDER BY count(*) DESC")
                == [[false, 5], [true, 2]])
        // ORDER BY names a column by its AS name.
        #expect(try run(db, "SELECT taskList.id AS l, count(*) AS open FROM _ WHERE type = 'task' AND complete = false GROUP BY taskList.id ORDER BY open DESC")
                == [["list-2", 3], ["list-1", 2]])
    }

    /// Groups are the same whether rows come in the grouping's order (an index scan: groups are
    /// runs) or in any order (a full scan): values equal under the collation share a group
    /// (canonically equivalent strings, 1 and 1.0), MISSING and NULL are groups of their own,
    /// and each aggregate runs over its group without the group's rows being kept.
    @Test func groupsAreTheSameInIndexOrderAndInAnyOrder() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close(); _ = dir }
        let docs: [(String, JSONValue?, JSONValue)] = [
            ("m1", nil, 5), ("n1", .null, .null), ("t1", true, "x"), ("i1", 1, 2), ("d1", 1.0, 3),
            ("b1", "b", 1), ("e0", "e", 7), ("e1", "\u{E9}", 10), ("e2", "e\u{301}", 20),
        ]
        for (id, k, v) in docs {
            var data: [String: JSONValue] = ["type": "g", "v": v]
            if let k { data["k"] = k }
            try db.saveDocument(MutableDocument(id: id, data: data))
        }
        try db.saveDocument(MutableDocument(id: "other", data: ["type": "h", "k": "b", "v": 100]))
        let sql = "SELECT k, count(*), count(v), sum(v), avg(v), min(v), max(v) FROM _ WHERE type = 'g' GROUP BY k"
        let expected: [[JSONValue?]] = [
            [nil, 1, 1, 5, 5.0, 5, 5], [.null, 1, 0, .null, .null, .null, .null], [true, 1, 1, .null, .null, "x", "x"],
            [1.0, 2, 2, 5, 2.5, 2, 3], ["b", 1, 1, 1, 1.0, 1, 1], ["e", 1, 1, 7, 7.0, 7, 7], ["\u{E9}", 2, 2, 30, 15.0, 10, 20],
        ]
        let scanned = try run(db, sql)
        #expect(scanned == expected)
        try db.createIndex(ValueIndexConfiguration(["type", "k"]), name: "g")
        let query = try db.createQuery(sql)
        #expect(try query.explain().contains("groups are runs"))
        #expect(try run(db, sql) == expected)
        // With HAVING and ORDER BY on aggregates, and a grouping value that is not the first.
        let ordered = "SELECT k, sum(v) AS s FROM _ WHERE type = 'g' GROUP BY k HAVING count(v) > 0 ORDER BY s DESC, k"
        #expect(try run(db, ordered) == [["\u{E9}", 30], ["e", 7], [nil, 5], [1.0, 5], ["b", 1], [true, .null]])
    }

    /// Rows that continue a group in index order and whose aggregates read no value are counted
    /// without a row; the rows among them that `WHERE` drops (text that shares the index key of
    /// the value but is not it) must still not be counted.
    @Test func countedRunsLeaveOutTheRowsWhereDrops() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close(); _ = dir }
        // A control character is ignorable to the collation (the two share a key), not to `=`.
        let types = ["task", "task\u{1}"]
        var seed = UInt64.random(in: 1 ... UInt64.max)
        print("countedRunsLeaveOutTheRowsWhereDrops seed \(seed)")
        func next() -> UInt64 { seed = seed &* 6364136223846793005 &+ 1442695040888963407; return seed >> 33 }
        try db.inBatch {
            for i in 0 ..< 600 {
                var data: [String: JSONValue] = ["type": .string(types[Int(next() % 2)])]
                let k = next() % 7
                if k < 6 { data["k"] = k == 5 ? .string("\u{E9}") : .int(Int64(k)) }
                try db.saveDocument(MutableDocument(id: String(format: "d%04d", i), data: data))
            }
        }
        let sql = "SELECT k, count(*), count(1), sum(2) FROM _ WHERE type = 'task' GROUP BY k"
        let scanned = try run(db, sql)
        #expect(scanned.count == 7)
        try db.createIndex(ValueIndexConfiguration(["type", "k"]), name: "tk")
        let plan = try db.createQuery(sql).explain()
        #expect(plan.contains("COVERING") && plan.contains("groups are runs"))
        #expect(try run(db, sql) == scanned)
        // Every row meets WHERE (IN over both texts is evaluated, equality over one is not).
        let both = "SELECT k, count(*) FROM _ WHERE type IN ['task', 'task\u{1}'] GROUP BY k"
        #expect(try run(db, both).reduce(0) { $0 + ($1[1].flatMap { if case .int(let n) = $0 { Int(n) } else { nil } } ?? 0) } == 600)
    }

    @Test func misuseIsAClearError() throws {
        let (dir, db) = try todo()
        defer { try? db.close(); _ = dir }
        for (sql, message) in [
            ("SELECT a FROM other", "no data source"),
            ("SELECT a FROM _ LIMIT -1", "LIMIT"),
            ("SELECT a FROM _ LIMIT 'x'", "LIMIT"),
            ("SELECT a FROM _ WHERE count(*) > 1", "aggregate"),
            ("SELECT a FROM _ WHERE a = $missing", "$missing"),
            ("SELECT sum(count(*)) FROM _", "inside"),
        ] {
            #expect {
                try run(db, sql)
            } throws: { error in
                (error as? SetteeError).map { $0.code == .invalidParameter && $0.message.contains(message) } ?? false
            }
        }
        #expect(try run(db, "SELECT META().id FROM _ WHERE type = 'task' LIMIT $n", ["n": 2]).count == 2)
    }
}
