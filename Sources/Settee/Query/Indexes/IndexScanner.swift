import Foundation
internal import SetteeStorage

extension DatabaseCore {
    /// Whether the current revision of document `id` is routed to at least one of `channels`,
    /// in the snapshot `tx` reads.
    func isRouted(_ tx: some StoreReading, documentID id: String, toAnyOf channels: Set<String>) throws -> Bool {
        guard !channels.isEmpty else { return false }
        let key = Array(id.utf8)
        guard let meta = try meta(tx, id: key),
              let routing = try RoutingRecord.load(tx, trees, key: key, sequence: meta.sequence) else { return false }
        return !routing.record.applied.channels.isDisjoint(with: channels)
    }

    /// A document's expiration as queries see it (`META().expiration`), read in `tx`.
    func expiration(_ tx: some StoreReading, key: UnsafeRawBufferPointer) throws -> Date? {
        try tx.withValue(forKey: key, in: trees.expiryByID) { b throws(SetteeError) in try ExpiryRecord(decoding: b) }?
            .expiration.map(ExpiryTime.date)
    }
}

/// Reads the rows a plan's index scan yields, in index order (forwards or backwards): the
/// ranges of the plan's values, one after the other, with the index's overflow entries (keys
/// too long for the engine, Formats/indexes.md) placed where their values sort.
///
/// ```swift
/// try IndexScanner(core: core, tx: tx, scan: scan, parameters: [:], fetch: true, expiration: false).run { row in
///     rows.append(row); return true
/// }
/// ```
///
/// - Note: Not thread-safe; lives for one query on one thread.
struct IndexScanner<Reader: StoreReading> {
    let core: DatabaseCore
    let tx: Reader
    let scan: QueryPlan.IndexScan
    let parameters: [String: JSONValue]
    /// Read each document (else rows hold only the index's values, as slots).
    let fetch: Bool
    let expiration: Bool
    /// The entries' values rows need decoded when `WHERE` is implied (those a select list,
    /// grouping or ordering reads; none for a count). Other rows get every value.
    var slotsBeyondWhere: Set<Int>? = nil {
        didSet { beyondWhereMask = slotsBeyondWhere.map(IndexEntry.mask) ?? ~0 }
    }
    /// ``slotsBeyondWhere`` as bits (all set for nil), made once rather than per entry.
    private(set) var beyondWhereMask: UInt64 = ~0
    /// The properties a fetched document is parsed for (nil: all).
    var documentKeys: Set<String>?
    /// Those a document is parsed for when its entry meets `WHERE` without evaluating it.
    var documentKeysBeyondWhere: Set<String>?
    /// Decides `WHERE` from a fetched document's body before it is parsed, for entries the
    /// ranges do not imply it for (``BodyPrefilter``).
    var prefilter: BodyPrefilter?
    /// Whether rows the ranges imply `WHERE` for are needed at all (a count needs only how
    /// many there are: it gets one placeholder row each).
    var rowsNeeded = true

    /// Grouping in index order by index values alone: which rows continue the last group.
    var groupRuns: GroupRuns?
    /// Whether each entry of a group is nothing but one more row of it (the aggregates read no
    /// value, no ID is kept, no limit stops the scan): a long group's entries are then counted
    /// by the engine rather than walked, where the ranges imply `WHERE` exactly.
    var countsGroupRuns = false
    /// Whether covering rows need their document IDs (else their ID is empty).
    var idsNeeded = true

    /// Only the entries of these channels (``Query/channels``), read from an index kept by
    /// channel; nil for every entry.
    var channels: Set<String>?
    /// What the scan reads is counted here (``QueryStatistics``).
    var counts: ScanCounts?

    private var tree: Tree { scan.index.tree }

