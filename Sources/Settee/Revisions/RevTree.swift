/// A document's revision tree as stored (Formats/documents.md, "Revision tree"): every known
/// revision with its generation, parent, flags and, while kept, the location of its body.
///
/// Revisions are kept parents-before-children, so a parent index is always smaller than its
/// child's; that makes decoding a single pass and rules out cycles in damaged data.
struct RevTree: Sendable {
    struct Rev: Sendable {
        var id: String
        var generation: UInt64
        /// Index of the parent in `revs`, or -1 for a root (the oldest revision kept).
        var parent: Int
        var deleted: Bool
        var hasAttachments: Bool
        /// Whether the body is kept; `bodyRef` 0 means an empty body (`{}`).
        var hasBody: Bool
        var bodyRef: UInt64
    }

    /// The format written. Version 2 stores a 40-digit lowercase hex digest (every locally made
    /// revision ID, and CouchDB's 32-digit ones stay text) as its 20 bytes; version 1 trees are
    /// still read, and compaction rewrites them as version 2.
    static let formatVersion: UInt8 = 2
    static let readableFormats: ClosedRange<UInt8> = 1...2
    static let flagDeleted: UInt8 = 1
    static let flagAttachments: UInt8 = 2
    static let flagBody: UInt8 = 4
    /// Bytes of a compact digest (version 2: a digest length of 0 announces them).
    static let compactDigestBytes = 20

    var revs: [Rev] = []

    // MARK: - Encoding

    func encoded() -> [UInt8] {
        // Into a buffer sized first: a replicated batch encodes a tree with a whole history for
        // every document, and appending byte by byte to an array was most of that time.
        var bound = 1 + 10
        for r in revs { bound += 10 + 2 + r.id.utf8.count + 10 + 1 + 8 }
        var out = ByteBuffer(capacity: bound)
        defer { out.release() }
        out.append(Self.formatVersion)
        out.varint(UInt64(revs.count))
        for r in revs {
            out.varint(r.generation)
            var id = r.id
            id.withUTF8 { u in
                var dash = 0
                while dash < u.count && u[dash] != UInt8(ascii: "-") { dash += 1 }
                Self.appendDigest(UnsafeBufferPointer(rebasing: u[min(dash + 1, u.count)...]), to: &out)
            }
            out.varint(UInt64(r.parent + 1))
            var f: UInt8 = 0
            if r.deleted { f |= Self.flagDeleted }
            if r.hasAttachments { f |= Self.flagAttachments }
            if r.hasBody { f |= Self.flagBody }
            out.append(f)
            if r.hasBody { out.u64(r.bodyRef) }
        }
        return out.array
    }

    /// A digest of exactly 40 lowercase hex digits as a 0 length and its 20 bytes; any other as
    /// its length and text.
    private static func appendDigest(_ digest: UnsafeBufferPointer<UInt8>, to w: inout ByteBuffer) {
        if digest.count == compactDigestBytes * 2 {
            var packed = (UInt64(0), UInt64(0), UInt32(0))
            let ok = withUnsafeMutableBytes(of: &packed) { out -> Bool in
                for i in 0..<compactDigestBytes {
                    guard let hi = hexValue(digest[2 * i]), let lo = hexValue(digest[2 * i + 1]) else { return false }
                    out[i] = hi << 4 | lo
                }
                return true
            }
            if ok {
                w.varint(0)
                withUnsafeBytes(of: &packed) { w.append(UnsafeBufferPointer(start: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: compactDigestBytes)) }
                return
            }
        }
        w.varint(UInt64(digest.count))
        w.append(digest)
    }

    /// Lowercase hex only: an uppercase digest must come back as it was sent.
    @inline(__always)
    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// Reads a revision's digest field: its text, or (version 2, length 0) 20 bytes as hex.
    static func readDigest(_ r: inout ByteReader, format: UInt8) -> String? {
        guard let dlen = r.count(limit: RevisionID.maxLength) else { return nil }
        if dlen == 0 {
            guard format >= 2, let packed = r.bytes(compactDigestBytes) else { return nil }
            let digits: StaticString = "0123456789abcdef"
            return String(unsafeUninitializedCapacity: compactDigestBytes * 2) { out in
                digits.withUTF8Buffer { d in
                    for i in 0..<compactDigestBytes {
                        out[2 * i] = d[Int(packed[i] >> 4)]
                        out[2 * i + 1] = d[Int(packed[i] & 0x0F)]
                    }
                }
                return compactDigestBytes * 2
            }
        }
        guard let digest = r.bytes(dlen) else { return nil }
        return makeString(digest)
    }

