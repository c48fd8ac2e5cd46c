/// Decoding of the operations inside a commit record (see Formats/storage.md, "Commit record").
/// Shared by recovery (replay) and the integrity check.
struct CommitOps {
    enum Op {
        case value(offset: Int, size: Int)
        case put(tree: UInt32, key: UnsafeRawBufferPointer, kind: UInt8, value: UnsafeRawBufferPointer)
        case delete(tree: UInt32, key: UnsafeRawBufferPointer)
        case createTree(id: UInt32, name: String)
    }

    /// Calls `body` for each value entry and each operation of the commit payload at `payload`.
    /// Returns the commit ID, or a reason when the payload is malformed.
    static func decode(_ payload: UnsafeRawPointer, count: Int, _ body: (Op) throws(StorageError) -> Void) throws(StorageError) -> Result<UInt64, CommitFormatError> {
        var r = ByteReader(payload, count: count)
        guard let commitID = r.u64() else { return .failure(CommitFormatError("commit shorter than its header")) }
        while r.remaining > 0 {
            let at = r.position
            guard let kind = r.u8() else { break }
            switch kind {
            case Layout.opValue:
                guard r.u8() != nil, r.u16() != nil, let stored = r.u32(), r.u32() != nil, r.u32() != nil,
                      r.bytes(Int(stored)) != nil
                else { return .failure(CommitFormatError("truncated value entry at \(at)")) }
                try body(.value(offset: at, size: r.position - at))
            case Layout.opBlock:
                guard let flags = r.u8(), r.u16() != nil, let stored = r.u32(), let raw = r.u32(),
                      raw <= UInt32(Layout.maxRecordPayload), let bytes = r.bytes(Int(stored))
                else { return .failure(CommitFormatError("truncated operations block at \(at)")) }
                if flags & Layout.valueFlagLZ4 == 0 {
                    guard raw == stored else { return .failure(CommitFormatError("operations block lengths disagree at \(at)")) }
                    if let e = try decodeOperations(bytes.baseAddress ?? payload, count: Int(raw), body) { return .failure(e) }
                } else {
                    guard LZ4.canExpand(Int(stored), to: Int(raw)) else {
                        return .failure(CommitFormatError("operations block claims more than it can hold at \(at)"))
                    }
                    let out = UnsafeMutableRawPointer.allocate(byteCount: max(Int(raw), 1), alignment: 16)
                    defer { out.deallocate() }
                    guard let src = bytes.baseAddress, LZ4.decompress(src, count: Int(stored), into: out, rawCount: Int(raw)) else {
                        return .failure(CommitFormatError("operations block does not decompress at \(at)"))
                    }
                    if let e = try decodeOperations(UnsafeRawPointer(out), count: Int(raw), body) { return .failure(e) }
                }
            default:
                return .failure(CommitFormatError("unknown entry \(kind) at \(at)"))
            }
        }
        return .success(commitID)
    }

    /// The operations of one block: puts, deletes and tree creations, in order.
    private static func decodeOperations(_ p: UnsafeRawPointer, count: Int, _ body: (Op) throws(StorageError) -> Void) throws(StorageError) -> CommitFormatError? {
        var r = ByteReader(p, count: count)
        while r.remaining > 0 {
            let at = r.position
            guard let kind = r.u8() else { break }
            switch kind {
            case Layout.opPut:
                guard let tree = r.varint(), tree > 0, tree <= UInt64(UInt32.max),
                      let kl = r.length(max: StoreConfiguration.maxKeyLength), let key = r.bytes(kl),
                      let vkind = r.u8(), let vl = r.length(max: StoreConfiguration.maxInlineValueLength), let value = r.bytes(vl)
                else { return CommitFormatError("malformed put at \(at)") }
                if vkind == NodeField.valueExternal {
                    guard vl == NodeField.externalValueLength else { return CommitFormatError("malformed value reference at \(at)") }
                } else if vkind != NodeField.valueInline {
                    return CommitFormatError("unknown value kind at \(at)")
                }
                try body(.put(tree: UInt32(tree), key: key, kind: vkind, value: value))
            case Layout.opDelete:
                guard let tree = r.varint(), tree > 0, tree <= UInt64(UInt32.max),
                      let kl = r.length(max: StoreConfiguration.maxKeyLength), let key = r.bytes(kl)
                else { return CommitFormatError("malformed delete at \(at)") }
                try body(.delete(tree: UInt32(tree), key: key))
            case Layout.opCreateTree:
                guard let id = r.varint(), id > 0, id <= UInt64(UInt32.max),
                      let nl = r.length(max: 255), let name = r.bytes(nl)
                else { return CommitFormatError("malformed tree creation at \(at)") }
                guard let text = String(validating: name, as: UTF8.self) else {
                    return CommitFormatError("tree name is not UTF-8 at \(at)")
                }
                try body(.createTree(id: UInt32(id), name: text))
            default:
                return CommitFormatError("unknown operation \(kind) at \(at)")
            }
        }
        return nil
    }
}

struct CommitFormatError: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
