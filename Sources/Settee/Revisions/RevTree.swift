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
        // Stored data: a generation above what is accepted today is read as it is.
        guard let generation = RevisionID.generation(of: meta.revisionID, limit: .max) else {
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
        return r.parent == -1 && r.hasBody && RevisionID.generation(of: r.id, limit: .max) == r.generation
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
            guard RevisionID.generation(of: id, limit: .max) == gen else { throw bad("revision \(i) has a malformed ID") }
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

    /// Merges a replicated revision with its history (`history[0]` is the revision itself, then
    /// its ancestors, newest first, each one generation below the one before) into the tree, as
    /// CouchDB merges a path into its key tree (Formats/documents.md, "Merging a history"):
    /// every revision the history names is in the tree afterwards and linked to the parent the
    /// history gives it, unless the tree already links it to another (the stored link stands and
    /// the rest of the history is ignored). So a stored leaf that the history names as an
    /// ancestor stops being a leaf, and a branch stored truncated (its root above generation 1)
    /// grows downward when a longer history reaches it. The revision itself gets the flags and
    /// body given; ancestors added here are live and have no body. Returns whether the tree
    /// changed: the revision added, or (already known) its history linked what the tree held apart.
    @discardableResult
    mutating func merge(history: [String], generation: UInt64, deleted: Bool, hasAttachments: Bool,
                        bodyRef: UInt64?) -> Bool {
        if revs.isEmpty, !history.isEmpty {
            // A new document (most of a first replication): the history is the tree.
            revs.reserveCapacity(history.count)
            var i = history.count - 1
            while i >= 0 {
                let newest = i == 0
                revs.append(Rev(id: history[i], generation: generation - UInt64(i), parent: revs.count - 1,
                                deleted: newest && deleted, hasAttachments: newest && hasAttachments,
                                hasBody: newest && bodyRef != nil, bodyRef: newest ? bodyRef ?? 0 : 0))
                i -= 1
            }
            return true
        }
        var lookup = Lookup(self)
        var changed = false
        // The newest revision of the history the tree already has; the newer ones are added
        // oldest first (so parents precede children) under it.
        var known = history.count
        var cur: Int? = nil
        for (i, id) in history.enumerated() {
            if let at = lookup.index(of: id, in: self) {
                known = i
                cur = at
                break
            }
        }
        if known > 0 {
            // Added oldest first; the oldest added is a root for now, linked below if the
            // history goes on past it.
            var parent = cur
            var i = known - 1
            revs.reserveCapacity(revs.count + known)
            while i >= 0 {
                let newest = i == 0
                parent = add(id: history[i], generation: generation - UInt64(i), parent: parent,
                             deleted: newest && deleted, hasAttachments: newest && hasAttachments,
                             bodyRef: newest ? bodyRef : nil)
                lookup.added(history[i], at: revs.count - 1)
                i -= 1
            }
            changed = true
            if cur == nil {
                // Nothing known: the whole history is a new branch.
                return true
            }
        }
        // From the newest known revision down, follow the tree and the history together. Where
        // the tree's branch ends (a root) and the history goes on, link it downward.
        var at = cur!
        var i = known
        var reorder = false
        while i + 1 < history.count {
            let p = revs[at].parent
            if p >= 0 {
                // The stored link stands; a history that disagrees (only a hostile or damaged
                // peer sends one: an ID is a digest of its parent's) adds nothing below here.
                guard revs[p].id == history[i + 1] else { break }
                at = p
            } else {
                let pid = history[i + 1]
                let pi: Int
                if let existing = lookup.index(of: pid, in: self) {
                    pi = existing
                } else {
                    pi = add(id: pid, generation: generation - UInt64(i + 1), parent: nil, deleted: false,
                             hasAttachments: false, bodyRef: nil)
                    lookup.added(pid, at: pi)
                }
                revs[at].parent = pi
                if pi > at { reorder = true }
                changed = true
                at = pi
            }
            i += 1
        }
        if reorder { restoreParentOrder() }
        return changed
    }

    /// Puts the revisions back in parents-before-children order after links were made downward
    /// to revisions stored later. A parent's generation is one less than its child's, so
    /// ordering by generation (stable) suffices.
    private mutating func restoreParentOrder() {
        let order = revs.indices.sorted { a, b in
            revs[a].generation != revs[b].generation ? revs[a].generation < revs[b].generation : a < b
        }
        var newIndex = [Int](repeating: -1, count: revs.count)
        for (n, old) in order.enumerated() { newIndex[old] = n }
        var out: [Rev] = []
        out.reserveCapacity(revs.count)
        for old in order {
            var r = revs[old]
            if r.parent >= 0 { r.parent = newIndex[r.parent] }
            out.append(r)
        }
        revs = out
    }

    /// Revision lookups by ID during a merge: a linear search in small trees, a dictionary built
    /// once in large ones (a history of a thousand revisions against a tree of a thousand).
    private struct Lookup {
        var byID: [String: Int]?

        init(_ tree: RevTree) {
            guard tree.revs.count > 32 else { return }
            var d = [String: Int](minimumCapacity: tree.revs.count)
            for (i, r) in tree.revs.enumerated() where d[r.id] == nil { d[r.id] = i }
            byID = d
        }

        func index(of id: String, in tree: RevTree) -> Int? {
            if let byID { return byID[id] }
            return tree.index(of: id)
        }

        mutating func added(_ id: String, at i: Int) { byID?[id] = i }
    }

    /// The revision IDs held more than once, which no merge or save makes: one copy may be a
    /// leaf while a path through the other names it as an ancestor (the document layer's check
    /// reports them; ``removingDuplicates()`` repairs them).
    func duplicateIDs() -> [String] {
        guard revs.count > 1 else { return [] }
        var seen = Set<String>(minimumCapacity: revs.count)
        var dups: [String] = []
        for r in revs where !seen.insert(r.id).inserted { dups.append(r.id) }
        return dups
    }

    /// The same tree with each revision ID held once: the copies of a revision become one node
    /// (the first copy's flags, a kept body from whichever copy has one, the first known
    /// parent), and every child of any copy its child.
    func removingDuplicates() -> RevTree {
        var first: [String: Int] = [:]
        var canonical = [Int](repeating: 0, count: revs.count)
        for (i, r) in revs.enumerated() {
            if let f = first[r.id] { canonical[i] = f } else { first[r.id] = i; canonical[i] = i }
        }
        var merged = revs
        for i in revs.indices where canonical[i] != i {
            let f = canonical[i]
            if !merged[f].hasBody && revs[i].hasBody {
                merged[f].hasBody = true
                merged[f].bodyRef = revs[i].bodyRef
                merged[f].hasAttachments = revs[i].hasAttachments
            }
            if merged[f].parent < 0 && revs[i].parent >= 0 { merged[f].parent = canonical[revs[i].parent] }
        }
        var out = RevTree()
        var newIndex = [Int](repeating: -1, count: revs.count)
        for i in revs.indices where canonical[i] == i {
            newIndex[i] = out.revs.count
            var r = merged[i]
            if r.parent >= 0 { r.parent = canonical[r.parent] }
            out.revs.append(r)
        }
        for i in out.revs.indices where out.revs[i].parent >= 0 {
            out.revs[i].parent = newIndex[out.revs[i].parent]
        }
        out.restoreParentOrder()
        return out
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
