import Synchronization

/// A database of named ordered trees in one append-only, memory-mapped log file.
///
/// A store is a directory holding `log` (the data) and `lock`. Readers work on snapshots and never
/// block; one writer at a time appends a commit record per transaction and makes it durable with
/// `fdatasync` before ``write(_:)`` returns. Index nodes are kept in memory between checkpoints and
/// the log tail is replayed on open (see `Formats/storage.md`).
///
/// ```swift
/// let store = try Store(directory: "/tmp/example.settee")
/// let people = try store.write { tx in
///     let tree = try tx.createTree(named: "people")
///     try tx.put(Array("ada".utf8), Array("Lovelace".utf8), in: tree)
///     return tree
/// }
/// let name = try store.read { tx in try tx.value(forKey: Array("ada".utf8), in: people) }
/// try store.close()
/// ```
///
/// - Note: `Store` is thread-safe. Any number of threads may read while one writes; concurrent
///   calls to ``write(_:)`` wait for each other. A second `Store` on the same directory, in this
///   process or another, fails with ``StorageError/Code/locked``.
public final class Store: @unchecked Sendable {
    /// The database directory.
    ///
    /// ```swift
    /// print(store.directory)
    /// ```
    public let directory: String
    /// The configuration the store was opened with.
    ///
    /// ```swift
    /// let durable = store.configuration.durability == .synchronous
    /// ```
    public let configuration: StoreConfiguration

    /// The log in use; replaced (with the writer lock held) when compaction swaps in a new file.
    var backing: LogBacking
    var file: any StorageFile { backing.file }
    var verified: VerifiedBitmap { backing.verified }
    var salt: UInt64 { backing.salt }
    /// How the store opens files, kept so compaction opens its new log the same way.
    let openFile: (String) throws(StorageError) -> any StorageFile
    /// nil for a compaction target, which lives under its source's lock.
    private let lockFile: LockFile?

    /// The current snapshot: the bits of a pointer that holds one reference to it. Readers borrow
    /// it under their ``ReaderTable`` slot instead of counting references.
    private let current = Atomic<UInt>(0)
    /// Moved on by every publish; a reader pins the value it saw before it loads `current`.
    private let epoch = Atomic<UInt64>(1)
    /// Where readers announce the epoch they read under.
    let readers = ReaderTable()
    /// Replaced snapshots a reader may still be using, with the epoch their replacement began;
    /// the store holds one reference to each. Writer only.
    private var retired: [(snapshot: Unmanaged<Snapshot>, epoch: UInt64)] = []
    /// Retired snapshots that, when reached, make the writer look for ones it can release.
    private var reclaimAt = Store.reclaimBatch
    /// Serializes writers, checkpoints and close.
    let writerLock = Lock(errorChecking: true)
    /// Writer-side state; only touched with `writerLock` held.
    var writer: WriterState

    final class WriterState {
        var header: HeaderSlot
        var logEnd: UInt64
        var allocated: UInt64
        var lastCheckpointEnd: UInt64
        var dirtyNodes = 0
        /// Operation bytes (commit bytes other than value entries) since the last checkpoint:
        /// what the next open would have to replay.
        var replayBytes = 0
        var nextTransaction: UInt64 = 1
        var poisoned: StorageError?
        var closed = false
        /// The commit being built: record header, commit ID, value entries.
        let buffer = ByteWriter()
        /// The operations of the commit being built, appended to `buffer` as one block at commit.
        let operations = ByteWriter()
        let compressor = LZ4.Compressor()
        /// Whether every byte below `logEnd` is known durable (so the next record may say so).
        var priorDurable = true
        /// Set while a compaction runs: the keys each commit changes.
        var journal: ChangeJournal?
        /// A compaction's new log. Its puts and deletes are not written to the log, only applied
        /// to the trees, which the checkpoint before its swap writes: nothing ever replays a
        /// target's commits (an unfinished target is deleted), so their operations would be dead
        /// bytes in the compacted file. And it syncs as it writes, a slice at a time (see
        /// `commit`, `writeCheckpoint`), so the source's commit syncs never queue behind one
        /// large flush.
        var isCompactionTarget = false
        /// A compaction target syncs every `Store.compactionSyncInterval` bytes (see `commit`);
        /// where the last of those syncs ended.
        var syncedEnd: UInt64 = 0

