import CSQLite3

/// The `query` group: Settee's value indexes and SQL++ queries (`settee-doc`) next to SQLite with Couchbase
/// Lite's schema and JSON bodies (`sqlite`), on the same `TaskGenerator` documents, in one run, each
/// engine in `<directory>/<engine>/…`.
///
/// 1. *load-0-indexes*: every document into a new database without indexes, 1000 per transaction
///    (timed); the database is kept.
/// 2. *create-index-tasks*, *create-index-created*: the two indexes (`TaskIndex`) built over the loaded
///    documents, one engine after the other (timed).
/// 3. The four queries (`TaskQuery`): each engine's plan checked (`explain()`, `EXPLAIN QUERY PLAN`; a plan
///    other than the intended one stops the run), each engine's answers compared with the answers worked
///    out from the generator (a sample of parameters, every row, in order where the query orders), then
///    each query run again and again for `budget` seconds per engine, in two halves taken in the order
///    settee-doc, sqlite, sqlite, settee-doc so that both see the same drift of the machine → queries/s.
///    The timed runs check their row counts too.
/// 3b. settee-doc's live queries (`LiveQueryBench`): notification latency and the cost of idle ones.
/// 4. *load-1-index*, *load-2-indexes*: the load again into new databases created with the `tasks`
///    index, then with both (timed); the index costs are these loads' times ÷ the first load's.
///
/// Speedup rows (`settee-doc` only, ×) divide settee-doc's rate by SQLite's (for times: SQLite's time by
/// settee-doc's), next to the target each has.
final class QueryBench {
    /// The engines the group runs on, in this order.
    static let engines: [EngineName] = [.setteeDoc, .sqlite]

    let generator: TaskGenerator
    let engines: [EngineName]
    /// The queries checked and timed (`--queries`; all four by default).
    let queries: [TaskQuery]
    /// Seconds each engine runs each query: N ÷ 500,000, between 0.2 and 2.
    let budget: Double

    /// Distinct parameters drawn for the queries; the runs go round them.
    static let parameterCount = 4096
    /// Queries each engine runs untimed before each query's timed runs.
    static let warmUps = 3
    /// The fewest timed queries in each half.
    static let minimumPerHalf = 2

    init(documentCount: Int, seed: UInt64, engines: [EngineName], queries: [TaskQuery] = TaskQuery.allCases) {
        generator = TaskGenerator(seed: seed, count: documentCount)
        self.engines = engines.filter(Self.engines.contains)
        self.queries = queries
        budget = min(2, max(0.2, Double(documentCount) / 500_000))
    }

