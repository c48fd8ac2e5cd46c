import CSQLite3

/// SQLite 3 through its C API with prepared statements, on Couchbase Lite's storage schema and settings.
///
/// Schema and pragmas follow LiteCore's `LiteCore/Storage/SQLiteDataFile.cc` (couchbase-lite-core, read
/// at commit 034564c): page size 4096, `auto_vacuum=incremental`, WAL, `cache_size` = 10 MiB
/// (`kCacheSize`, given to SQLite in KiB as -10240), `mmap_size` = 50 MiB (`kMMapSize`, off Apple
/// platforms), `journal_size_limit` = 5 MiB, and `synchronous=NORMAL` unless the database asks for full
/// sync: NORMAL for the load and FULL for `durable-commit`, as the issue specifies. One row per
/// document in `kv_default` holds the current body; `kv_default_seqs` is the changes feed.
final class SQLiteEngine: Engine {
    static let name = EngineName.sqlite

    static let fileName = "db.sqlite3"
    static let pageSize = 4096
    static let cacheSizeKiB = 10 * 1024
    static let mmapSize = 50 * 1024 * 1024
    static let journalSizeLimit = 5 * 1024 * 1024

    private var db: OpaquePointer?
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?
    private var insertRow: OpaquePointer?
    private var selectBody: OpaquePointer?
    private var selectChanges: OpaquePointer?
    private var updateRow: OpaquePointer?
    private var selectRecord: OpaquePointer?
    private var insertRecord: OpaquePointer?
    private var updateRecord: OpaquePointer?
    private var selectTrees: OpaquePointer?
    private var updateTree: OpaquePointer?
    private let tree = RecordBuffer(capacity: 512)
    private let version = RecordBuffer(capacity: 32)

