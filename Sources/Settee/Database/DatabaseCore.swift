import Foundation
internal import SetteeStorage
import Synchronization
internal import Logging

/// The engine trees of an open database.
struct Trees: Sendable {
    let byID: Tree
    let bySequence: Tree
    let conflicts: Tree
    let local: Tree
    let meta: Tree
    let expiry: Tree
    let expiryByID: Tree
    let routing: Tree
    let channels: Tree
    let grants: Tree
    let indexCatalog: Tree
}

/// What every ``Database`` object open on the same files shares: the engine store, the writer
/// lock, listeners, validations, and the parts that keep records beside the documents
/// (``DatabaseParts``: routing, indexes, expiry), which it knows only as commit participants.
/// One per path per process, reference-counted.
final class DatabaseCore: @unchecked Sendable {
    /// The document format this build writes (Formats/documents.md). Older databases are
    /// upgraded when opened, without rewriting anything: version 2 added the expiry trees
    /// (created empty), version 3 the compact digests of revision trees (older trees stay
    /// readable; compaction rewrites them), version 4 documents with one revision and no stored
    /// tree (tree ref 0; older documents keep theirs), version 5 the routing trees (created
    /// empty: no document of an older database was routed), version 6 routing in sequence
    /// entries and one-byte member entries (version 5's full records and entries stay readable),
    /// version 7 per-revision channels, version 8 the index catalog (created empty), version 9
    /// grants to roles apart from grants to users (older routings stay readable; the grants
    /// older versions kept for `role:` principals move to their own kind when opened).
    static let formatVersion: UInt64 = 10
    static let upgradableVersions: Set<UInt64> = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    private static let registry = Mutex<[String: DatabaseCore]>([:])

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
    var maxRevTreeDepth: Int { revsLimit.load(ordering: .relaxed) }
    let store: Store
    let trees: Trees
    let blobs: BlobStore
    let uuid: [UInt8]
    let hub = ChangeHub()
    let validations = Mutex<[(name: String, body: Validation)]>([])
    /// What expiration and tombstone eviction read the time from.
    let clock: any ExpirationClock
    /// What keeps records beside the documents (channels and grants, indexes, expiry), each
    /// taking part in every commit as a ``CommitParticipant``.
    let parts: DatabaseParts
    /// The thread `async` writes run on (started by the first one).
    let worker: DatabaseWorker
    /// What background work last reported (``Database/backgroundStatus``).
    let background = Mutex(BackgroundStatus())
    /// Where background failures go: swift-log, label `settee` (an application routes it with
    /// `LoggingSystem.bootstrap`).
    static let logger = Logger(label: "settee")
    /// Threads waiting for `writeLock` in `write` or `runBatch`: the sweeper lets them go first
    /// between its batches.
    let waitingWriters = Atomic<Int>(0)
    /// Serializes writers. Recursive so that saves inside `Database.inBatch(_:)` on the batch's
    /// thread join the batch's transaction.
    let writeLock = NSRecursiveLock()
    /// The open batch; only touched with `writeLock` held.
    var batch: WriteContext?
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
    /// How many `Database` objects use this core; guarded by the registry lock.
    private var users = 0

