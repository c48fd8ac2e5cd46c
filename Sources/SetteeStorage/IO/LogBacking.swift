import Dispatch
import Synchronization

/// One open log file and what reads it: the file, its memory map, the verified-record bitmap and
/// the salt its checksums use. A store has one at a time; compaction replaces it with the new log.
/// Every snapshot holds the backing it was committed in, so readers that started before a swap
/// keep reading the old file (unlinked, but mapped) until they finish.
final class LogBacking: @unchecked Sendable {
    let file: any StorageFile
    let map: MemoryMap
    let verified: VerifiedBitmap
    let salt: UInt64
    /// Set when a compaction swapped this log out (its name now belongs to the new log); only
    /// the last snapshot's release touches it, after the swap published the new backing.
    private let retired = Atomic<Bool>(false)

    init(file: any StorageFile, map: MemoryMap, verified: VerifiedBitmap, salt: UInt64) {
        self.file = file
        self.map = map
        self.verified = verified
        self.salt = salt
    }

    /// Marks the backing as replaced by a compaction: its memory is released off the thread that
    /// drops it last.
    func retire() { retired.store(true, ordering: .releasing) }

    deinit {
        guard retired.load(ordering: .acquiring) else { return }
        // The old log's name went to the new one (the rename is durable: its directory was
        // synced before the swap was published), so only this descriptor and the map keep its
        // data. Dropping them at once would free gigabytes of page cache and blocks in one go,
        // in whichever thread dropped the last snapshot (often the writer), and hold the
        // filesystem's journal meanwhile, so every commit sync waits: about 100 to 300 ms at
        // a million documents. The reaper frees it a slice at a time instead.
        let map = Unmanaged.passRetained(self.map)
        let verified = Unmanaged.passRetained(self.verified)
        // Nothing else uses the file any more: the reaper is its only user from here on.
        nonisolated(unsafe) let file = self.file
        LogBacking.reaper.async {
            map.release()
            verified.release()
            // Straight on the descriptor, not through the file seam: this is not a write of the
            // database (no name leads to this file any more), and a crash test's fault plan
            // must not count it.
            if var size = PosixFile.size(of: file.descriptor) {
                while size > LogBacking.reapSlice {
                    size -= LogBacking.reapSlice
                    let started = MonotonicClock.microseconds()
                    guard PosixFile.truncate(file.descriptor, to: size) else { break }
                    // As long again for the writer's syncs (which wait while a slice is freed),
                    // and at least 2 ms.
                    MonotonicClock.sleep(microseconds: max(2_000, MonotonicClock.microseconds() - started))
                }
            }
            file.close()
        }
    }

    private static let reapSlice: UInt64 = 16 << 20
    private static let reaper = DispatchQueue(label: "settee.storage.retired-logs", qos: .utility)
}
