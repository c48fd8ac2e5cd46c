// Compiled only into fuzzing and test builds (`SETTEE_DECODER_FUZZING`: debug builds, and
// `scripts/fuzz`), never into the library an application ships.
#if SETTEE_DECODER_FUZZING
/// The fuzz entry point of the document layer's decoders (`Tests/Fuzz`, `scripts/fuzz`): every
/// decoder of bytes read from disk or from a peer gets the same input. Errors are fine; a crash,
/// a hang, a runaway allocation, or a decoded value that does not survive being encoded and
/// decoded again is a finding.
package enum DecoderFuzzing {
    package static func run(_ data: UnsafeRawBufferPointer) {
        json(data)
        revTree(data)
        if let m = try? DocMeta(decoding: data) {
            let again = m.encoded().withUnsafeBytes { try? DocMeta(decoding: $0) }
            guard let again, again.flags == m.flags, again.sequence == m.sequence, again.revisionID == m.revisionID,
                  again.bodyRef == m.bodyRef, again.treeRef == m.treeRef
            else { preconditionFailure("document metadata does not survive re-encoding") }
            // Tree ref 0: the tree comes from the metadata, and must be one a save stores as 0.
            if let implied = try? RevTree(implying: m) {
                precondition(implied.isImpliedByMetadata, "a tree implied by metadata is not one stored as implied")
            }
        }
        if let (e, routing) = try? SequenceEntry.decodingRouting(data) {
            let again = e.encoded(routing: routing).withUnsafeBytes { try? SequenceEntry.decodingRouting($0) }
            guard let (again, againRouting) = again, again.flags == e.flags, again.documentID == e.documentID,
                  again.revisionID == e.revisionID,
                  againRouting == routing || (againRouting == nil && routing?.isEmpty == true)
            else { preconditionFailure("a changes entry does not survive re-encoding") }
            precondition((try? SequenceEntry(decoding: data)) != nil, "a changes entry decodes with its routing but not without")
            // Read without its grants, the same entry has the same channels.
            let channelsOnly = try? SequenceEntry.decodingRouting(data, grants: false)
            precondition(channelsOnly?.routing?.channels == routing?.channels, "a changes entry read without grants has other channels")
        }
        if let x = try? ExpiryRecord(decoding: data) {
            precondition(!x.isEmpty && x.due != nil, "a decoded expiration record holds no time")
            let again = x.encoded().withUnsafeBytes { try? ExpiryRecord(decoding: $0) }
            guard again == x else { preconditionFailure("an expiration record does not survive re-encoding") }
        }
        if let k = ExpiryKey.parse(data) {
            precondition(ExpiryKey.make(due: k.due, id: k.id).elementsEqual(data), "an expiry key does not survive re-encoding")
        }
        // An index entry's values (one to four of them): what decodes encodes to values that
        // decode the same (an array's or object's JSON text may be written otherwise).
        for count in 1 ... 4 {
            guard let values = try? IndexValueCoding.values(data, count: count) else { continue }
            let again = (try? IndexValueCoding.encoded(values)).flatMap { b in b.withUnsafeBytes { try? IndexValueCoding.values($0, count: count) } }
            precondition(again == values, "index entry values do not survive re-encoding")
        }
        // A local document's value: a save counter, then the JSON body.
        var reader = ByteReader(data)
        if reader.varint() != nil { _ = try? JSONParser.parse(reader.rest()) }
        _ = data.bigEndianU64

        let text = String(decoding: data, as: UTF8.self)
        if let g = RevisionID.generation(utf8: data) {
            precondition(RevisionID.generation(of: text) == g, "a revision ID's generation depends on how it is read")
        }
        _ = RevisionID.generation(of: text)
        if let name = BlobStore.fileName(forDigest: text) {
            precondition(name.utf8.count == 45 && !name.contains("/"), "a blob file name is not 40 hex digits and .blob")
        }
        _ = JSONDate.date(from: text)
    }

    /// Strict parsing, then: whatever parses is written, and what is written parses back to the
    /// same value and is written again byte for byte (bodies are stored canonical). The body scan
    /// that checks replicated JSON must agree with the parser on every input: it accepts exactly
    /// the objects the parser reads, and finds the blob digests the writer finds.
    private static func json(_ data: UnsafeRawBufferPointer) {
        let scan = try? JSONParser.scanBody(data, checkReserved: false)
        let parsed = try? JSONParser.parse(data)
        if case .object(let o)? = parsed {
            guard let scan else { preconditionFailure("the body scan refuses an object the parser reads") }
            var digests: [String] = []
            _ = try? JSONWriter.body(o, blobDigests: &digests)
            precondition(scan.isEmpty == o.isEmpty && scan.blobDigests.sorted() == digests.sorted(),
                         "the body scan and the writer disagree on a body")
        } else {
            precondition(scan == nil, "the body scan accepts what the parser refuses")
        }
        guard let value = parsed else { return }
        guard let written = try? JSONWriter.bytes(value) else { preconditionFailure("a parsed JSON value cannot be written") }
        guard let again = try? JSONParser.parse(written), again == value else {
            preconditionFailure("written JSON does not parse back to the same value")
        }
        guard (try? JSONWriter.bytes(again)) == written else { preconditionFailure("writing JSON is not canonical") }
        if case .object(let o) = value {
            // Blob references and blob digests come from documents and peers.
            if let b = Blob(properties: o, store: nil) { precondition(BlobStore.fileName(forDigest: b.digest) != nil) }
        }
    }

    /// Decoding, then everything the database does with a stored tree (winner, leaves, conflicts,
    /// histories, pruning), then re-encoding: the result decodes to the same tree.
    private static func revTree(_ data: UnsafeRawBufferPointer) {
        guard let tree = try? RevTree(decoding: data) else { return }
        let leaves = tree.sortedLeaves()
        precondition(!leaves.isEmpty && tree.winner() == leaves.first, "a decoded tree has no winner")
        _ = tree.isConflicted()
        _ = tree.conflictBase()
        for l in leaves.prefix(64) { _ = tree.history(of: l) }
        _ = tree.index(of: tree.revs[leaves[0]].id)
        let encoded = tree.encoded()
        guard let again = encoded.withUnsafeBytes({ try? RevTree(decoding: $0) }), same(again, tree),
              again.encoded() == encoded
        else { preconditionFailure("a revision tree does not survive re-encoding") }
        // A tree merges its own histories without change, once it holds each revision once.
        let whole = tree.duplicateIDs().isEmpty ? tree : tree.removingDuplicates()
        precondition(whole.duplicateIDs().isEmpty, "removing duplicates leaves a duplicate")
        var merged = whole
        for l in merged.leaves().prefix(16) {
            let history = merged.history(of: l)
            let changed = merged.merge(history: history, generation: merged.revs[l].generation, deleted: false,
                                       hasAttachments: false, bodyRef: nil)
            precondition(!changed, "merging a tree's own history changed it")
        }
        guard let back = whole.encoded().withUnsafeBytes({ try? RevTree(decoding: $0) }), same(back, whole) else {
            preconditionFailure("a repaired revision tree does not survive re-encoding")
        }
        for depth in [1, 2, 5] {
            var pruned = tree
            pruned.prune(maxDepth: depth)
            let bytes = pruned.encoded()
            guard let back = bytes.withUnsafeBytes({ try? RevTree(decoding: $0) }), same(back, pruned) else {
                preconditionFailure("a pruned revision tree does not survive re-encoding")
            }
            _ = pruned.sortedLeaves()
        }
    }

    private static func same(_ a: RevTree, _ b: RevTree) -> Bool {
        a.revs.count == b.revs.count && zip(a.revs, b.revs).allSatisfy { x, y in
            x.id == y.id && x.generation == y.generation && x.parent == y.parent && x.deleted == y.deleted
                && x.hasAttachments == y.hasAttachments && x.hasBody == y.hasBody && x.bodyRef == y.bodyRef
        }
    }

    /// Valid encodings of every decoded format, as seeds for the fuzzer: revision trees (one
    /// revision; a chain; a conflict with tombstones, attachments and pruned bodies), document
    /// metadata, changes entries, a local document, JSON bodies, and an expiration record and
    /// expiry key.
    package static func seedInputs() -> [(name: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var single = RevTree()
        single.add(id: "1-" + String(repeating: "a", count: 40), generation: 1, parent: nil, deleted: false,
                   hasAttachments: false, bodyRef: 4096)
        out.append(("revtree-single", single.encoded()))
        // Tree format 1 (textual 40-digit digests), as documents of format 1 and 2 hold them.
        var format1: [UInt8] = [1, 2]
        format1 += [1, 40] + Array(String(repeating: "b", count: 40).utf8) + [0, RevTree.flagBody] + [0, 16, 0, 0, 0, 0, 0, 0]
        format1 += [2, 40] + Array(String(repeating: "c", count: 40).utf8) + [1, RevTree.flagDeleted]
        out.append(("revtree-format1", format1))
        var chain = RevTree()
        var parent: Int? = nil
        for g in 1...6 as ClosedRange<UInt64> {
            parent = chain.add(id: "\(g)-\(String(g, radix: 16))cafe", generation: g, parent: parent, deleted: false,
                               hasAttachments: g == 6, bodyRef: g >= 5 ? 1000 * g : nil)
        }
        out.append(("revtree-chain", chain.encoded()))
        var conflict = chain
        conflict.merge(history: ["6-beef", "5-5cafe"], generation: 6, deleted: false, hasAttachments: false, bodyRef: 77)
        conflict.merge(history: ["7-dead", "6-d00d", "5-5cafe"], generation: 7, deleted: true, hasAttachments: false, bodyRef: 0)
        conflict.merge(history: ["3-x", "2-y"], generation: 3, deleted: false, hasAttachments: true, bodyRef: nil)
        out.append(("revtree-conflict", conflict.encoded()))
        // Damage no merge makes: a revision held twice, one copy a leaf, the other an ancestor.
        var twice = chain
        twice.add(id: "3-3cafe", generation: 3, parent: 1, deleted: false, hasAttachments: false, bodyRef: 5)
        out.append(("revtree-duplicate", twice.encoded()))
        let meta = DocMeta(flags: [.conflicted, .multipleLeaves], sequence: 300, revisionID: "7-dead", bodyRef: 0, treeRef: 123_456)
        out.append(("docmeta", meta.encoded()))
        out.append(("docmeta-deleted", DocMeta(flags: [.deleted], sequence: 1, revisionID: "2-" + String(repeating: "f", count: 40),
                                               bodyRef: 9, treeRef: 10).encoded()))
        out.append(("sequence-entry", SequenceEntry(flags: [.hasAttachments], documentID: "doc-é-1", revisionID: "3-abc").encoded()))
        out.append(("sequence-entry-routed", SequenceEntry(flags: [], documentID: "d", revisionID: "1-abc")
            .encoded(routing: RevisionRouting(channels: ["a", "b"], access: ["u": ["a"]]))))
        let body: JSONValue = ["title": "Groceries", "count": 2, "price": 2.5, "done": false, "tags": ["a", "b\u{1}\"\\"],
                               "nested": ["x": .null, "unicode": "é字🙂"],
                               "photo": ["@type": "blob", "content_type": "image/png", "digest": "sha1-qUqP5cyxm6YcTAhz05Hph5gvu9M=", "length": 3]]
        let json = (try? JSONWriter.bytes(body)) ?? []
        out.append(("json-document", json))
        out.append(("json-text", Array(#" [1, -0.0, 1e-5, 12345678901234567890, "\ud83d\ude42", {"a": [[]], "b": {}}, true] "#.utf8)))
        var local = ByteWriter()
        local.varint(3)
        local.bytes += json
        out.append(("local-document", local.bytes))
        out.append(("date", Array("2026-11-21T10:15:30.123+02:00".utf8)))
        out.append(("expiry-record", ExpiryRecord(expiration: 1_700_000_000, eviction: 1_700_086_400).encoded()))
        out.append(("expiry-key", ExpiryKey.make(due: 1_700_000_000, id: Array("doc-é-1".utf8))))
        return out
    }
}
#endif
