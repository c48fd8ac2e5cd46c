
/// A node that lives in memory: created or copied by a write transaction, frozen once that
/// transaction commits (readers then share it), written to the log at the next checkpoint.
///
/// Same byte layout as a disk node, cells packed downward from the end of a `Layout.nodeSize`
/// buffer. A branch child that is itself in memory is a tagged child field holding the child's
/// address and its index in the children tables (``childField(_:index:)``): the tables own the
/// children, the fields let a descent reach them without touching the tables or a reference count.
/// Not thread-safe while owned by a write transaction; immutable afterwards.
final class MemNode: @unchecked Sendable {
    let buffer: UnsafeMutableRawPointer
    /// In-memory children, addressed by tagged child fields: indexes below `base.count` name
    /// `base`, the rest `added`. A copy shares `base` with its source without touching it
    /// (copying a branch retains one array, not every child); its own changes go to `added`.
    // Edited only by the owning transaction's thread, without overlapping accesses; unchecked at
    // run time (see `WriteTransaction.trees`).
    @exclusivity(unchecked) private(set) var base: [MemNode?] = []
    @exclusivity(unchecked) private(set) var added: [MemNode?] = []
    /// When `added` grows past this, the node folds its children into a new `base`.
    static let maxAdded = 32
    /// The transaction allowed to change this node in place.
    let owner: UInt64
    /// Bytes of dead cells (removed or replaced entries) below the free space.
    @exclusivity(unchecked) private var garbage = 0

    init(kind: NodeKind, height: Int, owner: UInt64) {
        buffer = UnsafeMutableRawPointer.allocate(byteCount: Layout.nodeSize, alignment: 16)
        self.owner = owner
        buffer.setU8(kind.rawValue, at: NodeField.kind)
        buffer.setU8(UInt8(height), at: NodeField.height)
        buffer.setU16(0, at: NodeField.count)
        buffer.setU16(0, at: NodeField.prefixLength)
        buffer.setU16(UInt16(Layout.nodeSize), at: NodeField.cellsStart)
    }

    /// A private copy of a node (from disk or a frozen memory node) for `owner` to change.
    init(copying source: NodeView, owner: UInt64) {
        buffer = UnsafeMutableRawPointer.allocate(byteCount: Layout.nodeSize, alignment: 16)
        self.owner = owner
        let p = source.prefixLength
        let n = source.count
        buffer.copyMemory(from: source.base, byteCount: NodeField.prefix + p)
        var top = Layout.nodeSize
        let slots = NodeField.prefix + p
        for i in 0..<n {
            let size = source.cellSize(i)
            top -= size
            (buffer + top).copyMemory(from: source.base + source.cellOffset(i), byteCount: size)
            buffer.setU16(UInt16(top), at: slots + i * 4)
            buffer.setU16(source.hint(i), at: slots + i * 4 + 2)
        }
        buffer.setU16(UInt16(top), at: NodeField.cellsStart)
    }

    /// A private copy of a frozen memory node: same layout, one copy of the buffer.
    init(cloning source: borrowing MemNode, owner: UInt64) {
        buffer = UnsafeMutableRawPointer.allocate(byteCount: Layout.nodeSize, alignment: 16)
        self.owner = owner
        // The used parts only (header and slots, then the cells): the free space between them is
        // never read, and a bulk load clones a leaf for nearly every put.
        let slotsEnd = source.view.slotsStart + source.count * NodeField.slotSize
        let cells = source.cellsStart
        buffer.copyMemory(from: source.buffer, byteCount: slotsEnd)
        (buffer + cells).copyMemory(from: source.buffer + cells, byteCount: Layout.nodeSize - cells)
        base = source.base
        added = source.added
        garbage = source.garbage
    }

    deinit { buffer.deallocate() }

    @inline(__always) var view: NodeView { NodeView(base: UnsafeRawPointer(buffer)) }
    @inline(__always) var count: Int { Int(buffer.u16(NodeField.count)) }
    @inline(__always) var isLeaf: Bool { view.isLeaf }
    @inline(__always) var height: Int { view.height }

