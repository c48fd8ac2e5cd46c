
/// Commits: a transaction's operations and out-of-line values are one commit record, written with
/// one `pwrite` at the end of the log and made durable with one `fdatasync`.
extension Store {
    /// Caller holds the writer lock; `tx` has finished running.
    func commit(_ tx: WriteTransaction) throws(StorageError) {
        guard tx.hasOperations else { return }
        let w = writer.buffer
        let start = writer.logEnd
        appendOperationsBlock(to: w)
        let payload = w.count - Layout.recordHeaderSize
        guard payload <= Layout.maxRecordPayload else {
            throw StorageError(code: .valueTooLarge, reason: "transaction larger than \(Layout.maxRecordPayload) bytes")
        }
        let footprint = RecordType.commit.footprint(payload: payload)
        w.zeros(footprint - w.count)
        let synchronous = configuration.durability == .synchronous
        RecordHeader.seal(w.base, type: .commit, flags: writer.priorDurable ? Layout.recordFlagPriorDurable : 0,
                          payloadLength: payload, epoch: writer.header.epoch, salt: salt, offset: start)
        // Refused before anything is written, so the store stays usable (a compaction can still
        // shrink the log).
        try backing.map.checkCovers(start + UInt64(footprint))
        let allocated = writer.allocated
        do throws(StorageError) {
            try ensureAllocated(from: start, to: start + UInt64(footprint))
            if synchronous {
                try file.writeDurably(w.bytes, at: start)
            } else {
                try file.write(w.bytes, at: start)
            }
        } catch {
            if survives(error) {
                // A full disk: the commit is not made, the log ends where it did, and the space
                // written ahead is counted again from what is known to be there.
                writer.allocated = allocated
                w.reset()
                writer.operations.reset()
                throw error
            }
            // After a failed write or sync nothing about the file's state is known (the kernel may
            // have dropped the pages): refuse to write again until reopened.
            writer.poisoned = error
            throw error
        }
        writer.priorDurable = synchronous
        writer.logEnd = start + UInt64(footprint)
        markValuesVerified(w.base, count: tx.valueBytes, recordStart: start)
        if writer.isCompactionTarget, writer.logEnd - writer.syncedEnd >= Store.compactionSyncInterval {
            // A compaction target writes hundreds of MiB unsynced. Flushed all at once before the
            // swap, they would queue ahead of the source writer's commit syncs for a long moment;
            // flushed as they come, each source sync waits behind a few MiB at most, and the sync
            // before the swap has little left to do. (No record claims durability from this sync.)
            do throws(StorageError) {
                try file.syncForOrdering()
            } catch {
                writer.poisoned = error
                throw error
            }
            writer.syncedEnd = writer.logEnd
        }
        writer.dirtyNodes += tx.editor.createdNodes
        writer.replayBytes += payload - tx.valueBytes
        w.reset()
        publish(Snapshot(trees: tx.trees, end: writer.logEnd, commitID: tx.commitID, backing: backing, previous: tx.base))
        // After publishing: whoever takes these keys then reads a snapshot that holds them.
        if let journal = writer.journal, !tx.touched.isEmpty { journal.append(tx.touched) }
        if writer.replayBytes >= configuration.checkpointInterval
            || writer.dirtyNodes >= configuration.maxDirtyNodes
            || writer.logEnd - writer.lastCheckpointEnd >= UInt64(configuration.checkpointInterval) * 16 {
            // The commit is durable and visible; a failed checkpoint poisons the store for the next write.
            try? writeCheckpoint()
        }
    }

    /// Whether the store stays usable after `error` ended a write of the log: a full disk met
    /// by a write (nothing past the log's end is kept: the next record overwrites it, recovery
    /// ignores it), or by a sync when every commit before it is durable already (the sync could
    /// only have lost the failed record's own pages). A full disk met by the sync of commits not
    /// yet durable, or any other failure, leaves the file's state unknown.
    func survives(_ error: StorageError) -> Bool {
        error.code == .noSpace && (configuration.durability == .synchronous || error.operation == "pwrite")
    }

