import Glibc
import SetteeStorage

/// A database directory under simulated power loss: which file each of the engine's names
/// (`log`, `log.new`, `log.compact`, `log.compact.new`) refers to now, and which it would
/// refer to after a power failure.
///
/// The engine opens its files through ``open(_:)`` (its file opener), and its renames and
/// directory syncs reach ``rename(_:to:)`` and ``syncDirectory()`` through
/// `DirectoryInterposition` (registered by the initializer, removed by ``detach()``). Each file
/// is a ``FaultInjectingFile`` whose disk state (``SimulatedFileState``) belongs to the real
/// file's inode, so it follows the file across renames, and every file open on one inode shares
/// it.
///
/// The model of the namespace: creating a file, renaming one and deleting one change the
/// directory at once (the real directory changes too: the engine keeps reading through its
/// maps), but reach the disk only with the next successful directory sync. At the power failure
/// (``powerLoss(random:)``) each change made since the last directory sync has happened or not,
/// each chosen at random, in order (a change whose source no longer exists is skipped): more
/// than a file system with an ordered metadata journal allows. Then each name the disk keeps gets
/// its file's image after power loss, and the others are deleted.
///
/// Renames and directory syncs count as operations of the ``FaultPlan``: the power may fail at a
/// rename (which may then have reached the disk or not) or at a directory sync (whose changes may
/// or may not have); `failWriteAt` makes a rename fail with EIO without renaming, `failSyncAt` a
/// directory sync fail with EIO (its changes stay uncertain). Deletions (the engine's `unlink`) are
/// not interposed: they are noticed at the next operation on the directory.
///
/// Used by one thread at a time, like the files.
package final class SimulatedDirectory: DirectoryInterposer {
    /// The names the engine uses in a database directory (the lock file is not simulated).
    package static let names = ["log", "log.new", "log.compact", "log.compact.new"]

    package let path: String
    package let plan: FaultPlan
    private var seeds: SplitMix
    /// The state of each file known, by inode number.
    private var byInode: [UInt64: SimulatedFileState] = [:]
    /// What each name refers to now.
    package private(set) var current: [String: SimulatedFileState] = [:]
    /// What each name refers to on disk, as of the last successful directory sync (or the start).
    package private(set) var durable: [String: SimulatedFileState] = [:]

    enum Change {
        case create(String, SimulatedFileState)
        case rename(String, String)
        case remove(String)
    }

    /// Namespace changes since the last successful directory sync, in order.
    private var unsynced: [Change] = []

    /// Figures: renames made, directory syncs made.
    package private(set) var renames = 0
    package private(set) var directorySyncs = 0

    /// Takes the files in `path` as they are now as durable, and interposes on its renames and
    /// directory syncs until ``detach()``.
    package init(path: String, plan: FaultPlan, seed: UInt64) throws(StorageError) {
        self.path = path
        self.plan = plan
        seeds = SplitMix(seed: seed)
        for name in Self.names where exists(name) {
            let real = try PosixFile(path: path + "/" + name)
            defer { real.close() }
            let state = SimulatedFileState(durable: try FaultInjectingFile.contents(of: real), inode: FaultInjectingFile.inode(of: real))
            byInode[state.inode] = state
            current[name] = state
            durable[name] = state
        }
        DirectoryInterposition.set(self, for: path)
    }

    /// Gives the directory's renames and syncs back to the kernel.
    package func detach() {
        DirectoryInterposition.set(nil, for: path)
    }

    private func exists(_ name: String) -> Bool { access(path + "/" + name, F_OK) == 0 }

    private func inode(_ name: String) -> UInt64? {
        var st = stat()
        return lstat(path + "/" + name, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    private static func name(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// Notices files deleted since the last look (the engine's `unlink`s). Not after the power
    /// failed: what the process still does then (an abandoned compaction deletes its new log)
    /// never reaches the dead disk.
    private func reconcile() {
        guard !plan.crashed else { return }
        for (name, state) in current where inode(name) != state.inode {
            current[name] = nil
            unsynced.append(.remove(name))
        }
    }

    /// The engine's file opener: a ``FaultInjectingFile`` on the file's simulated state (a new
    /// one, all durable, for a file that exists but was never seen; an empty one for a file this
    /// call creates, whose name is not durable until the directory is synced).
    package func open(_ filePath: String) throws(StorageError) -> any StorageFile {
        reconcile()
        let name = Self.name(filePath)
        let existed = access(filePath, F_OK) == 0
        let real = try PosixFile(path: filePath)
        let ino = FaultInjectingFile.inode(of: real)
        let state: SimulatedFileState
        if existed, let known = byInode[ino], current[name] === known {
            state = known
        } else {
            state = SimulatedFileState(durable: existed ? try FaultInjectingFile.contents(of: real) : [], inode: ino)
            byInode[ino] = state
            if !existed { unsynced.append(.create(name, state)) }
            current[name] = state
        }
        return FaultInjectingFile(real: real, state: state, plan: plan, seed: seeds.next(), synced: { [weak self] in
            self?.synced(state)
        })
    }

    /// A file's sync succeeded: what it holds is durable; if it is the file durably named `log`,
    /// everything committed to it so far is.
    private func synced(_ state: SimulatedFileState) {
        if durable["log"] === state { plan.onDurable?() }
    }

    /// When set, the power fails at the rename of `log.compact` over `log` (0) or at the
    /// operation that many after it (1: the directory sync that makes it durable).
    package var crashAtSwap: Int?

    package func rename(_ from: String, to: String) throws(StorageError) {
        reconcile()
        if let offset = crashAtSwap, Self.name(from) == "log.compact", Self.name(to) == "log" {
            plan.crashAt = plan.operations + 1 + offset
        }
        let dying = try plan.begin(self)
        if !dying && plan.operations == plan.failWriteAt {
            plan.injected(in: self, write: true)
            throw StorageError(code: .io, reason: "injected rename failure", errno: EIO, operation: "rename")
        }
        if Glibc.rename(from, to) != 0 {
            throw StorageError(code: .io, reason: "rename failed", errno: errno, operation: "rename")
        }
        renames += 1
        let (a, b) = (Self.name(from), Self.name(to))
        current[b] = current[a]
        current[a] = nil
        unsynced.append(.rename(a, b))
        // The power fails as the rename is made: it may or may not reach the disk.
        if dying { throw plan.powerFails() }
    }

    package func syncDirectory() throws(StorageError) {
        reconcile()
        if try plan.begin(self) { throw plan.powerFails() }
        if plan.operations == plan.failSyncAt {
            plan.injected(in: self, write: false)
            throw StorageError(code: .io, reason: "injected directory fsync failure", errno: EIO, operation: "fsync(directory)")
        }
        directorySyncs += 1
        let before = durable["log"]
        durable = current
        unsynced = []
        // A log renamed into place whose contents were all synced: everything in it is durable.
        if let log = durable["log"], log !== before, log.isSynced { plan.onDurable?() }
    }

    /// What a power failure now leaves in the directory, put in place: the names chosen as
    /// described above, each holding its file's image after power loss. Returns the file
    /// durably named `log` afterwards (nil: none), so the caller can tell an old log from a new.
    @discardableResult
    package func powerLoss(random r: inout SplitMix) throws -> SimulatedFileState? {
        reconcile()
        var names = durable
        for change in unsynced where r.chance(50) {
            switch change {
            case .create(let name, let state):
                names[name] = state
            case .rename(let a, let b):
                guard let state = names[a] else { continue }
                names[b] = state
                names[a] = nil
            case .remove(let name):
                names[name] = nil
            }
        }
        for name in Self.names {
            let file = path + "/" + name
            if let state = names[name] {
                try writeImage(state.imageAfterPowerLoss(random: &r), to: file)
            } else {
                unlink(file)
            }
        }
        return names["log"]
    }

    /// Whether a rename onto `log` was made but not yet made durable by a directory sync.
    package var logRenamePending: Bool {
        unsynced.contains { if case .rename(_, "log") = $0 { return true } else { return false } }
    }
}
