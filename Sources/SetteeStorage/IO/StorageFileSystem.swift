/// What ``StorageFileSystem/attributes(of:)`` reports about a file or directory.
package struct StorageFileAttributes: Equatable, Sendable {
    /// The size in bytes.
    package var size: UInt64
    /// Whether it is a directory.
    package var isDirectory: Bool
    /// The last modification, in seconds and nanoseconds since 1970-01-01 UTC.
    package var modifiedSeconds: Int64
    package var modifiedNanoseconds: Int64

    package init(size: UInt64, isDirectory: Bool, modifiedSeconds: Int64, modifiedNanoseconds: Int64) {
        self.size = size
        self.isDirectory = isDirectory
        self.modifiedSeconds = modifiedSeconds
        self.modifiedNanoseconds = modifiedNanoseconds
    }
}

/// The file-system side of the I/O seam: creating and opening files, renaming and removing them,
/// making directory entries durable, listing, and the attributes a caller decides on. Together
/// with ``StorageFile`` (the bytes of one open file) it is every operation a database makes on
/// disk, so a test can stand a simulated disk in for the real one and cut its power at any of
/// them (the crash kit's simulated directory).
///
/// ``PosixFileSystem`` is the real one. Under a crash test, a simulated one is registered for a
/// database directory with ``DirectoryInterposition``; ``DirectoryInterposition/fileSystem(for:)``
/// gives whichever applies to a path.
///
/// ```swift
/// let fs = DirectoryInterposition.fileSystem(for: directory)
/// let file = try fs.createFile(directory + "/tmp/item")
/// try bytes.withUnsafeBytes { try file.write($0, at: 0) }
/// try file.sync()
/// file.close()
/// try fs.rename(directory + "/tmp/item", to: directory + "/item")
/// try fs.syncDirectory(directory)   // the new name survives a power failure from here on
/// ```
///
/// Every failure is thrown as ``StorageError`` (`io`, with the system call and `errno`); the
/// only outcomes reported as values are the ones a caller decides on (a name that does not
/// exist, a directory that already does).
///
/// Implementations must be safe to call from several threads, unless the whole database is
/// used from one thread at a time (the crash kit's simulation).
package protocol StorageFileSystem: AnyObject, Sendable {
    /// Opens the file at `path` for reading and writing, creating it when missing.
    func openFile(_ path: String) throws(StorageError) -> any StorageFile
    /// Creates the file at `path` and opens it for reading and writing; fails (`EEXIST`) when
    /// the name is taken. Its name is durable only once its directory is synced.
    func createFile(_ path: String) throws(StorageError) -> any StorageFile
    /// Opens the file at `path` for reading only; nil when it does not exist.
    func openFileForReading(_ path: String) throws(StorageError) -> (any StorageFile)?
    /// Creates the directory at `path`; false when it already exists. Its entry is durable only
    /// once its parent directory is synced.
    func makeDirectory(_ path: String) throws(StorageError) -> Bool
    /// Renames `from` to `to`, replacing `to`, atomically, as `rename(2)` does. The change is
    /// durable only once the directories are synced (the destination's, for a move).
    func rename(_ from: String, to: String) throws(StorageError)
    /// Deletes the file at `path`; false when it does not exist.
    func removeFile(_ path: String) throws(StorageError) -> Bool
    /// Makes the entries of the directory at `path` durable (`fsync` on the directory).
    func syncDirectory(_ path: String) throws(StorageError)
    /// The names in the directory at `path`, without `.` and `..`, in no particular order.
    func contentsOfDirectory(_ path: String) throws(StorageError) -> [String]
    /// The size, kind and modification time of `path`; nil when it does not exist.
    func attributes(of path: String) throws(StorageError) -> StorageFileAttributes?
    /// Sets the modification time of the file at `path` to now; false when it does not exist.
    func touch(_ path: String) throws(StorageError) -> Bool
}
