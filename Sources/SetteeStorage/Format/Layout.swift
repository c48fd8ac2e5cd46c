// The byte layout of the log file: the one place that knows offsets. Formats/storage.md describes
// the same layout in prose and diagrams; FormatTests checks the two agree on the golden files.

enum Layout {
    /// Version of the file format this build writes and reads.
    static let formatVersion: UInt32 = 1
    /// "SETTEE" + 0x00 + 0x4C ("L" for log).
    static let magic: UInt64 = 0x4C00_4545_5454_4553
    /// Each of the two header slots.
    static let headerSlotSize = 4096
    /// The log begins after both slots.
    static let logStart: UInt64 = 8192

    // Header slot fields (offsets inside a slot).
    static let hMagic = 0
    static let hVersion = 8
    static let hFlags = 12
    static let hGeneration = 16
    static let hSalt = 24
    static let hEpoch = 32
    static let hReserved = 36
    static let hCheckpoint = 40
    static let hReplayFrom = 48
    static let hNodeSize = 56
    static let hChecksum = 60
    static let headerSlotUsed = 64

    // Record header (16 bytes) in front of every record.
    static let recordHeaderSize = 16
    static let rChecksum = 0
    static let rType = 4
    static let rFlags = 5
    /// Set on a record written when every byte before it was already durable. A damaged record
    /// followed by such a record cannot be a torn write: it is corruption.
    static let recordFlagPriorDurable: UInt8 = 1
    static let rLength = 8
    static let rEpoch = 12
    /// Records start at multiples of this; node records at multiples of `nodeAlignment`.
    static let recordAlignment = 16
    static let nodeAlignment = 64
    /// No record payload is larger (commits with more data are refused before they are written).
    static let maxRecordPayload = 1 << 30

    // Value entries inside commit records.
    static let valueHeaderSize = 16
    static let vKind = 0
    static let vFlags = 1
    static let vStoredLength = 4
    static let vRawLength = 8
    static let vChecksum = 12
    static let valueFlagLZ4: UInt8 = 1

    // Commit stream entry kinds.
    static let opValue: UInt8 = 1
    static let opPut: UInt8 = 2
    static let opDelete: UInt8 = 3
    static let opCreateTree: UInt8 = 4
    /// The block holding a commit's operations (kinds 2 to 4), LZ4-compressed when that pays.
    static let opBlock: UInt8 = 5
    static let operationsHeaderSize = 12
    /// Operation blocks smaller than this are stored raw.
    static let operationsCompressionThreshold = 256

    /// Node size limit (both in memory and on disk).
    static let nodeSize = 4096
}

/// The kinds of records in the log.
enum RecordType: UInt8 {
    case commit = 1
    case node = 2
    case checkpoint = 3
    case pad = 4

    /// The space the record occupies, header and padding included.
    func footprint(payload: Int) -> Int {
        alignUp(Layout.recordHeaderSize + payload, self == .node ? Layout.nodeAlignment : Layout.recordAlignment)
    }
}

/// The contents of one header slot.
struct HeaderSlot: Equatable {
    var generation: UInt64
    var salt: UInt64
    var epoch: UInt32
    /// Offset of the latest checkpoint record, or 0 when there is none yet.
    var checkpoint: UInt64
    /// Where replay starts (the end of that checkpoint record, or the start of the log).
    var replayFrom: UInt64

    func encode(into p: UnsafeMutableRawPointer) {
        p.initializeMemory(as: UInt8.self, repeating: 0, count: Layout.headerSlotSize)
        p.setU64(Layout.magic, at: Layout.hMagic)
        p.setU32(Layout.formatVersion, at: Layout.hVersion)
        p.setU32(0, at: Layout.hFlags)
        p.setU64(generation, at: Layout.hGeneration)
        p.setU64(salt, at: Layout.hSalt)
        p.setU32(epoch, at: Layout.hEpoch)
        p.setU64(checkpoint, at: Layout.hCheckpoint)
        p.setU64(replayFrom, at: Layout.hReplayFrom)
        p.setU32(UInt32(Layout.nodeSize), at: Layout.hNodeSize)
        p.setU32(crc32c(0, p, Layout.hChecksum), at: Layout.hChecksum)
    }

    enum DecodeResult {
        case valid(HeaderSlot)
        case invalid(String)
        case unsupportedVersion(UInt32)
    }

    static func decode(_ p: UnsafeRawPointer) -> DecodeResult {
        guard p.u64(Layout.hMagic) == Layout.magic else { return .invalid("bad magic") }
        guard checksumMatches(crc32c(0, p, Layout.hChecksum), p.u32(Layout.hChecksum)) else { return .invalid("bad header checksum") }
        let version = p.u32(Layout.hVersion)
        guard version == Layout.formatVersion else { return .unsupportedVersion(version) }
        guard p.u32(Layout.hNodeSize) == UInt32(Layout.nodeSize) else { return .invalid("unsupported node size") }
        let slot = HeaderSlot(
            generation: p.u64(Layout.hGeneration), salt: p.u64(Layout.hSalt), epoch: p.u32(Layout.hEpoch),
            checkpoint: p.u64(Layout.hCheckpoint), replayFrom: p.u64(Layout.hReplayFrom))
        guard slot.replayFrom >= Layout.logStart, slot.replayFrom % UInt64(Layout.recordAlignment) == 0 else {
            return .invalid("replay offset out of range")
        }
        guard slot.checkpoint == 0 || (slot.checkpoint >= Layout.logStart && slot.checkpoint < slot.replayFrom) else {
            return .invalid("checkpoint offset out of range")
        }
        return .valid(slot)
    }
}

/// A parsed, not yet verified record header.
struct RecordHeader {
    var checksum: UInt32
    var type: RecordType?
    var rawType: UInt8
    var flags: UInt8
    var length: Int
    var epoch: UInt32

    init(_ p: UnsafeRawPointer) {
        checksum = p.u32(Layout.rChecksum)
        rawType = p.u8(Layout.rType)
        type = RecordType(rawValue: rawType)
        flags = p.u8(Layout.rFlags)
        length = Int(p.u32(Layout.rLength))
        epoch = p.u32(Layout.rEpoch)
    }

    /// Writes a record header for `payloadLength` bytes already placed after it, checksum included.
    static func seal(_ p: UnsafeMutableRawPointer, type: RecordType, flags: UInt8 = 0, payloadLength: Int, epoch: UInt32, salt: UInt64, offset: UInt64) {
        p.setU32(0, at: Layout.rChecksum)
        p.setU8(type.rawValue, at: Layout.rType)
        p.setU8(flags, at: Layout.rFlags)
        p.setU16(0, at: Layout.rType + 2)
        p.setU32(UInt32(payloadLength), at: Layout.rLength)
        p.setU32(epoch, at: Layout.rEpoch)
        let seed = checksumSeed(salt: salt, offset: offset)
        p.setU32(crc32c(seed, p + 4, Layout.recordHeaderSize - 4 + payloadLength), at: Layout.rChecksum)
    }

    /// Whether the checksum matches the bytes at `p` (header included) written at `offset`.
    static func verify(_ p: UnsafeRawPointer, payloadLength: Int, salt: UInt64, offset: UInt64) -> Bool {
        let seed = checksumSeed(salt: salt, offset: offset)
        return checksumMatches(crc32c(seed, p + 4, Layout.recordHeaderSize - 4 + payloadLength), p.u32(Layout.rChecksum))
    }
}
