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
        guard b.count >= 3, b.count <= maxLength, let q = b.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        let n = b.count
        var gen: UInt64 = 0
        var i = 0
        while i < n, q[i] &- 0x30 < 10 {
            if i == 0 && q[i] == 0x30 { return nil }
            let (m, o1) = gen.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(q[i] &- 0x30))
            if o1 || o2 { return nil }
            gen = a
            i += 1
        }
        guard i > 0, gen >= 1, i < n - 1, q[i] == 0x2d else { return nil }
        // Printable ASCII after the dash (0x21...0x7E), eight bytes at a time: a replicated batch
        // checks every ID of every history. A word holds a byte below 0x21 when subtracting 0x21
        // from each byte borrows into a byte whose top bit was clear, and a byte above 0x7E when
        // adding 1 sets a top bit or one was set already.
        let ones: UInt64 = 0x0101_0101_0101_0101
        let tops: UInt64 = 0x8080_8080_8080_8080
        var j = i + 1
        while j + 8 <= n {
            let x = UnsafeRawPointer(q + j).loadUnaligned(as: UInt64.self)
            if (x &- ones &* 0x21) & ~x & tops != 0 || ((x &+ ones) | x) & tops != 0 { return nil }
            j += 8
        }
        while j < n {
            if q[j] &- 0x21 >= 0x5E { return nil }
            j += 1
        }
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
