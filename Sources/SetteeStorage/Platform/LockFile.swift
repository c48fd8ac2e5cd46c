#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif

/// The database's exclusive lock: `flock` on `<directory>/lock`. A second `Store` on the same
/// directory, in this process or another, gets ``StorageError/Code/locked``.
package final class LockFile {
    private let fd: Int32

    init(path: String) throws(StorageError) {
        fd = try System.call("open(lock)") { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        try Self.take(fd)
    }

    private init(descriptor: Int32) { fd = descriptor }

    /// Takes the lock of the database directory `directory` when its lock file exists, to prove
    /// that no process has the database open (before deleting it, say); nil when there is no
    /// lock file. Release it with ``release()``.
    ///
    /// ```swift
    /// let lock = try LockFile.takeExisting(inDirectory: path)   // throws `locked` when open
    /// defer { lock?.release() }
    /// ```
    package static func takeExisting(inDirectory directory: String) throws(StorageError) -> LockFile? {
        let path = directory + "/lock"
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            if e == ENOENT { return nil }
            throw StorageError.io("open(lock)", errno: e)
        }
        try take(fd)
        return LockFile(descriptor: fd)
    }

    private static func take(_ fd: Int32) throws(StorageError) {
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            closeDescriptor(fd)
            if e == EWOULDBLOCK {
                throw StorageError(code: .locked, reason: "the database is open elsewhere")
            }
            throw StorageError.io("flock", errno: e)
        }
    }

    package func release() {
        flock(fd, LOCK_UN)
        closeDescriptor(fd)
    }
}
