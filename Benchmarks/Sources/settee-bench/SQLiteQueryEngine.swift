import CSQLite3
@_spi(Replication) import Settee

/// The `query` group on SQLite with Couchbase Lite's storage schema and settings (as `SQLiteEngine`:
/// `kv_default` with `key TEXT PRIMARY KEY, sequence, flags, version, body, extra, expiration`, the
/// unique index `kv_default_seqs` on `sequence`, LiteCore's pragmas, `synchronous=NORMAL`), except that
/// `body` holds JSON text rather than Fleece, so `json_extract` reads it. The indexes are expression
/// indexes over `json_extract(body, '$.path')`, as LiteCore's value indexes are over
/// `fl_value(body, 'path')`; the queries use the same expressions so the planner matches them.
/// 1000 documents per transaction, prepared statements through the C API.
///
/// No document is deleted in this group, so the queries leave out LiteCore's `(flags & 1) = 0` test
/// (which would make SQLite read each row an index names).
final class SQLiteQueryEngine: QueryEngine {
    static let name = EngineName.sqlite

    /// Per document: ID, revision ID and JSON body as bytes, and its sequence.
    struct Batch {
        var keys: [[UInt8]] = []
        var versions: [[UInt8]] = []
        var bodies: [[UInt8]] = []
        var sequences: [Int64] = []
    }

    private var db: OpaquePointer?
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?
    private var insertRow: OpaquePointer?
    private var queries: [TaskQuery: OpaquePointer] = [:]

