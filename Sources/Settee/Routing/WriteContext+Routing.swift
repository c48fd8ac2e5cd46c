internal import SetteeStorage

/// A router kept behind a reference (see ``ChannelRouting/routerBox``).
final class RouterBox: Sendable {
    let router: Router
    init(_ router: @escaping Router) { self.router = router }
}

/// The `doc.routing` value (Formats/documents.md, "Routing"): the routing the indexes hold for
/// the document, each routed leaf's, and its entries in the channel logs.
struct RoutingRecord {
    var applied = RevisionRouting()
    var leaves: [String: RevisionRouting] = [:]
    var membership: [String: ChannelMembership] = [:]
    /// The channels of revisions that are no longer leaves but keep their body (a user may read
    /// them by revision ID), for those whose channels differ from the applied routing's; a kept
    /// revision missing here has the applied channels (``keepInnerChannels(dropped:current:tree:)``).
    var inner: [String: Set<String>] = [:]

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        // 3 and 4 (format 9) are 1 and 2 with grants to roles apart (RevisionRouting's fourth map).
        w.u8(inner.isEmpty ? 3 : 4)
        applied.encode(into: &w)
        w.varint(UInt64(leaves.count))
        for k in leaves.keys.sorted() {
            w.string(k)
            leaves[k]?.encode(into: &w)
        }
        w.varint(UInt64(membership.count))
        for k in membership.keys.sorted() {
            guard let m = membership[k] else { continue }
            w.string(k)
            w.u8(m.isRemoved ? 1 : 0)
            w.varint(m.sequence)
        }
        if !inner.isEmpty {
            w.varint(UInt64(inner.count))
            for k in inner.keys.sorted() {
                w.string(k)
                RevisionRouting(channels: inner[k] ?? []).encode(into: &w)
            }
        }
        return w.bytes
    }

    init() {}

    /// Keeps ``inner`` true as the applied channels become `current`: `dropped` holds the
    /// channels of the leaves this commit made inner revisions. Costs nothing in the common case
    /// (nothing listed, channels unchanged, edited leaves in the current channels).
    mutating func keepInnerChannels(dropped: [String: RevisionRouting], current: Set<String>, tree: RevTree) {
        let before = applied.channels
        guard !inner.isEmpty || before != current || dropped.values.contains(where: { $0.channels != current }) else { return }
        var next: [String: Set<String>] = [:]
        var isParent = [Bool](repeating: false, count: tree.revs.count)
        for r in tree.revs where r.parent >= 0 { isParent[r.parent] = true }
        for (i, r) in tree.revs.enumerated() where r.hasBody && isParent[i] {
            let channels = dropped[r.id]?.channels ?? inner[r.id] ?? before
            if channels != current { next[r.id] = channels }
        }
        inner = next
    }

    /// Whether the record says nothing: the document is in no channel log and no revision the
    /// router saw has channels or grants. Such a record is not stored.
    var isEmpty: Bool {
        membership.isEmpty && applied.isEmpty && leaves.values.allSatisfy(\.isEmpty) && inner.isEmpty
    }

    /// The record of a document whose routing is all in its sequence entry: its current
    /// revision `winner` (committed at `sequence`) is its only routed leaf, and it is a member of
    /// exactly that routing's channels, at `sequence`, having left none.
    init(simple routing: RevisionRouting, winner: String, sequence: UInt64) {
        applied = routing
        leaves = [winner: routing]
        for c in routing.channels { membership[c] = ChannelMembership(sequence: sequence, isRemoved: false) }
    }

    /// Whether ``init(simple:winner:sequence:)`` gives this record back: then `doc.routing`
    /// keeps nothing (most documents: one revision, channels that only change with it).
    func isSimple(winner: String, sequence: UInt64) -> Bool {
        guard inner.isEmpty, leaves.count == 1, leaves[winner] == applied, membership.count == applied.channels.count else { return false }
        return membership.allSatisfy { !$0.value.isRemoved && $0.value.sequence == sequence && applied.channels.contains($0.key) }
    }

    /// A document's record: its `doc.routing` value, or else the one its sequence entry at
    /// `sequence` (the document's current one) implies; nil when it has neither. `stored` says
    /// which.
    /// `grants: false` leaves every routing's grants empty (``RevisionRouting/init(reading:legacy:grants:)``).
    static func load(_ tx: some StoreReading, _ trees: Trees, key: [UInt8], sequence: UInt64?, grants: Bool = true) throws
        -> (record: RoutingRecord, stored: Bool)? {
        if let r = try tx.withValue(forKey: key, in: trees.routing, { b in try RoutingRecord(decoding: b, grants: grants) }) { return (r, true) }
        guard let sequence,
              let e = try tx.withValue(forKey: [UInt8](bigEndian: sequence), in: trees.bySequence, { b in
                  try SequenceEntry.decodingRouting(b, grants: grants)
              }),
              let routing = e.routing
        else { return nil }
        return (RoutingRecord(simple: routing, winner: e.entry.revisionID, sequence: sequence), false)
    }

    init(decoding b: UnsafeRawBufferPointer, grants: Bool = true) throws(SetteeError) {
        var r = ByteReader(b)
        let bad = SetteeError(.corrupted, "a document's routing record is malformed")
        guard let version = r.u8(), (1 ... 4).contains(version) else { throw bad }
        let legacy = version <= 2
        guard let applied = RevisionRouting(reading: &r, legacy: legacy, grants: grants), let nl = r.count(limit: r.remaining) else { throw bad }
        self.applied = applied
        for _ in 0 ..< nl {
            guard let k = r.string(), let v = RevisionRouting(reading: &r, legacy: legacy, grants: grants) else { throw bad }
            leaves[k] = v
        }
        guard let nm = r.count(limit: r.remaining) else { throw bad }
        for _ in 0 ..< nm {
            guard let k = r.string(), let f = r.u8(), f <= 1, let s = r.varint() else { throw bad }
            membership[k] = ChannelMembership(sequence: s, isRemoved: f == 1)
        }
        if version == 2 || version == 4 {
            guard let ni = r.count(limit: r.remaining), ni > 0 else { throw bad }
            for _ in 0 ..< ni {
                guard let k = r.string(), let v = RevisionRouting(reading: &r, legacy: legacy), v.access.isEmpty, v.roles.isEmpty,
                      v.roleAccess.isEmpty else { throw bad }
                inner[k] = v.channels
            }
        }
        guard r.atEnd else { throw bad }
    }
}

