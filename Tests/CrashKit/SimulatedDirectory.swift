import Foundation
import SetteeStorage

/// A database directory under simulated power loss, with the directories below it (the blob
/// store's `blobs/` and `blobs/tmp/`): which file each name refers to now, and which it would
/// refer to after a power failure.
///
/// It is the database's file system while it is attached: the engine opens its files through
/// ``open(_:)`` (its file opener), and every other file-system operation in the directory or
/// below it (the engine's renames and directory syncs; everything the blob store does) reaches it
/// through `DirectoryInterposition` (registered by the initializer, removed by ``detach()``).
/// Each file is a ``FaultInjectingFile`` whose disk state (``SimulatedFileState``) belongs to the
/// real file's inode, so it follows the file across renames, and every file open on one inode
/// shares it.
///
/// The model of the namespace, per directory: creating a file or a directory, renaming one and
/// deleting one change the directory at once (the real directory changes too: the engine keeps
/// reading through its maps), but reach the disk only with the next successful sync of that
/// directory. A move between directories is a deletion in the one and a creation in the other,
/// each durable with its own directory's sync. At the power failure (``powerLoss(random:)``) each
/// change made since a directory's last sync has happened or not, each chosen at random, in order
/// (a change whose source no longer exists is skipped): more than a file system with an ordered
/// metadata journal allows. Then each name the disk keeps gets its file's image after power loss,
/// a directory whose own entry is lost goes with everything in it, and the other names are
/// deleted.
///
/// The operations of the ``FaultPlan``, besides the files' writes and syncs: renames, deletions,
/// directory syncs and modification-time updates. The power may fail at a rename or a deletion
/// (which may then have reached the disk or not), at a directory sync (whose changes may or may
/// not have) or at a touch; `failWriteAt` makes a rename, deletion or touch fail with EIO without
/// doing it, `failSyncAt` a directory sync fail with EIO (its changes stay uncertain, whatever
/// later syncs do: like a file's writes after a failed `fdatasync`). Creating a
/// file or a directory is not an operation of the plan (it changes nothing until a sync); once the
/// power is off it fails like everything else. The engine's own deletions (its `unlink`s, and a
/// compaction's collection of blob files) do not come here: they are noticed at the next operation.
///
/// Used by one thread at a time, like the files (hence `@unchecked Sendable`).
package final class SimulatedDirectory: StorageFileSystem, @unchecked Sendable {
    /// The names the engine uses in a database directory (the lock file is not simulated).
    package static let names = ["log", "log.new", "log.compact", "log.compact.new"]

    package let path: String
    package let plan: FaultPlan
    private var seeds: SplitMix
    /// The state of each file known, by inode number.
    private var byInode: [UInt64: SimulatedFileState] = [:]

    /// One directory: the database directory (relative path "") or one below it.
    package final class Folder {
        package let relativePath: String
        /// What each name refers to now.
        var current: [String: Entry] = [:]
        /// What each name refers to on disk for certain, as of the last successful sync before
        /// any failed one (or the start).
        var durable: [String: Entry] = [:]
        /// Namespace changes from there on that a sync was asked for, in order: certain (a
        /// successful sync covered them) or not (a failed one did). Empty until a sync fails.
        var history: [(change: Change, certain: Bool)] = []
        /// Namespace changes since the last sync, in order.
        var unsynced: [Change] = []

        /// What each name refers to on disk for certain: `durable` and the certain changes.
        var certain: [String: Entry] {
            var names = durable
            for (change, sure) in history where sure { Self.apply(change, to: &names) }
            return names
        }

        /// Applies `change` to a directory's `names` (a rename whose source is not there does
        /// nothing).
        static func apply(_ change: Change, to names: inout [String: Entry]) {
            switch change {
            case .create(let name, let entry):
                names[name] = entry
            case .rename(let a, let b):
                guard let entry = names[a] else { return }
                names[b] = entry
                names[a] = nil
            case .remove(let name):
                names[name] = nil
            }
        }

        init(relativePath: String) { self.relativePath = relativePath }
    }

    enum Entry {
        case file(SimulatedFileState)
        case folder(Folder)

        var file: SimulatedFileState? { if case .file(let s) = self { return s } else { return nil } }
        var folder: Folder? { if case .folder(let f) = self { return f } else { return nil } }
    }

    enum Change {
        case create(String, Entry)
        case rename(String, String)
        case remove(String)
    }

    /// Every directory known, by relative path.
    private var folders: [String: Folder] = [:]
    private var root: Folder { folders[""]! }

    /// What each of the engine's names refers to now.
    package var current: [String: SimulatedFileState] { root.current.compactMapValues(\.file) }
    /// What each of the engine's names refers to on disk, as of the last successful directory
    /// sync (or the start).
    package var durable: [String: SimulatedFileState] { root.certain.compactMapValues(\.file) }

    /// Figures: renames made, directory syncs made (in every directory).
    package private(set) var renames = 0
    package private(set) var directorySyncs = 0

    /// Takes the files in `path` and the directories below it as they are now as durable, and
    /// stands in for the file system there until ``detach()``.
    package init(path: String, plan: FaultPlan, seed: UInt64) throws(StorageError) {
        self.path = Self.normalized(path)
        self.plan = plan
        seeds = SplitMix(seed: seed)
        let top = Folder(relativePath: "")
        folders[""] = top
        for name in Self.names where exists(name) {
            let state = try adopt(self.path + "/" + name)
            top.current[name] = .file(state)
            top.durable[name] = .file(state)
        }
        try scanSubdirectories(of: top)
        DirectoryInterposition.set(self, for: self.path)
    }

    /// Gives the directory's file-system operations back to the kernel.
    package func detach() {
        DirectoryInterposition.set(nil, for: path)
    }

    // MARK: - Paths and what exists

    private func exists(_ name: String) -> Bool { access(path + "/" + name, F_OK) == 0 }

    private static func normalized(_ p: String) -> String {
        var out = ""
        for c in p where !(c == "/" && out.hasSuffix("/")) { out.append(c) }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out
    }

    private func fullPath(_ folder: Folder, _ name: String? = nil) -> String {
        var p = folder.relativePath.isEmpty ? path : path + "/" + folder.relativePath
        if let name { p += "/" + name }
        return p
    }

    private func relative(_ p: String) throws(StorageError) -> String {
        let n = Self.normalized(p)
        if n == path { return "" }
        guard n.hasPrefix(path + "/") else {
            throw StorageError(code: .invalidArgument, reason: "\(p) is outside the simulated directory \(path)")
        }
        return String(n.dropFirst(path.count + 1))
    }

    /// The known directory holding `p`, and the name in it.
    private func locate(_ p: String) throws(StorageError) -> (Folder, String) {
        let rel = try relative(p)
        let parent: String, name: String
        if let slash = rel.lastIndex(of: "/") {
            (parent, name) = (String(rel[..<slash]), String(rel[rel.index(after: slash)...]))
        } else {
            (parent, name) = ("", rel)
        }
        guard let folder = folders[parent], !name.isEmpty else {
            throw StorageError(code: .io, reason: "no such directory in the simulated directory", errno: ENOENT, operation: "simulated path")
        }
        return (folder, name)
    }

    private func inode(_ p: String) -> UInt64? {
        var st = stat()
        return lstat(p, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    private func isDirectory(_ p: String) -> Bool {
        var st = stat()
        return lstat(p, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    /// A state, all durable, for the existing file at `p`.
    private func adopt(_ p: String) throws(StorageError) -> SimulatedFileState {
        let real = try PosixFile(path: p)
        defer { real.close() }
        let state = SimulatedFileState(durable: try FaultInjectingFile.contents(of: real), inode: FaultInjectingFile.inode(of: real))
        byInode[state.inode] = state
        return state
    }

    /// Takes the directories below `folder`, and every file in them, as durable.
    private func scanSubdirectories(of folder: Folder) throws(StorageError) {
        for name in try PosixFileSystem.shared.contentsOfDirectory(fullPath(folder)).sorted() {
            let p = fullPath(folder, name)
            if isDirectory(p) {
                let sub = Folder(relativePath: folder.relativePath.isEmpty ? name : folder.relativePath + "/" + name)
                folders[sub.relativePath] = sub
                folder.current[name] = .folder(sub)
                folder.durable[name] = .folder(sub)
                try scanSubdirectories(of: sub)
            } else if !folder.relativePath.isEmpty {
                let state = try adopt(p)
                state.folder = folder.relativePath
                folder.current[name] = .file(state)
                folder.durable[name] = .file(state)
            }
        }
    }

    /// Notices files deleted since the last look (the engine's `unlink`s). Not after the power
    /// failed: what the process still does then (an abandoned compaction deletes its new log)
    /// never reaches the dead disk.
    private func reconcile() {
        guard !plan.crashed else { return }
        for folder in folders.values {
            for (name, entry) in folder.current {
                guard let state = entry.file, inode(fullPath(folder, name)) != state.inode else { continue }
                folder.current[name] = nil
                folder.unsynced.append(.remove(name))
            }
        }
    }

    /// Fails, as everything does, once the power is off; not an operation of the plan.
    private func refuseIfOff(_ target: AnyObject) throws(StorageError) {
        if plan.crashed { _ = try plan.begin(target, .write) }
    }

    private func newFile(real: PosixFile, state: SimulatedFileState) -> FaultInjectingFile {
        FaultInjectingFile(real: real, state: state, plan: plan, seed: seeds.next(), synced: { [weak self] in
            self?.synced(state)
        })
    }

    // MARK: - Files

    /// The engine's file opener: a ``FaultInjectingFile`` on the file's simulated state (a new
    /// one, all durable, for a file that exists but was never seen; an empty one for a file this
    /// call creates, whose name is not durable until the directory is synced).
    package func open(_ filePath: String) throws(StorageError) -> any StorageFile {
        reconcile()
        let (folder, name) = try locate(filePath)
        let existed = access(filePath, F_OK) == 0
        let real = try PosixFile(path: filePath)
        let ino = FaultInjectingFile.inode(of: real)
        let state: SimulatedFileState
        if existed, let known = byInode[ino], folder.current[name]?.file === known {
            state = known
        } else {
            state = SimulatedFileState(durable: existed ? try FaultInjectingFile.contents(of: real) : [], inode: ino)
            state.folder = folder.relativePath
            byInode[ino] = state
            if !existed { folder.unsynced.append(.create(name, .file(state))) }
            folder.current[name] = .file(state)
        }
        return newFile(real: real, state: state)
    }

    package func openFile(_ filePath: String) throws(StorageError) -> any StorageFile {
        try open(filePath)
    }

    package func createFile(_ filePath: String) throws(StorageError) -> any StorageFile {
        reconcile()
        let (folder, name) = try locate(filePath)
        try refuseIfOff(folder)
        let real = try PosixFile(path: filePath, mode: .createNew)
        let state = SimulatedFileState(durable: [], inode: FaultInjectingFile.inode(of: real))
        state.folder = folder.relativePath
        byInode[state.inode] = state
        folder.current[name] = .file(state)
        folder.unsynced.append(.create(name, .file(state)))
        return newFile(real: real, state: state)
    }

    package func openFileForReading(_ filePath: String) throws(StorageError) -> (any StorageFile)? {
        reconcile()
        let (folder, name) = try locate(filePath)
        try refuseIfOff(folder)
        guard let real = try PosixFileSystem.shared.openFileForReading(filePath) as? PosixFile else { return nil }
        // Reads go to the real file; the state only matters to writes, which a file opened for
        // reading cannot make.
        let state = folder.current[name]?.file ?? SimulatedFileState(durable: [], inode: FaultInjectingFile.inode(of: real))
        return newFile(real: real, state: state)
    }

    package func touch(_ filePath: String) throws(StorageError) -> Bool {
        reconcile()
        let (folder, name) = try locate(filePath)
        guard access(filePath, F_OK) == 0 else {
            try refuseIfOff(folder)
            return false
        }
        let target: AnyObject = folder.current[name]?.file ?? folder
        // The power fails as the time is set: it may or may not reach the disk (nothing here
        // depends on it).
        if try plan.begin(target, .touch) { throw plan.powerFails() }
        if plan.operations == plan.failWriteAt {
            plan.injected(in: target, write: true)
            throw StorageError(code: .io, reason: "injected utimensat failure", errno: EIO, operation: "utimensat")
        }
        return try PosixFileSystem.shared.touch(filePath)
    }

    package func attributes(of filePath: String) throws(StorageError) -> StorageFileAttributes? {
        reconcile()
        let (folder, _) = try locate(filePath)
        try refuseIfOff(folder)
        return try PosixFileSystem.shared.attributes(of: filePath)
    }

    // MARK: - Directories

    package func makeDirectory(_ dirPath: String) throws(StorageError) -> Bool {
        reconcile()
        let (parent, name) = try locate(dirPath)
        try refuseIfOff(parent)
        if access(dirPath, F_OK) == 0 {
            guard isDirectory(dirPath) else { throw StorageError(code: .io, reason: "not a directory", errno: EEXIST, operation: "mkdir") }
            return false
        }
        guard try PosixFileSystem.shared.makeDirectory(dirPath) else { return false }
        let folder = Folder(relativePath: parent.relativePath.isEmpty ? name : parent.relativePath + "/" + name)
        folders[folder.relativePath] = folder
        parent.current[name] = .folder(folder)
        parent.unsynced.append(.create(name, .folder(folder)))
        return true
    }

    package func contentsOfDirectory(_ dirPath: String) throws(StorageError) -> [String] {
        reconcile()
        guard let folder = folders[try relative(dirPath)] else {
            throw StorageError(code: .io, reason: "no such directory in the simulated directory", errno: ENOENT, operation: "opendir")
        }
        try refuseIfOff(folder)
        return try PosixFileSystem.shared.contentsOfDirectory(dirPath)
    }

    /// When set, the power fails at the rename of `log.compact` over `log` (0) or at the
    /// operation that many after it (1: the directory sync that makes it durable).
    package var crashAtSwap: Int?

    package func rename(_ from: String, to: String) throws(StorageError) {
        reconcile()
        let (source, a) = try locate(from)
        let (destination, b) = try locate(to)
        if let offset = crashAtSwap, source === root, destination === root, a == "log.compact", b == "log" {
            plan.crashAt = plan.operations + 1 + offset
        }
        let dying = try plan.begin(destination, .rename)
        if !dying && plan.operations == plan.failWriteAt {
            plan.injected(in: destination, write: true)
            throw StorageError(code: .io, reason: "injected rename failure", errno: EIO, operation: "rename")
        }
        if renameFile(from, to) != 0 {
            throw StorageError(code: .io, reason: "rename failed", errno: errno, operation: "rename")
        }
        renames += 1
        let entry = source.current[a]
        source.current[a] = nil
        destination.current[b] = entry
        if source === destination {
            source.unsynced.append(.rename(a, b))
        } else {
            source.unsynced.append(.remove(a))
            if let entry { destination.unsynced.append(.create(b, entry)) }
        }
        entry?.file?.folder = destination.relativePath
        // The power fails as the rename is made: it may or may not reach the disk.
        if dying { throw plan.powerFails() }
    }

    package func removeFile(_ filePath: String) throws(StorageError) -> Bool {
        reconcile()
        let (folder, name) = try locate(filePath)
        guard inode(filePath) != nil else {
            try refuseIfOff(folder)
            return false
        }
        let dying = try plan.begin(folder, .remove)
        if !dying && plan.operations == plan.failWriteAt {
            plan.injected(in: folder, write: true)
            throw StorageError(code: .io, reason: "injected unlink failure", errno: EIO, operation: "unlink")
        }
        guard try PosixFileSystem.shared.removeFile(filePath) else { return false }
        if folder.current.removeValue(forKey: name) != nil { folder.unsynced.append(.remove(name)) }
        // The power fails as the file is deleted: the deletion may or may not reach the disk.
        if dying { throw plan.powerFails() }
        return true
    }

    package func syncDirectory(_ dirPath: String) throws(StorageError) {
        reconcile()
        guard let folder = folders[try relative(dirPath)] else {
            throw StorageError(code: .io, reason: "no such directory in the simulated directory", errno: ENOENT, operation: "open(directory)")
        }
        if try plan.begin(folder, .directorySync) { throw plan.powerFails() }
        if plan.operations == plan.failSyncAt {
            plan.injected(in: folder, write: false)
            // Like a file's after a failed `fdatasync`: the changes may or may not be on disk,
            // and no later sync settles it.
            folder.history += folder.unsynced.map { ($0, false) }
            folder.unsynced = []
            throw StorageError(code: .io, reason: "injected directory fsync failure", errno: EIO, operation: "fsync(directory)")
        }
        directorySyncs += 1
        let before = durable["log"]
        if folder.history.isEmpty {
            folder.durable = folder.current
        } else {
            folder.history += folder.unsynced.map { ($0, true) }
        }
        folder.unsynced = []
        // A log renamed into place whose contents were all synced: everything in it is durable.
        if folder === root, let log = durable["log"], log !== before, log.isSynced { plan.onDurable?() }
    }

    /// A file's sync succeeded: what it holds is durable; if it is the file durably named `log`,
    /// everything committed to it so far is.
    private func synced(_ state: SimulatedFileState) {
        if durable["log"] === state { plan.onDurable?() }
    }

    // MARK: - Power loss

    /// What a power failure now leaves in the directory, put in place: the names chosen as
    /// described above, each holding its file's image after power loss. Returns the file
    /// durably named `log` afterwards (nil: none), so the caller can tell an old log from a new.
    @discardableResult
    package func powerLoss(random r: inout SplitMix) throws -> SimulatedFileState? {
        reconcile()
        // The database directory first, in the order its engine-only form always drew.
        let names = survivors(of: root, random: &r)
        for name in Self.names {
            let file = path + "/" + name
            if let state = names[name]?.file {
                try writeImage(state.imageAfterPowerLoss(random: &r), to: file)
            } else {
                unlink(file)
            }
        }
        try settleSubdirectories(of: root, keeping: names, random: &r)
        return names["log"]?.file
    }

    /// What `folder` names on disk after the power fails: its durable names, then in order each
    /// change a sync covered, certain ones always and the others at random, then at random each
    /// change since the last sync.
    private func survivors(of folder: Folder, random r: inout SplitMix) -> [String: Entry] {
        var names = folder.durable
        for (change, certain) in folder.history where certain || r.chance(50) { Folder.apply(change, to: &names) }
        for change in folder.unsynced where r.chance(50) { Folder.apply(change, to: &names) }
        return names
    }

    /// Puts the directories below `folder` as the disk keeps them (`names`: what `folder` keeps):
    /// one whose entry is lost is deleted with all it holds; in one kept, each file kept gets its
    /// image after power loss and everything else is deleted.
    private func settleSubdirectories(of folder: Folder, keeping names: [String: Entry], random r: inout SplitMix) throws {
        for name in try PosixFileSystem.shared.contentsOfDirectory(fullPath(folder)).sorted() where isDirectory(fullPath(folder, name)) {
            if names[name]?.folder == nil { try FileManager.default.removeItem(atPath: fullPath(folder, name)) }
        }
        for (_, entry) in names.sorted(by: { $0.key < $1.key }) {
            guard let sub = entry.folder else { continue }
            let kept = survivors(of: sub, random: &r)
            let dir = fullPath(sub)
            if !isDirectory(dir) { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false) }
            for real in try PosixFileSystem.shared.contentsOfDirectory(dir) where kept[real] == nil {
                try FileManager.default.removeItem(atPath: dir + "/" + real)
            }
            for (fileName, e) in kept.sorted(by: { $0.key < $1.key }) {
                if let state = e.file { try writeImage(state.imageAfterPowerLoss(random: &r), to: dir + "/" + fileName) }
            }
            try settleSubdirectories(of: sub, keeping: kept, random: &r)
        }
    }

    /// Whether a rename onto `log` was made but not yet made durable by a directory sync (none
    /// was made since, or the one made failed).
    package var logRenamePending: Bool {
        func ontoLog(_ c: Change) -> Bool { if case .rename(_, "log") = c { return true } else { return false } }
        return root.unsynced.contains(where: ontoLog) || root.history.contains { !$0.certain && ontoLog($0.change) }
    }

    // MARK: - Where faults hit

    /// Whether `target` (a file's state or a directory, as a ``FaultPlan`` sees it) lies at or
    /// below `relativePath`: for ``FaultPlan/aim``.
    package func isTarget(_ target: AnyObject, under relativePath: String) -> Bool {
        let at: String
        if let folder = target as? Folder {
            at = folder.relativePath
        } else if let state = target as? SimulatedFileState {
            at = state.folder
        } else {
            return false
        }
        return at == relativePath || at.hasPrefix(relativePath + "/")
    }

    /// Whether an injected failure hit an operation on a file or directory at or below
    /// `relativePath`.
    package func failureInjected(under relativePath: String) -> Bool {
        !injectedFailures(under: relativePath).isEmpty
    }

    /// The operations at or below `relativePath` that injected failures hit, in order.
    package func injectedFailures(under relativePath: String) -> [FaultPlan.Kind] {
        plan.failures.filter { isTarget($0.target, under: relativePath) }.map(\.kind)
    }

    /// Whether an injected failure hit anything other than what lies at or below `relativePath`.
    package func failureInjected(outside relativePath: String) -> Bool {
        plan.failures.contains { !isTarget($0.target, under: relativePath) }
    }

    /// The operation the power failed at, if it was on a file or directory at or below
    /// `relativePath`.
    package func powerFailure(under relativePath: String) -> FaultPlan.Kind? {
        guard let target = plan.crashedTarget, isTarget(target, under: relativePath) else { return nil }
        return plan.crashedKind
    }
}

/// `rename(2)`, under a name no method shadows.
private func renameFile(_ from: String, _ to: String) -> Int32 { rename(from, to) }