    private var cellsStart: Int {
        get { Int(UnsafeRawPointer(buffer).u16(NodeField.cellsStart)) }
        set { buffer.setU16(UInt16(newValue), at: NodeField.cellsStart) }
    }

    var freeSpace: Int { cellsStart - (view.slotsStart + count * NodeField.slotSize) }
    /// Bytes the node would take written compactly (O(1): everything but free space and dead cells).
    var usedBytes: Int { Layout.nodeSize - freeSpace - garbage }

    /// The memory child behind a tagged child field, if the field is tagged.
    @inline(__always) func memoryChild(_ field: UInt64) -> MemNode? {
        guard field & NodeField.memoryTag != 0 else { return nil }
        return MemNode.handle(field).takeUnretainedValue()
    }

    // MARK: - Child fields

    // A tagged child field: bit 63 the tag, bits 44–62 the child's index in `base` + `added`,
    // bits 0–43 its address divided by 16. Objects are 16-byte aligned and user addresses lie
    // below 2^48 on the 64-bit platforms Swift supports on Linux. Only memory nodes hold tagged
    // fields: a disk node with one fails validation, so no address is ever read from a file.
    private static let indexShift: UInt64 = 44
    private static let addressMask: UInt64 = (1 << 44) - 1
    /// Children a node can index (19 bits); a node holds at most a few hundred.
    static let maxChildIndex = (1 << 19) - 1

    /// The tagged field naming `child` at `index` of the children tables.
    @inline(__always) static func childField(_ child: MemNode, index: Int) -> UInt64 {
        let address = UInt64(UInt(bitPattern: Unmanaged.passUnretained(child).toOpaque()))
        precondition(address & 15 == 0 && address >> 48 == 0 && index <= maxChildIndex,
                     "memory node address or child index outside the tagged field's range")
        return NodeField.memoryTag | UInt64(index) << indexShift | address >> 4
    }

    /// The children-table index of a tagged field.
    @inline(__always) static func childIndex(_ field: UInt64) -> Int {
        Int((field & ~NodeField.memoryTag) >> indexShift)
    }

    /// The child a tagged field names, without a reference count: valid while the children table
    /// of the node holding the field keeps it.
    @inline(__always) static func handle(_ field: UInt64) -> NodeHandle {
        NodeHandle.fromOpaque(UnsafeRawPointer(bitPattern: UInt((field & addressMask) << 4)).unsafelyUnwrapped)
    }

    // MARK: - In-place edits (owner only)

    /// Removes slot `i`; its cell becomes dead space, reclaimed by the next rebuild.
    func removeSlot(_ i: Int) {
        let n = count
        let slots = view.slotsStart
        garbage += view.cellSize(i)
        if !isLeaf {
            let field = view.child(i)
            // A child in `base` stays referenced until the next rebuild (base is shared).
            if field & NodeField.memoryTag != 0 {
                let j = MemNode.childIndex(field) - base.count
                if j >= 0 && j < added.count { added[j] = nil }
            }
        }
        if i < n - 1 {
            (buffer + slots + i * 4).copyMemory(from: buffer + slots + (i + 1) * 4, byteCount: (n - 1 - i) * 4)
        }
        buffer.setU16(UInt16(n - 1), at: NodeField.count)
    }