    /// Calls `body` with each row until it returns false; its second argument says whether
    /// the row is known to meet `WHERE` (the ranges imply it).
    func run(_ body: (QueryRow, Bool, Bool) throws -> Bool) throws {
        if let channels {
            guard scan.index.definition.byChannel else {
                throw SetteeError(.invalidParameter, "index \(scan.index.name) is not kept by channel")
            }
            return try runByChannel(channels.sorted(), body)
        }
        let (ranges, exact) = try self.ranges()
        if ranges.isEmpty { return }
        var overflow = PlacedEntries(try overflowEntries().filter { Self.within($0.valueKey, ranges) }, descending: scan.descending)
        var going = true
        for r in (scan.descending ? ranges.reversed() : ranges) where going {
            let implied = self.implied(exact: exact, r)
            let counting = countsGroupRuns && !scan.descending && { if case .yes = implied { true } else { false } }()
            var from = scan.descending ? r.end : r.start
            // Entries in a row of the current group (counting them, a long group is counted, not walked).
            var streak = 0
            while going {
                var resume: [UInt8]?
                // A closure passed straight to the engine (not kept in a variable) does not escape,
                // so what it changes is checked at compile time rather than per entry.
                try tx.forEach(in: tree, from: from, reverse: scan.descending) { k, v in
                    if scan.descending {
                        if Bytes.compare(k, r.start) < 0 { return false }
                        if Bytes.compare(k, r.end) >= 0 { return true }
                    } else if Bytes.compare(k, r.end) >= 0 {
                        return false
                    }
                    going = try emit(key: k, value: v, implied: implied, after: &overflow, body)
                    guard going, counting, let runs = groupRuns else { return going }
                    resume = try countRestOfGroup(after: k, end: r.end, runs: runs, streak: &streak)
                    return resume == nil
                }
                guard let resume else { break }
                from = resume
            }
        }
        if going { _ = try flush(&overflow, before: nil, body) }
    }

    /// Entries of one group a scan walks before it counts the rest of the group instead: a
    /// count costs two descents and the group's leaves, which pays once a group is longer.
    static var groupWalkBeforeCount: Int { 32 }

    /// Once the group that entry `k` joined has had ``groupWalkBeforeCount`` entries in a row,
    /// counts its entries after `k` (up to the range's `end`) as pending rows of the group and
    /// returns where the scan goes on; nil while the scan walks on. Only for a scan whose range
    /// implies `WHERE` exactly and whose aggregates read nothing within a group
    /// (``countsGroupRuns``), so every entry of the group is one more row of it.
    private func countRestOfGroup(after k: UnsafeRawBufferPointer, end: [UInt8], runs: GroupRuns, streak: inout Int) throws -> [UInt8]? {
        guard let lead = runs.leading, !lead.isEmpty, k.count > lead.count,
              lead.withUnsafeBytes({ Bytes.compare(UnsafeRawBufferPointer(rebasing: k[..<$0.count]), $0) == 0 }) else {
            streak = 0
            return nil
        }
        streak += 1
        guard streak >= Self.groupWalkBeforeCount else { return nil }
        streak = 0
        // The group's keys all start with its leading values' bytes; the first key past them
        // starts with those bytes and FF (no value key has an FF byte where a value starts).
        var groupEnd = lead
        groupEnd.append(0xFF)
        let stop = groupEnd.lexicographicallyPrecedes(end) ? groupEnd : end
        var after = Array(k)
        after.append(0)
        let rest = try tx.count(in: tree, from: after, to: stop)
        guard rest > 0 else { return nil }
        counts?.addKeys(rest)
        runs.pending += rest
        return stop
    }

    /// How many rows ``run(_:)`` would yield, when that is all a count needs and the engine can
    /// count the entries without reading them: the ranges imply `WHERE` exactly, and no row,
    /// channel or group is wanted. Each range is counted by the leaves it spans (the overflow
    /// entries in it are added); nil when entries must be looked at.
    func countWithoutRows() throws -> Int? {
        guard channels == nil, !fetch, !rowsNeeded, groupRuns == nil, scan.impliesWhere else { return nil }
        let (ranges, exact) = try self.ranges()
        guard exact else { return nil }
        // Every range must lie among the stored value keys: above the overflow entries (a first
        // byte of 0) and below the index's own records (a first byte of FF).
        guard ranges.allSatisfy({ r in (r.start.first ?? 0) != 0 && ((r.end.first ?? 0xFF) < 0xFF || r.end == [0xFF]) }) else { return nil }
        var total = try overflowEntries().filter { Self.within($0.valueKey, ranges) }.count
        for r in ranges { total += try tx.count(in: tree, from: r.start, to: r.end) }
        return total
    }

