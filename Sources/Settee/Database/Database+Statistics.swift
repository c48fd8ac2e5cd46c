internal import SetteeStorage

/// A database's counts and size, read together from one snapshot (each in constant time: no
/// document is read).
///
/// ```swift
/// let s = try db.statistics
/// print("\(s.documentCount) documents, \(s.deletedDocumentCount) deleted, \(s.conflictedDocumentCount) in conflict")
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DatabaseStatistics: Sendable, Hashable {
    /// Documents whose current revision is not a tombstone (``Database/count``).
    ///
    /// ```swift
    /// print(try db.statistics.documentCount)
    /// ```
    public var documentCount: UInt64
    /// Documents whose current revision is a tombstone (kept until purged or evicted).
    ///
    /// ```swift
    /// print(try db.statistics.deletedDocumentCount)
    /// ```
    public var deletedDocumentCount: UInt64
    /// Documents with more than one undeleted leaf.
    ///
    /// ```swift
    /// if try db.statistics.conflictedDocumentCount > 0 { print("conflicts to resolve") }
    /// ```
    public var conflictedDocumentCount: UInt64
    /// The sequence of the last change (``Database/lastSequence``).
    ///
    /// ```swift
    /// print(try db.statistics.lastSequence)
    /// ```
    public var lastSequence: UInt64
    /// The database file's size in bytes (what compaction would shrink).
    ///
    /// ```swift
    /// print(try db.statistics.fileSize / 1_048_576, "MiB")
    /// ```
    public var fileSize: UInt64
    /// About how many bytes of the file hold superseded data that the next compaction would
    /// reclaim (an estimate kept as the database is written).
    ///
    /// ```swift
    /// let s = try db.statistics
    /// if s.reclaimableBytes > s.fileSize / 2 { try db.compact() }
    /// ```
    public var reclaimableBytes: UInt64
    /// The version of the document format the file is in (Formats/documents.md).
    ///
    /// ```swift
    /// print("format", try db.statistics.formatVersion)
    /// ```
    public var formatVersion: UInt64
}

extension Database {
    /// The database's counts and file size.
    ///
    /// ```swift
    /// let s = try db.statistics
    /// print(s.documentCount + s.deletedDocumentCount, "documents in all")
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen`` once closed; ``SetteeError/Code/corrupted`` when a
    ///   stored count is damaged; ``SetteeError/Code/io``.
    public var statistics: DatabaseStatistics {
        get throws {
            try checkOpen()
            let trees = core.trees
            func read(_ tx: some StoreReading, live: UInt64?, last: UInt64?, dead: UInt64?) throws -> DatabaseStatistics {
                let all = UInt64(try tx.count(in: trees.byID))
                let live = try live ?? core.counter(tx, MetaKey.liveCount)
                guard live <= all else { throw SetteeError(.corrupted, "the document count is larger than the documents stored") }
                return DatabaseStatistics(documentCount: live, deletedDocumentCount: all - live,
                                          conflictedDocumentCount: UInt64(try tx.count(in: trees.conflicts)),
                                          lastSequence: try last ?? core.counter(tx, MetaKey.lastSequence), fileSize: 0,
                                          reclaimableBytes: try dead ?? core.counter(tx, MetaKey.deadBytes),
                                          formatVersion: try core.counter(tx, MetaKey.format))
            }
            // Inside a batch its counters are not yet in the meta tree.
            let batch = try core.batchOnThisThread()
            var s = try core.read(snapshot: { try read($0, live: nil, last: nil, dead: nil) },
                                  batch: { try read($0, live: batch?.liveCount, last: batch?.lastSequence, dead: batch?.deadBytes) })
            s.fileSize = core.store.fileSize
            return s
        }
    }
}
