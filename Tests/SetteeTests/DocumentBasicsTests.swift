import Foundation
import Testing
@testable import Settee

@Suite struct DocumentBasicsTests {
    @Test func saveReadUpdateDelete() throws {
        let dir = try TemporaryDirectory()
        let db = try Database(name: "basics", config: DatabaseConfiguration(directory: dir.path))
        let doc = MutableDocument(id: "task-1", data: ["title": "Buy milk", "done": false, "n": 3])
        try db.saveDocument(doc)
        let rev1 = try #require(doc.revisionID)
        #expect(rev1.hasPrefix("1-"))
        let read = try #require(try db.document(withID: "task-1"))
        #expect(read.string(forKey: "title") == "Buy milk")
        #expect(read.int(forKey: "n") == 3)
        #expect(read.bool(forKey: "done") == false)
        #expect(read.revisionID == rev1)
        #expect(db.count == 1)

        let m = read.toMutable()
        m.setBool(true, forKey: "done")
        try db.saveDocument(m)
        #expect(m.revisionID?.hasPrefix("2-") == true)
        #expect(try db.document(withID: "task-1")?.bool(forKey: "done") == true)
        // The parent's body stays readable until compaction.
        #expect(try db.document(withID: "task-1", revisionID: rev1)?.bool(forKey: "done") == false)

        try db.deleteDocument(try #require(try db.document(withID: "task-1")))
        #expect(try db.document(withID: "task-1") == nil)
        #expect(db.count == 0)
        let tree = try #require(try db.revisionTree(withID: "task-1"))
        #expect(tree.revisions.count == 3)
        #expect(tree.revisions.last?.isDeleted == true)
        try db.close()
        #expect(throws: SetteeError.self) { try db.document(withID: "task-1") }

        let again = try Database(name: "basics", config: DatabaseConfiguration(directory: dir.path))
        #expect(try again.revisionTree(withID: "task-1")?.revisions.count == 3)
        #expect(again.lastSequence == 3)
        try again.delete()
        #expect(!Database.exists(withName: "basics", inDirectory: dir.path))
    }
}

/// A directory removed when the value is released.
final class TemporaryDirectory {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "settee-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
