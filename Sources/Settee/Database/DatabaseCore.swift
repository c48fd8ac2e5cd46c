import Foundation
internal import SetteeStorage
import Synchronization
internal import Logging

/// The engine trees of one collection. The default collection's have the names they had
/// before collections (``TreeName``); a named collection's are the same names after its prefix
/// (``CollectionCatalog/treePrefix(_:)``).
struct Trees: Sendable {
    let byID: Tree
    let bySequence: Tree
    let conflicts: Tree
    let local: Tree
    /// The collection's counters (last sequence, live documents, dead bytes, the next index
    /// tree); the default collection's is the database's `db.meta`.
    let meta: Tree
    let expiry: Tree
    let expiryByID: Tree
    let routing: Tree
    let channels: Tree
    let grants: Tree
    let indexCatalog: Tree

    /// Every tree, for deleting the collection.
    var all: [Tree] { [byID, bySequence, conflicts, local, meta, expiry, expiryByID, routing, channels, grants, indexCatalog] }

    /// The trees of the collection whose names start with `prefix`, created when missing;
    /// `meta` is the database's own for the default collection.
    static func open(_ tx: WriteTransaction, prefix: String, meta: Tree?) throws -> Trees {
        func tree(_ name: String) throws -> Tree { try tx.tree(named: prefix + name) ?? tx.createTree(named: prefix + name) }
        return Trees(byID: try tree(TreeName.byID), bySequence: try tree(TreeName.bySequence),
                     conflicts: try tree(TreeName.conflicts), local: try tree(TreeName.local),
                     meta: try meta ?? tree(TreeName.meta),
                     expiry: try tree(TreeName.expiry), expiryByID: try tree(TreeName.expiryByID),
                     routing: try tree(TreeName.routing), channels: try tree(TreeName.channels),
                     grants: try tree(TreeName.grants), indexCatalog: try tree(TreeName.indexCatalog))
    }
}

/// What every collection of one open database file shares: the engine store and its blobs,
/// the writer lock and the open batch, background work (group commit, expiry, compaction), and
/// the collections' cores. One per path per process, reference-counted by the `Database`
/// objects open on it.
final class DatabaseFile: @unchecked Sendable {
    /// The document format this build writes (Formats/documents.md). Older databases are
    /// upgraded when opened, without rewriting anything: version 2 added the expiry trees
    /// (created empty), version 3 the compact digests of revision trees (older trees stay
    /// readable; compaction rewrites them), version 4 documents with one revision and no stored
    /// tree (tree ref 0; older documents keep theirs), version 5 the routing trees (created
    /// empty: no document of an older database was routed), version 6 routing in sequence
    /// entries and one-byte member entries (version 5's full records and entries stay readable),
    /// version 7 per-revision channels, version 8 the index catalog (created empty), version 9
    /// grants to roles apart from grants to users (older routings stay readable; the grants
    /// older versions kept for `role:` principals move to their own kind when opened), version
    /// 11 named collections (the catalog `db.collections`, created empty: an older database is
    /// its default collection, in the trees it always had).
    static let formatVersion: UInt64 = 11
    static let upgradableVersions: Set<UInt64> = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    private static let registry = Mutex<[String: DatabaseFile]>([:])

    /// The upgrade to format 9: the grant records of channels to `role:NAME` (how formats 5 to
    /// 8 kept a role's grants, among users') become records of the role NAME's own kind. Runs
    /// in the transaction that opens the database; it reads the grants of `role:` principals
    /// only.
    private static func separateRoleGrants(_ tx: WriteTransaction, _ grants: Tree) throws {
        let prefix = [GrantKind.channels.rawValue] + Array("role:".utf8)
        var moved: [(old: [UInt8], new: [UInt8], value: [UInt8])] = []
        try tx.forEach(in: grants, from: prefix, reverse: false) { k, v in
            guard k.starts(with: prefix) else { return false }
            // Kind, principal, 0, SHA-1: the principal is what lies between the kind and the 0.
            guard k.count > prefix.count + 21, k[k.count - 21] == 0 else {
                throw SetteeError(.corrupted, "a grant key is malformed")
            }
            let role = Array(k[prefix.count ..< k.count - 21])
            guard !role.isEmpty else { return true }
            moved.append((Array(k), [GrantKind.roleChannels.rawValue] + role + Array(k[(k.count - 21)...]), Array(v)))
            return true
        }
        for m in moved {
            _ = try tx.delete(m.old, in: grants)
            try tx.put(m.new, m.value, in: grants)
        }
    }

