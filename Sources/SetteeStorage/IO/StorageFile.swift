
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
    /// Makes every write so far durable (`fdatasync` on Linux, `F_FULLFSYNC` on Darwin).
    func sync() throws(StorageError)
    /// Makes every write so far reach the disk ahead of every later write, where the system
    /// can promise that without waiting for durability (`F_BARRIERFSYNC` on Darwin); a full
    /// ``sync()`` elsewhere. Nothing may count on these writes being durable afterwards: a
    /// later ``sync()`` or ``writeDurably(_:at:)`` does that.
    func syncForOrdering() throws(StorageError)
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
    package func syncForOrdering() throws(StorageError) { try sync() }

    package func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        try write(bytes, at: offset)
        try sync()
    }
}
