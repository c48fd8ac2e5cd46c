/// A read-only view of one commit of a ``Store``, given to the body of ``Store/read(_:)``.
///
/// ```swift
/// try store.read { tx in
///     guard let people = tx.tree(named: "people") else { return }
///     try tx.forEach(in: people) { key, value in
///         print(String(decoding: key, as: UTF8.self))
///         return true
///     }
/// }
/// ```
///
/// - Important: Valid only inside the closure it was given to, like every buffer it hands out
///   (they point into the memory map). Use it from the thread that runs the closure.
public struct ReadTransaction {
    /// Borrowed, not counted: the reader's pin (``Store/withCurrentSnapshot(_:)``) or the
    /// caller's reference keeps it alive while the transaction is in use.
    let snapshotRef: Unmanaged<Snapshot>
    let context: ReadContext

    init(store: Store, snapshot: Unmanaged<Snapshot>) {
        snapshotRef = snapshot
        context = snapshot._withUnsafeGuaranteedRef { s in
            ReadContext(reader: store.reader(for: s), storeID: ObjectIdentifier(store))
        }
    }

    /// For a caller that holds `snapshot` for as long as it uses the transaction.
    init(store: Store, snapshot: Snapshot) {
        self.init(store: store, snapshot: Unmanaged.passUnretained(snapshot))
    }

    var snapshot: Snapshot { snapshotRef.takeUnretainedValue() }

    /// The tree called `name`, or nil when this snapshot has none.
    ///
    /// ```swift
    /// let people = try store.read { tx in tx.tree(named: "people") }
    /// ```
    ///
    /// ```swift
    /// let existing = try store.write { tx in tx.tree(named: "people") }
    /// ```
    public func tree(named name: String) -> Tree? {
        guard let id = snapshot.names[name] else { return nil }
        return Tree(name: name, id: id, storeID: context.storeID)
    }

    /// The number of the commit this snapshot shows.
    ///
    /// ```swift
    /// let seen = try store.read { tx in tx.commitID }
    /// ```
    public var commitID: UInt64 { snapshot.commitID }

    /// Calls `body` with the value stored under `key`, zero-copy; nil when the key is absent.
    ///
    /// ```swift
    /// let length = try store.read { tx in
    ///     try tx.withValue(forKey: Array("ada".utf8), in: people) { $0.count }
    /// }
    /// ```
    @inline(__always)
    public func withValue<R>(forKey key: UnsafeRawBufferPointer, in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let hit = try snapshotRef._withUnsafeGuaranteedRef { snapshot in
            let i = try context.checkedIndex(tree, in: snapshot)
            // The state is read where the snapshot keeps it: a copy would count a reference to a memory root.
            return try context.find(key, root: snapshot.trees[i].rootView(context.reader), tree: tree.name)
        }
        guard let hit else { return nil }
        return try context.withValue(hit, tree: tree.name, body)
    }

    /// Calls `body` with the value stored under `key`; nil when the key is absent.
    ///
    /// ```swift
    /// let n = try store.read { tx in try tx.withValue(forKey: Array("ada".utf8), in: people) { $0.count } }
    /// ```
    ///
    /// ```swift
    /// try store.write { tx in _ = try tx.withValue(forKey: Array("k".utf8), in: tree) { $0.count } }
    /// ```
    @inline(__always)
    public func withValue<R>(forKey key: [UInt8], in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try key.withUnsafeBytes { try withValue(forKey: $0, in: tree, body) }
    }

    /// A copy of the value stored under `key`, or nil.
    ///
    /// ```swift
    /// let value = try store.read { tx in try tx.value(forKey: Array("ada".utf8), in: people) }
    /// ```
    ///
    /// ```swift
    /// let old = try store.write { tx in try tx.value(forKey: Array("k".utf8), in: tree) }
    /// ```
    public func value(forKey key: [UInt8], in tree: Tree) throws -> [UInt8]? {
        try withValue(forKey: key, in: tree) { [UInt8]($0) }
    }

    /// Calls `body` with the value stored at `ref` by ``WriteTransaction/appendValue(_:)-(UnsafeRawBufferPointer)``.
    ///
    /// ```swift
    /// let body = try store.read { tx in try tx.withValue(at: ref) { [UInt8]($0) } }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidValueRef`` when `ref` names no value,
    ///   ``StorageError/Code/corrupted`` when the value is damaged.
    ///
    /// ```swift
    /// try store.write { tx in let r = try tx.appendValue(body); _ = try tx.withValue(at: r) { $0.count } }
    /// ```
    @inline(__always)
    public func withValue<R>(at ref: ValueRef, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try context.withExternal(ref.rawValue, tree: nil, body)
    }

    /// Visits entries in ascending (or, with `reverse`, descending) key order, starting at
    /// `start` (the first key >= `start`, or <= it when reversed) or at the first (last) entry.
    /// `body` returns false to stop.
    ///
    /// ```swift
    /// try store.read { tx in
    ///     try tx.forEach(in: people, from: Array("g".utf8)) { key, value in
    ///         return key.first == UInt8(ascii: "g")   // stop after the g's
    ///     }
    /// }
    /// ```
    ///
    /// ```swift
    /// try store.write { tx in try tx.forEach(in: tree) { key, _ in print(key.count); return true } }
    /// ```
    public func forEach(in tree: Tree, from start: [UInt8]? = nil, reverse: Bool = false,
                        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        let state = try context.check(tree, snapshot.state(tree.id))
        if let start {
            try start.withUnsafeBytes { try context.forEach(state, from: $0, reverse: reverse, body) }
        } else {
            try context.forEach(state, from: nil, reverse: reverse, body)
        }
    }

    /// The number of entries in `tree`.
    ///
    /// ```swift
    /// let n = try store.read { tx in try tx.count(in: people) }
    /// ```
    ///
    /// ```swift
    /// let n = try store.write { tx in try tx.count(in: tree) }
    /// ```
    public func count(in tree: Tree) throws -> Int {
        try context.check(tree, snapshot.state(tree.id)).count
    }

    /// The number of entries whose keys `k` lie in `start <= k < end` (a nil bound is open).
    /// It costs the leaves the range spans, not its entries: every leaf between the bounds is
    /// taken whole by its count.
    ///
    /// ```swift
    /// let gs = try store.read { tx in try tx.count(in: people, from: Array("g".utf8), to: Array("h".utf8)) }
    /// ```
    public func count(in tree: Tree, from start: [UInt8]?, to end: [UInt8]?) throws -> Int {
        let state = try context.check(tree, snapshot.state(tree.id))
        return try withOptionalBytes(start) { s in try withOptionalBytes(end) { e in try context.count(state, from: s, to: e) } }
    }

    /// The names of every tree, in creation order.
    ///
    /// ```swift
    /// let names = try store.read { tx in tx.treeNames }   // ["by-id", "by-seq"]
    /// ```
    public var treeNames: [String] { snapshot.trees.map(\.name) }
}

/// Calls `body` with the bytes of `bytes`, or with nil.
@inline(__always) func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
    guard let bytes else { return try body(nil) }
    return try bytes.withUnsafeBytes { try body($0) }
}
