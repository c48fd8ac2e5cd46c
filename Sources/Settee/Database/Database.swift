import Foundation
package import SetteeStorage
import Synchronization

/// A Settee database: documents with revision trees, conflicts, blobs and change feeds, in one
/// directory (`<name>.settee/`).
///
/// ```swift
/// let db = try Database(name: "todo", config: DatabaseConfiguration(directory: "/tmp/dbs"))
/// let doc = MutableDocument(id: "task-1", data: ["title": "Buy milk", "done": false])
/// try db.saveDocument(doc)
/// print(try db.document(withID: "task-1")?.string(forKey: "title") ?? "")
/// try db.close()
/// ```
///
/// - Note: Thread-safe. Reads never block and see a consistent snapshot; writes from several
///   threads are serialized. Several `Database` objects may be open on the same database in one
///   process: they share the files, writes and notifications. A second *process* gets
///   ``SetteeError/Code/busy``. While open, a database runs one background thread, its expiry
///   sweeper, which purges expired documents (`setDocumentExpiration(withID:expiration:)`)
///   and old tombstones (``DatabaseConfiguration/tombstoneMaxAge``) in short transactions of
///   its own; it sleeps until the next due time and stops when the last object on the files
///   closes.
public final class Database: Sendable, CustomStringConvertible {
    /// The database name.
    ///
    /// ```swift
    /// print(db.name)   // "todo"
    /// ```
    public let name: String
    /// The database directory (`<directory>/<name>.settee`).
    ///
    /// ```swift
    /// print(db.path)
    /// ```
    public let path: String
    /// The configuration it was opened with.
    ///
    /// ```swift
    /// print(db.config.maxRevTreeDepth)
    /// ```
    public let config: DatabaseConfiguration

    let core: DatabaseCore
    private let closed = Atomic<Bool>(false)
    /// The database a named collection's object stands in for: its ``Collection`` reads and
    /// writes through an object of this class over the collection's core, open as long as
    /// `owner` is and the collection exists; nil for a database opened by name.
    let owner: Database?

    /// The object a named collection reads and writes through (see ``owner``).
    init(collection core: DatabaseCore, of owner: Database) {
        self.name = owner.name
        self.path = owner.path
        self.config = owner.config
        self.core = core
        self.owner = owner
    }

    /// Opens the database `name` in `config.directory`, creating it if it does not exist.
    ///
    /// ```swift
    /// let db = try Database(name: "todo")
    /// ```
    ///
    /// Opening a database this process already has open gives another object over the same
    /// files; its configuration must then be the same (the directory aside).
    ///
    /// - Throws: ``SetteeError`` with ``SetteeError/Code/invalidParameter`` for a bad name or a
    ///   configuration other than the one the database is already open with in this process,
    ///   ``SetteeError/Code/busy`` when another process has it open, ``SetteeError/Code/corrupted``
    ///   or ``SetteeError/Code/versionMismatch`` when its files cannot be used, ``SetteeError/Code/io``.
    public convenience init(name: String, config: DatabaseConfiguration = DatabaseConfiguration()) throws {
        try self.init(name: name, config: config, openFile: nil)
    }

    /// Opens the database with its engine's files opened by `openFile` (the crash harness's
    /// fault-injecting file; nil opens them normally) and expiration times read from `clock`
    /// (tests; nil: the wall clock). Both are ignored when the database is already open in this
    /// process.
    package init(name: String, config: DatabaseConfiguration,
                 openFile: ((String) throws(StorageError) -> any StorageFile)?,
                 clock: (any ExpirationClock)? = nil) throws {
        _ = try Self.path(name: name, directory: config.directory)
        if let age = config.tombstoneMaxAge, !(age.isFinite && age >= 0) {
            throw SetteeError(.invalidParameter, "tombstoneMaxAge must be a finite number of seconds, 0 or more")
        }
        do {
            try FileManager.default.createDirectory(atPath: config.directory, withIntermediateDirectories: true)
        } catch {
            throw SetteeError(.io, "cannot create the directory for databases")
        }
        // One spelling per directory (`a/./b`, `a/b/`, a symbolic link), so that two opens of the
        // same files in this process find each other instead of one locking the other out.
        guard let resolved = realpath(config.directory, nil) else {
            throw SetteeError(.io, "cannot resolve the directory for databases")
        }
        let path = try Self.path(name: name, directory: String(cString: resolved))
        free(resolved)
        self.name = name
        self.path = path
        self.config = config
        self.core = try DatabaseCore.open(name: name, path: path, configuration: config, openFile: openFile, clock: clock)
        self.owner = nil
    }

