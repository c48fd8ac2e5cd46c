
/// The state of one named tree in a snapshot.
struct TreeState: @unchecked Sendable {
    let id: UInt32
    let name: String
    var root: NodeRef?
    var count: Int

    /// The root's view, and whether it is a memory node; nil for an empty tree. No reference is
    /// counted: the state keeps a memory root, so call this on the state where it is stored.
    @inline(__always) func rootView(_ reader: NodeReader) throws(StorageError) -> (view: NodeView, inMemory: Bool)? {
        switch root {
        case nil: return nil
        case .disk(let offset)?: return (try reader.node(at: offset, height: nil, tree: name), false)
        case .memory(let m)?: return (m.view, true)
        }
    }

    /// The root when it is a memory node `owner` may change, named without a reference count
    /// (the state keeps it).
    @inline(__always) func memoryRoot(ownedBy owner: UInt64) -> NodeHandle? {
        guard case .memory(let m)? = root, m.owner == owner else { return nil }
        return NodeHandle.passUnretained(m)
    }
}

/// Where a lookup ended: the leaf holding the key and the entry's index.
struct LeafHit {
    let view: NodeView
    let index: Int
}

extension NodeReader {
    /// One descent from a root (``TreeState/rootView(_:)``) to the leaf entry for `key`; no
    /// allocation, and no reference counting on memory nodes (the snapshot or transaction being
    /// read keeps them).
    @inline(__always) func find(_ key: UnsafeRawPointer, _ keyCount: Int, root: (view: NodeView, inMemory: Bool), tree: String?) throws(StorageError) -> LeafHit? {
        var view = root.view
        var inMemory = root.inMemory
        var steps = 0
        while true {
            // Start loading every slot at once: a cold node's binary search then waits for one
            // miss instead of one per probe.
            CPU.prefetch(view.base + view.slotsStart, view.count * NodeField.slotSize)
            if view.isLeaf {
                let (i, found) = view.lowerBound(key, keyCount)
                return found ? LeafHit(view: view, index: i) : nil
            }
            steps += 1
            guard steps <= maxTreeHeight, view.height > 0 else {
                throw StorageError.corrupted("tree deeper than \(maxTreeHeight)", offset: nil, tree: tree)
            }
            let field = view.child(view.childIndex(key, keyCount))
            if field & NodeField.memoryTag != 0 {
                // Only memory nodes hold tagged fields (validation refuses them in a disk node).
                guard inMemory else { throw StorageError.corrupted("dangling in-memory child", offset: nil, tree: tree) }
                view = MemNode.handle(field).view
            } else {
                view = try node(at: field, height: view.height - 1, tree: tree)
                inMemory = false
            }
        }
    }
}

/// Changes trees on behalf of one write transaction: copies every node it touches that the
/// transaction does not own yet (copy-on-write), and edits owned nodes in place.
struct TreeEditor {
    let reader: NodeReader
    let owner: UInt64
    /// Counts the nodes this editor added to what the next checkpoint writes: copies of disk
    /// nodes and new nodes. A copy of a memory node replaces it and adds nothing.
    var createdNodes = 0
    /// Scratch for rebuilding, splitting and merging nodes.
    let entries = EntryList()

    /// The node `ref` names, made this transaction's own: a node it owns already, or a copy.
    mutating func owned(_ ref: NodeRef, height: Int?, tree: String) throws(StorageError) -> MemNode {
        switch ref {
        case .memory(let m):
            if m.owner == owner { return m }
            return MemNode(cloning: m, owner: owner)
        case .disk(let offset):
            let v = try reader.node(at: offset, height: height, tree: tree)
            createdNodes += 1
            return MemNode(copying: v, owner: owner)
        }
    }

    /// A tree's root (present) made this transaction's own; the state then holds it (and so keeps it).
    private mutating func ownedRoot(_ state: inout TreeState) throws(StorageError) -> NodeHandle {
        if let handle = state.memoryRoot(ownedBy: owner) { return handle }
        guard let root = state.root else { throw StorageError(code: .invalidArgument, reason: "the tree is empty", tree: state.name) }
        let node = try owned(root, height: nil, tree: state.name)
        state.root = .memory(node)
        return NodeHandle.passUnretained(node)
    }

