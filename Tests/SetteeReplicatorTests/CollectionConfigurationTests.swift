import Foundation
@_spi(Replication) import Settee
import Testing
@_spi(Replication) @testable import SetteeReplicator

/// Couchbase Lite 3's replicator configuration by collection: `CollectionConfiguration` with its
/// filters, channels, document IDs and resolver, `ReplicatorConfiguration(collections:target:)`,
/// and document events naming their collection.
@Suite struct CollectionConfigurationTests {
    @Test func aCollectionsFiltersIDsAndResolverAreTheReplicators() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        let tasks = try a.defaultCollection()
        for (id, shared) in [("t1", true), ("t2", false), ("t3", true)] {
            try tasks.save(document: MutableDocument(id: id).setBoolean(shared, forKey: "shared"))
        }
        var collection = CollectionConfiguration(collection: tasks)
        collection.pushFilter = { doc, _ in doc["shared"] == true }
        var config = try ReplicatorConfiguration(collections: [collection], target: DatabaseEndpoint(database: b))
        config.replicatorType = .push
        config.logHandler = { @Sendable _, _ in }
        #expect(try config.collections.map(\.collection) == [tasks])
        #expect(try config.collections.first?.pushFilter != nil)
        let recorder = Recorder()
        let replicator = Replicator(config: config)
        recorder.attach(replicator)
        replicator.start()
        let final = await replicator.waitUntilStopped()
        #expect(final.error == nil)
        #expect(try b.defaultCollection().document(id: "t1") != nil)
        #expect(try b.defaultCollection().document(id: "t2") == nil)
        #expect(try b.defaultCollection().document(id: "t3") != nil)
        #expect(await recorder.waitFor { docs in docs.count == 2 })
        #expect(recorder.documents.value.allSatisfy { $0.1.collection == "_default" && $0.1.scope == "_default" })

        // documentIDs and a resolver per collection: a conflict on t1 resolved by the
        // collection's resolver (the remote side wins), only t1 pulled.
        try b.defaultCollection().save(document: try #require(try b.defaultCollection().document(id: "t1")).toMutable().setString("remote", forKey: "by"))
        try tasks.save(document: try #require(try tasks.document(id: "t1")).toMutable().setString("local", forKey: "by"))
        try b.defaultCollection().save(document: MutableDocument(id: "t4"))
        var pull = CollectionConfiguration(collection: tasks)
        pull.documentIDs = ["t1"]
        pull.conflictResolver = RemoteWinsResolver()
        var pullConfig = try ReplicatorConfiguration(collections: [pull], target: DatabaseEndpoint(database: b))
        pullConfig.replicatorType = .pull
        pullConfig.logHandler = { @Sendable _, _ in }
        let pulled = Replicator(config: pullConfig)
        pulled.start()
        #expect(await pulled.waitUntilStopped().error == nil)
        #expect(try tasks.document(id: "t1")?.string(forKey: "by") == "remote")
        #expect(try await a.conflictingRevisions(withID: "t1").count == 1)
        #expect(try tasks.document(id: "t4") == nil)
    }

    @Test func collectionListsAReplicatorCannotTakeAreErrors() throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        let target = DatabaseEndpoint(database: b)
        func refused(_ configs: [CollectionConfiguration], _ what: String) {
            do {
                _ = try ReplicatorConfiguration(collections: configs, target: target)
                Issue.record("accepted: \(what)")
            } catch let e as ReplicatorError {
                #expect(e.code == .invalidRequest, "\(what): \(e)")
            } catch {
                Issue.record("\(what): \(error)")
            }
        }
        refused([], "no collection")
        let one = CollectionConfiguration(collection: try a.defaultCollection())
        refused([one, one], "a collection twice")
        refused([one, CollectionConfiguration(collection: try b.defaultCollection())], "two databases' collections")
        #expect(try ReplicatorConfiguration(collections: [one], target: target).database === a)
        // A collection the target does not have.
        let tasks = try a.createCollection(name: "tasks", scope: "store")
        refused([CollectionConfiguration(collection: tasks)], "a collection the target lacks")
    }

