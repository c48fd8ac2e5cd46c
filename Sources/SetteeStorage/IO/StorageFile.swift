import CSystemHelpers
import Glibc

/// The engine's file I/O seam: every byte the engine writes goes through this protocol, so a
/// fault-injecting implementation can keep what is durable apart from what was only written and
/// simulate power loss (see the crash tests). Reads go through the memory map of the same file.
///
/// Implementations are used by one writer at a time; they need not be thread-safe.
package protocol StorageFile: AnyObject {
    /// The file descriptor the engine maps for reading.
    var descriptor: Int32 { get }
    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError)
    /// Reads up to `buffer.count` bytes at `offset`; returns how many were read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int
    /// Makes every write so far durable (`fdatasync`).
    func sync() throws(StorageError)
    /// Writes all of `bytes` at `offset` and makes them durable before returning (a commit
    /// in synchronous mode, when every earlier write is already durable).
    func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError)
    /// The file's size in bytes.
    func size() throws(StorageError) -> UInt64
    /// Cuts or extends the file to `size` bytes (extension reads as zeros).
    func truncate(to size: UInt64) throws(StorageError)
    /// Closes the file.
    func close()
}

extension StorageFile {
    package func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        try write(bytes, at: offset)
        try sync()
    }
}

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
            let n = try System.callSize("pwrite") {
                pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { throw StorageError.io("pwrite", errno: EIO) }
            done += n
        }
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try System.callSize("pread") {
                pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// One `pwritev2(RWF_DSYNC)`: the write and its sync in one system call. Falls back to
    /// `pwrite` + `fdatasync` where the kernel or file system does not support it.
    package func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        if dsyncWrites {
            var done = 0
            while done < bytes.count {
                let n = settee_pwrite_dsync(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    let e = Glibc.errno
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
        try write(bytes, at: offset)
        try sync()
    }

    private var dsyncWrites = true

    package func sync() throws(StorageError) {
        try System.call("fdatasync") { fdatasync(descriptor) }
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
        if isOpen { Glibc.close(descriptor); isOpen = false }
    }

    deinit { close() }
}
