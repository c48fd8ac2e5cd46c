import Foundation
internal import Logging
internal import SetteeStorage
import Synchronization

/// How far a running compaction has got.
///
/// ```swift
/// try db.compact { progress in
///     print("\(Int(progress.fraction * 100))%")
///     return true   // false cancels
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct CompactionProgress: Sendable, Equatable {
    /// Bytes of the old file accounted for so far (an estimate: the documents copied, in
    /// proportion to the file).
    ///
    /// ```swift
    /// print(progress.bytesDone)
    /// ```
    public var bytesDone: UInt64
    /// The size of the old file when compaction began.
    ///
    /// ```swift
    /// print(progress.bytesTotal)
    /// ```
    public var bytesTotal: UInt64

    /// `bytesDone / bytesTotal`, from 0 to 1.
    ///
    /// ```swift
    /// progressBar.value = progress.fraction
    /// ```
    public var fraction: Double { bytesTotal == 0 ? 1 : min(1, Double(bytesDone) / Double(bytesTotal)) }
}

/// What a compaction did.
///
/// ```swift
/// let report = try db.compact()
/// print("\(report.sizeBefore) → \(report.sizeAfter) bytes")
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct CompactionReport: Sendable, Equatable {
    /// The database file's size before, in bytes.
    ///
    /// ```swift
    /// print(report.sizeBefore)
    /// ```
    public var sizeBefore: UInt64
    /// The database file's size after, in bytes.
    ///
    /// ```swift
    /// print(report.sizeAfter)
    /// ```
    public var sizeAfter: UInt64
    /// Documents in the compacted file (tombstones included).
    ///
    /// ```swift
    /// print(report.documents)
    /// ```
    public var documents: Int
    /// Blob files deleted because no kept revision references them.
    ///
    /// ```swift
    /// print(report.blobsDeleted)
    /// ```
    public var blobsDeleted: Int
}

extension Database {
    /// Rewrites the database file with only what is live, then swaps it in, and deletes blobs
    /// nothing references any more.
    ///
    /// Kept: every document's revision tree, pruned to
    /// ``DatabaseConfiguration/maxRevTreeDepth`` generations above each leaf (the paths from an
    /// open conflict's common ancestor to its leaves are kept whole); the body of every leaf (the
    /// current revision, each conflicting leaf, tombstones with their properties) and the body of
    /// the common ancestor of every open conflict, so a three-way merge stays possible however
    /// often the database is compacted. Dropped: every other body, and everything purged or
    /// expired (expired documents are purged first, with their changes announced). Blob files
    /// that no kept revision references are deleted once they were last written (or saved again
    /// with `saveBlob(_:)`) more than an hour before the compaction began, so a blob saved ahead
    /// of the document that will reference it is not collected in between.
    ///
    /// Compaction is online: reads and writes go on while it runs, on this database object and
    /// others; what is committed meanwhile is carried into the new file, and only the final swap
    /// holds writers back briefly. While others commit, compaction rests as long as it works, so
    /// they keep most of their rate; alone, it runs at full speed. A crash at any point leaves
    /// the database in its old or its new form, with every committed change.
    ///
    /// ```swift
    /// let report = try db.compact { progress in
    ///     print("\(Int(progress.fraction * 100))%")
    ///     return !userPressedCancel
    /// }
    /// print("\(report.sizeBefore) → \(report.sizeAfter) bytes")
    /// ```
    ///
    /// - Parameter progress: called from this thread as the work advances; return false to cancel
    ///   (the database is then unchanged and ``SetteeError/Code/cancelled`` is thrown).
    /// - Throws: ``SetteeError`` with code `cancelled`, `notOpen`, `corrupted` (a damaged
    ///   document stops the compaction and leaves the database as it was), `io`, or
    ///   `invalidParameter` when called inside `inBatch(_:)`.
    @discardableResult
    public func compact(progress: ((CompactionProgress) -> Bool)? = nil) throws -> CompactionReport {
        try checkOpen()
        return try core.compact(progress: progress)
    }
}

