@_spi(Replication) import Settee

/// The `query` group on Settee's document API: `SetteeDocEngine`'s database (`fullSync`), documents saved
/// in `inBatch`es of `saveDocument`, `createIndex(ValueIndexConfiguration(_:), name:)`, and queries
/// compiled once with `createQuery` and run with `execute()`, parameters set per run.
final class SetteeQueryEngine: QueryEngine {
    static let name = EngineName.setteeDoc

    typealias Batch = [SetteeDocEngine.NewDocument]

    private let engine: SetteeDocEngine
    var database: Database { engine.database }
    private var queries: [TaskQuery: Query] = [:]

    init(directory: String) throws {
        engine = try SetteeDocEngine(directory: directory)
    }

    func makeBatch(_ generator: TaskGenerator, _ range: Range<Int>) throws -> Batch {
        range.map { SetteeDocEngine.NewDocument(id: generator.id(of: $0), properties: generator.properties(of: $0)) }
    }

    func insert(_ batch: Batch) throws {
        try engine.insert(batch)
    }

    func createIndex(_ index: TaskIndex) throws {
        try database.createIndex(ValueIndexConfiguration(index.paths, covering: index.covering), name: index.rawValue)
    }

    /// What each query's `explain()` must say: the index (or none) it reads, and for the first one that
    /// it reads the index backwards, needs no sort and stops after 20 rows.
    private static func expectedPlan(_ query: TaskQuery) -> (must: [String], mustNot: [String]) {
        switch query {
        case .newestTasks:
            (["SCAN INDEX tasks", "BACKWARDS", "RANGE type = 'task' AND list.id = $list", "in index order, no sort",
              "COVERING", "the scan stops once enough rows are found"], ["SORT BY", "SCAN ALL DOCUMENTS"])
        case .createdRange:
            (["SCAN INDEX created", "RANGE createdAt >= $from AND createdAt <= $through", "COVERING"], ["SCAN ALL DOCUMENTS"])
        case .unindexedScan:
            (["SCAN ALL DOCUMENTS"], ["SCAN INDEX"])
        case .groupCount:
            (["SCAN INDEX tasks", "RANGE type = 'task'", "COVERING"], ["SCAN ALL DOCUMENTS"])
        }
    }

    func prepareQueries() throws {
        for query in TaskQuery.allCases {
            let compiled = try database.createQuery(query.sqlPlusPlus)
            let plan = try compiled.explain()
            let (must, mustNot) = Self.expectedPlan(query)
            let missing = must.filter { !plan.contains($0) }, unwanted = mustNot.filter { plan.contains($0) }
            guard missing.isEmpty, unwanted.isEmpty else {
                throw EngineError("settee-doc: query \(query.rawValue) is not planned as intended: \(plan)"
                    + (missing.isEmpty ? "" : "\n  lacks: \(missing)") + (unwanted.isEmpty ? "" : "\n  has: \(unwanted)"))
            }
            queries[query] = compiled
        }
    }

    func explain(_ query: TaskQuery) throws -> String {
        try compiled(query).explain()
    }

    private func compiled(_ query: TaskQuery) throws -> Query {
        guard let compiled = queries[query] else { throw EngineError("settee-doc: queries not prepared") }
        return compiled
    }

    func newestTasks(list: String) throws -> [TaskRow] {
        let query = try compiled(.newestTasks)
        query.parameters = Parameters().setString(list, forName: "list")
        var rows: [TaskRow] = []
        for result in try query.execute() {
            guard let id = result.string(at: 0), let title = result.string(at: 1) else {
                throw EngineError("settee-doc: eq-order-limit: a row without id or title: \(result.toJSON())")
            }
            rows.append(TaskRow(id: id, title: title))
        }
        return rows
    }

    func countCreated(from: Int64, through: Int64) throws -> Int {
        let query = try compiled(.createdRange)
        query.parameters = Parameters().setValue(.int(from), forName: "from").setValue(.int(through), forName: "through")
        guard let result = try query.execute().next() else { throw EngineError("settee-doc: range-count: no row") }
        return result.int(at: 0)
    }

    func priorityThreeIDs() throws -> [String] {
        var ids: [String] = []
        for result in try compiled(.unindexedScan).execute() {
            guard let id = result.string(at: 0) else { throw EngineError("settee-doc: scan-unindexed: a row without id") }
            ids.append(id)
        }
        return ids
    }

    func tasksPerList() throws -> [ListCount] {
        var rows: [ListCount] = []
        for result in try compiled(.groupCount).execute() {
            guard let list = result.string(at: 0) else { throw EngineError("settee-doc: group-count: a row without list.id") }
            rows.append(ListCount(list: list, count: result.int(at: 1)))
        }
        return rows
    }

    func close() throws {
        queries = [:]
        try engine.close()
    }
}