    /// Child `i` of `parent` (owned), made this transaction's own: a copy of a frozen or disk
    /// child takes its place in `parent`, which keeps it.
    mutating func ownedChild(_ parent: NodeHandle, _ i: Int, tree: String) throws(StorageError) -> NodeHandle {
        let view = parent.view
        let field = view.child(i)
        // The copy's one reference goes straight to the parent's children table.
        let copy: NodeHandle
        if field & NodeField.memoryTag != 0 {
            let child = MemNode.handle(field)
            if child.owner == owner { return child }
            copy = child._withUnsafeGuaranteedRef { NodeHandle.passRetained(MemNode(cloning: $0, owner: owner)) }
        } else {
            copy = NodeHandle.passRetained(MemNode(copying: try reader.node(at: field, height: view.height - 1, tree: tree), owner: owner))
            createdNodes += 1
        }
        parent.setChild(i, adopting: copy)
        return copy
    }

    // MARK: - Insert

    /// Inserts or replaces `key`; `tail` is the leaf cell's bytes after the key. Returns whether the key is new.
    mutating func put(_ state: inout TreeState, key: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) throws(StorageError) -> Bool {
        if state.root == nil {
            let leaf = MemNode(kind: .leaf, height: 0, owner: owner)
            createdNodes += 1
            _ = insertCell(NodeHandle.passUnretained(leaf), at: 0, key: key, tail: tail, child: nil)
            state.root = .memory(leaf)
            state.count += 1
            return true
        }
        let node = try ownedRoot(&state)
        let (inserted, split) = try insert(node, key: key, tail: tail, tree: state.name)
        if let (separator, right) = split {
            let height = node.height
            guard height + 1 < maxTreeHeight else {
                throw StorageError(code: .invalidArgument, reason: "tree too deep", tree: state.name)
            }
            let top = MemNode(kind: .branch, height: height + 1, owner: owner)
            createdNodes += 1
            // Both child fields are placeholders: the rebuild points them at the two nodes.
            let zero: UInt64 = 0
            withUnsafeBytes(of: zero) { field in
                entries.reset()
                entries.insert(at: 0, key: UnsafeRawBufferPointer(start: nil, count: 0), tail: field, child: node.takeUnretainedValue())
                separator.withUnsafeBytes { entries.insert(at: 1, key: $0, tail: field, child: right) }
            }
            top.rebuild(from: entries, 0..<2)
            state.root = .memory(top)
        }
        if inserted { state.count += 1 }
        return inserted
    }

    private mutating func insert(_ node: NodeHandle, key: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer, tree: String) throws(StorageError) -> (Bool, ([UInt8], MemNode)?) {
        let view = node.view
        let k = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        if view.isLeaf {
            let (i, found) = view.lowerBound(k, key.count)
            if found { node.removeSlot(i) }
            return (!found, insertCell(node, at: i, key: key, tail: tail, child: nil))
        }
        let i = view.childIndex(k, key.count)
        let child = try ownedChild(node, i, tree: tree)
        let (inserted, split) = try insert(child, key: key, tail: tail, tree: tree)
        guard let (separator, right) = split else { return (inserted, nil) }
        let up = separator.withUnsafeBytes { sep in
            insertCell(node, at: i + 1, key: sep, tail: UnsafeRawBufferPointer(start: nil, count: 0), child: right)
        }
        return (inserted, up)
    }

