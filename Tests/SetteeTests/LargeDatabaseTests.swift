import Foundation
import Testing
@_spi(Replication) @testable import Settee

extension HeavyTests {
    /// Seed 001: an all-documents query in only-conflicts mode costs O(conflicts), not O(documents).
    @Suite struct LargeDatabaseTests {
        @Test func onlyConflictsOverAHundredThousandDocumentsFindsExactlyTheThree() throws {
            let dir = try TemporaryDirectory()
            let db = try openDatabase(dir)   // fullSync off
            let total = 100_000
            func id(_ i: Int) -> String { String(format: "doc-%06d", i) }
            let started = Date()
            try db.inBatch {
                for start in stride(from: 0, to: total, by: 1000) {
                    let batch = (start ..< start + 1000).map { i in rev(id(i), "1-a", ["1-a"], ["i": .int(Int64(i))]) }
                    let outcomes = try db.insertRevisions(batch)
                    if outcomes.contains(where: { $0 != .inserted }) { Issue.record("batch at \(start): \(outcomes)") }
                }
            }
            let conflicted = [id(17), id(50_000), id(99_999)]
            for d in conflicted.reversed() {
                _ = try db.insertRevisions([rev(d, "2-b", ["2-b", "1-a"], ["side": "b"]), rev(d, "2-c", ["2-c", "1-a"], ["side": "c"])])
            }
            // Not conflicts: a second branch that is deleted, and a plain update.
            _ = try db.insertRevisions([rev(id(3), "2-x", ["2-x", "1-a"], deleted: true), rev(id(3), "2-y", ["2-y", "1-a"])])
            try db.insertRevision(rev(id(4), "2-z", ["2-z", "1-a"]))
            print("100k documents built in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
            #expect(try db.count == UInt64(total))

            // The conflicts index holds exactly the three, so the query never looks at the others.
            #expect(try conflictsIndexCount(db) == 3)
            let entries = try db.core.store.read { tx in
                var keys: [String] = []
                try tx.forEach(in: db.core.trees.conflicts) { k, _ in
                    keys.append(String(decoding: k, as: UTF8.self))
                    return true
                }
                return keys
            }
            #expect(entries == conflicted)
            #expect(try db.core.store.read { tx in try tx.count(in: db.core.trees.byID) } == total)

            var options = AllDocumentsOptions()
            options.onlyConflicts = true
            let found = try db.allDocuments(options).readAll()
            #expect(found.map(\.id) == conflicted)
            #expect(found.allSatisfy { $0.revisionID == "2-c" && $0.string(forKey: "side") == "c" })
            options.descending = true
            #expect(try db.allDocuments(options).readAll().map(\.id) == conflicted.reversed())

            // Resolving one takes it out of the index and the query.
            try db.resolveConflict(withID: id(50_000))
            options.descending = false
            #expect(try db.allDocuments(options).readAll().map(\.id) == [id(17), id(99_999)])
            #expect(try conflictsIndexCount(db) == 2)
        }
    }
}