    init(directory: String) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(directory + "/" + SQLiteEngine.fileName, &db, flags, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw EngineError("sqlite3_open_v2: \(message) (\(rc))")
        }
        try execute("""
            PRAGMA page_size=\(SQLiteEngine.pageSize);
            PRAGMA auto_vacuum=incremental;
            PRAGMA journal_mode=WAL;
            PRAGMA cache_size=\(-SQLiteEngine.cacheSizeKiB);
            PRAGMA mmap_size=\(SQLiteEngine.mmapSize);
            PRAGMA journal_size_limit=\(SQLiteEngine.journalSizeLimit);
            PRAGMA synchronous=NORMAL;
            CREATE TABLE IF NOT EXISTS kv_default (key TEXT PRIMARY KEY, sequence INTEGER, \
            flags INTEGER DEFAULT 0, version BLOB, body TEXT, extra BLOB, expiration INTEGER);
            CREATE UNIQUE INDEX IF NOT EXISTS kv_default_seqs ON kv_default (sequence);
            """)
        begin = try prepare("BEGIN")
        commit = try prepare("COMMIT")
        insertRow = try prepare("INSERT INTO kv_default (key, sequence, flags, version, body) VALUES (?, ?, 0, ?, ?)")
    }

    deinit {
        try? close()
    }

    func makeBatch(_ generator: TaskGenerator, _ range: Range<Int>) throws -> Batch {
        var batch = Batch()
        for index in range {
            batch.keys.append(Array(generator.id(of: index).utf8))
            var random = SplitMix64(seed: generator.seed, stream: 0x402, item: UInt64(index))
            let hex = Array("0123456789abcdef".utf8)
            var version = Array("1-".utf8)
            for _ in 0 ..< 2 {
                let word = random.next()
                for shift in stride(from: 60, through: 0, by: -4) { version.append(hex[Int((word >> UInt64(shift)) & 0xF)]) }
            }
            batch.versions.append(version)
            batch.bodies.append(Array(try JSONValue.object(generator.properties(of: index)).jsonText().utf8))
            batch.sequences.append(Int64(index + 1))
        }
        return batch
    }

    func insert(_ batch: Batch) throws {
        try run(begin)
        for n in batch.keys.indices {
            try batch.keys[n].withUnsafeBytes { key in
                try batch.versions[n].withUnsafeBytes { version in
                    try batch.bodies[n].withUnsafeBytes { body in
                        sqlite3_bind_text(insertRow, 1, key.baseAddress?.assumingMemoryBound(to: CChar.self),
                                          Int32(key.count), settee_sqlite_static())
                        sqlite3_bind_int64(insertRow, 2, batch.sequences[n])
                        sqlite3_bind_blob(insertRow, 3, version.baseAddress, Int32(version.count), settee_sqlite_static())
                        sqlite3_bind_text(insertRow, 4, body.baseAddress?.assumingMemoryBound(to: CChar.self),
                                          Int32(body.count), settee_sqlite_static())
                        try run(insertRow)
                    }
                }
            }
        }
        try run(commit)
    }

    func createIndex(_ index: TaskIndex) throws {
        let expressions = index.paths.map { "json_extract(body, '$.\($0)')" }.joined(separator: ", ")
        try execute("CREATE INDEX \(index.rawValue) ON kv_default (\(expressions))")
    }

    /// What `EXPLAIN QUERY PLAN` must say: the index each query searches (or a scan of the table), and no
    /// temporary B-tree for the ORDER BY or GROUP BY.
    private static func expectedPlan(_ query: TaskQuery) -> (must: [String], mustNot: [String]) {
        switch query {
        case .newestTasks: (["SEARCH kv_default USING INDEX tasks"], ["TEMP B-TREE"])
        case .createdRange: (["SEARCH kv_default USING", "INDEX created"], ["TEMP B-TREE"])
        case .unindexedScan: (["SCAN kv_default"], ["INDEX"])
        case .groupCount: (["SEARCH kv_default USING", "INDEX tasks"], ["TEMP B-TREE"])
        }
    }

    func prepareQueries() throws {
        for query in TaskQuery.allCases {
            let plan = try explain(query)
            let (must, mustNot) = Self.expectedPlan(query)
            let missing = must.filter { !plan.contains($0) }, unwanted = mustNot.filter { plan.contains($0) }
            guard missing.isEmpty, unwanted.isEmpty else {
                throw EngineError("sqlite: query \(query.rawValue) is not planned as intended: \(plan)"
                    + (missing.isEmpty ? "" : "\n  lacks: \(missing)") + (unwanted.isEmpty ? "" : "\n  has: \(unwanted)"))
            }
            queries[query] = try prepare(query.sqlite)
        }
    }

    /// `EXPLAIN QUERY PLAN`'s lines.
    func explain(_ query: TaskQuery) throws -> String {
        let statement = try prepare("EXPLAIN QUERY PLAN " + query.sqlite)
        defer { sqlite3_finalize(statement) }
        var lines: [String] = []
        while try step(statement) { lines.append(text(statement, 3)) }
        return lines.joined(separator: "\n")
    }

    private func compiled(_ query: TaskQuery) throws -> OpaquePointer {
        guard let statement = queries[query] else { throw EngineError("sqlite: queries not prepared") }
        return statement
    }

    func newestTasks(list: String) throws -> [TaskRow] {
        let statement = try compiled(.newestTasks)
        defer { sqlite3_reset(statement) }
        // Bound without a copy: the C string lives until the rows are read.
        return try list.withCString { list in
            sqlite3_bind_text(statement, 1, list, -1, settee_sqlite_static())
            var rows: [TaskRow] = []
            while try step(statement) { rows.append(TaskRow(id: text(statement, 0), title: text(statement, 1))) }
            return rows
        }
    }

    func countCreated(from: Int64, through: Int64) throws -> Int {
        let statement = try compiled(.createdRange)
        defer { sqlite3_reset(statement) }
        sqlite3_bind_int64(statement, 1, from)
        sqlite3_bind_int64(statement, 2, through)
        guard try step(statement) else { throw EngineError("sqlite: range-count: no row") }
        return Int(sqlite3_column_int64(statement, 0))
    }

    func priorityThreeIDs() throws -> [String] {
        let statement = try compiled(.unindexedScan)
        defer { sqlite3_reset(statement) }
        var ids: [String] = []
        while try step(statement) { ids.append(text(statement, 0)) }
        return ids
    }

    func tasksPerList() throws -> [ListCount] {
        let statement = try compiled(.groupCount)
        defer { sqlite3_reset(statement) }
        var rows: [ListCount] = []
        while try step(statement) { rows.append(ListCount(list: text(statement, 0), count: Int(sqlite3_column_int64(statement, 1)))) }
        return rows
    }

    func close() throws {
        guard db != nil else { return }
        for statement in [begin, commit, insertRow] + queries.values.map(Optional.some) { sqlite3_finalize(statement) }
        queries = [:]
        (begin, commit, insertRow) = (nil, nil, nil)
        let rc = sqlite3_close(db)
        db = nil
        guard rc == SQLITE_OK else { throw EngineError("sqlite: close (\(rc))") }
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
    private func run(_ statement: OpaquePointer?) throws {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw error(rc, String(cString: sqlite3_sql(statement))) }
    }

    /// True with a row, false when done.
    @inline(__always)
    private func step(_ statement: OpaquePointer?) throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let rc: throw error(rc, String(cString: sqlite3_sql(statement)))
        }
    }

    /// A text column as a `String` (empty for NULL).
    @inline(__always)
    private func text(_ statement: OpaquePointer?, _ column: Int32) -> String {
        guard let base = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeRawBufferPointer(start: base, count: count), as: UTF8.self)
    }

    private func error(_ rc: Int32, _ what: String) -> EngineError {
        EngineError("sqlite: \(what): \(String(cString: sqlite3_errmsg(db))) (\(rc))")
    }
}
