
// Node layout (in memory and on disk alike; all offsets relative to the node's first byte):
//
//   0  u8  kind (0 leaf, 1 branch)      1  u8  height (0 for leaves)
//   2  u16 count                        4  u16 prefix length P
//   6  u16 lowest cell offset           8  prefix bytes [P]
//   8+P  slots [count] × (u16 cell offset, u16 hint)
//   cells (anywhere after the slots):
//     leaf:   u16 suffix length S, suffix [S], u8 value kind (0 inline, 1 out of line),
//             u16 value length V, value [V]   (out of line: u64 value ref, u32 raw length)
//     branch: u16 suffix length S, suffix [S], u64 child
//
// Every key of a node is prefix + its suffix. The hint is the suffix's first two bytes (big-endian,
// zero-padded), so a binary search mostly compares slots without touching cells.

enum NodeKind: UInt8 {
    case leaf = 0
    case branch = 1
}

enum NodeField {
    static let kind = 0
    static let height = 1
    static let count = 2
    static let prefixLength = 4
    static let cellsStart = 6
    static let prefix = 8
    static let slotSize = 4
    static let valueInline: UInt8 = 0
    static let valueExternal: UInt8 = 1
    static let externalValueLength = 12
    /// Child fields with this bit set name an in-memory child (`MemNode.memoryChild(_:)`), never a file offset.
    static let memoryTag: UInt64 = 1 << 63
}

@inline(__always) func suffixHint(_ p: UnsafeRawPointer, _ n: Int) -> UInt16 {
    if n >= 2 { return UInt16(p.u8(0)) << 8 | UInt16(p.u8(1)) }
    if n == 1 { return UInt16(p.u8(0)) << 8 }
    return 0
}

/// A read-only view of a node's bytes. Disk nodes are verified (checksum and structure) before a
/// view is made of them, so accessors here trust the layout.
struct NodeView {
    let base: UnsafeRawPointer

    @inline(__always) var isLeaf: Bool { base.u8(NodeField.kind) == NodeKind.leaf.rawValue }
    @inline(__always) var height: Int { Int(base.u8(NodeField.height)) }
    @inline(__always) var count: Int { Int(base.u16(NodeField.count)) }
    @inline(__always) var prefixLength: Int { Int(base.u16(NodeField.prefixLength)) }
    @inline(__always) var prefix: UnsafeRawPointer { base + NodeField.prefix }
    @inline(__always) var slotsStart: Int { NodeField.prefix + prefixLength }

    @inline(__always) func cellOffset(_ i: Int) -> Int { Int(base.u16(slotsStart + i * NodeField.slotSize)) }
    @inline(__always) func hint(_ i: Int) -> UInt16 { base.u16(slotsStart + i * NodeField.slotSize + 2) }

    @inline(__always) func suffix(_ i: Int) -> (UnsafeRawPointer, Int) {
        let off = cellOffset(i)
        return (base + off + 2, Int(base.u16(off)))
    }

    /// Leaf: the value kind and bytes of entry `i`.
    @inline(__always) func value(_ i: Int) -> (kind: UInt8, bytes: UnsafeRawPointer, count: Int) {
        let off = cellOffset(i)
        let s = Int(base.u16(off))
        let at = off + 2 + s
        return (base.u8(at), base + at + 3, Int(base.u16(at + 1)))
    }

    /// Branch: the raw child field of entry `i`.
    @inline(__always) func child(_ i: Int) -> UInt64 {
        let off = cellOffset(i)
        return base.u64(off + 2 + Int(base.u16(off)))
    }

    /// Size of the cell of entry `i`.
    @inline(__always) func cellSize(_ i: Int) -> Int {
        let off = cellOffset(i)
        let s = Int(base.u16(off))
        if isLeaf { return 2 + s + 3 + Int(base.u16(off + 2 + s + 1)) }
        return 2 + s + 8
    }

    /// The full key of entry `i` (empty for a branch's entry 0, which stands for "below entry 1").
    func key(_ i: Int) -> [UInt8] {
        if i == 0 && !isLeaf { return [] }
        var out = [UInt8](UnsafeRawBufferPointer(start: prefix, count: prefixLength))
        let (p, n) = suffix(i)
        out.append(contentsOf: UnsafeRawBufferPointer(start: p, count: n))
        return out
    }

    /// Compares the full key of entry `i` with `key`.
    func compare(_ i: Int, _ key: UnsafeRawPointer, _ keyCount: Int) -> Int {
        let p = prefixLength
        let n = min(p, keyCount)
        if n > 0 {
            let c = compareMemory(prefix, key, n)
            if c != 0 { return c }
        }
        if keyCount < p { return 1 }
        let (s, sn) = suffix(i)
        return compareBytes(s, sn, key + p, keyCount - p)
    }

