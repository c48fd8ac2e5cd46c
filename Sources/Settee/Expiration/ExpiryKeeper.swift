internal import SetteeStorage

/// Expiry's share of an open database: the sweeper that purges documents when they are due.
final class ExpiryKeeper: Sendable {
    let sweeper: ExpirySweeper

    init(clock: any ExpirationClock, name: String) {
        sweeper = ExpirySweeper(clock: clock, name: name)
    }
}

/// Expiry's part in one write transaction: a purged document loses its expiration record, a
/// deletion gets its tombstone's eviction time (a resurrection loses it), and the sweeper
/// hears of the earliest due time the transaction added once it committed.
final class ExpiryCommit: CommitParticipant {
    /// The earliest due time this transaction put in `doc.expiry`, for the sweeper.
    var earliestDue: UInt64?

    func documentChanged(_ change: inout CommittedDocument, in c: WriteContext) throws {
        guard let new = change.new else {
            try c.removeExpiry(change.key)
            return
        }
        // Only deletions and resurrections look at the expiry trees, so a save of a live
        // document costs nothing more.
        let deleted = new.flags.contains(.deleted)
        let wasDeleted = change.old.map { $0.flags.contains(.deleted) }
        if deleted || wasDeleted == true {
            try c.updateEviction(change.key, deleted: deleted, wasDeleted: wasDeleted)
        }
    }

    func willCommit(_ c: WriteContext) throws {}

    func didCommit(_ c: WriteContext) {
        c.core.parts.expiry.sweeper.note(due: earliestDue)
    }
}
