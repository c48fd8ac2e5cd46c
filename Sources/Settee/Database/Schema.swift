import Foundation
internal import SetteeStorage

/// Names of the engine trees a database uses (Formats/documents.md).
enum TreeName {
    static let byID = "doc.by-id"
    static let bySequence = "doc.by-seq"
    static let conflicts = "doc.conflicts"
    static let local = "doc.local"
    static let meta = "db.meta"
    /// Due time ‖ document ID → nothing: what the expiry sweeper reads in order (format 2).
    static let expiry = "doc.expiry"
    /// Document ID → ``ExpiryRecord`` (format 2).
    static let expiryByID = "doc.expiry-by-id"
    /// Document ID → ``RoutingRecord`` (format 5).
    static let routing = "doc.routing"
    /// Channel ‖ 0 ‖ sequence → channel log entry (format 5).
    static let channels = "doc.channels"
    /// Kind ‖ principal ‖ 0 ‖ SHA-1 of the document ID → grant record (format 5).
    static let grants = "doc.grants"
    /// Index name → ``IndexDefinition`` (format 8); each index's entries are in a tree of its own.
    static let indexCatalog = "idx.catalog"
    /// Scope ‖ 0 ‖ collection → the collection's number (format 11; ``CollectionCatalog``).
    static let collections = "db.collections"

    /// Whether `name` is a collection's by-ID tree (the default collection's or a named one's):
    /// compaction rewrites these document by document.
    static func isByID(_ name: String) -> Bool {
        name == byID || (name.hasPrefix("c") && name.hasSuffix("." + byID) && CollectionCatalog.number(ofTree: name) != nil)
    }

    /// Whether `name` is a collection's counters tree.
    static func isMeta(_ name: String) -> Bool {
        name == meta || (name.hasSuffix("." + meta) && CollectionCatalog.number(ofTree: name) != nil)
    }
}

/// The catalog of named collections (`db.collections`, format 11). A named collection's trees
/// are today's tree names after `c<number>.`, so the default collection keeps the names it
/// always had and a database written before collections is that collection as it is. Numbers
/// are never reused: a deleted collection's trees are emptied, and one created again with the
/// same name gets new ones.
///
/// ```
/// key:   scope UTF-8 | 0 | collection UTF-8
/// value: number u64 (little endian, 1 or more)
/// ```
enum CollectionCatalog {
    static func key(scope: String, collection: String) -> [UInt8] {
        Array(scope.utf8) + [0] + Array(collection.utf8)
    }

    /// The scope and collection of a key; nil when malformed.
    static func names(_ key: [UInt8]) -> (scope: String, collection: String)? {
        guard let zero = key.firstIndex(of: 0), zero > 0, zero < key.count - 1,
              let scope = String(validating: key[..<zero], as: UTF8.self),
              let collection = String(validating: key[(zero + 1)...], as: UTF8.self),
              (try? Database.checkKeyspaceName(scope, of: "scope")) != nil,
              (try? Database.checkKeyspaceName(collection, of: "collection")) != nil,
              !(scope == Scope.defaultScopeName && collection == Collection.defaultCollectionName)
        else { return nil }
        return (scope, collection)
    }

    static func value(number: UInt64) -> [UInt8] { withUnsafeBytes(of: number.littleEndian, Array.init) }

    static func treePrefix(_ number: UInt64) -> String { "c\(number)." }

    /// The collection number a tree name starts with (`c12.doc.by-id` → 12).
    static func number(ofTree name: String) -> UInt64? {
        let u = name.utf8
        guard u.first == UInt8(ascii: "c"), let dot = u.firstIndex(of: UInt8(ascii: ".")) else { return nil }
        let digits = u[u.index(after: u.startIndex) ..< dot]
        guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }

    /// Every entry, in key order.
    static func entries(_ tx: some StoreReading, _ catalog: Tree) throws -> [(key: [UInt8], number: UInt64)] {
        var out: [(key: [UInt8], number: UInt64)] = []
        try tx.forEach(in: catalog, from: nil, reverse: false) { k, v in
            guard v.count == 8 else { throw SetteeError(.corrupted, "a collection catalog entry is malformed") }
            let n = UInt64(littleEndian: v.loadUnaligned(as: UInt64.self))
            guard n >= 1, n < UInt64(UInt32.max) else { throw SetteeError(.corrupted, "a collection number is out of range") }
            out.append((Array(k), n))
            return true
        }
        return out
    }
}

