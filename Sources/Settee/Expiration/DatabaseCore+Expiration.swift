import Foundation
internal import SetteeStorage

extension DatabaseCore {
    /// Index entries handled per write transaction by the sweeper and
    /// ``purgeExpiredDocuments(asOf:)``: small enough that a writer waiting behind a batch is
    /// not held up long, large enough that the commits (each a `fdatasync` with `fullSync`) do
    /// not dominate.
    static let expiryBatchSize = 1000

    /// Purges every document due at `date` (expired, or an old tombstone under
    /// ``DatabaseConfiguration/tombstoneMaxAge``), in batches that are each a short write
    /// transaction of their own, and returns how many it purged. Each purge takes a sequence
    /// and listeners hear of it (``DocumentChange/isPurged``). Compaction calls this first.
    func purgeExpiredDocuments(asOf date: Date) throws -> Int {
        let seconds = ExpiryTime.seconds(roundingDown: date)
        var total = 0
        // Inside a batch the index is the batch's own; otherwise a snapshot read tells whether
        // anything is due before the write lock is taken.
        func due() throws -> Bool {
            if batchTransactionOnThisThread() != nil { return true }
            guard let next = try nextDue() else { return false }
            return next <= seconds
        }
        while try due() {
            let r = try write { c in try c.purgeExpired(asOf: seconds, limit: Self.expiryBatchSize) }
            total += r.purged
            guard r.more else { break }
            yieldToWriters()
        }
        return total
    }

    /// One pass of the sweeper: what ``purgeExpiredDocuments(asOf:)`` does, giving up between
    /// batches when the database is closing; returns the next due time (whole seconds).
    func sweep(asOf now: Date, stopping: () -> Bool) throws -> UInt64? {
        let seconds = ExpiryTime.seconds(roundingDown: now)
        // The write lock is taken only when a snapshot shows something due.
        while let next = try nextDue() {
            guard next <= seconds else { return next }
            guard try writeForSweeper(stopping: stopping, { c in
                try c.purgeExpired(asOf: seconds, limit: Self.expiryBatchSize)
            }) != nil else { return nil }
            yieldToWriters()
        }
        return nil
    }

    /// The earliest due time in `doc.expiry`, in the last commit.
    func nextDue() throws -> UInt64? {
        try translating {
            try store.read { tx -> UInt64? in
                var due: UInt64?
                try tx.forEach(in: trees.expiry, from: nil, reverse: false) { k, _ in
                    guard let e = ExpiryKey.parse(k) else { throw SetteeError(.corrupted, "an expiry key is malformed") }
                    due = e.due
                    return false
                }
                return due
            }
        }
    }

    /// `write` for the sweeper's thread: waits for the lock in short slices, so that closing the
    /// database from a thread that holds the lock (inside a batch) cannot deadlock on the
    /// sweeper; nil when it gave up.
    private func writeForSweeper<R>(stopping: () -> Bool, _ body: (WriteContext) throws -> R) throws -> R? {
        while !writeLock.lock(before: Date(timeIntervalSinceNow: 0.05)) {
            if stopping() { return nil }
        }
        defer { writeLock.unlock() }
        if stopping() { return nil }
        return try writeHoldingLock(body)
    }

    /// Between two batches: lets writers that wait for the lock take it first (a lock is not
    /// fair; the sweeper would otherwise take it back at once). Bounded to about 2 ms.
    func yieldToWriters() {
        if batchTransactionOnThisThread() != nil { return }
        var rounds = 0
        while file.waitingWriters.load(ordering: .relaxed) > 0 && rounds < 40 {
            usleep(50)
            rounds += 1
        }
    }
}