    func run(in directory: String) throws -> [Measurement] {
        var results: [Measurement] = []
        func report(_ figure: Figure, _ engine: EngineName, _ value: Double, _ note: String) {
            let measurement = Measurement(workload: .query, figure: figure, engine: engine, value: value, note: note)
            results.append(measurement)
            Progress.log("  \(engine.rawValue) \(measurement.label): \(Report.format(value, unit: figure.unit)) \(figure.unit)")
        }
        let both = engines.count == 2
        func reportSpeedup(_ figure: Figure, _ values: [Double], target: Double, higherIsBetter: Bool) {
            guard both else { return }
            let speedup = higherIsBetter ? values[0] / values[1] : values[1] / values[0]
            let what = higherIsBetter ? "settee-doc ÷ sqlite \(figure.unit)" : "sqlite's time ÷ settee-doc's"
            report(figure.speedup, .setteeDoc, speedup, "\(what) (target ≥ \(target))")
        }
        Progress.log("query: \(generator.count) tasks and lists (\(generator.listCount) lists), on \(engines.map(\.rawValue).joined(separator: ", ")); \(budget) s per engine per query")
        let answers = TaskAnswers(generator)

        // 1. The load without indexes; these databases are the ones queried.
        var sides: [any QueryEngine] = []
        var loads: [[Double]] = []
        for name in engines {
            let engine = try open(name, in: directory + "/\(name.rawValue)/queried")
            loads.append([try load(engine, label: "\(name.rawValue) load-0-indexes")])
            sides.append(engine)
        }

        // 2. The indexes over the loaded documents.
        for index in TaskIndex.allCases {
            var seconds: [Double] = []
            for side in sides {
                Files.settleWriteback()
                let watch = Stopwatch()
                try side.createIndex(index)
                seconds.append(watch.elapsedSeconds)
            }
            let figure: Figure = index == .tasks ? .createIndexTasks : .createIndexCreated
            for (name, value) in zip(engines, seconds) { report(figure, name, value, Self.indexNote(index, name)) }
            reportSpeedup(figure, seconds, target: 1.5, higherIsBetter: false)
        }

        // 3. The queries.
        for (name, side) in zip(engines, sides) {
            try side.prepareQueries()
            for query in TaskQuery.allCases {
                Progress.log("  \(name.rawValue) \(query.rawValue) plan: " + (try side.explain(query)).split(separator: "\n").joined(separator: " | "))
            }
            try verify(side, name, answers)
        }
        let lists = answers.sampleLists.map(TaskGenerator.listID)
        let listRows = answers.sampleLists.map { min(20, answers.tasksByList[$0].count) }
        let windows = answers.sampleWindows.map { (generator.createdAt(of: $0.lowerBound), generator.createdAt(of: $0.upperBound)) }
        let width = answers.windowWidth
        for query in queries {
            let rates = try measure(query, sides) { side, k in
                let n = k % Self.parameterCount
                switch query {
                case .newestTasks:
                    let count = try side.newestTasks(list: lists[n]).count
                    guard count == listRows[n] else { throw EngineError("\(type(of: side).name.rawValue): \(query.rawValue): \(count) rows, expected \(listRows[n])") }
                case .createdRange:
                    let count = try side.countCreated(from: windows[n].0, through: windows[n].1)
                    guard count == width else { throw EngineError("\(type(of: side).name.rawValue): \(query.rawValue): counted \(count), expected \(width)") }
                case .unindexedScan:
                    let count = try side.priorityThreeIDs().count
                    guard count == answers.priorityThree.count else { throw EngineError("\(type(of: side).name.rawValue): \(query.rawValue): \(count) rows, expected \(answers.priorityThree.count)") }
                case .groupCount:
                    let count = try side.tasksPerList().count
                    guard count == answers.perList.count else { throw EngineError("\(type(of: side).name.rawValue): \(query.rawValue): \(count) groups, expected \(answers.perList.count)") }
                }
            }
            let figure = query.figure
            for (name, rate) in zip(engines, rates) { report(figure, name, rate.value, Self.queryNote(query, name, rate.count)) }
            reportSpeedup(figure, rates.map(\.value), target: query.target, higherIsBetter: true)
        }
        // 3b. Live queries (settee-doc only).
        for (name, side) in zip(engines, sides) {
            guard let settee = side as? SetteeQueryEngine else { continue }
            let live = try settee.liveFigures(lists: lists)
            report(.liveNotifyP50, name, live.p50, "\(live.notifications) matching durable commits, commit's return → listener")
            report(.liveNotifyP99, name, live.p99, "the same, 99th percentile (target ≤ 5 ms)")
            report(.liveIdleCost, name, live.idleCost, "durable commits with 1000 idle live queries ÷ without (target ≤ 1.05)")
        }
        for side in sides { try side.close() }
        sides = []
        for name in engines { try Files.remove(directory + "/\(name.rawValue)/queried") }

        // 4. The load with the indexes already there.
        for count in 1 ... 2 {
            for (position, name) in engines.enumerated() {
                let path = directory + "/\(name.rawValue)/load-\(count)"
                let engine = try open(name, in: path)
                for index in TaskIndex.allCases.prefix(count) { try engine.createIndex(index) }
                loads[position].append(try load(engine, label: "\(name.rawValue) load-\(count)-index\(count > 1 ? "es" : "")"))
                if count == 2 {
                    // The indexes the load wrote answer as the ones built afterwards did.
                    try engine.prepareQueries()
                    try verify(engine, name, answers, full: false)
                }
                try engine.close()
                try Files.remove(path)
            }
        }
        let rates = loads.map { $0.map { Double(generator.count) / $0 } }
        for (figure, count) in [(Figure.load0Indexes, 0), (.load1Index, 1), (.load2Indexes, 2)] {
            for (name, engineRates) in zip(engines, rates) { report(figure, name, engineRates[count], Self.loadNote(count, name)) }
            if count != 1 { reportSpeedup(figure, rates.map { $0[count] }, target: count == 2 ? 2 : 1, higherIsBetter: true) }
        }
        for (figure, count) in [(Figure.load1IndexCost, 1), (.load2IndexesCost, 2)] {
            for (name, seconds) in zip(engines, loads) {
                report(figure, name, seconds[count] / seconds[0],
                       "load time with \(count == 1 ? "the tasks index" : "both indexes") ÷ without (lower is better)")
            }
        }
        return results
    }

    // MARK: - Steps

    private func open(_ name: EngineName, in directory: String) throws -> any QueryEngine {
        try Files.createDirectory(directory)
        switch name {
        case .setteeDoc: return try SetteeQueryEngine(directory: directory)
        case .sqlite: return try SQLiteQueryEngine(directory: directory)
        default: throw EngineError("query: \(name.rawValue) does not run this group")
        }
    }