    /// Whether a placed entry's values lie in one of the ranges, as a stored entry's key must
    /// to be read: an entry outside them fails the conjuncts the ranges were made of, so it is
    /// left out, and every row the scan yields meets those conjuncts (the plan's residual
    /// `WHERE` leaves them out).
    static func within(_ valueKey: [UInt8], _ ranges: [KeyRange]) -> Bool {
        ranges.contains { r in !valueKey.lexicographicallyPrecedes(r.start) && valueKey.lexicographicallyPrecedes(r.end) }
    }

    /// Entries a scan does not meet where they sort (overflow entries, documents an index kept
    /// by channel lists), sorted by value key and document ID, handed out among the others.
    private struct PlacedEntries {
        typealias Entry = (valueKey: [UInt8], id: [UInt8], values: [JSONValue?]?)
        let entries: [Entry]
        var next = 0

        init(_ entries: [Entry], descending: Bool) {
            let sorted = entries.sorted { a, b in
                a.valueKey == b.valueKey ? a.id.lexicographicallyPrecedes(b.id) : a.valueKey.lexicographicallyPrecedes(b.valueKey)
            }
            self.entries = descending ? sorted.reversed() : sorted
        }
    }

    /// Gives `body` the placed entries that come before `key` in the scan's direction (all that
    /// are left for nil); false once `body` stops.
    private func flush(_ placed: inout PlacedEntries, before key: (valueKey: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer)?,
                       _ body: (QueryRow, Bool, Bool) throws -> Bool) throws -> Bool {
        while placed.next < placed.entries.count {
            let o = placed.entries[placed.next]
            if let key {
                let precedes = o.valueKey.withUnsafeBytes { v in o.id.withUnsafeBytes { i in Self.precedes((v, i), key) } }
                if precedes == scan.descending { return true }
            }
            placed.next += 1
            counts?.addKeys(1)
            if fetch { counts?.addDocuments(1) }
            // A row from outside the key stream: the next entry's group is found again.
            groupRuns?.interrupt()
            guard try body(try row(id: o.id, values: o.values, keys: documentKeys), false, false) else { return false }
        }
        return true
    }

    /// Whether the ranges imply `WHERE` for the entries of range `r`: always when its equality
    /// values are exact keys; otherwise (strings, whose keys collation-equal text shares) for
    /// an entry whose equality values are those very values, which ``emit`` checks by their
    /// bytes (``Implication/byBytes``).
    private func implied(exact: Bool, _ r: KeyRange) -> Implication {
        guard scan.impliesWhere else { return .no }
        if exact { return .yes }
        return r.equalityValues.map { .byBytes($0) } ?? .no
    }

    /// Whether an entry meets `WHERE` without evaluating it.
    enum Implication {
        case yes, no
        /// When the entry's first values are these stored elements, byte for byte (the same
        /// bytes are the same value, which `=` compares exactly; other bytes are evaluated).
        case byBytes([[UInt8]])
    }

