import Foundation
import SetteeStorage

/// What the disk holds of one file (one inode) under simulated power loss, shared by every
/// ``FaultInjectingFile`` open on it: `durable` survives a power loss for certain, `pending` holds
/// the writes and size changes made since the last successful sync, which may land whole, in part
/// (a prefix, or any subset of 512-byte sectors), out of order, or not at all.
package final class SimulatedFileState {
    /// What the file holds for certain after a power loss.
    package internal(set) var durable: [UInt8]
    /// Changes since the last successful sync.
    package internal(set) var pending: [FaultInjectingFile.Pending] = []
    /// Changes a failed sync may or may not have written. A later sync does not make them
    /// durable: like Linux after an `fdatasync` error, the kernel has forgotten them.
    package internal(set) var uncertain: [FaultInjectingFile.Pending] = []
    /// The real file's inode number, by which a ``SimulatedDirectory`` follows it across renames.
    package let inode: UInt64
    /// The directory that names it, relative to its ``SimulatedDirectory`` ("" for the database
    /// directory itself, "blobs" for a blob file); "" for a file opened on its own.
    package internal(set) var folder = ""

    package init(durable: [UInt8], inode: UInt64) {
        self.durable = durable
        self.inode = inode
    }

    /// Whether everything written is durable.
    package var isSynced: Bool { pending.isEmpty && uncertain.isEmpty }

    /// What the disk could hold after the power fails now: the durable image, plus each pending
    /// or uncertain change dropped, applied whole, cut to a prefix, or applied in a random subset
    /// of its 512-byte sectors, in a random order.
    package func imageAfterPowerLoss(random r: inout SplitMix) -> [UInt8] {
        var image = durable
        var changes = uncertain + pending
        r.shuffle(&changes)
        for change in changes {
            switch change {
            case .truncate:
                if r.next(below: 2) == 0 { FaultInjectingFile.apply(change, to: &image) }
            case .write(let offset, let bytes):
                switch r.next(below: 4) {
                case 0:
                    break
                case 1:
                    FaultInjectingFile.apply(change, to: &image)
                case 2:
                    let n = Int(r.next(below: UInt64(bytes.count) + 1))
                    FaultInjectingFile.apply(.write(offset: offset, bytes: Array(bytes[0..<n])), to: &image)
                default:
                    // Sectors are aligned to the file, not to the write.
                    var at = 0
                    while at < bytes.count {
                        let sectorEnd = Int((offset + UInt64(at)) / 512 + 1) * 512 - Int(offset)
                        let end = min(bytes.count, sectorEnd)
                        if r.next(below: 2) == 0 {
                            FaultInjectingFile.apply(.write(offset: offset + UInt64(at), bytes: Array(bytes[at..<end])), to: &image)
                        }
                        at = end
                    }
                }
            }
        }
        return image
    }
}

