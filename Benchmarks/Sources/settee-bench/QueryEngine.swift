/// One side of the `query` group (`settee-doc` or `sqlite`): loads the tasks of `TaskGenerator`, builds the
/// two indexes and answers the four queries. `QueryBench` drives both sides with the same documents,
/// indexes and parameters, checks each side's plan and answers, and times them.
///
/// Each query returns its rows as Swift values (`String`, `Int`) on both sides, as an application would
/// read them: Settee's `Result` getters, SQLite's `sqlite3_column_*` copied into `String`s.
protocol QueryEngine: AnyObject {
    static var name: EngineName { get }

    /// A batch of documents in the form the engine's API takes, made before the clock starts.
    associatedtype Batch

    /// Opens (creates) the database in `directory`, which exists and is empty.
    init(directory: String) throws

    /// Untimed: documents `range` of `generator` as a batch.
    func makeBatch(_ generator: TaskGenerator, _ range: Range<Int>) throws -> Batch

    /// One transaction (commit) of documents.
    func insert(_ batch: Batch) throws

    func createIndex(_ index: TaskIndex) throws

    /// Compiles the four queries once both indexes exist, and checks that each is planned as `QueryBench`
    /// means it to be (fails otherwise).
    func prepareQueries() throws

    /// The plans, for the log.
    func explain(_ query: TaskQuery) throws -> String

    /// `eq-order-limit`: the 20 newest tasks of a list (ID, title), newest first.
    func newestTasks(list: String) throws -> [TaskRow]

    /// `range-count`: the documents created between two instants (inclusive).
    func countCreated(from: Int64, through: Int64) throws -> Int

    /// `scan-unindexed`: the IDs of the tasks of priority 3 (no index on `priority`).
    func priorityThreeIDs() throws -> [String]

    /// `group-count`: the number of tasks in each list, one row per list that has tasks.
    func tasksPerList() throws -> [ListCount]

    /// Untimed: closes the database.
    func close() throws
}

struct TaskRow: Equatable {
    let id: String
    let title: String
}

struct ListCount: Equatable {
    let list: String
    let count: Int
}

/// The two indexes of the group, by what they are built from.
enum TaskIndex: String, CaseIterable {
    /// `(type, list.id, createdAt)`: serves `eq-order-limit` (equality on two, order by the third) and
    /// `group-count` (equality on `type`, groups in `list.id` order).
    case tasks
    /// `(createdAt)`: serves `range-count`.
    case created

    /// The indexed properties, in key order.
    var paths: [String] {
        switch self {
        case .tasks: ["type", "list.id", "createdAt"]
        case .created: ["createdAt"]
        }
    }

    /// Values Settee's index keeps beside its key (``ValueIndexConfiguration/covering``), so that
    /// `eq-order-limit` reads its rows' titles from the index: an option of Settee's that
    /// Couchbase Lite's SQLite schema has no counterpart of (SQLite's index would still have to
    /// read each row's `key` from the table).
    var covering: [String] {
        switch self {
        case .tasks: ["title"]
        case .created: []
        }
    }
}

/// The four queries, in the order they run.
enum TaskQuery: String, CaseIterable {
    case newestTasks = "eq-order-limit"
    case createdRange = "range-count"
    case unindexedScan = "scan-unindexed"
    case groupCount = "group-count"

    /// As Settee's SQL++ for Mobile has it.
    var sqlPlusPlus: String {
        switch self {
        case .newestTasks:
            "SELECT META().id, title FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 20"
        case .createdRange:
            "SELECT count(*) FROM _ WHERE createdAt BETWEEN $from AND $through"
        case .unindexedScan:
            "SELECT META().id FROM _ WHERE priority = 3"
        case .groupCount:
            "SELECT list.id, count(*) FROM _ WHERE type = 'task' GROUP BY list.id"
        }
    }

    /// The same over Couchbase Lite's SQLite schema, each property read with `json_extract` (the
    /// expressions of the indexes, so SQLite's planner matches them).
    var sqlite: String {
        switch self {
        case .newestTasks:
            "SELECT key, json_extract(body, '$.title') FROM kv_default WHERE json_extract(body, '$.type') = 'task' "
                + "AND json_extract(body, '$.list.id') = ?1 ORDER BY json_extract(body, '$.createdAt') DESC LIMIT 20"
        case .createdRange:
            "SELECT count(*) FROM kv_default WHERE json_extract(body, '$.createdAt') BETWEEN ?1 AND ?2"
        case .unindexedScan:
            "SELECT key FROM kv_default WHERE json_extract(body, '$.priority') = 3"
        case .groupCount:
            "SELECT json_extract(body, '$.list.id'), count(*) FROM kv_default WHERE json_extract(body, '$.type') = 'task' "
                + "GROUP BY json_extract(body, '$.list.id')"
        }
    }
}
