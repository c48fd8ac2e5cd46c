/// Byte strings stored back to back in one allocation and addressed by index, so the timed loops read
/// documents through plain pointers: no array bounds checks, no reference counting, no allocation.
///
/// Capacity is fixed at creation; an entry is never moved, so the buffers it hands out stay valid for the
/// table's lifetime.
final class ByteTable {
    private let storage: UnsafeMutableRawBufferPointer
    private var offsets: [Int] = [0]

    init(byteCapacity: Int, entryCapacity: Int) {
        storage = .allocate(byteCount: max(byteCapacity, 1), alignment: 8)
        offsets.reserveCapacity(entryCapacity + 1)
    }

    deinit {
        storage.deallocate()
    }

    /// The total length of all entries.
    var byteCount: Int { offsets[offsets.count - 1] }

    func append(_ bytes: [UInt8]) {
        let start = byteCount
        precondition(start + bytes.count <= storage.count, "ByteTable capacity exceeded")
        bytes.withUnsafeBytes { source in
            UnsafeMutableRawBufferPointer(rebasing: storage[start ..< start + source.count]).copyMemory(from: source)
        }
        offsets.append(start + bytes.count)
    }

    subscript(index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[offsets[index] ..< offsets[index + 1]])
    }
}
