/// One commit of a ``Store`` held for reading across calls, from ``Store/snapshot()``.
///
/// ```swift
/// let held = store.snapshot()
/// let n = try held.read { tx in try tx.count(in: people) }
/// ```
///
/// - Note: Thread-safe: ``read(_:)`` may be called from any thread, concurrently. The
///   transaction and buffers a read hands out are valid only inside its closure.
public final class StoreSnapshot: @unchecked Sendable {
    // Immutable after init; the strong reference keeps the commit's nodes and map alive.
    private let store: Store
    private let snapshot: Snapshot

    init(store: Store, snapshot: Snapshot) {
        self.store = store
        self.snapshot = snapshot
    }

    /// The number of the commit held.
    ///
    /// ```swift
    /// print(held.commitID)
    /// ```
    public var commitID: UInt64 { snapshot.commitID }

    /// Runs `body` on the held commit.
    ///
    /// ```swift
    /// let value = try held.read { tx in try tx.value(forKey: Array("ada".utf8), in: people) }
    /// ```
    public func read<R>(_ body: (ReadTransaction) throws -> R) rethrows -> R {
        try body(ReadTransaction(store: store, snapshot: snapshot))
    }
}
