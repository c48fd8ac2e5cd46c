import Foundation
internal import SetteeStorage
import Synchronization

/// The content-addressed blob files of one database: `<db>/blobs/<hex sha1>.blob`
/// (Formats/documents.md, "Blobs"). Content is written to a temporary file, synced, renamed into
/// place and the directory synced, so a blob file is either whole or absent, and a blob whose
/// install returned survives a power failure.
///
/// Every operation on disk goes through a `StorageFileSystem`: the kernel's, or the crash kit's
/// simulated disk when one is registered for the database directory. Every failure is thrown as
/// ``SetteeError/Code/io``. A blob whose install failed at its rename or after it (the directory
/// sync) may be in place without being durable: the store does not vouch for it (``has(digest:)``
/// is false, reads find nothing) until an install of the same content succeeds.
///
/// Thread-safe: installs of the same digest race harmlessly (same bytes, atomic rename).
final class BlobStore: Sendable {
    let directory: String
    let fileSystem: any StorageFileSystem
    private var temporary: String { directory + "/tmp" }
    static let chunk = 1 << 20
    /// File names of blobs whose install failed at or after the rename: the file may be there,
    /// but its name may not survive a power failure.
    private let unvouched = Mutex<Set<String>>([])

    /// Opens the blob store in `directory` (created when missing), through `fileSystem`, or the
    /// one `DirectoryInterposition` gives for the directory (the kernel's outside crash tests).
    /// Temporary files a crash left behind are deleted, and the directories synced.
    init(directory: String, fileSystem: (any StorageFileSystem)? = nil) throws(SetteeError) {
        self.directory = directory
        self.fileSystem = fileSystem ?? DirectoryInterposition.fileSystem(for: directory)
        let parent = (directory as NSString).deletingLastPathComponent
        _ = try io("create the blob directory") { try self.fileSystem.makeDirectory(directory) }
        // Every open, not only when the directory was made: a blob's name is durable only if the
        // directory's own entry is, and a creation whose sync failed would otherwise never get one.
        try io("sync the database directory") { try self.fileSystem.syncDirectory(parent) }
        _ = try io("create the blob directory") { try self.fileSystem.makeDirectory(temporary) }
        // The database is locked and this is its only blob store in the process: no install is
        // writing any of these.
        for name in try io("list the temporary blob files", { try self.fileSystem.contentsOfDirectory(temporary) }) {
            _ = try io("delete a temporary blob file") { try self.fileSystem.removeFile(temporary + "/" + name) }
        }
        // Every blob file present is vouched for from here on, one an earlier process could not
        // vouch for (its directory sync failed) included: this sync makes their names durable.
        try io("sync the blob directory") { try self.fileSystem.syncDirectory(directory) }
    }

    static func digestString(_ sha1: [UInt8]) -> String { "sha1-" + Data(sha1).base64EncodedString() }

    /// The file name for a digest, or nil when the digest is not `sha1-` plus the base64 of 20
    /// bytes: digests come from documents and peers, and must never name another path.
    static func fileName(forDigest digest: String) -> String? {
        guard digest.hasPrefix("sha1-"), digest.utf8.count == 33,
              let raw = Data(base64Encoded: String(digest.dropFirst(5))), raw.count == 20 else { return nil }
        return SHA1.hex(Array(raw)) + ".blob"
    }

    /// The file name for a digest the store can vouch for; nil when the digest is malformed or an
    /// install of it failed at or after its rename (and none has succeeded since).
    private func vouchedFileName(forDigest digest: String) -> String? {
        guard let name = Self.fileName(forDigest: digest) else { return nil }
        return unvouched.withLock { $0.contains(name) } ? nil : name
    }

    /// The path of a blob's file; nil when the digest is malformed or the store cannot vouch for
    /// that blob. Whether the file exists is not checked.
    func path(forDigest digest: String) -> String? {
        vouchedFileName(forDigest: digest).map { directory + "/" + $0 }
    }

    /// Whether the blob is stored and the store vouches for it.
    ///
    /// - Throws: ``SetteeError/Code/io`` when that cannot be told.
    func contains(digest: String) throws(SetteeError) -> Bool {
        guard let p = path(forDigest: digest) else { return false }
        return try io("look up a blob file") { try fileSystem.attributes(of: p) }.map { !$0.isDirectory } ?? false
    }