    /// Inserts a cell at slot `i` when the key carries the node's prefix and the cell fits.
    /// `writeTail` writes the bytes after the suffix; returns false when a rebuild is needed.
    func tryInsert(at i: Int, key: UnsafeRawPointer, keyCount: Int, tailSize: Int, writeTail: (UnsafeMutableRawPointer) -> Void) -> Bool {
        let p = view.prefixLength
        guard keyCount >= p, p == 0 || compareMemory(key, buffer + NodeField.prefix, p) == 0 else { return false }
        let s = keyCount - p
        let cell = 2 + s + tailSize
        guard freeSpace >= cell + NodeField.slotSize else { return false }
        let top = cellsStart - cell
        buffer.setU16(UInt16(s), at: top)
        if s > 0 { (buffer + top + 2).copyMemory(from: key + p, byteCount: s) }
        writeTail(buffer + top + 2 + s)
        cellsStart = top
        let n = count
        let slots = view.slotsStart
        if i < n {
            (buffer + slots + (i + 1) * 4).copyMemory(from: buffer + slots + i * 4, byteCount: (n - i) * 4)
        }
        buffer.setU16(UInt16(top), at: slots + i * 4)
        buffer.setU16(suffixHint(key + p, s), at: slots + i * 4 + 2)
        buffer.setU16(UInt16(n + 1), at: NodeField.count)
        return true
    }

    /// The child field `child` gets when appended with ``appendChild(_:)``.
    func nextChildField(_ child: MemNode) -> UInt64 { MemNode.childField(child, index: base.count + added.count) }

    /// Registers `child` under the field ``nextChildField(_:)`` gave.
    func appendChild(_ child: MemNode) {
        added.append(child)
    }

    /// Points branch entry `i` at an in-memory child whose reference `child` hands over (the
    /// children table keeps it without counting it again).
    func setChild(_ i: Int, adopting child: NodeHandle) {
        setChild(i, child.takeRetainedValue())
    }

    /// Points branch entry `i` at an in-memory child.
    func setChild(_ i: Int, _ child: consuming MemNode) {
        let v = view
        let off = v.cellOffset(i)
        let at = off + 2 + Int(v.base.u16(off))
        let field = v.base.u64(at)
        if field & NodeField.memoryTag != 0 {
            let j = MemNode.childIndex(field) - base.count
            if j >= 0 && j < added.count {
                buffer.setU64(MemNode.childField(child, index: base.count + j), at: at)
                added[j] = consume child
                return
            }
        }
        buffer.setU64(nextChildField(child), at: at)
        // `consume`: without it the compiler retained the child for the array and released the
        // parameter after, a pair of locked instructions per copied node.
        added.append(consume child)
        if added.count > MemNode.maxAdded { foldChildren() }
    }

    /// Renumbers the in-memory children into one new `base`, dropping the replaced ones.
    private func foldChildren() {
        let v = view
        var fresh: [MemNode?] = []
        fresh.reserveCapacity(v.count)
        for i in 0..<v.count {
            let off = v.cellOffset(i)
            let at = off + 2 + Int(v.base.u16(off))
            let field = v.base.u64(at)
            if let child = memoryChild(field) {
                buffer.setU64(MemNode.childField(child, index: fresh.count), at: at)
                fresh.append(child)
            }
        }
        base = fresh
        added = []
    }

    // MARK: - Rebuilding

    /// Replaces the node's content with `list`'s entries in `range` (sorted, and known to fit).
    /// Children are taken from the entries, so a node may be rebuilt from another's entries.
    func rebuild(from list: EntryList, _ range: Range<Int>) {
        let leaf = view.isLeaf
        let p = list.prefixLength(range, leaf: leaf)
        buffer.setU16(UInt16(range.count), at: NodeField.count)
        buffer.setU16(UInt16(p), at: NodeField.prefixLength)
        if p > 0 {
            (buffer + NodeField.prefix).copyMemory(from: list.keyBytes(range.upperBound - 1), byteCount: p)
        }
        var newChildren: [MemNode?] = []
        if !leaf { newChildren.reserveCapacity(range.count) }
        var top = Layout.nodeSize
        let slots = NodeField.prefix + p
        for (n, i) in range.enumerated() {
            let e = list.items[i]
            let s = (!leaf && n == 0) ? 0 : e.keyCount - p
            let cell = 2 + s + e.tailCount
            top -= cell
            buffer.setU16(UInt16(s), at: top)
            var hint: UInt16 = 0
            if s > 0 {
                let k = list.keyBytes(i) + p
                (buffer + top + 2).copyMemory(from: k, byteCount: s)
                hint = suffixHint(k, s)
            }
            buffer.setU16(hint, at: slots + n * 4 + 2)
            if e.tailCount > 0 { (buffer + top + 2 + s).copyMemory(from: list.tailBytes(i), byteCount: e.tailCount) }
            if let child = e.child {
                buffer.setU64(MemNode.childField(child, index: newChildren.count), at: top + 2 + s)
                newChildren.append(child)
            }
            buffer.setU16(UInt16(top), at: slots + n * 4)
        }
        cellsStart = top
        base = newChildren
        added = []
        garbage = 0
    }
}