    /// The first entry at or after `start` whose key is >= `key`, and whether it is equal.
    /// Branches search from 1: their entry 0 stands for every key below entry 1 and its key is not stored.
    @inline(__always) func lowerBound(_ key: UnsafeRawPointer, _ keyCount: Int, from start: Int = 0) -> (index: Int, found: Bool) {
        let p = prefixLength
        let n = count
        if p > 0 {
            let m = min(p, keyCount)
            let c = compareMemory(key, prefix, m)
            if c < 0 { return (start, false) }
            if c > 0 { return (n, false) }
            if keyCount < p { return (start, false) }
        }
        let sk = key + p
        let sl = keyCount - p
        let h = suffixHint(sk, sl)
        let slots = base + slotsStart
        var lo = start
        var hi = n
        while lo < hi {
            let mid = (lo + hi) >> 1
            let mh = slots.u16(mid * 4 + 2)
            let c: Int
            if mh < h {
                c = -1
            } else if mh > h {
                c = 1
            } else {
                let off = Int(slots.u16(mid * 4))
                c = compareBytes(base + off + 2, Int(base.u16(off)), sk, sl)
            }
            if c < 0 {
                lo = mid + 1
            } else if c > 0 {
                hi = mid
            } else {
                return (mid, true)
            }
        }
        return (lo, false)
    }

    /// Branch: the child whose range holds `key` (the last separator <= key, or the first child).
    @inline(__always) func childIndex(_ key: UnsafeRawPointer, _ keyCount: Int) -> Int {
        let (i, found) = lowerBound(key, keyCount, from: 1)
        return found ? i : i - 1
    }

    /// Bytes the node would occupy written compactly.
    var compactSize: Int {
        var total = slotsStart + count * NodeField.slotSize
        for i in 0..<count { total += cellSize(i) }
        return total
    }

    /// Checks that every slot, cell and length lies inside `length` bytes and keys ascend strictly.
    /// Run once on every disk node before it is used; returns a reason when the node is malformed.
    static func validate(_ base: UnsafeRawPointer, length: Int) -> String? {
        guard length >= NodeField.prefix else { return "node shorter than its header" }
        guard let kind = NodeKind(rawValue: base.u8(NodeField.kind)) else { return "unknown node kind" }
        let height = Int(base.u8(NodeField.height))
        if kind == .leaf && height != 0 { return "leaf with non-zero height" }
        if kind == .branch && height == 0 { return "branch with zero height" }
        let count = Int(base.u16(NodeField.count))
        let p = Int(base.u16(NodeField.prefixLength))
        guard count > 0 else { return "empty node" }
        guard p <= StoreConfiguration.maxKeyLength else { return "prefix too long" }
        let slotsEnd = NodeField.prefix + p + count * NodeField.slotSize
        guard slotsEnd <= length else { return "slots beyond the node" }
        let view = NodeView(base: base)
        // Cells must not overlap: their sizes together fit in the node, so a copy laid out
        // compactly (MemNode) fits in its buffer whatever the slots point at.
        var cellBytes = 0
        for i in 0..<count {
            let off = view.cellOffset(i)
            guard off >= slotsEnd, off + 2 <= length else { return "cell \(i) outside the node" }
            let s = Int(base.u16(off))
            guard p + s <= StoreConfiguration.maxKeyLength else { return "key \(i) too long" }
            if kind == .leaf {
                guard off + 2 + s + 3 <= length else { return "cell \(i) outside the node" }
                let vkind = base.u8(off + 2 + s)
                let vlen = Int(base.u16(off + 2 + s + 1))
                guard off + 2 + s + 3 + vlen <= length else { return "value \(i) outside the node" }
                if vkind == NodeField.valueExternal {
                    guard vlen == NodeField.externalValueLength else { return "bad out-of-line value \(i)" }
                } else if vkind == NodeField.valueInline {
                    guard vlen <= StoreConfiguration.maxInlineValueLength else { return "inline value \(i) too long" }
                } else {
                    return "unknown value kind in entry \(i)"
                }
            } else {
                guard off + 2 + s + 8 <= length else { return "cell \(i) outside the node" }
                let child = base.u64(off + 2 + s)
                guard child & NodeField.memoryTag == 0 else { return "child \(i) is not a file offset" }
            }
            cellBytes += view.cellSize(i)
            guard slotsEnd + cellBytes <= length else { return "cells overlap" }
            if kind == .branch && i == 0 { continue }
            guard view.hint(i) == suffixHint(base + off + 2, s) else { return "hint \(i) does not match its key" }
            if i > (kind == .branch ? 1 : 0) {
                let (a, an) = view.suffix(i - 1)
                guard compareBytes(a, an, base + off + 2, s) < 0 else { return "keys out of order at entry \(i)" }
            }
        }
        return nil
    }
}