/// Keys and values of the channel logs and grants (Formats/documents.md, "Routing").
enum RoutingKey {
    /// `doc.channels` key: the channel, a zero byte, the sequence big-endian.
    static func channel(_ name: String, _ seq: UInt64) -> [UInt8] {
        var k = Array(name.utf8)
        k.append(0)
        k.append(contentsOf: [UInt8](bigEndian: seq))
        return k
    }

    /// Where a channel's entries start (its name and the zero byte).
    static func channelPrefix(_ name: String) -> [UInt8] {
        var k = Array(name.utf8)
        k.append(0)
        return k
    }

    /// `doc.grants` key: the kind, the principal, a zero byte, the SHA-1 of the document ID (an
    /// ID may be 1,000 bytes; the key stays within the engine's limit).
    static func grant(_ kind: GrantKind, _ principal: String, _ docKey: [UInt8]) -> [UInt8] {
        var k = grantPrefix(kind, principal)
        k.append(contentsOf: SHA1.hash(docKey))
        return k
    }

    static func grantPrefix(_ kind: GrantKind, _ principal: String) -> [UInt8] {
        var k: [UInt8] = [kind.rawValue]
        k.append(contentsOf: principal.utf8)
        k.append(0)
        return k
    }

    /// A member entry's `doc.channels` value: the flags byte 0 alone. The document's sequence
    /// entry at the same sequence names the document and its revision (a member entry is always
    /// at the document's current sequence).
    static let memberEntry: [UInt8] = [0]

    /// A removal entry's `doc.channels` value: flags (1 deleted, 2 removed, 4 other leaves),
    /// document ID, revision ID (the document may have moved on since).
    static func entry(deleted: Bool, removed: Bool, otherLeaves: Bool, id: String, rev: String) -> [UInt8] {
        var w = ByteWriter(capacity: 8 + id.utf8.count + rev.utf8.count)
        w.u8((deleted ? 1 : 0) | (removed ? 2 : 0) | (otherLeaves ? 4 : 0))
        w.string(id)
        w.string(rev)
        return w.bytes
    }

