import Glibc

/// The database's exclusive lock: `flock` on `<directory>/lock`. A second `Store` on the same
/// directory, in this process or another, gets ``StorageError/Code/locked``.
final class LockFile {
    private let fd: Int32

    init(path: String) throws(StorageError) {
        fd = try System.call("open(lock)") { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = Glibc.errno
            Glibc.close(fd)
            if e == EWOULDBLOCK {
                throw StorageError(code: .locked, reason: "the database is open elsewhere")
            }
            throw StorageError.io("flock", errno: e)
        }
    }

    func release() {
        flock(fd, LOCK_UN)
        Glibc.close(fd)
    }
}