extension DatabaseCore {
    /// Documents per transaction of the new file: big enough that commits cost little, small
    /// enough that a transaction's buffer stays a few MiB.
    static let compactionBatch = 1_000
    /// Changed keys left over after which the final, writer-blocking step is taken.
    static let compactionFinalThreshold = 2_000

    func compact(progress: ((CompactionProgress) -> Bool)?) throws -> CompactionReport {
        compactionLock.lock()
        defer { compactionLock.unlock() }
        // Set only when the core closes (a reopened database gets a new core).
        if file.compactionCancelled.load(ordering: .relaxed) { throw SetteeError(.notOpen, "the database is closed") }
        // Expired documents are purged first, as the sweeper would, so observers hear of them.
        for core in file.allCores() where !core.dropped.load(ordering: .acquiring) {
            _ = try core.purgeExpiredDocuments(asOf: clock.now())
        }
        let started = Date()
        let before = store.fileSize
        let compaction = try translating { try store.beginCompaction() }
        var finished = false
        defer { if !finished { compaction.cancel() } }
        var copier = try translating { try CompactionCopier(core: self, compaction: compaction) }

        // Pacing: while other writers commit, compaction rests as long as it last worked, so that
        // on a machine with few cores (copy, writer and readers contending) they keep most of
        // their rate; alone, it runs flat out. Alone it copies well over a GB/s here, so resting
        // half the time still leaves it far above what it needs.
        var stepStarted = ContinuousClock.now
        var pendingSeen = 0
        func pace() {
            let pending = compaction.pendingChanges
            if pending != pendingSeen {
                let worked = ContinuousClock.now - stepStarted
                Thread.sleep(forTimeInterval: min(Double(worked.components.attoseconds) / 1e18 + Double(worked.components.seconds), 0.25))
            }
            pendingSeen = compaction.pendingChanges
            stepStarted = .now
        }

        func keepGoing(_ done: Int, of total: Int) throws {
            pace()
            if file.compactionCancelled.load(ordering: .relaxed) {
                throw SetteeError(.cancelled, "compaction stopped: the database is closing")
            }
            guard let progress else { return }
            let share = total == 0 ? compaction.sourceBytes
                : UInt64(Double(compaction.sourceBytes) * Double(done) / Double(total))
            if !progress(CompactionProgress(bytesDone: share, bytesTotal: compaction.sourceBytes)) {
                throw SetteeError(.cancelled, "compaction cancelled")
            }
        }

        // 1. Everything in the snapshot taken when compaction began.
        try translating {
            try compaction.readStart { source in
                try copier.copyAll(from: source, progress: keepGoing)
            }
        }
        // 2. What was committed meanwhile, without holding writers back, until little is left.
        var rounds = 0
        while compaction.pendingChanges > Self.compactionFinalThreshold && rounds < 8 {
            try keepGoing(copier.documents, of: copier.documents)
            try translating {
                try compaction.catchUp { source, changes in
                    try compaction.target.write { out in try copier.apply(changes, from: source, into: out) }
                }
            }
            pendingSeen = compaction.pendingChanges
            rounds += 1
        }
        try keepGoing(copier.documents, of: copier.documents)
        // The new file to disk while writers still run: under the lock only the last changes are left.
        try translating { try compaction.flush() }
        // 3. The rest, with writers held back, then the swap. Blob files are collected under the
        //    same lock, so no save can pick a blob that is about to be deleted.
        writeLock.lock()
        defer { writeLock.unlock() }
        guard file.batchTransaction == nil else {
            throw SetteeError(.invalidParameter, "compact() cannot run inside inBatch")
        }
        try translating {
            try compaction.finish { source, changes, out in
                try copier.apply(changes, from: source, into: out)
                for meta in copier.targetMetas {
                    try out.put(MetaKey.deadBytes, withUnsafeBytes(of: UInt64(0).littleEndian, Array.init), in: meta)
                }
            }
        }
        finished = true
        // The compaction is done (swapped in); a failed blob collection only leaves files for
        // the next one, and is reported, not thrown.
        var blobsDeleted = 0
        do {
            blobsDeleted = try collectBlobs(referenced: copier.blobDigests,
                                            olderThan: started.addingTimeInterval(-Self.unreferencedBlobRetention))
            file.background.withLock { $0.lastBlobCollectionFailure = nil }
        } catch {
            file.background.withLock { $0.lastBlobCollectionFailure = error }
            Self.logger.error("collecting unreferenced blobs after a compaction failed; the next compaction tries again",
                              metadata: ["database": "\(name)", "error": "\(error)"])
        }
        let documents = try translating {
            try store.read { tx in try file.allCores().reduce(0) { $0 + (try tx.count(in: $1.trees.byID)) } }
        }
        return CompactionReport(sizeBefore: before, sizeAfter: store.fileSize, documents: documents, blobsDeleted: blobsDeleted)
    }

