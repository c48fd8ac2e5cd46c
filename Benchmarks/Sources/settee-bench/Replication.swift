/// `rev-insert`'s documents, one commit's worth: the dataset's keys and first bodies in insertion order
/// (sequences `p + 1`), each arriving as a replicated revision `10-…` with its nine ancestors `9-…` … `1-…`.
/// The histories are generated when the batch is made, before the clock starts.
struct ReplicatedBatch: RandomAccessCollection {
    /// Revisions in each document's history, the new revision included.
    static let historyDepth = 10

    let dataset: Dataset
    let positions: Range<Int>
    /// `historyDepth` revision IDs per document, newest first.
    private let revisionIDs: ByteTable

    init(dataset: Dataset, positions: Range<Int>) {
        self.dataset = dataset
        self.positions = positions
        revisionIDs = ByteTable(byteCapacity: positions.count * Self.historyDepth * 40,
                                entryCapacity: positions.count * Self.historyDepth)
        for position in positions {
            let index = dataset.insertionOrder[position]
            for generation in stride(from: Self.historyDepth, through: 1, by: -1) {
                revisionIDs.append(dataset.generator.replicatedRevisionID(of: index, generation: generation))
            }
        }
    }

    var startIndex: Int { positions.lowerBound }
    var endIndex: Int { positions.upperBound }

    subscript(position: Int) -> ReplicatedDocument {
        let index = dataset.insertionOrder[position]
        return ReplicatedDocument(key: dataset.key(index), sequence: UInt64(position + 1), body: dataset.body(index),
                                  revisionIDs: revisionIDs,
                                  firstRevision: (position - positions.lowerBound) * Self.historyDepth)
    }
}

/// One replicated document of `rev-insert`. The buffers belong to the dataset and the batch.
struct ReplicatedDocument {
    let key: UnsafeRawBufferPointer
    let sequence: UInt64
    let body: UnsafeRawBufferPointer
    fileprivate let revisionIDs: ByteTable
    fileprivate let firstRevision: Int

    /// `history(0)` is the new revision (generation 10), `history(historyDepth - 1)` the oldest (1).
    @inline(__always)
    func history(_ depth: Int) -> UnsafeRawBufferPointer {
        revisionIDs[firstRevision + depth]
    }
}

/// A document's revision tree encoded the way Couchbase Lite stores it in the `extra` column of its
/// SQLite records (LiteCore's `RawRevTree`, `LiteCore/RevTrees/RawRevTree.cc`): the revisions in priority
/// order, the current leaf first, each
/// `[u32 BE size][u16 BE parent index or 0xFFFF][u8 flags][u8 revIDLength][revID][varint sequence]`,
/// then a u32 zero. Revision IDs are in LiteCore's compact binary form (varint generation, then the
/// digest's bytes when it is hex). The current revision's body is not in the tree but in the record's
/// `body` column; the ancestors of a replicated revision come without bodies. New revisions are written
/// with sequence 0, which LiteCore reads back as the record's sequence.
///
/// The SQLite and LMDB peers of `rev-insert` build it for every document, timed, from the ASCII history.
enum RawRevTree {
    /// LiteCore's `Rev::kLeaf`.
    static let leafFlag: UInt8 = 0x02
    static let noParent: UInt16 = 0xFFFF