    /// Every document, 1000 per transaction; each batch made before its clock starts → seconds.
    private func load<E: QueryEngine>(_ engine: E, label: String) throws -> Double {
        let total = generator.count
        let progress = Progress(label, total: total)
        Files.settleWriteback()
        var nanoseconds: UInt64 = 0
        for start in stride(from: 0, to: total, by: Dataset.batchSize) {
            let end = min(start + Dataset.batchSize, total)
            let batch = try engine.makeBatch(generator, start ..< end)
            let watch = Stopwatch()
            try engine.insert(batch)
            nanoseconds += watch.elapsedNanoseconds
            progress.update(end)
        }
        return Double(nanoseconds) / 1e9
    }

    /// Every query's answers against the generator's: `eq-order-limit` for 32 sampled lists (and the
    /// first and last list), `range-count` for 8 windows, the others whole. `full: false` checks only the
    /// two indexed lookups.
    private func verify(_ side: any QueryEngine, _ name: EngineName, _ answers: TaskAnswers, full: Bool = true) throws {
        func fail(_ query: TaskQuery, _ what: String) -> EngineError {
            EngineError("\(name.rawValue): \(query.rawValue) answers wrong: \(what)")
        }
        for list in Array(answers.sampleLists.prefix(32)) + [0, generator.listCount - 1] where queries.contains(.newestTasks) {
            let rows = try side.newestTasks(list: TaskGenerator.listID(list))
            let expected = answers.newest(list: list)
            guard rows == expected else {
                throw fail(.newestTasks, "list \(list): \(rows.prefix(3)) … (\(rows.count) rows), expected \(expected.prefix(3)) … (\(expected.count))")
            }
        }
        for window in answers.sampleWindows.prefix(8) where queries.contains(.createdRange) {
            let count = try side.countCreated(from: generator.createdAt(of: window.lowerBound),
                                              through: generator.createdAt(of: window.upperBound))
            guard count == window.count else { throw fail(.createdRange, "documents \(window): \(count)") }
        }
        guard full else { return }
        let ids = queries.contains(.unindexedScan) ? try side.priorityThreeIDs().sorted() : answers.priorityThree
        guard ids == answers.priorityThree else {
            throw fail(.unindexedScan, "\(ids.count) IDs, expected \(answers.priorityThree.count); first difference at "
                + "\(Self.firstDifference(ids, answers.priorityThree))")
        }
        let groups = queries.contains(.groupCount) ? try side.tasksPerList().sorted { $0.list < $1.list } : answers.perList
        guard groups == answers.perList else {
            throw fail(.groupCount, "\(groups.count) groups, expected \(answers.perList.count); first difference at "
                + "\(Self.firstDifference(groups, answers.perList))")
        }
        Progress.log("  \(name.rawValue): \(queries.map(\.rawValue).joined(separator: ", ")) answer as the generator says")
    }

    private static func firstDifference<T: Equatable>(_ a: [T], _ b: [T]) -> String {
        let n = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
        return "\(n): \(n < a.count ? "\(a[n])" : "nothing") against \(n < b.count ? "\(b[n])" : "nothing")"
    }

    /// Runs `body(side, k)` with k = 0, 1, 2 … on each side: `warmUps` untimed, then two timed halves of
    /// `budget / 2` seconds each (and at least `minimumPerHalf` queries), the sides' halves in the order
    /// A B B A → each side's queries/s over both halves, and how many it ran.
    private func measure(_ query: TaskQuery, _ sides: [any QueryEngine],
                         _ body: (any QueryEngine, Int) throws -> Void) throws -> [(value: Double, count: Int)] {
        var next = [Int](repeating: 0, count: sides.count)
        var counts = next, nanoseconds = [UInt64](repeating: 0, count: sides.count)
        for (position, side) in sides.enumerated() {
            for _ in 0 ..< Self.warmUps {
                try body(side, next[position])
                next[position] += 1
            }
        }
        let order = sides.count == 2 ? [0, 1, 1, 0] : Array(repeating: 0, count: 2 * sides.count)
        let half = UInt64(budget / 2 * 1e9)
        for position in order {
            var done = 0
            let watch = Stopwatch()
            var elapsed: UInt64 = 0
            repeat {
                try body(sides[position], next[position])
                next[position] += 1
                done += 1
                elapsed = watch.elapsedNanoseconds
            } while elapsed < half || done < Self.minimumPerHalf
            counts[position] += done
            nanoseconds[position] += elapsed
        }
        return zip(counts, nanoseconds).map { (Double($0) / (Double($1) / 1e9), $0) }
    }