    /// The length of a blob the store vouches for; nil when it has none.
    func length(forDigest digest: String) throws(SetteeError) -> UInt64? {
        guard let p = path(forDigest: digest) else { return nil }
        guard let a = try io("look up a blob file", { try fileSystem.attributes(of: p) }), !a.isDirectory else { return nil }
        return a.size
    }

    /// ``contains(digest:)`` for callers that cannot throw: false also when the lookup failed, as
    /// the store cannot vouch for the blob then.
    func has(digest: String) -> Bool {
        (try? contains(digest: digest)) ?? false
    }

    /// The whole content; nil when the store does not vouch for the blob or it cannot be read.
    func data(forDigest digest: String) -> Data? {
        guard let p = path(forDigest: digest) else { return nil }
        do throws(SetteeError) {
            guard let file = try io("open a blob file", { try fileSystem.openFileForReading(p) }) else { return nil }
            defer { file.close() }
            var out = Data(capacity: Int(clamping: try io("read a blob file") { try file.size() }))
            try Self.readChunks(file) { out.append($0.assumingMemoryBound(to: UInt8.self)) }
            return out
        } catch {
            return nil
        }
    }

    /// A stream over the content; nil when the store does not vouch for the blob or it is not
    /// there. Foundation's stream reads the file by its path itself: the one read that does not
    /// go through the file system (it writes nothing).
    func stream(forDigest digest: String) -> InputStream? {
        guard (try? contains(digest: digest)) == true, let p = path(forDigest: digest) else { return nil }
        return InputStream(fileAtPath: p)
    }

    /// Stores a blob's content unless it is already there; the content is hashed again while it
    /// is copied and must match the digest. Returns once the blob is durable.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a malformed digest or content that
    ///   does not match it, ``SetteeError/Code/notFound`` when the content is not available,
    ///   ``SetteeError/Code/io`` when any operation on disk fails (the blob is then not stored,
    ///   or not vouched for).
    func install(_ blob: Blob) throws(SetteeError) {
        guard let name = Self.fileName(forDigest: blob.digest) else {
            throw SetteeError(.invalidParameter, "malformed blob digest")
        }
        let final = directory + "/" + name
        if vouchedFileName(forDigest: blob.digest) != nil {
            // Marked as just written: compaction deletes only unreferenced blobs older than its
            // start, and a save that is about to reference this one may commit after it.
            if try io("mark a stored blob as just written", { try fileSystem.touch(final) }) { return }
        }
        let tmp = temporary + "/" + UUID().uuidString
        let file = try io("create a blob file") { try fileSystem.createFile(tmp) }
        var renaming = false
        do throws(SetteeError) {
            do throws(SetteeError) {
                try copy(blob, into: file)
                try io("sync a blob file") { try file.sync() }
            } catch {
                file.close()
                throw error
            }
            file.close()
            renaming = true
            try io("store a blob file") { try fileSystem.rename(tmp, to: final) }
            try io("sync the blob directory") { try fileSystem.syncDirectory(directory) }
            unvouched.withLock { _ = $0.remove(name) }
        } catch {
            // From the rename on, the name may be in place without being durable.
            if renaming { unvouched.withLock { _ = $0.insert(name) } }
            // The temporary file, unless the rename took it.
            do throws(StorageError) {
                _ = try fileSystem.removeFile(tmp)
            } catch let removal {
                throw SetteeError(error.code, error.message + "; the temporary file was not deleted either: " + Self.describe(removal))
            }
            throw error
        }
    }

    /// Writes the blob's content to `file`, hashing it; throws unless digest and length match.
    private func copy(_ blob: Blob, into file: any StorageFile) throws(SetteeError) {
        var sha = SHA1()
        var total: UInt64 = 0
        func put(_ b: UnsafeRawBufferPointer) throws(SetteeError) {
            sha.update(b)
            try io("write a blob file") { try file.write(b, at: total) }
            total += UInt64(b.count)
        }
        switch blob.source {
        case .memory(let d):
            var offset = 0
            while offset < d.count {
                let end = min(d.count, offset + Self.chunk)
                let r: Swift.Result<Void, SetteeError> = d[d.startIndex + offset ..< d.startIndex + end].withUnsafeBytes { b in
                    Swift.Result { () throws(SetteeError) in try put(b) }
                }
                try r.get()
                offset = end
            }
        case .file(let url):
            try Self.readChunks(path: url.path) { (b) throws(SetteeError) in try put(b) }
        case .stored(let other):
            guard let p = other.path(forDigest: blob.digest),
                  let source = try Self.io("open a blob file", { try other.fileSystem.openFileForReading(p) })
            else { throw SetteeError(.notFound, "the content of blob \(blob.digest) is not available") }
            defer { source.close() }
            try Self.readChunks(source) { (b) throws(SetteeError) in try put(b) }
        case .missing:
            throw SetteeError(.notFound, "the content of blob \(blob.digest) is not available")
        }
        guard Self.digestString(sha.finalize()) == blob.digest, total == blob.length else {
            throw SetteeError(.invalidParameter, "blob content does not match its digest or length (was the file changed?)")
        }
    }

