/// Checkpoints: every in-memory node is written to the log (children before parents), then a
/// checkpoint record with each tree's root, then the header is pointed at it. Three syncs order
/// the steps: nodes, checkpoint record, header (crash analysis in Formats/storage.md).
enum Checkpoint {
    // Checkpoint payload: u64 commit ID, u64 replay-from, u32 tree count, then per tree
    // u32 id, u16 name length, name, u64 root offset (0 = empty), u64 entry count.

    static func encode(_ trees: [TreeState], roots: [UInt64], commitID: UInt64, replayFrom: UInt64, into w: ByteWriter) {
        w.u64(commitID)
        w.u64(replayFrom)
        w.u32(UInt32(trees.count))
        for (t, root) in zip(trees, roots) {
            w.u32(t.id)
            let name = Array(t.name.utf8)
            w.u16(UInt16(name.count))
            name.withUnsafeBytes { w.append($0) }
            w.u64(root)
            w.u64(UInt64(t.count))
        }
    }

    static func encodedSize(_ trees: [TreeState]) -> Int {
        20 + trees.reduce(0) { $0 + 22 + $1.name.utf8.count }
    }

    static func decode(_ p: UnsafeRawPointer, count: Int, checkpointOffset: UInt64) -> Result<([TreeState], UInt64), CommitFormatError> {
        var r = ByteReader(p, count: count)
        guard let commitID = r.u64(), r.u64() != nil, let n = r.u32() else { return .failure(CommitFormatError("truncated")) }
        var trees: [TreeState] = []
        for i in 0..<Int(n) {
            guard let id = r.u32(), id == UInt32(i + 1), let nl = r.u16(), nl <= 255, let nameBytes = r.bytes(Int(nl)),
                  let name = String(validating: nameBytes, as: UTF8.self),
                  let root = r.u64(), let count = r.u64(), count <= UInt64(Int.max)
            else { return .failure(CommitFormatError("bad tree entry \(i)")) }
            guard root == 0 || (root >= Layout.logStart && root < checkpointOffset) else {
                return .failure(CommitFormatError("root of tree \(i) out of range"))
            }
            guard (root == 0) == (count == 0) else { return .failure(CommitFormatError("tree \(i) count disagrees with its root")) }
            trees.append(TreeState(id: id, name: name, root: root == 0 ? nil : .disk(root), count: Int(count)))
        }
        guard r.remaining == 0 else { return .failure(CommitFormatError("trailing bytes")) }
        return .success((trees, commitID))
    }
}