        init(header: HeaderSlot, logEnd: UInt64, allocated: UInt64, lastCheckpointEnd: UInt64) {
            self.header = header
            self.logEnd = logEnd
            self.allocated = allocated
            self.lastCheckpointEnd = lastCheckpointEnd
        }
    }

    /// Opens the database in `directory`, creating it when missing, and recovers it after a crash:
    /// the last checkpoint is loaded and the commits after it are replayed; a torn last record is
    /// ignored, damage anywhere else is reported as ``StorageError/Code/corrupted``.
    ///
    /// ```swift
    /// let store = try Store(directory: "/tmp/example.settee")
    /// ```
    ///
    /// - Throws: ``StorageError`` with code `locked`, `corrupted`, `versionMismatch` or `io`.
    public convenience init(directory: String, configuration: StoreConfiguration = StoreConfiguration()) throws(StorageError) {
        try self.init(directory: directory, configuration: configuration, openFile: { path throws(StorageError) in try PosixFile(path: path) })
    }

    /// Opens with a custom file implementation (fault injection in crash tests).
    package init(directory: String, configuration: StoreConfiguration, openFile: @escaping (String) throws(StorageError) -> any StorageFile) throws(StorageError) {
        guard configuration.checkpointInterval >= 1 << 16, configuration.maxDirtyNodes >= 64,
              configuration.compressionThreshold >= 16
        else { throw StorageError(code: .invalidArgument, reason: "configuration value out of range") }
        self.directory = directory
        self.configuration = configuration
        self.openFile = openFile
        try System.makeDirectory(directory)
        let lockFile = try LockFile(path: directory + "/lock")
        self.lockFile = lockFile
        do throws(StorageError) {
            // A compaction that did not finish leaves its new log behind; holding the lock, we
            // know no compaction is running, and the old log is still the database.
            try System.removeIfPresent(directory + "/" + Store.compactionLogName)
            try System.removeIfPresent(directory + "/" + Store.compactionLogName + ".new")
            let opened = try Store.openLog(directory: directory, name: "log", openFile: openFile,
                                           mapReservation: configuration.mapReservation)
            backing = opened.backing
            current.store(Store.owned(opened.snapshot), ordering: .releasing)
            writer = opened.writer
        } catch {
            lockFile.release()
            throw error
        }
    }

    /// Opens a fresh log named `name` in `directory` without taking the lock: the compaction
    /// target, which its source store's lock already covers.
    init(compactionTargetIn directory: String, name: String, configuration: StoreConfiguration,
         openFile: @escaping (String) throws(StorageError) -> any StorageFile) throws(StorageError) {
        self.directory = directory
        self.configuration = configuration
        self.openFile = openFile
        lockFile = nil
        try System.removeIfPresent(directory + "/" + name)
        let opened = try Store.openLog(directory: directory, name: name, openFile: openFile,
                                       mapReservation: configuration.mapReservation)
        backing = opened.backing
        current.store(Store.owned(opened.snapshot), ordering: .releasing)
        writer = opened.writer
        writer.isCompactionTarget = true
    }

    static let compactionLogName = "log.compact"
    /// How much a compaction target writes between two syncs of its own.
    static let compactionSyncInterval: UInt64 = 16 << 20