    init(directory: String, documentCount: Int) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(directory + "/" + Self.fileName, &db, flags, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw EngineError("sqlite3_open_v2: \(message) (\(rc))")
        }
        // page_size and auto_vacuum only take effect before the first table is created.
        try execute("""
            PRAGMA page_size=\(Self.pageSize);
            PRAGMA auto_vacuum=incremental;
            PRAGMA journal_mode=WAL;
            PRAGMA cache_size=\(-Self.cacheSizeKiB);
            PRAGMA mmap_size=\(Self.mmapSize);
            PRAGMA journal_size_limit=\(Self.journalSizeLimit);
            PRAGMA synchronous=NORMAL;
            CREATE TABLE IF NOT EXISTS kv_default (key TEXT PRIMARY KEY, sequence INTEGER, \
            flags INTEGER DEFAULT 0, version BLOB, body BLOB, extra BLOB, expiration INTEGER);
            CREATE UNIQUE INDEX IF NOT EXISTS kv_default_seqs ON kv_default (sequence);
            """)
        begin = try prepare("BEGIN")
        commit = try prepare("COMMIT")
        insertRow = try prepare("INSERT INTO kv_default (key, sequence, flags, version, body) VALUES (?, ?, 0, ?, ?)")
        selectBody = try prepare("SELECT body FROM kv_default WHERE key = ?")
        selectChanges = try prepare("SELECT key, version, body FROM kv_default WHERE sequence > ? ORDER BY sequence")
        updateRow = try prepare("UPDATE kv_default SET sequence = ?, version = ?, body = ? WHERE key = ?")
        selectRecord = try prepare("SELECT sequence, flags, version, body, extra FROM kv_default WHERE key = ?")
        insertRecord = try prepare(
            "INSERT INTO kv_default (key, sequence, flags, version, body, extra) VALUES (?, ?, 0, ?, ?, ?)")
        updateRecord = try prepare("UPDATE kv_default SET sequence = ?, version = ?, body = ?, extra = ? WHERE key = ?")
        selectTrees = try prepare("SELECT rowid, extra FROM kv_default WHERE rowid > ? ORDER BY rowid LIMIT ?")
        updateTree = try prepare("UPDATE kv_default SET extra = ? WHERE rowid = ?")
    }

    deinit {
        try? close()
    }

    // MARK: - Workloads

    func insert(_ batch: DocumentBatch) throws {
        try run(begin)
        for document in batch {
            bindText(insertRow, 1, document.key)
            sqlite3_bind_int64(insertRow, 2, Int64(document.sequence))
            bindBlob(insertRow, 3, document.version)
            bindBlob(insertRow, 4, document.body)
            try run(insertRow)
        }
        try run(commit)
    }

    func get(_ key: UnsafeRawBufferPointer, into sink: ReadSink) throws -> Bool {
        defer { sqlite3_reset(selectBody) }
        bindText(selectBody, 1, key)
        switch sqlite3_step(selectBody) {
        case SQLITE_ROW:
            sink.acceptBody(column(selectBody, 0))
            return true
        case SQLITE_DONE:
            return false
        case let rc:
            throw error(rc, "SELECT body")
        }
    }

    func scanChanges(into sink: ReadSink) throws {
        defer { sqlite3_reset(selectChanges) }
        sqlite3_bind_int64(selectChanges, 1, 0)
        while true {
            switch sqlite3_step(selectChanges) {
            case SQLITE_ROW:
                sink.acceptChange(key: column(selectChanges, 0), version: column(selectChanges, 1),
                                  body: column(selectChanges, 2))
            case SQLITE_DONE:
                return
            case let rc:
                throw error(rc, "SELECT changes")
            }
        }
    }

    func prepareForDurableCommits() throws {
        try execute("PRAGMA synchronous=FULL")
    }

    func update(_ document: Document) throws {
        try run(begin)
        sqlite3_bind_int64(updateRow, 1, Int64(document.sequence))
        bindBlob(updateRow, 2, document.version)
        bindBlob(updateRow, 3, document.body)
        bindText(updateRow, 4, document.key)
        try run(updateRow)
        guard sqlite3_changes(db) == 1 else {
            try execute("ROLLBACK")
            throw EngineError("sqlite: the document to update is missing")
        }
        try run(commit)
    }

    static let storesRevisionTrees = true

    /// As LiteCore stores a replicated revision in a revision-tree document: the record read whole first
    /// (to add to its tree; absent here), the tree rebuilt and encoded (`RawRevTree`) into `extra`, the
    /// current revision ID (compact binary) into `version`, the body into `body`.
    func insertReplicated(_ batch: ReplicatedBatch) throws {
        try run(begin)
        for document in batch {
            bindText(selectRecord, 1, document.key)
            let rc = sqlite3_step(selectRecord)
            sqlite3_reset(selectRecord)
            guard rc == SQLITE_DONE else {
                throw rc == SQLITE_ROW ? EngineError("sqlite: rev-insert found an existing document")
                    : error(rc, "SELECT record")
            }
            tree.reset()
            version.reset()
            try RawRevTree.encode(document, tree: tree, version: version)
            bindText(insertRecord, 1, document.key)
            sqlite3_bind_int64(insertRecord, 2, Int64(document.sequence))
            bindBlob(insertRecord, 3, version.bytes)
            bindBlob(insertRecord, 4, document.body)
            bindBlob(insertRecord, 5, tree.bytes)
            try run(insertRecord)
        }
        try run(commit)
    }

    func replicatedDocument(_ key: UnsafeRawBufferPointer) throws -> (history: [[UInt8]], body: [UInt8])? {
        defer { sqlite3_reset(selectRecord) }
        bindText(selectRecord, 1, key)
        switch sqlite3_step(selectRecord) {
        case SQLITE_ROW:
            guard let history = RawRevTree.decodeHistory(column(selectRecord, 4)) else {
                throw EngineError("sqlite: malformed revision tree")
            }
            return (history, Array(column(selectRecord, 3)))
        case SQLITE_DONE:
            return nil
        case let rc:
            throw error(rc, "SELECT record")
        }
    }

    static let compactsHistory = true

    /// As LiteCore saves a revision of a revision-tree document (`RevTreeRecord`): generation 1 inserts the
    /// row with a one-revision tree; later generations read the whole row, add the new revision to the tree
    /// as its current leaf, move the old current body from `body` into the tree (`kHasData`), and write the
    /// row back with the new sequence, version, body and tree. One transaction per batch.
    func saveHistory(_ batch: HistoryBatch) throws {
        try run(begin)
        for document in batch {
            tree.reset()
            version.reset()
            if batch.generation == 1 {
                try RawRevTree.encodeFirst(document.version, tree: tree, version: version)
                bindText(insertRecord, 1, document.key)
                sqlite3_bind_int64(insertRecord, 2, Int64(document.sequence))
                bindBlob(insertRecord, 3, version.bytes)
                bindBlob(insertRecord, 4, document.body)
                bindBlob(insertRecord, 5, tree.bytes)
                try run(insertRecord)
                continue
            }
            bindText(selectRecord, 1, document.key)
            let rc = sqlite3_step(selectRecord)
            guard rc == SQLITE_ROW else {
                sqlite3_reset(selectRecord)
                throw rc == SQLITE_DONE ? EngineError("sqlite: compaction: a document to update is missing")
                    : error(rc, "SELECT record")
            }
            do {
                defer { sqlite3_reset(selectRecord) }
                try RawRevTree.encodeUpdate(previous: column(selectRecord, 4),
                                            previousSequence: UInt64(sqlite3_column_int64(selectRecord, 0)),
                                            previousBody: column(selectRecord, 3), revisionID: document.version,
                                            tree: tree, version: version)
            }
            sqlite3_bind_int64(updateRecord, 1, Int64(document.sequence))
            bindBlob(updateRecord, 2, version.bytes)
            bindBlob(updateRecord, 3, document.body)
            bindBlob(updateRecord, 4, tree.bytes)
            bindText(updateRecord, 5, document.key)
            try run(updateRecord)
        }
        try run(commit)
    }

    /// Rows per transaction when pruning.
    static let pruneBatch = 1000

    /// Every row's tree rewritten without old bodies: 1000 rows per transaction, in rowid order (`SELECT
    /// rowid, extra … WHERE rowid > ? ORDER BY rowid LIMIT 1000`, the trees pruned in memory, then `UPDATE
    /// kv_default SET extra = ? WHERE rowid = ?` per row that had a body to drop).
    func pruneOldBodies() throws {
        let pruned = RecordBuffer(capacity: Self.pruneBatch * 256)
        var rows: [(rowid: Int64, end: Int)] = []
        rows.reserveCapacity(Self.pruneBatch)
        var after: Int64 = 0
        while true {
            try run(begin)
            pruned.reset()
            rows.removeAll(keepingCapacity: true)
            var seen = 0
            sqlite3_bind_int64(selectTrees, 1, after)
            sqlite3_bind_int64(selectTrees, 2, Int64(Self.pruneBatch))
            do {
                defer { sqlite3_reset(selectTrees) }
                while true {
                    let rc = sqlite3_step(selectTrees)
                    if rc == SQLITE_DONE { break }
                    guard rc == SQLITE_ROW else { throw error(rc, "SELECT rowid, extra") }
                    seen += 1
                    after = sqlite3_column_int64(selectTrees, 0)
                    if try RawRevTree.pruneBodies(column(selectTrees, 1), into: pruned) {
                        rows.append((after, pruned.count))
                    }
                }
            }
            var start = 0
            for row in rows {
                bindBlob(updateTree, 1, UnsafeRawBufferPointer(rebasing: pruned.bytes[start ..< row.end]))
                sqlite3_bind_int64(updateTree, 2, row.rowid)
                try run(updateTree)
                start = row.end
            }
            try run(commit)
            if seen < Self.pruneBatch { return }
        }
    }

    /// `VACUUM`, then `PRAGMA wal_checkpoint(TRUNCATE)` (in WAL mode VACUUM writes the new content through
    /// the WAL; the checkpoint puts it in the database file and empties the WAL, as LiteCore's compaction does
    /// after vacuuming).
    func vacuum() throws {
        try execute("VACUUM")
        try execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    func historyDocument(_ key: UnsafeRawBufferPointer) throws
        -> (revisions: [(revisionID: [UInt8], body: [UInt8]?)], body: [UInt8])? {
        defer { sqlite3_reset(selectRecord) }
        bindText(selectRecord, 1, key)
        switch sqlite3_step(selectRecord) {
        case SQLITE_ROW:
            return (try RawRevTree.decodeRevisions(column(selectRecord, 4)), Array(column(selectRecord, 3)))
        case SQLITE_DONE:
            return nil
        case let rc:
            throw error(rc, "SELECT record")
        }
    }

    func close() throws {
        guard db != nil else { return }
        // Fold the WAL into the database file so the footprint is the database's own.
        try execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for statement in [begin, commit, insertRow, selectBody, selectChanges, updateRow, selectRecord, insertRecord,
                          updateRecord, selectTrees, updateTree] {
            sqlite3_finalize(statement)
        }
        (begin, commit, insertRow, selectBody, selectChanges, updateRow) = (nil, nil, nil, nil, nil, nil)
        (selectRecord, insertRecord, updateRecord, selectTrees, updateTree) = (nil, nil, nil, nil, nil)
        let rc = sqlite3_close(db)
        guard rc == SQLITE_OK else { throw error(rc, "sqlite3_close") }
        db = nil
    }

    static func footprint(of directory: String) throws -> Int {
        Files.size(of: [fileName, fileName + "-wal", fileName + "-shm"], in: directory)
    }

    static func note(for workload: Workload) -> String {
        switch workload {
        case .bulkLoad: "WAL, synchronous=NORMAL: no sync at commit, only at checkpoints"
        case .fileSize: "db + -wal + -shm after wal_checkpoint(TRUNCATE) and close"
        case .pointGet: "autocommit SELECT (step/reset) per get; cache 10 MiB, mmap 50 MiB"
        case .changesScan: "one SELECT ordered by the sequence index"
        case .durableCommit: "WAL, synchronous=FULL: fdatasync of the WAL per commit"
        case .revInsert: "WAL, synchronous=FULL; per doc SELECT, RawRevTree into extra, INSERT"
        case .expiry, .expiryStall: "n/a: no document expiration"
        case .replicateLocal, .replicateNoop: "n/a: replication is settee-doc only (SetteeReplicator)"
        case .compaction: "WAL, synchronous=NORMAL; old bodies dropped from extra, then VACUUM"
        case .query: "json_extract expression indexes on JSON bodies (QueryBench)"
        case .collections: "two tables and a join on a json_extract expression index (CollectionsBench)"
        }
    }

    static func note(for figure: Figure) -> String {
        switch figure {
        case .input: "size-before ÷ (prune + vacuum); files in the page cache"
        case .seconds: "prune + vacuum"
        case .pruneSeconds: "per row: extra without old bodies, UPDATE; 1000 rows per txn, synchronous=NORMAL"
        case .vacuumSeconds: "VACUUM, then wal_checkpoint(TRUNCATE)"
        case .sizeBefore: "5 revisions per doc, old bodies in extra (kHasData); db + -wal + -shm"
        case .sizeAfter: "db + -wal + -shm after close"
        default: note(for: .compaction)
        }
    }

    // MARK: - C API plumbing

    private func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? ""
            sqlite3_free(message)
            throw EngineError("sqlite: \(text) (\(rc)) in: \(sql)")
        }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        guard rc == SQLITE_OK else { throw error(rc, "prepare \(sql)") }
        return statement
    }

    /// Steps a statement that returns no rows, then resets it.
    @inline(__always)
    private func run(_ statement: OpaquePointer?) throws {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw error(rc, String(cString: sqlite3_sql(statement))) }
    }

    /// Binds without copying: the dataset's bytes outlive the statement's use of them.
    @inline(__always)
    private func bindText(_ statement: OpaquePointer?, _ index: Int32, _ bytes: UnsafeRawBufferPointer) {
        sqlite3_bind_text(statement, index, bytes.baseAddress?.assumingMemoryBound(to: CChar.self),
                          Int32(bytes.count), settee_sqlite_static())
    }

    @inline(__always)
    private func bindBlob(_ statement: OpaquePointer?, _ index: Int32, _ bytes: UnsafeRawBufferPointer) {
        sqlite3_bind_blob(statement, index, bytes.baseAddress, Int32(bytes.count), settee_sqlite_static())
    }

    /// A column's bytes, valid until the next step or reset.
    @inline(__always)
    private func column(_ statement: OpaquePointer?, _ index: Int32) -> UnsafeRawBufferPointer {
        let base = sqlite3_column_blob(statement, index)
        return UnsafeRawBufferPointer(start: base, count: Int(sqlite3_column_bytes(statement, index)))
    }

    private func error(_ rc: Int32, _ what: String) -> EngineError {
        EngineError("sqlite: \(what): \(String(cString: sqlite3_errmsg(db))) (\(rc))")
    }
}
