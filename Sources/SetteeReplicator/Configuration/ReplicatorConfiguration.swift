import Foundation
@_spi(Replication) import Settee

/// Which way a replicator copies changes.
///
/// ```swift
/// config.replicatorType = .pull
/// ```
///
/// - Note: A value type; safe to share between threads.
public enum ReplicatorType: String, Sendable, CaseIterable {
    /// From the local database to the target.
    case push
    /// From the target to the local database.
    case pull
    /// Both ways at once.
    case pushAndPull

    var pushes: Bool { self != .pull }
    var pulls: Bool { self != .push }
}

/// Flags of a replicated revision, given to filters and reported in document events.
///
/// ```swift
/// config.pushFilter = { doc, flags in flags.contains(.deleted) || doc["shared"] == true }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DocumentFlags: OptionSet, Sendable, Hashable {
    /// The bits.
    ///
    /// ```swift
    /// let f = DocumentFlags(rawValue: 1)
    /// ```
    public let rawValue: UInt8

    /// Flags from bits.
    ///
    /// ```swift
    /// let f = DocumentFlags(rawValue: 1)   // .deleted
    /// ```
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The revision is a tombstone (possibly keeping properties, seed 003).
    ///
    /// ```swift
    /// if flags.contains(.deleted) { … }
    /// ```
    public static let deleted = DocumentFlags(rawValue: 1)
    /// The remote side no longer lets this replicator's user read the document (Sync Gateway's
    /// channel removal or access revocation): a pull purged it locally (Couchbase Lite's
    /// `accessRemoved`).
    ///
    /// ```swift
    /// if flags.contains(.accessRemoved) { forget(doc.id) }
    /// ```
    public static let accessRemoved = DocumentFlags(rawValue: 2)
}

/// A push or pull filter: whether to replicate a revision. Pushes see the local current
/// revision, pulls the fetched remote one; tombstones come with whatever properties they kept.
///
/// ```swift
/// config.pullFilter = { doc, flags in doc["worker_id"] == "w-7" }
/// ```
public typealias ReplicationFilter = @Sendable (Document, DocumentFlags) -> Bool

/// How important a replicator log message is.
///
/// ```swift
/// config.logHandler = { level, message in if level >= .warning { print(message) } }
/// ```
///
/// - Note: A value type; safe to share between threads.
public enum ReplicatorLogLevel: Int, Sendable, Comparable, CaseIterable {
    /// Details of the run.
    case debug
    /// Sessions starting and stopping.
    case info
    /// Something the application should fix (a resolver returning another document's ID, a
    /// throwing resolver).
    case warning
    /// A replication failed.
    case error

