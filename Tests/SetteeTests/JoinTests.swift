import Foundation
import Testing
@testable import Settee

/// `JOIN`, `LEFT OUTER JOIN` and `CROSS JOIN` between collections and within one, in SQL++ and
/// QueryBuilder: their rows checked against SQLite's answers to the same joins of the same data
/// (written out here), their plans, and live queries over a join.
@Suite struct JoinTests {
    /// lists: l1 groceries, l2 hardware, l3 empty; tasks: t1..t5 in l1/l2, t6 in a list that
    /// does not exist, t7 without a list.
    static func app(_ dir: TemporaryDirectory) throws -> (Database, Collection, Collection) {
        let db = try openDatabase(dir)
        let lists = try db.createCollection(name: "lists", scope: "store")
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        for (id, name) in [("l1", "groceries"), ("l2", "hardware"), ("l3", "empty")] {
            try lists.save(document: MutableDocument(id: id).setString(name, forKey: "name"))
        }
        for (id, list, n) in [("t1", "l1", 1), ("t2", "l1", 2), ("t3", "l2", 3), ("t4", "l1", 4), ("t5", "l2", 5), ("t6", "l9", 6)] {
            try tasks.save(document: MutableDocument(id: id).setString(list, forKey: "listID").setInt(n, forKey: "n"))
        }
        try tasks.save(document: MutableDocument(id: "t7").setInt(7, forKey: "n"))
        return (db, lists, tasks)
    }

    func rows(_ q: Query) throws -> [[String]] {
        try q.execute().allResults().map { r in (0 ..< r.count).map { i in r.value(at: i).map { "\($0)".trimmingCharacters(in: CharacterSet(charactersIn: "\"")) } ?? "MISSING" } }
    }

    @Test func innerLeftOuterAndCrossJoinsAnswerAsSQLite() throws {
        let dir = try TemporaryDirectory()
        let (db, _, _) = try Self.app(dir)
        // SELECT t.id, l.name FROM tasks t JOIN lists l ON l.id = t.listID ORDER BY t.n  (SQLite)
        let inner = try db.createQuery("""
            SELECT META(t).id, l.name FROM store.tasks AS t JOIN store.lists AS l ON META(l).id = t.listID ORDER BY t.n
            """)
        #expect(try rows(inner) == [["t1", "groceries"], ["t2", "groceries"], ["t3", "hardware"], ["t4", "groceries"], ["t5", "hardware"]])
        #expect(try inner.explain().contains("READ BY ID"))
        // LEFT JOIN keeps t6 and t7 with a MISSING list name.
        let left = try db.createQuery("""
            SELECT META(t).id AS id, l.name FROM store.tasks t LEFT OUTER JOIN store.lists l ON META(l).id = t.listID ORDER BY t.n
            """)
        #expect(try rows(left).map { $0[0] } == ["t1", "t2", "t3", "t4", "t5", "t6", "t7"])
        #expect(try left.execute().allResults().last?.string(forKey: "name") == nil)
        #expect(try rows(db.createQuery("SELECT count(*) FROM store.tasks t LEFT JOIN store.lists l ON META(l).id = t.listID")) == [["7"]])
        // Lists with their task counts: lists LEFT JOIN tasks GROUP BY list (l3 has none).
        let perList = try db.createQuery("""
            SELECT l.name, count(META(t).id) AS tasks FROM store.lists AS l LEFT JOIN store.tasks AS t ON t.listID = META(l).id
            GROUP BY l.name ORDER BY l.name
            """)
        #expect(try rows(perList) == [["empty", "0"], ["groceries", "3"], ["hardware", "2"]])
        #expect(try perList.explain().contains("HASH"))
        // CROSS JOIN: every pair (3 lists × 7 tasks), filtered by WHERE.
        #expect(try rows(db.createQuery("SELECT count(*) FROM store.lists l CROSS JOIN store.tasks t")) == [["21"]])
        let crossed = try db.createQuery("SELECT META(l).id, META(t).id FROM store.lists l CROSS JOIN store.tasks t WHERE t.n = 7 ORDER BY META(l).id")
        #expect(try rows(crossed) == [["l1", "t7"], ["l2", "t7"], ["l3", "t7"]])
        #expect(try crossed.explain().contains("CROSS JOIN"))
        // A condition that is no equality: nested loop.
        let ranged = try db.createQuery("SELECT META(a).id, META(b).id FROM store.tasks a JOIN store.tasks b ON b.n = a.n + 1 AND a.n > 4 ORDER BY a.n")
        #expect(try rows(ranged) == [["t5", "t6"], ["t6", "t7"]])
        let loop = try db.createQuery("SELECT META(a).id FROM store.tasks a JOIN store.tasks b ON b.n > a.n WHERE a.n >= 6")
        #expect(try rows(loop) == [["t6"]])
        #expect(try loop.explain().contains("NESTED LOOP"))
        // SELECT * is one column per source, named by its alias.
        let star = try db.createQuery("SELECT * FROM store.tasks t JOIN store.lists l ON META(l).id = t.listID WHERE META(t).id = 't3'")
        let result = try #require(try star.execute().allResults().first)
        #expect(result.keys == ["t", "l"])
        #expect(result.dictionary(forKey: "l")?["name"] == "hardware")
        #expect(result.dictionary(forKey: "t")?["n"] == 3)
        // Unqualified properties are the first source's; the default collection joins too.
        try db.saveDocument(MutableDocument(id: "owner").setString("l1", forKey: "list"))
        let mixed = try db.createQuery("SELECT l.name FROM _default AS d JOIN store.lists AS l ON META(l).id = list")
        #expect(try rows(mixed) == [["groceries"]])
    }

