import Foundation
internal import SetteeStorage

extension Database {
    // MARK: - Expiration (TTL)

    /// Sets when a document expires, or clears its expiration (`nil`). An expired document is
    /// purged: removed locally with every trace, as `purgeDocument(withID:)` does.
    ///
    /// ```swift
    /// try db.saveDocument(MutableDocument(id: "session-42", data: ["user": "ada"]))
    /// try db.setDocumentExpiration(withID: "session-42", expiration: Date(timeIntervalSinceNow: 3600))
    /// // …later, to keep it after all:
    /// try db.setDocumentExpiration(withID: "session-42", expiration: nil)
    /// ```
    ///
    /// - **Granularity.** Times are stored in whole seconds, rounded **up**: a document never
    ///   expires before the date it was given (`12:00:00.2` is stored, and reported by
    ///   `getDocumentExpiration(withID:)`, as `12:00:01`). A date before 1970 is stored as
    ///   1970-01-01T00:00:00Z, which is due at once; so is any date in the past.
    /// - **When.** The database's expiry sweeper, a background thread per open database,
    ///   sleeps until the earliest expiration and purges what is due in short batches, each a
    ///   transaction of its own: soon after the time, not at a precise instant, and reads may see
    ///   the document until then. Expirations that pass while the database is closed are purged
    ///   soon after it is opened again.
    /// - **Local only.** Setting an expiration is not a revision: the document keeps its
    ///   revision ID and sequence, the changes feed does not list it, replication does not carry
    ///   it, and validation functions do not run (not for the purge either). The purge takes a
    ///   sequence, and listeners get a ``DocumentChange`` with ``DocumentChange/isPurged`` set.
    ///   A peer that still has the document may replicate it back, as after any purge.
    /// - **Updates and deletions keep it** (as in Couchbase Lite): saving a new revision,
    ///   deleting the document (its tombstone is purged at the expiration) and replicated
    ///   revisions leave the expiration as it is. Purging the document removes it.
    /// - **Tombstones.** A deleted document is still in the database, so it may be given an
    ///   expiration, which purges the tombstone.
    ///
    /// - Throws: ``SetteeError/Code/notFound`` when no document has that ID (never saved, or
    ///   purged), ``SetteeError/Code/invalidParameter`` for a malformed ID or a date that is not
    ///   finite (or later than 2^53 seconds after 1970), ``SetteeError/Code/notOpen``.
    public func setDocumentExpiration(withID id: String, expiration: Date?) throws {
        try checkOpen()
        let key = try validateDocumentID(id)
        let seconds = try expiration.map { d throws(SetteeError) in try ExpiryTime.seconds(roundingUp: d) }
        try core.write { c in
            guard try c.meta(key) != nil else { throw SetteeError(.notFound, "no document with that ID") }
            let old = try c.expiryRecord(key)
            var new = old ?? ExpiryRecord()
            new.expiration = seconds
            try c.setExpiryRecord(key, old: old, new: new)
        }
    }

    /// When a document expires, as stored (rounded up to a whole second); nil when it has no
    /// expiration or there is no document with that ID.
    ///
    /// ```swift
    /// if let at = try db.getDocumentExpiration(withID: "session-42") {
    ///     print("purged after", at)
    /// }
    /// ```
    ///
    /// The time a tombstone is evicted under ``DatabaseConfiguration/tombstoneMaxAge`` is not an
    /// expiration and is not reported here.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a malformed ID, ``SetteeError/Code/notOpen``,
    ///   ``SetteeError/Code/corrupted``.
    public func getDocumentExpiration(withID id: String) throws -> Date? {
        try checkOpen()
        let key = try validateDocumentID(id)
        return try expiryRecord(key)?.expiration.map(ExpiryTime.date)
    }

    /// A document's expiration record (its expiration and eviction times), as this thread sees
    /// the database.
    func expiryRecord(_ key: [UInt8]) throws -> ExpiryRecord? {
        try core.read { tx in
            try tx.withValue(forKey: key, in: core.trees.expiryByID) { b throws(SetteeError) in try ExpiryRecord(decoding: b) }
        }
    }

    /// Purges every document due at `date` (expired, or a tombstone older than
    /// ``DatabaseConfiguration/tombstoneMaxAge``) now, on the calling thread, in batches that
    /// are each a short transaction; returns how many were purged. The sweeper does the same
    /// in the background; compaction calls this first so it does not copy what is due.
    ///
    /// ```swift
    /// let purged = try db.purgeExpiredDocuments(asOf: Date())
    /// ```
    package func purgeExpiredDocuments(asOf date: Date) throws -> Int {
        try checkOpen()
        return try core.purgeExpiredDocuments(asOf: date)
    }

    /// Blocks until the expiry sweeper has seen every change of the clock and every new due
    /// time so far and sleeps again (or the database is closed). For tests with a manual clock.
    ///
    /// ```swift
    /// clock.advance(by: 60)
    /// db.waitForExpirySweeper()
    /// ```
    package func waitForExpirySweeper() {
        core.file.expiry.sweeper.alarm.settle()
    }
}
