import Glibc

/// The one place the engine calls the kernel: every call retries on EINTR and turns a failure into
/// ``StorageError/Code/io`` with the call's name.
enum System {
    @discardableResult
    static func call(_ name: String, _ body: () -> Int32) throws(StorageError) -> Int32 {
        while true {
            let r = body()
            if r >= 0 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw StorageError.io(name, errno: e)
        }
    }

    static func callSize(_ name: String, _ body: () -> Int) throws(StorageError) -> Int {
        while true {
            let r = body()
            if r >= 0 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw StorageError.io(name, errno: e)
        }
    }

    static func makeDirectory(_ path: String) throws(StorageError) {
        if mkdir(path, 0o755) != 0 {
            let e = Glibc.errno
            if e != EEXIST { throw StorageError.io("mkdir", errno: e) }
        }
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Deletes `path` if it exists.
    static func removeIfPresent(_ path: String) throws(StorageError) {
        if unlink(path) != 0 {
            let e = Glibc.errno
            if e != ENOENT { throw StorageError.io("unlink", errno: e) }
        }
    }

    static func rename(_ from: String, to: String) throws(StorageError) {
        try call("rename") { Glibc.rename(from, to) }
    }

    /// Makes a directory entry (a new file) durable.
    static func syncDirectory(_ path: String) throws(StorageError) {
        let fd = try call("open(directory)") { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try call("fsync(directory)") { fsync(fd) }
    }
}