    /// Opens (creating when missing) the log `directory/name` and recovers it: the last
    /// checkpoint is loaded, the commits after it replayed, and a new header written.
    static func openLog(directory: String, name: String, openFile: (String) throws(StorageError) -> any StorageFile,
                        mapReservation: Int?)
        throws(StorageError) -> (backing: LogBacking, snapshot: Snapshot, writer: WriterState) {
        let path = directory + "/" + name
        if !System.exists(path) {
            // Created under another name and renamed once its header is durable, so a crash
            // during creation leaves no log at all rather than one too short to open.
            let fresh = try openFile(path + ".new")
            do throws(StorageError) {
                try fresh.truncate(to: 0)
                try Store.initialize(fresh)
            } catch {
                fresh.close()
                throw error
            }
            fresh.close()
            try System.rename(path + ".new", to: path)
            try System.syncDirectory(directory)
        }
        let file = try openFile(path)
        do throws(StorageError) {
            let size = try file.size()
            guard size >= UInt64(Layout.logStart) else {
                throw StorageError.corrupted("file shorter than its header", offset: size)
            }
            var header = try Store.readHeader(file)
            let map = try MemoryMap(descriptor: file.descriptor, reservation: mapReservation)
            let verified = try VerifiedBitmap(coveringBytes: map.reserved)
            try map.checkCovers(size)
            let backing = LogBacking(file: file, map: map, verified: verified, salt: header.salt)
            let reader = NodeReader(base: map.base, end: size, salt: header.salt, verified: verified)
            var recovered = try Recovery.run(reader: reader, header: header, fileSize: size)
            // Records written from now on carry a new epoch, so whatever a crashed writer left
            // beyond the recovered end can never be mistaken for them.
            // Both only ever grow by one per checkpoint or session; values near their limits can
            // only come from a damaged or crafted header.
            guard header.generation < UInt64.max >> 1, recovered.lastEpoch < UInt32.max,
                  recovered.commitID < UInt64.max >> 1
            else {
                throw StorageError.corrupted("header generation, record epoch or commit ID out of range", offset: 0)
            }
            header.generation += 1
            header.epoch = recovered.lastEpoch + 1
            try Store.writeHeader(header, to: file)
            try file.sync()
            let snapshot = Snapshot(trees: recovered.trees, end: recovered.end, commitID: recovered.commitID, backing: backing)
            let writer = WriterState(header: header, logEnd: recovered.end, allocated: size, lastCheckpointEnd: header.replayFrom)
            writer.dirtyNodes = recovered.dirtyNodes
            writer.replayBytes = recovered.replayBytes
            writer.nextTransaction = recovered.nextTransaction
            recovered.trees = []
            return (backing, snapshot, writer)
        } catch {
            file.close()
            throw error
        }
    }

