import Foundation
@_spi(Replication) @_spi(Server) import Settee

/// A position in a changes feed. A plain sequence N is (N, N). A user's feed also sends rows
/// that are not in sequence order: the older documents of a channel granted at sequence G
/// (backfill) and the documents of a channel lost at sequence R (revocation), each at (G, N) or
/// (R, N) with N the document's own sequence, placed just before sequence G or R; on the wire
/// `"G:N"`, as Sync Gateway writes its backfill sequences. Clients hand it back as `since`.
struct FeedPosition: Sendable, Hashable, Comparable {
    var major: UInt64
    var minor: UInt64

    init(_ seq: UInt64) {
        major = seq
        minor = seq
    }

    init(major: UInt64, minor: UInt64) {
        self.major = major
        self.minor = minor
    }

    var isPlain: Bool { major == minor }

    /// What the feed sends: a number, or `"G:N"`.
    var json: JSONValue { isPlain ? .int(Int64(clamping: major)) : .string("\(major):\(minor)") }

    /// The plain sequences a row at this position is after: everything before `major`, and
    /// `major` itself unless the position is inside a backfill at `major`.
    var sequencesDone: UInt64 { minor < major ? major - 1 : major }

    static func < (a: Self, b: Self) -> Bool { (a.major, a.minor) < (b.major, b.minor) }

    /// `N`, `"N"`, `"G:N"`, or CouchDB 3's opaque `"N-g1AAA…"` (its number counts).
    init?(parsing raw: String) {
        let text = raw.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 2, let g = UInt64(parts[0]), let n = UInt64(parts[1]), n <= g {
            self.init(major: g, minor: n)
            return
        }
        guard let n = UInt64(text.prefix { $0.isNumber }) else { return nil }
        self.init(n)
    }
}

/// An entry of a channel's log, as the feed reads it (from the log itself, or from a document's
/// latest change and its channel memberships).
struct LogEntry: Sendable, Equatable {
    var sequence: UInt64
    var documentID: String
    var revisionID: String
    var isDeleted: Bool
    var isRemoved: Bool
    var hasOtherLeaves: Bool

    init(sequence: UInt64, documentID: String, revisionID: String, isDeleted: Bool, isRemoved: Bool, hasOtherLeaves: Bool) {
        self.sequence = sequence
        self.documentID = documentID
        self.revisionID = revisionID
        self.isDeleted = isDeleted
        self.isRemoved = isRemoved
        self.hasOtherLeaves = hasOtherLeaves
    }

    init(_ c: ChannelChange) {
        self.init(sequence: c.sequence, documentID: c.documentID, revisionID: c.revisionID, isDeleted: c.isDeleted,
                  isRemoved: c.isRemoved, hasOtherLeaves: c.hasOtherLeaves)
    }
}

/// A feed row before it is written: where it sits, which document and revision, and whether it
/// tells the client that the user lost the document (`removed`, the channels it left).
struct FeedEntry: Sendable {
    var position: FeedPosition
    var documentID: String
    var revisionID: String
    var isDeleted: Bool
    var isConflicted: Bool
    var otherLeaves: [String]
    var removed: [String]?
}