    let name: String
    let path: String
    let configuration: DatabaseConfiguration
    /// The depth revision trees are pruned to: the one stored with the database
    /// (``MetaKey/revsLimit``), else the configuration's.
    let revsLimit = Atomic<Int>(0)
    let store: Store
    let blobs: BlobStore
    let uuid: [UInt8]
    /// The database-wide metadata (`db.meta`: format, UUID, revision limit, the next
    /// collection number), which is also the default collection's counters.
    let meta: Tree
    /// Scope ‖ 0 ‖ collection → the collection's number (``CollectionCatalog``).
    let catalog: Tree
    /// What expiration and tombstone eviction read the time from.
    let clock: any ExpirationClock
    /// The sweeper that purges what is due, in every collection.
    let expiry: ExpiryKeeper
    /// The thread `async` writes run on (started by the first one).
    let worker: DatabaseWorker
    /// What background work last reported (``Database/backgroundStatus``).
    let background = Mutex(BackgroundStatus())
    /// Threads waiting for `writeLock` in `write` or `runBatch`: the sweeper lets them go first
    /// between its batches.
    let waitingWriters = Atomic<Int>(0)
    /// Serializes writers, of every collection. Recursive so that saves inside
    /// `Database.inBatch(_:)` on the batch's thread join the batch's transaction.
    let writeLock = NSRecursiveLock()
    /// The open batch's transaction, and each collection's context in it (made when the batch
    /// first writes or reads it); only touched with `writeLock` held.
    var batchTransaction: WriteTransaction?
    var batchContexts: [WriteContext] = []
    /// The thread running a batch, so its reads see its own writes.
    let batchThread = Mutex<pthread_t?>(nil)
    /// Whether any batch is open: lets every other read skip the lock above.
    let batchOpen = Atomic<Bool>(false)
    /// One compaction at a time.
    let compactionLock = NSLock()
    /// Set when the database closes, so a running compaction stops at its next step.
    let compactionCancelled = Atomic<Bool>(false)
    /// Whether an automatic compaction is queued or running.
    let autoCompactionScheduled = Atomic<Bool>(false)
    /// The default collection's core, and the named collections' by ``CollectionCatalog/key``;
    /// emptied when the file closes (each core holds the file).
    private let cores = Mutex<(default: DatabaseCore?, named: [[UInt8]: DatabaseCore])>((nil, [:]))
    /// How many `Database` objects use this file; guarded by the registry lock.
    private var users = 0

