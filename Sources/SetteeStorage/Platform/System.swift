#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#else
#error("Settee's platform seam has no implementation for this system (docs/platforms.md)")
#endif

// The platform seam (docs/platforms.md). Every system call of the engine and of the document
// layer's blob store is made by a file of this folder, and only these files import the C
// library or say `#if`: the rest of the package is the same on every system. The families:
// - Linux with glibc: pwritev2(RWF_DSYNC) for a durable commit, fdatasync, membarrier.
// - Linux with musl, and Android (Bionic): pwrite and fdatasync, membarrier.
// - Darwin (macOS, iOS, tvOS, watchOS, visionOS): pwrite, fcntl(F_FULLFSYNC) for durability and
//   F_BARRIERFSYNC for ordering only, no membarrier (readers fence), LZ4 through Compression.
// - The portable POSIX path: a Linux build with `SETTEE_PORTABLE_IO=1` in its environment
//   (Package.swift) makes Darwin's calls where POSIX has them (pwrite, fsync for both syncs, no
//   membarrier, LZ4 still through liblz4), so that the logic Darwin relies on runs the test suite
//   and the crash rounds here.

/// The one place the engine calls the kernel: every call retries on EINTR and turns a failure into
/// ``StorageError/Code/io`` with the call's name.
enum System {
    /// The calling thread's `errno`, read right after a failed call.
    static var lastError: Int32 { errno }

    /// `EFBIG`: a file would grow past what the engine can address.
    static var fileTooLarge: Int32 { EFBIG }

    /// Whether `error` says the file system (or the user's quota) has no room left:
    /// `ENOSPC`, `EDQUOT`.
    static func isOutOfSpace(_ error: Int32) -> Bool { error == ENOSPC || error == EDQUOT }

    /// `ENOSPC`, for the crash kit's simulated full disk.
    static var noSpaceError: Int32 { ENOSPC }

    /// Whether the writer may order readers' announcements with `membarrier(2)` (Linux and
    /// Android, unless built for the portable path); elsewhere readers fence.
    static var processBarriers: Bool {
        #if (os(Linux) || os(Android)) && !SETTEE_PORTABLE_IO
        return true
        #else
        return false
        #endif
    }

    /// Runs `body` (a system call returning a count or a descriptor, negative on failure) again
    /// while it fails with `EINTR`; any other failure is thrown with the call's name.
    @discardableResult
    static func call<R: BinaryInteger>(_ name: String, _ body: () -> R) throws(StorageError) -> R {
        while true {
            let r = body()
            if r >= 0 { return r }
            let e = errno
            if e == EINTR { continue }
            throw StorageError.io(name, errno: e)
        }
    }

    static func makeDirectory(_ path: String) throws(StorageError) {
        if mkdir(path, 0o755) != 0 {
            let e = errno
            if e != EEXIST { throw StorageError.io("mkdir", errno: e) }
        }
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Deletes `path` if it exists.
    static func removeIfPresent(_ path: String) throws(StorageError) {
        if unlink(path) != 0 {
            let e = errno
            if e != ENOENT { throw StorageError.io("unlink", errno: e) }
        }
    }

    static func rename(_ from: String, to: String) throws(StorageError) {
        try DirectoryInterposition.fileSystem(for: parent(of: from)).rename(from, to: to)
    }

    /// Makes a directory entry (a new file) durable.
    static func syncDirectory(_ path: String) throws(StorageError) {
        try DirectoryInterposition.fileSystem(for: path).syncDirectory(path)
    }

    /// The directory holding `path` ("." for a bare name).
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// What the build's system calls promise, for tools and for the crash kit's model of the disk.
///
/// ```swift
/// print(StoragePlatform.family)   // "linux-glibc"
/// ```
///
/// Stateless; safe to use from any thread.
package enum StoragePlatform {
    /// The family of system calls this build makes: `linux-glibc`, `linux-musl`, `android`,
    /// `darwin` or `portable-posix`.
    package static var family: String {
        #if SETTEE_PORTABLE_IO
        return "portable-posix"
        #elseif canImport(Darwin)
        return "darwin"
        #elseif os(Android)
        return "android"
        #elseif canImport(Musl)
        return "linux-musl"
        #else
        return "linux-glibc"
        #endif
    }

    /// Whether a durable write (``StorageFile/writeDurably(_:at:)``) makes every earlier write
    /// of the file durable too, as a write followed by a full sync does (everywhere but glibc
    /// Linux, whose `pwritev2(RWF_DSYNC)` makes only its own bytes durable).
    package static var durableWriteSyncsEverything: Bool {
        #if canImport(Glibc) && os(Linux) && !SETTEE_PORTABLE_IO
        return false
        #else
        return true
        #endif
    }

    /// Whether ``StorageFile/syncForOrdering()`` promises order only (Darwin's
    /// `F_BARRIERFSYNC`), not durability. The portable path answers as Darwin does, so that its
    /// power-loss rounds hold the engine to Darwin's promises, although its call is `fsync`.
    package static var orderingSyncIsBarrierOnly: Bool {
        #if canImport(Darwin) || SETTEE_PORTABLE_IO
        return true
        #else
        return false
        #endif
    }
}
