
/// A reference to a tree node: an offset in the log, or a node still in memory.
enum NodeRef: @unchecked Sendable {
    case disk(UInt64)
    case memory(MemNode)
}

/// Deepest tree the engine follows; a damaged file cannot make a descent loop or run away.
let maxTreeHeight = 32

/// Turns node offsets into verified views over the memory map. Each node record is checked once
/// per process (checksum, bounds, structure) and remembered in the verified bitmap.
struct NodeReader {
    let base: UnsafeRawPointer
    /// Nothing at or beyond this offset belongs to the snapshot being read.
    let end: UInt64
    let salt: UInt64
    /// The verified bitmap's words (owned by the store, which outlives every reader): a raw
    /// pointer so that a read transaction costs no reference counting for it.
    let verifiedWords: UnsafeMutablePointer<UInt64>
    let verifiedLimit: UInt64

    init(base: UnsafeRawPointer, end: UInt64, salt: UInt64, verified: VerifiedBitmap) {
        self.base = base
        self.end = end
        self.salt = salt
        verifiedWords = verified.words
        verifiedLimit = verified.coveredBytes
    }

    @inline(__always) func isVerified(_ offset: UInt64) -> Bool {
        offset < verifiedLimit && CPU.testBit(verifiedWords, offset >> 6)
    }

    @inline(__always) func markVerified(_ offset: UInt64) {
        if offset < verifiedLimit { CPU.setBit(verifiedWords, offset >> 6) }
    }

    @inline(__always) func node(at offset: UInt64, height: Int? = nil, tree: String? = nil) throws(StorageError) -> NodeView {
        guard offset >= Layout.logStart, offset % UInt64(Layout.nodeAlignment) == 0,
              offset <= end, end - offset >= UInt64(Layout.recordHeaderSize)
        else { throw StorageError.corrupted("node offset out of range", offset: offset, tree: tree) }
        let record = base + Int(offset)
        let view = NodeView(base: record + Layout.recordHeaderSize)
        if !isVerified(offset) {
            try verify(record, offset: offset, tree: tree)
        }
        if let height, view.height != height {
            throw StorageError.corrupted("node height \(view.height), expected \(height)", offset: offset, tree: tree)
        }
        return view
    }

    private func verify(_ record: UnsafeRawPointer, offset: UInt64, tree: String?) throws(StorageError) {
        let header = RecordHeader(record)
        guard header.type == .node else { throw StorageError.corrupted("not a node record", offset: offset, tree: tree) }
        guard header.length <= Layout.nodeSize,
              UInt64(header.length) <= end - offset - UInt64(Layout.recordHeaderSize)
        else { throw StorageError.corrupted("node length out of range", offset: offset, tree: tree) }
        guard RecordHeader.verify(record, payloadLength: header.length, salt: salt, offset: offset) else {
            throw StorageError.corrupted("node checksum mismatch", offset: offset, tree: tree)
        }
        if let problem = NodeView.validate(record + Layout.recordHeaderSize, length: header.length) {
            throw StorageError.corrupted("malformed node: \(problem)", offset: offset, tree: tree)
        }
        if offset < verifiedLimit { CPU.setBit(verifiedWords, offset >> 6) }
    }

    /// The view of any node reference, and the memory node when it is one.
    @inline(__always) func view(_ ref: NodeRef, height: Int? = nil, tree: String? = nil) throws(StorageError) -> NodeView {
        switch ref {
        case .disk(let offset): return try node(at: offset, height: height, tree: tree)
        case .memory(let m): return m.view
        }
    }

    /// The child `i` of a branch, which is either `parent` (memory) or a disk node.
    @inline(__always) func child(of view: NodeView, memory: MemNode?, at i: Int, tree: String?) throws(StorageError) -> NodeRef {
        let field = view.child(i)
        if field & NodeField.memoryTag != 0 {
            // Only memory nodes hold tagged fields (validation refuses them in a disk node).
            guard memory != nil else {
                throw StorageError.corrupted("dangling in-memory child", offset: nil, tree: tree)
            }
            return .memory(MemNode.handle(field).takeUnretainedValue())
        }
        return .disk(field)
    }
}
