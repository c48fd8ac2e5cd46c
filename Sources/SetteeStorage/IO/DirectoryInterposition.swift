/// The test seam for ``StorageFileSystem``: a directory registered here has the file-system
/// operations made in it, and in every directory under it, go to the registered file system
/// instead of the kernel. The crash kit's simulated directory registers itself for a database
/// directory to see each rename, removal and directory sync (which names would survive a power
/// failure) and to cut the power at any of them; nothing else in the package calls
/// ``set(_:for:)``.
///
/// The engine routes its renames and directory syncs here (its files come from its file opener);
/// the document layer's blob store takes its whole file system from ``fileSystem(for:)`` when it
/// opens. With nothing registered, a lookup costs one uncontended lock and gives
/// ``PosixFileSystem/shared``; lookups happen when a log is created, a compaction swaps logs,
/// and a database opens.
///
/// ```swift
/// DirectoryInterposition.set(simulated, for: "/tmp/db.settee")
/// defer { DirectoryInterposition.set(nil, for: "/tmp/db.settee") }
/// let fs = DirectoryInterposition.fileSystem(for: "/tmp/db.settee/blobs")   // simulated
/// ```
package enum DirectoryInterposition {
    private static let lock = Lock()
    nonisolated(unsafe) private static var registered: [String: any StorageFileSystem] = [:]

    /// Routes the file-system operations in `directory` and below it through `fileSystem`; nil
    /// gives them back to the kernel.
    package static func set(_ fileSystem: (any StorageFileSystem)?, for directory: String) {
        let key = normalized(directory)
        lock.withLock { registered[key] = fileSystem }
    }

    /// The file system for operations in `directory`: the one registered for it or for the
    /// nearest directory above it, otherwise the real one.
    package static func fileSystem(for directory: String) -> any StorageFileSystem {
        lock.withLock { () -> any StorageFileSystem in
            guard !registered.isEmpty else { return PosixFileSystem.shared }
            var at = normalized(directory)
            while true {
                if let fs = registered[at] { return fs }
                guard let slash = at.lastIndex(of: "/"), at != "/" else { return PosixFileSystem.shared }
                at = slash == at.startIndex ? "/" : String(at[..<slash])
            }
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
