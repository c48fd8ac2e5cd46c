import Foundation
import Testing
import Synchronization
import Settee

/// Live queries: the current results first, then only results that differ, after commits
/// that concern the query; unrelated commits do not run it.
@Suite struct LiveQueryTests {
    private func task(_ id: String, list: String, createdAt: Int) -> MutableDocument {
        MutableDocument(id: id, data: ["type": "task", "list": ["id": .string(list)], "createdAt": .int(Int64(createdAt)), "title": .string(id)])
    }

    /// Collects what a listener hears.
    final class Heard: Sendable {
        let changes = Mutex<[[String]]>([])
        let errors = Mutex<[String]>([])
        func wait(for count: Int, timeout: TimeInterval = 60) -> [[String]] {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                let c = changes.withLock { $0 }
                if c.count >= count { return c }
                Thread.sleep(forTimeInterval: 0.005)
            }
            return changes.withLock { $0 }
        }
    }

    @Test func listenersHearTheCurrentResultsThenOnlyDifferences() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.createIndex(ValueIndexConfiguration(["type", "list.id", "createdAt"]), name: "tasks")
        for i in 0 ..< 5 { try db.saveDocument(task("t\(i)", list: i < 3 ? "l7" : "l8", createdAt: i)) }
        let query = try db.createQuery("SELECT META().id FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 2")
        query.parameters = Parameters().setString("l7", forName: "list")
        let heard = Heard()
        let token = query.addChangeListener { change in
            if let e = change.error { heard.errors.withLock { $0.append("\(e)") }; return }
            let ids = change.results?.allResults().compactMap { $0.string(at: 0) } ?? []
            heard.changes.withLock { $0.append(ids) }
        }
        #expect(heard.wait(for: 1) == [["t2", "t1"]])
        // Unrelated commits: another list, a document without the properties. Nothing heard.
        try db.saveDocument(task("t9", list: "l8", createdAt: 100))
        try db.saveDocument(MutableDocument(id: "other", data: ["x": 1]))
        // A matching document below the top two: the query runs, the results are the same.
        try db.saveDocument(task("t-old", list: "l7", createdAt: -5))
        // A new newest task: heard.
        try db.saveDocument(task("t-new", list: "l7", createdAt: 50))
        #expect(heard.wait(for: 2) == [["t2", "t1"], ["t-new", "t2"]])
        // Deleting a listed document, and moving one out of the list: both heard.
        try db.deleteDocument(try #require(try db.document(withID: "t-new")))
        #expect(heard.wait(for: 3).last == ["t2", "t1"])
        let t2 = try #require(try db.document(withID: "t2")).toMutable()
        t2["list"] = ["id": "l8"]
        try db.saveDocument(t2)
        #expect(heard.wait(for: 4).last == ["t1", "t0"])
        // New parameters run it again.
        query.parameters = Parameters().setString("l8", forName: "list")
        #expect(heard.wait(for: 5).last == ["t9", "t4"])
        Thread.sleep(forTimeInterval: 0.2)
        #expect(heard.changes.withLock { $0.count } == 5, "a change that did not alter the results was announced")
        #expect(heard.errors.withLock { $0 }.isEmpty)
        // After removal nothing more is heard.
        token.remove()
        try db.saveDocument(task("t10", list: "l8", createdAt: 1000))
        Thread.sleep(forTimeInterval: 0.2)
        #expect(heard.changes.withLock { $0.count } == 5)
    }

    /// Many live queries over one database: a commit reaches the one it concerns, queries
    /// whose listeners are removed hear nothing more, the others go on.
    @Test func manyLiveQueriesEachHearTheirOwnCommits() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.createIndex(ValueIndexConfiguration(["type", "list.id", "createdAt"]), name: "tasks")
        let count = 40
        let heard = (0 ..< count).map { _ in Heard() }
        var tokens: [ListenerToken] = []
        var queries: [Query] = []
        for k in 0 ..< count {
            let q = try db.createQuery("SELECT META().id FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 2")
            q.parameters = Parameters().setString("l\(k)", forName: "list")
            let h = heard[k]
            tokens.append(q.addChangeListener { change in h.changes.withLock { $0.append(change.results?.allResults().compactMap { $0.string(at: 0) } ?? ["error"]) } })
            queries.append(q)
        }
        for k in 0 ..< count { #expect(heard[k].wait(for: 1) == [[]]) }
        for k in stride(from: 0, to: count, by: 2) { try db.saveDocument(task("t\(k)", list: "l\(k)", createdAt: k)) }
        for k in stride(from: 0, to: count, by: 2) { #expect(heard[k].wait(for: 2).last == ["t\(k)"]) }
        // Half the queries stop listening; a commit for each list reaches only the others.
        for k in 0 ..< count / 2 { tokens[k].remove() }
        for k in 0 ..< count { try db.saveDocument(task("u\(k)", list: "l\(k)", createdAt: 100 + k)) }
        for k in count / 2 ..< count { #expect(heard[k].wait(for: k % 2 == 0 ? 3 : 2).last?.first == "u\(k)") }
        Thread.sleep(forTimeInterval: 0.2)
        for k in 0 ..< count {
            let expected = k < count / 2 ? (k % 2 == 0 ? 2 : 1) : (k % 2 == 0 ? 3 : 2)
            #expect(heard[k].changes.withLock { $0.count } == expected, "query \(k)")
        }
        // New parameters route a query by its new list; deleting a document it lists reaches
        // it whatever its properties.
        let k = count / 2
        queries[k].parameters = Parameters().setString("elsewhere", forName: "list")
        #expect(heard[k].wait(for: 4).last == [])
        try db.saveDocument(task("v", list: "elsewhere", createdAt: 500))
        #expect(heard[k].wait(for: 5).last == ["v"])
        try db.deleteDocument(try #require(try db.document(withID: "v")))
        #expect(heard[k].wait(for: 6).last == [])
        for k in count / 2 ..< count { tokens[k].remove() }
    }

    /// Idle routed queries (their runs over) hear a commit through their route alone: the
    /// changed document's value at the routed property, read from its body's bytes.
    @Test func idleRoutedQueriesHearTheirCommitsByTheirRoute() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        let heard = (0 ..< 4).map { _ in Heard() }
        var tokens: [ListenerToken] = []
        for k in 0 ..< 4 {
            let q = try db.createQuery("SELECT META().id FROM _ WHERE type = 'task' AND list.id = $list ORDER BY META().id")
            q.parameters = Parameters().setString("l\(k)", forName: "list")
            let h = heard[k]
            tokens.append(q.addChangeListener { change in h.changes.withLock { $0.append(change.results?.allResults().compactMap { $0.string(at: 0) } ?? ["error"]) } })
        }
        defer { for t in tokens { t.remove() } }
        for h in heard { #expect(h.wait(for: 1) == [[]]) }
        // Their first runs end; from then on only a route (or a document they matched) reaches them.
        Thread.sleep(forTimeInterval: 0.3)
        try db.saveDocument(task("a", list: "l2", createdAt: 1))
        #expect(heard[2].wait(for: 2).last == ["a"])
        Thread.sleep(forTimeInterval: 0.3)
        try db.saveDocument(task("b", list: "l3", createdAt: 2))
        #expect(heard[3].wait(for: 2).last == ["b"])
        #expect(heard[0].changes.withLock { $0.count } == 1 && heard[1].changes.withLock { $0.count } == 1)
    }

    @Test func changesIsAnAsyncSequenceOfResults() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try await db.saveDocument(task("a", list: "l", createdAt: 1))
        let query = try db.createQuery("SELECT count(*) AS n FROM _ WHERE type = 'task'")
        var counts: [Int] = []
        for try await results in query.changes() {
            counts.append(results.allResults().first?.int(forKey: "n") ?? -1)
            if counts.count == 3 { break }
            try await db.saveDocument(task("d\(counts.count)", list: "l", createdAt: counts.count))
        }
        #expect(counts == [1, 2, 3])
        // A query that cannot run ends the sequence with its error.
        let bad = try db.createQuery("SELECT META().id FROM _ WHERE type = $missing")
        await #expect(throws: SetteeError.self) {
            for try await _ in bad.changes() {}
        }
    }
}