    /// Orders by importance.
    ///
    /// ```swift
    /// if level >= .warning { … }
    /// ```
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// What a ``Replicator`` does: the Couchbase Lite configuration (seed 002), over any
/// ``ReplicationPeer``.
///
/// ```swift
/// var config = ReplicatorConfiguration(database: db, target: DatabaseEndpoint(database: other))
/// config.replicatorType = .pushAndPull
/// config.continuous = true
/// config.conflictResolver = LocalWinsResolver()
/// let replicator = Replicator(config: config)
/// ```
///
/// - Note: A value type; safe to share between threads. A replicator copies its configuration
///   when created: later changes to the value do not affect it.
public struct ReplicatorConfiguration: Sendable {
    /// The local database.
    ///
    /// ```swift
    /// print(config.database.name)
    /// ```
    public private(set) var database: Database
    /// The other side.
    ///
    /// ```swift
    /// print(config.target.identifier)
    /// ```
    public private(set) var target: any ReplicationPeer
    /// Push, pull or both (default ``ReplicatorType/pushAndPull``).
    ///
    /// ```swift
    /// config.replicatorType = .push
    /// ```
    public var replicatorType: ReplicatorType = .pushAndPull
    /// Whether it keeps running after catching up, watching for new changes (idle meanwhile);
    /// otherwise it stops once caught up (default false).
    ///
    /// ```swift
    /// config.continuous = true
    /// ```
    public var continuous = false
    /// The resolver of conflicts pulled into the local database; nil: ``DefaultConflictResolver``
    /// (a deletion wins, otherwise the higher generation, ties by revision ID). Either kind of
    /// resolver fits: a ``ConflictResolver`` (Settee's, `Sendable`) or a
    /// ``ConflictResolverProtocol`` (Couchbase Lite's, any class).
    ///
    /// ```swift
    /// config.conflictResolver = MergeResolver()
    /// ```
    public var conflictResolver: (any ConflictResolverProtocol)? {
        get { resolverBox?.resolver }
        set { resolverBox = newValue.map(ResolverBox.init) }
    }
    private var resolverBox: ResolverBox?
    /// Which local documents to push (their current revision); nil: all.
    ///
    /// ```swift
    /// config.pushFilter = { doc, _ in doc["shared"] == true }
    /// ```
    public var pushFilter: ReplicationFilter?
    /// Which pulled revisions to keep; nil: all.
    ///
    /// ```swift
    /// config.pullFilter = { doc, flags in flags.contains(.deleted) || doc["type"] == "task" }
    /// ```
    public var pullFilter: ReplicationFilter?
    /// Only these documents, both ways; nil: all.
    ///
    /// ```swift
    /// config.documentIDs = ["settings", "profile"]
    /// ```
    public var documentIDs: [String]?
    /// Only documents in these channels (their `channels` property), both ways, for peers that
    /// support channels; nil: all.
    ///
    /// ```swift
    /// config.channels = ["team-a"]
    /// ```
    public var channels: [String]?
    /// A filter function on the peer to pull through (a CouchDB design-document filter, or one
    /// registered on a ``DatabaseEndpoint``); nil: none.
    ///
    /// ```swift
    /// config.filterName = "by_worker"
    /// ```
    public var filterName: String?
    /// Parameters for that filter function (seed 003, `filterParams`).
    ///
    /// ```swift
    /// config.filterParameters = ["worker_id": "w-7"]
    /// ```
    public var filterParameters: [String: JSONValue] = [:]
    /// Changes per batch (default 500): one changes page, one `_revs_diff`, one fetch and one
    /// insertion transaction each.
    ///
    /// ```swift
    /// config.batchSize = 1000
    /// ```
    public var batchSize = 500
    /// Credentials for a remote peer (``BasicAuthenticator``, ``SessionAuthenticator``); nil:
    /// anonymous (the server's GUEST).
    ///
    /// ```swift
    /// config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
    /// ```
    public var authenticator: (any Authenticator)?
    /// Extra HTTP header fields sent with every request to a remote peer.
    ///
    /// ```swift
    /// config.headers = ["X-App-Version": "2.1"]
    /// ```
    public var headers: [String: String] = [:]
    /// The server's certificate (DER), trusted instead of the system's roots for an HTTPS peer:
    /// a self-signed server works, and no other certificate is accepted.
    ///
    /// ```swift
    /// config.pinnedServerCertificate = try Data(contentsOf: Bundle.main.url(forResource: "server", withExtension: "cer")!)
    /// ```
    public var pinnedServerCertificate: Data?
    /// How many times a run is attempted when the peer is unreachable before the replicator stops
    /// with the error; 0 (the default) means 10 for a one-shot replication and no limit for a
    /// continuous one (Couchbase Lite's defaults).
    ///
    /// ```swift
    /// config.maxAttempts = 3
    /// ```
    public var maxAttempts = 0
    /// The longest wait between two attempts; waits double from one second up to it.
    ///
    /// ```swift
    /// config.maxAttemptWaitTime = .seconds(30)
    /// ```
    public var maxAttemptWaitTime: Duration = .seconds(300)
    /// How often a remote peer's idle changes feed is expected to send its heartbeat; a feed
    /// silent for twice as long is dropped and reopened from the checkpoint.
    ///
    /// ```swift
    /// config.heartbeat = .seconds(60)
    /// ```
    public var heartbeat: Duration = .seconds(30)
    /// Where warnings and errors go; nil writes warnings and errors to standard error.
    ///
    /// ```swift
    /// config.logHandler = { level, message in logger.log("\(level): \(message)") }
    /// ```
    public var logHandler: (@Sendable (ReplicatorLogLevel, String) -> Void)?

    /// A configuration replicating `database` with `target`, both ways, one-shot.
    ///
    /// ```swift
    /// let config = ReplicatorConfiguration(database: db, target: DatabaseEndpoint(database: other))
    /// ```
    public init(database: Database, target: any ReplicationPeer) {
        self.database = database
        self.target = target
    }

    /// A replicator of several collections (or of a named one): each with its configuration
    /// and its peer; empty for the database's default collection alone.
    var collectionPeers: [CollectionPeer] = []

    /// This configuration for one of its collections: the collection's database object and
    /// peer, its own filters and resolver, everything else as here.
    func configuration(for part: CollectionPeer) -> ReplicatorConfiguration {
        var c = self
        c.collectionPeers = []
        c.database = part.configuration.collection.documents
        c.target = part.peer
        c.pushFilter = part.configuration.pushFilter
        c.pullFilter = part.configuration.pullFilter
        c.channels = part.configuration.channels
        c.documentIDs = part.configuration.documentIDs
        c.conflictResolver = part.configuration.conflictResolver
        return c
    }

    func log(_ level: ReplicatorLogLevel, _ message: @autoclosure () -> String) {
        if let logHandler {
            logHandler(level, message())
        } else if level >= .warning {
            FileHandle.standardError.write(Data("SetteeReplicator \(level): \(message())\n".utf8))
        }
    }
}

/// Carries a resolver that need not be `Sendable` (Couchbase Lite's resolvers are plain classes)
/// in a `Sendable` configuration: the replicator calls it on its own serial queue, one conflict
/// at a time, which is what ``ConflictResolverProtocol`` asks of it.
final class ResolverBox: @unchecked Sendable {
    let resolver: any ConflictResolverProtocol
    init(_ resolver: any ConflictResolverProtocol) { self.resolver = resolver }
}
