import Foundation
internal import SetteeStorage

/// Whole seconds since 1970, as `doc.expiry` stores them.
enum ExpiryTime {
    /// The latest time stored: 2^53 seconds (a `Double` holds every whole second up to it).
    static let maxSeconds: UInt64 = 1 << 53

    /// An expiration date given by the application, rounded up to the next whole second (a
    /// document never expires before the date it was given); dates before 1970 become 0 (due at
    /// once).
    static func seconds(roundingUp date: Date) throws(SetteeError) -> UInt64 {
        let t = date.timeIntervalSince1970
        guard t.isFinite, t <= Double(maxSeconds) else {
            throw SetteeError(.invalidParameter, "an expiration must be a finite date before the year 285,000,000")
        }
        return t <= 0 ? 0 : UInt64(t.rounded(.up))
    }

    /// `date` rounded up, clamped to 0 … ``maxSeconds`` (for computed times).
    static func clamped(roundingUp t: TimeInterval) -> UInt64 {
        guard t.isFinite else { return t > 0 ? maxSeconds : 0 }
        if t <= 0 { return 0 }
        return t >= Double(maxSeconds) ? maxSeconds : UInt64(t.rounded(.up))
    }

    /// The last whole second that has fully begun at `date`: entries due at or before it are due.
    static func seconds(roundingDown date: Date) -> UInt64 {
        let t = date.timeIntervalSince1970
        guard t.isFinite else { return t > 0 ? maxSeconds : 0 }
        if t <= 0 { return 0 }
        return t >= Double(maxSeconds) ? maxSeconds : UInt64(t.rounded(.down))
    }

    static func date(_ seconds: UInt64) -> Date { Date(timeIntervalSince1970: Double(seconds)) }
}

extension WriteContext {
    /// A document's expiration record, as this transaction sees it.
    func expiryRecord(_ key: [UInt8]) throws -> ExpiryRecord? {
        try tx.withValue(forKey: key, in: trees.expiryByID) { b throws(SetteeError) in try ExpiryRecord(decoding: b) }
    }

    /// Replaces a document's record with `new` (removing it when empty) and moves its
    /// `doc.expiry` entry to the new due time.
    func setExpiryRecord(_ key: [UInt8], old: ExpiryRecord?, new: ExpiryRecord) throws {
        guard old != new else { return }
        let oldDue = old?.due
        let newDue = new.due
        if let oldDue, oldDue != newDue {
            try tx.delete(ExpiryKey.make(due: oldDue, id: key), in: trees.expiry)
        }
        if new.isEmpty {
            try tx.delete(key, in: trees.expiryByID)
            return
        }
        try tx.put(key, new.encoded(), in: trees.expiryByID)
        if let newDue, newDue != oldDue {
            try tx.put(ExpiryKey.make(due: newDue, id: key), [], in: trees.expiry)
            noteDue(newDue)
        }
    }

    /// Removes a document's expiration and eviction entries (when it is purged).
    func removeExpiry(_ key: [UInt8]) throws {
        guard let old = try expiryRecord(key) else { return }
        try setExpiryRecord(key, old: old, new: ExpiryRecord())
    }

    /// Remembers the earliest due time this transaction added, to wake the sweeper after the commit.
    func noteDue(_ due: UInt64) {
        participants.expiry.earliestDue = min(participants.expiry.earliestDue ?? .max, due)
    }

    /// After a commit left the document `key` with a tombstone as its current revision (`deleted`)
    /// or a live one: a tombstone gets an eviction time, `tombstoneMaxAge` from now, when the
    /// policy is on; a live document loses any eviction time it had. `wasDeleted` is the state
    /// before the commit (nil: a new document).
    func updateEviction(_ key: [UInt8], deleted: Bool, wasDeleted: Bool?) throws {
        if deleted {
            guard let age = core.configuration.tombstoneMaxAge else { return }
            let old = try expiryRecord(key)
            var new = old ?? ExpiryRecord()
            new.eviction = ExpiryTime.clamped(roundingUp: core.clock.now().timeIntervalSince1970 + age)
            try setExpiryRecord(key, old: old, new: new)
        } else if wasDeleted == true, let old = try expiryRecord(key), old.eviction != nil {
            var new = old
            new.eviction = nil
            try setExpiryRecord(key, old: old, new: new)
        }
    }

    /// Purges the documents due at or before `seconds`, at most `limit` index entries; returns
    /// how many documents it purged and whether more entries may be due.
    ///
    /// An entry is due because of the document's expiration (it is purged) or its tombstone
    /// eviction time (it is purged if it is still a tombstone and the policy is still on;
    /// otherwise the eviction time is dropped and the document stays, under its expiration if
    /// it has one). Validation functions are not run: a purge is not a revision.
    func purgeExpired(asOf seconds: UInt64, limit: Int) throws -> (purged: Int, more: Bool) {
        var due: [(due: UInt64, id: [UInt8])] = []
        due.reserveCapacity(min(limit, 4096))
        try tx.forEach(in: trees.expiry, from: nil, reverse: false) { k, _ in
            guard let e = ExpiryKey.parse(k) else { throw SetteeError(.corrupted, "an expiry key is malformed") }
            guard e.due <= seconds else { return false }
            due.append(e)
            return due.count < limit
        }
        var purged = 0
        let evicting = core.configuration.tombstoneMaxAge != nil
        for (time, key) in due {
            guard let record = try expiryRecord(key), record.due == time, let meta = try meta(key) else {
                // An entry without a matching record or document: drop what is left of it.
                try tx.delete(ExpiryKey.make(due: time, id: key), in: trees.expiry)
                if try meta(key) == nil { try tx.delete(key, in: trees.expiryByID) }
                continue
            }
            var remaining = record
            var isDue = false
            if let e = record.expiration, e <= seconds { isDue = true }
            if let v = record.eviction, v <= seconds {
                if evicting && meta.flags.contains(.deleted) { isDue = true } else { remaining.eviction = nil }
            }
            if isDue {
                try purge(id: String(decoding: key, as: UTF8.self), key: key, meta: meta)
                purged += 1
            } else {
                try setExpiryRecord(key, old: record, new: remaining)
            }
        }
        return (purged, due.count == limit)
    }
}