    private init(name: String, path: String, configuration: DatabaseConfiguration,
                 openFile: ((String) throws(StorageError) -> any StorageFile)?, clock: any ExpirationClock) throws {
        self.name = name
        self.path = path
        self.configuration = configuration
        self.clock = clock
        self.expiry = ExpiryKeeper(clock: clock, name: name)
        self.worker = DatabaseWorker(name: name)
        var sc = StoreConfiguration()
        sc.durability = configuration.fullSync ? .synchronous : .none
        sc.mapReservation = configuration.maximumSize
        let store = try translating {
            if let openFile { return try Store(directory: path, configuration: sc, openFile: openFile) }
            return try Store(directory: path, configuration: sc)
        }
        do {
            var uuid: [UInt8] = []
            var revsLimit = configuration.maxRevTreeDepth
            let opened = try translating {
                try store.write { tx -> (meta: Tree, catalog: Tree, default: Trees, named: [(key: [UInt8], number: UInt64, trees: Trees)]) in
                    func tree(_ name: String) throws -> Tree { try tx.tree(named: name) ?? tx.createTree(named: name) }
                    let meta = try tree(TreeName.meta)
                    var upgradedFrom: UInt64?
                    if let f = try tx.value(forKey: MetaKey.format, in: meta) {
                        guard f.count == 8 else { throw SetteeError(.corrupted, "format marker is malformed") }
                        let v = f.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                        if Self.upgradableVersions.contains(v) {
                            // The trees added since are created below, empty, which is what they
                            // hold for a database that never had expirations; revision trees of
                            // the older format are read as they are.
                            try tx.put(MetaKey.format, withUnsafeBytes(of: Self.formatVersion.littleEndian, Array.init), in: meta)
                            upgradedFrom = v
                        } else if v != Self.formatVersion {
                            throw SetteeError(.versionMismatch, "document format \(v); this build reads \(Self.formatVersion)")
                        }
                    } else {
                        try tx.put(MetaKey.format, withUnsafeBytes(of: Self.formatVersion.littleEndian, Array.init), in: meta)
                    }
                    if let r = try tx.value(forKey: MetaKey.revsLimit, in: meta) {
                        guard r.count == 8 else { throw SetteeError(.corrupted, "the stored revision limit is malformed") }
                        let limit = r.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                        guard DatabaseConfiguration.revTreeDepths.contains(limit) else {
                            throw SetteeError(.corrupted, "the stored revision limit \(limit) is out of range")
                        }
                        revsLimit = Int(limit)
                    }
                    if let u = try tx.value(forKey: MetaKey.uuid, in: meta), u.count == 16 {
                        uuid = u
                    } else {
                        uuid = withUnsafeBytes(of: UUID().uuid, Array.init)
                        try tx.put(MetaKey.uuid, uuid, in: meta)
                    }
                    let defaults = try Trees.open(tx, prefix: "", meta: meta)
                    if let from = upgradedFrom, from < 9 { try Self.separateRoleGrants(tx, defaults.grants) }
                    let catalog = try tree(TreeName.collections)
                    var named: [(key: [UInt8], number: UInt64, trees: Trees)] = []
                    for (key, number) in try CollectionCatalog.entries(tx, catalog) {
                        named.append((key, number, try Trees.open(tx, prefix: CollectionCatalog.treePrefix(number), meta: nil)))
                    }
                    return (meta, catalog, defaults, named)
                }
            }
            self.uuid = uuid
            self.meta = opened.meta
            self.catalog = opened.catalog
            self.revsLimit.store(revsLimit, ordering: .relaxed)
            self.store = store
            self.blobs = try BlobStore(directory: path + "/blobs")
            let main = DatabaseCore(file: self, trees: opened.default, scope: Scope.defaultScopeName,
                                    collection: Collection.defaultCollectionName, number: nil)
            var named: [[UInt8]: DatabaseCore] = [:]
            for entry in opened.named {
                guard let (scope, collection) = CollectionCatalog.names(entry.key) else {
                    throw SetteeError(.corrupted, "a collection catalog key is malformed")
                }
                named[entry.key] = DatabaseCore(file: self, trees: entry.trees, scope: scope, collection: collection, number: entry.number)
            }
            cores.withLock { $0 = (main, named) }
            for core in allCores() { try core.parts.opened(core) }
        } catch {
            cores.withLock { $0 = (nil, [:]) }
            try? store.close()
            throw error
        }
        // Small async writes queued together commit as one batch (group commit).
        worker.setGroupRunner { [unowned self] body in try self.runBatch(body) }
        for core in allCores() { core.parts.ready(core) }
    }

    /// The default collection's core.
    var defaultCore: DatabaseCore {
        get throws(SetteeError) {
            guard let core = cores.withLock({ $0.default }) else { throw SetteeError(.notOpen, "the database is closed") }
            return core
        }
    }

