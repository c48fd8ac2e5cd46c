import CSQLite3
import Foundation
import Testing
@testable import Settee

/// Generated queries over generated documents, run by Settee and by SQLite's JSON functions on
/// the same data, with equal results asserted wherever the two languages agree
/// (`Formats/collation.md` lists where they do not: booleans are numbers in SQLite, strings
/// order by code point there, and SQLite has one NULL where SQL++ has MISSING and NULL).
///
/// `SETTEE_QUERY_DIFFERENTIAL=N` runs N queries (CI runs a short round); the seed is printed and
/// `SETTEE_QUERY_SEED` replays one.
@Suite struct QueryDifferentialTests {
    @Test func setteeAndSQLiteAgree() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["SETTEE_QUERY_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0 ... .max)
        let queries = env["SETTEE_QUERY_DIFFERENTIAL"].flatMap { Int($0) } ?? 300
        print("QueryDifferentialTests seed \(seed), \(queries) queries")
        var generator = SeededGenerator(seed: seed)
        func below(_ n: Int) -> Int { Int(generator.next(below: UInt64(n))) }
        let letters = ["a", "b", "c", "ab", "ba", "abc", "b", ""]

        // Documents: `n` a number, a digit string, null or missing; `s` a lowercase string, null
        // or missing; `c.d` a number under an object that may be missing; `f` a boolean.
        var documents: [(String, [String: JSONValue])] = []
        for i in 0 ..< 200 {
            var p: [String: JSONValue] = [:]
            switch below(6) {
            case 0: break
            case 1: p["n"] = .null
            case 2: p["n"] = .string(String(below(20)))
            case 3: p["n"] = .double(Double(below(40)) / 4 - 5)
            default: p["n"] = .int(Int64(below(11)) - 5)
            }
            switch below(5) {
            case 0: break
            case 1: p["s"] = .null
            default: p["s"] = .string(letters[below(letters.count)])
            }
            if below(4) != 0 { p["c"] = below(5) == 0 ? ["e": 1] : ["d": .int(Int64(below(7)))] }
            if below(3) != 0 { p["f"] = .bool(below(2) == 0) }
            documents.append((String(format: "doc-%03d", i), p))
        }

        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        var sqlite: OpaquePointer?
        guard sqlite3_open(":memory:", &sqlite) == SQLITE_OK, let sqlite else { Issue.record("sqlite3_open"); return }
        defer { sqlite3_close(sqlite) }
        try exec(sqlite, "CREATE TABLE docs (id TEXT PRIMARY KEY, body TEXT)")
        for (id, p) in documents {
            try db.saveDocument(MutableDocument(id: id, data: p))
            let json = String(decoding: try JSONValue.object(p).jsonBytes(), as: UTF8.self)
            try exec(sqlite, "INSERT INTO docs VALUES ('\(id)', '\(json.replacingOccurrences(of: "'", with: "''"))')")
        }

        // A predicate in both languages; `prefix` qualifies Settee's paths (`t.`).
        var prefix = ""
        func atom() -> (String, String) {
            let ops = ["=", "!=", "<", "<=", ">", ">="]
            switch below(7) {
            case 0, 1:
                let op = ops[below(ops.count)]
                let v = String(below(11) - 5) + (below(3) == 0 ? ".5" : "")
                return ("\(prefix)n \(op) \(v)", "json_extract(body, '$.n') \(op) \(v)")
            case 2:
                // Strings of lowercase letters order the same by code point and by ICU.
                let op = ops[below(ops.count)]
                let v = letters[below(letters.count)]
                return ("\(prefix)s \(op) '\(v)'", "json_extract(body, '$.s') \(op) '\(v)'")
            case 3:
                let op = ops[below(ops.count)]
                let v = below(7)
                return ("\(prefix)c.d \(op) \(v)", "json_extract(body, '$.c.d') \(op) \(v)")
            case 4:
                let path = ["n", "s", "c", "c.d", "f"][below(5)]
                switch below(3) {
                case 0: return ("\(prefix)\(path) IS MISSING", "json_type(body, '$.\(path)') IS NULL")
                case 1: return ("\(prefix)\(path) IS NULL", "json_type(body, '$.\(path)') = 'null'")
                default: return ("\(prefix)\(path) IS VALUED", "coalesce(json_type(body, '$.\(path)') != 'null', 0)")
                }
            case 5:
                let b = below(2) == 0
                return ("\(prefix)f = \(b)", "json_type(body, '$.f') = '\(b)'")
            default:
                let low = below(6) - 5, high = low + below(6)
                return ("\(prefix)n BETWEEN \(low) AND \(high)", "json_extract(body, '$.n') BETWEEN \(low) AND \(high)")
            }
        }
        func predicate(_ depth: Int) -> (String, String) {
            guard depth < 3, below(3) != 0 else { return atom() }
            switch below(3) {
            case 0:
                let (a, b) = (predicate(depth + 1), predicate(depth + 1))
                return ("(\(a.0) AND \(b.0))", "(\(a.1) AND \(b.1))")
            case 1:
                let (a, b) = (predicate(depth + 1), predicate(depth + 1))
                return ("(\(a.0) OR \(b.0))", "(\(a.1) OR \(b.1))")
            default:
                let a = predicate(depth + 1)
                return ("NOT (\(a.0))", "NOT (\(a.1))")
            }
        }

        // Indexes on Settee's side: the planner reads them wherever they serve a query, and
        // the answers must not change.
        try db.createIndex(ValueIndexConfiguration(["n"]), name: "n")
        try db.createIndex(ValueIndexConfiguration(["s", "n"]), name: "s-n")
        try db.createIndex(ValueIndexConfiguration(["c.d"], where: "f = TRUE"), name: "cd-f")
        var indexed = 0

        var disagreements = 0
        for q in 0 ..< queries where disagreements < 5 {
            let (ours, theirs) = predicate(0)
            let settee: [[JSONValue?]]
            let reference: [[String]]
            switch below(3) {
            case 0:
                // Numbers ordered, ties by ID; only rows whose n is a number (SQLite's NULL is
                // both MISSING and NULL, and its strings follow numbers as ours do).
                settee = try query(db, indexed: &indexed, "SELECT META().id FROM _ WHERE (\(ours)) AND n < '' ORDER BY n DESC, META().id")
                reference = try rows(sqlite, """
                    SELECT id FROM docs WHERE (\(theirs)) AND json_type(body, '$.n') IN ('integer', 'real')
                    ORDER BY json_extract(body, '$.n') DESC, id
                    """)
            case 1:
                settee = try query(db, indexed: &indexed, "SELECT count(*), count(c.d), sum(c.d), min(c.d), max(c.d) FROM _ WHERE \(ours)")
                reference = try rows(sqlite, """
                    SELECT count(*), count(json_extract(body, '$.c.d')), sum(json_extract(body, '$.c.d')),
                           min(json_extract(body, '$.c.d')), max(json_extract(body, '$.c.d')) FROM docs WHERE \(theirs)
                    """)
            default:
                settee = try query(db, indexed: &indexed, "SELECT META().id FROM _ WHERE \(ours) ORDER BY META().id")
                reference = try rows(sqlite, "SELECT id FROM docs WHERE \(theirs) ORDER BY id")
            }
            let mine = settee.map { $0.map(Self.text) }
            if mine != reference {
                disagreements += 1
                Issue.record("seed \(seed), query \(q): \(ours)\n  settee \(mine.prefix(10))\n  sqlite \(reference.prefix(10))")
            }
        }
        #expect(queries < 100 || indexed > queries / 20, "seed \(seed): only \(indexed) of \(queries) queries read an index")

        // Joins: the same documents as tasks of collection store.tasks, each with `lk`, a list's
        // key (an integer, a digit string, null or missing); lists with `k` (keys repeat, so a
        // task may match several lists), joined as SQLite joins its two tables.
        let tasks = try db.createCollection(name: "tasks", scope: "store")
        let lists = try db.createCollection(name: "lists", scope: "store")
        try exec(sqlite, "CREATE TABLE tasks (id TEXT PRIMARY KEY, body TEXT)")
        try exec(sqlite, "CREATE TABLE lists (id TEXT PRIMARY KEY, body TEXT)")
        func key() -> JSONValue? {
            switch below(8) {
            case 0: return nil
            case 1: return .null
            case 2: return .string(String(below(6)))
            default: return .int(Int64(below(12)))
            }
        }
        for (id, p) in documents {
            var t = p
            t["lk"] = key()
            switch below(6) {
            case 0: break
            case 1: t["lid"] = .null
            case 2: t["lid"] = .int(Int64(below(15)))
            default: t["lid"] = .string(String(format: "list-%02d", below(18)))
            }
            try tasks.save(document: MutableDocument(id: id, data: t))
            let json = String(decoding: try JSONValue.object(t).jsonBytes(), as: UTF8.self)
            try exec(sqlite, "INSERT INTO tasks VALUES ('\(id)', '\(json.replacingOccurrences(of: "'", with: "''"))')")
        }
        for i in 0 ..< 15 {
            var l: [String: JSONValue] = ["name": .string("list \(i)")]
            l["k"] = key()
            let id = String(format: "list-%02d", i)
            try lists.save(document: MutableDocument(id: id, data: l))
            let json = String(decoding: try JSONValue.object(l).jsonBytes(), as: UTF8.self)
            try exec(sqlite, "INSERT INTO lists VALUES ('\(id)', '\(json.replacingOccurrences(of: "'", with: "''"))')")
        }
        // Indexes the joins probe (each join query also runs without them): a task's `lk`
        // covered, a list's `k`.
        try tasks.createIndex(withName: "lk", config: ValueIndexConfiguration(["lk", "n"]))
        try lists.createIndex(withName: "k", config: ValueIndexConfiguration(["k"]))
        let on = ("ON l.k = t.lk", "ON json_extract(l.body, '$.k') = json_extract(t.body, '$.lk')")
        for q in 0 ..< max(1, queries / 3) where disagreements < 5 {
            // The predicate reads the task's properties: named `t.` where tasks are not the first source.
            let kind = below(4)
            prefix = kind == 3 ? "t." : ""
            let (ours, given) = predicate(0)
            prefix = ""
            let theirs = given.replacingOccurrences(of: "(body,", with: "(t.body,")
            let settee: [[JSONValue?]]
            let reference: [[String]]
            switch kind {
            case 0:
                settee = try query(db, indexed: &indexed, """
                    SELECT META(t).id, META(l).id FROM store.tasks t JOIN store.lists l \(on.0) WHERE \(ours) ORDER BY META(t).id, META(l).id
                    """)
                reference = try rows(sqlite, "SELECT t.id, l.id FROM tasks t JOIN lists l \(on.1) WHERE \(theirs) ORDER BY t.id, l.id")
            case 1:
                settee = try query(db, indexed: &indexed, """
                    SELECT META(t).id, META(l).id FROM store.tasks t LEFT JOIN store.lists l \(on.0) WHERE \(ours) ORDER BY META(t).id, META(l).id
                    """)
                reference = try rows(sqlite, "SELECT t.id, l.id FROM tasks t LEFT JOIN lists l \(on.1) WHERE \(theirs) ORDER BY t.id, l.id")
            case 2:
                // By ID: a task's `lid` names a list, one that does not exist, or is no string.
                settee = try query(db, indexed: &indexed, """
                    SELECT META(t).id, l.name FROM store.tasks t LEFT JOIN store.lists l ON META(l).id = t.lid
                    WHERE \(ours) ORDER BY META(t).id, l.name
                    """)
                reference = try rows(sqlite, """
                    SELECT t.id, json_extract(l.body, '$.name') FROM tasks t LEFT JOIN lists l ON l.id = json_extract(t.body, '$.lid')
                    WHERE \(theirs) ORDER BY t.id, json_extract(l.body, '$.name')
                    """)
            default:
                // Tasks per list: lists without a matching task count 0. The predicate names the
                // task's properties (unqualified, a path is the first source's: the list's).
                settee = try query(db, indexed: &indexed, """
                    SELECT META(l).id, count(META(t).id), sum(t.c.d) FROM store.lists l LEFT JOIN store.tasks t ON t.lk = l.k AND (\(ours))
                    GROUP BY META(l).id ORDER BY META(l).id
                    """)
                reference = try rows(sqlite, """
                    SELECT l.id, count(t.id), sum(json_extract(t.body, '$.c.d')) FROM lists l LEFT JOIN tasks t
                    ON json_extract(t.body, '$.lk') = json_extract(l.body, '$.k') AND (\(theirs)) GROUP BY l.id ORDER BY l.id
                    """)
            }
            let mine = settee.map { $0.map(Self.text) }
            if mine != reference {
                disagreements += 1
                Issue.record("seed \(seed), join query \(q): \(ours)\n  settee \(mine.prefix(10))\n  sqlite \(reference.prefix(10))")
            }
        }
        // Matches per list counted from the index alone (nothing of a task is read).
        let counted = try query(db, indexed: &indexed, """
            SELECT META(l).id, count(*) FROM store.lists l LEFT JOIN store.tasks t ON t.lk = l.k GROUP BY META(l).id ORDER BY META(l).id
            """).map { $0.map(Self.text) }
        let countedReference = try rows(sqlite, """
            SELECT l.id, count(*) FROM lists l LEFT JOIN tasks t ON json_extract(t.body, '$.lk') = json_extract(l.body, '$.k')
            GROUP BY l.id ORDER BY l.id
            """)
        #expect(counted == countedReference, "seed \(seed): settee \(counted), sqlite \(countedReference)")
    }

