import CLMDB

/// LMDB through its C API, default (synchronous) commits.
///
/// Sub-database `docs`: key → `[sequence u64 BE][u8 versionLength][version][body]`.
/// Sub-database `seq`: sequence (u64 BE) → key, written in the same transaction.
/// Point reads reuse one `MDB_RDONLY` transaction with `mdb_txn_reset`/`mdb_txn_renew` (the environment is
/// opened `MDB_NOTLS` so a reset transaction may be renewed freely).
final class LMDBEngine: Engine {
    static let name = EngineName.lmdb

    private var env: OpaquePointer?
    private var docs = MDB_dbi()
    private var seqs = MDB_dbi()
    private var reader: OpaquePointer?
    private let record = RecordBuffer()
    private let sequenceKey = RecordBuffer(capacity: 8)
    private let oldSequenceKey = RecordBuffer(capacity: 8)
    private let tree = RecordBuffer(capacity: 512)
    private let version = RecordBuffer(capacity: 32)

    /// Generous: the map is only address space; the file grows with the data.
    static func mapSize(documentCount: Int) -> Int {
        (1 << 30) + documentCount * 4096
    }

    init(directory: String, documentCount: Int) throws {
        try check(mdb_env_create(&env), "mdb_env_create")
        do {
            try check(mdb_env_set_maxdbs(env, 2), "mdb_env_set_maxdbs")
            try check(mdb_env_set_mapsize(env, Self.mapSize(documentCount: documentCount)), "mdb_env_set_mapsize")
            try check(mdb_env_open(env, directory, UInt32(MDB_NOTLS), 0o644), "mdb_env_open")
            let txn = try beginWrite()
            do {
                try check(mdb_dbi_open(txn, "docs", UInt32(MDB_CREATE), &docs), "mdb_dbi_open docs")
                try check(mdb_dbi_open(txn, "seq", UInt32(MDB_CREATE), &seqs), "mdb_dbi_open seq")
                try check(mdb_txn_commit(txn), "mdb_txn_commit")
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &reader), "mdb_txn_begin read-only")
            mdb_txn_reset(reader)
        } catch {
            mdb_env_close(env)
            env = nil
            throw error
        }
    }

    deinit {
        try? close()
    }

    // MARK: - Workloads

    func insert(_ batch: DocumentBatch) throws {
        try writeTransaction { txn in
            for document in batch {
                try put(document, in: txn)
            }
        }
    }

    func get(_ key: UnsafeRawBufferPointer, into sink: ReadSink) throws -> Bool {
        try check(mdb_txn_renew(reader), "mdb_txn_renew")
        defer { mdb_txn_reset(reader) }
        guard let value = try lookUp(key, in: docs, txn: reader) else { return false }
        guard let (_, body) = Self.decodeDocument(value) else { throw EngineError("lmdb: malformed record") }
        sink.acceptBody(body)
        return true
    }

    func scanChanges(into sink: ReadSink) throws {
        try check(mdb_txn_renew(reader), "mdb_txn_renew")
        defer { mdb_txn_reset(reader) }
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(reader, seqs, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var sequence = MDB_val()
        var key = MDB_val()
        var rc = mdb_cursor_get(cursor, &sequence, &key, MDB_FIRST)
        while rc == MDB_SUCCESS {
            let keyBytes = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
            guard let value = try lookUp(keyBytes, in: docs, txn: reader),
                  let (version, body) = Self.decodeDocument(value)
            else { throw EngineError("lmdb: the sequence index names a missing document") }
            sink.acceptChange(key: keyBytes, version: version, body: body)
            rc = mdb_cursor_get(cursor, &sequence, &key, MDB_NEXT)
        }
        guard rc == MDB_NOTFOUND else { throw Self.error(rc, "mdb_cursor_get") }
    }

    func prepareForDurableCommits() throws {}

    func update(_ document: Document) throws {
        try writeTransaction { txn in
            guard let old = try lookUp(document.key, in: docs, txn: txn), old.count >= 8 else {
                throw EngineError("lmdb: the document to update is missing")
            }
            oldSequenceKey.reset()
            oldSequenceKey.append(UnsafeRawBufferPointer(rebasing: old[0 ..< 8]))
            var oldKey = Self.value(oldSequenceKey.bytes)
            try check(mdb_del(txn, seqs, &oldKey, nil), "mdb_del seq")
            try put(document, in: txn)
        }
    }

    static let storesRevisionTrees = true

    /// Per document: a lookup in `docs` (absent here), the tree encoded as LiteCore does (`RawRevTree`),
    /// then `docs`: key → `[sequence u64 BE][u8 versionLength][version (compact)][u32 LE treeLength][tree][body]`
    /// and `seq`: sequence → key, in one transaction.
    func insertReplicated(_ batch: ReplicatedBatch) throws {
        try writeTransaction { txn in
            for document in batch {
                guard try lookUp(document.key, in: docs, txn: txn) == nil else {
                    throw EngineError("lmdb: rev-insert found an existing document")
                }
                tree.reset()
                version.reset()
                try RawRevTree.encode(document, tree: tree, version: version)
                record.reset()
                record.appendBigEndian(document.sequence)
                record.appendByte(UInt8(version.count))
                record.append(version.bytes)
                record.appendLittleEndian32(UInt32(tree.count))
                record.append(tree.bytes)
                record.append(document.body)
                sequenceKey.reset()
                sequenceKey.appendBigEndian(document.sequence)
                var key = Self.value(document.key)
                var value = Self.value(record.bytes)
                try check(mdb_put(txn, docs, &key, &value, 0), "mdb_put docs")
                var sequence = Self.value(sequenceKey.bytes)
                try check(mdb_put(txn, seqs, &sequence, &key, 0), "mdb_put seq")
            }
        }
    }

    func replicatedDocument(_ key: UnsafeRawBufferPointer) throws -> (history: [[UInt8]], body: [UInt8])? {
        try check(mdb_txn_renew(reader), "mdb_txn_renew")
        defer { mdb_txn_reset(reader) }
        guard let value = try lookUp(key, in: docs, txn: reader) else { return nil }
        guard value.count >= 9 else { throw EngineError("lmdb: malformed record") }
        let treeAt = 9 + Int(value[8])
        guard value.count >= treeAt + 4 else { throw EngineError("lmdb: malformed record") }
        let treeLength = Int(UInt32(littleEndian: value.loadUnaligned(fromByteOffset: treeAt, as: UInt32.self)))
        guard value.count >= treeAt + 4 + treeLength,
              let history = RawRevTree.decodeHistory(UnsafeRawBufferPointer(rebasing: value[(treeAt + 4) ..< (treeAt + 4 + treeLength)]))
        else { throw EngineError("lmdb: malformed record") }
        return (history, Array(value[(treeAt + 4 + treeLength)...]))
    }

    func close() throws {
        guard env != nil else { return }
        mdb_txn_abort(reader)
        reader = nil
        mdb_env_close(env)
        env = nil
    }

    static func footprint(of directory: String) throws -> Int {
        Files.size(of: ["data.mdb"], in: directory)
    }

    static func note(for workload: Workload) -> String {
        switch workload {
        case .bulkLoad: "default sync: fdatasync + O_DSYNC meta write per commit"
        case .fileSize: "data.mdb after mdb_env_close (lock.mdb not counted)"
        case .pointGet: "MDB_RDONLY txn renew/reset per get"
        case .changesScan: "one read txn: cursor over seq, get in docs"
        case .durableCommit: "default sync: fdatasync + O_DSYNC meta write per commit"
        case .revInsert: "default sync; per doc get, RawRevTree + body in docs, seq entry"
        case .expiry, .expiryStall: "n/a: no document expiration"
        case .replicateLocal, .replicateNoop: "n/a: replication is settee-doc only (SetteeReplicator)"
        case .compaction: "not run: settee-doc against SQLite's LiteCore layout only"
        case .query: "n/a: query runs on settee-doc and sqlite"
        case .collections: "n/a: collections run on settee-doc and sqlite"
        }
    }

    // MARK: - Records

    /// Writes a document's record in `docs` and its entry in `seq`.
    private func put(_ document: Document, in txn: OpaquePointer?) throws {
        record.reset()
        record.appendBigEndian(document.sequence)
        record.appendVersioned(version: document.version, body: document.body)
        sequenceKey.reset()
        sequenceKey.appendBigEndian(document.sequence)
        var key = Self.value(document.key)
        var value = Self.value(record.bytes)
        try check(mdb_put(txn, docs, &key, &value, 0), "mdb_put docs")
        var sequence = Self.value(sequenceKey.bytes)
        try check(mdb_put(txn, seqs, &sequence, &key, 0), "mdb_put seq")
    }

    /// `[sequence u64 BE][u8 versionLength][version][body]` → version, body.
    private static func decodeDocument(_ value: UnsafeRawBufferPointer)
        -> (version: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer)?
    {
        guard value.count >= 9 else { return nil }
        return UnsafeRawBufferPointer(rebasing: value[8...]).splitVersioned()
    }

    // MARK: - C API plumbing

    private func beginWrite() throws -> OpaquePointer? {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        return txn
    }

    /// Runs `body` in a write transaction and commits it (durably: the environment has no MDB_NOSYNC).
    @inline(__always)
    private func writeTransaction(_ body: (OpaquePointer?) throws -> Void) throws {
        let txn = try beginWrite()
        do {
            try body(txn)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    /// The value at `key`, a view of the map valid until the transaction ends or writes.
    @inline(__always)
    private func lookUp(_ key: UnsafeRawBufferPointer, in dbi: MDB_dbi, txn: OpaquePointer?) throws
        -> UnsafeRawBufferPointer?
    {
        var mdbKey = Self.value(key)
        var data = MDB_val()
        let rc = mdb_get(txn, dbi, &mdbKey, &data)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get")
        return UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)
    }

    /// LMDB takes input buffers as mutable pointers but does not write through them.
    @inline(__always)
    private static func value(_ bytes: UnsafeRawBufferPointer) -> MDB_val {
        MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }

    @inline(__always)
    private func check(_ rc: Int32, _ what: String) throws {
        guard rc == MDB_SUCCESS else { throw Self.error(rc, what) }
    }

    private static func error(_ rc: Int32, _ what: String) -> EngineError {
        EngineError("lmdb: \(what): \(String(cString: mdb_strerror(rc))) (\(rc))")
    }
}