/// A ``StorageFile`` that keeps what is durable apart from what was only written, so a test can
/// cut the power at any operation and see what a disk could hold afterwards.
///
/// Every write also goes to a real file (the engine reads through its memory map, as from the
/// page cache); what the disk holds is kept in a ``SimulatedFileState``: the durable image and
/// the changes since the last sync. Opened on its own, a file has a state of its own; opened
/// through a ``SimulatedDirectory``, every file open on one inode shares its state, and the
/// directory knows which names would survive a power loss.
///
/// Used by one thread at a time, like every `StorageFile`.
package final class FaultInjectingFile: StorageFile {
    package enum Pending {
        case write(offset: UInt64, bytes: [UInt8])
        case truncate(size: UInt64)
    }

    /// What the disk holds of this file.
    package let state: SimulatedFileState
    /// What the file holds for certain after a power loss.
    package var durable: [UInt8] { state.durable }
    /// Changes since the last successful sync.
    package var pending: [Pending] { state.pending }
    /// Changes a failed sync may or may not have written.
    package var uncertain: [Pending] { state.uncertain }

    /// When the power fails and which operations fail; shared by every file of one database.
    package let plan: FaultPlan
    private var crashed: Bool { plan.crashed }

    private let real: PosixFile
    private var random: SplitMix
    /// Called after each successful sync (a durable write included).
    private let synced: () -> Void

    package var descriptor: Int32 { real.descriptor }

    /// Opens (creating when missing) the file at `path`; what it holds now is taken as durable.
    package convenience init(path: String, plan: FaultPlan, seed: UInt64) throws(StorageError) {
        let real = try PosixFile(path: path)
        let state = SimulatedFileState(durable: try Self.contents(of: real), inode: Self.inode(of: real))
        self.init(real: real, state: state, plan: plan, seed: seed, synced: { plan.onDurable?() })
    }

    /// A file open on `real`, whose disk state is `state` (shared with other files on the inode).
    package init(real: PosixFile, state: SimulatedFileState, plan: FaultPlan, seed: UInt64, synced: @escaping () -> Void) {
        self.real = real
        self.state = state
        self.plan = plan
        self.synced = synced
        random = SplitMix(seed: seed)
    }

    static func contents(of real: PosixFile) throws(StorageError) -> [UInt8] {
        let size = Int(try real.size())
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        let n = try real.read(into: buffer, at: 0)
        return Array(buffer[0..<n])
    }

    static func inode(of real: PosixFile) -> UInt64 {
        var st = stat()
        return fstat(real.descriptor, &st) == 0 ? UInt64(st.st_ino) : 0
    }

    private func begin(_ kind: FaultPlan.Kind) throws(StorageError) -> Bool { try plan.begin(state, kind) }

    private func powerFails() -> StorageError { plan.powerFails() }

    package func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        let dying = try begin(.write)
        if dying || plan.operations == plan.failWriteAt {
            // A prefix may have reached the page cache before the failure.
            let n = Int(random.next(below: UInt64(bytes.count) + 1))
            if n > 0 {
                let part = UnsafeRawBufferPointer(rebasing: bytes[0..<n])
                try real.write(part, at: offset)
                state.pending.append(.write(offset: offset, bytes: Array(part)))
            }
            if dying { throw powerFails() }
            plan.injected(in: state, write: true)
            throw StorageError(code: .io, reason: "injected write failure", errno: EIO, operation: "pwrite")
        }
        try real.write(bytes, at: offset)
        state.pending.append(.write(offset: offset, bytes: Array(bytes)))
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int {
        if crashed { throw StorageError(code: .io, reason: "the power is off", errno: EIO, operation: "simulated power loss") }
        return try real.read(into: buffer, at: offset)
    }

    package func sync() throws(StorageError) {
        if try begin(.sync) { throw powerFails() }
        if plan.operations == plan.failSyncAt {
            failSync()
            throw StorageError(code: .io, reason: "injected fdatasync failure", errno: EIO, operation: "fdatasync")
        }
        makeDurable()
    }

    /// As the build's call promises (``StoragePlatform/orderingSyncIsBarrierOnly``): a full sync
    /// on Linux (`fdatasync`); on Darwin, and in the portable build that stands in for it, a
    /// barrier (`F_BARRIERFSYNC`), modelled as making nothing durable. That is weaker than a
    /// barrier (which keeps later writes from landing before earlier ones), so a round that
    /// passes proves no commit counts on it; every durable write there syncs everything before
    /// it (``writeDurably(_:at:)``).
    package func syncForOrdering() throws(StorageError) {
        guard StoragePlatform.orderingSyncIsBarrierOnly else { return try sync() }
        if try begin(.sync) { throw powerFails() }
    }

    package func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        let dying = try begin(.durableWrite)
        if dying || plan.operations == plan.failWriteAt {
            let n = Int(random.next(below: UInt64(bytes.count) + 1))
            let part = UnsafeRawBufferPointer(rebasing: bytes[0..<n])
            if n > 0 { try real.write(part, at: offset) }
            state.pending.append(.write(offset: offset, bytes: Array(part)))
            if dying { throw powerFails() }
            plan.injected(in: state, write: true)
            throw StorageError(code: .io, reason: "injected write failure", errno: EIO, operation: "pwritev2")
        }
        try real.write(bytes, at: offset)
        if plan.operations == plan.failSyncAt {
            state.pending.append(.write(offset: offset, bytes: Array(bytes)))
            failSync()
            throw StorageError(code: .io, reason: "injected RWF_DSYNC failure", errno: EIO, operation: "pwritev2")
        }
        if StoragePlatform.durableWriteSyncsEverything {
            // A write then a full sync (F_FULLFSYNC, fsync, fdatasync): everything pending is
            // durable after it.
            state.pending.append(.write(offset: offset, bytes: Array(bytes)))
            makeDurable()
            return
        }
        // RWF_DSYNC makes this write durable, and only this one: other pending writes stay
        // pending (ext4 syncs the written range plus the metadata needed to read it).
        Self.apply(.write(offset: offset, bytes: Array(bytes)), to: &state.durable)
        synced()
    }

    package func size() throws(StorageError) -> UInt64 {
        if crashed { throw StorageError(code: .io, reason: "the power is off", errno: EIO, operation: "simulated power loss") }
        return try real.size()
    }

    package func truncate(to size: UInt64) throws(StorageError) {
        if try begin(.truncate) {
            if random.next(below: 2) == 0 { state.pending.append(.truncate(size: size)) }
            throw powerFails()
        }
        try real.truncate(to: size)
        state.pending.append(.truncate(size: size))
    }

    package func close() { real.close() }

    private func makeDurable() {
        for change in state.pending { Self.apply(change, to: &state.durable) }
        state.pending.removeAll()
        synced()
    }

    private func failSync() {
        plan.injected(in: state, write: false)
        state.uncertain += state.pending
        state.pending.removeAll()
    }

    /// What the disk could hold of this file after the power fails now (see
    /// ``SimulatedFileState/imageAfterPowerLoss(random:)``).
    package func imageAfterPowerLoss(random r: inout SplitMix) -> [UInt8] {
        state.imageAfterPowerLoss(random: &r)
    }

    static func apply(_ change: Pending, to image: inout [UInt8]) {
        switch change {
        case .truncate(let size):
            let size = Int(size)
            if size < image.count { image.removeSubrange(size...) } else { image += [UInt8](repeating: 0, count: size - image.count) }
        case .write(let offset, let bytes):
            let offset = Int(offset)
            if offset + bytes.count > image.count { image += [UInt8](repeating: 0, count: offset + bytes.count - image.count) }
            image.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        }
    }
}