    /// Skips a revision's digest field (either form); false when it is cut short or malformed.
    static func skipDigest(_ r: inout ByteReader, format: UInt8) -> Bool {
        guard let dlen = r.count(limit: RevisionID.maxLength) else { return false }
        if dlen == 0 { return format >= 2 && r.bytes(compactDigestBytes) != nil }
        return r.bytes(dlen) != nil
    }

    init() {}

    /// The tree of a document whose metadata stores no tree (tree ref 0, Formats/documents.md,
    /// "Document metadata"): its one revision is the current one, a root whose body is kept.
    init(implying meta: DocMeta) throws(SetteeError) {
        guard let generation = RevisionID.generation(of: meta.revisionID) else {
            throw SetteeError(.corrupted, "document metadata names a malformed revision ID")
        }
        revs = [Rev(id: meta.revisionID, generation: generation, parent: -1, deleted: meta.flags.contains(.deleted),
                    hasAttachments: meta.flags.contains(.hasAttachments), hasBody: true, bodyRef: meta.bodyRef)]
    }

    /// Whether the metadata of this tree's winner says all the tree does, so no tree is stored:
    /// one revision, a root with its body kept, whose generation its ID states. Most documents
    /// have never been edited, and for them this saves a value per document and its encoding.
    var isImpliedByMetadata: Bool {
        guard revs.count == 1 else { return false }
        let r = revs[0]
        return r.parent == -1 && r.hasBody && RevisionID.generation(of: r.id) == r.generation
    }

    /// Decodes a stored tree; any inconsistency is `corrupted`, never a crash.
    init(decoding b: UnsafeRawBufferPointer) throws(SetteeError) {
        var r = ByteReader(b)
        func bad(_ why: String) -> SetteeError { SetteeError(.corrupted, "revision tree: \(why)") }
        guard let v = r.u8() else { throw bad("empty") }
        guard Self.readableFormats.contains(v) else { throw bad("unknown format \(v)") }
        guard let n = r.count(limit: r.remaining / 4), n > 0 else { throw bad("bad revision count") }
        revs.reserveCapacity(n)
        for i in 0 ..< n {
            guard let gen = r.varint(), gen >= 1 else { throw bad("revision \(i) cut short") }
            guard let ds = Self.readDigest(&r, format: v) else { throw bad("revision \(i) digest is cut short or not text") }
            guard let p1 = r.count(limit: i), let flags = r.u8() else { throw bad("revision \(i) cut short") }
            var ref: UInt64 = 0
            if flags & Self.flagBody != 0 {
                guard let x = r.u64() else { throw bad("revision \(i) cut short") }
                ref = x
            }
            let id = "\(gen)-" + ds
            guard RevisionID.generation(of: id) == gen else { throw bad("revision \(i) has a malformed ID") }
            let parent = p1 - 1
            if parent >= 0, revs[parent].generation &+ 1 != gen {
                throw bad("revision \(i) is not one generation after its parent")
            }
            revs.append(Rev(id: id, generation: gen, parent: parent, deleted: flags & Self.flagDeleted != 0,
                            hasAttachments: flags & Self.flagAttachments != 0,
                            hasBody: flags & Self.flagBody != 0, bodyRef: ref))
        }
        guard r.atEnd else { throw bad("trailing bytes") }
    }

    // MARK: - Queries

    func index(of id: String) -> Int? { revs.firstIndex { $0.id == id } }

    /// Leaf flags: a revision is a leaf when no revision names it as parent.
    func leafMask() -> [Bool] {
        var leaf = [Bool](repeating: true, count: revs.count)
        for r in revs where r.parent >= 0 { leaf[r.parent] = false }
        return leaf
    }

    func leaves() -> [Int] {
        let mask = leafMask()
        return revs.indices.filter { mask[$0] }
    }

    /// Leaves in winner order (DESIGN "Semantics decided" 2): undeleted before deleted, then
    /// higher generation, then higher revision ID in ASCII order.
    func sortedLeaves() -> [Int] {
        if revs.count == 1 { return [0] }
        return leaves().sorted { a, b in
            let ra = revs[a], rb = revs[b]
            if ra.deleted != rb.deleted { return !ra.deleted }
            return RevisionID.ranksAbove((ra.generation, ra.id), (rb.generation, rb.id))
        }
    }