extension ServedDatabase {
    /// A user's feed: the rows after `since` in the channels it reads (narrowed to `requested`
    /// when given), with the older documents of channels granted since the client's position and
    /// removal rows for documents that left its channels or whose channel it lost. Costs the
    /// entries of those channels after the position, never a scan of the database: a read of each
    /// channel's log from the position, or, for a user with more channels than there are changes
    /// after the position (a caught-up client granted thousands of channels), a read of those
    /// changes and their documents' channel memberships, whichever is less (`bySequence` forces
    /// one or the other, for the tests).
    ///
    /// Returns at most `limit` entries (all when nil), whether there are more, and where a client
    /// that received them all stands.
    func channelEntries(access: UserAccess, requested: Set<String>?, since p: FeedPosition, limit: Int?,
                        bySequence: Bool? = nil) throws -> (entries: [FeedEntry], more: Bool, last: FeedPosition) {
        let database = self.database
        let upTo = try database.lastSequence
        var channels = access.channels
        var revoked = access.revoked
        if let requested {
            channels = access.readsAll ? Dictionary(uniqueKeysWithValues: requested.map { ($0, channels[$0] ?? 0) })
                                       : channels.filter { requested.contains($0.key) }
            revoked = revoked.filter { requested.contains($0.key) }
        }
        channels.removeValue(forKey: "*")
        let perQuery = limit.map(oneMore) ?? .max
        let done = p.sequencesDone
        enum Kind { case regular, backfill(UInt64), revocation(UInt64) }
        var queries: [ChannelQuery] = []
        var kinds: [(Kind, String)] = []
        /// A channel granted or lost at `at`, after the client's position: its older entries, once
        /// (resumed from `p.minor` when the client stopped inside that catch-up).
        func catchUp(_ c: String, at: UInt64, _ kind: Kind) {
            if at > p.major {
                guard done > 0 else { return }   // nothing before the start to catch up on
                queries.append(ChannelQuery(channel: c, after: 0, through: done, limit: perQuery))
                kinds.append((kind, c))
            } else if at == p.major, p.minor < p.major {
                queries.append(ChannelQuery(channel: c, after: p.minor, through: at - 1, limit: perQuery))
                kinds.append((kind, c))
            }
        }
        // Two reads per change against one per channel: the cheaper way to the same entries.
        let window = upTo > done ? upTo - done : 0
        let scan = bySequence ?? (window < UInt64(channels.count) / 2)
        for (c, granted) in channels {
            if !scan {
                queries.append(ChannelQuery(channel: c, after: done, through: upTo, limit: perQuery))
                kinds.append((.regular, c))
            }
            catchUp(c, at: granted, .backfill(granted))
        }
        for (c, lost) in revoked { catchUp(c, at: lost, .revocation(lost)) }
        var logs = try database.channelChanges(queries).map { $0.map(LogEntry.init) }
        if scan {
            for (c, log) in try channelLogs(of: Set(channels.keys), after: done, through: upTo) {
                kinds.append((.regular, c))
                logs.append(log)
            }
        }
        func position(_ kind: Kind, _ change: LogEntry) -> FeedPosition {
            switch kind {
            case .regular: FeedPosition(change.sequence)
            case .backfill(let g): FeedPosition(major: g, minor: change.sequence)
            case .revocation(let r): FeedPosition(major: r, minor: change.sequence)
            }
        }
        // A log read only up to its cap is complete up to its last entry, no further: past the
        // earliest such end, some channel's entries were not read, so the page stops there (its
        // rows may be fewer than the limit once removals are dropped, but none is skipped).
        var boundary: FeedPosition?
        for ((kind, _), log) in zip(kinds, logs) where log.count >= perQuery {
            if let end = log.last.map({ position(kind, $0) }) { boundary = min(boundary ?? end, end) }
        }
        // One entry per (position, document): a member entry wins over removals.
        var byKey: [FeedPosition: [String: FeedEntry]] = [:]
        for ((kind, channel), log) in zip(kinds, logs) {
            for change in log {
                let position = position(kind, change)
                if let boundary, position > boundary { continue }
                var removal = change.isRemoved
                switch kind {
                case .regular: break
                case .backfill:
                    if change.isRemoved { continue }   // the client never had it
                case .revocation:
                    if change.isRemoved { continue }
                    removal = true
                }
                var entry = FeedEntry(position: position, documentID: change.documentID, revisionID: change.revisionID,
                                      isDeleted: change.isDeleted, isConflicted: false,
                                      otherLeaves: change.hasOtherLeaves ? [""] : [], removed: removal ? [channel] : nil)
                if let existing = byKey[position]?[change.documentID] {
                    switch (existing.removed, entry.removed) {
                    case (nil, _): continue
                    case (let a?, let b?): entry.removed = a + b
                    case (_?, nil): break
                    }
                }
                byKey[position, default: [:]][change.documentID] = entry
            }
        }
        var entries: [FeedEntry] = []
        for (_, docs) in byKey { entries.append(contentsOf: docs.values) }
        entries.sort { ($0.position, $0.documentID) < ($1.position, $1.documentID) }
        // A document still readable through another channel is not removed: it just changed.
        var readableNow: [String: Bool] = [:]
        var kept: [FeedEntry] = []
        kept.reserveCapacity(entries.count)
        for e in entries {
            if e.removed != nil {
                let readable: Bool
                if let known = readableNow[e.documentID] {
                    readable = known
                } else {
                    readable = try database.routing(ofDocumentWithID: e.documentID, grants: false).map { access.canRead($0.current.channels) } ?? false
                    readableNow[e.documentID] = readable
                }
                if readable { continue }
            }
            kept.append(e)
        }
        entries = kept
        var more = boundary != nil
        var end = boundary
        if let limit, entries.count > limit {
            entries = Array(entries.prefix(limit))
            more = true
            end = entries.last?.position
        }
        // Leaves of documents with more than one, read only for those, and only those the user
        // may know of.
        let reader = Reader(self, access: access)
        for i in entries.indices where !entries[i].otherLeaves.isEmpty {
            let id = entries[i].documentID
            let tree = try database.revisionTree(withID: id)
            let others = try reader.visible((tree?.leafRevisionIDs ?? []).filter { $0 != entries[i].revisionID }, of: id)
            entries[i].otherLeaves = others
            let live = Set(tree?.revisions.filter { !$0.isDeleted }.map(\.revisionID) ?? [])
            entries[i].isConflicted = others.contains { live.contains($0) }
        }
        let last = more ? max(end ?? p, p) : max(FeedPosition(upTo), FeedPosition(p.major))
        return (entries, more, last)
    }

    /// The entries of `channels`' logs after `after` through `through`, read from the documents
    /// changed in that range (each document's latest change is in it, and so is every entry a
    /// channel log holds for it there): a member entry at the document's current sequence, a
    /// removal entry as its channel's log holds it.
    private func channelLogs(of channels: Set<String>, after: UInt64, through: UInt64) throws -> [String: [LogEntry]] {
        var out: [String: [LogEntry]] = [:]
        guard after < through else { return out }
        for change in try database.changes(since: after) where change.sequence <= through {
            guard let routing = try database.routing(ofDocumentWithID: change.documentID, grants: false) else { continue }
            for (channel, m) in routing.membership where channels.contains(channel) && m.sequence > after && m.sequence <= through {
                if m.isRemoved {
                    // The removal entry names the revision that took the document out.
                    let entry = try database.channelChanges([ChannelQuery(channel: channel, after: m.sequence - 1, through: m.sequence, limit: 1)])[0]
                    out[channel, default: []] += entry.map(LogEntry.init)
                } else {
                    out[channel, default: []].append(LogEntry(sequence: change.sequence, documentID: change.documentID,
                                                              revisionID: change.revisionID, isDeleted: change.isDeleted,
                                                              isRemoved: false, hasOtherLeaves: !change.otherLeafRevisionIDs.isEmpty))
                }
            }
        }
        return out
    }
}