extension WriteTransaction {
    /// Deletes every key of `tree`, a slice at a time (the tree itself stays, empty).
    func removeAll(in tree: Tree) throws {
        while true {
            var keys: [[UInt8]] = []
            try forEach(in: tree, from: nil, reverse: false) { k, _ in
                keys.append(Array(k))
                return keys.count < 8192
            }
            if keys.isEmpty { return }
            for k in keys { _ = try delete(k, in: tree) }
        }
    }
}

/// Keys of the `db.meta` tree.
enum MetaKey {
    static let format = Array("format".utf8)
    static let uuid = Array("uuid".utf8)
    static let lastSequence = Array("seq".utf8)
    static let liveCount = Array("live".utf8)
    /// An estimate of the bytes compaction would reclaim (superseded trees, bodies no longer
    /// kept, purged documents), reset by compaction; drives automatic compaction.
    static let deadBytes = Array("dead".utf8)
    /// The number of the next index tree (`idx.<n>`).
    static let nextIndexTree = Array("idxn".utf8)
    /// The revision tree depth set with ``Database/setMaxRevTreeDepth(_:)`` (8 bytes, little
    /// endian), which then wins over ``DatabaseConfiguration/maxRevTreeDepth``; absent: the
    /// configuration's.
    static let revsLimit = Array("revs".utf8)
    /// The number the next named collection takes (format 11; database-wide, in `db.meta`).
    static let nextCollection = Array("coln".utf8)
}

/// Document-level flags, shared by the by-ID and by-sequence values.
struct DocFlags: OptionSet, Sendable {
    let rawValue: UInt8
    /// The current revision is a tombstone.
    static let deleted = DocFlags(rawValue: 1)
    /// Two or more undeleted leaves.
    static let conflicted = DocFlags(rawValue: 2)
    /// The current revision references blobs.
    static let hasAttachments = DocFlags(rawValue: 4)
    /// More than one leaf (deleted ones included): the changes feed must read the tree.
    static let multipleLeaves = DocFlags(rawValue: 8)
    static let known: UInt8 = 15
}

