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
    /// The depths ``Database/setMaxRevTreeDepth(_:)`` accepts (and a stored one may have).
    static let revTreeDepths: ClosedRange<UInt64> = 1 ... 1_000_000
    /// When true (the default) every committed change is on disk (`fdatasync`) before the call
    /// returns. When false, a crash may lose the last changes, never corrupt the database.
    ///
    /// ```swift
    /// config.fullSync = false   // a cache that can be rebuilt
    /// ```
    public var fullSync: Bool = true
    /// The largest size, in bytes, the database's log may reach: the address space reserved for
    /// its memory map when it opens (as LMDB's map size). Nil (the default) reserves the largest
    /// of 1 TiB, 256, 64, 16 and 4 GiB the system grants. A process that keeps many databases
    /// open at once (a server hosting hundreds, a test suite) gives each less, since a process
    /// has about 128 TiB of address space in all. A write that would grow the log past it fails
    /// with ``SetteeError/Code/io``; compacting shrinks the log.
    ///
    /// ```swift
    /// config.maximumSize = 8 << 30   // 8 GiB
    /// ```
    public var maximumSize: Int?
    /// When true (the default), a compaction (`Database.compact(progress:)`) starts by itself in
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
    /// Tombstone eviction: when set, a document whose current revision is a tombstone (deleted
    /// here or by replication) is purged once no change has touched it for this many seconds
    /// (rounded up to a whole second). nil, the default, keeps tombstones until they are purged
    /// explicitly or expire (`Database.setDocumentExpiration(withID:expiration:)`).
    ///
    /// ```swift
    /// config.tombstoneMaxAge = 30 * 24 * 3600   // forget deletions after 30 days
    /// ```
    ///
    /// Each deletion is given an eviction time (its commit time plus the age); a later change
    /// that leaves the document deleted starts the count again, and a change that brings it back
    /// to life (a save over the tombstone, a replicated revision that wins) removes it. The
    /// database's expiry sweeper purges due tombstones in the background, as it purges expired
    /// documents, and listeners see ``DocumentChange/isPurged``.
    ///
    /// **The trade-off.** Tombstones are how a deletion replicates. A purge is local and is not
    /// replicated, so once a tombstone is evicted this database can no longer tell its peers
    /// that the document was deleted, and a peer that still holds a live revision of it (one
    /// that has not synced with this database for longer than the age, or never received the
    /// deletion) pushes the document back here as new on its next replication. Choose an age
    /// longer than the longest time a peer may stay offline. Evicting also means a pull of an old
    /// revision from a peer is no longer matched against the deleted history.
    ///
    /// Only tombstones written while the policy is on get an eviction time: turning it on does
    /// not look for older tombstones. Turning it off stops evictions: a tombstone whose eviction
    /// time comes while the policy is off is kept (its eviction time is dropped then).
    ///
    /// Opening a database throws ``SetteeError/Code/invalidParameter`` when the age is negative,
    /// infinite or NaN.
    public var tombstoneMaxAge: TimeInterval? = nil
    /// The longest a commit spends running map functions (``MapIndexConfiguration``), in
    /// seconds; default 0.25. The rows of a commit's documents are made in the commit, while
    /// every other writer waits; past this, the rest of them are made after it, outside the
    /// write lock, and a read of the index waits until they are (it never sees a document's old
    /// rows beside its new revision). A slow function, or documents built to make it slow, then
    /// delays reads of its index, not every other write.
    ///
    /// ```swift
    /// config.mapTimePerCommit = 0.05
    /// ```
    public var mapTimePerCommit: TimeInterval = 0.25

    /// A configuration for databases in `directory` (default: the current directory).
    ///
    /// ```swift
    /// let config = DatabaseConfiguration(directory: "/tmp/dbs")
    /// ```
    public init(directory: String? = nil) {
        self.directory = directory ?? FileManager.default.currentDirectoryPath
    }
}

extension DatabaseConfiguration {
    /// The settings that differ from `other`'s, by name, besides the directory (the same files can
    /// be named by two spellings of one path); empty when a database open with `other` behaves as
    /// one open with these would.
    func differences(from other: DatabaseConfiguration) -> [String] {
        var out: [String] = []
        if maxRevTreeDepth != other.maxRevTreeDepth { out.append("maxRevTreeDepth \(other.maxRevTreeDepth), not \(maxRevTreeDepth)") }
        if fullSync != other.fullSync { out.append("fullSync \(other.fullSync), not \(fullSync)") }
        if maximumSize != other.maximumSize {
            out.append("maximumSize \(other.maximumSize.map { "\($0)" } ?? "nil"), not \(maximumSize.map { "\($0)" } ?? "nil")")
        }
        if autoCompaction != other.autoCompaction { out.append("autoCompaction \(other.autoCompaction), not \(autoCompaction)") }
        if autoCompactionThreshold != other.autoCompactionThreshold {
            out.append("autoCompactionThreshold \(other.autoCompactionThreshold), not \(autoCompactionThreshold)")
        }
        if autoCompactionMinimumSize != other.autoCompactionMinimumSize {
            out.append("autoCompactionMinimumSize \(other.autoCompactionMinimumSize), not \(autoCompactionMinimumSize)")
        }
        if mapTimePerCommit != other.mapTimePerCommit { out.append("mapTimePerCommit \(other.mapTimePerCommit), not \(mapTimePerCommit)") }
        if tombstoneMaxAge != other.tombstoneMaxAge {
            out.append("tombstoneMaxAge \(other.tombstoneMaxAge.map { "\($0)" } ?? "nil"), not \(tombstoneMaxAge.map { "\($0)" } ?? "nil")")
        }
        return out
    }
}
