/// Compaction's rewrite of a stored revision tree, on its bytes: most trees need no pruning and
/// have at most one undeleted leaf, and for those the rewrite needs no decoding into strings.
enum RevTreeRewriter {
    private struct Entry {
        var start: Int
        var flagsAt: Int
        var end: Int
        var parent: Int
        var flags: UInt8
        var ref: UInt64
    }

    /// Rewrites the encoded tree `b` keeping the bodies of its leaves (each copied with
    /// `copyBody(oldRef, hasAttachments)`, which returns the new ref) and dropping the others.
    /// Returns the new encoding and the new ref of the body that was at `currentBody`; nil when
    /// the tree needs the full path (more than `maxDepth` revisions: pruning; two or more
    /// undeleted leaves: the conflict's base keeps its body; anything unexpected).
    static func rewrite(_ b: UnsafeRawBufferPointer, maxDepth: Int, currentBody: UInt64,
                        copyBody: (UInt64, Bool) throws -> UInt64) throws -> (bytes: [UInt8], currentBody: UInt64)? {
        var r = ByteReader(b)
        // An older format takes the full path, which writes the current one.
        guard r.u8() == RevTree.formatVersion, let n = r.count(limit: r.remaining / 4), n > 0, n <= maxDepth else { return nil }
        var entries: [Entry] = []
        entries.reserveCapacity(n)
        var generations: [UInt64] = []
        generations.reserveCapacity(n)
        for i in 0..<n {
            let start = b.count - r.remaining
            guard let gen = r.varint(), gen >= 1, RevTree.skipDigest(&r, format: RevTree.formatVersion),
                  let p1 = r.count(limit: i)
            else { return nil }
            let flagsAt = b.count - r.remaining
            guard let flags = r.u8() else { return nil }
            var ref: UInt64 = 0
            if flags & RevTree.flagBody != 0 {
                guard let x = r.u64() else { return nil }
                ref = x
            }
            let parent = p1 - 1
            if parent >= 0, generations[parent] &+ 1 != gen { return nil }
            generations.append(gen)
            entries.append(Entry(start: start, flagsAt: flagsAt, end: b.count - r.remaining, parent: parent, flags: flags, ref: ref))
        }
        guard r.atEnd else { return nil }
        var leaf = [Bool](repeating: true, count: n)
        for e in entries where e.parent >= 0 { leaf[e.parent] = false }
        var liveLeaves = 0
        for i in 0..<n where leaf[i] && entries[i].flags & RevTree.flagDeleted == 0 { liveLeaves += 1 }
        guard liveLeaves < 2 else { return nil }

        var out = ByteWriter(capacity: b.count)
        out.u8(RevTree.formatVersion)
        out.varint(UInt64(n))
        var newCurrent: UInt64? = currentBody == 0 ? 0 : nil
        for i in 0..<n {
            let e = entries[i]
            out.raw(UnsafeRawBufferPointer(rebasing: b[e.start..<e.flagsAt]))
            guard e.flags & RevTree.flagBody != 0, leaf[i] else {
                out.u8(e.flags & ~RevTree.flagBody)
                continue
            }
            out.u8(e.flags)
            var ref: UInt64 = 0
            if e.ref != 0 {
                ref = try copyBody(e.ref, e.flags & RevTree.flagAttachments != 0)
                if e.ref == currentBody { newCurrent = ref }
            }
            out.u64(ref)
        }
        guard let newCurrent else { return nil }
        return (out.bytes, newCurrent)
    }
}
