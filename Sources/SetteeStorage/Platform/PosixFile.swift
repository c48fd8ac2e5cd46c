#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif
import CSystemHelpers

/// A plain POSIX file.
package final class PosixFile: StorageFile {
    package let descriptor: Int32
    private var isOpen = true

    /// How a file is opened.
    package enum Mode {
        /// For reading and writing, created when missing (the engine's logs).
        case readWrite
        /// For reading and writing, created here: fails with `EEXIST` when the name is taken
        /// (a blob's temporary file, whose name must be its own).
        case createNew
        /// For reading only; fails with `ENOENT` when missing.
        case readOnly
    }

    /// Opens (creating when missing) the file at `path` for reading and writing.
    package convenience init(path: String) throws(StorageError) {
        try self.init(path: path, mode: .readWrite)
    }

    /// Opens the file at `path` as `mode` says.
    package init(path: String, mode: Mode) throws(StorageError) {
        let flags: Int32
        switch mode {
        case .readWrite: flags = O_RDWR | O_CREAT
        case .createNew: flags = O_RDWR | O_CREAT | O_EXCL
        case .readOnly: flags = O_RDONLY
        }
        descriptor = try System.call("open") { open(path, flags | O_CLOEXEC, 0o644) }
    }

    package func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        var done = 0
        while done < bytes.count {
            let n = try System.call("pwrite") {
                pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { throw StorageError.io("pwrite", errno: EIO) }
            done += n
        }
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try System.call("pread") {
                pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// The write and its sync. On glibc Linux one `pwritev2(RWF_DSYNC)`, falling back to
    /// `pwrite` and `fdatasync` where the kernel or file system refuses it; elsewhere `pwrite`
    /// then ``sync()``.
    package func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        #if canImport(Glibc) && os(Linux) && !SETTEE_PORTABLE_IO
        if dsyncWrites {
            var done = 0
            while done < bytes.count {
                let n = settee_pwrite_dsync(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    let e = errno
                    if e == EINTR { continue }
                    if (e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) && done == 0 {
                        dsyncWrites = false
                        break
                    }
                    throw StorageError.io("pwritev2", errno: e)
                }
                if n == 0 { throw StorageError.io("pwritev2", errno: EIO) }
                done += n
            }
            if dsyncWrites { return }
        }
        #endif
        try write(bytes, at: offset)
        try sync()
    }

    #if canImport(Glibc) && os(Linux) && !SETTEE_PORTABLE_IO
    private var dsyncWrites = true
    #endif

    /// Linux and Android: `fdatasync`. Darwin: `fcntl(F_FULLFSYNC)`, which asks the drive to
    /// empty its cache (Apple's `fsync` does not), or `fsync` on a file system that refuses it.
    /// The portable path: `fsync`, the POSIX call nearest Darwin's.
    package func sync() throws(StorageError) {
        #if SETTEE_PORTABLE_IO
        try System.call("fsync") { fsync(descriptor) }
        #elseif canImport(Darwin)
        try Self.darwinSync(descriptor, name: "fcntl(F_FULLFSYNC)") { settee_full_fsync($0) }
        #else
        try System.call("fdatasync") { fdatasync(descriptor) }
        #endif
    }

    /// Darwin: `fcntl(F_BARRIERFSYNC)`; elsewhere ``sync()``.
    package func syncForOrdering() throws(StorageError) {
        #if canImport(Darwin) && !SETTEE_PORTABLE_IO
        try Self.darwinSync(descriptor, name: "fcntl(F_BARRIERFSYNC)") { settee_barrier_fsync($0) }
        #else
        try sync()
        #endif
    }

    #if canImport(Darwin)
    /// One of Darwin's `fcntl` syncs; a file system that has not got it (`ENOTSUP`, `EINVAL`,
    /// `ENOTTY`: some network and FAT volumes) gets `fsync`, as SQLite does there.
    private static func darwinSync(_ fd: Int32, name: String, _ call: (Int32) -> Int32) throws(StorageError) {
        while true {
            if call(fd) == 0 { return }
            let e = errno
            if e == EINTR { continue }
            if e == ENOTSUP || e == EINVAL || e == ENOTTY { break }
            throw StorageError.io(name, errno: e)
        }
        try System.call("fsync") { fsync(fd) }
    }
    #endif

    /// The size of the open file `descriptor`, straight from the kernel (not through a
    /// ``StorageFile``: for files no fault plan may count, such as a retired log's).
    static func size(of descriptor: Int32) -> UInt64? {
        var st = stat()
        return fstat(descriptor, &st) == 0 ? UInt64(max(st.st_size, 0)) : nil
    }

    /// Cuts the open file `descriptor` to `size` bytes, straight from the kernel; false on failure.
    static func truncate(_ descriptor: Int32, to size: UInt64) -> Bool {
        guard let length = off_t(exactly: size) else { return false }
        return ftruncate(descriptor, length) == 0
    }

    package func size() throws(StorageError) -> UInt64 {
        var st = stat()
        try System.call("fstat") { fstat(descriptor, &st) }
        return UInt64(st.st_size)
    }

    package func truncate(to size: UInt64) throws(StorageError) {
        try System.call("ftruncate") { ftruncate(descriptor, off_t(size)) }
    }

    package func close() {
        if isOpen { closeDescriptor(descriptor); isOpen = false }
    }

    deinit { close() }
}

/// `close(2)`, under a name no method shadows.
func closeDescriptor(_ fd: Int32) { _ = close(fd) }
