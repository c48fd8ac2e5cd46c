/// Where every engine copies what a read returns, so each pays for the same copy out of its storage (the
/// engines hand out views of their own memory that die with the read transaction).
///
/// It also keeps a summary of what it saw, checked against the dataset after the timed run, so an engine
/// that reads less, or the wrong thing, fails instead of winning.
final class ReadSink {
    struct Summary: Equatable {
        var documents = 0
        var bytes = 0
        /// Folds the order of the keys seen.
        var keyFingerprint: UInt64 = 0
    }

    private var keyBuffer = ReusableBuffer()
    private var versionBuffer = ReusableBuffer()
    private var bodyBuffer = ReusableBuffer()
    private(set) var summary = Summary()

    /// The body most recently copied in.
    var lastBody: UnsafeRawBufferPointer { bodyBuffer.contents }

    func reset() {
        summary = Summary()
    }

    /// A point read: the body only.
    @inline(__always)
    func acceptBody(_ body: UnsafeRawBufferPointer) {
        bodyBuffer.copy(body)
        summary.documents += 1
        summary.bytes += body.count
    }

    /// A change: key, version and body.
    @inline(__always)
    func acceptChange(key: UnsafeRawBufferPointer, version: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) {
        keyBuffer.copy(key)
        versionBuffer.copy(version)
        bodyBuffer.copy(body)
        summary.documents += 1
        summary.bytes += key.count + version.count + body.count
        summary.keyFingerprint = (summary.keyFingerprint &* 0x0000_0100_0000_01B3) ^ keyBuffer.tailWord
    }
}

/// A heap buffer reused for every copy; it grows when a value does not fit.
private struct ReusableBuffer {
    private var storage = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
    private var count = 0

    var contents: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[0 ..< count])
    }

    /// The last 8 bytes (fewer when shorter), as one word.
    var tailWord: UInt64 {
        var word: UInt64 = 0
        for byte in contents.suffix(8) { word = word << 8 | UInt64(byte) }
        return word
    }

    @inline(__always)
    mutating func copy(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count > storage.count {
            storage.deallocate()
            storage = .allocate(byteCount: bytes.count, alignment: 8)
        }
        if let source = bytes.baseAddress {
            storage.baseAddress!.copyMemory(from: source, byteCount: bytes.count)
        }
        count = bytes.count
    }
}