/// Query.results(): an AsyncSequence of the rows, streamed when the plan allows.
@Suite struct QueryResultsTests {
    @Test func streamsEveryRowAndStopsEarly() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try await db.inBatch { db in
            for i in 0 ..< 3_000 { try db.saveDocument(MutableDocument(id: String(format: "d%05d", i), data: ["n": .int(Int64(i))])) }
        }
        try await db.createIndex(ValueIndexConfiguration(["n"]), name: "n")
        // Streamed (index order, no sort): every row, in order.
        let query = try db.createQuery("SELECT n FROM _ WHERE n >= 10 ORDER BY n")
        var seen: [Int] = []
        for try await r in query.results() { seen.append(r.int(at: 0)) }
        #expect(seen == Array(10 ..< 3_000))
        // Sorted after the scan: the same rows as execute().
        let sorted = try db.createQuery("SELECT META().id FROM _ WHERE n < 100 ORDER BY META().id DESC")
        var ids: [String] = []
        for try await r in sorted.results() { ids.append(r.string(at: 0) ?? "") }
        #expect(ids == (try sorted.execute().allResults().map { $0.string(at: 0) ?? "" }) && ids.count == 100)
        // Ending early stops the reader; the database closes normally after.
        var few = 0
        for try await _ in query.results() { few += 1; if few == 5 { break } }
        #expect(few == 5)
        // Errors surface in the iteration.
        let bad = try db.createQuery("SELECT n FROM _ WHERE n = $missing")
        await #expect(throws: SetteeError.self) { for try await _ in bad.results() {} }
    }
}
