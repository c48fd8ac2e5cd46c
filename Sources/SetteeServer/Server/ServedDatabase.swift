import Foundation
@_spi(Replication) @_spi(Server) import Settee
import SetteeReplicator
import Synchronization

/// One database the server serves: the open `Database`, its configuration and users, and for a
/// walrus database the in-memory directory that holds it while the server runs.
///
/// Thread-safe: immutable but for the `Database` and the principal store, which are thread-safe.
final class ServedDatabase: Sendable {
    let name: String
    let database: Database
    let config: ServerConfiguration.DatabaseConfig
    /// The database's users, roles and sessions, each its own record.
    let principals: PrincipalStore
    /// The walrus database's directory, removed when the database is closed.
    let walrusDirectory: String?
    /// Whether the server opened the database (and closes it), or an app handed it over.
    let owned: Bool
    /// The rows continuous feeds woken by one commit share (`CouchAPI.encodedRows`).
    let feedCache = Mutex<[FeedKey: (bytes: [UInt8], count: Int, last: FeedPosition)]>([:])
    /// Filter functions `_changes?filter=<name>` runs, registered by the app serving the database.
    let filters = Mutex<[String: PeerFilterFunction]>([:])
    /// Each user's access with what it was worked out from (``access(for:)``).
    let accessCache = Mutex(RecentCache<String, CachedAccess>(capacity: ServedDatabase.accessCacheSize))
    /// How many times a user's access was worked out (not found in the cache still true).
    let accessComputations = Atomic<UInt64>(0)
    /// What `/_metrics` reports of this database that is counted as it happens.
    let counters = DatabaseCounters()
    /// The sync function, design documents' functions and who is writing (see SyncRouting.swift).
    let routing: RoutingState
    /// Views' compiled map functions by library index name, with the version they make
    /// (ServedDatabase+Views.swift).
    let viewMaps = Mutex<[String: (version: String, map: ViewMapFunction)]>([:])
    /// The views of each design document read by a view query, by its revision (a query
    /// does not parse the design document again while it stays the same).
    let designViews = Mutex<[String: (revision: String, views: [ViewDefinition])]>([:])
    /// Documents each view's map function failed on since the server started, by library name.
    let viewErrors = Mutex<[String: Int]>([:])
    /// Compactions asked for over HTTP and not finished yet (what `compact_running` reports).
    let compactionsRunning = Atomic<Int>(0)
    /// The database's CouchDB security object (`_security`).
    let security = Mutex(SecurityObject())
    /// The Mango indexes the design documents define, read once after each change of them
    /// (``mangoIndexes()``): `generation` counts the changes, so a list read before one is
    /// never kept after it.
    let mangoIndexList = Mutex<(generation: Int, list: [MangoIndex]?)>((0, nil))
    /// Design documents' `shows`, `lists` and `updates` functions, compiled, by source.
    let renderFunctions = Mutex<[String: RenderFunction]>([:])
    /// Views' JavaScript reduce functions, compiled, by source.
    let viewReduces = Mutex<[String: ViewReduceFunction]>([:])
    /// Whether the database is partitioned (CouchDB's `PUT /{db}?partitioned=true`): every
    /// document ID but a design document's is `partition:id`, and partitioned indexes and views
    /// are read one partition at a time. Set when the database is made, never changed.
    let partitioned: Bool

    /// The local document holding the database's properties (`{"partitioned": true}`).
    static let propertiesID = "settee.server/properties"

    /// For a named collection's keyspace: the database it is a collection of, whose users,
    /// roles and security it shares; nil for a database.
    let parent: ServedDatabase?
    /// For a database: its named collections' keyspaces, by `scope.collection` (emptied when
    /// it closes, which ends the references each holds back).
    let collections = Mutex<[String: ServedDatabase]>([:])

    init(name: String, database: Database, config: ServerConfiguration.DatabaseConfig, walrusDirectory: String?, owned: Bool,
         routing: RoutingState) throws {
        self.routing = routing
        self.name = name
        self.database = database
        self.config = config
        self.walrusDirectory = walrusDirectory
        self.owned = owned
        self.parent = nil
        principals = try PrincipalStore(database: database, users: config.users, roles: config.roles)
        partitioned = try database.localDocument(withID: Self.propertiesID)?["partitioned"] == .bool(true)
    }

    /// The keyspace of `collection`, a named collection of `parent`'s database.
    private init(collection: Collection, of parent: ServedDatabase, routing: RoutingState) {
        self.routing = routing
        self.name = parent.name + "." + collection.fullName
        self.database = collection.documents
        self.config = parent.config
        self.walrusDirectory = nil
        self.owned = false
        self.parent = parent
        principals = parent.principals
        partitioned = false
    }

    /// Makes (when the database has none) and serves each configured named collection.
    func openCollections(engine: ScriptEngine) throws {
        for (fullName, config) in config.collections.sorted(by: { $0.key < $1.key }) {
            let parts = fullName.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { throw ConfigurationError(path: "databases.\(name).scopes", message: "\(fullName) is not scope.collection") }
            let collection = try database.createCollection(name: parts[1], scope: parts[0])
            let routing = try RoutingState(sync: config.sync, engine: engine,
                                           path: "databases.\(name).scopes.\(parts[0]).collections.\(parts[1]).sync")
            let served = ServedDatabase(collection: collection, of: self, routing: routing)
            try served.startRouting()
            collections.withLock { $0[fullName] = served }
        }
    }

    /// The keyspace of collection `collection` of scope `scope`; nil when not served.
    func collection(scope: String, name collection: String) -> ServedDatabase? {
        collections.withLock { $0[scope + "." + collection] }
    }