/// When the power fails and which operations fail, counted over every file of one database (the
/// log, the file that becomes it while a database is created, a compaction's new log, blob files)
/// and, through a ``SimulatedDirectory``, its renames, deletions, directory syncs and
/// modification-time updates.
package final class FaultPlan {
    /// The operation (1-based: writes, syncs, durable writes, truncations, and a simulated
    /// directory's renames, deletions, directory syncs and touches counted together) at which the
    /// power fails; that operation may be partly done.
    package var crashAt: Int?
    /// The operation at which `fdatasync` (or a durable write's sync, or a directory sync) fails
    /// with EIO.
    package var failSyncAt: Int?
    /// The operation at which a write fails with EIO after writing a random prefix (a rename,
    /// deletion or touch: without being done).
    package var failWriteAt: Int?
    /// Called after each successful sync (durable write included) of a file opened on its own;
    /// through a ``SimulatedDirectory``, when what is durably named `log` has become durable.
    package var onDurable: (() -> Void)?

    package internal(set) var operations = 0
    package internal(set) var crashed = false
    package internal(set) var syncFailures = 0
    package internal(set) var writeFailures = 0
    /// Operations attempted after the power failed on the file (or directory) whose operation
    /// failed: the store must not touch it again.
    package internal(set) var operationsAfterCrash = 0
    /// Operations attempted after the power failed on other files: legitimate when the failure
    /// hit a compaction's new log (abandoned) and the store itself goes on, closing, say.
    package internal(set) var operationsElsewhereAfterCrash = 0
    /// Whether a write or sync has failed (without the power failing).
    package var injectedFailure: Bool { syncFailures + writeFailures > 0 }
    /// The files (their ``SimulatedFileState``s) and directories an injected failure hit.
    private var failedIn: Set<ObjectIdentifier> = []

    /// Counts an injected failure of a write (or rename) or a sync on `target`.
    package func injected(in target: AnyObject, write: Bool) {
        if write { writeFailures += 1 } else { syncFailures += 1 }
        failedIn.insert(ObjectIdentifier(target))
        failures.append((target, currentKind))
    }

    /// Whether an injected failure hit `target`.
    package func failed(in target: AnyObject?) -> Bool {
        target.map { failedIn.contains(ObjectIdentifier($0)) } ?? false
    }

    /// Every injected failure, in order: the target it hit (kept alive, so a caller can tell what
    /// it was even after its file is gone) and the operation.
    package private(set) var failures: [(target: AnyObject, kind: Kind)] = []
    /// The target and the kind of the operation the power failed at.
    package private(set) var crashedTarget: AnyObject?
    package private(set) var crashedKind: Kind?
    /// The kind of the operation begun last.
    private var currentKind = Kind.write

    package init(crashAt: Int? = nil) { self.crashAt = crashAt }

    /// What an operation is: for faults aimed at one kind of target (the failures `failSyncAt`
    /// and `failWriteAt` inject hit syncs and writes; renames, deletions and touches count as
    /// writes, a durable write as both) and for the figures.
    package enum Kind: String, CaseIterable, Sendable {
        case write, sync, durableWrite = "durable write", truncate, rename, remove, touch
        case directorySync = "directory sync"

        var isSync: Bool { self == .sync || self == .durableWrite || self == .directorySync }
        var isWrite: Bool { self == .write || self == .durableWrite || self == .rename || self == .remove || self == .touch }
    }

    /// Aims faults at the operations on the targets it accepts (a blob store's files and
    /// directories, say), counted apart: the power fails at the `crashAtAimed`-th of them, the
    /// `failSyncAtAimed`-th of their syncs fails, and the `failWriteAtAimed`-th of their writes.
    /// Each sets `crashAt`, `failSyncAt` or `failWriteAt` to that operation when it comes.
    package var aim: ((AnyObject) -> Bool)?
    package var crashAtAimed: Int?
    package var failSyncAtAimed: Int?
    package var failWriteAtAimed: Int?
    /// Operations on aimed targets so far: all, syncs, writes.
    private var aimedOperations = 0
    private var aimedSyncs = 0
    private var aimedWrites = 0

    /// Where the power failed: the file (its ``SimulatedFileState``) or directory whose
    /// operation it cut short.
    private var crashedIn: ObjectIdentifier?

    /// Counts an operation of `kind` about to be made on `target` (a file's state, a directory);
    /// throws once the power is off. Returns whether the power fails at this one (the caller may
    /// do part of it, then throws ``powerFails()``).
    package func begin(_ target: AnyObject, _ kind: Kind) throws(StorageError) -> Bool {
        if crashed {
            if ObjectIdentifier(target) == crashedIn { operationsAfterCrash += 1 } else { operationsElsewhereAfterCrash += 1 }
            throw StorageError(code: .io, reason: "the power is off", errno: EIO, operation: "simulated power loss")
        }
        operations += 1
        if let aim, aim(target) {
            aimedOperations += 1
            if aimedOperations == crashAtAimed { crashAt = operations }
            if kind.isSync {
                aimedSyncs += 1
                if aimedSyncs == failSyncAtAimed { failSyncAt = operations }
            }
            if kind.isWrite {
                aimedWrites += 1
                if aimedWrites == failWriteAtAimed { failWriteAt = operations }
            }
        }
        if operations == crashAt {
            crashedIn = ObjectIdentifier(target)
            crashedTarget = target
            crashedKind = kind
        }
        currentKind = kind
        return operations == crashAt
    }

    /// Turns the power off; the error the operation in progress fails with.
    package func powerFails() -> StorageError {
        crashed = true
        return StorageError(code: .io, reason: "simulated power loss", errno: EIO, operation: "simulated power loss")
    }
}