    /// The row of one stored entry (key without any channel prefix), after the placed entries
    /// that come before it; false once `body` stops.
    private func emit(key k: UnsafeRawBufferPointer, value v: UnsafeRawBufferPointer, implied: Implication, after placed: inout PlacedEntries,
                      _ body: (QueryRow, Bool, Bool) throws -> Bool) throws -> Bool {
        guard let parts = IndexEntry.split(k), !IndexEntry.isOverflow(k) else {
            throw SetteeError(.corrupted, "index \(scan.index.name) holds a malformed key")
        }
        guard try flush(&placed, before: (parts.valueKey, parts.documentID), body) else { return false }
        counts?.addKeys(1)
        var meets: Bool
        switch implied {
        case .yes: meets = true
        case .no: meets = false
        case .byBytes: meets = true   // until a value's text differs
        }
        if case .yes = implied, !rowsNeeded, !fetch { return try body(.empty, true, false) }
        if fetch {
            counts?.addDocuments(1)
            if case .byBytes(let texts) = implied { meets = try IndexEntry.valuesStart(v, with: texts) }
            if !meets, let prefilter {
                // A document the prefilter rejects is passed over, as one WHERE is false for.
                guard let found = try row(id: Array(parts.documentID), admitting: prefilter) else { return true }
                return try body(found.row, found.matches, false)
            }
            return try body(try row(id: Array(parts.documentID), values: nil, keys: meets ? documentKeysBeyondWhere : documentKeys), meets, false)
        }
        let continues = groupRuns?.continues(parts.valueKey) ?? false
        // A row that joins the last group and whose aggregates read no value (`count(*)`) is
        // nothing but one more row of that group, once it is known to meet WHERE: it is
        // counted as pending, without a row (see GroupRuns.pending).
        if continues, let runs = groupRuns, runs.slotsWithinGroup.isEmpty, !idsNeeded {
            switch implied {
            case .yes: runs.pending += 1; return true
            case .byBytes(let texts):
                if try IndexEntry.valuesStart(v, with: texts) { runs.pending += 1; return true }
            case .no: break
            }
        }
        // Values are decoded only for what reads them: when WHERE is met, what the statement
        // reads beyond it; else all of them, for WHERE.
        let count = scan.index.valueCount
        var values: [JSONValue?]
        if case .no = implied {
            values = try IndexEntry.values(v, count: count)
        } else {
            let mask = continues ? groupRuns?.maskWithinGroup ?? ~0 : beyondWhereMask
            let texts: [[UInt8]]
            if case .byBytes(let t) = implied { texts = t } else { texts = [] }
            // Past the equality values and the last wanted one, nothing is read.
            let upTo = max(texts.count, mask == ~0 ? count : 64 - mask.leadingZeroBitCount)
            values = try IndexEntry.values(v, count: count, upTo: upTo) { i, element in
                if i < texts.count, meets, !Bytes.equal(element, texts[i]) { meets = false }
                return i < 64 && mask & 1 << UInt64(i) != 0
            }
            if !meets { values = try IndexEntry.values(v, count: count) }
            else if !rowsNeeded { return try body(.empty, true, false) }
        }
        return try body(try row(id: idsNeeded ? Array(parts.documentID) : [], values: values, keys: nil), meets, continues)
    }

    /// One channel's entries in one range, pulled through an engine cursor (a merge of several
    /// channels steps them in turn), each key and value lent where it lies.
    private struct ChannelStream {
        let prefixCount: Int
        let lower: [UInt8]
        let upper: [UInt8]
        let descending: Bool
        let cursor: TreeCursor

        init(_ tx: Reader, _ tree: Tree, channel: String, range: (start: [UInt8], end: [UInt8]), descending: Bool) throws {
            let prefix = IndexEntry.channelPrefix(channel)
            prefixCount = prefix.count
            lower = prefix + range.start
            upper = prefix + range.end
            self.descending = descending
            cursor = try tx.cursor(in: tree, from: descending ? upper : lower, reverse: descending)
            // The range's end is not in it: backwards, the cursor may start on it.
            if descending, cursor.isValid, Bytes.compare(cursor.key, upper) >= 0 { try cursor.next() }
        }

        /// The key of the entry the stream is on, without the channel prefix (lent until it
        /// moves); nil past the range.
        var head: UnsafeRawBufferPointer? {
            guard cursor.isValid else { return nil }
            let k = cursor.key
            if descending ? Bytes.compare(k, lower) < 0 : Bytes.compare(k, upper) >= 0 { return nil }
            return UnsafeRawBufferPointer(rebasing: k[prefixCount...])
        }
    }

    /// The rows of the channels' entries: each range read in every channel, the channels'
    /// entries merged in the index's order (a document in several of them once), and the
    /// index's listed documents (``IndexEntry/channelOverflowTag``) of those channels placed
    /// where their values sort.
    private func runByChannel(_ channels: [String], _ body: (QueryRow, Bool, Bool) throws -> Bool) throws {
        let (ranges, exact) = try self.ranges()
        if ranges.isEmpty || channels.isEmpty { return }
        var listed = PlacedEntries(try listedEntries(Set(channels)).filter { Self.within($0.valueKey, ranges) }, descending: scan.descending)
        // The last key given, kept in one buffer (a document in two of the channels has the
        // same entry in both, one after the other in the merge).
        var last: [UInt8] = []
        last.reserveCapacity(StoreConfiguration.maxKeyLength)
        for r in (scan.descending ? ranges.reversed() : ranges) {
            let implied = self.implied(exact: exact, r)
            let streams = try channels.map { try ChannelStream(tx, tree, channel: $0, range: (r.start, r.end), descending: scan.descending) }
            var hasLast = false
            while true {
                var best: (index: Int, key: UnsafeRawBufferPointer)?
                for i in streams.indices {
                    guard let head = streams[i].head else { continue }
                    if let b = best {
                        let c = Bytes.compare(head, b.key)
                        if scan.descending ? c > 0 : c < 0 { best = (i, head) }
                    } else {
                        best = (i, head)
                    }
                }
                guard let b = best else { break }
                let stream = streams[b.index]
                if hasLast, Bytes.equal(b.key, last) {
                    try stream.cursor.next()
                    continue
                }
                last.removeAll(keepingCapacity: true)
                last.append(contentsOf: b.key)
                hasLast = true
                let going = try stream.cursor.withValue { v in try emit(key: b.key, value: v, implied: implied, after: &listed, body) }
                if !going { return }
                try stream.cursor.next()
            }
        }
        _ = try flush(&listed, before: nil, body)
    }

