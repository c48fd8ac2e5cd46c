import Glibc

/// A node that lives in memory: created or copied by a write transaction, frozen once that
/// transaction commits (readers then share it), written to the log at the next checkpoint.
///
/// Same byte layout as a disk node, cells packed downward from the end of a `Layout.nodeSize`
/// buffer. Branch children that are themselves in memory are tagged child fields indexing
/// ``children``. Not thread-safe while owned by a write transaction; immutable afterwards.
final class MemNode: @unchecked Sendable {
    let buffer: UnsafeMutableRawPointer
    /// In-memory children, addressed by tagged child fields: indexes below `base.count` name
    /// `base`, the rest `added`. A copy shares `base` with its source without touching it
    /// (copying a branch retains one array, not every child); its own changes go to `added`.
    private(set) var base: [MemNode?] = []
    private(set) var added: [MemNode?] = []
    /// When `added` grows past this, the node folds its children into a new `base`.
    static let maxAdded = 32
    /// The transaction allowed to change this node in place.
    let owner: UInt64
    /// Bytes of dead cells (removed or replaced entries) below the free space.
    private var garbage = 0

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
    init(cloning source: MemNode, owner: UInt64) {
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
        let i = Int(field & ~NodeField.memoryTag)
        if i < base.count { return base[i] }
        let j = i - base.count
        return j < added.count ? added[j] : nil
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
                let j = Int(field & ~NodeField.memoryTag) - base.count
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
        guard keyCount >= p, p == 0 || memcmp(key, buffer + NodeField.prefix, p) == 0 else { return false }
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

    /// The child field value the next appended in-memory child will get.
    var nextChildTag: UInt64 { NodeField.memoryTag | UInt64(base.count + added.count) }

    /// Registers `child` under `nextChildTag`.
    func appendChild(_ child: MemNode) {
        added.append(child)
    }

    /// Points branch entry `i` at an in-memory child.
    func setChild(_ i: Int, _ child: MemNode) {
        let v = view
        let off = v.cellOffset(i)
        let at = off + 2 + Int(v.base.u16(off))
        let field = v.base.u64(at)
        if field & NodeField.memoryTag != 0 {
            let j = Int(field & ~NodeField.memoryTag) - base.count
            if j >= 0 && j < added.count {
                added[j] = child
                return
            }
        }
        buffer.setU64(nextChildTag, at: at)
        added.append(child)
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
                buffer.setU64(NodeField.memoryTag | UInt64(fresh.count), at: at)
                fresh.append(child)
            }
        }
        base = fresh
        added = []
    }

    // MARK: - Rebuilding

    /// One entry taken out of a node to rebuild it.
    struct Entry {
        var key: [UInt8]
        /// Leaf: value kind, u16 length, value. Branch: the 8-byte child field (memory tag resolved via `child`).
        var tail: [UInt8]
        var child: MemNode?
    }

    func entries() -> [Entry] {
        let v = view
        var out: [Entry] = []
        out.reserveCapacity(v.count + 1)
        for i in 0..<v.count {
            let off = v.cellOffset(i)
            let s = Int(v.base.u16(off))
            let tailSize = v.cellSize(i) - 2 - s
            let tail = [UInt8](UnsafeRawBufferPointer(start: v.base + off + 2 + s, count: tailSize))
            var child: MemNode?
            if !v.isLeaf { child = memoryChild(v.child(i)) }
            out.append(Entry(key: v.key(i), tail: tail, child: child))
        }
        return out
    }

    /// The prefix length of a node holding `entries` (a branch's entry 0 has no key and does not count).
    static func prefixLength(of entries: ArraySlice<Entry>, leaf: Bool) -> Int {
        let firstKeyed = leaf ? entries.startIndex : entries.startIndex + 1
        guard firstKeyed < entries.endIndex else { return 0 }
        return commonPrefix(entries[firstKeyed].key, entries[entries.endIndex - 1].key)
    }

    /// Bytes a node holding `entries` would need.
    static func size(of entries: ArraySlice<Entry>, leaf: Bool) -> Int {
        let p = prefixLength(of: entries, leaf: leaf)
        var total = NodeField.prefix + p
        for (i, e) in zip(entries.indices, entries) {
            let s = (!leaf && i == entries.startIndex) ? 0 : e.key.count - p
            total += NodeField.slotSize + 2 + s + e.tail.count
        }
        return total
    }

    static func commonPrefix(_ a: [UInt8], _ b: [UInt8]) -> Int {
        let n = min(a.count, b.count)
        var i = 0
        while i < n && a[i] == b[i] { i += 1 }
        return i
    }

    /// Replaces the node's content with `entries` (sorted, and known to fit).
    func rebuild(_ entries: ArraySlice<Entry>) {
        let leaf = view.isLeaf
        let p = MemNode.prefixLength(of: entries, leaf: leaf)
        buffer.setU16(UInt16(entries.count), at: NodeField.count)
        buffer.setU16(UInt16(p), at: NodeField.prefixLength)
        if p > 0 {
            entries[entries.endIndex - 1].key.withUnsafeBytes {
                (buffer + NodeField.prefix).copyMemory(from: $0.baseAddress!, byteCount: p)
            }
        }
        var newChildren: [MemNode?] = []
        var top = Layout.nodeSize
        let slots = NodeField.prefix + p
        for (i, e) in entries.enumerated() {
            let s = (!leaf && i == 0) ? 0 : e.key.count - p
            let cell = 2 + s + e.tail.count
            top -= cell
            buffer.setU16(UInt16(s), at: top)
            var hint: UInt16 = 0
            if s > 0 {
                e.key.withUnsafeBytes { k in
                    (buffer + top + 2).copyMemory(from: k.baseAddress! + p, byteCount: s)
                    hint = suffixHint(k.baseAddress! + p, s)
                }
            }
            buffer.setU16(hint, at: slots + i * 4 + 2)
            e.tail.withUnsafeBytes { t in
                if t.count > 0 { (buffer + top + 2 + s).copyMemory(from: t.baseAddress!, byteCount: t.count) }
            }
            if let child = e.child {
                newChildren.append(child)
                buffer.setU64(NodeField.memoryTag | UInt64(newChildren.count - 1), at: top + 2 + s)
            }
            buffer.setU16(UInt16(top), at: slots + i * 4)
        }
        cellsStart = top
        base = newChildren
        added = []
        garbage = 0
    }
}
