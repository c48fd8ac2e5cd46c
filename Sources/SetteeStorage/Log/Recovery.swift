/// Opening: load the checkpoint the header names, then replay the commit records after it until
/// the log ends. The end is the first record that does not check; it is a torn write unless a
/// later record flagged prior-durable proves the bytes before it had been made durable, in which
/// case the file is corrupt. Work is bounded by the log after the checkpoint.
enum Recovery {
    struct State {
        var trees: [TreeState]
        var end: UInt64
        var commitID: UInt64
        var dirtyNodes: Int
        var nextTransaction: UInt64
        /// The highest epoch of any record replayed; the next session's epoch must exceed it.
        var lastEpoch: UInt32
        /// Operation bytes replayed (see `WriterState.replayBytes`).
        var replayBytes: Int
    }

    /// Replayed nodes belong to this pseudo-transaction; live ones start after it.
    static let replayOwner: UInt64 = 1

    static func run(reader: NodeReader, header: HeaderSlot, fileSize: UInt64) throws(StorageError) -> State {
        var trees: [TreeState] = []
        var commitID: UInt64 = 0
        var minEpoch: UInt32 = 0
        // The header is checksummed but not salted: a crafted one can check. Where it says
        // replay starts must lie in the file, or the next commit would be written far beyond it.
        guard header.replayFrom <= fileSize else {
            throw StorageError.corrupted("the header's replay offset \(header.replayFrom) lies beyond the end of the file", offset: 0)
        }
        if header.checkpoint != 0 {
            (trees, commitID, minEpoch) = try loadCheckpoint(reader: reader, header: header, fileSize: fileSize)
        }
        var editor = TreeEditor(reader: reader, owner: replayOwner)
        var pos = header.replayFrom
        var replayBytes = 0
        while pos <= fileSize, fileSize - pos >= UInt64(Layout.recordHeaderSize) {
            if let h = validRecord(reader, at: pos, fileSize: fileSize, minEpoch: minEpoch) {
                let type = h.type!
                let footprint = UInt64(type.footprint(payload: h.length))
                if type == .commit {
                    let (id, ops) = try replayCommit(reader: reader, at: pos, length: h.length, recordEnd: pos + footprint, trees: &trees, editor: &editor)
                    commitID = id
                    replayBytes += ops
                }
                minEpoch = h.epoch
                pos += footprint
                continue
            }
            if let later = durableRecord(reader, after: pos, fileSize: fileSize, minEpoch: minEpoch) {
                throw StorageError.corrupted("damaged record; the record at \(later) shows it had been made durable", offset: pos)
            }
            break
        }
        return State(trees: trees, end: pos, commitID: commitID, dirtyNodes: editor.createdNodes, nextTransaction: replayOwner + 1, lastEpoch: max(minEpoch, header.epoch), replayBytes: replayBytes)
    }

    /// The header of a whole, checksum-valid record at `pos`, or nil.
    /// Epochs never decrease along the log: a record with an older epoch than the one before it
    /// is a leftover of a crashed session, and the log ends there.
    static func validRecord(_ reader: NodeReader, at pos: UInt64, fileSize: UInt64, minEpoch: UInt32) -> RecordHeader? {
        guard pos <= fileSize, fileSize - pos >= UInt64(Layout.recordHeaderSize) else { return nil }
        let p = reader.base + Int(pos)
        let h = RecordHeader(p)
        guard let type = h.type, h.length <= Layout.maxRecordPayload,
              h.epoch >= minEpoch,
              UInt64(type.footprint(payload: h.length)) <= fileSize - pos
        else { return nil }
        if type == .node {
            guard h.length <= Layout.nodeSize, pos % UInt64(Layout.nodeAlignment) == 0 else { return nil }
        }
        guard RecordHeader.verify(p, payloadLength: h.length, salt: reader.salt, offset: pos) else { return nil }
        return h
    }