    // MARK: - Notes

    private static let sqliteVersion = String(cString: sqlite3_libversion())

    private static func queryNote(_ query: TaskQuery, _ engine: EngineName, _ count: Int) -> String {
        let plan: String
        switch (query, engine) {
        case (.newestTasks, .setteeDoc): plan = "index tasks backwards, no sort, stops at 20; covering (title kept in the index)"
        case (.createdRange, .setteeDoc): plan = "index created, range, covering"
        case (.unindexedScan, .setteeDoc): plan = "full scan, each body probed for WHERE before it is parsed"
        case (.groupCount, .setteeDoc): plan = "index tasks, type = 'task', covering, grouped"
        case (.newestTasks, _): plan = "json_extract index tasks, no temp b-tree, row read for title"
        case (.createdRange, _): plan = "json_extract index created"
        case (.unindexedScan, _): plan = "table scan, json_extract per row"
        case (.groupCount, _): plan = "json_extract index tasks, groups in index order"
        }
        let version = engine == .sqlite ? "SQLite \(sqliteVersion), " : ""
        return "\(version)\(plan); \(count) queries"
    }

    private static func indexNote(_ index: TaskIndex, _ engine: EngineName) -> String {
        let paths = index.paths.joined(separator: ", ")
        return engine == .setteeDoc
            ? "createIndex(ValueIndexConfiguration([\(paths)]\(index.covering.isEmpty ? "" : ", covering: [\(index.covering.joined(separator: ", "))]"))) over N docs"
            : "CREATE INDEX on json_extract(body, …) of \(paths); synchronous=NORMAL"
    }

    private static func loadNote(_ count: Int, _ engine: EngineName) -> String {
        let indexes = ["no index", "index tasks", "indexes tasks, created"][count]
        return engine == .setteeDoc
            ? "\(indexes); fullSync: fdatasync per inBatch of 1000 saveDocument"
            : "\(indexes); WAL, synchronous=NORMAL: no sync at commit; 1000 per transaction"
    }
}

/// The answers the queries must give, worked out from the generator.
struct TaskAnswers {
    let generator: TaskGenerator
    /// Per list, its tasks' document indexes, ascending (so in `createdAt` order).
    let tasksByList: [[Int32]]
    /// The IDs of the tasks of priority 3, sorted.
    let priorityThree: [String]
    /// Per list with tasks, how many, sorted by list ID.
    let perList: [ListCount]
    /// The lists `eq-order-limit` asks for, in order.
    let sampleLists: [Int]
    /// `range-count`'s windows: `windowWidth` consecutive documents each (10 % of them).
    let sampleWindows: [ClosedRange<Int>]
    let windowWidth: Int

    init(_ generator: TaskGenerator) {
        self.generator = generator
        var byList = [[Int32]](repeating: [], count: generator.listCount)
        var three: [String] = []
        for index in 0 ..< generator.count where !generator.isList(index) {
            let fields = generator.fields(of: index)
            byList[fields.list].append(Int32(index))
            if fields.priority == 3 { three.append(generator.id(of: index)) }
        }
        tasksByList = byList
        priorityThree = three.sorted()
        perList = byList.enumerated().filter { !$0.element.isEmpty }
            .map { ListCount(list: TaskGenerator.listID($0.offset), count: $0.element.count) }
            .sorted { $0.list < $1.list }
        var random = SplitMix64(seed: generator.seed, stream: 0x403, item: 0)
        sampleLists = (0 ..< QueryBench.parameterCount).map { _ in random.bounded(generator.listCount) }
        let width = max(1, generator.count / 10)
        windowWidth = width
        sampleWindows = (0 ..< QueryBench.parameterCount).map { _ in
            let start = random.bounded(generator.count - width + 1)
            return start ... start + width - 1
        }
    }

    /// `eq-order-limit`'s answer: the list's 20 newest tasks, newest first.
    func newest(list: Int) -> [TaskRow] {
        tasksByList[list].suffix(20).reversed().map { TaskRow(id: generator.id(of: Int($0)), title: generator.title(of: Int($0))) }
    }
}

extension TaskQuery {
    var figure: Figure {
        switch self {
        case .newestTasks: .newestTasks
        case .createdRange: .createdRange
        case .unindexedScan: .unindexedScan
        case .groupCount: .groupCount
        }
    }

    /// settee-doc's rate ÷ SQLite's that the query should reach.
    var target: Double {
        switch self {
        case .newestTasks: 3
        case .createdRange: 2
        case .unindexedScan: 1.5
        case .groupCount: 1
        }
    }
}
