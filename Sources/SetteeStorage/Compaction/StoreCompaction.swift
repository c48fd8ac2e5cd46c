/// A key that changed in the source store while a compaction ran: the compaction copies it again
/// (or removes it from the new log) before the swap.
///
/// ```swift
/// try compaction.catchUp { source, changes in
///     for change in changes { print(change.tree.name, change.key.count) }
/// }
/// ```
///
/// A value type; safe to share between threads.
public struct ChangedKey: Hashable, Sendable {
    /// The tree, as the source store names it.
    ///
    /// ```swift
    /// if change.tree == byID { recopy(change.key) }
    /// ```
    public let tree: Tree
    /// The key that was put or deleted.
    ///
    /// ```swift
    /// let id = String(decoding: change.key, as: UTF8.self)
    /// ```
    public let key: [UInt8]
}

/// The keys the source's commits changed since the compaction last caught up.
final class ChangeJournal: @unchecked Sendable {
    private let lock = Lock()
    private var entries: [(tree: UInt32, key: [UInt8])] = []
    /// Why the compaction is over (finished, cancelled, its store closed), once it is.
    private var ended: StorageError?
    /// The compaction's new log, abandoned with it when the source store closes.
    let target: Store

    init(target: Store) { self.target = target }

    /// Marks the compaction as over: its later steps throw `reason`.
    func end(_ reason: StorageError) {
        lock.withLock { if ended == nil { ended = reason } }
    }

    func checkRunning() throws(StorageError) {
        if let e = lock.withLock({ ended }) { throw e }
    }

    func append(_ more: [(tree: UInt32, key: [UInt8])]) {
        lock.withLock { entries.append(contentsOf: more) }
    }

    func take() -> [(tree: UInt32, key: [UInt8])] {
        lock.withLock {
            defer { entries = [] }
            return entries
        }
    }

    var count: Int { lock.withLock { entries.count } }
}

/// An online compaction of a ``Store``: a new log (`log.compact`, beside `log`) that the caller
/// fills with what is live, while readers and the writer keep using the old one; then
/// ``finish(_:)`` copies what changed meanwhile and swaps the new log in atomically.
///
/// The engine knows nothing of what is live: the caller decides what to copy (and translates the
/// ``ValueRef``s its values hold, with ``WriteTransaction/appendValue(copying:from:)``). The engine
/// supplies the consistent snapshot to start from, the keys every later commit changed, and a
/// crash-safe swap: until the rename of `log.compact` over `log` the old log is the database (an
/// unfinished `log.compact` is deleted when the store opens); from it on, the new one is, holding
/// everything committed up to the swap. See `Formats/storage.md`, "Compaction".
///
/// ```swift
/// let compaction = try store.beginCompaction()
/// try compaction.readStart { source in
///     try compaction.target.write { out in
///         let tree = out.tree(named: "people")!
///         try source.forEach(in: source.tree(named: "people")!) { k, v in
///             try out.put(k, v, in: tree); return true
///         }
///     }
/// }
/// try compaction.finish { source, changes, out in
///     for change in changes {
///         let tree = out.tree(named: change.tree.name)!
///         if let v = try source.value(forKey: change.key, in: change.tree) { try out.put(change.key, v, in: tree) }
///         else { try out.delete(change.key, in: tree) }
///     }
/// }
/// ```
///
/// - Note: Thread-safe: one thread drives a compaction (its copy, catch-ups and finish) while
///   others read and write the source store as usual. Writes to ``target`` must come from that
///   one thread.
public final class StoreCompaction: @unchecked Sendable {
    /// The new log being written. Its trees are created with the source's names and numbers;
    /// write to it with ``Store/write(_:)`` (its commits are not synced one by one; the swap
    /// syncs them).
    ///
    /// ```swift
    /// try compaction.target.write { out in try out.put(key, value, in: out.tree(named: "people")!) }
    /// ```
    public let target: Store
    /// The size of the source's log when the compaction began, in bytes (for progress reports).
    ///
    /// ```swift
    /// let fraction = Double(copied) / Double(compaction.sourceBytes)
    /// ```
    public let sourceBytes: UInt64
    let source: Store
    let journal: ChangeJournal
    let start: Snapshot

    init(source: Store, target: Store, journal: ChangeJournal, start: Snapshot, sourceBytes: UInt64) {
        self.source = source
        self.target = target
        self.journal = journal
        self.start = start
        self.sourceBytes = sourceBytes
    }

    /// Runs `body` on the source's snapshot taken when the compaction began: copy it all; every
    /// later change is reported by ``catchUp(_:)`` or ``finish(_:)``.
    ///
    /// ```swift
    /// let n = try compaction.readStart { source in try source.count(in: source.tree(named: "people")!) }
    /// ```
    public func readStart<R>(_ body: (ReadTransaction) throws -> R) rethrows -> R {
        try body(ReadTransaction(store: source, snapshot: start))
    }

