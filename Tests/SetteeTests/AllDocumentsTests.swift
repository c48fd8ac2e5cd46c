import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// `allDocuments`: key ranges, prefixes, order, paging, deleted documents and only-conflicts.
@Suite struct AllDocumentsTests {
    static func ids(_ db: Database, _ configure: (inout AllDocumentsOptions) -> Void) throws -> [String] {
        var options = AllDocumentsOptions()
        configure(&options)
        return try db.allDocuments(options).readAll().map(\.id)
    }

    @Test func rangesPrefixesOrderSkipLimit() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let names = ["a", "b", "c", "d", "e", "user:1", "user:2", "user:3", "users", "userx", "z"]
        try db.inBatch {
            for n in names.shuffled() { try db.saveDocument(MutableDocument(id: n, data: ["name": .string(n)])) }
        }
        try db.deleteDocument(try #require(try db.document(withID: "c")))
        try db.deleteDocument(try #require(try db.document(withID: "user:2")))
        #expect(names == names.sorted())
        let live = names.filter { $0 != "c" && $0 != "user:2" }

        #expect(try Self.ids(db) { _ in } == live)
        #expect(try Self.ids(db) { $0.descending = true } == live.reversed())
        #expect(try Self.ids(db) { $0.includeDeleted = true } == names)
        #expect(try Self.ids(db) { $0.prefix = "user:" } == ["user:1", "user:3"])
        #expect(try Self.ids(db) { $0.prefix = "user:"; $0.includeDeleted = true } == ["user:1", "user:2", "user:3"])
        #expect(try Self.ids(db) { $0.prefix = "user"; $0.descending = true } == ["userx", "users", "user:3", "user:1"])
        #expect(try Self.ids(db) { $0.prefix = "nothing" } == [])
        #expect(try Self.ids(db) { $0.prefix = "" } == live)
        #expect(try Self.ids(db) { $0.startKey = "b"; $0.endKey = "e" } == ["b", "d", "e"])
        #expect(try Self.ids(db) { $0.startKey = "b"; $0.endKey = "e"; $0.includeDeleted = true } == ["b", "c", "d", "e"])
        #expect(try Self.ids(db) { $0.startKey = "bb"; $0.endKey = "d" } == ["d"])
        #expect(try Self.ids(db) { $0.startKey = "e"; $0.endKey = "b"; $0.descending = true } == ["e", "d", "b"])
        #expect(try Self.ids(db) { $0.startKey = "dd"; $0.endKey = "a"; $0.descending = true } == ["d", "b", "a"])
        #expect(try Self.ids(db) { $0.startKey = "user:9" } == ["users", "userx", "z"])
        #expect(try Self.ids(db) { $0.endKey = "b" } == ["a", "b"])
        #expect(try Self.ids(db) { $0.startKey = "e"; $0.endKey = "b" } == [])
        #expect(try Self.ids(db) { $0.skip = 2 } == Array(live.dropFirst(2)))
        #expect(try Self.ids(db) { $0.limit = 3 } == ["a", "b", "d"])
        #expect(try Self.ids(db) { $0.limit = 0 } == [])
        #expect(try Self.ids(db) { $0.skip = 2; $0.limit = 2 } == ["d", "e"])
        #expect(try Self.ids(db) { $0.skip = 1; $0.limit = 2; $0.descending = true } == ["userx", "users"])
        #expect(try Self.ids(db) { $0.skip = 100 } == [])
        #expect(try Self.ids(db) { $0.prefix = "user"; $0.skip = 1; $0.limit = 2 } == ["user:3", "users"])
        #expect(try Self.ids(db) { $0.prefix = "user"; $0.startKey = "user:2" } == ["user:3", "users", "userx"])

        #expect(setteeError { _ = try db.allDocuments({ var o = AllDocumentsOptions(); o.skip = -1; return o }()) }?.code
                == .invalidParameter)
        #expect(setteeError { _ = try db.allDocuments({ var o = AllDocumentsOptions(); o.limit = -1; return o }()) }?.code
                == .invalidParameter)

        // Documents carry their current revision and body.
        let first = try #require(try db.allDocuments().next())
        #expect(first.id == "a")
        #expect(first.string(forKey: "name") == "a")
        #expect(first.revisionID == (try db.document(withID: "a")?.revisionID))