    /// Appends `document`'s tree (a single branch of `historyDepth` revisions) to `tree`, and the compact
    /// form of its current revision ID to `version`. Throws when the history is malformed (generations
    /// must count down by one, as LiteCore checks).
    @inline(__always)
    static func encode(_ document: ReplicatedDocument, tree: RecordBuffer, version: RecordBuffer) throws {
        var expectedGeneration: UInt64 = 0
        for depth in 0 ..< ReplicatedBatch.historyDepth {
            let revisionID = document.history(depth)
            let start = tree.count
            tree.appendBigEndian32(0)   // the size, patched below
            tree.appendBigEndian16(depth + 1 < ReplicatedBatch.historyDepth ? UInt16(depth + 1) : noParent)
            tree.appendByte(depth == 0 ? leafFlag : 0)
            tree.appendByte(0)          // revIDLength, patched below
            let idStart = tree.count
            let generation = try appendCompact(revisionID, to: tree)
            guard depth == 0 || generation == expectedGeneration else {
                throw EngineError("rev-insert: history generations do not count down by one")
            }
            expectedGeneration = generation - 1
            if depth == 0 { version.append(UnsafeRawBufferPointer(rebasing: tree.bytes[idStart...])) }
            let idLength = tree.count - idStart
            tree.appendByte(0)          // varint sequence 0: "the record's sequence"
            tree.patchBigEndian32(UInt32(tree.count - start), at: start)
            tree.patchByte(UInt8(idLength), at: start + 7)
        }
        tree.appendBigEndian32(0)
    }

    /// `<generation>-<hex digest>` → varint generation, digest bytes. Returns the generation.
    @inline(__always)
    static func appendCompact(_ revisionID: UnsafeRawBufferPointer, to buffer: RecordBuffer) throws -> UInt64 {
        var generation: UInt64 = 0
        var index = 0
        while index < revisionID.count, revisionID[index] != UInt8(ascii: "-") {
            let digit = revisionID[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw EngineError("rev-insert: malformed revision ID") }
            generation = generation * 10 + UInt64(digit)
            index += 1
        }
        let digestLength = revisionID.count - index - 1
        guard generation > 0, index < revisionID.count, digestLength > 0, digestLength % 2 == 0 else {
            throw EngineError("rev-insert: malformed revision ID")
        }
        buffer.appendVarint(generation)
        index += 1
        while index < revisionID.count {
            guard let high = hexValue(revisionID[index]), let low = hexValue(revisionID[index + 1]) else {
                throw EngineError("rev-insert: revision digest is not hex")
            }
            buffer.appendByte(high << 4 | low)
            index += 2
        }
        return generation
    }

    /// The ASCII form (`<generation>-<hex>`) of a compact revision ID written by `appendCompact`.
    static func asciiRevisionID(_ compact: UnsafeRawBufferPointer) -> [UInt8] {
        var id = compact[...]
        var generation: UInt64 = 0
        var shift: UInt64 = 0
        while let byte = id.popFirst() {
            generation |= UInt64(byte & 0x7F) << shift
            shift += 7
            if byte < 0x80 { break }
        }
        let hex = Array("0123456789abcdef".utf8)
        var text = Array("\(generation)-".utf8)
        for byte in id {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0xF)])
        }
        return text
    }

    @inline(__always)
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// The ASCII revision IDs of a tree written by `encode`, in stored order (newest first); nil when it is
    /// malformed or not a single branch. Untimed: the check after the run.
    static func decodeHistory(_ tree: UnsafeRawBufferPointer) -> [[UInt8]]? {
        var revisions: [[UInt8]] = []
        var offset = 0
        while offset + 4 <= tree.count {
            let size = Int(UInt32(bigEndian: tree.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            if size == 0 { return offset + 4 == tree.count ? revisions : nil }
            guard size >= 9, offset + size <= tree.count else { return nil }
            let parent = UInt16(bigEndian: tree.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self))
            guard parent == (revisions.count + 1 < ReplicatedBatch.historyDepth ? UInt16(revisions.count + 1) : noParent)
            else { return nil }
            let idLength = Int(tree[offset + 7])
            guard 8 + idLength < size else { return nil }
            revisions.append(asciiRevisionID(UnsafeRawBufferPointer(rebasing: tree[(offset + 8) ..< (offset + 8 + idLength)])))
            offset += size
        }
        return nil
    }
}

extension RecordBuffer {
    func appendBigEndian32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { append($0) }
    }

    func appendBigEndian16(_ value: UInt16) {
        withUnsafeBytes(of: value.bigEndian) { append($0) }
    }

    func appendLittleEndian32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { append($0) }
    }

    func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            appendByte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        appendByte(UInt8(value))
    }
}