    /// How long a blob file nothing references is kept after it was last written (or saved again
    /// with `saveBlob`): a blob stored ahead of the document that will reference it, as a
    /// replicator stores what it pulls before inserting the revisions, must survive a compaction
    /// that runs in between.
    static let unreferencedBlobRetention: TimeInterval = 3600

    /// Deletes blob files that no kept revision references and that were last written before
    /// `cutoff` (a blob stored for a save still on its way is newer). Caller holds the write lock.
    func collectBlobs(referenced: Set<String>, olderThan cutoff: Date) throws(SetteeError) -> Int {
        var keep = Set<String>()
        for d in referenced { if let f = BlobStore.fileName(forDigest: d) { keep.insert(f) } }
        return try blobs.removeUnreferenced(keeping: keep, modifiedBefore: cutoff)
    }

    /// Starts a compaction in the background when the dead space passes the configured share of
    /// the file. Caller holds the write lock (just committed).
    func compactIfWorthwhile(deadBytes: UInt64) {
        // The file is at least the minimum size, so below this no file size can qualify; most
        // commits stop here without asking the engine for the size.
        guard configuration.autoCompaction,
              Double(deadBytes) > configuration.autoCompactionThreshold * Double(configuration.autoCompactionMinimumSize)
        else { return }
        let size = store.fileSize
        guard size >= configuration.autoCompactionMinimumSize,
              Double(deadBytes) > configuration.autoCompactionThreshold * Double(size),
              !file.autoCompactionScheduled.exchange(true, ordering: .acquiringAndReleasing)
        else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            defer { file.autoCompactionScheduled.store(false, ordering: .releasing) }
            do {
                _ = try compact(progress: nil)
                file.background.withLock { $0.automaticCompactions += 1; $0.lastCompactionFailure = nil }
            } catch let e as SetteeError where e.code == .cancelled || e.code == .notOpen {
                // Stopped because the database closed: not a failure.
            } catch {
                let e = error as? SetteeError ?? SetteeError(.io, "\(error)")
                file.background.withLock { $0.lastCompactionFailure = e }
                Self.logger.error("automatic compaction failed; it is tried again after later writes",
                                  metadata: ["database": "\(name)", "error": "\(e)"])
            }
        }
    }
}

/// Copies the live content of one snapshot (and later the keys changed since) into the new file,
/// translating the value references that documents hold.
struct CompactionCopier {
    let core: DatabaseCore
    let compaction: StoreCompaction
    /// The collections' counters trees in the new file (their dead bytes start again at 0).
    let targetMetas: [Tree]
    /// The collections' by-ID trees, rewritten document by document.
    let documentTrees: [String]
    /// Every other tree (local documents, metadata, indexes added later) by name, copied as is.
    let plainTrees: [String]
    /// Digests referenced by the bodies kept.
    var blobDigests = Set<String>()
    var documents = 0

    init(core: DatabaseCore, compaction: StoreCompaction) throws {
        self.core = core
        self.compaction = compaction
        let names = try compaction.target.read { $0.treeNames }
        plainTrees = names.filter { !TreeName.isByID($0) }
        documentTrees = names.filter(TreeName.isByID)
        targetMetas = try compaction.target.read { tx in names.filter(TreeName.isMeta).compactMap { tx.tree(named: $0) } }
        guard documentTrees.contains(TreeName.byID), !targetMetas.isEmpty else {
            throw SetteeError(.corrupted, "compaction target lacks the database's trees")
        }
    }

