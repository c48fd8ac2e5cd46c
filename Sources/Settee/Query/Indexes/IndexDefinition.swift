internal import SetteeStorage
import Synchronization

/// An index as the catalog (`idx.catalog`, Formats/indexes.md) records it: what it indexes,
/// the engine tree holding its entries, whether it is whole, and the ICU collator version its
/// string keys were made with.
///
/// ```
/// | version u8 | kind u8 (1 value) | state u8 (0 building, 1 ready) | tree string |
/// | count varint | expression strings … | has-where u8 | [where string] | collator string |
/// ```
///
/// A full-text index (kind 2) goes on with `| has-language u8 | [language string] |
/// ignore-accents u8 | analyzer version varint |`. A map index (kind 3) has one expression:
/// its version (the application's map function is not stored). A value index kept by channel
/// ends with one more byte, 1 (written only then, so other definitions keep their bytes); one
/// with covering expressions ends with that byte (0 or 1), then `| count varint | covering
/// strings … |`.
/// `version` is ``currentVersion(_:)`` of the kind: 3 for a value index with back entries
/// (``IndexEntry/backKey(_:)``) and binary values (``IndexValueCoding``), 2 for a map index with
/// group counts (``MapIndexStore/summaryTag``), 1 for a full-text index; an older value or map
/// index is rebuilt at open.
struct IndexDefinition: Sendable, Hashable {
    enum Kind: UInt8, Sendable { case value = 1, fullText = 2, map = 3 }
    enum State: UInt8, Sendable { case building = 0, ready = 1 }

    /// How a full-text index turns text into terms.
    struct TextOptions: Sendable, Hashable {
        var language: String?
        var ignoreAccents: Bool
        /// ``FullTextAnalyzer/version`` when the index was built: another version's terms
        /// would not meet its queries' terms, so the open rebuilds the index.
        var analyzerVersion: UInt64
    }

    var kind: Kind
    var state: State
    var treeName: String
    var expressions: [String]
    var condition: String?
    var collatorVersion: String
    /// Set for (and only for) a full-text index.
    var text: TextOptions?
    /// A value index whose entries are also kept under each channel of their document.
    var byChannel = false
    /// A value index's covering expressions: their values are kept in each entry's value,
    /// after the indexed expressions' (``ValueIndexConfiguration/covering``).
    var covering: [String] = []
    /// A value index built before back entries or binary values, or a map index built before
    /// group counts (a definition version below ``currentVersion(_:)``): the open rebuilds it,
    /// since commits find a document's old entry through its back entry, scans read binary
    /// values and reads of counts trust the group counts.
    var olderLayout = false

    /// The definition version this library writes for an index of `kind`: 3 for a value index
    /// (back entries, values in ``IndexValueCoding``'s binary form), 2 for a map index (group
    /// counts), 1 for a full-text index. An older one is rebuilt at open.
    static func currentVersion(_ kind: Kind) -> UInt8 {
        switch kind {
        case .value: 3
        case .map: 2
        case .fullText: 1
        }
    }

    /// Whether two definitions index the same thing (state and tree aside).
    func sameIndex(as other: IndexDefinition) -> Bool {
        kind == other.kind && expressions == other.expressions && condition == other.condition && text == other.text
            && byChannel == other.byChannel && covering == other.covering
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.u8(olderLayout ? 1 : Self.currentVersion(kind))
        w.u8(kind.rawValue)
        w.u8(state.rawValue)
        w.string(treeName)
        w.varint(UInt64(expressions.count))
        for e in expressions { w.string(e) }
        if let condition {
            w.u8(1)
            w.string(condition)
        } else {
            w.u8(0)
        }
        w.string(collatorVersion)
        if let text {
            if let language = text.language {
                w.u8(1)
                w.string(language)
            } else {
                w.u8(0)
            }
            w.u8(text.ignoreAccents ? 1 : 0)
            w.varint(text.analyzerVersion)
        }
        if !covering.isEmpty {
            w.u8(byChannel ? 1 : 0)
            w.varint(UInt64(covering.count))
            for e in covering { w.string(e) }
        } else if byChannel {
            w.u8(1)
        }
        return w.bytes
    }

    init(kind: Kind, state: State, treeName: String, expressions: [String], condition: String?, collatorVersion: String,
         text: TextOptions? = nil) {
        self.kind = kind
        self.state = state
        self.treeName = treeName
        self.expressions = expressions
        self.condition = condition
        self.collatorVersion = collatorVersion
        self.text = text
    }

