import Foundation

/// Where a database lives and how it behaves.
///
/// ```swift
/// var config = DatabaseConfiguration(directory: "/var/lib/app")
/// config.maxRevTreeDepth = 50
/// let db = try Database(name: "todo", config: config)
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DatabaseConfiguration: Sendable, Equatable {
    /// The directory that holds databases (each one is `<name>.settee/` inside it). Created if
    /// missing.
    ///
    /// ```swift
    /// let config = DatabaseConfiguration(directory: NSTemporaryDirectory())
    /// ```
    public var directory: String
    /// How many generations of history a document keeps above each leaf (Couchbase Lite's
    /// default is 20). Older revision IDs are forgotten when a document is saved, except on the
    /// paths from an open conflict's common ancestor to its leaves.
    ///
    /// ```swift
    /// config.maxRevTreeDepth = 100
    /// ```
    public var maxRevTreeDepth: Int = 20
    /// When true (the default) every committed change is on disk (`fdatasync`) before the call
    /// returns. When false, a crash may lose the last changes, never corrupt the database.
    ///
    /// ```swift
    /// config.fullSync = false   // a cache that can be rebuilt
    /// ```
    public var fullSync: Bool = true
    /// When true (the default), a compaction (``Database/compact(progress:)``) starts by itself in
    /// the background once the space it would reclaim exceeds ``autoCompactionThreshold`` of the
    /// file and the file is at least ``autoCompactionMinimumSize`` bytes.
    ///
    /// ```swift
    /// config.autoCompaction = false   // compact only when asked
    /// ```
    public var autoCompaction: Bool = true
    /// The share of the file that must be reclaimable (superseded revision trees, bodies no
    /// longer kept, purged documents; an estimate kept as documents change) before automatic
    /// compaction starts; default 0.5.
    ///
    /// ```swift
    /// config.autoCompactionThreshold = 0.3
    /// ```
    public var autoCompactionThreshold: Double = 0.5
    /// The smallest file, in bytes, that automatic compaction considers; default 16 MiB.
    ///
    /// ```swift
    /// config.autoCompactionMinimumSize = 64 << 20
    /// ```
    public var autoCompactionMinimumSize: UInt64 = 16 << 20

    /// A configuration for databases in `directory` (default: the current directory).
    ///
    /// ```swift
    /// let config = DatabaseConfiguration(directory: "/tmp/dbs")
    /// ```
    public init(directory: String? = nil) {
        self.directory = directory ?? FileManager.default.currentDirectoryPath
    }
}