    /// Every collection's core, the default one first.
    func allCores() -> [DatabaseCore] {
        cores.withLock { c in (c.default.map { [$0] } ?? []) + c.named.values.sorted { $0.fullName < $1.fullName } }
    }

    /// The core of collection `name` of scope `scope`; nil when the database has none.
    func core(scope: String, collection name: String) -> DatabaseCore? {
        if scope == Scope.defaultScopeName && name == Collection.defaultCollectionName { return cores.withLock { $0.default } }
        return cores.withLock { $0.named[CollectionCatalog.key(scope: scope, collection: name)] }
    }

    /// The named collections' cores of scope `scope` (every scope when nil), by name.
    func namedCores(scope: String?) -> [DatabaseCore] {
        cores.withLock { c in c.named.values.filter { scope == nil || $0.scopeName == scope } }
            .sorted { $0.fullName < $1.fullName }
    }

    /// The collection `name` of `scope`, created (with its trees and catalog entry, in one
    /// transaction) when the database has none.
    func createCollection(scope: String, name: String) throws -> DatabaseCore {
        lockForWriting()
        defer { writeLock.unlock() }
        if let existing = core(scope: scope, collection: name) { return existing }
        // The new trees would exist only if the batch commits, and the core at once.
        guard batchTransaction == nil else {
            throw SetteeError(.invalidParameter, "a collection is created or deleted outside inBatch")
        }
        let key = CollectionCatalog.key(scope: scope, collection: name)
        let (number, trees) = try translating {
            try store.write { tx -> (UInt64, Trees) in
                let n = try tx.withValue(forKey: MetaKey.nextCollection, in: meta) { b throws(SetteeError) -> UInt64 in
                    guard b.count == 8 else { throw SetteeError(.corrupted, "the collection counter is malformed") }
                    return UInt64(littleEndian: b.loadUnaligned(as: UInt64.self))
                } ?? 1
                guard n < UInt64(UInt32.max) else { throw SetteeError(.tooLarge, "the database has made too many collections") }
                try tx.put(MetaKey.nextCollection, withUnsafeBytes(of: (n + 1).littleEndian, Array.init), in: meta)
                try tx.put(key, CollectionCatalog.value(number: n), in: catalog)
                return (n, try Trees.open(tx, prefix: CollectionCatalog.treePrefix(n), meta: nil))
            }
        }
        let core = DatabaseCore(file: self, trees: trees, scope: scope, collection: name, number: number)
        try core.parts.opened(core)
        cores.withLock { $0.named[key] = core }
        return core
    }

    /// Deletes the collection `name` of `scope` with its documents and indexes, in one
    /// transaction; false when the database has none. Its core answers `notOpen` from then on.
    func deleteCollection(scope: String, name: String) throws -> Bool {
        guard scope != Scope.defaultScopeName || name != Collection.defaultCollectionName else {
            throw SetteeError(.invalidParameter, "the default collection cannot be deleted")
        }
        lockForWriting()
        defer { writeLock.unlock() }
        guard let core = core(scope: scope, collection: name) else { return false }
        guard batchTransaction == nil else {
            throw SetteeError(.invalidParameter, "a collection is created or deleted outside inBatch")
        }
        let key = CollectionCatalog.key(scope: scope, collection: name)
        try translating {
            try store.write { tx in
                _ = try tx.delete(key, in: catalog)
                var trees = core.trees.all
                for index in core.parts.queries.indexSet.withLock({ $0.indexes }) { trees.append(index.tree) }
                for tree in trees { try tx.removeAll(in: tree) }
            }
        }
        core.dropped.store(true, ordering: .releasing)
        cores.withLock { _ = $0.named.removeValue(forKey: key) }
        core.hub.finish()
        return true
    }