/// The by-ID value: what a winner lookup needs without decoding the revision tree.
struct DocMeta {
    var flags: DocFlags
    var sequence: UInt64
    var revisionID: String
    /// Where the current revision's body is; 0 for an empty body.
    var bodyRef: UInt64
    /// Where the encoded revision tree is.
    var treeRef: UInt64

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 32 + revisionID.utf8.count)
        w.u8(flags.rawValue)
        w.varint(sequence)
        w.string(revisionID)
        w.u64(bodyRef)
        w.u64(treeRef)
        return w.bytes
    }

    init(flags: DocFlags, sequence: UInt64, revisionID: String, bodyRef: UInt64, treeRef: UInt64) {
        self.flags = flags
        self.sequence = sequence
        self.revisionID = revisionID
        self.bodyRef = bodyRef
        self.treeRef = treeRef
    }

    /// The body and tree refs of an encoded value, which ends with them (compaction rewrites
    /// them without decoding the rest).
    static func refs(in b: UnsafeRawBufferPointer) throws(SetteeError) -> (body: UInt64, tree: UInt64) {
        guard b.count >= 19 else { throw SetteeError(.corrupted, "document metadata is malformed") }
        return (b.loadUnaligned(fromByteOffset: b.count - 16, as: UInt64.self).littleEndian,
                b.loadUnaligned(fromByteOffset: b.count - 8, as: UInt64.self).littleEndian)
    }

    /// Calls `body` with a copy of the encoded value `b` whose refs are replaced.
    static func withRefs<R>(replacedIn b: UnsafeRawBufferPointer, bodyRef: UInt64, treeRef: UInt64,
                            _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        _ = try refs(in: b)
        return try withUnsafeTemporaryAllocation(byteCount: b.count, alignment: 8) { buffer in
            let p = buffer.baseAddress!
            p.copyMemory(from: b.baseAddress!, byteCount: b.count - 16)
            p.storeBytes(of: bodyRef.littleEndian, toByteOffset: b.count - 16, as: UInt64.self)
            p.storeBytes(of: treeRef.littleEndian, toByteOffset: b.count - 8, as: UInt64.self)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    init(decoding b: UnsafeRawBufferPointer) throws(SetteeError) {
        var r = ByteReader(b)
        // The revision ID was checked when it was written and the record is checksummed by the
        // engine; a winner read does not parse it again.
        guard let f = r.u8(), f & ~DocFlags.known == 0, let seq = r.varint(), let rev = r.string(),
              !rev.isEmpty, let body = r.u64(), let tree = r.u64(), r.atEnd
        else { throw SetteeError(.corrupted, "document metadata is malformed") }
        self.init(flags: DocFlags(rawValue: f), sequence: seq, revisionID: rev, bodyRef: body, treeRef: tree)
    }
}

/// The by-sequence value: flags, document ID and current revision ID, so the changes feed reads
/// one tree in order; after them (format 6) the routing the channel logs hold for the document,
/// when it has one. The entry itself holds no routing: the changes feed and the replicator read
/// millions of entries and never need it, and a routing field (three collections) made every
/// entry a copy and a release more.
struct SequenceEntry {
    var flags: DocFlags
    var documentID: String
    var revisionID: String

    func encoded(routing: RevisionRouting? = nil) -> [UInt8] {
        var w = ByteWriter(capacity: 32 + documentID.utf8.count + revisionID.utf8.count)
        w.u8(flags.rawValue)
        w.string(documentID)
        w.string(revisionID)
        if let routing, !routing.isEmpty {
            w.u8(Self.routingMarker)
            routing.encode(into: &w)
        }
        return w.bytes
    }

    /// What precedes the routing: 2 (format 9: grants to users and to roles apart), or 1 in an
    /// entry written before (``RevisionRouting/init(reading:legacy:)``).
    static let routingMarker: UInt8 = 2
    static let legacyRoutingMarker: UInt8 = 1

    init(flags: DocFlags, documentID: String, revisionID: String) {
        self.flags = flags
        self.documentID = documentID
        self.revisionID = revisionID
    }

    /// Decodes an entry, checking only that a routing follows its marker.
    init(decoding b: UnsafeRawBufferPointer) throws(SetteeError) {
        var r = ByteReader(b)
        try self.init(reading: &r)
        guard r.atEnd || [Self.routingMarker, Self.legacyRoutingMarker].contains(r.u8()) else { throw Self.malformed }
    }

    /// Decodes an entry and the routing stored with it (nil when there is none).
    /// `grants: false` reads the routing's channels only.
    static func decodingRouting(_ b: UnsafeRawBufferPointer, grants: Bool = true) throws(SetteeError) -> (entry: SequenceEntry, routing: RevisionRouting?) {
        var r = ByteReader(b)
        let entry = try SequenceEntry(reading: &r)
        if r.atEnd { return (entry, nil) }
        guard let marker = r.u8(), marker == routingMarker || marker == legacyRoutingMarker,
              let routing = RevisionRouting(reading: &r, legacy: marker == legacyRoutingMarker, grants: grants), r.atEnd else { throw malformed }
        return (entry, routing)
    }

    private init(reading r: inout ByteReader) throws(SetteeError) {
        guard let f = r.u8(), f & ~DocFlags.known == 0, let id = r.string(), let rev = r.string() else { throw Self.malformed }
        self.init(flags: DocFlags(rawValue: f), documentID: id, revisionID: rev)
    }

    private static var malformed: SetteeError { SetteeError(.corrupted, "changes entry is malformed") }
}

/// The `doc.expiry-by-id` value: a document's expiration (set by the application) and
/// tombstone-eviction time (set by ``DatabaseConfiguration/tombstoneMaxAge``), in whole seconds
/// since 1970-01-01T00:00:00Z. A document without either has no record.
///
/// ```
/// | flags u8 (1: expiration, 2: eviction) | [expiration u64] | [eviction u64] |
/// ```
struct ExpiryRecord: Equatable {
    var expiration: UInt64?
    var eviction: UInt64?

    init(expiration: UInt64? = nil, eviction: UInt64? = nil) {
        self.expiration = expiration
        self.eviction = eviction
    }

    /// When the document is next due: the earlier of the two times; nil when neither is set.
    var due: UInt64? {
        switch (expiration, eviction) {
        case let (e?, v?): min(e, v)
        case let (e?, nil): e
        case let (nil, v?): v
        case (nil, nil): nil
        }
    }

    var isEmpty: Bool { expiration == nil && eviction == nil }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 17)
        w.u8((expiration == nil ? 0 : 1) | (eviction == nil ? 0 : 2))
        if let expiration { w.u64(expiration) }
        if let eviction { w.u64(eviction) }
        return w.bytes
    }

    init(decoding b: UnsafeRawBufferPointer) throws(SetteeError) {
        var r = ByteReader(b)
        guard let f = r.u8(), f & ~3 == 0, f != 0 else { throw SetteeError(.corrupted, "an expiration record is malformed") }
        var e: UInt64?
        var v: UInt64?
        if f & 1 != 0 {
            guard let x = r.u64() else { throw SetteeError(.corrupted, "an expiration record is malformed") }
            e = x
        }
        if f & 2 != 0 {
            guard let x = r.u64() else { throw SetteeError(.corrupted, "an expiration record is malformed") }
            v = x
        }
        guard r.atEnd else { throw SetteeError(.corrupted, "an expiration record is malformed") }
        self.init(expiration: e, eviction: v)
    }
}