    init(decoding b: UnsafeRawBufferPointer) throws(SetteeError) {
        var r = ByteReader(b)
        let bad = SetteeError(.corrupted, "an index definition is malformed")
        guard let v = r.u8(), let k = r.u8().flatMap(Kind.init(rawValue:)), v >= 1, v <= Self.currentVersion(k),
              let s = r.u8().flatMap(State.init(rawValue:)), let tree = r.string(), let n = r.count(limit: r.remaining) else { throw bad }
        var expressions: [String] = []
        for _ in 0 ..< n {
            guard let e = r.string() else { throw bad }
            expressions.append(e)
        }
        guard let hasWhere = r.u8(), hasWhere <= 1 else { throw bad }
        var condition: String?
        if hasWhere == 1 {
            guard let c = r.string() else { throw bad }
            condition = c
        }
        guard let collator = r.string() else { throw bad }
        var text: TextOptions?
        if k == .fullText {
            guard let hasLanguage = r.u8(), hasLanguage <= 1 else { throw bad }
            var language: String?
            if hasLanguage == 1 {
                guard let l = r.string() else { throw bad }
                language = l
            }
            guard let accents = r.u8(), accents <= 1, let version = r.varint() else { throw bad }
            text = TextOptions(language: language, ignoreAccents: accents == 1, analyzerVersion: version)
        }
        var byChannel = false
        var covering: [String] = []
        if k == .value, !r.atEnd {
            guard let flag = r.u8(), flag <= 1 else { throw bad }
            byChannel = flag == 1
            if !r.atEnd {
                guard let m = r.count(limit: r.remaining), m > 0 else { throw bad }
                for _ in 0 ..< m {
                    guard let e = r.string() else { throw bad }
                    covering.append(e)
                }
            } else if !byChannel {
                throw bad
            }
        }
        guard r.atEnd else { throw bad }
        self.init(kind: k, state: s, treeName: tree, expressions: expressions, condition: condition, collatorVersion: collator, text: text)
        self.byChannel = byChannel
        self.covering = covering
        olderLayout = v < Self.currentVersion(k)
    }
}

/// An index ready to maintain and to plan with: its definition, compiled.
///
/// - Note: A value type; safe to share between threads.
struct CompiledIndex: Sendable {
    let name: String
    let definition: IndexDefinition
    /// The catalog value it was compiled from (a snapshot's catalog is matched against it).
    let record: [UInt8]
    /// The indexed expressions, in key order.
    let expressions: [QueryExpression]
    /// A value index's covering expressions: values an entry keeps after the indexed ones.
    let coveringExpressions: [QueryExpression]
    let condition: QueryExpression?
    let tree: Tree
    /// A full-text index's analyzer; nil for a value index.
    let analyzer: FullTextAnalyzer?
    /// The top-level properties its expressions and condition read (nil: the whole document):
    /// all a build or a commit parses of a body for it.
    let documentKeys: Set<String>?
    /// A map index's function, when the application has given it in this process (nil: the
    /// index is detached, and a write marks it for rebuilding).
    let map: MapIndexConfiguration?

    var isReady: Bool { definition.state == .ready }
    /// How many values an entry's value holds: the indexed expressions', then the covering ones'.
    var valueCount: Int { expressions.count + coveringExpressions.count }
    var isMap: Bool { definition.kind == .map }

    init(name: String, definition: IndexDefinition, tree: Tree, map: MapIndexConfiguration? = nil) throws(SetteeError) {
        self.name = name
        self.definition = definition
        self.record = definition.encoded()
        self.tree = tree
        self.map = map
        if definition.kind == .map {
            expressions = []
            coveringExpressions = []
            condition = nil
            analyzer = nil
            documentKeys = nil
            return
        }
        var compiled: [QueryExpression] = []
        for e in definition.expressions { compiled.append(try Self.compile(e, index: name)) }
        expressions = compiled
        var covering: [QueryExpression] = []
        for e in definition.covering { covering.append(try Self.compile(e, index: name)) }
        coveringExpressions = covering
        condition = try definition.condition.map { (c) throws(SetteeError) in try Self.compile(c, index: name) }
        analyzer = definition.text.map { FullTextAnalyzer(language: $0.language, ignoreAccents: $0.ignoreAccents) }
        documentKeys = QueryExpression.documentKeys(compiled + covering + [condition].compactMap { $0 })
    }

    /// Parses one indexed expression and checks that it depends on the document alone.
    static func compile(_ text: String, index: String) throws(SetteeError) -> QueryExpression {
        let e = try SQLParser.parseExpression(text)
        if e.containsAggregate {
            throw SetteeError(.invalidParameter, "index \(index): an aggregate cannot be indexed (\(text))")
        }
        if e.contains(where: { if case .parameter = $0 { true } else { false } }) {
            throw SetteeError(.invalidParameter, "index \(index): a parameter cannot be indexed (\(text))")
        }
        // Only the ID: the other META() properties change without a new revision (expiration)
        // or with every commit, which the index is not rewritten for.
        if e.contains(where: { if case .meta(let m) = $0 { m != .id } else { false } }) {
            throw SetteeError(.invalidParameter, "index \(index): of META() only META().id can be indexed (\(text))")
        }
        return e
    }

