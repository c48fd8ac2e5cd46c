internal import SetteeStorage

/// Parsing and ordering of revision IDs (`<generation>-<digest>`, DESIGN "Semantics decided" 1).
enum RevisionID {
    /// Longest accepted revision ID, in bytes; CouchDB's are 34, ours 42.
    static let maxLength = 256

    /// The largest generation a revision ID may have when it arrives from outside (an API call, a
    /// peer, a request): 2^53 − 1, the largest integer a JavaScript number holds exactly, so that
    /// PouchDB and every other peer count generations as Settee does, and a generation plus one
    /// never overflows. Revision trees already stored keep what they hold (``generation(of:limit:)``
    /// with `.max`); an edit past the limit is refused (``child(of:)``).
    static let maxGeneration: UInt64 = (1 << 53) - 1

    /// The generation of a well-formed revision ID, or nil.
    ///
    /// Accepted: a decimal generation from 1 to `limit` without leading zeros, `-`, then 1 or more
    /// printable ASCII characters (any `N-<opaque>` a peer sends).
    static func generation(of id: String, limit: UInt64 = maxGeneration) -> UInt64? {
        var id = id
        return id.withUTF8 { generation(utf8: UnsafeRawBufferPointer($0), limit: limit) }
    }

    static func generation(utf8 b: UnsafeRawBufferPointer, limit: UInt64 = maxGeneration) -> UInt64? {
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
        guard i > 0, gen >= 1, gen <= limit, i < n - 1, q[i] == 0x2d else { return nil }
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
            if generation(of: id, limit: .max) != nil {
                throw SetteeError(.invalidParameter, "revision ID generation above \(maxGeneration) (2^53 − 1, the largest Settee accepts)")
            }
            throw SetteeError(.invalidParameter, "malformed revision ID (expected <generation>-<digest>)")
        }
        return g
    }

    /// The generation of a revision made on top of one of generation `parent` (0: none).
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when `parent` is at or above
    ///   ``maxGeneration``: a document whose history reached the limit takes no further edit on
    ///   that branch (only a peer that sent a crafted revision ID can bring one there).
    static func child(of parent: UInt64) throws(SetteeError) -> UInt64 {
        guard parent < maxGeneration else {
            throw SetteeError(.invalidParameter, "the revision's generation is at Settee's limit (\(maxGeneration)): it cannot be edited")
        }
        return parent + 1
    }

    /// The winner order of seed 004: higher generation first, then higher ID in ASCII order.
    /// The one ranking rule: the revision tree's winner and the replicator's default conflict
    /// resolution both use it (``RevisionRanking``), so peers that hold the same revisions rank
    /// them alike.
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
        // The hashed prefix: the parent's ID with its varint length (a lone 0 for none), then the
        // deletion flag. Built on the stack: a save makes one ID, and allocations were most of it.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { head in
            let raw = UnsafeMutableRawBufferPointer(head)
            if var parent {
                parent.withUTF8 { utf8 in
                    let n = Varint.encode(UInt64(utf8.count), into: raw.baseAddress!)
                    sha.update(UnsafeRawBufferPointer(rebasing: raw[0 ..< n]))
                    sha.update(UnsafeRawBufferPointer(utf8))
                }
                raw[0] = deleted ? 1 : 0
                sha.update(UnsafeRawBufferPointer(rebasing: raw[0 ..< 1]))
            } else {
                raw[0] = 0
                raw[1] = deleted ? 1 : 0
                sha.update(UnsafeRawBufferPointer(rebasing: raw[0 ..< 2]))
            }
        }
        canonicalBody.withUnsafeBytes { sha.update($0) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digest in
            sha.finalize(into: UnsafeMutableRawPointer(digest.baseAddress!))
            // `<generation>-<40 hex digits>`: at most 20 + 1 + 40 bytes.
            return String(unsafeUninitializedCapacity: 61) { out in
                var digits = 0
                var g = generation
                repeat {
                    digits += 1
                    g /= 10
                } while g > 0
                g = generation
                for k in stride(from: digits - 1, through: 0, by: -1) {
                    out[k] = UInt8(ascii: "0") + UInt8(g % 10)
                    g /= 10
                }
                out[digits] = UInt8(ascii: "-")
                SHA1.writeHex(UnsafeBufferPointer(digest), into: out.baseAddress! + digits + 1)
                return digits + 41
            }
        }
    }
}

/// The order in which revisions win (DESIGN "Semantics decided" 2, seed 004), for the layers
/// above the database that must rank revisions exactly as its revision trees do (the
/// replicator's default conflict resolution).
///
/// ```swift
/// @_spi(Replication) import Settee
/// let remoteWins = try RevisionRanking.ranksAbove(conflict.remoteRevisionID, conflict.localRevisionID)
/// ```
///
/// - Note: Stateless; safe to use from any thread.
@_spi(Replication)
public enum RevisionRanking {
    /// Whether revision `a` ranks above revision `b`: the higher generation, then the revision ID
    /// greater in byte (ASCII) order. Equal IDs rank neither above the other.
    ///
    /// ```swift
    /// try RevisionRanking.ranksAbove("3-a", "2-z")   // true
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when either is not a well-formed revision
    ///   ID (`+5-x`, `05-x` and `x` are not): a malformed ID has no rank.
    public static func ranksAbove(_ a: String, _ b: String) throws(SetteeError) -> Bool {
        RevisionID.ranksAbove((try RevisionID.validate(a), a), (try RevisionID.validate(b), b))
    }
}

/// What a revision ID is, for the layers above the database that read revision IDs from the wire
/// (`settee serve`, `URLEndpoint`): the one rule the database applies, with its generation limit.
///
/// ```swift
/// @_spi(Replication) import Settee
/// guard let generation = RevisionIDSyntax.generation(of: rev) else { throw badRequest("Invalid rev format") }
/// let next = try RevisionIDSyntax.child(of: generation)
/// ```
///
/// - Note: Stateless; safe to use from any thread.
@_spi(Replication)
public enum RevisionIDSyntax {
    /// The largest generation accepted: 2^53 − 1, the largest integer a JavaScript number (PouchDB,
    /// a browser) holds exactly. A larger one is refused where it arrives.
    ///
    /// ```swift
    /// print(RevisionIDSyntax.maxGeneration)   // 9007199254740991
    /// ```
    public static var maxGeneration: UInt64 { RevisionID.maxGeneration }

    /// The generation of a well-formed revision ID (`N-<digest>`: N from 1 to ``maxGeneration``
    /// without leading zeros, then 1 or more printable ASCII characters), or nil.
    ///
    /// ```swift
    /// RevisionIDSyntax.generation(of: "3-abc")                  // 3
    /// RevisionIDSyntax.generation(of: "18446744073709551615-x") // nil: above the limit
    /// ```
    public static func generation(of revisionID: String) -> UInt64? { RevisionID.generation(of: revisionID) }

    /// The generation of a revision stored on top of one of `generation` (0: none).
    ///
    /// ```swift
    /// let next = try RevisionIDSyntax.child(of: 3)   // 4
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when `generation` is at or above
    ///   ``maxGeneration``.
    public static func child(of generation: UInt64) throws(SetteeError) -> UInt64 { try RevisionID.child(of: generation) }
}