    /// One pass of the expiry sweeper over every collection; the next due time.
    private func sweep(asOf now: Date, stopping: () -> Bool) throws -> UInt64? {
        var next: UInt64?
        for core in allCores() where !core.dropped.load(ordering: .acquiring) {
            if stopping() { return nil }
            if let due = try core.sweep(asOf: now, stopping: stopping) { next = min(next ?? due, due) }
        }
        return next
    }

    /// The shared file for `path`, opening it if no other `Database` has; its default collection.
    static func open(name: String, path: String, configuration: DatabaseConfiguration,
                     openFile: ((String) throws(StorageError) -> any StorageFile)? = nil,
                     clock: (any ExpirationClock)? = nil) throws -> DatabaseCore {
        try registry.withLock { open in
            if let file = open[path] {
                // One store, one behaviour: a second configuration would be silently ignored.
                let differences = configuration.differences(from: file.configuration)
                guard differences.isEmpty else {
                    throw SetteeError(.invalidParameter, "the database is already open in this process with "
                                      + differences.joined(separator: ", ") + "; open it with the same configuration or close it first")
                }
                file.users += 1
                return try file.defaultCore
            }
            let file = try DatabaseFile(name: name, path: path, configuration: configuration, openFile: openFile,
                                        clock: clock ?? SystemExpirationClock())
            file.users = 1
            open[path] = file
            file.expiry.sweeper.start(name: name) { [unowned file] now, stopping in
                try file.sweep(asOf: now, stopping: stopping)
            }
            return try file.defaultCore
        }
    }

    /// Drops one user; the last one closes the store.
    func release() throws {
        let last = Self.registry.withLock { open -> Bool in
            users -= 1
            guard users == 0 else { return false }
            open.removeValue(forKey: path)
            return true
        }
        if last {
            worker.stop()    // queued async writes still run, and find the database closed
            expiry.sweeper.stop()   // the sweeper's batch in progress ends first
            let all = allCores()
            for core in all { core.hub.finish() }
            // A compaction still running stops at its next step; wait for it before closing.
            compactionCancelled.store(true, ordering: .relaxed)
            compactionLock.lock()
            defer {
                compactionLock.unlock()
                // Even when closing fails: the cores and this file hold each other, and the
                // registry has let go, so the cycle must be broken here or the store's mapping
                // and descriptor would outlive every handle.
                for core in all { core.dropped.store(true, ordering: .releasing) }
                cores.withLock { $0 = (nil, [:]) }
            }
            try translating { try store.close() }
        }
    }

    static func isOpen(path: String) -> Bool { registry.withLock { $0[path] != nil } }

    /// Takes the write lock, counted in `waitingWriters` while it waits.
    @inline(__always)
    func lockForWriting() {
        waitingWriters.wrappingAdd(1, ordering: .relaxed)
        writeLock.lock()
        waitingWriters.wrappingSubtract(1, ordering: .relaxed)
    }

    /// Runs `body` as one all-or-nothing transaction that saves on this thread join, in any
    /// collection: each collection's share is its own ``WriteContext`` in the one transaction,
    /// and each collection's listeners hear of their share once it commits.
    func runBatch(_ body: () throws -> Void) throws {
        lockForWriting()
        defer { writeLock.unlock() }
        if batchTransaction != nil { return try body() }   // a batch inside a batch joins it
        var contexts: [WriteContext] = []
        try translating {
            try store.write { tx in
                batchTransaction = tx
                batchThread.withLock { $0 = pthread_self() }
                batchOpen.store(true, ordering: .releasing)
                defer {
                    batchTransaction = nil
                    batchContexts = []
                    batchThread.withLock { $0 = nil }
                    batchOpen.store(false, ordering: .releasing)
                }
                try body()
                for c in batchContexts { try c.flush() }
                contexts = batchContexts
            }
        }
        for c in contexts { c.core.published(c) }
    }
}