    /// How many changed keys the source's commits recorded since the last catch-up (with
    /// repeats): when small enough, call ``finish(_:)``.
    ///
    /// ```swift
    /// while compaction.pendingChanges > 1_000 { try compaction.catchUp(copy) }
    /// ```
    public var pendingChanges: Int { journal.count }

    /// Runs `body` with the source's current snapshot and every key changed since the previous
    /// catch-up (or the start), without blocking the source's writer.
    ///
    /// ```swift
    /// try compaction.catchUp { source, changes in try recopy(changes, from: source) }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/closed`` when the store was closed during the compaction,
    ///   ``StorageError/Code/invalidArgument`` once it was cancelled, finished or abandoned; what
    ///   `body` throws.
    public func catchUp<R>(_ body: (_ source: ReadTransaction, _ changes: [ChangedKey]) throws -> R) throws -> R {
        try journal.checkRunning()
        // Keys first, then the snapshot: a commit publishes its snapshot before it records its
        // keys, so the snapshot holds every change taken.
        let raw = journal.take()
        let snapshot = source.currentSnapshot
        try addMissingTrees(snapshot)
        // The transaction borrows the snapshot: this reference keeps it alive while `body` runs.
        return try withExtendedLifetime(snapshot) {
            try body(ReadTransaction(store: source, snapshot: snapshot), changedKeys(raw, snapshot))
        }
    }

    /// With the source's writer held off: runs `body` with the source's last commit, the keys
    /// changed since the previous catch-up, and one write transaction on the target; then syncs
    /// the target and swaps it in. When this returns, the store writes to and reads from the new
    /// log (readers that started earlier finish on the old one). If it throws before the swap, the
    /// compaction is abandoned and the store is unchanged.
    ///
    /// ```swift
    /// try compaction.finish { source, changes, out in try recopy(changes, from: source, into: out) }
    /// ```
    public func finish(_ body: (_ source: ReadTransaction, _ changes: [ChangedKey], _ target: WriteTransaction) throws -> Void) throws {
        if target.hasUncheckpointedWork { try flush() }
        try source.finishCompaction(self, body)
    }

    /// Writes and syncs everything the new log holds so far (a checkpoint of ``target``) while
    /// the source's writer keeps committing, so that ``finish(_:)``, which holds the writer, has
    /// only the last changes to write and sync. `finish` does it itself when it is needed; call it
    /// first when you hold a lock of your own around `finish` that your writers wait for.
    ///
    /// ```swift
    /// try compaction.flush()
    /// appLock.withLock { try compaction.finish(recopy) }
    /// ```
    ///
    /// - Throws: what the target's checkpoint throws (`io`, `closed`); the compaction is then
    ///   abandoned.
    public func flush() throws {
        try journal.checkRunning()
        do {
            try target.checkpoint()
        } catch {
            cancel()
            throw error
        }
    }

    /// Abandons the compaction: the new log is deleted, the store goes on with the old one.
    ///
    /// ```swift
    /// if cancelled { compaction.cancel() }
    /// ```
    public func cancel() {
        source.endCompaction(self)
    }

    func changedKeys(_ raw: [(tree: UInt32, key: [UInt8])], _ snapshot: Snapshot) -> [ChangedKey] {
        var seen = Set<ChangedKey>()
        var out: [ChangedKey] = []
        out.reserveCapacity(raw.count)
        for (id, key) in raw {
            guard let state = snapshot.state(id) else { continue }
            let change = ChangedKey(tree: Tree(name: state.name, id: id, storeID: ObjectIdentifier(source)), key: key)
            if seen.insert(change).inserted { out.append(change) }
        }
        return out
    }

    /// Trees the source created after the compaction began, created in the target in the same
    /// order so that their numbers agree.
    func addMissingTrees(_ snapshot: Snapshot) throws {
        let have = try target.read { $0.snapshot.trees.count }
        guard snapshot.trees.count > have else { return }
        try target.write { tx in
            for state in snapshot.trees[have...] {
                let t = try tx.createTree(named: state.name)
                guard t.id == state.id else {
                    throw StorageError(code: .invalidArgument, reason: "compaction target's trees do not match the source's")
                }
            }
        }
    }
}

