import Foundation
import Testing
@testable import Settee

/// Couchbase Lite 3's default scope and collection: the same documents as the database-level
/// calls, names checked as Couchbase Lite checks them, queries `FROM _default._default` and
/// `DataSource.collection`.
@Suite struct CollectionTests {
    /// Couchbase Lite 3's getting-started code (its default-collection half), as written there.
    @Test func couchbaseLite3GettingStartedWithTheDefaultCollection() throws {
        let dir = try TemporaryDirectory()
        let database = try openDatabase(dir, "getting-started")
        let collection = try database.defaultCollection()

        let mutableDoc = MutableDocument()
            .setFloat(2.0, forKey: "version")
            .setString("SDK", forKey: "type")
        try collection.save(document: mutableDoc)

        guard let doc = try collection.document(id: mutableDoc.id) else {
            Issue.record("the saved document is not found")
            return
        }
        let updated = doc.toMutable()
        updated.setString("Swift", forKey: "language")
        try collection.save(document: updated)

        let query = QueryBuilder
            .select(SelectResult.all())
            .from(DataSource.collection(collection))
            .where(Expression.property("type").equalTo(Expression.string("SDK")))
        let results = try query.execute().allResults()
        #expect(results.count == 1)
        #expect(results.first?.dictionary(forKey: "_default")?["language"] == "Swift")
        #expect(try collection.count == 1)
    }

    @Test func theDefaultCollectionIsTheDatabasesDocuments() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let collection = try db.defaultCollection()
        #expect(collection.name == "_default" && collection.scope.name == "_default")
        #expect(collection.fullName == "_default._default")
        #expect(collection.database === db)
        #expect(collection.description == "db/_default._default")

        try collection.save(document: MutableDocument(id: "a", data: ["v": 1]))
        try db.saveDocument(MutableDocument(id: "b", data: ["v": 2]))
        #expect(try db.document(withID: "a")?.int(forKey: "v") == 1)
        #expect(try collection.document(id: "b")?.int(forKey: "v") == 2)
        #expect(try collection.count == 2 && db.count == 2)

        // Concurrency control and conflict handlers, as the database's.
        let stale = try #require(try collection.document(id: "a")).toMutable()
        let fresh = try #require(try collection.document(id: "a")).toMutable()
        fresh.setInt(10, forKey: "v")
        try collection.save(document: fresh)
        stale.setInt(20, forKey: "v")
        #expect(try collection.save(document: stale, concurrencyControl: .failOnConflict) == false)
        #expect(try collection.document(id: "a")?.int(forKey: "v") == 10)
        let retried = try collection.save(document: stale) { mine, current in
            mine.setInt((current?.int(forKey: "v") ?? 0) + 1, forKey: "v")
            return true
        }
        #expect(retried)
        #expect(try collection.document(id: "a")?.int(forKey: "v") == 11)

        // Deletion, purge and expiration.
        let b = try #require(try collection.document(id: "b"))
        #expect(try collection.delete(document: b, concurrencyControl: .failOnConflict))
        #expect(try db.document(withID: "b") == nil)
        #expect(try db.revisionTree(withID: "b") != nil)   // a tombstone, which replicates
        try collection.purge(id: "b")
        #expect(try db.revisionTree(withID: "b") == nil)
        let due = Date().addingTimeInterval(3600)
        try collection.setDocumentExpiration(id: "a", expiration: due)
        #expect(try abs(#require(try db.getDocumentExpiration(withID: "a")).timeIntervalSince(due)) < 1)
        #expect(try collection.getDocumentExpiration(id: "a") == db.getDocumentExpiration(withID: "a"))
        try collection.setDocumentExpiration(id: "a", expiration: nil)
        #expect(try collection.getDocumentExpiration(id: "a") == nil)
        try collection.purge(document: try #require(try collection.document(id: "a")))
        #expect(try collection.count == 0)

        // Indexes are the database's.
        try collection.createIndex(withName: "by-v", config: ValueIndexConfiguration(["v"]))
        #expect(try collection.indexes() == ["by-v"])
        #expect(try db.indexes == ["by-v"])
        try collection.deleteIndex(forName: "by-v")
        #expect(try db.indexes.isEmpty)
    }