/// An in-memory node named without a reference count. Lookups and the write path descend trees
/// through handles: each retain or release is an atomic instruction, and an atomic instruction
/// waits for every store still in flight, so counting references on a descent stalled a bulk
/// load behind its own value copies. A handle is valid while whatever owns the node keeps it: a
/// parent's children table or a tree state's root. Holders must not keep one across a change
/// that drops the node.
typealias NodeHandle = Unmanaged<MemNode>

extension Unmanaged where Instance == MemNode {
    @inline(__always) var view: NodeView { _withUnsafeGuaranteedRef { $0.view } }
    @inline(__always) var owner: UInt64 { _withUnsafeGuaranteedRef { $0.owner } }
    @inline(__always) var count: Int { view.count }
    @inline(__always) var isLeaf: Bool { view.isLeaf }
    @inline(__always) var height: Int { view.height }
    @inline(__always) var usedBytes: Int { _withUnsafeGuaranteedRef { $0.usedBytes } }
    @inline(__always) func removeSlot(_ i: Int) { _withUnsafeGuaranteedRef { $0.removeSlot(i) } }
    @inline(__always) func setChild(_ i: Int, adopting child: NodeHandle) { _withUnsafeGuaranteedRef { $0.setChild(i, adopting: child) } }
}

/// Entries taken out of nodes to rebuild, split or merge them. Keys (whole, prefix included)
/// and tails are copied into one reused byte buffer and located by offsets, so a split copies
/// bytes once and allocates nothing per entry (it used to make two arrays per entry, the
/// largest cost of a random-key load). One per write transaction; not thread-safe.
final class EntryList {
    struct Item {
        var key: Int
        var keyCount: Int
        var tail: Int
        var tailCount: Int
        /// Branch: the in-memory child this entry points at (its tail's field is then rewritten).
        var child: MemNode?
    }

    @exclusivity(unchecked) private(set) var items: [Item] = []
    private var bytes: UnsafeMutableRawPointer
    private var capacity: Int
    private var used = 0

    init() {
        capacity = 4 * Layout.nodeSize
        bytes = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        items.reserveCapacity(256)
    }

    deinit { bytes.deallocate() }

    var count: Int { items.count }

    func reset() {
        items.removeAll(keepingCapacity: true)
        used = 0
    }

    @inline(__always) func keyBytes(_ i: Int) -> UnsafeRawPointer { UnsafeRawPointer(bytes + items[i].key) }
    @inline(__always) func tailBytes(_ i: Int) -> UnsafeRawPointer { UnsafeRawPointer(bytes + items[i].tail) }

    func key(_ i: Int) -> [UInt8] {
        [UInt8](UnsafeRawBufferPointer(start: keyBytes(i), count: items[i].keyCount))
    }