extension Store {
    /// Starts an online compaction: creates the new log `log.compact` with this store's trees
    /// and starts recording the keys every commit changes. Fill the target from
    /// ``StoreCompaction/readStart(_:)``, then call ``StoreCompaction/finish(_:)`` (or
    /// ``StoreCompaction/cancel()``).
    ///
    /// ```swift
    /// let compaction = try store.beginCompaction()
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidArgument`` when a compaction is already running or
    ///   inside a write transaction; `closed`, `poisoned`, `io`.
    public func beginCompaction() throws -> StoreCompaction {
        guard writerLock.lock() else {
            throw StorageError(code: .invalidArgument, reason: "compaction cannot start inside a write transaction")
        }
        defer { writerLock.unlock() }
        try checkUsable()
        guard writer.journal == nil else {
            throw StorageError(code: .invalidArgument, reason: "a compaction is already running")
        }
        var config = configuration
        // The target's commits are synced once, before the swap.
        config.durability = .none
        let target: Store
        do {
            target = try Store(compactionTargetIn: directory, name: Store.compactionLogName, configuration: config, openFile: openFile)
        } catch {
            // What a failed creation left (`log.compact.new`, or `log.compact` renamed into place
            // but not opened) goes too: a failed start leaves the directory as it was.
            try? System.removeIfPresent(directory + "/" + Store.compactionLogName)
            try? System.removeIfPresent(directory + "/" + Store.compactionLogName + ".new")
            throw error
        }
        let snapshot = currentSnapshot
        do {
            try target.write { tx in
                for state in snapshot.trees { _ = try tx.createTree(named: state.name) }
            }
        } catch {
            target.abandon()
            try? System.removeIfPresent(directory + "/" + Store.compactionLogName)
            throw error
        }
        let journal = ChangeJournal(target: target)
        writer.journal = journal
        return StoreCompaction(source: self, target: target, journal: journal, start: snapshot, sourceBytes: writer.logEnd)
    }

    /// Stops recording changes and deletes the unfinished target.
    func endCompaction(_ c: StoreCompaction) {
        guard writerLock.lock() else { return }
        defer { writerLock.unlock() }
        guard writer.journal === c.journal else { return }
        writer.journal = nil
        c.journal.end(StorageError(code: .invalidArgument, reason: "the compaction was cancelled"))
        c.target.abandon()
        try? System.removeIfPresent(directory + "/" + Store.compactionLogName)
    }

    func finishCompaction(_ c: StoreCompaction, _ body: (ReadTransaction, [ChangedKey], WriteTransaction) throws -> Void) throws {
        guard writerLock.lock() else {
            throw StorageError(code: .invalidArgument, reason: "compaction cannot finish inside a write transaction")
        }
        defer { writerLock.unlock() }
        guard writer.journal === c.journal else {
            try c.journal.checkRunning()
            throw StorageError(code: .invalidArgument, reason: "the compaction is no longer running")
        }
        let logPath = directory + "/log"
        let newPath = directory + "/" + Store.compactionLogName
        func abandon() {
            writer.journal = nil
            c.journal.end(StorageError(code: .invalidArgument, reason: "the compaction failed and was abandoned"))
            c.target.abandon()
            try? System.removeIfPresent(newPath)
        }
        do {
            try checkUsable()
            let snapshot = currentSnapshot
            let raw = c.journal.take()
            try c.addMissingTrees(snapshot)
            // The new log continues the old one's commit numbers.
            c.target.continueCommitIDs(after: snapshot.commitID)
            try c.target.write { tx in
                try withExtendedLifetime(snapshot) {
                    try body(ReadTransaction(store: self, snapshot: snapshot), c.changedKeys(raw, snapshot), tx)
                }
            }
            // A checkpoint and a sync: the new log is complete and durable before it is named `log`.
            // The checkpoint is taken even when the target checkpointed last and nothing was
            // committed since (close would then skip it): it records the commit number the new log
            // continues from, which `continueCommitIDs` only set in memory.
            try c.target.checkpoint()
            try c.target.close()
            try System.rename(newPath, to: logPath)
        } catch {
            abandon()
            throw error
        }
        writer.journal = nil
        c.journal.end(StorageError(code: .invalidArgument, reason: "the compaction has finished"))
        do throws(StorageError) {
            // From the rename on, the new log is the database: the old file is no longer named,
            // so a failure here must stop all writing until the database is reopened.
            try System.syncDirectory(directory)
            let opened = try Store.openLog(directory: directory, name: "log", openFile: openFile,
                                           mapReservation: configuration.mapReservation)
            // Earlier snapshots keep the old map (and so the old file's data) alive; the last of
            // them to go hands the file to a background thread that frees it. Marked before the
            // publish, which may release them at once.
            backing.retire()
            backing = opened.backing
            writer = opened.writer
            publish(opened.snapshot)
        } catch {
            writer.poisoned = error
            throw error
        }
    }

    /// Makes the next commit number follow `id` (a compaction target continuing its source's).
    func continueCommitIDs(after id: UInt64) {
        guard writerLock.lock() else { return }
        defer { writerLock.unlock() }
        let s = currentSnapshot
        guard id > s.commitID else { return }
        publish(Snapshot(trees: s.trees, end: s.end, commitID: id, backing: s.backing, previous: s))
    }
}
