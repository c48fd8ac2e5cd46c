import Foundation
import Synchronization
import Testing
@testable import Settee
import SetteeStorage

/// Named collections: made, listed, kept apart from each other and from the default collection
/// (documents, sequences, counts, indexes, listeners, queries), kept across a reopen and a
/// compaction, written together in one batch, and deleted.
@Suite struct NamedCollectionTests {
    @Test func createdCollectionsAreListedAndKeptAcrossAReopen() throws {
        let dir = try TemporaryDirectory()
        var db: Database? = try openDatabase(dir)
        let tasks = try db!.createCollection(name: "tasks", scope: "store")
        #expect(tasks.name == "tasks" && tasks.scope.name == "store" && tasks.fullName == "store.tasks")
        #expect(try db!.createCollection(name: "tasks", scope: "store") == tasks)   // idempotent
        try db!.createCollection(name: "lists", scope: "store")
        try db!.createCollection(name: "users")
        #expect(try db!.scopes().map(\.name) == ["_default", "store"])
        #expect(try db!.collections(scope: "store").map(\.name) == ["lists", "tasks"])
        #expect(try db!.collections().map(\.name) == ["_default", "users"])
        #expect(try db!.scope(name: "store")?.collections().map(\.name) == ["lists", "tasks"])
        #expect(try db!.collection(name: "tasks", scope: "store") == tasks)
        #expect(try db!.collection(name: "tasks") == nil)
        try tasks.save(document: MutableDocument(id: "t1", data: ["title": "milk"]))
        try db!.close()
        db = nil

        let reopened = try openDatabase(dir)
        #expect(try reopened.collections(scope: "store").map(\.name) == ["lists", "tasks"])
        let again = try #require(try reopened.collection(name: "tasks", scope: "store"))
        #expect(try again.document(id: "t1")?.string(forKey: "title") == "milk")
        #expect(try again.count == 1)
        #expect(try reopened.count == 0)
    }

    @Test func collectionsKeepTheirDocumentsSequencesAndCountsApart() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        let lists = try db.createCollection(name: "lists", scope: "store")
        try db.saveDocument(MutableDocument(id: "same", data: ["in": "default"]))
        try tasks.save(document: MutableDocument(id: "same", data: ["in": "tasks"]))
        try lists.save(document: MutableDocument(id: "same", data: ["in": "lists"]))
        try tasks.save(document: MutableDocument(id: "t2"))
        #expect(try db.document(withID: "same")?.string(forKey: "in") == "default")
        #expect(try tasks.document(id: "same")?.string(forKey: "in") == "tasks")
        #expect(try lists.document(id: "same")?.string(forKey: "in") == "lists")
        #expect(try lists.document(id: "t2") == nil)
        #expect(try (db.count, tasks.count, lists.count) == (1, 2, 1))
        // Each collection has its own sequences, as in Couchbase Lite.
        #expect(try tasks.document(id: "t2")?.sequence == 2)
        #expect(try lists.document(id: "same")?.sequence == 1)