    /// The entry of a document in a value index, or nil when it has none (its first
    /// expression is MISSING, its condition does not hold, or it is deleted).
    func entry(for row: QueryRow) throws(SetteeError) -> IndexEntry? {
        if row.isDeleted { return nil }
        if let condition, !(try condition.evaluate(row, parameters: [:])).isTrue { return nil }
        var values: [JSONValue?] = []
        values.reserveCapacity(valueCount)
        for e in expressions { values.append(try e.evaluate(row, parameters: [:])) }
        guard case .some(.some) = values.first else { return nil }
        for e in coveringExpressions { values.append(try e.evaluate(row, parameters: [:])) }
        return try IndexEntry(values: values, keyCount: expressions.count, documentID: row.id)
    }
}

extension CompiledIndex {
    /// The terms a document gives a full-text index, or nil when it is not in the index
    /// (deleted, its condition does not hold, or no expression gives a string).
    func textEntry(for row: QueryRow) throws(SetteeError) -> FullTextDocumentEntry? {
        guard let analyzer, let fields = try textFields(for: row) else { return nil }
        return FullTextDocumentEntry(fields: fields, analyzer: analyzer)
    }

    /// The texts a document gives a full-text index, one per expression ("" for a value that
    /// is not a string), or nil when it is not in the index.
    func textFields(for row: QueryRow) throws(SetteeError) -> [String]? {
        guard analyzer != nil, !row.isDeleted else { return nil }
        if let condition, !(try condition.evaluate(row, parameters: [:])).isTrue { return nil }
        var fields: [String] = []
        var any = false
        for e in expressions {
            // A field that is not a string keeps its place (positions stay those of the
            // expressions' order) but gives no words.
            if case .string(let s)? = try e.evaluate(row, parameters: [:]) {
                fields.append(s)
                any = true
            } else {
                fields.append("")
            }
        }
        return any ? fields : nil
    }
}

/// One entry of a value index (Formats/indexes.md, "Value index entries").
///
/// Key: the collation keys of the values, one after the other (MISSING is a single 0 byte),
/// then the document ID and its length as two bytes, big-endian; so entries sort by values,
/// then document ID. A key over the engine's limit is stored instead as 0 ‖ document ID
/// ("overflow": every scan reads those few and places them itself). Value: the values in their
/// binary form (``IndexValueCoding``), which a covering query reads instead of the document.
struct IndexEntry: Equatable {
    var key: [UInt8]
    var value: [UInt8]

    /// The collation key of the values alone (no document ID): the same bytes grouping and
    /// DISTINCT compare (``QueryExecutor/key(_:)``, MISSING as 0).
    static func valueKey(_ values: ArraySlice<JSONValue?>) throws(SetteeError) -> [UInt8] { try QueryExecutor.key(values) }

    /// An entry as the tree holds it.
    init(stored key: [UInt8], value: [UInt8]) {
        self.key = key
        self.value = value
    }

    /// The entry of a document whose first `keyCount` values are indexed (the key; all of them
    /// when nil) and whose others are covering values (kept in the value only).
    init(values: [JSONValue?], keyCount: Int? = nil, documentID: String) throws(SetteeError) {
        try self.init(values: values, keyCount: keyCount, documentIDBytes: Array(documentID.utf8))
    }

    /// ``init(values:keyCount:documentID:)`` with the ID's UTF-8 (a tree's key).
    init(values: [JSONValue?], keyCount: Int? = nil, documentIDBytes id: [UInt8]) throws(SetteeError) {
        var k = try Self.valueKey(values.prefix(keyCount ?? values.count))
        if k.count + id.count + 2 <= StoreConfiguration.maxKeyLength {
            k.append(contentsOf: id)
            k.append(UInt8(truncatingIfNeeded: id.count >> 8))
            k.append(UInt8(truncatingIfNeeded: id.count))
        } else {
            k = [0] + id
        }
        key = k
        value = try IndexValueCoding.encoded(values)
    }

    /// Whether a stored key is an overflow entry.
    static func isOverflow(_ key: UnsafeRawBufferPointer) -> Bool { key.first == 0 }

