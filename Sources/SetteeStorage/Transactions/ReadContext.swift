
/// What reads need, shared by read and write transactions: the trees as this transaction sees
/// them, the node reader, and (in a write transaction) the commit being built, whose values are
/// not in the file yet.
struct ReadContext {
    let reader: NodeReader
    let storeID: ObjectIdentifier
    /// The first file offset of the pending commit record and its bytes so far.
    var pendingStart: UInt64 = .max
    var pending: ByteWriter?

    static func noSuchTree(_ tree: Tree) -> StorageError {
        StorageError(code: .noSuchTree, reason: "the tree does not exist in this snapshot", tree: tree.name)
    }

    /// The index of `tree` in `snapshot`'s trees, checked as ``check(_:_:)`` does, without copying the state.
    @inline(__always) func checkedIndex(_ tree: Tree, in snapshot: Snapshot) throws(StorageError) -> Int {
        let i = Int(tree.id) - 1
        guard tree.storeID == storeID, i >= 0, i < snapshot.trees.count, snapshot.trees[i].name == tree.name else {
            throw ReadContext.noSuchTree(tree)
        }
        return i
    }

    @inline(__always) func check(_ tree: Tree, _ state: TreeState?) throws(StorageError) -> TreeState {
        guard tree.storeID == storeID, let state, state.name == tree.name else {
            throw ReadContext.noSuchTree(tree)
        }
        return state
    }

    /// Calls `body` with the bytes of the value of leaf entry `hit`.
    @inline(__always) func withValue<R>(_ hit: LeafHit, tree: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let (kind, bytes, count) = hit.view.value(hit.index)
        if kind == NodeField.valueInline {
            return try body(UnsafeRawBufferPointer(start: bytes, count: count))
        }
        return try withExternal(bytes.u64(0), tree: tree, body)
    }

    /// A reference a tree holds is part of the file, so a bad one is damage; one the caller
    /// passed is misuse.
    static func badReference(_ reason: String, _ ref: UInt64, _ tree: String?) -> StorageError {
        if tree != nil { return StorageError.corrupted(reason, offset: ref, tree: tree) }
        return StorageError(code: .invalidValueRef, reason: reason, offset: ref)
    }

    /// A value entry as stored: checked against its checksum, not decompressed.
    struct StoredValue {
        let data: UnsafeRawPointer
        let stored: Int
        let raw: Int
        let compressed: Bool
    }

    /// The bytes of the value entry at `ref`, bounds-checked (header and stored length), not
    /// yet checked against its checksum.
    func valueEntry(_ ref: UInt64, tree: String?) throws(StorageError) -> (entry: UnsafeRawPointer, stored: Int) {
        let entry: UnsafeRawPointer
        let available: UInt64
        if ref >= pendingStart, let pending {
            let at = ref - pendingStart
            guard at < UInt64(pending.count) else { throw Self.badReference("reference beyond the log", ref, tree) }
            entry = UnsafeRawPointer(pending.base) + Int(at)
            available = UInt64(pending.count) - at
        } else {
            guard ref >= Layout.logStart, ref < reader.end else {
                throw Self.badReference("reference outside the log", ref, tree)
            }
            entry = reader.base + Int(ref)
            available = reader.end - ref
        }
        guard available >= UInt64(Layout.valueHeaderSize), entry.u8(Layout.vKind) == Layout.opValue else {
            throw Self.badReference("no value at reference", ref, tree)
        }
        let stored = Int(entry.u32(Layout.vStoredLength))
        guard UInt64(stored) <= available - UInt64(Layout.valueHeaderSize) else {
            throw StorageError.corrupted("value length out of range", offset: ref, tree: tree)
        }
        return (entry, stored)
    }

