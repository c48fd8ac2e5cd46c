import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The content-addressed blob files of one database: `<db>/blobs/<hex sha1>.blob`
/// (Formats/documents.md, "Blobs"). Content is written to a temporary file, synced, then renamed
/// into place, so a blob file is either whole or absent.
///
/// Thread-safe: installs of the same digest race harmlessly (same bytes, atomic rename).
final class BlobStore: Sendable {
    let directory: String
    private var temporary: String { directory + "/tmp" }
    static let chunk = 1 << 20

    init(directory: String) throws(SetteeError) {
        self.directory = directory
        for d in [directory, directory + "/tmp"] where mkdir(d, 0o755) != 0 && errno != EEXIST {
            throw SetteeError(.io, "cannot create the blob directory (errno \(errno))")
        }
    }

    static func digestString(_ sha1: [UInt8]) -> String { "sha1-" + Data(sha1).base64EncodedString() }

    /// The file name for a digest, or nil when the digest is not `sha1-` plus the base64 of 20
    /// bytes: digests come from documents and peers, and must never name another path.
    static func fileName(forDigest digest: String) -> String? {
        guard digest.hasPrefix("sha1-"), digest.utf8.count == 33,
              let raw = Data(base64Encoded: String(digest.dropFirst(5))), raw.count == 20 else { return nil }
        return SHA1.hex(Array(raw)) + ".blob"
    }

    func path(forDigest digest: String) -> String? {
        fileName(forDigest: digest).map { directory + "/" + $0 }
    }

    private func fileName(forDigest digest: String) -> String? { Self.fileName(forDigest: digest) }

    func has(digest: String) -> Bool {
        guard let p = path(forDigest: digest) else { return false }
        return access(p, F_OK) == 0
    }

    func data(forDigest digest: String) -> Data? {
        guard let p = path(forDigest: digest) else { return nil }
        return FileManager.default.contents(atPath: p)
    }

    func stream(forDigest digest: String) -> InputStream? {
        guard let p = path(forDigest: digest), access(p, R_OK) == 0 else { return nil }
        return InputStream(fileAtPath: p)
    }

    /// Stores a blob's content unless it is already there; the content is hashed again while it
    /// is copied and must match the digest.
    func install(_ blob: Blob) throws(SetteeError) {
        guard let final = path(forDigest: blob.digest) else {
            throw SetteeError(.invalidParameter, "malformed blob digest")
        }
        if access(final, F_OK) == 0 {
            // Marked as just written: compaction deletes only unreferenced blobs older than its
            // start, and a save that is about to reference this one may commit after it.
            if utimensat(AT_FDCWD, final, nil, 0) == 0 || errno != ENOENT { return }
        }
        let tmp = temporary + "/" + UUID().uuidString
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SetteeError(.io, "cannot create a blob file (errno \(errno))") }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(tmp) }
        }
        var sha = SHA1()
        var total: UInt64 = 0
        func put(_ b: UnsafeRawBufferPointer) throws(SetteeError) {
            sha.update(b)
            total += UInt64(b.count)
            var done = 0
            while done < b.count {
                let n = write(fd, b.baseAddress! + done, b.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw SetteeError(.io, "cannot write a blob file (errno \(errno))")
                }
                done += n
            }
        }
        switch blob.source {
        case .memory(let d):
            var offset = 0
            while offset < d.count {
                let end = min(d.count, offset + Self.chunk)
                let r: Result<Void, SetteeError> = d[d.startIndex + offset ..< d.startIndex + end].withUnsafeBytes { b in
                    Result { () throws(SetteeError) in try put(b) }
                }
                try r.get()
                offset = end
            }
        case .file(let url):
            try Self.readChunks(path: url.path) { (b) throws(SetteeError) in try put(b) }
        case .stored(let other):
            guard let p = other.path(forDigest: blob.digest) else { throw SetteeError(.notFound, "blob content missing") }
            try Self.readChunks(path: p) { (b) throws(SetteeError) in try put(b) }
        case .missing:
            throw SetteeError(.notFound, "the content of blob \(blob.digest) is not available")
        }
        guard Self.digestString(sha.finalize()) == blob.digest, total == blob.length else {
            throw SetteeError(.invalidParameter, "blob content does not match its digest or length (was the file changed?)")
        }
        guard fsync(fd) == 0 else { throw SetteeError(.io, "cannot sync a blob file (errno \(errno))") }
        guard rename(tmp, final) == 0 else { throw SetteeError(.io, "cannot store a blob file (errno \(errno))") }
        ok = true
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); close(dfd) }
    }

    /// Every stored digest's file name (for garbage collection and checks).
    func allFileNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".blob") }
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

    static func readChunks(path: String, _ body: (UnsafeRawBufferPointer) throws(SetteeError) -> Void) throws(SetteeError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SetteeError(.io, "cannot open a blob source file (errno \(errno))") }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer.baseAddress!, chunk)
            if n < 0 {
                if errno == EINTR { continue }
                throw SetteeError(.io, "cannot read a blob source file (errno \(errno))")
            }
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0 ..< n]))
        }
    }
}
