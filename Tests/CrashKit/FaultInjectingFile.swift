import Glibc
import SetteeStorage

/// A ``StorageFile`` that keeps what is durable apart from what was only written, so a test can
/// cut the power at any operation and see what a disk could hold afterwards.
///
/// Every write also goes to a real file (the engine reads through its memory map, as from the
/// page cache); `durable` is what survives a power loss for certain, and `pending` holds the
/// writes and size changes made since the last successful sync, which may land whole, in part
/// (a prefix, or any subset of 512-byte sectors), out of order, or not at all.
///
/// Used by one thread at a time, like every `StorageFile`.
package final class FaultInjectingFile: StorageFile {
    package enum Pending {
        case write(offset: UInt64, bytes: [UInt8])
        case truncate(size: UInt64)
    }

    /// What the file holds for certain after a power loss.
    package private(set) var durable: [UInt8]
    /// Changes since the last successful sync.
    package private(set) var pending: [Pending] = []
    /// Changes a failed sync may or may not have written. A later sync does not make them
    /// durable: like Linux after an `fdatasync` error, the kernel has forgotten them.
    package private(set) var uncertain: [Pending] = []

    /// When the power fails and which operations fail; shared by every file of one database.
    package let plan: FaultPlan
    private var crashed: Bool { plan.crashed }

    private let real: PosixFile
    private var random: SplitMix

    package var descriptor: Int32 { real.descriptor }

    /// Opens (creating when missing) the file at `path`; what it holds now is taken as durable.
    package init(path: String, plan: FaultPlan, seed: UInt64) throws(StorageError) {
        self.plan = plan
        real = try PosixFile(path: path)
        random = SplitMix(seed: seed)
        let size = Int(try real.size())
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        let n = try real.read(into: buffer, at: 0)
        durable = Array(buffer[0..<n])
    }

    private func begin() throws(StorageError) -> Bool {
        if crashed {
            plan.operationsAfterCrash += 1
            throw StorageError(code: .io, reason: "the power is off", errno: EIO, operation: "simulated power loss")
        }
        plan.operations += 1
        return plan.operations == plan.crashAt
    }

    private func powerFails() -> StorageError {
        plan.crashed = true
        return StorageError(code: .io, reason: "simulated power loss", errno: EIO, operation: "simulated power loss")
    }

    package func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        let dying = try begin()
        if dying || plan.operations == plan.failWriteAt {
            // A prefix may have reached the page cache before the failure.
            let n = Int(random.next(below: UInt64(bytes.count) + 1))
            if n > 0 {
                let part = UnsafeRawBufferPointer(rebasing: bytes[0..<n])
                try real.write(part, at: offset)
                pending.append(.write(offset: offset, bytes: Array(part)))
            }
            if dying { throw powerFails() }
            plan.writeFailures += 1
            throw StorageError(code: .io, reason: "injected write failure", errno: EIO, operation: "pwrite")
        }
        try real.write(bytes, at: offset)
        pending.append(.write(offset: offset, bytes: Array(bytes)))
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StorageError) -> Int {
        if crashed { throw StorageError(code: .io, reason: "the power is off", errno: EIO, operation: "simulated power loss") }
        return try real.read(into: buffer, at: offset)
    }

    package func sync() throws(StorageError) {
        if try begin() { throw powerFails() }
        if plan.operations == plan.failSyncAt {
            failSync()
            throw StorageError(code: .io, reason: "injected fdatasync failure", errno: EIO, operation: "fdatasync")
        }
        makeDurable()
    }

    package func writeDurably(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        let dying = try begin()
        if dying || plan.operations == plan.failWriteAt {
            let n = Int(random.next(below: UInt64(bytes.count) + 1))
            let part = UnsafeRawBufferPointer(rebasing: bytes[0..<n])
            if n > 0 { try real.write(part, at: offset) }
            pending.append(.write(offset: offset, bytes: Array(part)))
            if dying { throw powerFails() }
            plan.writeFailures += 1
            throw StorageError(code: .io, reason: "injected write failure", errno: EIO, operation: "pwritev2")
        }
        try real.write(bytes, at: offset)
        if plan.operations == plan.failSyncAt {
            pending.append(.write(offset: offset, bytes: Array(bytes)))
            failSync()
            throw StorageError(code: .io, reason: "injected RWF_DSYNC failure", errno: EIO, operation: "pwritev2")
        }
        // RWF_DSYNC makes this write durable, and only this one: other pending writes stay
        // pending (ext4 syncs the written range plus the metadata needed to read it).
        Self.apply(.write(offset: offset, bytes: Array(bytes)), to: &durable)
        plan.onDurable?()
    }

    package func size() throws(StorageError) -> UInt64 {
        if crashed { throw StorageError(code: .io, reason: "the power is off", errno: EIO, operation: "simulated power loss") }
        return try real.size()
    }

    package func truncate(to size: UInt64) throws(StorageError) {
        if try begin() {
            if random.next(below: 2) == 0 { pending.append(.truncate(size: size)) }
            throw powerFails()
        }
        try real.truncate(to: size)
        pending.append(.truncate(size: size))
    }

    package func close() { real.close() }

    private func makeDurable() {
        for change in pending { Self.apply(change, to: &durable) }
        pending.removeAll()
        plan.onDurable?()
    }

    private func failSync() {
        plan.syncFailures += 1
        uncertain += pending
        pending.removeAll()
    }

    /// What the disk could hold after the power fails now: the durable image, plus each pending
    /// or uncertain change dropped, applied whole, cut to a prefix, or applied in a random subset
    /// of its 512-byte sectors, in a random order.
    package func imageAfterPowerLoss(random r: inout SplitMix) -> [UInt8] {
        var image = durable
        var changes = uncertain + pending
        r.shuffle(&changes)
        for change in changes {
            switch change {
            case .truncate:
                if r.next(below: 2) == 0 { Self.apply(change, to: &image) }
            case .write(let offset, let bytes):
                switch r.next(below: 4) {
                case 0:
                    break
                case 1:
                    Self.apply(change, to: &image)
                case 2:
                    let n = Int(r.next(below: UInt64(bytes.count) + 1))
                    Self.apply(.write(offset: offset, bytes: Array(bytes[0..<n])), to: &image)
                default:
                    // Sectors are aligned to the file, not to the write.
                    var at = 0
                    while at < bytes.count {
                        let sectorEnd = Int((offset + UInt64(at)) / 512 + 1) * 512 - Int(offset)
                        let end = min(bytes.count, sectorEnd)
                        if r.next(below: 2) == 0 {
                            Self.apply(.write(offset: offset + UInt64(at), bytes: Array(bytes[at..<end])), to: &image)
                        }
                        at = end
                    }
                }
            }
        }
        return image
    }

    static func apply(_ change: Pending, to image: inout [UInt8]) {
        switch change {
        case .truncate(let size):
            let size = Int(size)
            if size < image.count { image.removeSubrange(size...) } else { image += [UInt8](repeating: 0, count: size - image.count) }
        case .write(let offset, let bytes):
            let offset = Int(offset)
            if offset + bytes.count > image.count { image += [UInt8](repeating: 0, count: offset + bytes.count - image.count) }
            image.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        }
    }
}

/// When the power fails and which operations fail, counted over every file of one database (the
/// log and, while a database is created, the file that becomes it).
package final class FaultPlan {
    /// The operation (1-based: writes, syncs, durable writes and truncations counted together)
    /// at which the power fails; that operation may be partly done.
    package var crashAt: Int?
    /// The operation at which `fdatasync` (or a durable write's sync) fails with EIO.
    package var failSyncAt: Int?
    /// The operation at which a write fails with EIO after writing a random prefix.
    package var failWriteAt: Int?
    /// Called after each successful sync (durable write included).
    package var onDurable: (() -> Void)?

    package internal(set) var operations = 0
    package internal(set) var crashed = false
    package internal(set) var syncFailures = 0
    package internal(set) var writeFailures = 0
    /// Operations attempted after the power failed.
    package internal(set) var operationsAfterCrash = 0
    /// Whether a write or sync has failed (without the power failing).
    package var injectedFailure: Bool { syncFailures + writeFailures > 0 }

    package init(crashAt: Int? = nil) { self.crashAt = crashAt }
}