    /// Copies every tree of `source`, the documents last; `progress` sees documents done / total.
    mutating func copyAll(from source: ReadTransaction, progress: (Int, Int) throws -> Void) throws {
        for name in plainTrees {
            guard let from = source.tree(named: name),
                  let to = try compaction.target.read({ $0.tree(named: name) }) else { continue }
            try Self.copyInBatches(from, source: source, into: compaction.target, batch: 8 * DatabaseCore.compactionBatch) { key, value, out in
                try out.put(key, value, in: to)
            }
        }
        // Every collection's documents, counted together for the progress.
        let byIDs = documentTrees.compactMap { source.tree(named: $0) }
        let total = try byIDs.reduce(0) { $0 + (try source.count(in: $1)) }
        var before = 0
        let target = compaction.target
        for byID in byIDs {
            guard let to = try target.read({ $0.tree(named: byID.name) }) else { continue }
            let done = before
            try Self.copyInBatches(byID, source: source, into: target, batch: DatabaseCore.compactionBatch,
                                   afterEach: { copied in try progress(done + copied, total) }) {
                key, value, out in try copyDocument(key: key, meta: value, from: source, into: out, to: to)
            }
            before += try source.count(in: byID)
        }
    }

    /// Walks `tree` in key order, `batch` entries per transaction of the new file, resuming each
    /// walk after the last key copied.
    private static func copyInBatches(_ tree: Tree, source: ReadTransaction, into target: Store, batch: Int,
                                      afterEach: (_ copied: Int) throws -> Void = { _ in },
                                      _ copy: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, WriteTransaction) throws -> Void) throws {
        var after: [UInt8]?
        var copied = 0
        while true {
            var n = 0
            var last: [UInt8]?
            try target.write { out in
                try source.forEach(in: tree, from: after) { key, value in
                    if let after, key.elementsEqual(after) { return true }
                    try copy(key, value, out)
                    n += 1
                    copied += 1
                    guard n < batch else {
                        last = Array(key)
                        return false
                    }
                    return true
                }
            }
            try afterEach(copied)
            guard let last else { return }
            after = last
        }
    }

    /// Copies one document: its pruned tree and the bodies compaction keeps.
    mutating func copyDocument(key: UnsafeRawBufferPointer, meta value: UnsafeRawBufferPointer,
                               from source: ReadTransaction, into out: WriteTransaction, to targetByID: Tree) throws {
        let (bodyRef, treeRef) = try DocMeta.refs(in: value)
        if treeRef == 0 {
            // One revision, implied by the metadata: only its body is copied.
            let meta = try DocMeta(decoding: value)
            let newBody = bodyRef == 0 ? 0 : try copyBody(bodyRef, attachments: meta.flags.contains(.hasAttachments),
                                                           from: source, into: out)
            try DocMeta.withRefs(replacedIn: value, bodyRef: newBody, treeRef: 0) { try out.put(key, $0, in: targetByID) }
            documents += 1
            return
        }
        let fast = try source.withValue(at: ValueRef(rawValue: treeRef)) { b in
            try RevTreeRewriter.rewrite(b, maxDepth: core.maxRevTreeDepth, currentBody: bodyRef) { old, attachments in
                try copyBody(old, attachments: attachments, from: source, into: out)
            }
        }
        var newBody: UInt64
        var encodedTree: [UInt8]
        if let fast {
            newBody = fast.currentBody
            encodedTree = fast.bytes
        } else {
            (encodedTree, newBody) = try rewriteTree(treeRef, from: source, into: out)
        }
        let newTree = try out.appendValue(encodedTree).rawValue
        try DocMeta.withRefs(replacedIn: value, bodyRef: newBody, treeRef: newTree) { try out.put(key, $0, in: targetByID) }
        documents += 1
    }

    /// The general rewrite: decode, prune, keep the leaves' and the conflict base's bodies.
    private mutating func rewriteTree(_ treeRef: UInt64, from source: ReadTransaction,
                                      into out: WriteTransaction) throws -> ([UInt8], UInt64) {
        var tree = try source.withValue(at: ValueRef(rawValue: treeRef)) { b throws(SetteeError) in try RevTree(decoding: b) }
        tree.prune(maxDepth: core.maxRevTreeDepth)
        var keep = tree.leafMask()
        if let base = tree.conflictBase() { keep[base] = true }
        for i in tree.revs.indices where tree.revs[i].hasBody {
            guard keep[i] else {
                tree.revs[i].hasBody = false
                tree.revs[i].bodyRef = 0
                continue
            }
            let old = tree.revs[i].bodyRef
            guard old != 0 else { continue }
            tree.revs[i].bodyRef = try copyBody(old, attachments: tree.revs[i].hasAttachments, from: source, into: out)
        }
        guard let w = tree.winner() else { throw SetteeError(.corrupted, "document without revisions") }
        return (tree.encoded(), tree.revs[w].hasBody ? tree.revs[w].bodyRef : 0)
    }

    /// Copies a kept body as stored, noting the blobs it references.
    private mutating func copyBody(_ old: UInt64, attachments: Bool, from source: ReadTransaction,
                                   into out: WriteTransaction) throws -> UInt64 {
        if attachments {
            try source.withValue(at: ValueRef(rawValue: old)) { b in
                var found: [String] = []
                PreparedBody.collect(try JSONParser.parse(b), into: &found)
                blobDigests.formUnion(found)
            }
        }
        return try out.appendValue(copying: ValueRef(rawValue: old), from: source).rawValue
    }

    /// Brings the keys changed since the last copy up to date from `source`.
    mutating func apply(_ changes: [ChangedKey], from source: ReadTransaction, into out: WriteTransaction) throws {
        for change in changes {
            guard let to = out.tree(named: change.tree.name) else { continue }
            let copied: Bool? = try change.key.withUnsafeBytes { key in
                if TreeName.isByID(change.tree.name) {
                    return try source.withValue(forKey: key, in: change.tree) { value in
                        try copyDocument(key: key, meta: value, from: source, into: out, to: to)
                        return true
                    }
                }
                return try source.withValue(forKey: key, in: change.tree) { (value: UnsafeRawBufferPointer) -> Bool in
                    try out.put(key, value, in: to)
                    return true
                }
            }
            if copied == nil { try out.delete(change.key, in: to) }
        }
    }
}