    func winner() -> Int? { sortedLeaves().first }

    /// More than one undeleted leaf.
    func isConflicted() -> Bool {
        let mask = leafMask()
        var live = 0
        for i in revs.indices where mask[i] && !revs[i].deleted {
            live += 1
            if live > 1 { return true }
        }
        return false
    }

    /// IDs from `index` back to the oldest kept ancestor, newest first (CouchDB `_revisions`).
    func history(of index: Int) -> [String] {
        var out: [String] = []
        var i = index
        while i >= 0 {
            out.append(revs[i].id)
            i = revs[i].parent
        }
        return out
    }

    // MARK: - Changes

    /// Adds a revision under `parent` (nil: a new root) and returns its index.
    @discardableResult
    mutating func add(id: String, generation: UInt64, parent: Int?, deleted: Bool, hasAttachments: Bool,
                      bodyRef: UInt64?) -> Int {
        revs.append(Rev(id: id, generation: generation, parent: parent ?? -1, deleted: deleted,
                        hasAttachments: hasAttachments, hasBody: bodyRef != nil, bodyRef: bodyRef ?? 0))
        return revs.count - 1
    }

    /// Adds a replicated revision with its history (`history[0]` is the revision itself, then its
    /// ancestors, newest first), joining the tree at the newest ancestor already known; if none is
    /// known it starts a new branch. Returns the new revision's index, or nil when it was known.
    mutating func addReplicated(history: [String], generation: UInt64, deleted: Bool, hasAttachments: Bool,
                                bodyRef: UInt64?) -> Int? {
        if index(of: history[0]) != nil { return nil }
        var known = history.count
        var parent: Int? = nil
        for (i, id) in history.enumerated().dropFirst() {
            if let at = index(of: id) {
                known = i
                parent = at
                break
            }
        }
        // Add the unknown ancestors oldest first, so parents precede children.
        revs.reserveCapacity(revs.count + known)
        var i = known - 1
        while i >= 1 {
            parent = add(id: history[i], generation: generation - UInt64(i), parent: parent,
                         deleted: false, hasAttachments: false, bodyRef: nil)
            i -= 1
        }
        return add(id: history[0], generation: generation, parent: parent, deleted: deleted,
                   hasAttachments: hasAttachments, bodyRef: bodyRef)
    }

    /// The newest revision that every undeleted leaf descends from, when there is a conflict.
    func conflictBase() -> Int? {
        let mask = leafMask()
        let live = revs.indices.filter { mask[$0] && !revs[$0].deleted }
        guard live.count > 1 else { return nil }
        var common = Set(ancestors(of: live[0]))
        for l in live.dropFirst() { common.formIntersection(ancestors(of: l)) }
        return common.max { revs[$0].generation < revs[$1].generation }
    }

    private func ancestors(of index: Int) -> [Int] {
        var out: [Int] = []
        var i = index
        while i >= 0 { out.append(i); i = revs[i].parent }
        return out
    }

    /// Drops revisions more than `maxDepth` generations above every leaf, except those on the
    /// paths from the common ancestor of an open conflict to its leaves (so a three-way merge
    /// stays possible). Returns whether anything was dropped.
    @discardableResult
    mutating func prune(maxDepth: Int) -> Bool {
        guard revs.count > maxDepth else { return false }
        var keep = [Bool](repeating: false, count: revs.count)
        let mask = leafMask()
        for l in revs.indices where mask[l] {
            var i = l
            var depth = 0
            while i >= 0 && depth < maxDepth {
                keep[i] = true
                i = revs[i].parent
                depth += 1
            }
        }
        if let base = conflictBase() {
            for l in revs.indices where mask[l] && !revs[l].deleted {
                var i = l
                while i >= 0 {
                    keep[i] = true
                    if i == base { break }
                    i = revs[i].parent
                }
            }
        }
        guard keep.contains(false) else { return false }
        var newIndex = [Int](repeating: -1, count: revs.count)
        var out: [Rev] = []
        out.reserveCapacity(revs.count)
        for i in revs.indices where keep[i] {
            var r = revs[i]
            r.parent = r.parent >= 0 ? newIndex[r.parent] : -1
            newIndex[i] = out.count
            out.append(r)
        }
        revs = out
        return true
    }
}
