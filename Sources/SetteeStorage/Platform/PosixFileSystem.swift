#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, through the kernel's calls (each retried on `EINTR`).
///
/// ```swift
/// let fs: any StorageFileSystem = PosixFileSystem.shared
/// if try fs.makeDirectory("/tmp/example") { try fs.syncDirectory("/tmp") }
/// ```
///
/// Stateless; safe to use from any thread.
package final class PosixFileSystem: StorageFileSystem {
    /// The one instance (there is nothing to configure).
    package static let shared = PosixFileSystem()

    private init() {}

    package func openFile(_ path: String) throws(StorageError) -> any StorageFile {
        try PosixFile(path: path, mode: .readWrite)
    }

    package func createFile(_ path: String) throws(StorageError) -> any StorageFile {
        try PosixFile(path: path, mode: .createNew)
    }

    package func openFileForReading(_ path: String) throws(StorageError) -> (any StorageFile)? {
        do throws(StorageError) {
            return try PosixFile(path: path, mode: .readOnly)
        } catch {
            if error.errno == ENOENT { return nil }
            throw error
        }
    }

    package func makeDirectory(_ path: String) throws(StorageError) -> Bool {
        if mkdir(path, 0o755) == 0 { return true }
        let e = errno
        if e == EEXIST { return false }
        throw StorageError.io("mkdir", errno: e)
    }

    package func rename(_ from: String, to: String) throws(StorageError) {
        try System.call("rename") { renameFile(from, to) }
    }

    package func removeFile(_ path: String) throws(StorageError) -> Bool {
        if unlink(path) == 0 { return true }
        let e = errno
        if e == ENOENT { return false }
        throw StorageError.io("unlink", errno: e)
    }

    package func syncDirectory(_ path: String) throws(StorageError) {
        let fd = try System.call("open(directory)") { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { closeDescriptor(fd) }
        try System.call("fsync(directory)") { fsync(fd) }
    }

    package func contentsOfDirectory(_ path: String) throws(StorageError) -> [String] {
        guard let dir = opendir(path) else { throw StorageError.io("opendir", errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            // readdir returns nil both at the end and on failure; only errno tells them apart.
            errno = 0
            guard let entry = readdir(dir) else {
                let e = errno
                if e != 0 { throw StorageError.io("readdir", errno: e) }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    package func attributes(of path: String) throws(StorageError) -> StorageFileAttributes? {
        var st = stat()
        if stat(path, &st) != 0 {
            let e = errno
            if e == ENOENT { return nil }
            throw StorageError.io("stat", errno: e)
        }
        #if canImport(Darwin)
        let modified = st.st_mtimespec
        #else
        let modified = st.st_mtim
        #endif
        return StorageFileAttributes(size: UInt64(max(st.st_size, 0)), isDirectory: st.st_mode & S_IFMT == S_IFDIR,
                                     modifiedSeconds: Int64(modified.tv_sec), modifiedNanoseconds: Int64(modified.tv_nsec))
    }

    package func touch(_ path: String) throws(StorageError) -> Bool {
        if utimensat(AT_FDCWD, path, nil, 0) == 0 { return true }
        let e = errno
        if e == ENOENT { return false }
        throw StorageError.io("utimensat", errno: e)
    }
}

/// `rename(2)`, under a name no method shadows.
private func renameFile(_ from: String, _ to: String) -> Int32 { rename(from, to) }