    @Test func joinsAreCheckedAndBadOnesRefused() throws {
        let dir = try TemporaryDirectory()
        let (db, _, _) = try Self.app(dir)
        for bad in ["SELECT * FROM store.tasks t JOIN store.tasks t ON META(t).id = t.listID",
                    "SELECT * FROM store.tasks t JOIN store.nothing n ON META(n).id = t.listID",
                    "SELECT * FROM store.tasks t JOIN store.lists l",
                    "SELECT * FROM store.tasks t LEFT store.lists l ON 1"] {
            #expect(throws: SetteeError.self, "\(bad)") { try db.createQuery(bad).execute() }
        }
        // A join that would make more rows than a join may is refused, not run out of memory:
        // 5,000 × 5,000 pairs.
        let wide = try db.createCollection(name: "wide", scope: "store")
        try db.inBatch { for i in 0 ..< 5000 { try wide.save(document: MutableDocument(id: "w\(i)")) } }
        let e = setteeError { _ = try db.createQuery("SELECT count(*) FROM store.wide a CROSS JOIN store.wide b").execute().allResults() }
        #expect(e?.code == .tooLarge && e?.message.contains("rows") == true, "\(String(describing: e))")
        #expect(QueryExecutor.maxJoinedRows < 5000 * 5000)
    }

    @Test func builtJoinsAreTheSQLJoins() throws {
        let dir = try TemporaryDirectory()
        let (_, lists, tasks) = try Self.app(dir)
        let built = QueryBuilder
            .select(SelectResult.expression(Meta.id.from("t")),
                    SelectResult.expression(Expression.property("name").from("l")).as("list"))
            .from(DataSource.collection(tasks).as("t"))
            .join(Join.join(DataSource.collection(lists).as("l"))
                .on(Meta.id.from("l").equalTo(Expression.property("listID").from("t"))))
            .where(Expression.property("n").from("t").greaterThan(Expression.int(2)))
            .orderBy(Ordering.expression(Expression.property("n").from("t")))
        #expect(try rows(built) == [["t3", "hardware"], ["t4", "groceries"], ["t5", "hardware"]])
        let outer = QueryBuilder.select(SelectResult.expression(Meta.id.from("t")), SelectResult.all().from("l"))
            .from(DataSource.collection(tasks).as("t"))
            .join(Join.leftJoin(DataSource.collection(lists).as("l"))
                .on(Meta.id.from("l").equalTo(Expression.property("listID").from("t"))))
            .orderBy(Ordering.expression(Meta.id.from("t")))
        let results = try outer.execute().allResults()
        #expect(results.count == 7)
        #expect(results.first?.dictionary(forKey: "l")?["name"] == "groceries")
        #expect(results.last?.dictionary(forKey: "l") == nil)
        let crossed = QueryBuilder.select(SelectResult.expression(Function.count(Expression.all())))
            .from(DataSource.collection(lists).as("l")).join(Join.crossJoin(DataSource.collection(tasks).as("t")))
        #expect(try rows(crossed) == [["21"]])
        let noCondition = QueryBuilder.select(SelectResult.all()).from(DataSource.collection(tasks).as("t"))
            .join(Join.join(DataSource.collection(lists).as("l")) as any JoinProtocol)
        #expect(throws: SetteeError.self) { try noCondition.execute() }
        let wrongAlias = QueryBuilder.select(SelectResult.expression(Expression.property("name").from("x")))
            .from(DataSource.collection(tasks).as("t")).join(Join.crossJoin(DataSource.collection(lists).as("l")))
        #expect(throws: SetteeError.self) { try wrongAlias.execute() }
    }