    /// Finds and checks the value entry at `ref`.
    func storedValue(_ ref: UInt64, tree: String?) throws(StorageError) -> StoredValue {
        let (entry, stored) = try valueEntry(ref, tree: tree)
        let raw = Int(entry.u32(Layout.vRawLength))
        let flags = entry.u8(Layout.vFlags)
        guard raw <= StoreConfiguration.maxValueLength else {
            throw StorageError.corrupted("value length out of range", offset: ref, tree: tree)
        }
        let data = entry + Layout.valueHeaderSize
        // Start every line of the value loading at once, so its misses overlap.
        CPU.prefetch(data, stored)
        // Values of 64 bytes or more are verified once per process: the bit of the 64-byte block
        // holding their last byte (no two such values end in one block, and no node record starts
        // in a block that holds a value byte).
        let inFile = pending == nil || ref < pendingStart
        let lastByte = ref + UInt64(Layout.valueHeaderSize + stored) - 1
        let cacheable = inFile && Layout.valueHeaderSize + stored >= 64
        if !(cacheable && reader.isVerified(lastByte)) {
            var crc = crc32c(checksumSeed(salt: reader.salt, offset: ref), entry, Layout.vChecksum)
            crc = crc32c(crc, data, stored)
            guard checksumMatches(crc, entry.u32(Layout.vChecksum)) else {
                throw StorageError.corrupted("value checksum mismatch", offset: ref, tree: tree)
            }
            if cacheable { reader.markVerified(lastByte) }
        }
        let compressed = flags & Layout.valueFlagLZ4 != 0
        if !compressed {
            guard raw == stored else { throw StorageError.corrupted("value length mismatch", offset: ref, tree: tree) }
        } else {
            guard LZ4.canExpand(stored, to: raw) else {
                throw StorageError.corrupted("compressed value length out of range", offset: ref, tree: tree)
            }
        }
        return StoredValue(data: data, stored: stored, raw: raw, compressed: compressed)
    }

    /// Calls `body` with the stored value at `ref`, checked against its checksum and decompressed.
    func withExternal<R>(_ ref: UInt64, tree: String?, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let v = try storedValue(ref, tree: tree)
        if !v.compressed {
            return try body(UnsafeRawBufferPointer(start: v.data, count: v.stored))
        }
        let out = try decompressed(v, ref: ref, tree: tree)
        defer { out.deallocate() }
        return try body(UnsafeRawBufferPointer(start: out, count: v.raw))
    }

    /// A compressed value's bytes in a new heap buffer the caller deallocates. Kept apart from
    /// the generic `withExternal`: a stack buffer there (`withUnsafeTemporaryAllocation`) made
    /// every read, compressed or not, look up generic metadata, which cost more than this malloc.
    private func decompressed(_ v: StoredValue, ref: UInt64, tree: String?) throws(StorageError) -> UnsafeMutableRawPointer {
        let out = UnsafeMutableRawPointer.allocate(byteCount: max(v.raw, 1), alignment: 16)
        guard LZ4.decompress(v.data, count: v.stored, into: out, rawCount: v.raw) else {
            out.deallocate()
            throw StorageError.corrupted("compressed value does not decompress", offset: ref, tree: tree)
        }
        return out
    }

    /// The leaf entry for `key` below `root` (from ``TreeState/rootView(_:)``), or nil.
    @inline(__always) func find(_ key: UnsafeRawBufferPointer, root: (view: NodeView, inMemory: Bool)?, tree: String) throws -> LeafHit? {
        guard let root else { return nil }
        return try reader.find(key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, key.count, root: root, tree: tree)
    }