    @Test func scopesAndCollectionsOfADatabase() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        #expect(try db.scopes().map(\.name) == ["_default"])
        #expect(try db.collections().map(\.name) == ["_default"])
        #expect(try db.collections(scope: nil).map(\.name) == ["_default"])
        #expect(try db.defaultScope().collections() == [db.defaultCollection()])
        #expect(try db.collection(name: "_default") == db.defaultCollection())
        #expect(try db.collection(name: "_default", scope: "_default") == db.defaultCollection())
        #expect(try db.defaultScope().collection(name: "_default") == db.defaultCollection())
        #expect(try db.scope(name: "_default") == db.defaultScope())
        #expect(Set([try db.defaultCollection(), try db.defaultCollection()]).count == 1)
        // Names that could be collections, but are not there.
        #expect(try db.collection(name: "tasks") == nil)
        #expect(try db.collection(name: "_default", scope: "store") == nil)
        #expect(try db.collections(scope: "store").isEmpty)
        #expect(try db.scope(name: "store") == nil)
        #expect(try db.collection(name: String(repeating: "a", count: 251)) == nil)
        #expect(try db.collection(name: "A-z_0%9") == nil)
        // Names Couchbase Lite refuses.
        for bad in ["", String(repeating: "a", count: 252), "_tasks", "%tasks", "a b", "a.b", "tâches", "a/b", "_Default"] {
            #expect(throws: SetteeError.self, "collection \(bad.prefix(20))") { try db.collection(name: bad) }
            #expect(throws: SetteeError.self, "scope \(bad.prefix(20))") { try db.collections(scope: bad) }
            do {
                _ = try db.scope(name: bad)
                Issue.record("scope name \(bad.prefix(20)) was accepted")
            } catch let e as SetteeError {
                #expect(e.code == .invalidParameter)
            }
        }
        // Another database's default collection is another collection.
        let other = try openDatabase(dir, "other")
        #expect(try other.defaultCollection() != db.defaultCollection())
    }

    @Test func listenersOfTheDefaultCollection() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let collection = try db.defaultCollection()
        let heard = Locked<[CollectionChange]>([])
        let signal = DispatchSemaphore(value: 0)
        let token = collection.addChangeListener { change in
            heard.withLock { $0.append(change) }
            signal.signal()
        }
        let onQueue = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "collection-tests")
        let queued = collection.addChangeListener(queue: queue) { _ in
            dispatchPrecondition(condition: .onQueue(queue))
            onQueue.signal()
        }
        let document = DispatchSemaphore(value: 0)
        let docToken = collection.addDocumentChangeListener(id: "watched") { change in
            if change.documentID == "watched" { document.signal() }
        }
        let docOnQueue = DispatchSemaphore(value: 0)
        let docQueued = collection.addDocumentChangeListener(id: "watched", queue: queue) { _ in
            dispatchPrecondition(condition: .onQueue(queue))
            docOnQueue.signal()
        }
        try db.saveDocument(MutableDocument(id: "watched"))
        #expect(wait(signal) && wait(onQueue) && wait(document) && wait(docOnQueue))
        #expect(heard.value.first?.collection == collection)
        #expect(heard.value.first?.documentIDs == ["watched"])
        for t in [token, queued, docToken, docQueued] { t.remove() }
    }

    @Test func sqlAndBuiltQueriesNameTheDefaultCollection() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let collection = try db.defaultCollection()
        try collection.save(document: MutableDocument(id: "t1", data: ["title": "milk"]))
        for text in ["SELECT * FROM _default._default", "SELECT * FROM _default", "SELECT _default.* FROM _default._default"] {
            let rows = try db.createQuery(text).execute().allResults()
            #expect(rows.map { $0.dictionary(forKey: "_default")?["title"] } == ["milk"], "\(text)")
        }
        let aliased = try db.createQuery("SELECT t.title FROM _default._default AS t WHERE t.title = 'milk'").execute().allResults()
        #expect(aliased.map { $0.string(forKey: "title") } == ["milk"])
        let named = try db.createQuery("SELECT META(x).id FROM _default._default x").execute().allResults()
        #expect(named.map { $0.string(at: 0) } == ["t1"])
        // A collection this database does not have.
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT * FROM store.tasks").execute() }
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT * FROM _default.tasks").execute() }
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT * FROM _default.").execute() }

        let built = QueryBuilder.select(SelectResult.expression(Expression.property("title").from("t")))
            .from(DataSource.collection(collection).as("t"))
        #expect(try built.execute().allResults().map { $0.string(forKey: "title") } == ["milk"])
        let whole = QueryBuilder.select(SelectResult.all()).from(DataSource.collection(collection))
        #expect(try whole.execute().allResults().first?.keys == ["_default"])
    }

    @Test func aClosedDatabasesCollectionsAnswerNotOpen() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let collection = try db.defaultCollection()
        try db.close()
        for attempt in [{ _ = try collection.document(id: "a") }, { _ = try collection.count }, { _ = try db.defaultCollection() },
                        { _ = try db.collections() }, { try collection.save(document: MutableDocument(id: "a")) }] {
            do {
                try attempt()
                Issue.record("a closed database answered")
            } catch let e as SetteeError {
                #expect(e.code == .notOpen)
            }
        }
    }
}