    /// Decodes an entry; `sequenceEntry` reads the sequence entry at `seq` for a member entry
    /// that is the flags byte alone.
    static func decodeEntry(_ b: UnsafeRawBufferPointer, seq: UInt64,
                            sequenceEntry: (UInt64) throws -> SequenceEntry?) throws -> ChannelChange {
        let bad = SetteeError(.corrupted, "a channel log entry is malformed")
        if b.count == 1 {
            guard b[0] == 0, let e = try sequenceEntry(seq) else { throw bad }
            return ChannelChange(sequence: seq, documentID: e.documentID, revisionID: e.revisionID,
                                 isDeleted: e.flags.contains(.deleted), isRemoved: false,
                                 hasOtherLeaves: e.flags.contains(.multipleLeaves))
        }
        var r = ByteReader(b)
        guard let f = r.u8(), f & ~7 == 0, let id = r.string(), let rev = r.string(), r.atEnd else { throw bad }
        return ChannelChange(sequence: seq, documentID: id, revisionID: rev, isDeleted: f & 1 != 0, isRemoved: f & 2 != 0,
                             hasOtherLeaves: f & 4 != 0)
    }

    /// `doc.grants` value: document ID, then each name with its state (1: revoked) and sequence.
    static func grants(id: String, _ names: [String: (seq: UInt64, revoked: Bool)]) -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        w.string(id)
        w.varint(UInt64(names.count))
        for k in names.keys.sorted() {
            guard let v = names[k] else { continue }
            w.string(k)
            w.u8(v.revoked ? 1 : 0)
            w.varint(v.seq)
        }
        return w.bytes
    }

    static func decodeGrants(_ b: UnsafeRawBufferPointer) throws(SetteeError) -> (id: String, names: [String: (seq: UInt64, revoked: Bool)]) {
        var r = ByteReader(b)
        let bad = SetteeError(.corrupted, "a grant record is malformed")
        guard let id = r.string(), let n = r.count(limit: r.remaining) else { throw bad }
        var names: [String: (seq: UInt64, revoked: Bool)] = [:]
        for _ in 0 ..< n {
            guard let k = r.string(), let f = r.u8(), f <= 1, let s = r.varint() else { throw bad }
            names[k] = (s, f == 1)
        }
        guard r.atEnd else { throw bad }
        return (id, names)
    }
}

extension RevTree {
    /// The revision a router sees as the parent of a revision whose nearest ancestor in the tree
    /// is `parent` (`revision`: the revision's own index when the tree holds it already): the
    /// nearest ancestor with a kept body; when there is none although the document exists (a
    /// branch a peer sent with a history this database does not hold, or whose ancestors' bodies
    /// compaction dropped), the current revision, so that an invented history cannot make a
    /// revision of an existing document look new (a null parent passes an ownership check). Nil
    /// for a new document.
    func routingParent(from parent: Int?, of revision: Int?) -> Int? {
        if let bodied = bodiedAncestor(from: parent) { return bodied }
        guard !revs.isEmpty else { return nil }
        let (winner, _) = winnerAndFlags()
        return winner == revision ? nil : winner
    }

    /// `index` itself if its body is kept, else its nearest ancestor whose body is; nil if none.
    func bodiedAncestor(from index: Int?) -> Int? {
        var i = index
        while let j = i, j >= 0 {
            if revs[j].hasBody { return j }
            i = revs[j].parent
        }
        return nil
    }
}

extension WriteContext {
    /// The routing record of the document under `key` (whose metadata is still the stored one).
    func routingRecord(_ key: [UInt8]) throws -> RoutingRecord? {
        try RoutingRecord.load(tx, trees, key: key, sequence: try meta(key)?.sequence)?.record
    }