    /// Visits entries in key order from `start` (inclusive; from the first or last when nil).
    /// Returns false when `body` stopped the walk.
    func forEach(_ state: TreeState, from start: UnsafeRawBufferPointer?, reverse: Bool,
                 _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        guard let root = state.root else { return }
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: StoreConfiguration.maxKeyLength, alignment: 16)
        defer { scratch.deallocate() }
        _ = try walk(root, height: nil, depth: 0, start: start, reverse: reverse, state: state, scratch: scratch, body)
    }

    /// The number of keys `k` with `start <= k < end` (either bound nil: open). It reads the
    /// nodes along both bounds' paths and takes every leaf between them by its entry count,
    /// so it costs the leaves of the range, not its entries.
    func count(_ state: TreeState, from start: UnsafeRawBufferPointer?, to end: UnsafeRawBufferPointer?) throws -> Int {
        guard let root = state.root else { return 0 }
        if let start, let end, compareBytes(Self.pointer(start), start.count, Self.pointer(end), end.count) >= 0 { return 0 }
        return try countRange(root, height: nil, depth: 0, start: start, end: end, tree: state.name)
    }

    /// A bound's bytes as the node views compare them (an empty key has no base address).
    private static func pointer(_ b: UnsafeRawBufferPointer) -> UnsafeRawPointer { b.baseAddress ?? UnsafeRawPointer(bitPattern: 1)! }

    private func countRange(_ ref: NodeRef, height: Int?, depth: Int, start: UnsafeRawBufferPointer?, end: UnsafeRawBufferPointer?,
                            tree: String) throws(StorageError) -> Int {
        guard depth < maxTreeHeight else { throw StorageError.corrupted("tree deeper than \(maxTreeHeight)", offset: nil, tree: tree) }
        let view = try reader.view(ref, height: height, tree: tree)
        let n = view.count
        let pointer = Self.pointer
        if view.isLeaf {
            let first = start.map { view.lowerBound(pointer($0), $0.count).index } ?? 0
            let last = end.map { view.lowerBound(pointer($0), $0.count).index } ?? n
            return max(0, last - first)
        }
        guard n > 0 else { return 0 }
        var memory: MemNode?
        if case .memory(let m) = ref { memory = m }
        let first = start.map { view.childIndex(pointer($0), $0.count) } ?? 0
        let last = end.map { view.childIndex(pointer($0), $0.count) } ?? n - 1
        guard first <= last else { return 0 }
        func child(_ i: Int, _ s: UnsafeRawBufferPointer?, _ e: UnsafeRawBufferPointer?) throws(StorageError) -> Int {
            try countRange(try reader.child(of: view, memory: memory, at: i, tree: tree), height: view.height - 1, depth: depth + 1,
                           start: s, end: e, tree: tree)
        }
        if first == last { return try child(first, start, end) }
        var total = try child(first, start, nil)
        // The children between the two bounds' paths lie wholly inside the range.
        for i in (first + 1)..<last { total += try child(i, nil, nil) }
        return total + (try child(last, nil, end))
    }

    private func walk(_ ref: NodeRef, height: Int?, depth: Int, start: UnsafeRawBufferPointer?, reverse: Bool, state: TreeState,
                      scratch: UnsafeMutableRawPointer,
                      _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        guard depth < maxTreeHeight else { throw StorageError.corrupted("tree deeper than \(maxTreeHeight)", offset: nil, tree: state.name) }
        let view = try reader.view(ref, height: height, tree: state.name)
        var memory: MemNode?
        if case .memory(let m) = ref { memory = m }
        let n = view.count
        let startPtr = start.map { $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)! }
        if view.isLeaf {
            var i: Int
            if let start, let sp = startPtr {
                let (lb, found) = view.lowerBound(sp, start.count)
                i = reverse ? (found ? lb : lb - 1) : lb
            } else {
                i = reverse ? n - 1 : 0
            }
            let p = view.prefixLength
            if p > 0 { scratch.copyMemory(from: view.prefix, byteCount: p) }
            while i >= 0 && i < n {
                let (s, sn) = view.suffix(i)
                if sn > 0 { (scratch + p).copyMemory(from: s, byteCount: sn) }
                let key = UnsafeRawBufferPointer(start: scratch, count: p + sn)
                let go = try withValue(LeafHit(view: view, index: i), tree: state.name) { try body(key, $0) }
                if !go { return false }
                // The body may not change the key buffer; the prefix stays in place.
                i += reverse ? -1 : 1
            }
            return true
        }
        var i = startPtr.map { view.childIndex($0, start!.count) } ?? (reverse ? n - 1 : 0)
        var first = true
        while i >= 0 && i < n {
            let child = try reader.child(of: view, memory: memory, at: i, tree: state.name)
            if !(try walk(child, height: view.height - 1, depth: depth + 1, start: first ? start : nil, reverse: reverse, state: state, scratch: scratch, body)) {
                return false
            }
            first = false
            i += reverse ? -1 : 1
        }
        return true
    }
}