        // forEachDocument stops when told to.
        var visited: [String] = []
        try db.forEachDocument(AllDocumentsOptions()) { doc in
            visited.append(doc.id)
            return visited.count < 3
        }
        #expect(visited == ["a", "b", "d"])
    }

    @Test func pagingAcrossBatchBoundaries() throws {
        let seed = UInt64.random(in: 0 ... .max)
        print("seed \(seed)")
        var rng = SeededGenerator(seed: seed)
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let count = Database.pageSize * 2 + 123   // 635: three batches
        let all = (0 ..< count).map { String(format: "p%04d", $0) }
        try db.inBatch {
            for id in all.shuffled(using: &rng) { try db.saveDocument(MutableDocument(id: id, data: ["id": .string(id)])) }
        }
        // Delete a few around the batch boundaries and a few at random.
        var deleted: Set<String> = ["p0000", "p0255", "p0256", "p0257", "p0511", "p0512", "p0634"]
        for _ in 0 ..< 20 { deleted.insert(all.randomElement(using: &rng)!) }
        try db.inBatch {
            for id in deleted { try db.deleteDocument(try #require(try db.document(withID: id))) }
        }
        let live = all.filter { !deleted.contains($0) }
        #expect(try db.count == UInt64(live.count))

        #expect(try Self.ids(db) { _ in } == live)
        #expect(try Self.ids(db) { $0.includeDeleted = true } == all)
        #expect(try Self.ids(db) { $0.descending = true } == live.reversed())
        #expect(try Self.ids(db) { $0.includeDeleted = true; $0.descending = true } == all.reversed())
        for _ in 0 ..< 12 {
            let skip = Int.random(in: 0 ..< count, using: &rng)
            let limit = Int.random(in: 1 ... 400, using: &rng)
            let descending = Bool.random(using: &rng)
            let includeDeleted = Bool.random(using: &rng)
            var expected = includeDeleted ? all : live
            if descending { expected.reverse() }
            expected = Array(expected.dropFirst(skip).prefix(limit))
            let got = try Self.ids(db) {
                $0.skip = skip; $0.limit = limit; $0.descending = descending; $0.includeDeleted = includeDeleted
            }
            #expect(got == expected, "skip \(skip) limit \(limit) descending \(descending) includeDeleted \(includeDeleted)")
        }
        // A key range across a boundary, with a prefix that covers everything.
        #expect(try Self.ids(db) { $0.startKey = "p0200"; $0.endKey = "p0300"; $0.prefix = "p0" }
                == live.filter { $0 >= "p0200" && $0 <= "p0300" })
        #expect(try Self.ids(db) { $0.startKey = "p0600"; $0.endKey = "p0100"; $0.descending = true; $0.limit = 300 }
                == Array(live.filter { $0 >= "p0100" && $0 <= "p0600" }.reversed().prefix(300)))
        // Iterating by hand reads every page.
        let cursor = try db.allDocuments()
        var n = 0
        while try cursor.next() != nil { n += 1 }
        #expect(n == live.count)
        #expect(try cursor.next() == nil)
    }

    /// A cursor reads the commit that was current when it was made, through every page, while
    /// writes go on; the async form yields the same; a closed database's next page is an error
    /// that reaches the caller, not a silent end.
    @Test func cursorReadsOneSnapshotAndReportsErrors() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.inBatch {
            for i in 0 ..< 1000 { try db.saveDocument(MutableDocument(id: String(format: "d%04d", i), data: ["v": .int(Int64(i))])) }
        }
        let cursor = try db.allDocuments()
        var seen: [String] = []
        var edited = false
        while let d = try cursor.next() {
            seen.append(d.id)
            #expect(d.int(forKey: "v") == Int(d.id.dropFirst())!)
            if !edited {
                // After the first page: delete some later documents, add others, edit one.
                edited = true
                for i in stride(from: 500, to: 1000, by: 7) {
                    try await db.deleteDocument(try #require(try db.document(withID: String(format: "d%04d", i))))
                }
                try await db.saveDocument(MutableDocument(id: "d0999x", data: ["v": -1]))
                let m = try #require(try await db.document(withID: "d0998")).toMutable()
                m.setInt(-1, forKey: "v")
                try await db.saveDocument(m)
            }
        }
        #expect(seen == (0 ..< 1000).map { String(format: "d%04d", $0) })
        // A new cursor sees the writes; the async form reads the same documents.
        var asyncIDs: [String] = []
        for try await d in try db.allDocuments() { asyncIDs.append(d.id) }
        #expect(asyncIDs == (try db.allDocuments().readAll().map(\.id)))
        #expect(asyncIDs.count == 1000 - stride(from: 500, to: 1000, by: 7).map { $0 }.count + 1)

        let open = try db.allDocuments()
        _ = try open.next()
        try db.close()
        var failure: SetteeError?
        do {
            while try open.next() != nil {}
        } catch let e as SetteeError {
            failure = e
        }
        #expect(failure?.code == .notOpen)
    }

    @Test func onlyConflictsListsConflictedDocumentsInOrder() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        for id in ["k3", "k1", "k2", "calm"] {
            try db.insertRevision(rev(id, "1-a", ["1-a"], ["v": 1]))
        }
        for id in ["k3", "k1", "k2"] {
            _ = try db.insertRevisions([rev(id, "2-b", ["2-b", "1-a"], ["v": 2]), rev(id, "2-c", ["2-c", "1-a"], ["v": 3])])
        }
        #expect(try Self.ids(db) { $0.onlyConflicts = true } == ["k1", "k2", "k3"])
        #expect(try Self.ids(db) { $0.onlyConflicts = true; $0.descending = true } == ["k3", "k2", "k1"])
        #expect(try Self.ids(db) { $0.onlyConflicts = true; $0.limit = 1; $0.skip = 1 } == ["k2"])
        #expect(try Self.ids(db) { $0.onlyConflicts = true; $0.startKey = "k2" } == ["k2", "k3"])
        let docs = try db.allDocuments({ var o = AllDocumentsOptions(); o.onlyConflicts = true; return o }()).readAll()
        #expect(docs.allSatisfy { $0.revisionID == "2-c" && $0.int(forKey: "v") == 3 })
        // A conflict that ends by deleting a branch leaves the list.
        try db.insertRevision(rev("k2", "3-d", ["3-d", "2-b", "1-a"], deleted: true))
        #expect(try Self.ids(db) { $0.onlyConflicts = true } == ["k1", "k3"])
        #expect(try conflictsIndexCount(db) == 2)
    }
}
