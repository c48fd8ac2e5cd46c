/// The one write transaction of a ``Store``, given to the body of ``Store/write(_:)``. It sees its
/// own changes; nobody else does until it commits.
///
/// ```swift
/// try store.write { tx in
///     let people = try tx.createTree(named: "people")
///     try tx.put(Array("ada".utf8), Array("Lovelace".utf8), in: people)
///     if try tx.value(forKey: Array("ada".utf8), in: people) == nil { throw MyError.impossible }
/// }
/// ```
///
/// - Important: Valid only inside the closure it was given to, on the thread that runs it.
///   Not thread-safe.
public final class WriteTransaction {
    unowned let store: Store
    // Only the transaction's own thread touches these, and never with overlapping accesses: the
    // run-time exclusivity checks on them cost about a tenth of a bulk load's instructions.
    @exclusivity(unchecked) var trees: [TreeState]
    @exclusivity(unchecked) var editor: TreeEditor
    let context: ReadContext
    /// The snapshot this transaction started from.
    let base: Snapshot
    // What the hot paths need, held directly: reaching them through `store` (unowned) costs
    // reference counting on every operation.
    private let values: ByteWriter
    private let operations: ByteWriter
    private let compressor: LZ4.Compressor
    private let salt: UInt64
    private let compressionThreshold: Int
    let commitID: UInt64
    @exclusivity(unchecked) private(set) var hasOperations = false
    /// Keys this transaction put or deleted, recorded only while a compaction runs (it copies
    /// them again before swapping files).
    private let journaling: Bool
    /// False in a compaction target (see `Store.WriterState.isCompactionTarget`).
    private let logging: Bool
    @exclusivity(unchecked) private(set) var touched: [(tree: UInt32, key: [UInt8])] = []
    /// Bytes of value entries in the pending commit (replay skips them by their length).
    @exclusivity(unchecked) private(set) var valueBytes = 0
    private var finished = false
    /// Puts and deletes so far: a cursor made before the last one is ended (``TreeCursor``).
    @exclusivity(unchecked) private(set) var changes: UInt64 = 0

    init(store: Store, snapshot: Snapshot, transaction: UInt64) {
        self.store = store
        base = snapshot
        trees = snapshot.trees
        let reader = store.reader(for: snapshot)
        editor = TreeEditor(reader: reader, owner: transaction + Recovery.replayOwner)
        commitID = snapshot.commitID + 1
        let w = store.writer.buffer
        w.reset()
        w.zeros(Layout.recordHeaderSize)
        w.u64(commitID)
        store.writer.operations.reset()
        values = w
        operations = store.writer.operations
        compressor = store.writer.compressor
        salt = store.salt
        compressionThreshold = store.configuration.compressionThreshold
        journaling = store.writer.journal != nil
        logging = !store.writer.isCompactionTarget
        context = ReadContext(reader: reader, storeID: ObjectIdentifier(store), pendingStart: store.writer.logEnd, pending: w)
    }

    func finish() { finished = true }

    private func usable() throws(StorageError) {
        if finished { throw StorageError(code: .invalidArgument, reason: "the write transaction has ended") }
    }

    /// Throws unless a cursor made when ``changes`` was `madeAt` may still move.
    func checkCursor(madeAt: UInt64) throws(StorageError) {
        try usable()
        if changes != madeAt {
            throw StorageError(code: .invalidArgument, reason: "the transaction changed its trees after the cursor was made")
        }
    }

    func index(_ tree: Tree) throws(StorageError) -> Int {
        let i = Int(tree.id) - 1
        // Checked in place: copying the state would count a reference to its root on every put.
        guard tree.storeID == context.storeID, i >= 0, i < trees.count, trees[i].name == tree.name else {
            throw ReadContext.noSuchTree(tree)
        }
        return i
    }

    // MARK: - Trees

    /// The tree called `name`, created when missing.
    ///
    /// ```swift
    /// let byID = try store.write { tx in try tx.createTree(named: "by-id") }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidArgument`` for an empty name or one over 255 UTF-8 bytes.
    public func createTree(named name: String) throws -> Tree {
        try usable()
        if let t = tree(named: name) { return t }
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else {
            throw StorageError(code: .invalidArgument, reason: "tree names are 1 to 255 UTF-8 bytes")
        }
        let id = UInt32(trees.count + 1)
        let w = operations
        w.u8(Layout.opCreateTree)
        w.varint(UInt64(id))
        w.varint(UInt64(bytes.count))
        bytes.withUnsafeBytes { w.append($0) }
        hasOperations = true
        trees.append(TreeState(id: id, name: name, root: nil, count: 0))
        return Tree(name: name, id: id, storeID: context.storeID)
    }

