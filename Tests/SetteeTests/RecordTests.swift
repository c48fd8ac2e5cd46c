import Foundation
import Testing
import Settee

/// `Codable` records: saved as documents, read back as values, under the same concurrency
/// control and conflict handler as documents.
@Suite struct RecordTests {
    struct Task: Codable, Identifiable, Equatable, Sendable {
        var id: String
        var title: String
        var done: Bool
        var due: Date?
        var tags: [String] = []
    }

    struct Counter: Codable, Identifiable, Sendable {
        var id: String
        var count: Int
        var writers: [String] = []
    }

    @Test func aValueRoundTripsAsADocument() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let due = Date(timeIntervalSince1970: 1_800_000_000.25)
        let saved = try #require(try db.saveRecord(Task(id: "task-1", title: "Buy milk", done: false, due: due, tags: ["home"])))
        #expect(saved.id == "task-1" && saved.revisionID.hasPrefix("1-") && saved.sequence == 1)
        let read = try #require(try db.record(withID: "task-1", as: Task.self))
        #expect(read == saved)
        #expect(read.value.due == due)
        // It is an ordinary document underneath.
        let doc = try #require(try db.document(withID: "task-1"))
        #expect(doc.string(forKey: "title") == "Buy milk")
        #expect(doc.string(forKey: "due") == "2027-01-15T08:00:00.250Z")
        #expect(doc.revisionID == saved.revisionID)
        // A UUID-keyed value is stored under the UUID's text.
        struct Note: Codable, Identifiable { var id = UUID(); var text: String }
        let note = Note(text: "hello")
        try db.saveRecord(note)
        #expect(try db.record(withID: note.id.uuidString, as: Note.self)?.value.text == "hello")
        #expect(try db.record(withID: "missing", as: Task.self) == nil)
    }

    @Test func concurrencyControlComparesWithTheRevisionTheRecordWasReadAs() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveRecord(Task(id: "t", title: "first", done: false))
        // A new value (no base revision) over an existing document is a conflict.
        #expect(try db.saveRecord(Task(id: "t", title: "clash", done: false), concurrencyControl: .failOnConflict) == nil)
        var mine = try #require(try db.record(withID: "t", as: Task.self))
        var theirs = try #require(try db.record(withID: "t", as: Task.self))
        theirs.value.title = "theirs"
        let savedTheirs = try #require(try db.saveRecord(theirs, concurrencyControl: .failOnConflict))
        #expect(savedTheirs.revisionID.hasPrefix("2-"))
        mine.value.done = true
        #expect(try db.saveRecord(mine, concurrencyControl: .failOnConflict) == nil)
        #expect(try db.record(withID: "t", as: Task.self)?.value.title == "theirs")
        // Last write wins goes over it.
        let over = try #require(try db.saveRecord(mine))
        #expect(over.revisionID.hasPrefix("3-"))
        #expect(try db.record(withID: "t", as: Task.self)?.value == Task(id: "t", title: "first", done: true))
        // A deletion meanwhile wins even over last-write-wins.
        try db.deleteDocument(try #require(try db.document(withID: "t")))
        #expect(try db.saveRecord(over) == nil)
        #expect(try db.record(withID: "t", as: Task.self) == nil)
    }

    @Test func theConflictHandlerMergesWithTheCurrentValue() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveRecord(Task(id: "t", title: "draft", done: false, tags: ["a"]))
        let base = try #require(try db.record(withID: "t", as: Task.self))
        var other = base
        other.value.tags.append("b")
        try db.saveRecord(other)
        var calls = 0
        var edit = base.value
        edit.done = true
        let merged = try #require(try db.saveRecord(edit, basedOn: base.revisionID) { mine, current in
            calls += 1
            mine.tags = current?.tags ?? mine.tags
            return true
        })
        #expect(calls == 1)
        #expect(merged.value == Task(id: "t", title: "draft", done: true, tags: ["a", "b"]))
        #expect(try db.record(withID: "t", as: Task.self)?.value == merged.value)
        // No conflict: the handler is not called.
        var next = merged.value
        next.title = "final"
        try db.saveRecord(next, basedOn: merged.revisionID) { _, _ in Issue.record("called without a conflict"); return true }
        // Giving up saves nothing; what the handler throws comes back.
        #expect(try db.saveRecord(edit, basedOn: base.revisionID) { _, _ in false } == nil)
        struct Refused: Error {}
        #expect(throws: Refused.self) { try db.saveRecord(edit, basedOn: base.revisionID) { _, _ in throw Refused() } }
        #expect(try db.record(withID: "t", as: Task.self)?.value.title == "final")
        // The current value is nil when the document was deleted meanwhile.
        try db.deleteDocument(try #require(try db.document(withID: "t")))
        var sawDeleted = false
        try db.saveRecord(edit, basedOn: base.revisionID) { _, current in sawDeleted = current == nil; return true }
        #expect(sawDeleted)
        #expect(try db.record(withID: "t", as: Task.self)?.value == edit)
    }

    @Test func valuesThatCannotBeDocumentsAreRefused() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        struct Scalar: Encodable, Identifiable {
            var id = "scalar"
            func encode(to encoder: any Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(5) }
        }
        struct Reserved: Codable, Identifiable { var id: String; var _rev: String }
        struct Unsendable: Encodable, Identifiable { var id = "nan"; var x = Double.nan }
        #expect(setteeError { try db.saveRecord(Scalar()) }?.code == .invalidParameter)
        #expect(setteeError { try db.saveRecord(Reserved(id: "r", _rev: "1-a")) }?.code == .invalidParameter)
        #expect(setteeError { try db.saveRecord(Unsendable()) } != nil)
        #expect(setteeError { try db.saveRecord(Task(id: "", title: "", done: false)) }?.code == .invalidParameter)
        // A document that does not fit the type is an error, not a default.
        try db.saveDocument(MutableDocument(id: "odd", data: ["title": 5]))
        #expect(setteeError { _ = try db.record(withID: "odd", as: Task.self) }?.code == .invalidParameter)
        #expect(try db.count == 0 + 1)
    }

    @Test func asyncSavesWithAConflictHandlerAllLand() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let base = try #require(try await db.saveRecord(Counter(id: "c", count: 0)))
        // Every task starts from the same base revision: all but one meet a conflict and merge.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0 ..< 20 {
                group.addTask {
                    var value = base.value
                    value.count = 1
                    value.writers = ["w\(i)"]
                    let saved = try await db.saveRecord(value, basedOn: base.revisionID) { mine, current in
                        mine.count = (current?.count ?? 0) + 1
                        mine.writers = (current?.writers ?? []) + ["w\(i)"]
                        return true
                    }
                    #expect(saved != nil)
                }
            }
            try await group.waitForAll()
        }
        let final = try #require(try await db.record(withID: "c", as: Counter.self))
        #expect(final.value.count == 20)
        #expect(Set(final.value.writers) == Set((0 ..< 20).map { "w\($0)" }))
        #expect(final.revisionID.hasPrefix("21-"))
        var stale = base
        stale.value.count = -1
        #expect(try await db.saveRecord(stale, concurrencyControl: .failOnConflict) == nil)
    }
}