    /// The security object that applies: the database's, for a collection too.
    var securityObject: SecurityObject { (parent ?? self).security.withLock { $0 } }

    /// Opens (creating if needed) the database `name` as `config` says.
    /// `partitioned`: made partitioned, when it is new (a database that holds documents
    /// already keeps what it is: 412 `file_exists`).
    static func open(name: String, config: ServerConfiguration.DatabaseConfig, engine: ScriptEngine,
                     partitioned: Bool = false) throws -> ServedDatabase {
        var walrus: String?
        let directory: String
        if config.isWalrus {
            walrus = try Walrus.makeDirectory(for: name)
            directory = walrus ?? ""
        } else {
            directory = config.server
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        var dbConfig = DatabaseConfiguration(directory: directory)
        dbConfig.maxRevTreeDepth = config.revsLimit
        // A walrus database lives in memory: it cannot grow past what the machine holds, and a
        // server may make many (admin PUT /{db}), so each reserves 64 GiB of address space, not 1 TiB.
        if config.isWalrus { dbConfig.maximumSize = 64 << 30 }
        do {
            let db = try Database(name: Self.fileName(for: name), config: dbConfig)
            let served: ServedDatabase
            do {
                if partitioned, try db.localDocument(withID: Self.propertiesID)?["partitioned"] != .bool(true) {
                    guard try db.lastSequence == 0 else {
                        throw CouchError(.preconditionFailed, "file_exists", "The database could not be created, the file already exists.")
                    }
                    _ = try db.saveLocalDocument(["partitioned": true], withID: Self.propertiesID)
                }
                served = try ServedDatabase(name: name, database: db, config: config, walrusDirectory: walrus, owned: true,
                                            routing: try RoutingState(config: config, engine: engine, database: name))
                try served.startRouting()
                try served.loadSecurity()
                try served.openCollections(engine: engine)
            } catch {
                try? db.close()
                throw error
            }
            return served
        } catch {
            if let walrus { try? FileManager.default.removeItem(atPath: walrus) }
            throw error
        }
    }

    /// A database name may hold `/` (CouchDB allows it); on disk it becomes `%2F`-free text.
    static func fileName(for name: String) -> String {
        name.replacingOccurrences(of: "/", with: "_")
    }

    /// Closes the database (if the server opened it) and removes a walrus database's files.
    /// The streaming feeds open on this database, woken when it closes so that each ends its
    /// answer cleanly rather than having its connection cut.
    let openFeeds = Mutex<(closing: Bool, signals: [UInt64: (user: String?, signal: ChangeSignal)], next: UInt64)>((false, [:], 0))

    /// Registers a feed's signal, with the user it reads for (nil: the admin port); nil when the
    /// database is closing (the feed ends at once).
    func registerFeed(_ signal: ChangeSignal, user: String?) -> UInt64? {
        openFeeds.withLock { f in
            guard !f.closing else { return nil }
            f.next += 1
            f.signals[f.next] = (user, signal)
            return f.next
        }
    }

    func unregisterFeed(_ id: UInt64) { _ = openFeeds.withLock { $0.signals.removeValue(forKey: id) } }

    var isClosing: Bool { openFeeds.withLock { $0.closing } }

    /// How many streaming feeds are open.
    var openFeedCount: Int { openFeeds.withLock { $0.signals.count } }

    /// Wakes the open feeds of `users` (every feed when nil): their access may have changed.
    func wakeFeeds(of users: Set<String>? = nil) {
        let signals = openFeeds.withLock { f in
            f.signals.values.filter { feed in users.map { feed.user.map($0.contains) ?? false } ?? true }.map(\.signal)
        }
        for signal in signals { signal.fire() }
    }

    func close() throws {
        let named = collections.withLock { c in
            defer { c.removeAll() }
            return Array(c.values)
        }
        for collection in named { try collection.close() }
        routing.stop()
        let feeds = openFeeds.withLock { f in
            f.closing = true
            return f.signals.values.map(\.signal)
        }
        for signal in feeds { signal.fire() }
        defer { if let walrusDirectory { try? FileManager.default.removeItem(atPath: walrusDirectory) } }
        if owned { try database.close() }
    }
}

/// Walrus databases: in memory (a directory on the tmpfs `/dev/shm` where there is one), empty
/// at every start, removed at close; those a killed server left behind are removed at the next
/// start.
enum Walrus {
    static let prefix = "settee-walrus-"

    static var base: String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory), isDirectory.boolValue,
           FileManager.default.isWritableFile(atPath: "/dev/shm") {
            return "/dev/shm"
        }
        return NSTemporaryDirectory()
    }

    static func makeDirectory(for name: String) throws -> String {
        removeAbandoned()
        let path = base + "/" + prefix + "\(getpid())-" + UUID().uuidString.lowercased()
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        return path
    }

    /// Removes walrus directories whose process is gone.
    static func removeAbandoned() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: base) else { return }
        for name in names where name.hasPrefix(prefix) {
            let rest = name.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]) else { continue }
            if pid != getpid() && kill(pid, 0) == -1 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: base + "/" + name)
            }
        }
    }
}

/// Totals of one database counted as they happen, for `/_metrics`.
///
/// Thread-safe: atomics.
final class DatabaseCounters: Sendable {
    /// Document changes committed (each saved, deleted or purged document of a commit).
    let documentsWritten = Atomic<UInt64>(0)
    /// Documents sent to clients (a document, a `_bulk_get` or `open_revs` revision, a row with
    /// its document).
    let documentsRead = Atomic<UInt64>(0)
    /// Compactions asked for over HTTP and finished.
    let compactions = Atomic<UInt64>(0)

    func read(_ n: Int = 1) { documentsRead.add(UInt64(max(0, n)), ordering: .relaxed) }
}