    private func reserve(_ n: Int) {
        guard used + n > capacity else { return }
        let grown = max(capacity * 2, used + n)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 8)
        fresh.copyMemory(from: bytes, byteCount: used)
        bytes.deallocate()
        bytes = fresh
        capacity = grown
    }

    /// Copies `count` bytes from each of up to two pieces to the end of the buffer; returns where.
    private func store(_ a: UnsafeRawPointer?, _ aCount: Int, _ b: UnsafeRawPointer? = nil, _ bCount: Int = 0) -> Int {
        reserve(aCount + bCount)
        let at = used
        if aCount > 0, let a { (bytes + at).copyMemory(from: a, byteCount: aCount) }
        if bCount > 0, let b { (bytes + at + aCount).copyMemory(from: b, byteCount: bCount) }
        used += aCount + bCount
        return at
    }

    /// Appends every entry of `node`, resolving in-memory children.
    func append(from node: MemNode) {
        let v = node.view
        let leaf = v.isLeaf
        let p = v.prefixLength
        for i in 0..<v.count {
            let off = v.cellOffset(i)
            let s = Int(v.base.u16(off))
            let tailSize = v.cellSize(i) - 2 - s
            // A branch's entry 0 has no key of its own.
            let key = (!leaf && i == 0) ? store(nil, 0) : store(v.prefix, p, v.base + off + 2, s)
            let keyCount = (!leaf && i == 0) ? 0 : p + s
            let tail = store(v.base + off + 2 + s, tailSize)
            items.append(Item(key: key, keyCount: keyCount, tail: tail, tailCount: tailSize,
                              child: leaf ? nil : node.memoryChild(v.child(i))))
        }
    }

    /// Inserts an entry at `i`.
    func insert(at i: Int, key: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer, child: MemNode?) {
        let k = store(key.baseAddress, key.count)
        let t = store(tail.baseAddress, tail.count)
        items.insert(Item(key: k, keyCount: key.count, tail: t, tailCount: tail.count, child: child), at: i)
    }

    /// Gives entry `i` another key (a merged branch's first right entry takes its separator).
    func setKey(_ i: Int, _ key: [UInt8]) {
        let k = key.withUnsafeBytes { store($0.baseAddress, $0.count) }
        items[i].key = k
        items[i].keyCount = key.count
    }

    /// The prefix length of a node holding `range` (a branch's entry 0 has no key and does not count).
    func prefixLength(_ range: Range<Int>, leaf: Bool) -> Int {
        let firstKeyed = leaf ? range.lowerBound : range.lowerBound + 1
        guard firstKeyed < range.upperBound else { return 0 }
        let a = keyBytes(firstKeyed), b = keyBytes(range.upperBound - 1)
        let n = min(items[firstKeyed].keyCount, items[range.upperBound - 1].keyCount)
        var i = 0
        while i < n && a.load(fromByteOffset: i, as: UInt8.self) == b.load(fromByteOffset: i, as: UInt8.self) { i += 1 }
        return i
    }

    /// Bytes a node holding `range` would need.
    func size(_ range: Range<Int>, leaf: Bool) -> Int {
        let p = prefixLength(range, leaf: leaf)
        var total = NodeField.prefix + p
        for i in range {
            let s = (!leaf && i == range.lowerBound) ? 0 : items[i].keyCount - p
            total += NodeField.slotSize + 2 + s + items[i].tailCount
        }
        return total
    }

    /// Where to cut an overfull node's entries: after the old entries when the new one was
    /// appended at the end (sequential loads fill nodes), otherwise near the middle by bytes;
    /// both halves must fit.
    func splitPoint(leaf: Bool, appended: Bool) -> Int {
        let n = items.count
        func fits(_ at: Int) -> Bool {
            at > 0 && at < n && size(0..<at, leaf: leaf) <= Layout.nodeSize && size(at..<n, leaf: leaf) <= Layout.nodeSize
        }
        if appended && fits(n - 1) { return n - 1 }
        var total = 0
        for e in items { total += 6 + e.keyCount + e.tailCount }
        var running = 0
        var mid = 1
        for j in 0..<n {
            running += 6 + items[j].keyCount + items[j].tailCount
            if running >= total / 2 { mid = max(1, j); break }
        }
        if fits(mid) { return mid }
        var d = 1
        while mid - d > 0 || mid + d < n {
            if fits(mid + d) { return mid + d }
            if fits(mid - d) { return mid - d }
            d += 1
        }
        return max(1, n / 2)
    }
}