    /// The tree called `name`, or nil.
    ///
    /// ```swift
    /// let existing = try store.write { tx in tx.tree(named: "people") }
    /// ```
    public func tree(named name: String) -> Tree? {
        guard let t = trees.first(where: { $0.name == name }) else { return nil }
        return Tree(name: name, id: t.id, storeID: context.storeID)
    }

    // MARK: - Writing

    /// Stores `value` under `key`, replacing what was there. Values over
    /// ``StoreConfiguration/maxInlineValueLength`` bytes are stored out of line automatically.
    ///
    /// ```swift
    /// try store.write { tx in try tx.put(Array("k".utf8), Array("v".utf8), in: tree) }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidKey`` (longer than ``StoreConfiguration/maxKeyLength``),
    ///   ``StorageError/Code/valueTooLarge``, ``StorageError/Code/noSuchTree``.
    public func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, in tree: Tree) throws {
        try usable()
        let i = try index(tree)
        guard key.count <= StoreConfiguration.maxKeyLength else {
            throw StorageError(code: .invalidKey, reason: "keys are at most \(StoreConfiguration.maxKeyLength) bytes", tree: tree.name)
        }
        guard value.count <= StoreConfiguration.maxValueLength else {
            throw StorageError(code: .valueTooLarge, reason: "values are at most \(StoreConfiguration.maxValueLength) bytes", tree: tree.name)
        }
        var kind = NodeField.valueInline
        var ref: UInt64 = 0
        if value.count > StoreConfiguration.maxInlineValueLength {
            kind = NodeField.valueExternal
            ref = try appendEntry(value)
        }
        let w = operations
        let logging = logging
        if logging {
            w.u8(Layout.opPut)
            w.varint(UInt64(tree.id))
            w.varint(UInt64(key.count))
            w.append(key)
            w.u8(kind)
        }
        try withUnsafeTemporaryAllocation(byteCount: 3 + StoreConfiguration.maxInlineValueLength, alignment: 8) { (tail: UnsafeMutableRawBufferPointer) throws in
            let t = tail.baseAddress!
            t.setU8(kind, at: 0)
            let length: Int
            if kind == NodeField.valueInline {
                length = value.count
                if logging {
                    w.varint(UInt64(length))
                    w.append(value)
                }
                if length > 0 { (t + 3).copyMemory(from: value.baseAddress!, byteCount: length) }
            } else {
                length = NodeField.externalValueLength
                if logging {
                    w.varint(UInt64(length))
                    w.u64(ref)
                    w.u32(UInt32(value.count))
                }
                t.setU64(ref, at: 3)
                t.setU32(UInt32(value.count), at: 11)
            }
            t.setU16(UInt16(length), at: 1)
            hasOperations = true
            changes &+= 1
            if journaling { touched.append((tree.id, Array(key))) }
            _ = try editor.put(&trees[i], key: key, tail: UnsafeRawBufferPointer(start: t, count: 3 + length))
        }
    }

    /// Stores `value` under `key`, replacing what was there.
    ///
    /// ```swift
    /// try store.write { tx in try tx.put(Array("k".utf8), Array("v".utf8), in: tree) }
    /// ```
    public func put(_ key: [UInt8], _ value: [UInt8], in tree: Tree) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try put(k, v, in: tree) } }
    }

    /// Removes `key`; returns whether it was there.
    ///
    /// ```swift
    /// let existed = try store.write { tx in try tx.delete(Array("k".utf8), in: tree) }
    /// ```
    @discardableResult
    public func delete(_ key: UnsafeRawBufferPointer, in tree: Tree) throws -> Bool {
        try usable()
        let i = try index(tree)
        guard try context.find(key, root: trees[i].rootView(context.reader), tree: tree.name) != nil else { return false }
        if logging {
            let w = operations
            w.u8(Layout.opDelete)
            w.varint(UInt64(tree.id))
            w.varint(UInt64(key.count))
            w.append(key)
        }
        hasOperations = true
        changes &+= 1
        if journaling { touched.append((tree.id, Array(key))) }
        try editor.delete(&trees[i], key: key)
        return true
    }

    /// Removes `key`; returns whether it was there.
    ///
    /// ```swift
    /// try store.write { tx in try tx.delete(Array("k".utf8), in: tree) }
    /// ```
    @discardableResult
    public func delete(_ key: [UInt8], in tree: Tree) throws -> Bool {
        try key.withUnsafeBytes { try delete($0, in: tree) }
    }

    /// Stores `bytes` out of line (LZ4-compressed when that pays) and returns where; keep the
    /// reference in a tree value to share one stored value between trees.
    ///
    /// ```swift
    /// try store.write { tx in
    ///     let ref = try tx.appendValue(body)
    ///     var entry = withUnsafeBytes(of: ref.rawValue.littleEndian, Array.init)
    ///     try tx.put(key, entry, in: bySequence)
    /// }
    /// ```
    ///
    /// A stored value lives as long as the log does; it is never changed.
    public func appendValue(_ bytes: UnsafeRawBufferPointer) throws -> ValueRef {
        try usable()
        guard bytes.count <= StoreConfiguration.maxValueLength else {
            throw StorageError(code: .valueTooLarge, reason: "values are at most \(StoreConfiguration.maxValueLength) bytes")
        }
        hasOperations = true
        return ValueRef(rawValue: try appendEntry(bytes))
    }

    /// Stores `bytes` out of line and returns where.
    ///
    /// ```swift
    /// let ref = try store.write { tx in try tx.appendValue(Array("body".utf8)) }
    /// ```
    public func appendValue(_ bytes: [UInt8]) throws -> ValueRef {
        try bytes.withUnsafeBytes { try appendValue($0) }
    }

    /// Stores a copy of the value at `ref` in `source` (another store's snapshot, or this one's)
    /// and returns where, copying its stored bytes as they are: a compressed value is not
    /// decompressed and compressed again. Compaction copies live values this way.
    ///
    /// ```swift
    /// let copied = try target.write { tx in try tx.appendValue(copying: ref, from: sourceTx) }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidValueRef`` when `ref` is not a value of `source`,
    ///   ``StorageError/Code/corrupted`` when the value is damaged.
    public func appendValue(copying ref: ValueRef, from source: ReadTransaction) throws -> ValueRef {
        try usable()
        let v = try source.context.storedValue(ref.rawValue, tree: nil)
        let w = values
        guard w.count + operations.count + v.stored <= Layout.maxRecordPayload else {
            throw StorageError(code: .valueTooLarge, reason: "transaction larger than \(Layout.maxRecordPayload) bytes")
        }
        hasOperations = true
        let at = w.count
        let offset = context.pendingStart + UInt64(at)
        w.reserve(Layout.valueHeaderSize + v.stored)
        let entry = w.base + at
        let data = entry + Layout.valueHeaderSize
        if v.stored > 0 { data.copyMemory(from: v.data, byteCount: v.stored) }
        seal(entry, offset: offset, flags: v.compressed ? Layout.valueFlagLZ4 : 0, stored: v.stored, raw: v.raw)
        w.count = at + Layout.valueHeaderSize + v.stored
        valueBytes += Layout.valueHeaderSize + v.stored
        return ValueRef(rawValue: offset)
    }

    /// Bytes of operations (puts, deletes) this transaction has recorded so far. They are replayed
    /// after a crash until the next checkpoint writes the trees' nodes, and are dead space from
    /// then on, until compaction.
    ///
    /// ```swift
    /// let overhead = try store.write { tx in try tx.put(k, v, in: tree); return tx.operationBytes }
    /// ```
    public var operationBytes: Int { operations.count }

    /// How many bytes of the log the value at `ref` occupies (its entry header and its stored,
    /// possibly compressed, bytes): what dropping it would reclaim.
    ///
    /// ```swift
    /// let reclaimable = try store.write { tx in try tx.storedSize(at: oldRef) }
    /// ```
    public func storedSize(at ref: ValueRef) throws -> Int {
        try usable()
        // Only the entry's header is read (bounds-checked): an estimate needs no checksum pass
        // over the old value, which a save would otherwise pay for on every update.
        return Layout.valueHeaderSize + (try context.valueEntry(ref.rawValue, tree: nil)).stored
    }

    /// Fills in a value entry's header and checksum (its bytes already follow it).
    @inline(__always)
    private func seal(_ entry: UnsafeMutableRawPointer, offset: UInt64, flags: UInt8, stored: Int, raw: Int) {
        entry.setU8(Layout.opValue, at: Layout.vKind)
        entry.setU8(flags, at: Layout.vFlags)
        entry.setU16(0, at: 2)
        entry.setU32(UInt32(stored), at: Layout.vStoredLength)
        entry.setU32(UInt32(raw), at: Layout.vRawLength)
        var crc = crc32c(checksumSeed(salt: salt, offset: offset), entry, Layout.vChecksum)
        crc = crc32c(crc, entry + Layout.valueHeaderSize, stored)
        entry.setU32(crc, at: Layout.vChecksum)
    }

    /// Writes a value entry into the pending commit; returns its file offset.
    private func appendEntry(_ bytes: UnsafeRawBufferPointer) throws(StorageError) -> UInt64 {
        let w = values
        guard w.count + operations.count + bytes.count <= Layout.maxRecordPayload else {
            throw StorageError(code: .valueTooLarge, reason: "transaction larger than \(Layout.maxRecordPayload) bytes")
        }
        let at = w.count
        let offset = context.pendingStart + UInt64(at)
        let threshold = compressionThreshold
        w.reserve(Layout.valueHeaderSize + max(bytes.count, bytes.count >= threshold ? LZ4.bound(bytes.count) : 0))
        let entry = w.base + at
        let data = entry + Layout.valueHeaderSize
        var flags: UInt8 = 0
        var stored = bytes.count
        if bytes.count >= threshold,
           let n = compressor.compressIfWorthwhile(bytes, into: data, capacity: LZ4.bound(bytes.count)) {
            flags = Layout.valueFlagLZ4
            stored = n
        } else if bytes.count > 0 {
            data.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        }
        seal(entry, offset: offset, flags: flags, stored: stored, raw: bytes.count)
        w.count = at + Layout.valueHeaderSize + stored
        valueBytes += Layout.valueHeaderSize + stored
        return offset
    }

    // MARK: - Reading (sees this transaction's changes)

    /// The number of the commit this transaction will be.
    ///
    /// ```swift
    /// let id = try store.write { tx in tx.commitIDToBe }
    /// ```
    public var commitIDToBe: UInt64 { commitID }

    /// Calls `body` with the value under `key` as this transaction sees it; nil when absent.
    ///
    /// ```swift
    /// try store.write { tx in
    ///     let old = try tx.withValue(forKey: key, in: tree) { [UInt8]($0) }
    /// }
    /// ```
    public func withValue<R>(forKey key: UnsafeRawBufferPointer, in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try usable()
        let i = try index(tree)
        guard let hit = try context.find(key, root: trees[i].rootView(context.reader), tree: tree.name) else { return nil }
        return try context.withValue(hit, tree: tree.name, body)
    }

    /// Calls `body` with the value under `key` as this transaction sees it; nil when absent.
    ///
    /// ```swift
    /// try store.write { tx in _ = try tx.withValue(forKey: Array("k".utf8), in: tree) { $0.count } }
    /// ```
    public func withValue<R>(forKey key: [UInt8], in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try key.withUnsafeBytes { try withValue(forKey: $0, in: tree, body) }
    }

    /// A copy of the value under `key` as this transaction sees it, or nil.
    ///
    /// ```swift
    /// let old = try store.write { tx in try tx.value(forKey: Array("k".utf8), in: tree) }
    /// ```
    public func value(forKey key: [UInt8], in tree: Tree) throws -> [UInt8]? {
        try withValue(forKey: key, in: tree) { [UInt8]($0) }
    }

    /// Calls `body` with the value stored at `ref`, including values appended by this transaction.
    ///
    /// ```swift
    /// try store.write { tx in let r = try tx.appendValue(body); _ = try tx.withValue(at: r) { $0.count } }
    /// ```
    public func withValue<R>(at ref: ValueRef, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try usable()
        return try context.withExternal(ref.rawValue, tree: nil, body)
    }

    /// Visits entries in key order as this transaction sees them (see ``ReadTransaction/forEach(in:from:reverse:_:)``).
    /// `body` must not change the tree while it runs.
    ///
    /// ```swift
    /// try store.write { tx in try tx.forEach(in: tree) { key, _ in print(key.count); return true } }
    /// ```
    public func forEach(in tree: Tree, from start: [UInt8]? = nil, reverse: Bool = false,
                        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try usable()
        let state = trees[try index(tree)]
        if let start {
            try start.withUnsafeBytes { try context.forEach(state, from: $0, reverse: reverse, body) }
        } else {
            try context.forEach(state, from: nil, reverse: reverse, body)
        }
    }

    /// The number of entries in `tree` as this transaction sees it.
    ///
    /// ```swift
    /// let n = try store.write { tx in try tx.count(in: tree) }
    /// ```
    public func count(in tree: Tree) throws -> Int {
        try usable()
        return trees[try index(tree)].count
    }

    /// The number of entries whose keys `k` lie in `start <= k < end` (a nil bound is open), as
    /// this transaction sees them; it costs the leaves the range spans, not its entries.
    ///
    /// ```swift
    /// let gs = try store.write { tx in try tx.count(in: tree, from: Array("g".utf8), to: Array("h".utf8)) }
    /// ```
    public func count(in tree: Tree, from start: [UInt8]?, to end: [UInt8]?) throws -> Int {
        try usable()
        let state = trees[try index(tree)]
        return try withOptionalBytes(start) { s in try withOptionalBytes(end) { e in try context.count(state, from: s, to: e) } }
    }
}