        // Concurrency control, conflict handlers, deletion, purge and expiration per collection.
        let doc = try #require(try tasks.document(id: "same")).toMutable()
        try tasks.save(document: MutableDocument(id: "same", data: ["in": "elsewhere"]))
        doc.setString("mine", forKey: "in")
        #expect(try tasks.save(document: doc, concurrencyControl: .failOnConflict) == false)
        #expect(try tasks.save(document: doc) { mine, current in
            mine.setString("merged " + (current?.string(forKey: "in") ?? ""), forKey: "in")
            return true
        })
        #expect(try tasks.document(id: "same")?.string(forKey: "in") == "merged elsewhere")
        try tasks.delete(document: try #require(try tasks.document(id: "same")))
        #expect(try tasks.document(id: "same") == nil)
        #expect(try db.document(withID: "same") != nil && lists.document(id: "same") != nil)
        try lists.purge(id: "same")
        #expect(try lists.count == 0 && db.count == 1)
        let due = Date(timeIntervalSinceNow: 3600)
        try tasks.setDocumentExpiration(id: "t2", expiration: due)
        #expect(try tasks.getDocumentExpiration(id: "t2").map { abs($0.timeIntervalSince(due)) < 1 } == true)
        #expect(try db.getDocumentExpiration(withID: "t2") == nil)
    }

    @Test func indexesAndQueriesArePerCollection() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        let notes = try db.createCollection(name: "notes")
        for i in 0 ..< 50 {
            try tasks.save(document: MutableDocument(id: "t\(i)", data: ["n": .int(Int64(i)), "kind": "task"]))
            try db.saveDocument(MutableDocument(id: "d\(i)", data: ["n": .int(Int64(i)), "kind": "plain"]))
        }
        try notes.save(document: MutableDocument(id: "n1", data: ["n": 7, "kind": "note"]))
        try tasks.createIndex(withName: "by-n", config: ValueIndexConfiguration(["n"]))
        #expect(try tasks.indexes() == ["by-n"])
        #expect(try db.indexes.isEmpty && notes.indexes().isEmpty)
        // Another collection's index of the same name is its own.
        try notes.createIndex(withName: "by-n", config: ValueIndexConfiguration(["kind"]))

        let sql = try db.createQuery("SELECT META().id, kind FROM store.tasks WHERE n >= 45 ORDER BY n")
        #expect(try sql.execute().allResults().map { $0.string(forKey: "id") } == ["t45", "t46", "t47", "t48", "t49"])
        #expect(try sql.explain().contains("by-n"))
        let star = try db.createQuery("SELECT * FROM store.tasks WHERE n = 3").execute().allResults()
        #expect(star.first?.dictionary(forKey: "tasks")?["kind"] == "task")
        let bare = try db.createQuery("SELECT count(*) AS c FROM notes").execute().allResults()
        #expect(bare.first?.int(forKey: "c") == 1)
        let aliased = try db.createQuery("SELECT t.n FROM store.tasks AS t WHERE t.n = 9").execute().allResults()
        #expect(aliased.map { $0.int(forKey: "n") } == [9])
        #expect(try db.createQuery("SELECT count(*) AS c FROM _").execute().allResults().first?.int(forKey: "c") == 50)
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT * FROM store.notes").execute() }

        let built = QueryBuilder.select(SelectResult.all()).from(DataSource.collection(tasks))
            .where(Expression.property("n").equalTo(Expression.int(1)))
        #expect(try built.execute().allResults().map { $0.dictionary(forKey: "tasks")?["kind"] } == ["task"])
        try tasks.deleteIndex(forName: "by-n")
        #expect(try tasks.indexes().isEmpty && notes.indexes() == ["by-n"])
    }

    @Test func listenersHearTheirOwnCollection() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        let heardTasks = Locked<[String]>([])
        let heardDefault = Locked<[String]>([])
        let signal = DispatchSemaphore(value: 0)
        let t1 = tasks.addChangeListener { change in
            #expect(change.collection == tasks)
            heardTasks.withLock { $0 += change.documentIDs }
            signal.signal()
        }
        let defaultSignal = DispatchSemaphore(value: 0)
        let t2 = db.addChangeListener { change in
            heardDefault.withLock { $0 += change.documentIDs }
            defaultSignal.signal()
        }
        let doc = DispatchSemaphore(value: 0)
        let t3 = tasks.addDocumentChangeListener(id: "a") { _ in doc.signal() }
        try tasks.save(document: MutableDocument(id: "a"))
        #expect(wait(signal) && wait(doc))
        try db.saveDocument(MutableDocument(id: "b"))
        try tasks.save(document: MutableDocument(id: "c"))
        #expect(wait(signal) && wait(defaultSignal))
        #expect(heardTasks.value == ["a", "c"])
        #expect(heardDefault.value == ["b"])
        for t in [t1, t2, t3] { t.remove() }
    }

    @Test func aBatchWritesEveryCollectionAtomically() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        let lists = try db.createCollection(name: "lists", scope: "store")
        try db.inBatch {
            try lists.save(document: MutableDocument(id: "l1", data: ["name": "groceries"]))
            try tasks.save(document: MutableDocument(id: "t1", data: ["list": "l1"]))
            try db.saveDocument(MutableDocument(id: "d1"))
            // The batch's own writes are read back inside it, per collection.
            #expect(try tasks.count == 1 && lists.document(id: "l1") != nil && db.count == 1)
            #expect(try tasks.document(id: "l1") == nil)
        }
        #expect(try (tasks.count, lists.count, db.count) == (1, 1, 1))
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try db.inBatch {
                try lists.save(document: MutableDocument(id: "l2"))
                try tasks.save(document: MutableDocument(id: "t2"))
                throw Stop()
            }
        }
        #expect(try lists.document(id: "l2") == nil && tasks.document(id: "t2") == nil)
        #expect(try tasks.count == 1 && lists.count == 1)
        // Collections are made and deleted outside a batch.
        let inside = setteeError { try db.inBatch { try db.createCollection(name: "x") } }
        #expect(inside?.code == .invalidParameter)
        #expect(try db.collection(name: "x") == nil)
    }

    @Test func compactionKeepsEveryCollection() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        try tasks.createIndex(withName: "by-n", config: ValueIndexConfiguration(["n"]))
        for i in 0 ..< 300 {
            for round in 0 ..< 3 {
                try tasks.save(document: MutableDocument(id: "t\(i)", data: ["n": .int(Int64(i)), "round": .int(Int64(round))]))
            }
            try db.saveDocument(MutableDocument(id: "d\(i)", data: ["n": .int(Int64(i))]))
        }
        let blob = Blob(contentType: "text/plain", data: Data("in a collection".utf8))
        try tasks.save(document: MutableDocument(id: "with-blob").setBlob(blob, forKey: "file"))
        let report = try db.compact()
        #expect(report.documents == 601)
        #expect(try tasks.count == 301 && db.count == 300)
        #expect(try tasks.document(id: "t299")?.int(forKey: "round") == 2)
        #expect(try tasks.document(id: "with-blob")?.blob(forKey: "file")?.content == Data("in a collection".utf8))
        let rows = try db.createQuery("SELECT META().id FROM store.tasks WHERE n = 150").execute().allResults()
        #expect(rows.map { $0.string(forKey: "id") } == ["t150"])
        try db.close()
        let reopened = try openDatabase(dir)
        let again = try #require(try reopened.collection(name: "tasks", scope: "store"))
        #expect(try again.document(id: "t10")?.int(forKey: "round") == 2)
        #expect(try again.document(id: "with-blob")?.blob(forKey: "file")?.content == Data("in a collection".utf8))
    }

    @Test func aDeletedCollectionsHandlesAnswerAClearError() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        try tasks.save(document: MutableDocument(id: "t1"))
        try tasks.createIndex(withName: "by-n", config: ValueIndexConfiguration(["n"]))
        try db.deleteCollection(name: "tasks", scope: "store")
        #expect(try db.collection(name: "tasks", scope: "store") == nil)
        #expect(try db.scopes().map(\.name) == ["_default"])
        for attempt in [{ _ = try tasks.document(id: "t1") }, { _ = try tasks.count },
                        { try tasks.save(document: MutableDocument(id: "t2")) }, { _ = try tasks.indexes() }] {
            let e = setteeError(attempt)
            #expect(e?.code == .notOpen)
            #expect(e?.message.contains("store.tasks") == true)
        }
        // Made again, it is empty; deleting what is not there does nothing.
        let again = try db.createCollection(name: "tasks", scope: "store")
        #expect(try again.count == 0 && again.document(id: "t1") == nil && again.indexes().isEmpty)
        try db.deleteCollection(name: "absent", scope: "store")
        #expect(setteeError { try db.deleteCollection(name: "_default") }?.code == .invalidParameter)
        #expect(setteeError { try db.createCollection(name: "_bad") }?.code == .invalidParameter)
        #expect(setteeError { try db.createCollection(name: "ok", scope: "bad scope") }?.code == .invalidParameter)
        try db.close()
        #expect(setteeError { _ = try again.count }?.code == .notOpen)
        #expect(setteeError { try db.createCollection(name: "late") }?.code == .notOpen)
    }

    @Test func asyncObservationIsTheCollections() async throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        try tasks.save(document: MutableDocument(id: "before"))
        var events = tasks.changeEvents(since: 0).makeAsyncIterator()
        let first = try await events.next()
        #expect(first?.documentIDs == ["before"])
        try await db.saveDocument(MutableDocument(id: "elsewhere"))
        try tasks.save(document: MutableDocument(id: "after"))
        let second = try await events.next()
        #expect(second?.documentIDs == ["after"])
        var watched = tasks.documentChanges(id: "after").makeAsyncIterator()
        #expect(try await watched.next()??.id == "after")
    }

    /// A close that fails (here: the disk refuses the trim of the log's tail) still lets go of
    /// the store: the file and its collections' cores hold each other, and nothing else does once
    /// the last handle is closed, so the memory map (a terabyte of address space) and descriptor
    /// must not outlive them. The database opens again and keeps what was acknowledged.
    @Test func aCloseThatFailsStillLetsGoOfTheStore() throws {
        let dir = try TemporaryDirectory()
        let config = DatabaseConfiguration(directory: dir.path)
        let failing = Failing()
        weak var file: DatabaseFile?
        do {
            let db = try Database(name: "db", config: config, openFile: { (path) throws(StorageError) in
                FailingTrim(real: try PosixFile(path: path), failing: failing)
            })
            let tasks = try db.createCollection(name: "tasks", scope: "store")
            try tasks.save(document: MutableDocument(id: "t1", data: ["title": "milk"]))
            try db.saveDocument(MutableDocument(id: "d1"))
            file = db.core.file
            failing.on.store(true, ordering: .relaxed)
            #expect(throws: SetteeError.self) { try db.close() }
            #expect(throws: SetteeError.self) { try tasks.document(id: "t1") }
        }
        #expect(file == nil, "the store outlived every handle after a failed close")
        let db = try Database(name: "db", config: config)
        defer { try? db.close() }
        #expect(try db.collection(name: "tasks", scope: "store")?.document(id: "t1")?.string(forKey: "title") == "milk")
        #expect(try db.document(withID: "d1") != nil)
    }
}

private final class Failing: Sendable {
    let on = Atomic<Bool>(false)
}

/// A log file whose tail trim fails once `failing` is on: what a full or failing disk does to
/// the last step of a close.
private final class FailingTrim: StorageFile {
    let real: PosixFile
    let failing: Failing
    init(real: PosixFile, failing: Failing) {
        self.real = real
        self.failing = failing
    }
    var descriptor: Int32 { real.descriptor }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) { try real.write(bytes, at: offset) }
    func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) { try real.writeDurably(bytes, at: offset) }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int { try real.read(into: buffer, at: offset) }
    func sync() throws(StorageError) { try real.sync() }
    func syncForOrdering() throws(StorageError) { try real.syncForOrdering() }
    func size() throws(StorageError) -> UInt64 { try real.size() }
    func truncate(to size: UInt64) throws(StorageError) {
        if failing.on.load(ordering: .relaxed) { throw StorageError.noSpace("ftruncate") }
        try real.truncate(to: size)
    }
    func close() { real.close() }
}