    static func path(name: String, directory: String) throws(SetteeError) -> String {
        guard !name.isEmpty, name.utf8.count <= 200, !name.hasPrefix("."), !name.contains("/"), !name.contains("\0") else {
            throw SetteeError(.invalidParameter, "database names are 1 to 200 bytes, without '/' or a leading '.'")
        }
        return (directory as NSString).appendingPathComponent(name + ".settee")
    }

    deinit {
        if owner == nil && !closed.load(ordering: .acquiring) { try? core.release() }
    }

    /// Closes this object; the files close when the last `Database` open on them does. Later
    /// calls throw ``SetteeError/Code/notOpen``; closing twice does nothing.
    ///
    /// ```swift
    /// try db.close()
    /// ```
    public func close() throws {
        guard closed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged,
              owner == nil else { return }
        try core.release()
    }

    /// Closes the database and deletes its files.
    ///
    /// ```swift
    /// try db.delete()
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/busy`` when another `Database` object still has it open.
    public func delete() throws {
        try close()
        try Self.delete(withName: name, inDirectory: config.directory)
    }

    /// Whether a database called `name` exists in `directory`.
    ///
    /// ```swift
    /// if !Database.exists(withName: "todo", inDirectory: dir) { seed() }
    /// ```
    public static func exists(withName name: String, inDirectory directory: String? = nil) -> Bool {
        guard let p = try? path(name: name, directory: directory ?? FileManager.default.currentDirectoryPath) else { return false }
        return FileManager.default.fileExists(atPath: p + "/log")
    }

    /// Deletes the database called `name` in `directory` (doing nothing if there is none).
    ///
    /// ```swift
    /// try Database.delete(withName: "todo", inDirectory: dir)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/busy`` when it is open in this process or another.
    public static func delete(withName name: String, inDirectory directory: String? = nil) throws {
        let p = try path(name: name, directory: directory ?? FileManager.default.currentDirectoryPath)
        guard !DatabaseCore.isOpen(path: p) else { throw SetteeError(.busy, "the database is open; close it first") }
        guard FileManager.default.fileExists(atPath: p) else { return }
        // Taking the engine's lock proves no other process has it open while we delete.
        let lock: LockFile?
        do {
            lock = try LockFile.takeExisting(inDirectory: p)
        } catch {
            if error.code == .locked { throw SetteeError(.busy, "the database is open in another process") }
            throw SetteeError(.io, "cannot lock the database to delete it: \(error.reason)")
        }
        defer { lock?.release() }
        do {
            try FileManager.default.removeItem(atPath: p)
        } catch {
            throw SetteeError(.io, "cannot delete the database files")
        }
    }

    func checkOpen() throws(SetteeError) {
        if closed.load(ordering: .acquiring) { throw SetteeError(.notOpen, "the database is closed") }
        if let owner {
            try owner.checkOpen()
            if core.dropped.load(ordering: .acquiring) { throw DatabaseCore.droppedError(core) }
        }
    }

    /// The number of documents, tombstones not counted.
    ///
    /// ```swift
    /// print(try db.count)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen`` once closed; ``SetteeError/Code/corrupted`` when the
    ///   stored count is damaged; ``SetteeError/Code/io``.
    public var count: UInt64 {
        get throws {
            try checkOpen()
            if let batch = try core.batchOnThisThread() { return batch.liveCount }
            return try core.read { tx in try core.counter(tx, MetaKey.liveCount) }
        }
    }

    /// The sequence of the last change (0 for an empty database). Sequences strictly increase;
    /// every save, deletion and purge takes one.
    ///
    /// ```swift
    /// let since = try db.lastSequence
    /// ```
    ///
    /// - Throws: as ``count``.
    public var lastSequence: UInt64 {
        get throws {
            try checkOpen()
            if let batch = try core.batchOnThisThread() { return batch.lastSequence }
            return try core.read { tx in try core.counter(tx, MetaKey.lastSequence) }
        }
    }


    /// A unique, stable identifier of this database (for replication checkpoints), as 32
    /// lowercase hex digits.
    ///
    /// ```swift
    /// print(db.uuid)
    /// ```
    public var uuid: String { SHA1.hex(core.uuid) }

    /// The name, for logs: `Database(todo)`.
    ///
    /// ```swift
    /// print(db)   // Database(todo)
    /// ```
    public var description: String { "Database(\(name))" }
}