extension Store {
    /// Writes the checkpoint. Caller holds the writer lock.
    func writeCheckpoint() throws(StorageError) {
        let snapshot = currentSnapshot
        let w = writer.buffer
        w.reset()
        var start = writer.logEnd
        // Node records start on 64-byte boundaries (the verified bitmap's granularity).
        let gap = Int(alignUp(start, UInt64(Layout.nodeAlignment)) - start)
        if gap > 0 {
            w.zeros(gap)
            RecordHeader.seal(w.base, type: .pad, payloadLength: gap - Layout.recordHeaderSize, epoch: writer.header.epoch, salt: salt, offset: start)
        }
        var roots: [UInt64] = []
        var trees = snapshot.trees
        var written: [UInt64] = []
        for t in trees {
            switch t.root {
            case nil: roots.append(0)
            case .disk(let off)?: roots.append(off)
            case .memory(let m)?: roots.append(serialize(m, base: start, into: w, written: &written))
            }
        }
        // The nodes and the checkpoint record must fit the memory map: refused before anything
        // is written, the store stays usable.
        let recordFootprint = RecordType.checkpoint.footprint(payload: Checkpoint.encodedSize(trees))
        try backing.map.checkCovers(start + UInt64(w.count) + UInt64(recordFootprint))
        let allocatedBefore = writer.allocated
        var headerWritten = false
        do throws(StorageError) {
            // 1. Nodes.
            if w.count > 0 {
                try ensureAllocated(from: start, to: start + UInt64(w.count))
                if !writer.isCompactionTarget {
                    try file.write(w.bytes, at: start)
                } else {
                    // A compaction target's checkpoint writes a hundred MiB of nodes or more
                    // while the source's writer commits; synced in one go, they would sit in the
                    // disk's queue ahead of its commits' syncs (a 300 ms stall at a million
                    // documents). A few MiB at a time, each commit waits for a few MiB at most.
                    let bytes = w.bytes
                    var at = 0
                    while at < bytes.count {
                        let n = min(Int(Store.compactionSyncInterval), bytes.count - at)
                        try file.write(UnsafeRawBufferPointer(rebasing: bytes[at ..< at + n]), at: start + UInt64(at))
                        at += n
                        if at < bytes.count { try file.syncForOrdering() }
                    }
                }
                try file.sync()
            }
            start += UInt64(w.count)
            // 2. The checkpoint record.
            w.reset()
            let payload = Checkpoint.encodedSize(trees)
            let footprint = RecordType.checkpoint.footprint(payload: payload)
            let replayFrom = start + UInt64(footprint)
            w.zeros(Layout.recordHeaderSize)
            Checkpoint.encode(trees, roots: roots, commitID: snapshot.commitID, replayFrom: replayFrom, into: w)
            w.zeros(footprint - w.count)
            RecordHeader.seal(w.base, type: .checkpoint, flags: Layout.recordFlagPriorDurable, payloadLength: payload, epoch: writer.header.epoch, salt: salt, offset: start)
            try ensureAllocated(from: start, to: replayFrom)
            try file.write(w.bytes, at: start)
            try file.sync()
            // 3. The header.
            var header = writer.header
            header.generation += 1
            header.checkpoint = start
            header.replayFrom = replayFrom
            headerWritten = true
            try Store.writeHeader(header, to: file)
            try file.sync()
            writer.header = header
            writer.logEnd = replayFrom
            writer.lastCheckpointEnd = replayFrom
            writer.dirtyNodes = 0
            writer.replayBytes = 0
            writer.priorDurable = true
        } catch {
            // A full disk before the header points at anything new: nothing changed (the nodes and
            // the record written lie past the log's end, where the next commit writes).
            if survives(error), !headerWritten {
                writer.allocated = allocatedBefore
                w.reset()
                throw error
            }
            writer.poisoned = error
            throw error
        }
        for off in written { verified.insert(off) }
        for i in trees.indices { trees[i].root = roots[i] == 0 ? nil : .disk(roots[i]) }
        w.reset()
        publish(Snapshot(trees: trees, end: writer.logEnd, commitID: snapshot.commitID, backing: backing, previous: snapshot))
    }

    /// Appends `node` and its in-memory descendants (children first) as node records; returns its offset.
    private func serialize(_ node: MemNode, base: UInt64, into w: ByteWriter, written: inout [UInt64]) -> UInt64 {
        let v = node.view
        var childOffsets: [UInt64] = []
        if !v.isLeaf {
            childOffsets.reserveCapacity(v.count)
            for i in 0..<v.count {
                let field = v.child(i)
                if let child = node.memoryChild(field) {
                    childOffsets.append(serialize(child, base: base, into: w, written: &written))
                } else {
                    childOffsets.append(field)
                }
            }
        }
        let at = w.count
        let length = v.compactSize
        let footprint = RecordType.node.footprint(payload: length)
        w.reserve(footprint)
        let rec = w.base + at
        let out = rec + Layout.recordHeaderSize
        let p = v.prefixLength
        out.copyMemory(from: v.base, byteCount: NodeField.prefix + p)
        var cell = NodeField.prefix + p + v.count * NodeField.slotSize
        out.setU16(UInt16(cell), at: NodeField.cellsStart)
        for i in 0..<v.count {
            let size = v.cellSize(i)
            (out + cell).copyMemory(from: v.base + v.cellOffset(i), byteCount: size)
            if !v.isLeaf {
                out.setU64(childOffsets[i], at: cell + size - 8)
            }
            out.setU16(UInt16(cell), at: NodeField.prefix + p + i * 4)
            out.setU16(v.hint(i), at: NodeField.prefix + p + i * 4 + 2)
            cell += size
        }
        (out + length).initializeMemory(as: UInt8.self, repeating: 0, count: footprint - Layout.recordHeaderSize - length)
        w.count = at + footprint
        let offset = base + UInt64(at)
        RecordHeader.seal(rec, type: .node, payloadLength: length, epoch: writer.header.epoch, salt: salt, offset: offset)
        written.append(offset)
        return offset
    }
}