    @Test func aLiveJoinHearsCommitsToEitherCollection() throws {
        let dir = try TemporaryDirectory()
        let (_, lists, tasks) = try Self.app(dir)
        let db = tasks.database
        let query = try db.createQuery("SELECT META(t).id, l.name FROM store.tasks t JOIN store.lists l ON META(l).id = t.listID WHERE t.n = 1")
        let seen = Locked<[[String]]>([])
        let signal = DispatchSemaphore(value: 0)
        let token = query.addChangeListener { change in
            let names = (try? change.results?.allResults().map { $0.string(at: 1) ?? "" }) ?? []
            seen.withLock { $0.append(names) }
            signal.signal()
        }
        #expect(wait(signal))
        #expect(seen.value.last == ["groceries"])
        // A commit to the joined collection alone changes the rows.
        try lists.save(document: try #require(try lists.document(id: "l1")).toMutable().setString("food", forKey: "name"))
        #expect(wait(signal))
        #expect(seen.value.last == ["food"])
        // And one to the first source.
        try tasks.save(document: try #require(try tasks.document(id: "t1")).toMutable().setString("l2", forKey: "listID"))
        #expect(wait(signal))
        #expect(seen.value.last == ["hardware"])
        token.remove()
    }

    /// A join whose `ON` names the joined collection's indexed property probes the index once per
    /// distinct value (covering when it reads nothing else of it), one that names its document ID
    /// reads each document: both answer what the hash join answers without them, for inner and
    /// left joins, with a WHERE on either source, over NULL, MISSING, numbers and strings.
    @Test func indexedAndByIDJoinsAnswerAsHashJoins() throws {
        let dir = try TemporaryDirectory()
        let (db, lists, tasks) = try Self.app(dir)
        // Keys of several kinds: 1 and 1.0 are equal, "1" is not; NULL and MISSING equal nothing.
        try lists.save(document: MutableDocument(id: "l4", data: ["name": "numbers", "k": 1]))
        try lists.save(document: MutableDocument(id: "l5", data: ["name": "nothing", "k": .null]))
        try tasks.save(document: MutableDocument(id: "t8", data: ["n": 8, "listID": 1.0, "k": 1, "due": ["day": 3]]))
        try tasks.save(document: MutableDocument(id: "t9", data: ["n": 9, "listID": "1", "k": .null]))
        // Text the collation sorts with "l1" (a control character is ignorable) that is not `=` to it.
        try tasks.save(document: MutableDocument(id: "t11", data: ["n": 11, "listID": "l\u{1}1"]))
        let queries = [
            "SELECT l.name, count(*) AS n FROM store.lists AS l JOIN store.tasks AS t ON t.listID = META(l).id GROUP BY l.name ORDER BY l.name",
            "SELECT META(l).id, META(t).id FROM store.lists l LEFT JOIN store.tasks t ON t.listID = META(l).id ORDER BY META(l).id, META(t).id",
            "SELECT META(l).id, META(t).id, t.n FROM store.lists l JOIN store.tasks t ON t.listID = l.k ORDER BY META(t).id",
            "SELECT META(l).id, META(t).id FROM store.lists l LEFT JOIN store.tasks t ON t.k = l.k ORDER BY META(l).id, META(t).id",
            "SELECT META(t).id, t.due.day FROM store.lists l JOIN store.tasks t ON t.listID = l.k",
            "SELECT META(l).id, t.n FROM store.lists l JOIN store.tasks t ON t.listID = META(l).id AND t.n > 1 WHERE l.name != 'hardware' AND t.n < 5 ORDER BY t.n",
            "SELECT META(t).id, l.name FROM store.tasks t LEFT JOIN store.lists l ON META(l).id = t.listID WHERE t.n > 2 ORDER BY META(t).id",
            "SELECT META(t).id, l.name FROM store.tasks t JOIN store.lists l ON META(l).id = t.listID AND l.name = 'hardware' ORDER BY META(t).id",
            "SELECT l.name, count(*) AS n, sum(l.k) FROM store.lists l LEFT JOIN store.tasks t ON t.k = l.k GROUP BY l.name ORDER BY l.name",
            "SELECT META(l).id FROM store.lists l JOIN store.tasks t ON t.listID = META(l).id ORDER BY META(l).id",
        ]
        var expected: [[[String]]] = []
        for q in queries { expected.append(try rows(db.createQuery(q))) }
        #expect(expected[0] == [["groceries", "3"], ["hardware", "2"]])
        #expect(expected[2] == [["l4", "t8", "8"]])
        #expect(expected[5] == [["l1", "2"], ["l1", "4"]])
        try tasks.createIndex(withName: "by-list", config: ValueIndexConfiguration(["listID"]))
        try tasks.createIndex(withName: "by-k", config: ValueIndexConfiguration(["k", "n"]))
        for (q, want) in zip(queries, expected) {
            let query = try db.createQuery(q)
            #expect(try rows(query) == want, "\(q)")
        }
        let counted = try db.createQuery(queries[0])
        let plan = try counted.explain()
        #expect(plan.contains("SCAN INDEX by-list") && plan.contains("COUNTING"), "\(plan)")
        #expect(try counted.indexUsed() == "by-list")
        // Reading a property the index lacks reads the documents, through the index.
        let fetched = try db.createQuery(queries[2]).explain()
        #expect(fetched.contains("SCAN INDEX by-list") && !fetched.contains("COVERING"), "\(fetched)")
        #expect(try db.createQuery(queries[6]).explain().contains("READ BY ID"))
        #expect(try db.createQuery(queries[5]).explain().contains("FILTER by the WHERE conditions on l alone"))
        // A later save is seen through the index; a deleted task leaves it.
        try tasks.save(document: MutableDocument(id: "t10", data: ["n": 10, "listID": "l2"]))
        try tasks.delete(document: try #require(try tasks.document(id: "t1")))
        #expect(try rows(counted) == [["groceries", "2"], ["hardware", "3"]])
        // The plan the DocC article "Collections" shows, line for line.
        let article = try db.createQuery("""
            SELECT l.name AS list, count(META(t).id) AS tasks
            FROM store.lists AS l LEFT JOIN store.tasks AS t ON t.listID = META(l).id
            GROUP BY l.name ORDER BY l.name
            """)
        #expect(try article.explain() == """
            SCAN ALL DOCUMENTS OF store.lists AS l
            LEFT OUTER JOIN store.tasks AS t: SCAN INDEX by-list (listID), each distinct value of the rows probing it
              COVERING: t from the index's values, no document read
            GROUP the joined rows
            SORT the joined rows
            """)
        #expect(try rows(article) == [["empty", "0"], ["groceries", "2"], ["hardware", "3"], ["nothing", "0"], ["numbers", "0"]])
        // A partial index lacks documents: it is not probed.
        try lists.createIndex(withName: "positive", config: ValueIndexConfiguration(["k"], where: "k > 0"))
        #expect(try db.createQuery("SELECT META(t).id FROM store.tasks t JOIN store.lists l ON l.k = t.k").indexUsed() == nil)
    }

    /// What a join reads of its sources beyond their bodies (`META().expiration`), and what it
    /// refuses: a join limited to channels.
    @Test func joinsReadExpirationsAndRefuseChannels() throws {
        let dir = try TemporaryDirectory()
        let (db, lists, _) = try Self.app(dir)
        let due = Date(timeIntervalSince1970: 4_000_000_000)
        try lists.setDocumentExpiration(id: "l2", expiration: due)
        let q = try db.createQuery("""
            SELECT META(t).id, META(l).expiration FROM store.tasks t JOIN store.lists l ON META(l).id = t.listID WHERE META(t).id = 't3'
            """)
        #expect(try rows(q) == [["t3", "4000000000000"]])
        let limited = try db.createQuery("SELECT META(t).id FROM store.tasks t JOIN store.lists l ON META(l).id = t.listID")
        limited.channels = ["public"]
        #expect(throws: SetteeError.self) { try limited.execute() }
    }
}
