/// A position in one tree that moves an entry at a time, forwards or backwards, and lends the
/// key and value it is on in place: nothing is copied or counted per entry. Where
/// ``ReadTransaction/forEach(in:from:reverse:_:)`` calls back, a cursor is pulled, so several
/// can be merged (one per key range, stepped in turn).
///
/// ```swift
/// try store.read { tx in
///     let cursor = try tx.cursor(in: people, from: Array("g".utf8))
///     while cursor.isValid, cursor.key.first == UInt8(ascii: "g") {
///         let length = try cursor.withValue { $0.count }
///         print(String(decoding: cursor.key, as: UTF8.self), length)
///         try cursor.next()
///     }
/// }
/// ```
///
/// - Important: Valid only inside the transaction's closure, like the transaction (``key`` and
///   the buffers ``withValue(_:)`` lends point into the memory map). In a write transaction, a
///   put or delete made after the cursor was created ends it: its next move or read throws
///   ``StorageError/Code/invalidArgument``, as does any use once the transaction has ended.
///   Not thread-safe: one thread moves it.
public final class TreeCursor {
    private struct Frame {
        let view: NodeView
        /// Keeps a memory node (and so the view's bytes) alive while the cursor is in it.
        let memory: MemNode?
        var index: Int
    }

    private let context: ReadContext
    /// The tree as the cursor was made for it (it keeps a memory root alive).
    private let state: TreeState
    /// Whether ``next()`` moves towards smaller keys.
    public let reverse: Bool
    private var frames: [Frame] = []
    private let scratch: UnsafeMutableRawPointer
    private var keyLength = 0
    /// Whether the leaf on top has its prefix in `scratch`.
    private var prefixLoaded = false
    /// The write transaction the cursor reads, and its count of changes when the cursor was made.
    private let writer: WriteTransaction?
    private let changes: UInt64

    init(context: ReadContext, state: TreeState, reverse: Bool, writer: WriteTransaction?) {
        self.context = context
        self.state = state
        self.reverse = reverse
        self.writer = writer
        changes = writer?.changes ?? 0
        scratch = .allocate(byteCount: StoreConfiguration.maxKeyLength, alignment: 16)
        frames.reserveCapacity(8)
    }

    deinit { scratch.deallocate() }

    /// Whether the cursor is on an entry (false once it has moved past the last one in its
    /// direction, or when the tree has none from where it was placed).
    public var isValid: Bool { !frames.isEmpty }

