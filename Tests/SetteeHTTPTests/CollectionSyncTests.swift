import AsyncHTTPClient
import Foundation
import NIOCore
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
@testable import SetteeServer
import Testing

/// A three-collection app (lists, tasks and users of scope `store`) syncing both ways with the
/// sync server's keyspaces over real loopback sockets, as Couchbase Lite 3 syncs with Sync
/// Gateway 3: two devices of alice's, each collection with its own sync function on the server,
/// what bob owns never reaching alice.
@Suite struct CollectionSyncTests {
    /// Each collection routes a document to its owner's channel and grants the owner that
    /// channel; `tasks` also refuses a task without a list.
    static let config = """
        {"databases": {"todo": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true}, "alice": {"password": "secret"}, "bob": {"password": "secret"}},
          "scopes": {"store": {"collections": {
            "lists": {"sync": `function(doc) { channel("lists-" + doc.owner); access(doc.owner, "lists-" + doc.owner); }`},
            "tasks": {"sync": `function(doc) {
                if (!doc._deleted && !doc.list) { throw({forbidden: "a task belongs to a list"}); }
                channel("tasks-" + doc.owner); access(doc.owner, "tasks-" + doc.owner); }`},
            "users": {"sync": `function(doc) { channel("users-" + doc._id); access(doc._id, "users-" + doc._id); }`}}}}}}}
        """

    static let collectionNames = ["lists", "tasks", "users"]

    /// A device: a database with the app's three collections.
    static func device(_ dir: Scratch, _ name: String) throws -> (Database, [String: Collection]) {
        let db = try dir.open(name)
        var collections: [String: Collection] = [:]
        for c in collectionNames { collections[c] = try db.createCollection(name: c, scope: "store") }
        return (db, collections)
    }

    /// Replicates the three collections with the server as `user`, both ways, one-shot.
    static func sync(_ collections: [String: Collection], _ url: URL, user: String) async throws -> ReplicatorStatus {
        let configs = collectionNames.map { CollectionConfiguration(collection: collections[$0]!) }
        var config = try ReplicatorConfiguration(collections: configs, target: URLEndpoint(url: url))
        config.authenticator = BasicAuthenticator(username: user, password: "secret")
        config.logHandler = { @Sendable _, _ in }
        let replicator = Replicator(config: config)
        replicator.start()
        return await replicator.waitUntilStopped()
    }

    @Test func aThreeCollectionAppSyncsBothWays() async throws {
        var serverConfig = try ServerConfiguration(json: Self.config)
        serverConfig.interface = "127.0.0.1:0"
        serverConfig.adminInterface = "127.0.0.1:0"
        serverConfig.log = []
        let server = try SetteeServer(configuration: serverConfig)
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let run = Task { try await server.run { ports.continuation.yield($0) } }
        defer {
            run.cancel()
            try? server.close()
        }
        var iterator = ports.stream.makeAsyncIterator()
        let listening = try #require(await iterator.next())
        let url = URL(string: "http://127.0.0.1:\(listening.publicPort)/todo")!

        let dir = try Scratch()
        let (_, phone) = try Self.device(dir, "phone")
        let (_, laptop) = try Self.device(dir, "laptop")
        let (_, bobsPhone) = try Self.device(dir, "bobs-phone")

        // The phone makes alice's profile, a list and its tasks; bob makes his own.
        try phone["users"]!.save(document: MutableDocument(id: "alice").setString("Alice", forKey: "name"))
        try phone["lists"]!.save(document: MutableDocument(id: "groceries").setString("alice", forKey: "owner"))
        for i in 0 ..< 10 {
            try phone["tasks"]!.save(document: MutableDocument(id: "task-\(i)", data: [
                "owner": "alice", "list": "groceries", "title": .string("item \(i)"), "done": false]))
        }
        try bobsPhone["users"]!.save(document: MutableDocument(id: "bob"))
        try bobsPhone["lists"]!.save(document: MutableDocument(id: "hardware").setString("bob", forKey: "owner"))
        try bobsPhone["tasks"]!.save(document: MutableDocument(id: "bob-task", data: ["owner": "bob", "list": "hardware"]))
        // A task the server's tasks function refuses.
        try phone["tasks"]!.save(document: MutableDocument(id: "orphan").setString("alice", forKey: "owner"))

        let pushed = try await Self.sync(phone, url, user: "alice")
        #expect(pushed.activity == .stopped)
        #expect(try await Self.sync(bobsPhone, url, user: "bob").error == nil)

        // The laptop pulls alice's three collections, each into its namesake.
        #expect(try await Self.sync(laptop, url, user: "alice").error == nil)
        #expect(try laptop["users"]!.document(id: "alice")?.string(forKey: "name") == "Alice")
        #expect(try laptop["lists"]!.document(id: "groceries") != nil)
        #expect(try laptop["tasks"]!.count == 10)
        #expect(try laptop["tasks"]!.document(id: "task-3")?.string(forKey: "title") == "item 3")
        // Nothing of bob's, nothing refused, nothing in another collection.
        #expect(try laptop["users"]!.document(id: "bob") == nil && laptop["lists"]!.document(id: "hardware") == nil)
        #expect(try laptop["tasks"]!.document(id: "bob-task") == nil && laptop["tasks"]!.document(id: "orphan") == nil)
        #expect(try laptop["lists"]!.document(id: "task-3") == nil && laptop["lists"]!.database.count == 0)

        // The laptop edits and deletes; the phone gets both back.
        let task = try #require(try laptop["tasks"]!.document(id: "task-0")).toMutable()
        try laptop["tasks"]!.save(document: task.setBoolean(true, forKey: "done"))
        try laptop["tasks"]!.delete(document: try #require(try laptop["tasks"]!.document(id: "task-9")))
        try laptop["lists"]!.save(document: MutableDocument(id: "errands").setString("alice", forKey: "owner"))
        #expect(try await Self.sync(laptop, url, user: "alice").error == nil)
        #expect(try await Self.sync(phone, url, user: "alice").error == nil)
        #expect(try phone["tasks"]!.document(id: "task-0")?.boolean(forKey: "done") == true)
        #expect(try phone["tasks"]!.document(id: "task-9") == nil)
        #expect(try phone["lists"]!.document(id: "errands") != nil)
        #expect(try phone["tasks"]!.count == 10)   // 9 of alice's, and the refused orphan kept locally

        // Bob sees his own only.
        #expect(try await Self.sync(bobsPhone, url, user: "bob").error == nil)
        #expect(try bobsPhone["lists"]!.count == 1 && bobsPhone["tasks"]!.count == 1 && bobsPhone["users"]!.count == 1)
    }
}
