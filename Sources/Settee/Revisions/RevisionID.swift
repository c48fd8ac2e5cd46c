/// Parsing and ordering of revision IDs (`<generation>-<digest>`, DESIGN "Semantics decided" 1).
enum RevisionID {
    /// Longest accepted revision ID, in bytes; CouchDB's are 34, ours 42.
    static let maxLength = 256

    /// The generation of a well-formed revision ID, or nil.
    ///
    /// Accepted: a decimal generation from 1 without leading zeros, `-`, then 1 or more printable
    /// ASCII characters (any `N-<opaque>` a peer sends).
    static func generation(of id: String) -> UInt64? {
        var id = id
        return id.withUTF8 { generation(utf8: UnsafeRawBufferPointer($0)) }
    }

    static func generation(utf8 b: UnsafeRawBufferPointer) -> UInt64? {
        guard b.count >= 3, b.count <= maxLength else { return nil }
        var gen: UInt64 = 0
        var i = 0
        while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
            if i == 0 && b[i] == 0x30 { return nil }
            let (m, o1) = gen.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(b[i] - 0x30))
            if o1 || o2 { return nil }
            gen = a
            i += 1
        }
        guard i > 0, gen >= 1, i < b.count - 1, b[i] == 0x2d else { return nil }
        for j in (i + 1) ..< b.count where b[j] <= 0x20 || b[j] >= 0x7f { return nil }
        return gen
    }

    /// Throws `invalidParameter` unless `id` is a well-formed revision ID; returns its generation.
    static func validate(_ id: String) throws(SetteeError) -> UInt64 {
        guard let g = generation(of: id) else {
            throw SetteeError(.invalidParameter, "malformed revision ID (expected <generation>-<digest>)")
        }
        return g
    }

    /// The winner order of seed 004: higher generation first, then higher ID in ASCII order.
    static func ranksAbove(_ a: (gen: UInt64, id: String), _ b: (gen: UInt64, id: String)) -> Bool {
        if a.gen != b.gen { return a.gen > b.gen }
        return asciiGreater(a.id, b.id)
    }

    static func asciiGreater(_ a: String, _ b: String) -> Bool {
        // Swift's String `<` orders by Unicode scalars, which for ASCII is byte order; compare
        // the UTF-8 bytes directly to be explicit and fast.
        a.utf8.lexicographicallyPrecedes(b.utf8) == false && a != b
    }

    /// The ID of a revision created locally: generation, then the lowercase hex SHA-1 of the
    /// parent's ID, the deletion flag and the canonical JSON body (Formats/documents.md).
    /// Identical edits on two devices give identical IDs.
    static func make(parent: String?, generation: UInt64, deleted: Bool, canonicalBody: [UInt8]) -> String {
        var sha = SHA1()
        var prefix = ByteWriter(capacity: 80)
        if let parent {
            prefix.string(parent)
        } else {
            prefix.varint(0)
        }
        prefix.u8(deleted ? 1 : 0)
        prefix.bytes.withUnsafeBytes { sha.update($0) }
        canonicalBody.withUnsafeBytes { sha.update($0) }
        return "\(generation)-" + SHA1.hex(sha.finalize())
    }
}