/// One collection of an open database: its trees, its listeners and validations, and the parts
/// that keep records beside its documents (``DatabaseParts``: routing, indexes, expiry), which
/// it knows only as commit participants. The default collection's core is what `Database`
/// reads and writes; a named collection's is what its ``Collection`` does. Everything else
/// (the store, the writer lock, the open batch) is the ``DatabaseFile``'s.
final class DatabaseCore: @unchecked Sendable {
    let file: DatabaseFile
    let trees: Trees
    let scopeName: String
    let collectionName: String
    /// The collection's number in the catalog; nil for the default collection.
    let number: UInt64?
    let hub = ChangeHub()
    let validations = Mutex<[(name: String, body: Validation)]>([])
    /// What keeps records beside the documents (channels and grants, indexes, expiry), each
    /// taking part in every commit as a ``CommitParticipant``.
    let parts: DatabaseParts
    /// Set when the collection is deleted or the database closes: its handles answer
    /// `notOpen`.
    let dropped = Atomic<Bool>(false)
    /// Where background failures go: swift-log, label `settee` (an application routes it with
    /// `LoggingSystem.bootstrap`).
    static let logger = Logger(label: "settee")

    init(file: DatabaseFile, trees: Trees, scope: String, collection: String, number: UInt64?) {
        self.file = file
        self.trees = trees
        self.scopeName = scope
        self.collectionName = collection
        self.number = number
        self.parts = DatabaseParts(routing: ChannelRouting(), queries: QueryEngineState(), expiry: file.expiry)
    }

    /// `scope.collection`.
    var fullName: String { scopeName + "." + collectionName }
    var isDefault: Bool { number == nil }
    /// The prefix of the names of the trees this collection makes (its indexes'): none for the
    /// default collection.
    var treePrefix: String { number.map(CollectionCatalog.treePrefix) ?? "" }

    /// Whether a query's `FROM source` names this collection: `_`, `_default`,
    /// `_default._default` or the database's name for the default one; `scope.collection` for a
    /// named one (or `collection` alone, as QueryBuilder names it), and `_` when the query was
    /// made on the collection's own database object (a Mango query of the server's keyspace).
    func isNamed(bySource source: String) -> Bool {
        if isDefault { return source == "_" || source == "_default" || source == "_default._default" || source == name }
        return source == fullName || source == collectionName || source == "_"
    }

    var name: String { file.name }
    var path: String { file.path }
    var configuration: DatabaseConfiguration { file.configuration }
    var clock: any ExpirationClock { file.clock }
    var store: Store { file.store }
    var blobs: BlobStore { file.blobs }
    var uuid: [UInt8] { file.uuid }
    var worker: DatabaseWorker { file.worker }
    var writeLock: NSRecursiveLock { file.writeLock }
    var compactionLock: NSLock { file.compactionLock }
    var maxRevTreeDepth: Int { file.revsLimit.load(ordering: .relaxed) }

    static func open(name: String, path: String, configuration: DatabaseConfiguration,
                     openFile: ((String) throws(StorageError) -> any StorageFile)? = nil,
                     clock: (any ExpirationClock)? = nil) throws -> DatabaseCore {
        try DatabaseFile.open(name: name, path: path, configuration: configuration, openFile: openFile, clock: clock)
    }

    static func isOpen(path: String) -> Bool { DatabaseFile.isOpen(path: path) }

    /// Drops one user of the file; the last one closes it.
    func release() throws { try file.release() }

    // MARK: - Transactions

    /// Runs `body` in the open batch (same thread) or in a transaction of its own, then tells
    /// listeners what committed.
    func write<R>(_ body: (WriteContext) throws -> R) throws -> R {
        file.lockForWriting()
        defer { writeLock.unlock() }
        return try writeHoldingLock(body)
    }

