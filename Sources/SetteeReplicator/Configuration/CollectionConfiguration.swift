@_spi(Replication) import Settee

/// What a replicator does with one collection (Couchbase Lite 3): its filters, channels,
/// document IDs and conflict resolver. Given to ``ReplicatorConfiguration/init(collections:target:)``.
///
/// ```swift
/// var tasks = CollectionConfiguration(collection: try db.defaultCollection())
/// tasks.channels = ["team-a"]
/// tasks.conflictResolver = MergeResolver()
/// let config = try ReplicatorConfiguration(collections: [tasks], target: URLEndpoint(url: url))
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct CollectionConfiguration: Sendable {
    /// The collection replicated.
    ///
    /// ```swift
    /// print(tasks.collection.fullName)
    /// ```
    public let collection: Collection
    /// Which local documents to push (their current revision); nil: all.
    ///
    /// ```swift
    /// tasks.pushFilter = { doc, _ in doc["shared"] == true }
    /// ```
    public var pushFilter: ReplicationFilter?
    /// Which pulled revisions to keep; nil: all.
    ///
    /// ```swift
    /// tasks.pullFilter = { doc, flags in flags.contains(.deleted) || doc["type"] == "task" }
    /// ```
    public var pullFilter: ReplicationFilter?
    /// Only documents in these channels, both ways, for peers that support channels; nil: all.
    ///
    /// ```swift
    /// tasks.channels = ["team-a"]
    /// ```
    public var channels: [String]?
    /// Only these documents, both ways; nil: all.
    ///
    /// ```swift
    /// tasks.documentIDs = ["settings"]
    /// ```
    public var documentIDs: [String]?
    /// The resolver of conflicts pulled into the collection; nil: ``DefaultConflictResolver``.
    ///
    /// ```swift
    /// tasks.conflictResolver = LocalWinsResolver()
    /// ```
    public var conflictResolver: (any ConflictResolverProtocol)? {
        get { resolverBox?.resolver }
        set { resolverBox = newValue.map(ResolverBox.init) }
    }
    private var resolverBox: ResolverBox?

    /// A configuration of `collection` with no filter, every channel and document, and the
    /// default resolver.
    ///
    /// ```swift
    /// let tasks = CollectionConfiguration(collection: try db.defaultCollection())
    /// ```
    public init(collection: Collection) {
        self.collection = collection
    }
}

/// One collection of a replicator of several, with the peer that holds its namesake.
struct CollectionPeer: Sendable {
    var configuration: CollectionConfiguration
    var peer: any ReplicationPeer
}

extension ReplicatorConfiguration {
    /// A configuration replicating `collections` with `target`, both ways, one-shot (Couchbase
    /// Lite 3's form): each collection with its own filters, channels, document IDs and resolver.
    ///
    /// ```swift
    /// let tasks = try db.createCollection(name: "tasks", scope: "store")
    /// let lists = try db.createCollection(name: "lists", scope: "store")
    /// var tasksConfig = CollectionConfiguration(collection: tasks)
    /// tasksConfig.channels = ["team-a"]
    /// var config = try ReplicatorConfiguration(collections: [tasksConfig, CollectionConfiguration(collection: lists)],
    ///                                          target: URLEndpoint(url: URL(string: "http://sync.example.com:4984/todo")!))
    /// config.continuous = true
    /// ```
    ///
    /// Each collection is replicated with the collection of the same scope and name on the
    /// target (``ReplicationPeer/peer(forCollection:scope:)``): Sync Gateway 3's keyspace
    /// `todo.store.tasks` on a server, the same-named collection of a database in this process.
    /// The default collection alone is replicated at the path the target names, as before
    /// collections, which is what Settee's server, Sync Gateway and CouchDB serve there. Each
    /// collection keeps its own checkpoints; the replicator's status sums theirs, and its
    /// document events name their collection.
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` for an empty list, one that names a
    ///   collection twice or collections of two databases (Couchbase Lite stops the app on
    ///   these; this initializer throws instead, so it is called with `try`), or a target that
    ///   has no collection of a name given.
    public init(collections: [CollectionConfiguration], target: any ReplicationPeer) throws {
        guard let first = collections.first else {
            throw ReplicatorError(.invalidRequest, "a replicator configuration needs at least one collection")
        }
        var seen: Set<String> = []
        for c in collections {
            guard c.collection.database.path == first.collection.database.path else {
                throw ReplicatorError(.invalidRequest, "the collections of one replicator are of one database: \(first.collection) and \(c.collection)")
            }
            guard seen.insert(c.collection.fullName).inserted else {
                throw ReplicatorError(.invalidRequest, "collection \(c.collection.fullName) is configured twice")
            }
        }
        self.init(database: first.collection.database, target: target)
        if collections.count == 1 && first.collection.fullName == "_default._default" {
            // The default collection alone: the configuration as before collections.
            pushFilter = first.pushFilter
            pullFilter = first.pullFilter
            channels = first.channels
            documentIDs = first.documentIDs
            conflictResolver = first.conflictResolver
            return
        }
        collectionPeers = try collections.map {
            CollectionPeer(configuration: $0, peer: try target.peer(forCollection: $0.collection.name, scope: $0.collection.scope.name))
        }
    }

    /// The configuration of each collection replicated, in the order given; for a configuration
    /// made with ``init(database:target:)``, the database's default collection with this
    /// configuration's filters, channels, document IDs and resolver.
    ///
    /// ```swift
    /// for c in try config.collections { print(c.collection.fullName, c.channels ?? []) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen`` once the database is closed.
    public var collections: [CollectionConfiguration] {
        get throws {
            if !collectionPeers.isEmpty { return collectionPeers.map(\.configuration) }
            var c = CollectionConfiguration(collection: try database.defaultCollection())
            c.pushFilter = pushFilter
            c.pullFilter = pullFilter
            c.channels = channels
            c.documentIDs = documentIDs
            c.conflictResolver = conflictResolver
            return [c]
        }
    }
}
