import Foundation
import Synchronization
import SetteeStorage

/// A disk with a capacity a test sets and changes: files opened through it are real files, but
/// a write that would take the disk past its capacity writes what fits and fails with `ENOSPC`,
/// as a full file system does (syncs then succeed: what was written is on the disk). Raising
/// the capacity is freeing space.
///
/// ```swift
/// let disk = FullDisk(capacity: 1 << 20)
/// let db = try Database(name: "db", config: config, openFile: { (path) throws(StorageError) in try disk.open(path) })
/// disk.capacity = 64 << 20   // space freed
/// ```
///
/// - Note: Thread-safe: the capacity and the bytes in use are behind a lock.
package final class FullDisk: Sendable {
    private struct State {
        var capacity: UInt64
        /// The size of each file open through the disk, by path.
        var sizes: [String: UInt64] = [:]
        var refusals = 0
    }

    private let state: Mutex<State>

    package init(capacity: UInt64) { state = Mutex(State(capacity: capacity)) }

    /// The bytes the disk holds at most; lowering it below what is used refuses every write
    /// that grows a file.
    package var capacity: UInt64 {
        get { state.withLock { $0.capacity } }
        set { state.withLock { $0.capacity = newValue } }
    }

    /// The bytes the files hold.
    package var used: UInt64 { state.withLock { $0.sizes.values.reduce(0, +) } }

    /// How many writes the disk refused.
    package var refusals: Int { state.withLock { $0.refusals } }

    /// Opens (creating) the file at `path` on this disk.
    package func open(_ path: String) throws(StorageError) -> any StorageFile {
        let real = try PosixFile(path: path)
        let size = try real.size()
        state.withLock { $0.sizes[path] = size }
        return File(real: real, path: path, disk: self)
    }

    /// How many of `count` bytes at `offset` of `path` fit: all when the write grows nothing.
    fileprivate func reserve(_ path: String, offset: UInt64, count: Int) -> Int {
        state.withLock { s in
            let size = s.sizes[path] ?? 0
            let end = offset + UInt64(count)
            guard end > size else { return count }
            let others = s.sizes.filter { $0.key != path }.values.reduce(0, +)
            let room = s.capacity > others ? s.capacity - others : 0
            guard end > room else {
                s.sizes[path] = end
                return count
            }
            s.refusals += 1
            let fits = room > offset ? Int(room - offset) : 0
            if offset + UInt64(fits) > size { s.sizes[path] = offset + UInt64(fits) }
            return fits
        }
    }

    fileprivate func resized(_ path: String, to size: UInt64) { state.withLock { $0.sizes[path] = size } }

    private final class File: StorageFile {
        let real: PosixFile
        let path: String
        let disk: FullDisk

        init(real: PosixFile, path: String, disk: FullDisk) {
            self.real = real
            self.path = path
            self.disk = disk
        }

        var descriptor: Int32 { real.descriptor }

        private func put(_ bytes: UnsafeRawBufferPointer, at offset: UInt64, _ call: String) throws(StorageError) {
            let fits = disk.reserve(path, offset: offset, count: bytes.count)
            if fits > 0 { try real.write(UnsafeRawBufferPointer(rebasing: bytes[0 ..< fits]), at: offset) }
            if fits < bytes.count { throw StorageError.noSpace(call) }
        }

        func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) { try put(bytes, at: offset, "pwrite") }

        func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
            try put(bytes, at: offset, "pwritev2")
            try real.sync()
        }

        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int {
            try real.read(into: buffer, at: offset)
        }

        func sync() throws(StorageError) { try real.sync() }
        func syncForOrdering() throws(StorageError) { try real.sync() }
        func size() throws(StorageError) -> UInt64 { try real.size() }

        func truncate(to size: UInt64) throws(StorageError) {
            if disk.reserve(path, offset: 0, count: Int(size)) < Int(size) { throw StorageError.noSpace("ftruncate") }
            try real.truncate(to: size)
            disk.resized(path, to: size)
        }

        func close() { real.close() }
    }
}