/// Keys of `doc.expiry`: the due time in whole seconds, big-endian (byte order is time order),
/// then the document ID.
enum ExpiryKey {
    static func make(due: UInt64, id key: [UInt8]) -> [UInt8] {
        var k = [UInt8](bigEndian: due)
        k.append(contentsOf: key)
        return k
    }

    /// The due time and document ID of a key; nil when it is malformed.
    static func parse(_ k: UnsafeRawBufferPointer) -> (due: UInt64, id: [UInt8])? {
        guard k.count > 8 else { return nil }
        return (UInt64(bigEndian: k.loadUnaligned(as: UInt64.self)), Array(k[8...]))
    }
}

/// What the library needs from either kind of engine transaction, so reads inside
/// `Database.inBatch(_:)` see the batch's own writes.
protocol StoreReading {
    func withValue<R>(forKey key: UnsafeRawBufferPointer, in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R?
    func withValue<R>(forKey key: [UInt8], in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R?
    func withValue<R>(at ref: ValueRef, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R
    func forEach(in tree: Tree, from start: [UInt8]?, reverse: Bool,
                 _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws
    func count(in tree: Tree) throws -> Int
    func count(in tree: Tree, from start: [UInt8]?, to end: [UInt8]?) throws -> Int
    func cursor(in tree: Tree, from start: [UInt8]?, reverse: Bool) throws -> TreeCursor
    func tree(named name: String) -> Tree?
}

extension ReadTransaction: StoreReading {}
extension WriteTransaction: StoreReading {}

extension SetteeError {
    /// Translates an engine error; anything else passes through.
    static func wrap(_ error: any Error) -> any Error {
        guard let e = error as? StorageError else { return error }
        switch e.code {
        case .locked: return SetteeError(.busy, "the database is open elsewhere (another process or Database instance)")
        case .corrupted:
            let at = e.offset.map { " at offset \($0)" } ?? ""
            return SetteeError(.corrupted, "\(e.reason)\(at)")
        case .io, .poisoned:
            // Which call failed and why, so the message alone says what to look at.
            let call = e.operation.map { "\($0): " } ?? ""
            let number = e.errno.map { " (errno \($0): \(String(cString: strerror($0))))" } ?? ""
            return SetteeError(.io, call + e.reason + number)
        case .noSpace:
            let call = e.operation.map { " (\($0))" } ?? ""
            return SetteeError(.diskFull, "the disk is full: the write was not made; it can be made again once space is freed" + call)
        case .versionMismatch: return SetteeError(.versionMismatch, e.reason)
        case .valueTooLarge: return SetteeError(.tooLarge, e.reason)
        case .closed: return SetteeError(.notOpen, "the database is closed")
        case .invalidValueRef: return SetteeError(.corrupted, e.reason)
        case .invalidKey, .noSuchTree, .invalidArgument: return SetteeError(.invalidParameter, e.reason)
        }
    }
}

/// Runs `body`, turning engine errors into ``SetteeError``.
@inline(__always)
func translating<R>(_ body: () throws -> R) throws -> R {
    do { return try body() } catch { throw SetteeError.wrap(error) }
}