    /// SQLite's text of a value, for comparing results.
    static func text(_ v: JSONValue?) -> String {
        switch v {
        case nil, .null?: "NULL"
        case .int(let i)?: String(i)
        case .double(let d)?: d == d.rounded() && Swift.abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .string(let s)?: s
        case .bool(let b)?: b ? "1" : "0"
        case let other?: String(decoding: (try? other.jsonBytes()) ?? [], as: UTF8.self)
        }
    }

    private func query(_ db: Database, indexed: inout Int, _ sql: String) throws -> [[JSONValue?]] {
        if try db.createQuery(sql).explain().hasPrefix("SCAN INDEX") { indexed += 1 }
        let statement = try SQLParser.parse(sql)
        var executor = QueryExecutor(database: try db.queryTarget(statement.source), statement: statement, parameters: [:])
        let rows = try executor.run().map(\.values)
        guard !statement.joins.isEmpty else { return rows }
        // A join reads its sources' indexes where it can: without them it must answer the same.
        executor.useIndexes = false
        let scanned = try executor.run().map(\.values)
        if scanned != rows { Issue.record("\(sql): with indexes \(rows.prefix(5)), without \(scanned.prefix(5))") }
        return rows
    }

    private func exec(_ db: OpaquePointer, _ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw SetteeError(.invalidParameter, "sqlite: \(String(cString: sqlite3_errmsg(db))) in \(sql)")
        }
    }

    private func rows(_ db: OpaquePointer, _ sql: String) throws -> [[String]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw SetteeError(.invalidParameter, "sqlite: \(String(cString: sqlite3_errmsg(db))) in \(sql)")
        }
        defer { sqlite3_finalize(statement) }
        var out: [[String]] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            out.append((0 ..< sqlite3_column_count(statement)).map { i in
                switch sqlite3_column_type(statement, i) {
                case SQLITE_NULL: return "NULL"
                case SQLITE_INTEGER: return String(sqlite3_column_int64(statement, i))
                case SQLITE_FLOAT:
                    let d = sqlite3_column_double(statement, i)
                    return d == d.rounded() && Swift.abs(d) < 1e15 ? String(Int64(d)) : String(d)
                default: return String(cString: sqlite3_column_text(statement, i))
                }
            })
        }
        return out
    }
}