    /// Runs the router on a new revision (parent: the index in `tree` of its nearest ancestor
    /// with a body) and keeps its routing for the commit that follows. `parent` is found only
    /// when a router is set (a replicated revision finds it by searching its history).
    func route(id: String, key: [UInt8], revisionID: String, deleted: Bool, body: PreparedBody, tree: RevTree,
               parent findParent: @autoclosure () -> Int?) throws {
        guard let router = core.router else { return }
        let parent = findParent()
        let revision = body.properties.map {
            Document(id: id, revisionID: revisionID, sequence: 0, isDeleted: deleted, properties: $0, body: body.bytes, blobs: core.blobs)
        } ?? Document(id: id, revisionID: revisionID, sequence: 0, isDeleted: deleted, body: body.bytes, blobs: core.blobs)
        let ancestor = tree.routingParent(from: parent, of: nil)
        let parentDoc = try ancestor.map { try core.document(tx, id: id, tree: tree, index: $0, sequence: 0) }
        let parentRouting = try ancestor.flatMap { i in try routingRecord(key)?.leaves[tree.revs[i].id] }
        let routing: RevisionRouting
        do {
            routing = try router(RoutingInput(revision: revision, parent: parentDoc, parentRouting: parentRouting))
        } catch let e as SetteeError where e.code == .forbidden || e.code == .unauthorized {
            throw e
        } catch {
            throw SetteeError.forbidden("\(error)")
        }
        try routing.check()
        participants.routing.pending = (key, revisionID, routing)
    }

    /// Brings a committed document's routing and its index entries up to date: the new
    /// revision's routing (if routed), the leaves still in the tree, and the winner's channels and
    /// grants under the commit's sequence `seq`.
    /// Returns the applied routing, which the document's new sequence entry holds, and the
    /// document's channels before and after (for the indexes kept by channel).
    func updateRouting(id: String, key: [UInt8], tree: RevTree, winner: Int, flags: DocFlags, seq: UInt64, oldSequence: UInt64?) throws
        -> (applied: RevisionRouting?, channels: (old: Set<String>, new: Set<String>)) {
        let none: (RevisionRouting?, (old: Set<String>, new: Set<String>)) = (nil, ([], []))
        let pending = participants.routing.pending.flatMap { $0.key == key ? $0 : nil }
        participants.routing.pending = nil
        let loaded = try oldSequence == nil ? nil : RoutingRecord.load(tx, trees, key: key, sequence: oldSequence)
        guard pending != nil || loaded != nil || core.router != nil else { return none }
        var record = loaded?.record ?? RoutingRecord()
        let winnerID = tree.revs[winner].id
        var dropped: [String: RevisionRouting] = [:]
        if loaded == nil, tree.revs.count == 1 {
            // A new document: its one revision is its only leaf (the common case, kept cheap).
            guard let pending, !pending.routing.isEmpty else { return none }
            record.leaves = [winnerID: pending.routing]
        } else {
            if let pending { record.leaves[pending.revisionID] = pending.routing }
            if record.leaves.count > 1 || record.leaves.keys.first != winnerID {
                let leafIDs = Set(tree.leaves().map { tree.revs[$0].id })
                for (rev, r) in record.leaves where !leafIDs.contains(rev) { dropped[rev] = r }
                record.leaves = record.leaves.filter { leafIDs.contains($0.key) }
            }
        }
        // A winner the router never saw (saved before a router was set) keeps what was applied.
        let routing = record.leaves[winnerID] ?? record.applied
        record.keepInnerChannels(dropped: dropped, current: routing.channels, tree: tree)
        let before = loaded?.record.applied.channels ?? []
        try apply(routing, to: &record, id: id, key: key, rev: winnerID, flags: flags, seq: seq)
        try store(record, key: key, winner: winnerID, sequence: seq, stored: loaded?.stored ?? false)
        return (record.applied.isEmpty ? nil : record.applied, (before, record.applied.channels))
    }

    /// Keeps a document's routing record in `doc.routing` unless its sequence entry implies it
    /// (or it says nothing); `stored`: whether `doc.routing` holds one now.
    func store(_ record: RoutingRecord, key: [UInt8], winner: String, sequence: UInt64, stored: Bool) throws {
        if record.isEmpty || record.isSimple(winner: winner, sequence: sequence) {
            if stored { try tx.delete(key, in: trees.routing) }
        } else {
            try tx.put(key, record.encoded(), in: trees.routing)
        }
    }