    /// `write` once the lock is held.
    func writeHoldingLock<R>(_ body: (WriteContext) throws -> R) throws -> R {
        if let batch = try batchContext() { return try body(batch) }
        guard !dropped.load(ordering: .acquiring) else { throw Self.droppedError(self) }
        var context: WriteContext?
        let result = try translating {
            try store.write { tx in
                let c = try WriteContext(core: self, tx: tx)
                context = c
                let r = try body(c)
                try c.flush()
                return r
            }
        }
        if let context { published(context) }
        return result
    }

    /// This collection's context in the open batch, made when the batch first needs it; nil
    /// when no batch is open. Caller holds the write lock (the batch's thread does).
    func batchContext() throws -> WriteContext? {
        guard let tx = file.batchTransaction else { return nil }
        if let c = file.batchContexts.first(where: { $0.core === self }) { return c }
        guard !dropped.load(ordering: .acquiring) else { throw Self.droppedError(self) }
        let c = try translating { try WriteContext(core: self, tx: tx) }
        file.batchContexts.append(c)
        return c
    }

    static func droppedError(_ core: DatabaseCore) -> SetteeError {
        core.isDefault ? SetteeError(.notOpen, "the database is closed")
            : SetteeError(.notOpen, "the collection \(core.fullName) was deleted, or its database closed")
    }

    /// Runs `body` as one all-or-nothing transaction of the whole database.
    func runBatch(_ body: () throws -> Void) throws { try file.runBatch(body) }

    /// Tells the participants, then listeners, what committed; starts a compaction when the
    /// dead space calls for one.
    func published(_ c: WriteContext) {
        for p in c.participants.all { p.didCommit(c) }
        hub.publish(DatabaseChange(database: name, changes: c.changes))
        compactIfWorthwhile(deadBytes: c.deadBytes)
    }

    /// Runs `body` on a snapshot, or on the batch's transaction when called from inside a batch.
    func read<R>(_ body: (any StoreReading) throws -> R) throws -> R {
        if let tx = batchTransactionOnThisThread() {
            return try translating { try body(tx) }
        }
        return try translating { try store.read { tx in try body(tx) } }
    }

    /// `read` for hot paths: the same generic body, called with the concrete transaction type so
    /// it is specialized (no existential dispatch, no runtime generic metadata lookups).
    @inline(__always)
    func read<R>(snapshot: (ReadTransaction) throws -> R, batch: (WriteTransaction) throws -> R) throws -> R {
        if let tx = batchTransactionOnThisThread() {
            return try translating { try batch(tx) }
        }
        return try translating { try store.read(snapshot) }
    }

    /// The open batch's transaction when called from the thread running it.
    func batchTransactionOnThisThread() -> WriteTransaction? {
        guard file.batchOpen.load(ordering: .acquiring) else { return nil }
        guard let t = file.batchThread.withLock({ $0 }), pthread_equal(t, pthread_self()) != 0 else { return nil }
        return file.batchTransaction
    }

    /// This collection's share of the open batch when called from the thread running it (its
    /// counters are not flushed to the meta tree until it commits).
    func batchOnThisThread() throws -> WriteContext? {
        guard batchTransactionOnThisThread() != nil else { return nil }
        return try batchContext()
    }

    // MARK: - Reading documents

    func meta(_ tx: some StoreReading, id: [UInt8]) throws -> DocMeta? {
        try tx.withValue(forKey: id, in: trees.byID) { b throws(SetteeError) in try DocMeta(decoding: b) }
    }

    func meta(_ tx: some StoreReading, id: UnsafeRawBufferPointer) throws -> DocMeta? {
        try tx.withValue(forKey: id, in: trees.byID) { b throws(SetteeError) in try DocMeta(decoding: b) }
    }

    func tree(_ tx: some StoreReading, _ meta: DocMeta) throws -> RevTree {
        if meta.treeRef == 0 { return try RevTree(implying: meta) }
        return try tx.withValue(at: ValueRef(rawValue: meta.treeRef)) { b throws(SetteeError) in try RevTree(decoding: b) }
    }

