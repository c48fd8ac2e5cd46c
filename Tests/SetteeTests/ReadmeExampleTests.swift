import Foundation
import Testing
import Settee

/// The README's first steps, as written there, and what they print.
@Suite struct ReadmeExampleTests {
    @Test func aFirstDocumentAndAQuery() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(name: "todo", config: DatabaseConfiguration(directory: dir.path))
        defer { try? db.close() }
        try db.saveDocument(MutableDocument(id: "task-1", data: ["type": "task", "title": "Buy milk", "done": false]))

        let task = try #require(try db.document(withID: "task-1")).toMutable()
        task.setBool(true, forKey: "done")
        try db.saveDocument(task)
        #expect(task.revisionID?.hasPrefix("2-") == true)

        try db.saveDocument(MutableDocument(id: "task-2", data: ["type": "task", "title": "Call Amos", "done": false]))
        let query = try db.createQuery("""
            SELECT META().id, title FROM _ WHERE type = 'task' AND done = $done
            ORDER BY title LIMIT 20
            """)
        let params = Parameters()
        params.setBoolean(false, forName: "done")
        query.parameters = params
        var titles: [String] = []
        for result in try query.execute() { titles.append(result.string(forKey: "title") ?? "") }
        #expect(titles == ["Call Amos"])

        try db.createIndex(ValueIndexConfiguration(["type", "done", "title"]), name: "tasks")
        #expect(try query.execute().allResults().map { $0.string(forKey: "id") } == ["task-2"])
        #expect(try query.explain().contains("tasks"))
    }
}