    /// The key of the entry the cursor is on, lent until it moves (empty when not ``isValid``).
    ///
    /// ```swift
    /// let first = try store.read { tx -> [UInt8]? in
    ///     let cursor = try tx.cursor(in: people)
    ///     return cursor.isValid ? Array(cursor.key) : nil
    /// }
    /// ```
    public var key: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: scratch, count: keyLength) }

    /// Calls `body` with the value of the entry the cursor is on, lent for the call.
    ///
    /// ```swift
    /// let size = try store.read { tx in try tx.cursor(in: people).withValue { $0.count } }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidArgument`` when the cursor is on no entry or its
    ///   write transaction changed or ended; ``StorageError/Code/corrupted`` for a damaged value.
    public func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try usable()
        guard let top = frames.last else { throw StorageError(code: .invalidArgument, reason: "the cursor is on no entry", tree: state.name) }
        return try context.withValue(LeafHit(view: top.view, index: top.index), tree: state.name, body)
    }

    /// Places the cursor on the first key at or after `key` (with ``reverse``, the last key at
    /// or before it); on the first (last) key of the tree when `key` is nil.
    ///
    /// ```swift
    /// try store.read { tx in
    ///     let cursor = try tx.cursor(in: people)
    ///     try cursor.seek(Array("m".utf8))
    /// }
    /// ```
    public func seek(_ key: [UInt8]?) throws {
        if let key { try key.withUnsafeBytes { try seek(bytes: $0) } } else { try seek(bytes: nil) }
    }

    /// ``seek(_:)`` with borrowed bytes.
    ///
    /// ```swift
    /// try store.read { tx in try Array("m".utf8).withUnsafeBytes { try tx.cursor(in: people).seek(bytes: $0) } }
    /// ```
    public func seek(bytes key: UnsafeRawBufferPointer?) throws {
        try usable()
        frames.removeAll(keepingCapacity: true)
        keyLength = 0
        guard let root = state.root else { return }
        try descend(root, height: nil, key: key)
        try settle()
    }

    /// Moves to the next entry in the cursor's direction; after the last one the cursor is no
    /// longer ``isValid``. On no entry, it does nothing.
    ///
    /// ```swift
    /// try store.read { tx in
    ///     let cursor = try tx.cursor(in: people)
    ///     while cursor.isValid { try cursor.next() }
    /// }
    /// ```
    public func next() throws {
        try usable()
        guard !frames.isEmpty else { return }
        frames[frames.count - 1].index += reverse ? -1 : 1
        try settle()
    }

    private func usable() throws(StorageError) {
        guard let writer else { return }
        try writer.checkCursor(madeAt: changes)
    }

    /// Pushes the nodes from `ref` down to a leaf: towards `key` (the first or last child when
    /// nil), the leaf's index at `key`'s place in the cursor's direction.
    private func descend(_ ref: NodeRef, height: Int?, key: UnsafeRawBufferPointer?) throws(StorageError) {
        var ref = ref
        var height = height
        let keyPointer = key.map { $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)! }
        while true {
            guard frames.count < maxTreeHeight else {
                throw StorageError.corrupted("tree deeper than \(maxTreeHeight)", offset: nil, tree: state.name)
            }
            let view = try context.reader.view(ref, height: height, tree: state.name)
            var memory: MemNode?
            if case .memory(let m) = ref { memory = m }
            let n = view.count
            if view.isLeaf {
                var i = reverse ? n - 1 : 0
                if let key, let keyPointer {
                    let (lb, found) = view.lowerBound(keyPointer, key.count)
                    i = reverse ? (found ? lb : lb - 1) : lb
                }
                frames.append(Frame(view: view, memory: memory, index: i))
                prefixLoaded = false
                return
            }
            var i = reverse ? n - 1 : 0
            if let key, let keyPointer, n > 0 { i = view.childIndex(keyPointer, key.count) }
            frames.append(Frame(view: view, memory: memory, index: i))
            // An empty branch (which a sound tree never has) is left by `settle`.
            guard i >= 0, i < n else { return }
            ref = try context.reader.child(of: view, memory: memory, at: i, tree: state.name)
            height = view.height - 1
        }
    }

    /// From wherever the top frame's index points, goes on to the nearest entry in the cursor's
    /// direction (climbing out of exhausted nodes and down the next child), and lends its key.
    private func settle() throws(StorageError) {
        while let top = frames.last {
            if top.index >= 0, top.index < top.view.count {
                if top.view.isLeaf {
                    loadKey(top)
                    return
                }
                let child = try context.reader.child(of: top.view, memory: top.memory, at: top.index, tree: state.name)
                try descend(child, height: top.view.height - 1, key: nil)
                continue
            }
            frames.removeLast()
            if !frames.isEmpty { frames[frames.count - 1].index += reverse ? -1 : 1 }
        }
        keyLength = 0
    }

    private func loadKey(_ leaf: Frame) {
        let p = leaf.view.prefixLength
        if !prefixLoaded {
            if p > 0 { scratch.copyMemory(from: leaf.view.prefix, byteCount: p) }
            prefixLoaded = true
        }
        let (s, sn) = leaf.view.suffix(leaf.index)
        if sn > 0 { (scratch + p).copyMemory(from: s, byteCount: sn) }
        keyLength = p + sn
    }
}

extension ReadTransaction {
    /// A cursor over `tree` placed as ``TreeCursor/seek(_:)`` places it: on the first key at or
    /// after `start` (with `reverse`, the last at or before it; nil: the tree's first or last).
    ///
    /// ```swift
    /// let names = try store.read { tx in
    ///     let cursor = try tx.cursor(in: people)
    ///     var names: [String] = []
    ///     while cursor.isValid { names.append(String(decoding: cursor.key, as: UTF8.self)); try cursor.next() }
    ///     return names
    /// }
    /// ```
    public func cursor(in tree: Tree, from start: [UInt8]? = nil, reverse: Bool = false) throws -> TreeCursor {
        let cursor = TreeCursor(context: context, state: try context.check(tree, snapshot.state(tree.id)), reverse: reverse, writer: nil)
        try cursor.seek(start)
        return cursor
    }
}

extension WriteTransaction {
    /// A cursor over `tree` as this transaction sees it, placed as
    /// ``ReadTransaction/cursor(in:from:reverse:)`` places one; a put or delete in this
    /// transaction after it was made ends it.
    ///
    /// ```swift
    /// try store.write { tx in
    ///     let cursor = try tx.cursor(in: people, reverse: true)
    ///     if cursor.isValid { print("last:", String(decoding: cursor.key, as: UTF8.self)) }
    /// }
    /// ```
    public func cursor(in tree: Tree, from start: [UInt8]? = nil, reverse: Bool = false) throws -> TreeCursor {
        try checkCursor(madeAt: changes)
        let cursor = TreeCursor(context: context, state: trees[try index(tree)], reverse: reverse, writer: self)
        try cursor.seek(start)
        return cursor
    }
}