    /// Every blob file's name, failing when the directory cannot be listed.
    func storedFileNames() throws(SetteeError) -> [String] {
        try io("list the blob directory") { try fileSystem.contentsOfDirectory(directory) }.filter { $0.hasSuffix(".blob") }
    }

    /// Every blob file's name, for callers that cannot throw; empty when the directory cannot be
    /// listed, so a garbage collection driven by it deletes nothing.
    func allFileNames() -> [String] {
        (try? storedFileNames()) ?? []
    }

    /// Deletes the blob files not named in `keeping` that were last modified before `cutoff`
    /// (compaction's collection; Formats/documents.md, "Compaction"). Returns how many it deleted.
    /// Deletions are not synced: one a crash undoes leaves an unreferenced blob, collected again.
    ///
    /// - Throws: ``SetteeError/Code/io`` at the first operation that fails.
    func removeUnreferenced(keeping: Set<String>, modifiedBefore cutoff: Date) throws(SetteeError) -> Int {
        var deleted = 0
        for name in try storedFileNames() where !keeping.contains(name) {
            let path = directory + "/" + name
            // Gone meanwhile (another collection): nothing to do.
            guard let a = try io("look up a blob file", { try fileSystem.attributes(of: path) }) else { continue }
            let modified = Date(timeIntervalSince1970: Double(a.modifiedSeconds) + Double(a.modifiedNanoseconds) / 1e9)
            guard modified < cutoff else { continue }
            if try io("delete a blob file", { try fileSystem.removeFile(path) }) { deleted += 1 }
        }
        return deleted
    }

    static func hashFile(atPath path: String) throws(SetteeError) -> (String, UInt64) {
        var sha = SHA1()
        var total: UInt64 = 0
        try readChunks(path: path) { b in
            sha.update(b)
            total += UInt64(b.count)
        }
        return (digestString(sha.finalize()), total)
    }

    /// Reads an application's file (a blob's source), always from the real file system: it is
    /// not one of the database's files.
    static func readChunks(path: String, _ body: (UnsafeRawBufferPointer) throws(SetteeError) -> Void) throws(SetteeError) {
        guard let file = try io("open a blob source file", { try PosixFileSystem.shared.openFileForReading(path) }) else {
            throw SetteeError(.io, "cannot open a blob source file: it does not exist")
        }
        defer { file.close() }
        try readChunks(file, body)
    }

    /// Reads `file` from its start to its end, a chunk at a time.
    static func readChunks(_ file: any StorageFile, _ body: (UnsafeRawBufferPointer) throws(SetteeError) -> Void) throws(SetteeError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset: UInt64 = 0
        while true {
            let n = try io("read a blob file") { try file.read(into: buffer, at: offset) }
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0 ..< n]))
            offset += UInt64(n)
        }
    }

    // MARK: - Errors

    private func io<R>(_ what: String, _ body: () throws -> R) throws(SetteeError) -> R {
        try Self.io(what, body)
    }

    /// Runs `body` (file-system calls, which throw `StorageError`), turning a failure into
    /// ``SetteeError/Code/io`` that says what was being done.
    private static func io<R>(_ what: String, _ body: () throws -> R) throws(SetteeError) -> R {
        do {
            return try body()
        } catch let e as StorageError {
            if e.code == .noSpace { throw SetteeError(.diskFull, "cannot \(what): the disk is full") }
            throw SetteeError(.io, "cannot \(what): " + describe(e))
        } catch {
            throw SetteeError(.io, "cannot \(what): \(error)")
        }
    }

    /// The system call and error number, or the reason; never a path (it names a digest).
    private static func describe(_ e: StorageError) -> String {
        guard let operation = e.operation else { return e.reason }
        return "\(operation) failed" + (e.errno.map { " (errno \($0))" } ?? "") + (e.reason == "system call failed" ? "" : ": " + e.reason)
    }
}
