/// What ``Store/check()`` walked.
///
/// ```swift
/// let report = try store.check()
/// print(report.entries, report.nodes)
/// ```
///
/// A value type; safe to share between threads.
public struct CheckReport: Sendable, Equatable, CustomStringConvertible {
    /// Trees walked.
    ///
    /// ```swift
    /// print(try store.check().trees)
    /// ```
    public var trees = 0
    /// Entries in all trees.
    ///
    /// ```swift
    /// let total = try store.check().entries
    /// ```
    public var entries = 0
    /// Nodes visited (on disk and in memory).
    ///
    /// ```swift
    /// let nodes = try store.check().nodes
    /// ```
    public var nodes = 0
    /// Out-of-line values read and verified.
    ///
    /// ```swift
    /// let verified = try store.check().values
    /// ```
    public var values = 0
    /// The height of the tallest tree (1 for a single leaf).
    ///
    /// ```swift
    /// assert(try store.check().height <= 4)
    /// ```
    public var height = 0

    public var description: String {
        "\(trees) trees, \(entries) entries, \(nodes) nodes, \(values) out-of-line values, height \(height)"
    }
}

extension Store {
    /// Walks everything the current commit refers to: every node of every tree (checksum,
    /// structure, key order across nodes, heights, entry counts) and every out-of-line value a
    /// tree points to (checksum, decompression). Throws on the first inconsistency, naming its
    /// offset, tree and reason.
    ///
    /// ```swift
    /// do {
    ///     print(try store.check())
    /// } catch let error as StorageError {
    ///     print(error.offset ?? 0, error.tree ?? "", error.reason)
    /// }
    /// ```
    ///
    /// - Throws: ``StorageError/Code/corrupted``.
    public func check() throws -> CheckReport {
        try read { tx in
            var report = CheckReport()
            for state in tx.snapshot.trees {
                report.trees += 1
                guard let root = state.root else {
                    guard state.count == 0 else { throw StorageError.corrupted("empty tree with \(state.count) entries", offset: nil, tree: state.name) }
                    continue
                }
                var walker = CheckWalker(context: tx.context, tree: state.name)
                let height = try walker.walk(root, expectedHeight: nil, depth: 0, low: nil, high: nil)
                report.height = max(report.height, height + 1)
                guard walker.entries == state.count else {
                    throw StorageError.corrupted("tree holds \(walker.entries) entries, its root says \(state.count)", offset: nil, tree: state.name)
                }
                report.entries += walker.entries
                report.nodes += walker.nodes
                report.values += walker.values
            }
            return report
        }
    }
}

private struct CheckWalker {
    let context: ReadContext
    let tree: String
    var entries = 0
    var nodes = 0
    var values = 0

    /// Checks the subtree at `ref`, whose keys must lie in [low, high); returns its height.
    mutating func walk(_ ref: NodeRef, expectedHeight: Int?, depth: Int, low: [UInt8]?, high: [UInt8]?) throws -> Int {
        guard depth < maxTreeHeight else { throw StorageError.corrupted("tree deeper than \(maxTreeHeight)", offset: nil, tree: tree) }
        var offset: UInt64?
        var memory: MemNode?
        switch ref {
        case .disk(let o): offset = o
        case .memory(let m): memory = m
        }
        let view = try context.reader.view(ref, height: expectedHeight, tree: tree)
        nodes += 1
        if memory != nil, let problem = NodeView.validateMemory(view) {
            throw StorageError.corrupted("in-memory node: \(problem)", offset: nil, tree: tree)
        }
        let n = view.count
        guard n > 0 else { throw StorageError.corrupted("empty node", offset: offset, tree: tree) }
        let first = view.isLeaf ? 0 : 1
        for i in first..<n {
            let key = view.key(i)
            if let low, key.lexicographicallyPrecedes(low) {
                throw StorageError.corrupted("key \(i) below its node's range", offset: offset, tree: tree)
            }
            if let high, !key.lexicographicallyPrecedes(high) {
                throw StorageError.corrupted("key \(i) above its node's range", offset: offset, tree: tree)
            }
        }
        if view.isLeaf {
            for i in 0..<n {
                let (kind, bytes, _) = view.value(i)
                if kind == NodeField.valueExternal {
                    let raw = Int(bytes.u32(8))
                    let got = try context.withExternal(bytes.u64(0), tree: tree) { $0.count }
                    guard got == raw else { throw StorageError.corrupted("value \(i) has \(got) bytes, its entry says \(raw)", offset: offset, tree: tree) }
                    values += 1
                }
            }
            entries += n
            return 0
        }
        for i in 0..<n {
            let child = try context.reader.child(of: view, memory: memory, at: i, tree: tree)
            let lo = i == 0 ? low : view.key(i)
            let hi = i + 1 < n ? view.key(i + 1) : high
            _ = try walk(child, expectedHeight: view.height - 1, depth: depth + 1, low: lo, high: hi)
        }
        return view.height
    }
}

extension NodeView {
    /// The structural checks of disk nodes, applied to a node in memory.
    static func validateMemory(_ view: NodeView) -> String? {
        // A memory node's slots may point anywhere in its buffer; copy it compactly to reuse `validate`.
        let size = view.compactSize
        let buf = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buf.deallocate() }
        let p = view.prefixLength
        buf.copyMemory(from: view.base, byteCount: NodeField.prefix + p)
        var cell = NodeField.prefix + p + view.count * NodeField.slotSize
        for i in 0..<view.count {
            let s = view.cellSize(i)
            (buf + cell).copyMemory(from: view.base + view.cellOffset(i), byteCount: s)
            if !view.isLeaf { buf.setU64(0, at: cell + s - 8) }
            buf.setU16(UInt16(cell), at: NodeField.prefix + p + i * 4)
            buf.setU16(view.hint(i), at: NodeField.prefix + p + i * 4 + 2)
            cell += s
        }
        return validate(UnsafeRawPointer(buf), length: size)
    }
}