    /// The value entries of a commit just written were checksummed from these bytes: they count
    /// as verified, so this process's first read of them skips the checksum pass (as it already
    /// does for the nodes its checkpoints write).
    private func markValuesVerified(_ record: UnsafeMutableRawPointer, count: Int, recordStart: UInt64) {
        let verified = backing.verified
        var at = Layout.recordHeaderSize + 8
        let end = at + count
        while at < end {
            let size = Layout.valueHeaderSize + Int(record.u32(at + Layout.vStoredLength))
            // Only values of 64 bytes or more are remembered, by the block holding their last byte.
            if size >= 64 { verified.insert(recordStart + UInt64(at + size - 1)) }
            at += size
        }
    }

    /// Appends the operations block: u8 kind 5, u8 flags (bit 0 LZ4), u16 0, u32 stored length,
    /// u32 raw length, then the operations. Replay is the only reader, so compressing them costs
    /// reads nothing.
    private func appendOperationsBlock(to w: ByteWriter) {
        let ops = writer.operations
        let raw = ops.count
        let at = w.count
        w.reserve(Layout.operationsHeaderSize + max(raw, LZ4.bound(raw)))
        let data = w.base + at + Layout.operationsHeaderSize
        var flags: UInt8 = 0
        var stored = raw
        if raw >= Layout.operationsCompressionThreshold,
           let n = writer.compressor.compress(ops.bytes, into: data, capacity: LZ4.bound(raw)),
           n <= raw - raw / 8 {
            flags = Layout.valueFlagLZ4
            stored = n
        } else if raw > 0 {
            data.copyMemory(from: ops.base, byteCount: raw)
        }
        let h = w.base + at
        h.setU8(Layout.opBlock, at: 0)
        h.setU8(flags, at: 1)
        h.setU16(0, at: 2)
        h.setU32(UInt32(stored), at: 4)
        h.setU32(UInt32(raw), at: 8)
        w.count = at + Layout.operationsHeaderSize + stored
        ops.reset()
    }

    /// Makes sure the file extends to `end`. Small appends land in space already written with
    /// zeros, so their `fdatasync` does not have to change the file's size; large ones extend it.
    /// The file never grows past the memory map's reservation: an append that would is refused,
    /// and the zeros written ahead stop there (a file larger than the reservation could not be
    /// opened again with the same one).
    func ensureAllocated(from start: UInt64 = 0, to end: UInt64) throws(StorageError) {
        guard end > writer.allocated else { return }
        // Appends start at the log's end, which lies inside the file; anything else would fill
        // the disk with zeros.
        guard start <= writer.allocated else {
            throw StorageError(code: .invalidArgument, reason: "append at \(start) beyond the end of the file (\(writer.allocated))")
        }
        try backing.map.checkCovers(end)
        if end - start >= Store.directExtension {
            writer.allocated = end
            return
        }
        // 4 MiB at a time: about a millisecond of writing, shared by thousands of small commits.
        // On a disk too full for that much, only what this write needs: the disk fills to the
        // last block before a write is refused.
        let chunk: UInt64 = 4 << 20
        var target = min(alignUp(end, 1 << 20) + chunk, UInt64(backing.map.reserved))
        var at = writer.allocated
        while at < target {
            let n = min(UInt64(Store.zeroCount), target - at)
            do throws(StorageError) {
                try file.write(UnsafeRawBufferPointer(start: Store.zeroBytes, count: Int(n)), at: at)
            } catch where error.code == .noSpace && target > end {
                // What this write needs is there already, or may still fit.
                target = at >= end ? at : end
                continue
            }
            at += n
        }
        // Synced now, so the blocks are allocated and written before the commits that land in
        // them (delayed allocation would otherwise make each of those commits allocate blocks).
        // No commit counts on the zeros being durable: ordering is enough where that is cheaper.
        try file.syncForOrdering()
        writer.allocated = target
    }

    /// Appends at least this large extend the file themselves instead of landing in zeros written
    /// ahead. Writing the zeros costs about as much as writing the data again, plus a sync; the
    /// size change instead costs one journal commit in the append's own sync (tens of µs). Above
    /// about 128 KiB the size change is the cheaper one (Formats/storage.md, "File growth").
    static let directExtension: UInt64 = 128 << 10

    static let zeroCount = 1 << 20
    nonisolated(unsafe) static let zeroBytes: UnsafeRawPointer = {
        let p = UnsafeMutableRawPointer.allocate(byteCount: zeroCount, alignment: 4096)
        p.initializeMemory(as: UInt8.self, repeating: 0, count: zeroCount)
        return UnsafeRawPointer(p)
    }()
}