    /// A counter of the `db.meta` tree (last sequence, live documents, dead bytes): 0 while absent
    /// (nothing written yet), `corrupted` when malformed.
    func counter(_ tx: some StoreReading, _ key: [UInt8]) throws -> UInt64 {
        try tx.withValue(forKey: key, in: trees.meta) { b throws(SetteeError) -> UInt64 in
            guard b.count == 8 else { throw SetteeError(.corrupted, "database counters are malformed") }
            return UInt64(littleEndian: b.loadUnaligned(as: UInt64.self))
        } ?? 0
    }

    func body(_ tx: some StoreReading, ref: UInt64) throws -> [UInt8] {
        if ref == 0 { return Array("{}".utf8) }
        return try tx.withValue(at: ValueRef(rawValue: ref)) { Array($0) }
    }

    /// The current revision of `id` (whose UTF-8 is `key`); nil when missing or deleted.
    @inline(__always)
    func currentDocument(_ tx: some StoreReading, id: String, key: UnsafeRawBufferPointer) throws -> Document? {
        guard let meta = try meta(tx, id: key), !meta.flags.contains(.deleted) else { return nil }
        return try document(tx, id: id, meta: meta)
    }

    func document(_ tx: some StoreReading, id: String, meta: DocMeta) throws -> Document {
        Document(id: id, revisionID: meta.revisionID, sequence: meta.sequence, isDeleted: meta.flags.contains(.deleted),
                 body: try body(tx, ref: meta.bodyRef), blobs: blobs)
    }

    func document(_ tx: some StoreReading, id: String, tree: RevTree, index: Int, sequence: UInt64) throws -> Document {
        let r = tree.revs[index]
        return Document(id: id, revisionID: r.id, sequence: sequence, isDeleted: r.deleted,
                        body: r.hasBody ? try body(tx, ref: r.bodyRef) : Array("{}".utf8), blobs: blobs)
    }
}

/// The state of one write transaction: the sequence counter, the live-document count, the
/// changes to announce when it commits, and its participants' share.
final class WriteContext {
    unowned let core: DatabaseCore
    let tx: WriteTransaction
    var lastSequence: UInt64
    var liveCount: UInt64
    /// Estimated bytes the next compaction would reclaim (``MetaKey/deadBytes``).
    var deadBytes: UInt64
    var metaDirty = false
    var changes: [DocumentChange] = []
    /// Routing, indexes and expiry: their part in this transaction.
    let participants: CommitParticipants

    init(core: DatabaseCore, tx: WriteTransaction) throws {
        self.core = core
        self.tx = tx
        lastSequence = try core.counter(tx, MetaKey.lastSequence)
        liveCount = try core.counter(tx, MetaKey.liveCount)
        deadBytes = try core.counter(tx, MetaKey.deadBytes)
        participants = core.parts.beginTransaction(core)
    }

    /// Counts the value at `ref` as space the next compaction reclaims.
    func addDead(_ ref: UInt64) throws {
        guard ref != 0 else { return }
        deadBytes &+= UInt64(try tx.storedSize(at: ValueRef(rawValue: ref)))
        metaDirty = true
    }

    func nextSequence() -> UInt64 {
        lastSequence += 1
        metaDirty = true
        return lastSequence
    }

    func flush() throws {
        for p in participants.all { try p.willCommit(self) }
        guard metaDirty else { return }
        // This commit's operations (and the counters' own, about 64 bytes) are dead once the
        // next checkpoint has written the trees.
        deadBytes &+= UInt64(tx.operationBytes + 64)
        try tx.put(MetaKey.lastSequence, withUnsafeBytes(of: lastSequence.littleEndian, Array.init), in: core.trees.meta)
        try tx.put(MetaKey.liveCount, withUnsafeBytes(of: liveCount.littleEndian, Array.init), in: core.trees.meta)
        try tx.put(MetaKey.deadBytes, withUnsafeBytes(of: deadBytes.littleEndian, Array.init), in: core.trees.meta)
        metaDirty = false
    }
}