    deinit {
        if !writer.closed {
            try? close()
        }
        // No read runs: each holds the store.
        for r in retired { r.snapshot.release() }
        Unmanaged<Snapshot>.fromOpaque(UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring))!).release()
    }

    // MARK: - Header

    static func initialize(_ file: any StorageFile) throws(StorageError) {
        var salt: UInt64 = 0
        while salt == 0 { salt = UInt64.random(in: 1...UInt64.max) }
        let header = HeaderSlot(generation: 1, salt: salt, epoch: 1, checkpoint: 0, replayFrom: Layout.logStart)
        let buf = UnsafeMutableRawPointer.allocate(byteCount: Int(Layout.logStart), alignment: 16)
        defer { buf.deallocate() }
        buf.initializeMemory(as: UInt8.self, repeating: 0, count: Int(Layout.logStart))
        // In the slot its generation selects, like every later header: the first open writes
        // generation 2 into the other slot, so a power failure tearing that write leaves this one.
        header.encode(into: buf + Int(header.generation % 2) * Layout.headerSlotSize)
        try file.write(UnsafeRawBufferPointer(start: buf, count: Int(Layout.logStart)), at: 0)
        try file.sync()
    }

    static func readHeader(_ file: any StorageFile) throws(StorageError) -> HeaderSlot {
        let buf = UnsafeMutableRawPointer.allocate(byteCount: Int(Layout.logStart), alignment: 16)
        defer { buf.deallocate() }
        let n = try file.read(into: UnsafeMutableRawBufferPointer(start: buf, count: Int(Layout.logStart)), at: 0)
        guard n == Int(Layout.logStart) else { throw StorageError.corrupted("file shorter than its header", offset: 0) }
        var best: HeaderSlot?
        var version: UInt32?
        var reasons: [String] = []
        for slot in 0..<2 {
            switch HeaderSlot.decode(buf + slot * Layout.headerSlotSize) {
            case .valid(let h):
                if best == nil || h.generation > best!.generation { best = h }
            case .unsupportedVersion(let v):
                version = v
            case .invalid(let why):
                reasons.append("slot \(slot): \(why)")
            }
        }
        if let best { return best }
        if let version {
            throw StorageError(code: .versionMismatch, reason: "file format version \(version); this build reads \(Layout.formatVersion)")
        }
        throw StorageError.corrupted("no valid header (" + reasons.joined(separator: "; ") + ")", offset: 0)
    }

    /// Writes `header` into the slot its generation selects (the other slot keeps the previous one).
    static func writeHeader(_ header: HeaderSlot, to file: any StorageFile) throws(StorageError) {
        let buf = UnsafeMutableRawPointer.allocate(byteCount: Layout.headerSlotSize, alignment: 16)
        defer { buf.deallocate() }
        header.encode(into: buf)
        let slot = UInt64(header.generation % 2)
        try file.write(UnsafeRawBufferPointer(start: buf, count: Layout.headerSlotSize), at: slot * UInt64(Layout.headerSlotSize))
    }

    // MARK: - Snapshots

    /// How many snapshots retire between two looks for ones to release: each look costs a
    /// `membarrier` (a few microseconds with other threads running), and each retired snapshot
    /// keeps the memory nodes its commit replaced.
    static let reclaimBatch = 8

    static func owned(_ snapshot: Snapshot) -> UInt {
        UInt(bitPattern: Unmanaged.passRetained(snapshot).toOpaque())
    }

    /// The current snapshot, held by the caller; for everything but the read path, which borrows
    /// it (``withCurrentSnapshot(_:)``).
    var currentSnapshot: Snapshot {
        withCurrentSnapshot { $0.takeUnretainedValue() }
    }

    /// Calls `body` with the current snapshot, which stays alive until `body` returns because this
    /// thread's reader slot pins the epoch it was read under (see ``ReaderTable``). Nested calls
    /// on one thread keep the outermost pin, the oldest.
    @inline(__always)
    func withCurrentSnapshot<R>(_ body: (Unmanaged<Snapshot>) throws -> R) rethrows -> R {
        guard let slot = readers.slot() else { return try withCurrentSnapshotOverflowing(body) }
        let depth = slot[1]
        slot[1] = depth + 1
        if depth == 0 {
            CPU.storeRelaxed(slot, epoch.load(ordering: .acquiring))
            if readers.asymmetric { CPU.compilerFence() } else { CPU.fence() }
        }
        defer {
            slot[1] = depth
            if depth == 0 { CPU.storeRelease(slot, 0) }
        }
        return try body(Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring))!))
    }

    /// The same for a thread beyond the reader table: its pin is counted under a lock.
    func withCurrentSnapshotOverflowing<R>(_ body: (Unmanaged<Snapshot>) throws -> R) rethrows -> R {
        let (pinned, bits) = readers.overflow.withLock { pins in
            let e = epoch.load(ordering: .acquiring)
            pins[e, default: 0] += 1
            return (e, current.load(ordering: .acquiring))
        }
        defer {
            readers.overflow.withLock { pins in
                if let n = pins[pinned], n > 1 { pins[pinned] = n - 1 } else { pins[pinned] = nil }
            }
        }
        return try body(Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: bits)!))
    }

    /// Makes `snapshot` the current one; the one it replaces is released once no reader can
    /// still see it. Only with the writer lock held (or during init).
    func publish(_ snapshot: Snapshot) {
        let replaced = current.exchange(Store.owned(snapshot), ordering: .acquiringAndReleasing)
        // After the exchange: a reader that pins this epoch or a later one loads the new snapshot.
        let began = epoch.add(1, ordering: .sequentiallyConsistent).newValue
        let old = Unmanaged<Snapshot>.fromOpaque(UnsafeRawPointer(bitPattern: replaced)!)
        let compacted = old._withUnsafeGuaranteedRef { $0.backing !== snapshot.backing }
        retired.append((old, began))
        // A compaction's swap releases the old log's snapshots as soon as it can, so that its
        // file is freed.
        if retired.count >= reclaimAt || compacted { reclaimSnapshots() }
    }

    /// Releases every retired snapshot that no reader pins.
    func reclaimSnapshots() {
        guard !retired.isEmpty else { return }
        let oldest = readers.oldestPinnedEpoch()
        retired.removeAll { r in
            // A reader pinned at an epoch at or after `r.epoch` loaded a later snapshot.
            guard r.epoch <= oldest else { return false }
            r.snapshot.release()
            return true
        }
        // A long read keeps what retired since it began; look again only when as many more have.
        reclaimAt = max(Store.reclaimBatch, retired.count * 2)
    }

    func reader(for snapshot: Snapshot) -> NodeReader {
        let b = snapshot.backing
        return NodeReader(base: b.map.base, end: snapshot.end, salt: b.salt, verified: b.verified)
    }

    // MARK: - Transactions

    /// Runs `body` on a snapshot of the last commit. Never blocks, never sees a partial commit.
    ///
    /// ```swift
    /// let count = try store.read { tx in try tx.count(in: people) }
    /// ```
    ///
    /// The transaction and every buffer it hands out are valid only inside `body`.
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        try withCurrentSnapshot { snapshot in try body(ReadTransaction(store: self, snapshot: snapshot)) }
    }

    /// Holds the last commit for reads across calls and threads (a cursor that pages through a
    /// tree in several calls, each seeing the same commit).
    ///
    /// ```swift
    /// let held = store.snapshot()
    /// let first = try held.read { tx in try tx.count(in: people) }
    /// // … commits happen …
    /// let again = try held.read { tx in try tx.count(in: people) }   // the same commit
    /// ```
    ///
    /// The held commit's memory (and, across a compaction, the old log) stays allocated until the
    /// snapshot is released, as for a long ``read(_:)``.
    public func snapshot() -> StoreSnapshot {
        withCurrentSnapshot { StoreSnapshot(store: self, snapshot: $0.takeUnretainedValue()) }
    }

    /// Runs `body` as the only writer and commits what it did when it returns; if it throws,
    /// nothing it did is kept and the error is rethrown. With ``StoreConfiguration/Durability/synchronous``
    /// the commit is durable when this returns.
    ///
    /// ```swift
    /// try store.write { tx in
    ///     try tx.put(Array("grace".utf8), Array("Hopper".utf8), in: people)
    ///     try tx.delete(Array("ada".utf8), in: people)
    /// }
    /// ```
    ///
    /// - Throws: what `body` throws, or ``StorageError`` (`poisoned` after an earlier failed write,
    ///   `closed`, `io`, `invalidArgument` when called inside another write transaction).
    public func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        guard writerLock.lock() else {
            throw StorageError(code: .invalidArgument, reason: "write transactions cannot be nested")
        }
        defer { writerLock.unlock() }
        if writer.closed { throw StorageError(code: .closed, reason: "the store is closed") }
        if let poisoned = writer.poisoned {
            throw StorageError(code: .poisoned, reason: "an earlier write failed (\(poisoned.reason)); reopen the database")
        }
        let tx = WriteTransaction(store: self, snapshot: currentSnapshot, transaction: writer.nextTransaction)
        writer.nextTransaction += 1
        defer { tx.finish() }
        let result = try body(tx)
        try commit(tx)
        return result
    }

    /// Writes every in-memory index node to the log and points the header at them, so the next
    /// open replays nothing. Runs by itself every ``StoreConfiguration/checkpointInterval`` bytes.
    ///
    /// ```swift
    /// try store.checkpoint()
    /// ```
    public func checkpoint() throws(StorageError) {
        guard writerLock.lock() else {
            throw StorageError(code: .invalidArgument, reason: "checkpoint inside a write transaction")
        }
        defer { writerLock.unlock() }
        try checkUsable()
        try writeCheckpoint()
    }

    func checkUsable() throws(StorageError) {
        if writer.closed { throw StorageError(code: .closed, reason: "the store is closed") }
        if writer.poisoned != nil { throw StorageError(code: .poisoned, reason: "an earlier write failed; reopen the database") }
    }

    /// Checkpoints, trims the preallocated tail of the file and releases the lock. Later calls
    /// to ``write(_:)`` throw ``StorageError/Code/closed``; calling `close` twice does nothing.
    ///
    /// ```swift
    /// try store.close()
    /// ```
    public func close() throws(StorageError) {
        guard writerLock.lock() else {
            throw StorageError(code: .invalidArgument, reason: "close inside a write transaction")
        }
        defer { writerLock.unlock() }
        guard !writer.closed else { return }
        if let journal = writer.journal {
            // A compaction still running is abandoned; its thread's next step fails with `closed`
            // (its target too, instead of writing on to an unlinked file).
            writer.journal = nil
            journal.end(StorageError(code: .closed, reason: "the store was closed during the compaction"))
            journal.target.abandon()
            try? System.removeIfPresent(directory + "/" + Store.compactionLogName)
        }
        defer {
            writer.closed = true
            file.close()
            lockFile?.release()
        }
        guard writer.poisoned == nil else { return }
        if writer.logEnd > writer.lastCheckpointEnd || writer.dirtyNodes > 0 {
            try writeCheckpoint()
        }
        if writer.allocated > writer.logEnd {
            try file.truncate(to: writer.logEnd)
            try file.sync()
            writer.allocated = writer.logEnd
        }
    }

    /// Drops the store as a crash would: no checkpoint, no trimming, the lock released. For crash
    /// tests and the crash harness; the database must then be reopened.
    package func abandon() {
        guard writerLock.lock() else { return }
        defer { writerLock.unlock() }
        guard !writer.closed else { return }
        writer.closed = true
        file.close()
        lockFile?.release()
    }

    /// Whether something was committed or changed in memory since the last checkpoint.
    var hasUncheckpointedWork: Bool {
        guard writerLock.lock() else { return true }
        defer { writerLock.unlock() }
        return writer.logEnd > writer.lastCheckpointEnd || writer.dirtyNodes > 0
    }

    /// The offset where the next record will be written (the end of the last commit).
    package var logEnd: UInt64 {
        guard writerLock.lock() else { return writer.logEnd }
        defer { writerLock.unlock() }
        return writer.logEnd
    }

    /// The offset of the latest checkpoint record (0 before the first).
    package var lastCheckpoint: UInt64 {
        guard writerLock.lock() else { return writer.header.checkpoint }
        defer { writerLock.unlock() }
        return writer.header.checkpoint
    }

    /// The size of the log file in bytes, preallocated tail included.
    ///
    /// ```swift
    /// print(store.fileSize, "bytes")
    /// ```
    public var fileSize: UInt64 {
        // Inside a write transaction the calling thread already holds the lock.
        guard writerLock.lock() else { return writer.allocated }
        defer { writerLock.unlock() }
        return writer.allocated
    }

    /// Commits made so far (the number of the last one).
    ///
    /// ```swift
    /// let before = store.lastCommitID
    /// ```
    public var lastCommitID: UInt64 { currentSnapshot.commitID }
}