    /// The documents an index kept by channel lists instead of keying them per channel, those
    /// routed to one of `channels`.
    private func listedEntries(_ channels: Set<String>) throws -> [(valueKey: [UInt8], id: [UInt8], values: [JSONValue?]?)] {
        var out: [(valueKey: [UInt8], id: [UInt8], values: [JSONValue?]?)] = []
        let tag = IndexEntry.channelOverflowTag
        try tx.forEach(in: tree, from: tag, reverse: false) { k, v in
            guard k.count > tag.count, k.starts(with: tag) else { return false }
            let id = Array(k[tag.count...])
            guard try core.isRouted(tx, documentID: String(decoding: id, as: UTF8.self), toAnyOf: channels) else { return true }
            let values = try IndexEntry.values(v, count: scan.index.valueCount)
            out.append((try IndexEntry.valueKey(values.prefix(scan.index.expressions.count)), id, fetch ? nil : values))
            return true
        }
        return out
    }

    /// Whether (value key, document ID) `a` sorts before `b`.
    static func precedes(_ a: (UnsafeRawBufferPointer, UnsafeRawBufferPointer), _ b: (UnsafeRawBufferPointer, UnsafeRawBufferPointer)) -> Bool {
        if a.0.elementsEqual(b.0) { return a.1.lexicographicallyPrecedes(b.1) }
        return a.0.lexicographicallyPrecedes(b.0)
    }

    /// A key range to read, [start, end), with the stored bytes of its equality values (as an
    /// entry's value holds them, ``IndexValueCoding``).
    struct KeyRange {
        var start: [UInt8]
        var end: [UInt8]
        /// nil when one of them has several encodings (`IN` values with the same key).
        var equalityValues: [[UInt8]]?
    }

    /// The key ranges to read, in ascending order, and whether they are exact: every equality
    /// value is a key only equal values have (not a string, array or object, whose keys
    /// collation-equal text shares; not an integer past 2^53).
    func ranges() throws -> (ranges: [KeyRange], exact: Bool) {
        let none = QueryRow.empty
        func value(_ e: QueryExpression) throws -> JSONValue? {
            // MISSING and NULL equal nothing and bound nothing: no range.
            guard let v = try e.evaluate(none, parameters: parameters), v != .null else { return nil }
            return v
        }
        var prefixes: [(key: [UInt8], json: [[UInt8]]?)] = [([], [])]
        var exact = true
        // An equality value's key and stored bytes; a key other values share makes the ranges inexact.
        func keyed(_ v: JSONValue) throws -> (key: [UInt8], json: [UInt8]) {
            switch v {
            case .bool, .double: break
            case .int(let n) where n.magnitude <= 1 << 53: break
            default: exact = false
            }
            return (try JSONCollation.key(v), try IndexValueCoding.encoded(v))
        }
        for candidates in scan.equalities {
            if candidates.count == 1 {
                // One value (`=`), the usual case: its key and text extend every prefix.
                guard let v = try value(candidates[0]) else { return ([], exact) }
                let (key, json) = try keyed(v)
                prefixes = prefixes.map { p in (p.key + key, p.json.map { $0 + [json] }) }
                continue
            }
            // Candidates with the same key share its range: the range then has no one text.
            var keys: [[UInt8]: [UInt8]?] = [:]
            for c in candidates {
                guard let v = try value(c) else { continue }
                let (key, json) = try keyed(v)
                if let known = keys[key] {
                    if known != json { keys[key] = .some(nil) }
                } else {
                    keys[key] = json
                }
            }
            let sorted = keys.sorted { $0.key.lexicographicallyPrecedes($1.key) }
            prefixes = prefixes.flatMap { p in
                sorted.map { k, json in (p.key + k, p.json.flatMap { pj in json.map { pj + [$0] } }) }
            }
            if prefixes.isEmpty { return ([], exact) }
        }
        var out: [KeyRange] = []
        for (p, json) in prefixes {
            var start = p, end = p + [0xFF]
            if scan.hasRange {
                // MISSING is never in a range; NULL only in IS VALUED's and the like (a
                // comparison with NULL is not true).
                start = p + [scan.rangeOnly ? JSONCollation.Tag.null.rawValue : JSONCollation.Tag.false.rawValue]
                if let lo = scan.lower {
                    guard let v = try value(lo.value) else { return ([], exact) }
                    start = p + (try JSONCollation.key(v)) + (lo.inclusive ? [] : [0xFF])
                }
                if let hi = scan.upper {
                    guard let v = try value(hi.value) else { return ([], exact) }
                    end = p + (try JSONCollation.key(v)) + (hi.inclusive ? [0xFF] : [])
                }
            }
            if start.lexicographicallyPrecedes(end) { out.append(KeyRange(start: start, end: end, equalityValues: json)) }
        }
        return (out, exact)
    }