/// What a database's background work (automatic compaction, the expiry sweeper, blob collection)
/// last reported:
/// a failure there never reaches a caller, so it is kept here, and logged through swift-log
/// (label `settee`) as it happens.
///
/// ```swift
/// let status = db.backgroundStatus
/// if let failure = status.lastCompactionFailure ?? status.lastExpiryFailure { alert(failure.message) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct BackgroundStatus: Sendable, Equatable {
    /// Why the last automatic compaction failed; nil when none failed since the last one that
    /// finished. It is tried again after later writes.
    ///
    /// ```swift
    /// if let e = db.backgroundStatus.lastCompactionFailure { print(e) }
    /// ```
    public var lastCompactionFailure: SetteeError?
    /// Why the expiry sweeper's last pass failed; nil once a pass succeeds. It retries with
    /// growing delays (up to a minute).
    ///
    /// ```swift
    /// if let e = db.backgroundStatus.lastExpiryFailure { print(e) }
    /// ```
    public var lastExpiryFailure: SetteeError?
    /// Why deleting the blob files nothing references failed after the last compaction; nil when
    /// it succeeded. The files stay until a later compaction collects them.
    ///
    /// ```swift
    /// if let e = db.backgroundStatus.lastBlobCollectionFailure { print(e) }
    /// ```
    public var lastBlobCollectionFailure: SetteeError?
    /// Automatic compactions finished since the database was opened.
    ///
    /// ```swift
    /// print(db.backgroundStatus.automaticCompactions)
    /// ```
    public var automaticCompactions = 0
}

extension Database {
    /// What background work last reported (``BackgroundStatus``).
    ///
    /// ```swift
    /// print(db.backgroundStatus.lastExpiryFailure?.message ?? "expiry fine")
    /// ```
    public var backgroundStatus: BackgroundStatus {
        var status = core.file.background.withLock { $0 }
        status.lastExpiryFailure = core.file.expiry.sweeper.lastError.withLock { $0 }
        return status
    }
}
