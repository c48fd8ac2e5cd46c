/// One open log file and what reads it: the file, its memory map, the verified-record bitmap and
/// the salt its checksums use. A store has one at a time; compaction replaces it with the new log.
/// Every snapshot holds the backing it was committed in, so readers that started before a swap
/// keep reading the old file (unlinked, but mapped) until they finish.
final class LogBacking: @unchecked Sendable {
    let file: any StorageFile
    let map: MemoryMap
    let verified: VerifiedBitmap
    let salt: UInt64

    init(file: any StorageFile, map: MemoryMap, verified: VerifiedBitmap, salt: UInt64) {
        self.file = file
        self.map = map
        self.verified = verified
        self.salt = salt
    }
}