    /// Several collections replicate with their namesakes, each with its own filters and
    /// checkpoints; events name their collection; the status sums them.
    @Test func namedCollectionsReplicateWithTheirNamesakes() async throws {
        let dir = try TestDirectory()
        let a = try dir.open("a"), b = try dir.open("b")
        let tasks = try a.createCollection(name: "tasks", scope: "store")
        let lists = try a.createCollection(name: "lists", scope: "store")
        let remoteTasks = try b.createCollection(name: "tasks", scope: "store")
        let remoteLists = try b.createCollection(name: "lists", scope: "store")
        for i in 0 ..< 20 { try tasks.save(document: MutableDocument(id: "t\(i)").setInt(i, forKey: "n")) }
        try lists.save(document: MutableDocument(id: "l1").setString("groceries", forKey: "name"))
        try lists.save(document: MutableDocument(id: "private").setBoolean(true, forKey: "private"))
        try a.defaultCollection().save(document: MutableDocument(id: "default-only"))
        try remoteLists.save(document: MutableDocument(id: "l2").setString("hardware", forKey: "name"))

        var listsConfig = CollectionConfiguration(collection: lists)
        listsConfig.pushFilter = { doc, _ in doc["private"] != true }
        var config = try ReplicatorConfiguration(collections: [CollectionConfiguration(collection: tasks), listsConfig],
                                                 target: DatabaseEndpoint(database: b))
        config.logHandler = { @Sendable _, _ in }
        #expect(try config.collections.map(\.collection.fullName) == ["store.tasks", "store.lists"])
        let recorder = Recorder()
        let replicator = Replicator(config: config)
        recorder.attach(replicator)
        replicator.start()
        let final = await replicator.waitUntilStopped()
        #expect(final.error == nil && final.activity == .stopped)
        #expect(try remoteTasks.count == 20 && remoteTasks.document(id: "t7")?.int(forKey: "n") == 7)
        #expect(try remoteLists.document(id: "l1") != nil && remoteLists.document(id: "private") == nil)
        #expect(try lists.document(id: "l2")?.string(forKey: "name") == "hardware")
        // Nothing crossed into another collection, nor the default one.
        #expect(try b.count == 0 && tasks.document(id: "l2") == nil && remoteTasks.document(id: "l1") == nil)
        #expect(await recorder.waitFor { docs in docs.count == 22 })
        let named = Set(recorder.documents.value.map { "\($0.1.scope).\($0.1.collection)/\($0.1.id)" })
        #expect(named.contains("store.tasks/t0") && named.contains("store.lists/l1") && named.contains("store.lists/l2"))
        #expect(final.progress.completed >= 22)
        #expect(try replicator.pendingDocumentIDs(collection: tasks).isEmpty)
        try tasks.save(document: MutableDocument(id: "t-new"))
        #expect(try replicator.pendingDocumentIDs(collection: tasks) == ["t-new"])
        #expect(try replicator.isDocumentPending("t-new", collection: tasks))
        #expect(throws: ReplicatorError.self) { try replicator.pendingDocumentIDs(collection: try a.defaultCollection()) }

        // A second run goes on from each collection's checkpoint: only the new document.
        let again = Replicator(config: config)
        let counted = Recorder()
        counted.attach(again)
        again.start()
        #expect(await again.waitUntilStopped().error == nil)
        #expect(await counted.waitFor { docs in docs.count == 1 })
        #expect(counted.documents.value.map { "\($0.1.collection)/\($0.1.id)" } == ["tasks/t-new"])
        #expect(try remoteTasks.document(id: "t-new") != nil)
    }

    /// Couchbase Lite 3's getting-started code for collections, a join and a replicator of two
    /// collection configurations, as an app writes it.
    @Test func couchbaseLite3CollectionSnippetsRunAsWritten() async throws {
        let dir = try TestDirectory()
        let database = try dir.open("travel")
        let peer = try dir.open("peer")

        // Create collections in a scope.
        let airlines = try database.createCollection(name: "airlines", scope: "inventory")
        let routes = try database.createCollection(name: "routes", scope: "inventory")
        let doc = MutableDocument(id: "airline_10")
            .setString("Air Settee", forKey: "name")
            .setString("US", forKey: "country")
        try airlines.save(document: doc)
        try routes.save(document: MutableDocument(id: "route_1")
            .setString("airline_10", forKey: "airlineid")
            .setString("SFO", forKey: "sourceairport"))
        guard let scope = try database.scope(name: "inventory") else { Issue.record("no scope"); return }
        #expect(try scope.collections().map(\.name) == ["airlines", "routes"])

        // A join query.
        let query = QueryBuilder
            .select(SelectResult.expression(Expression.property("name").from("airline")),
                    SelectResult.expression(Expression.property("sourceairport").from("route")))
            .from(DataSource.collection(airlines).as("airline"))
            .join(Join.join(DataSource.collection(routes).as("route"))
                .on(Meta.id.from("airline").equalTo(Expression.property("airlineid").from("route"))))
        let results = try query.execute().allResults()
        #expect(results.map { $0.string(forKey: "name") } == ["Air Settee"])
        #expect(results.map { $0.string(forKey: "sourceairport") } == ["SFO"])

        // A replicator with two collection configurations.
        _ = try peer.createCollection(name: "airlines", scope: "inventory")
        _ = try peer.createCollection(name: "routes", scope: "inventory")
        var airlinesConfig = CollectionConfiguration(collection: airlines)
        airlinesConfig.pushFilter = { document, _ in document.string(forKey: "country") == "US" }
        var routesConfig = CollectionConfiguration(collection: routes)
        routesConfig.documentIDs = ["route_1"]
        var config = try ReplicatorConfiguration(collections: [airlinesConfig, routesConfig], target: DatabaseEndpoint(database: peer))
        config.replicatorType = .pushAndPull
        config.continuous = false
        config.logHandler = { @Sendable _, _ in }
        let replicator = Replicator(config: config)
        let token = replicator.addDocumentReplicationListener { replication in
            for document in replication.documents { _ = "\(document.scope).\(document.collection)/\(document.id)" }
        }
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        token.remove()
        #expect(try peer.collection(name: "airlines", scope: "inventory")?.document(id: "airline_10") != nil)
        #expect(try peer.collection(name: "routes", scope: "inventory")?.document(id: "route_1") != nil)
    }
}
