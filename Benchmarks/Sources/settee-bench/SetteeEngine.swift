import SetteeStorage

/// The Settee storage engine used directly, with the schema the document layer will give it:
///
/// - each document's `[u8 versionLength][version][body]` appended once with `appendValue`;
/// - tree `by-id`: key → `[sequence u64 BE][ref u64 LE]`;
/// - tree `by-seq`: sequence (u64 BE) → `[ref u64 LE][key]`.
///
/// Durability `.synchronous`: every commit is made durable (fdatasync) before `write` returns.
final class SetteeEngine: Engine {
    static let name = EngineName.settee

    /// A `let`, so that calls through it count no reference (as an application holding its store would).
    private let store: Store
    private var closed = false
    private let byID: Tree
    private let bySeq: Tree
    private let record = RecordBuffer()
    private let idValue = RecordBuffer(capacity: 16)
    private let sequenceKey = RecordBuffer(capacity: 8)
    private let sequenceValue = RecordBuffer(capacity: 64)
    private let oldSequenceKey = RecordBuffer(capacity: 8)

    init(directory: String, documentCount: Int) throws {
        var configuration = StoreConfiguration()
        configuration.durability = .synchronous
        let store = try Store(directory: directory + "/db.settee", configuration: configuration)
        (byID, bySeq) = try store.write { tx in
            (try tx.createTree(named: "by-id"), try tx.createTree(named: "by-seq"))
        }
        self.store = store
    }

    deinit {
        try? close()
    }

    // MARK: - Workloads

    func insert(_ batch: DocumentBatch) throws {
        try openStore().write { tx in
            for document in batch {
                try put(document, in: tx)
            }
        }
    }

    func get(_ key: UnsafeRawBufferPointer, into sink: ReadSink) throws -> Bool {
        try openStore().read { tx in
            guard let ref = try tx.withValue(forKey: key, in: byID, Self.decodeIDValue) else { return false }
            try tx.withValue(at: ref) { stored in
                guard let (_, body) = stored.splitVersioned() else { throw EngineError("settee: malformed value") }
                sink.acceptBody(body)
            }
            return true
        }
    }

    func scanChanges(into sink: ReadSink) throws {
        try openStore().read { tx in
            try tx.forEach(in: bySeq) { _, value in
                guard value.count >= 8 else { throw EngineError("settee: malformed by-seq entry") }
                let ref = ValueRef(rawValue: value.littleEndianUInt64(at: 0))
                try tx.withValue(at: ref) { stored in
                    guard let (version, body) = stored.splitVersioned() else {
                        throw EngineError("settee: malformed value")
                    }
                    sink.acceptChange(key: UnsafeRawBufferPointer(rebasing: value[8...]), version: version, body: body)
                }
                return true
            }
        }
    }

    func prepareForDurableCommits() throws {}

    func update(_ document: Document) throws {
        try openStore().write { tx in
            guard let oldSequence = try tx.withValue(forKey: document.key, in: byID, Self.decodeSequence) else {
                throw EngineError("settee: the document to update is missing")
            }
            oldSequenceKey.reset()
            oldSequenceKey.appendBigEndian(oldSequence)
            _ = try tx.delete(oldSequenceKey.bytes, in: bySeq)
            try put(document, in: tx)
        }
    }

    func close() throws {
        guard !closed else { return }
        closed = true
        try store.close()
    }

    static func footprint(of directory: String) throws -> Int {
        try Files.totalSize(of: directory)
    }

    static func note(for workload: Workload) -> String {
        switch workload {
        case .bulkLoad: "durability .synchronous: fdatasync per commit"
        case .fileSize: "every file in the directory after close"
        case .pointGet: "read transaction (snapshot) per get"
        case .changesScan: "one read transaction: by-seq in order, value by ref"
        case .durableCommit: "durability .synchronous: fdatasync per commit"
        case .revInsert: "not run: the storage engine alone has no revision trees"
        case .expiry, .expiryStall: "n/a: no document expiration (document API only)"
        case .replicateLocal, .replicateNoop: "n/a: replication is settee-doc only (SetteeReplicator)"
        case .compaction: "not run: the storage engine alone keeps no revision history"
        case .query: "n/a: query runs on settee-doc and sqlite"
        case .collections: "n/a: collections run on settee-doc and sqlite"
        }
    }

    // MARK: - Records

    /// Appends the document's value and writes its `by-id` and `by-seq` entries.
    private func put(_ document: Document, in tx: WriteTransaction) throws {
        record.reset()
        record.appendVersioned(version: document.version, body: document.body)
        let ref = try tx.appendValue(record.bytes)
        idValue.reset()
        idValue.appendBigEndian(document.sequence)
        idValue.appendLittleEndian(ref.rawValue)
        try tx.put(document.key, idValue.bytes, in: byID)
        sequenceKey.reset()
        sequenceKey.appendBigEndian(document.sequence)
        sequenceValue.reset()
        sequenceValue.appendLittleEndian(ref.rawValue)
        sequenceValue.append(document.key)
        try tx.put(sequenceKey.bytes, sequenceValue.bytes, in: bySeq)
    }

    /// `[sequence u64 BE][ref u64 LE]` → ref.
    private static func decodeIDValue(_ value: UnsafeRawBufferPointer) throws -> ValueRef {
        guard value.count >= 16 else { throw EngineError("settee: malformed by-id entry") }
        return ValueRef(rawValue: value.littleEndianUInt64(at: 8))
    }

    /// `[sequence u64 BE][ref u64 LE]` → sequence.
    private static func decodeSequence(_ value: UnsafeRawBufferPointer) throws -> UInt64 {
        guard value.count >= 16 else { throw EngineError("settee: malformed by-id entry") }
        return value.bigEndianUInt64(at: 0)
    }

    @inline(__always) private func openStore() throws -> Store {
        guard !closed else { throw EngineError("settee: the store is closed") }
        return store
    }
}