    /// The first valid commit or checkpoint record after `pos` that was written when everything
    /// before it was durable.
    static func durableRecord(_ reader: NodeReader, after pos: UInt64, fileSize: UInt64, minEpoch: UInt32) -> UInt64? {
        var p = pos + UInt64(Layout.recordAlignment)
        let base = reader.base
        while p <= fileSize, fileSize - p >= UInt64(Layout.recordHeaderSize) {
            let q = base + Int(p)
            let type = q.u8(Layout.rType)
            if (type == RecordType.commit.rawValue || type == RecordType.checkpoint.rawValue),
               q.u8(Layout.rFlags) & Layout.recordFlagPriorDurable != 0,
               validRecord(reader, at: p, fileSize: fileSize, minEpoch: minEpoch) != nil {
                return p
            }
            p += UInt64(Layout.recordAlignment)
        }
        return nil
    }

    static func loadCheckpoint(reader: NodeReader, header: HeaderSlot, fileSize: UInt64) throws(StorageError) -> ([TreeState], UInt64, UInt32) {
        let at = header.checkpoint
        guard let h = validRecord(reader, at: at, fileSize: fileSize, minEpoch: 0), h.type == .checkpoint else {
            throw StorageError.corrupted("the checkpoint the header names does not check", offset: at)
        }
        guard UInt64(RecordType.checkpoint.footprint(payload: h.length)) + at == header.replayFrom else {
            throw StorageError.corrupted("checkpoint and header disagree on where replay starts", offset: at)
        }
        let decoded = Checkpoint.decode(reader.base + Int(at) + Layout.recordHeaderSize, count: h.length, checkpointOffset: at)
        switch decoded {
        case .failure(let e):
            throw StorageError.corrupted("malformed checkpoint: \(e.reason)", offset: at)
        case .success(let (trees, commitID)):
            return (trees, commitID, h.epoch)
        }
    }

    /// Applies one commit; returns its ID and how many of its bytes were operations.
    static func replayCommit(reader: NodeReader, at pos: UInt64, length: Int, recordEnd: UInt64, trees: inout [TreeState], editor: inout TreeEditor) throws(StorageError) -> (UInt64, Int) {
        let payload = reader.base + Int(pos) + Layout.recordHeaderSize
        let tail = UnsafeMutableRawPointer.allocate(byteCount: 3 + StoreConfiguration.maxInlineValueLength, alignment: 8)
        defer { tail.deallocate() }
        var valueBytes = 0
        let result = try CommitOps.decode(payload, count: length) { (op) throws(StorageError) in
            switch op {
            case .value(_, let size):
                valueBytes += size
            case .createTree(let id, let name):
                guard Int(id) == trees.count + 1, !trees.contains(where: { $0.name == name }) else {
                    throw StorageError.corrupted("tree creation out of sequence", offset: pos)
                }
                trees.append(TreeState(id: id, name: name, root: nil, count: 0))
            case .put(let id, let key, let kind, let value):
                guard Int(id) >= 1, Int(id) <= trees.count else { throw StorageError.corrupted("put into an unknown tree", offset: pos) }
                if kind == NodeField.valueExternal {
                    let ref = value.baseAddress!.u64(0)
                    guard ref >= Layout.logStart, ref < recordEnd else { throw StorageError.corrupted("value reference out of range", offset: pos) }
                }
                tail.setU8(kind, at: 0)
                tail.setU16(UInt16(value.count), at: 1)
                if value.count > 0 { (tail + 3).copyMemory(from: value.baseAddress!, byteCount: value.count) }
                _ = try editor.put(&trees[Int(id) - 1], key: key, tail: UnsafeRawBufferPointer(start: tail, count: 3 + value.count))
            case .delete(let id, let key):
                guard Int(id) >= 1, Int(id) <= trees.count else { throw StorageError.corrupted("delete from an unknown tree", offset: pos) }
                let state = trees[Int(id) - 1]
                if let root = try state.rootView(reader),
                   try reader.find(key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, key.count, root: root, tree: state.name) != nil {
                    try editor.delete(&trees[Int(id) - 1], key: key)
                }
            }
        }
        switch result {
        case .success(let id): return (id, length - valueBytes)
        case .failure(let e): throw StorageError.corrupted("malformed commit: \(e.reason)", offset: pos)
        }
    }
}