    /// Puts a cell at slot `i`, rebuilding or splitting the node when needed. For branches,
    /// `child` is the new in-memory child and `tail` is ignored. Returns the separator and the new
    /// right sibling after a split.
    private mutating func insertCell(_ handle: NodeHandle, at i: Int, key: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer, child: MemNode?) -> ([UInt8], MemNode)? {
        handle._withUnsafeGuaranteedRef { node in
            let k = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
            var tailBytes = tail
            var tag = (child.map { node.nextChildField($0) } ?? 0).littleEndian
            return withUnsafeBytes(of: &tag) { tagBytes in
                if child != nil { tailBytes = tagBytes }
                let fits = node.tryInsert(at: i, key: k, keyCount: key.count, tailSize: tailBytes.count) { dst in
                    if tailBytes.count > 0 { dst.copyMemory(from: tailBytes.baseAddress!, byteCount: tailBytes.count) }
                }
                if fits {
                    if let child { node.appendChild(child) }
                    return nil
                }
                entries.reset()
                entries.append(from: node)
                entries.insert(at: i, key: key, tail: tailBytes, child: child)
                let leaf = node.isLeaf
                let n = entries.count
                if entries.size(0..<n, leaf: leaf) <= Layout.nodeSize {
                    node.rebuild(from: entries, 0..<n)
                    return nil
                }
                let at = entries.splitPoint(leaf: leaf, appended: i == n - 1)
                let right = MemNode(kind: leaf ? .leaf : .branch, height: node.height, owner: owner)
                createdNodes += 1
                node.rebuild(from: entries, 0..<at)
                right.rebuild(from: entries, at..<n)
                return (entries.key(at), right)
            }
        }
    }

    // MARK: - Delete

    /// Removes `key` (known to be present). Merges an underfull node with a sibling when they fit together.
    mutating func delete(_ state: inout TreeState, key: UnsafeRawBufferPointer) throws(StorageError) {
        guard state.root != nil else { return }
        let node = try ownedRoot(&state)
        try remove(node, key: key, tree: state.name)
        state.count -= 1
        // Shrink the root: an empty tree has no root; a branch with one child gives way to it.
        var top: NodeRef? = node.count == 0 ? nil : .memory(node.takeUnretainedValue())
        while case .memory(let m)? = top, !m.isLeaf, m.count == 1 {
            top = try reader.child(of: m.view, memory: m, at: 0, tree: state.name)
        }
        state.root = top
    }

    private mutating func remove(_ node: NodeHandle, key: UnsafeRawBufferPointer, tree: String) throws(StorageError) {
        let view = node.view
        let k = key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        if view.isLeaf {
            let (i, found) = view.lowerBound(k, key.count)
            if found { node.removeSlot(i) }
            return
        }
        let i = view.childIndex(k, key.count)
        let child = try ownedChild(node, i, tree: tree)
        try remove(child, key: key, tree: tree)
        if child.count == 0 {
            node.removeSlot(i)
            return
        }
        #if SETTEE_INTERNAL_CHECKS
        assert(child.usedBytes == child.view.compactSize, "MemNode byte accounting is off")
        #endif
        guard child.usedBytes < Layout.nodeSize / 4, node.count > 1 else { return }
        // Merge with the right sibling, or with the left one when the child is the last.
        let left = i + 1 < node.count ? i : i - 1
        try merge(node, left: left, tree: tree)
    }

    private mutating func merge(_ parent: NodeHandle, left i: Int, tree: String) throws(StorageError) {
        let a = try ownedChild(parent, i, tree: tree)
        let b = try ownedChild(parent, i + 1, tree: tree)
        // The merged node is at least the two nodes' bytes less one header and their prefixes
        // (its prefix is at most as long as either). When even that is too big, skip copying
        // the entries out: draining a run of keys (a purge, an expiry sweep) would otherwise copy
        // the sibling on every delete.
        let atLeast = a.usedBytes + b.usedBytes - NodeField.prefix - a.view.prefixLength - b.view.prefixLength
        guard atLeast <= Layout.nodeSize * 3 / 4 else { return }
        entries.reset()
        a._withUnsafeGuaranteedRef { entries.append(from: $0) }
        let firstRight = entries.count
        b._withUnsafeGuaranteedRef { entries.append(from: $0) }
        if !a.isLeaf, firstRight < entries.count {
            // b's entry 0 has no key of its own: it takes the separator that led to b.
            entries.setKey(firstRight, parent.view.key(i + 1))
        }
        guard entries.size(0..<entries.count, leaf: a.isLeaf) <= Layout.nodeSize * 3 / 4 else { return }
        a._withUnsafeGuaranteedRef { $0.rebuild(from: entries, 0..<entries.count) }
        // Drops b (its entries, children included, now live in a).
        parent.removeSlot(i + 1)
    }
}