    private init(name: String, path: String, configuration: DatabaseConfiguration,
                 openFile: ((String) throws(StorageError) -> any StorageFile)?, clock: any ExpirationClock) throws {
        self.name = name
        self.path = path
        self.configuration = configuration
        self.clock = clock
        self.parts = DatabaseParts(routing: ChannelRouting(), queries: QueryEngineState(), expiry: ExpiryKeeper(clock: clock, name: name))
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
            let trees = try translating {
                try store.write { tx -> Trees in
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
                    let grants = try tree(TreeName.grants)
                    if let from = upgradedFrom, from < 9 { try Self.separateRoleGrants(tx, grants) }
                    return Trees(byID: try tree(TreeName.byID), bySequence: try tree(TreeName.bySequence),
                                 conflicts: try tree(TreeName.conflicts), local: try tree(TreeName.local), meta: meta,
                                 expiry: try tree(TreeName.expiry), expiryByID: try tree(TreeName.expiryByID),
                                 routing: try tree(TreeName.routing), channels: try tree(TreeName.channels),
                                 grants: grants, indexCatalog: try tree(TreeName.indexCatalog))
                }
            }
            self.trees = trees
            self.uuid = uuid
            self.revsLimit.store(revsLimit, ordering: .relaxed)
            self.store = store
            self.blobs = try BlobStore(directory: path + "/blobs")
            try parts.opened(self)
        } catch {
            try? store.close()
            throw error
        }
        // Small async writes queued together commit as one batch (group commit).
        worker.setGroupRunner { [unowned self] body in try self.runBatch(body) }
        parts.ready(self)
    }

    /// The shared core for `path`, opening it if no other `Database` has.
    static func open(name: String, path: String, configuration: DatabaseConfiguration,
                     openFile: ((String) throws(StorageError) -> any StorageFile)? = nil,
                     clock: (any ExpirationClock)? = nil) throws -> DatabaseCore {
        try registry.withLock { open in
            if let core = open[path] {
                // One store, one behaviour: a second configuration would be silently ignored.
                let differences = configuration.differences(from: core.configuration)
                guard differences.isEmpty else {
                    throw SetteeError(.invalidParameter, "the database is already open in this process with "
                                      + differences.joined(separator: ", ") + "; open it with the same configuration or close it first")
                }
                core.users += 1
                return core
            }
            let core = try DatabaseCore(name: name, path: path, configuration: configuration, openFile: openFile,
                                        clock: clock ?? SystemExpirationClock())
            core.users = 1
            open[path] = core
            core.parts.started(core)
            return core
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
            parts.stopping()   // the sweeper's batch in progress ends first
            hub.finish()
            // A compaction still running stops at its next step; wait for it before closing.
            compactionCancelled.store(true, ordering: .relaxed)
            compactionLock.lock()
            defer { compactionLock.unlock() }
            try translating { try store.close() }
        }
    }

    static func isOpen(path: String) -> Bool { registry.withLock { $0[path] != nil } }

    // MARK: - Transactions

    /// Runs `body` in the open batch (same thread) or in a transaction of its own, then tells
    /// listeners what committed.
    func write<R>(_ body: (WriteContext) throws -> R) throws -> R {
        lockForWriting()
        defer { writeLock.unlock() }
        return try writeHoldingLock(body)
    }

    /// Takes the write lock, counted in `waitingWriters` while it waits.
    @inline(__always)
    private func lockForWriting() {
        waitingWriters.wrappingAdd(1, ordering: .relaxed)
        writeLock.lock()
        waitingWriters.wrappingSubtract(1, ordering: .relaxed)
    }

    /// `write` once the lock is held.
    func writeHoldingLock<R>(_ body: (WriteContext) throws -> R) throws -> R {
        if let batch { return try body(batch) }
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
        if let context {
            publish(context)
            compactIfWorthwhile(deadBytes: context.deadBytes)
        }
        return result
    }

    /// Runs `body` as one all-or-nothing transaction that saves on this thread join.
    func runBatch(_ body: () throws -> Void) throws {
        lockForWriting()
        defer { writeLock.unlock() }
        if batch != nil { return try body() }   // a batch inside a batch joins it
        var context: WriteContext?
        try translating {
            try store.write { tx in
                let c = try WriteContext(core: self, tx: tx)
                context = c
                batch = c
                batchThread.withLock { $0 = pthread_self() }
                batchOpen.store(true, ordering: .releasing)
                defer {
                    batch = nil
                    batchThread.withLock { $0 = nil }
                    batchOpen.store(false, ordering: .releasing)
                }
                try body()
                try c.flush()
            }
        }
        if let context {
            publish(context)
            compactIfWorthwhile(deadBytes: context.deadBytes)
        }
    }

    /// Tells the participants, then listeners, what committed.
    private func publish(_ c: WriteContext) {
        for p in c.participants.all { p.didCommit(c) }
        hub.publish(DatabaseChange(database: name, changes: c.changes))
    }

    /// Runs `body` on a snapshot, or on the batch's transaction when called from inside a batch.
    func read<R>(_ body: (any StoreReading) throws -> R) throws -> R {
        if let b = batchOnThisThread() {
            return try translating { try body(b.tx) }
        }
        return try translating { try store.read { tx in try body(tx) } }
    }

    /// `read` for hot paths: the same generic body, called with the concrete transaction type so
    /// it is specialized (no existential dispatch, no runtime generic metadata lookups).
    @inline(__always)
    func read<R>(snapshot: (ReadTransaction) throws -> R, batch: (WriteTransaction) throws -> R) throws -> R {
        if let b = batchOnThisThread() {
            return try translating { try batch(b.tx) }
        }
        return try translating { try store.read(snapshot) }
    }

    /// The open batch when called from the thread running it (its counters are not flushed to
    /// the meta tree until it commits).
    func batchOnThisThread() -> WriteContext? {
        guard batchOpen.load(ordering: .acquiring) else { return nil }
        guard let t = batchThread.withLock({ $0 }), pthread_equal(t, pthread_self()) != 0 else { return nil }
        return batch
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
