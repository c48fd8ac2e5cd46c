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
        if let interposer = DirectoryInterposition.interposer(forFileIn: from) {
            return try interposer.rename(from, to: to)
        }
        try call("rename") { Glibc.rename(from, to) }
    }

    /// Makes a directory entry (a new file) durable.
    static func syncDirectory(_ path: String) throws(StorageError) {
        if let interposer = DirectoryInterposition.interposer(for: path) {
            return try interposer.syncDirectory()
        }
        let fd = try call("open(directory)") { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try call("fsync(directory)") { fsync(fd) }
    }
}

/// What stands in for the kernel's `rename` and directory `fsync` in one directory: the crash
/// harness's power-loss simulation, which must see each rename and each directory sync to know
/// which names would survive a power failure (the file opener shows it the files themselves).
package protocol DirectoryInterposer: AnyObject {
    /// Renames `from` to `to` (both in the directory), as `rename(2)` does.
    func rename(_ from: String, to: String) throws(StorageError)
    /// Makes the directory's entries durable, as `fsync` on the directory does.
    func syncDirectory() throws(StorageError)
}

/// The test seam for ``DirectoryInterposer``: directories registered here have their renames
/// and directory syncs routed to the interposer instead of the kernel. Only the crash harness
/// registers any (nothing else in the package calls ``set(_:for:)``); with none registered,
/// `System.rename` and `System.syncDirectory` pay one uncontended lock, and they run only when a
/// log is created or a compaction swaps logs.
package enum DirectoryInterposition {
    private static let lock = Lock()
    nonisolated(unsafe) private static var interposers: [String: any DirectoryInterposer] = [:]

    /// Routes `directory`'s renames and syncs through `interposer`; nil restores the kernel's.
    package static func set(_ interposer: (any DirectoryInterposer)?, for directory: String) {
        let key = normalized(directory)
        lock.withLock { interposers[key] = interposer }
    }

    static func interposer(for directory: String) -> (any DirectoryInterposer)? {
        lock.withLock { interposers.isEmpty ? nil : interposers[normalized(directory)] }
    }

    static func interposer(forFileIn path: String) -> (any DirectoryInterposer)? {
        lock.withLock {
            guard !interposers.isEmpty, let slash = path.lastIndex(of: "/") else { return nil }
            return interposers[normalized(String(path[..<slash]))]
        }
    }

    /// The path without repeated or trailing slashes, so `a//b/` and `a/b` are one directory.
    static func normalized(_ path: String) -> String {
        var out = ""
        for c in path where !(c == "/" && out.hasSuffix("/")) { out.append(c) }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out
    }
}
