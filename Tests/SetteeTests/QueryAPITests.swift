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

        // Couchbase Lite's idiom, as written: an object whose setters change it.
        let params = Parameters()
        params.setString("list-4", forName: "list")
        query.parameters = params
        #expect(try query.execute().allResults().isEmpty)
        params.setString("list-8", forName: "list")
        // The query kept a copy: nothing changes until the parameters are set again.
        #expect(try query.execute().allResults().isEmpty)
        #expect(query.parameters?.value(forName: "list") == "list-4")
        query.parameters = params
        #expect(try query.execute().allResults().map { $0.string(at: 1) } == ["Dishes"])
        // What the query gives is a copy too; a copy made from it can be changed and set.
        query.parameters?.setString("list-7", forName: "list")
        #expect(query.parameters?.value(forName: "list") == "list-8")
        query.parameters = Parameters(parameters: query.parameters).setString("list-7", forName: "list")
        #expect(try query.execute().allResults().count == 3)
        // Each setter's value, as documents hold the same values.
        let all = Parameters()
        all.setInt(1, forName: "i").setInt64(1 << 40, forName: "l").setDouble(2.5, forName: "d").setFloat(0.5, forName: "f")
            .setBoolean(true, forName: "b").setDate(Date(timeIntervalSince1970: 0), forName: "t")
            .setArray(["x"], forName: "a").setDictionary(["k": 1], forName: "o").setString(nil, forName: "i")
            .setBlob(Blob(contentType: "text/plain", data: Data("hi".utf8)), forName: "blob")
        #expect(all.value(forName: "i") == nil && all.value(forName: "l") == .int(1 << 40) && all.value(forName: "d") == 2.5
                && all.value(forName: "f") == 0.5 && all.value(forName: "b") == true && all.value(forName: "t") == "1970-01-01T00:00:00.000Z"
                && all.value(forName: "a") == ["x"] && all.value(forName: "o") == ["k": 1])
        let blob = Blob(contentType: "text/plain", data: Data("hi".utf8))
        #expect(all.value(forName: "blob") == .object(blob.properties))
        query.parameters = nil
        #expect(query.parameters == nil)
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