    /// The index's overflow entries (rare), with their full value keys.
    private func overflowEntries() throws -> [(valueKey: [UInt8], id: [UInt8], values: [JSONValue?]?)] {
        var out: [(valueKey: [UInt8], id: [UInt8], values: [JSONValue?]?)] = []
        try tx.forEach(in: tree, from: [0], reverse: false) { k, v in
            guard IndexEntry.isOverflow(k) else { return false }
            let values = try IndexEntry.values(v, count: scan.index.valueCount)
            out.append((try IndexEntry.valueKey(values.prefix(scan.index.expressions.count)), Array(k.dropFirst()), fetch ? nil : values))
            return true
        }
        return out
    }

    private enum Fetched { case absent, rejected, admitted(QueryRow, matches: Bool) }

    /// The fetched row of the document `key`, as `prefilter` admits it (nil: rejected; `matches`:
    /// WHERE is TRUE for it and the row holds only what the query reads beyond WHERE).
    private func row(id key: [UInt8], admitting prefilter: BodyPrefilter) throws -> (row: QueryRow, matches: Bool)? {
        let fetched = try key.withUnsafeBytes { k in
            try tx.withValue(forKey: k, in: core.trees.byID) { v -> Fetched in
                guard let flags = v.first, !DocFlags(rawValue: flags).contains(.deleted) else { return .absent }
                guard let found = try core.queryRow(tx, key: k, encodedMeta: v, keys: documentKeys, admitting: prefilter,
                                                    keysWhenMatched: documentKeysBeyondWhere) else { return .rejected }
                return .admitted(found.row, matches: found.matches)
            } ?? .absent
        }
        switch fetched {
        case .absent:
            throw SetteeError(.corrupted, "index \(scan.index.name) names document \(String(decoding: key, as: UTF8.self)), which is not in the database; check(repair: true) rebuilds the index")
        case .rejected:
            return nil
        case .admitted(var row, let matches):
            if expiration { row.expiration = try key.withUnsafeBytes { try core.expiration(tx, key: $0) } }
            return (row, matches)
        }
    }

    /// The row of one entry: the document read from the same snapshot, or the entry's values.
    /// (`keys`: what a read document is parsed for, nil for every property.)
    private func row(id key: [UInt8], values: [JSONValue?]?, keys: Set<String>?) throws -> QueryRow {
        let id = String(decoding: key, as: UTF8.self)
        guard let values else {
            guard let meta = try core.meta(tx, id: key), !meta.flags.contains(.deleted) else {
                throw SetteeError(.corrupted, "index \(scan.index.name) names document \(id), which is not in the database; check(repair: true) rebuilds the index")
            }
            var row = try core.queryRow(tx, id: id, meta: meta, keys: keys)
            if expiration { row.expiration = try key.withUnsafeBytes { try core.expiration(tx, key: $0) } }
            return row
        }
        return QueryRow(id: id, revisionID: "", sequence: 0, isDeleted: false, expiration: nil, properties: [:], slots: values)
    }
}

