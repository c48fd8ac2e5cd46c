import Foundation
import Testing
import Settee

/// The public query API as Couchbase Lite users write it: `createQuery`, parameters,
/// `execute()`, a `ResultSet` of `Result`s read by index and by name, JSON and `Decodable`.
@Suite struct QueryAPITests {
    @Test func sqlQueriesWithParametersAndTypedResults() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for (i, title) in ["Milk", "bread", "Apples", "Dishes"].enumerated() {
            try db.saveDocument(MutableDocument(id: "task-\(i)", data: [
                "type": "task", "title": .string(title), "list": ["id": i < 3 ? "list-7" : "list-8"],
                "createdAt": .int(Int64(10 - i)), "done": .bool(i == 1),
            ]))
        }
        let query = try db.createQuery("""
            SELECT META().id, title, done FROM _ WHERE type = 'task' AND list.id = $list
            ORDER BY createdAt DESC LIMIT 20
            """)
        #expect(query.columnNames == ["id", "title", "done"])
        query.parameters = Parameters().setString("list-7", forName: "list")
        var titles: [String] = []
        for result in try query.execute() {
            #expect(result.count == 3 && result.keys == ["id", "title", "done"])
            titles.append(try #require(result.string(forKey: "title")))
            #expect(result.string(at: 1) == result.string(forKey: "title"))
        }
        #expect(titles == ["Milk", "bread", "Apples"])

        let results = try query.execute().allResults()
        #expect(results.map { $0.bool(forKey: "done") } == [false, true, false])
        #expect(results[0].toJSON() == #"{"done":false,"id":"task-0","title":"Milk"}"#)
        struct Row: Decodable, Equatable { var id: String; var title: String }
        #expect(try results.map { try $0.decode(Row.self) }.first == Row(id: "task-0", title: "Milk"))

        // A parameter changed between executions; a missing one is an error at execute().
        query.parameters = Parameters(["list": "list-8"])
        #expect(try query.execute().allResults().map { $0.string(at: 1) } == ["Dishes"])
        query.parameters = Parameters()
        #expect(throws: SetteeError.self) { try query.execute() }

        let count = try db.createQuery("SELECT count(*) AS n, avg(createdAt) FROM _ WHERE type = 'task'").execute()
        let row = try #require(count.next())
        #expect(row.int(forKey: "n") == 4 && row.int(at: 0) == 4 && row.double(at: 1) == 8.5)
        #expect(count.next() == nil)
        // MISSING columns have no value; out of range and unknown names are nil.
        let sparse = try db.createQuery("SELECT nope, title FROM _ WHERE META().id = 'task-0'").execute().allResults()
        #expect(sparse.count == 1 && sparse[0].value(at: 0) == nil && sparse[0].value(at: 9) == nil
                && sparse[0].value(forKey: "zzz") == nil && sparse[0].toDictionary() == ["title": "Milk"])
    }

    @Test func badQueryTextNamesThePosition() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        #expect {
            try db.createQuery("SELECT title FROM _ WHERE title = ")
        } throws: { error in
            (error as? SetteeError).map { $0.code == .invalidParameter && $0.message.contains("at the end") } ?? false
        }
        try db.close()
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT * FROM _") }
    }
}
