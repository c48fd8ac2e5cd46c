import Foundation
internal import SetteeStorage

extension Database {
    /// How many generations of history each document keeps above its leaves: the depth set
    /// with ``setMaxRevTreeDepth(_:)``, stored with the database, else
    /// ``DatabaseConfiguration/maxRevTreeDepth``.
    ///
    /// ```swift
    /// print(try db.maxRevTreeDepth)   // 20 unless set
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen`` once closed; ``SetteeError/Code/corrupted`` when
    ///   the stored depth is damaged.
    public var maxRevTreeDepth: Int {
        get throws {
            try checkOpen()
            return core.maxRevTreeDepth
        }
    }

    /// Sets how many generations of history each document keeps above its leaves (CouchDB's
    /// `_revs_limit`), from 1 to 1,000,000. The depth is stored with the database, in the same
    /// commit, and outlasts a reopen and compaction: from then on it wins over the
    /// configuration's ``DatabaseConfiguration/maxRevTreeDepth``. Documents are pruned to it as
    /// they are next saved, and all of them by the next ``compact()``.
    ///
    /// ```swift
    /// try db.setMaxRevTreeDepth(1000)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a depth out of range (nothing is
    ///   changed); the write's error when it cannot be stored.
    public func setMaxRevTreeDepth(_ depth: Int) throws {
        try checkOpen()
        guard depth > 0, DatabaseConfiguration.revTreeDepths.contains(UInt64(depth)) else {
            throw SetteeError(.invalidParameter, "the revision tree depth must be 1 to \(DatabaseConfiguration.revTreeDepths.upperBound), not \(depth)")
        }
        try core.write { c in
            try c.tx.put(MetaKey.revsLimit, withUnsafeBytes(of: UInt64(depth).littleEndian, Array.init), in: core.file.meta)
        }
        // Once stored: writes after this one prune to it.
        core.file.revsLimit.store(depth, ordering: .relaxed)
    }
}
