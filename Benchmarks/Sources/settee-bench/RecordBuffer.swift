/// A reusable buffer that engine adapters lay their records out in, so no engine allocates per document.
final class RecordBuffer {
    private var storage: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    init(capacity: Int = 1024) {
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit {
        storage.deallocate()
    }

    var bytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[0 ..< count])
    }

    func reset() {
        count = 0
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        if let source = bytes.baseAddress {
            (storage.baseAddress! + count).copyMemory(from: source, byteCount: bytes.count)
        }
        count += bytes.count
    }

    func appendByte(_ byte: UInt8) {
        reserve(1)
        storage[count] = byte
        count += 1
    }

    func appendBigEndian(_ value: UInt64) {
        reserve(8)
        storage.storeBytes(of: value.bigEndian, toByteOffset: count, as: UInt64.self)
        count += 8
    }

    func appendLittleEndian(_ value: UInt64) {
        reserve(8)
        storage.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt64.self)
        count += 8
    }

    /// Drops what was appended after the first `count` bytes.
    func truncate(to count: Int) {
        precondition(count <= self.count)
        self.count = count
    }

    /// Overwrites a byte already appended.
    func patchByte(_ byte: UInt8, at offset: Int) {
        precondition(offset < count)
        storage[offset] = byte
    }

    /// Overwrites four bytes already appended with `value`, big-endian.
    func patchBigEndian32(_ value: UInt32, at offset: Int) {
        precondition(offset + 4 <= count)
        storage.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self)
    }

    /// `[u8 versionLength][version][body]`: the part of a document record LMDB and Settee share.
    func appendVersioned(version: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) {
        precondition(version.count <= Int(UInt8.max))
        appendByte(UInt8(version.count))
        append(version)
        append(body)
    }

    private func reserve(_ extra: Int) {
        guard count + extra > storage.count else { return }
        let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(storage.count * 2, count + extra),
                                                           alignment: 8)
        grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[0 ..< count]))
        storage.deallocate()
        storage = grown
    }
}

extension UnsafeRawBufferPointer {
    func bigEndianUInt64(at offset: Int) -> UInt64 {
        UInt64(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    func littleEndianUInt64(at offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// Splits `[u8 versionLength][version][body]`; nil when the lengths do not fit.
    func splitVersioned() -> (version: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer)? {
        guard let length = first.map(Int.init), count >= 1 + length else { return nil }
        return (UnsafeRawBufferPointer(rebasing: self[1 ..< 1 + length]),
                UnsafeRawBufferPointer(rebasing: self[(1 + length)...]))
    }
}