    /// The value part and document ID of a stored key; nil when malformed.
    static func split(_ key: UnsafeRawBufferPointer) -> (valueKey: UnsafeRawBufferPointer, documentID: UnsafeRawBufferPointer)? {
        if key.first == 0 { return (UnsafeRawBufferPointer(rebasing: key[1 ..< 1]), UnsafeRawBufferPointer(rebasing: key[1...])) }
        guard key.count >= 3 else { return nil }
        let n = Int(key[key.count - 2]) << 8 | Int(key[key.count - 1])
        guard n > 0, n <= key.count - 3 else { return nil }
        let idStart = key.count - 2 - n
        return (UnsafeRawBufferPointer(rebasing: key[..<idStart]), UnsafeRawBufferPointer(rebasing: key[idStart ..< key.count - 2]))
    }

    /// The values of a stored entry value that `element` asks for, given each one's position
    /// and stored bytes (``IndexValueCoding``; the others, and MISSING ones, nil): a query
    /// decodes only what it reads. With `upTo`, values from that position on are not read (nil).
    static func values(_ value: UnsafeRawBufferPointer, count: Int, upTo: Int? = nil,
                       _ element: (Int, UnsafeRawBufferPointer) -> Bool) throws(SetteeError) -> [JSONValue?] {
        try IndexValueCoding.values(value, count: count, upTo: upTo, element)
    }

    /// Value positions as bits (an entry holds at most 64 values), so a scan asks whether it
    /// reads a value without hashing.
    static func mask(_ slots: Set<Int>) -> UInt64 {
        slots.reduce(0) { $1 >= 0 && $1 < 64 ? $0 | 1 << UInt64($1) : $0 }
    }

    /// Whether the first values of a stored entry value are these elements, byte for byte.
    static func valuesStart(_ value: UnsafeRawBufferPointer, with elements: [[UInt8]]) throws(SetteeError) -> Bool {
        try IndexValueCoding.starts(value, with: elements)
    }

    /// The values of a stored entry value (MISSING as nil).
    static func values(_ value: UnsafeRawBufferPointer, count: Int) throws(SetteeError) -> [JSONValue?] {
        try IndexValueCoding.values(value, count: count)
    }
}

/// The indexes of an open database as writers maintain them, replaced (under the write lock)
/// by each change of the catalog.
struct IndexSet: Sendable {
    var indexes: [CompiledIndex] = []
    /// Indexes whose definition cannot be read, with why (reported by the check).
    var broken: [String: String] = [:]
}

/// The records a value index kept by channel (``IndexDefinition/byChannel``) holds beside its
/// entries (Formats/indexes.md, "Entries by channel"): each entry again under every channel of
/// its document, key `FF 01 ‖ channel ‖ 00 ‖ entry key`, the entry's value; so a scan of one
/// channel reads that channel's entries in the index's order. A document whose entry is an
/// overflow one, or whose key with a channel would be over the engine's limit, is listed
/// instead once, under `FF 00 ‖ document ID` with the entry's value, and a channel scan reads
/// those few and checks each one's routing. Keys starting with FF sort after every value key
/// (whose first byte is a collation tag), so the index's own ranges never reach them.
extension IndexEntry {
    static let channelTag: [UInt8] = [0xFF, 0x01]
    static let channelOverflowTag: [UInt8] = [0xFF, 0x00]

    /// Where one channel's records start.
    static func channelPrefix(_ channel: String) -> [UInt8] { channelTag + Array(channel.utf8) + [0] }

    /// Where a document's back entry is (Formats/indexes.md, "Back entries"): its value is the
    /// key of the document's entry, so a commit finds the entry to replace without reading the
    /// old revision. Every value index has them; `FF 02` sorts after every value key and apart
    /// from the by-channel records.
    static let backTag: [UInt8] = [0xFF, 0x02]

    static func backKey(_ id: String) -> [UInt8] { backTag + Array(id.utf8) }

    /// Whether a stored key is a by-channel record (of either form).
    static func isChannelRecord(_ key: UnsafeRawBufferPointer) -> Bool { key.first == 0xFF }

    /// The by-channel records of a document's entry in `channels` (none without an entry or
    /// without channels).
    static func channelRecords(_ entry: IndexEntry?, id: String, channels: Set<String>) -> [[UInt8]: [UInt8]] {
        guard let entry, !channels.isEmpty else { return [:] }
        if entry.key.first != 0 {
            var out: [[UInt8]: [UInt8]] = [:]
            out.reserveCapacity(channels.count)
            var fits = true
            for c in channels {
                let k = channelPrefix(c) + entry.key
                guard k.count <= StoreConfiguration.maxKeyLength else { fits = false; break }
                out[k] = entry.value
            }
            if fits { return out }
        }
        return [channelOverflowTag + Array(id.utf8): entry.value]
    }
}