    /// Moves the document's channel entries to `seq` and records its grants.
    func apply(_ routing: RevisionRouting, to record: inout RoutingRecord, id: String, key: [UInt8], rev: String,
               flags: DocFlags, seq: UInt64) throws {
        let deleted = flags.contains(.deleted)
        let others = flags.contains(.multipleLeaves)
        let member = RoutingKey.memberEntry
        var removal: [UInt8]?
        for (channel, m) in record.membership {
            guard !routing.channels.contains(channel) else { continue }
            if m.isRemoved { continue }   // left earlier: that entry stays where it is
            try tx.delete(RoutingKey.channel(channel, m.sequence), in: trees.channels)
            if removal == nil { removal = RoutingKey.entry(deleted: deleted, removed: true, otherLeaves: others, id: id, rev: rev) }
            try tx.put(RoutingKey.channel(channel, seq), removal ?? [], in: trees.channels)
            record.membership[channel] = ChannelMembership(sequence: seq, isRemoved: true)
        }
        for channel in routing.channels {
            if let m = record.membership[channel] { try tx.delete(RoutingKey.channel(channel, m.sequence), in: trees.channels) }
            try tx.put(RoutingKey.channel(channel, seq), member, in: trees.channels)
            record.membership[channel] = ChannelMembership(sequence: seq, isRemoved: false)
        }
        try updateGrants(.channels, old: record.applied.access, new: routing.access, id: id, key: key, seq: seq)
        try updateGrants(.roles, old: record.applied.roles, new: routing.roles, id: id, key: key, seq: seq)
        try updateGrants(.roleChannels, old: record.applied.roleAccess, new: routing.roleAccess, id: id, key: key, seq: seq)
        record.applied = routing
    }

    /// Records what a document grants each principal now: new names at `seq`, names it no longer
    /// grants revoked at `seq`, unchanged names as they were.
    func updateGrants(_ kind: GrantKind, old: [String: Set<String>], new: [String: Set<String>], id: String, key: [UInt8], seq: UInt64) throws {
        guard old != new else { return }
        for principal in Set(old.keys).union(new.keys) {
            let now = new[principal] ?? []
            let before = old[principal] ?? []
            guard now != before else { continue }
            let k = RoutingKey.grant(kind, principal, key)
            var names = try tx.withValue(forKey: k, in: trees.grants) { b in try RoutingKey.decodeGrants(b).names } ?? [:]
            for n in now where names[n].map({ $0.revoked }) ?? true { names[n] = (seq, false) }
            for n in before.subtracting(now) { names[n] = (seq, true) }
            try tx.put(k, RoutingKey.grants(id: id, names), in: trees.grants)
            let log = participants.routing
            log.grantsChanged = true
            if log.grantChanges != nil {
                log.grantChanges?[kind, default: []].insert(principal)
                if (log.grantChanges?.values.reduce(0) { $0 + $1.count } ?? 0) > RoutingCommit.maxListedGrantChanges { log.grantChanges = nil }
            }
        }
    }

    /// A purged document leaves every channel log; what it granted is revoked at `seq`.
    /// `sequence`: its sequence before the purge, whose entry may hold its routing (read before
    /// the document's own records go). Returns the channels it was in.
    func purgeRouting(key: [UInt8], sequence: UInt64?, seq: UInt64) throws -> Set<String> {
        guard let (record, stored) = try RoutingRecord.load(tx, trees, key: key, sequence: sequence) else { return [] }
        for (channel, m) in record.membership { try tx.delete(RoutingKey.channel(channel, m.sequence), in: trees.channels) }
        let id = String(decoding: key, as: UTF8.self)
        try updateGrants(.channels, old: record.applied.access, new: [:], id: id, key: key, seq: seq)
        try updateGrants(.roles, old: record.applied.roles, new: [:], id: id, key: key, seq: seq)
        try updateGrants(.roleChannels, old: record.applied.roleAccess, new: [:], id: id, key: key, seq: seq)
        if stored { try tx.delete(key, in: trees.routing) }
        return record.applied.channels
    }
}
