import Foundation
import Synchronization

extension Database {
    /// Compiles a SQL++ for Mobile query, as Couchbase Lite's `createQuery` does.
    ///
    /// ```swift
    /// let query = try db.createQuery("""
    ///     SELECT META().id, title FROM _ WHERE type = 'task' AND list.id = $list
    ///     ORDER BY createdAt DESC LIMIT 20
    ///     """)
    /// query.parameters = Parameters().setString("list-7", forName: "list")
    /// for result in try query.execute() { print(result.string(forKey: "title") ?? "") }
    /// ```
    ///
    /// The data source is `_` (or `_default`, or the database's name), with an optional alias
    /// (`FROM _ AS t`, then `t.title`). Supported: `SELECT [DISTINCT]` of expressions (`AS` names
    /// a column) and `*`; `WHERE`; `GROUP BY` with `HAVING` and `count`, `sum`, `avg`, `min`,
    /// `max`; `ORDER BY … [ASC|DESC]`; `LIMIT` and `OFFSET`. Expressions: property paths
    /// (`list.id`, `tags[0]`, `` `odd name` ``), `$parameters`, `META().id`, `.sequence`,
    /// `.deleted`, `.expiration`, `.revisionID`, literals (`'text'`, numbers, `TRUE`, `FALSE`,
    /// `NULL`, `MISSING`, `[…]`), `= != <> < <= > >=`, `IS [NOT] NULL|MISSING|VALUED`,
    /// `[NOT] BETWEEN`, `[NOT] IN`, `[NOT] LIKE`, `AND OR NOT`, `+ - * / %`,
    /// `ANY | EVERY | ANY AND EVERY v IN array SATISFIES condition END`, and the functions
    /// `lower upper length trim contains abs floor ceil round array_length array_contains
    /// regexp_like regexp_contains type isarray isboolean isnumber isobject isstring
    /// ifmissingornull object_names`, `MATCH` and `RANK` of a full-text index. ``QueryBuilder``
    /// builds the same queries from Swift values. Ordering and `<`, `>` follow CouchDB's
    /// collation (`Formats/collation.md`): strings by the Unicode Collation Algorithm, values of
    /// different types by type. The planner reads an index where one serves the query
    /// (``Query/explain()``); the answer is the same either way.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` naming the position where the text stops
    ///   making sense, ``SetteeError/Code/notOpen``.
    public func createQuery(_ text: String) throws -> Query {
        try checkOpen()
        let statement = try SQLParser.parse(text)
        return Query(database: try queryTarget(statement.source), statement: statement)
    }

    /// The object whose documents `FROM source` reads: this one when it is the source
    /// (``DatabaseCore/isNamed(bySource:)``), else the collection `scope.collection` (or
    /// `collection` of the default scope) of this database when it has one; else this one,
    /// whose run then says there is no such source.
    func queryTarget(_ source: String) throws -> Database {
        if core.isNamed(bySource: source) { return self }
        let parts = source.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count <= 2 else { return self }
        let (scope, name) = parts.count == 2 ? (parts[0], parts[1]) : (Scope.defaultScopeName, parts[0])
        guard (try? Self.checkKeyspaceName(scope, of: "scope")) != nil, (try? Self.checkKeyspaceName(name, of: "collection")) != nil,
              let collection = try base.collection(name: name, scope: scope) else { return self }
        return collection.store
    }
}

extension Database {
    /// Compiles a CouchDB Mango query (what `_find` takes: `selector`, and optionally `sort`,
    /// `fields`, `limit`, `skip`) to the same plan as SQL++: indexes serve it as they serve
    /// SQL++.
    ///
    /// ```swift
    /// let query = try db.createQuery(mango: """
    ///     {"selector": {"type": "task", "createdAt": {"$gt": 1700000000}},
    ///      "sort": [{"createdAt": "desc"}], "limit": 20}
    ///     """)
    /// for result in try query.execute() { print(result.string(forKey: "_id") ?? "") }
    /// ```
    ///
    /// Each result has the columns `_id` and `_rev` (the document's ID and current revision),
    /// then one per `fields` entry (named by it), or without `fields` the whole document (the
    /// column `_`). Without `limit` every match is returned (`_find` over HTTP defaults to 25).
    /// The selector language is CouchDB 3's: `$eq $ne $gt $gte $lt $lte $exists $type $in $nin
    /// $size $mod $regex $beginsWith $all $elemMatch $allMatch $keyMapMatch $and $or $nor $not`,
    /// implicit `$and` and `$eq`, dotted field names (`\.` is a dot within a name), matched
    /// as CouchDB matches them (`Formats/http-api.md`, "Mango"): a condition on a field a
    /// document lacks is false, comparisons follow the collation across types, and sorting by
    /// a field keeps only documents that have it.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` naming what is wrong (text that is not
    ///   JSON, an unknown operator or member, an argument of the wrong kind, mixed sort
    ///   directions); ``SetteeError/Code/notOpen``.
    public func createQuery(mango json: String) throws -> Query {
        try checkOpen()
        let value: JSONValue
        do {
            value = try JSONValue(parsing: json)
        } catch {
            throw SetteeError(.invalidParameter, "mango: not JSON: \(error.message)")
        }
        return try createQuery(mango: try MangoQuery(parsing: value))
    }

    /// ``createQuery(mango:)`` for a query already checked and compiled (the sync server's
    /// `_find`, which reads its request body into a ``MangoQuery`` once).
    ///
    /// ```swift
    /// var mango = MangoQuery(selector: try MangoQuery.Selector(["type": "task"]))
    /// mango.limit = 20
    /// let q = try db.createQuery(mango: mango)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a `fields` entry Mango cannot read
    ///   or more terms than a query may hold; ``SetteeError/Code/notOpen``.
    @_spi(Server) public func createQuery(mango query: MangoQuery) throws -> Query {
        try checkOpen()
        return Query(database: self, statement: try MangoCompiler.statement(query))
    }
}

/// A compiled query over one database: from SQL++ text (``Database/createQuery(_:)``) or
/// built with ``QueryBuilder``, both compiled to the same plan.
///
/// ```swift
/// let query = try db.createQuery("SELECT count(*) AS n FROM _ WHERE type = 'task'")
/// let n = try query.execute().allResults().first?.int(forKey: "n") ?? 0
/// ```
///
/// The stages of ``QueryBuilder`` (``Select``, ``From``, ``Where``, ``GroupBy``, ``Having``,
/// ``OrderBy``, ``Limit``) are queries too: whichever stage a chain ends with is executed.
///
/// - Note: Thread-safe: ``parameters`` may be set and ``execute()`` called from any thread;
///   each execution reads one consistent snapshot of the database. Not subclassable outside
///   Settee.
public class Query: @unchecked Sendable {
    // Sendable by construction: every stored property is a constant of a Sendable type or
    // the mutex; `@unchecked` only because the class is not final (the builder's stages).

    /// nil for a ``Select`` without its `from`.
    let database: Database?
    /// The statement, or why QueryBuilder could not make one: `execute()` throws it.
    let plan: Swift.Result<SelectStatement, SetteeError>
    /// The values of the parameters set last (a copy: see ``Parameters``), nil before any.
    private let state = Mutex<[String: JSONValue]?>(nil)
    /// Listeners and last results when the query is live.
    let live = LiveQueryState()
    /// The plan of the last run, reused while the indexes stay the same.
    let plans = PlanCache()
    /// The counts of the last run.
    let statistics = StatisticsRecord()

    init(database: Database, statement: SelectStatement) {
        self.database = database
        self.plan = .success(statement)
        columns = Self.columns(of: plan)
    }

    /// A QueryBuilder query: compiled now, its errors kept for ``execute()``.
    init(building parts: BuilderParts) {
        self.database = parts.source?.database
        self.plan = Swift.Result { () throws(SetteeError) in try parts.compile() }
        columns = Self.columns(of: plan)
    }

    /// The values of the query's `$parameters`, read at each ``execute()``; nil (the default)
    /// for none. The query keeps a copy of what it is given, and gives a copy: change them, then
    /// set them again (a live query then runs again).
    ///
    /// ```swift
    /// let params = Parameters()
    /// params.setString("list-7", forName: "list")
    /// query.parameters = params
    /// ```
    public var parameters: Parameters? {
        get { state.withLock { $0 }.map { Parameters($0) } }
        set {
            let values = newValue?.values
            state.withLock { $0 = values }
            live.parametersChanged(self)
        }
    }

    /// The parameters' values for an execution (none set: no values).
    var parameterValues: [String: JSONValue] { state.withLock { $0 } ?? [:] }

    /// The channels the query reads, or nil (the default) for every document: with a set,
    /// only documents whose current revision the router put in at least one of them
    /// (``Database/setRouter(_:)``; a document never routed is in none). The channels are the
    /// query's source, not a filter after it: an index kept by channel
    /// (``ValueIndexConfiguration/byChannel``) serves it from those channels' entries alone, and
    /// without one it reads the documents the channels' logs list (other indexes are not used).
    /// `WHERE` is evaluated on no other document, so neither an error nor the time it takes says
    /// anything about one. A full-text search (`MATCH`) cannot be limited to channels.
    ///
    /// ```swift
    /// let q = try db.createQuery("SELECT META().id, title FROM _ WHERE type = 'task' ORDER BY createdAt LIMIT 20")
    /// q.channels = ["list-7", "shared"]
    /// for result in try q.execute() { print(result.string(forKey: "id") ?? "") }
    /// ```
    ///
    /// An empty set reads nothing.
    public var channels: Set<String>? {
        get { channelState.withLock { $0 } }
        set {
            channelState.withLock { $0 = newValue }
            live.parametersChanged(self)
        }
    }

    private let channelState = Mutex<Set<String>?>(nil)

    /// Which value and map indexes the planner may read (``IndexRestriction``): all by
    /// default. The sync server's `_find` gives the index CouchDB's rules choose.
    ///
    /// ```swift
    /// query.indexRestriction = .only("_design/tasks/by-n")
    /// print(try query.explain())
    /// ```
    @_spi(Server) public var indexRestriction: IndexRestriction {
        get { restrictionState.withLock { $0 } }
        set { restrictionState.withLock { $0 = newValue } }
    }

    private let restrictionState = Mutex<IndexRestriction>(.any)

    /// Whether each result of a Mango query (``Database/createQuery(mango:)``) carries its
    /// document's stored JSON (``Result/storedJSON``), read in the execution's snapshot: the
    /// sync server's `_find` sends documents as stored without reading each one again by ID.
    ///
    /// ```swift
    /// query.readsStoredDocuments = true
    /// let bodies = try query.execute().compactMap(\.storedJSON)
    /// ```
    @_spi(Server) public var readsStoredDocuments: Bool {
        get { storedDocuments.load(ordering: .relaxed) }
        set { storedDocuments.store(newValue, ordering: .relaxed) }
    }

    private let storedDocuments = Atomic<Bool>(false)

    /// An executor of the statement with the query's parameters, channels and plan cache.
    func executor(_ database: Database, _ statement: SelectStatement) -> QueryExecutor {
        var executor = QueryExecutor(database: database, statement: statement, parameters: parameterValues)
        executor.channels = channels
        executor.plans = plans
        executor.restriction = indexRestriction
        executor.statistics = statistics
        executor.storedBodies = readsStoredDocuments
        return executor
    }

    /// The names of the result's columns: an `AS` name, a property's last name, `id` (and so on)
    /// for `META()` properties, the data source's alias for `*`, else `$1`, `$2`… by position.
    /// Empty for a built query that ``execute()`` would refuse.
    ///
    /// ```swift
    /// print(query.columnNames.joined(separator: ", "))
    /// ```
    public var columnNames: [String] {
        guard case .success(let statement) = plan else { return [] }
        return statement.columnNames
    }

    /// The database and statement to run, or why there are none.
    func compiled() throws -> (Database, SelectStatement) {
        let statement = try plan.get()
        guard let database else {
            throw SetteeError(.invalidParameter, "query: no data source (QueryBuilder.select(…).from(DataSource.database(db)))")
        }
        try database.checkOpen()
        return (database, statement)
    }

    /// The result's column names and where each is (worked out once: the statement never changes).
    let columns: Columns

    private static func columns(of plan: Swift.Result<SelectStatement, SetteeError>) -> Columns {
        guard case .success(let statement) = plan else { return Columns(names: [], index: [:]) }
        let names = statement.columnNames
        var index: [String: Int] = [:]
        for (i, n) in names.enumerated() where index[n] == nil { index[n] = i }
        return Columns(names: names, index: index)
    }

    /// Whether the query's `WHERE` holds for one document (a change a feed filtered by a Mango
    /// selector considers), with the query's parameters; true when it has none.
    ///
    /// ```swift
    /// let selector = try db.createQuery(mango: MangoQuery(selector: try MangoQuery.Selector(["type": "task"])))
    /// if try selector.matches(id: doc.id, properties: doc.toDictionary()) { send(doc) }
    /// ```
    ///
    /// - Throws: the query's compilation error; ``SetteeError/Code/invalidParameter`` for a
    ///   parameter without a value or a regular expression that cannot run.
    @_spi(Server) public func matches(id: String, revisionID: String = "", properties: [String: JSONValue], isDeleted: Bool = false) throws -> Bool {
        let statement = try plan.get()
        guard let condition = statement.whereClause else { return true }
        let row = QueryRow(id: id, revisionID: revisionID, sequence: 0, isDeleted: isDeleted, expiration: nil, properties: properties)
        return try condition.evaluate(row, parameters: parameterValues).isTrue
    }

    /// How the query would run now: the index it reads and its ranges (or a scan of every
    /// document), whether rows come from the index alone (covering), what is evaluated per row,
    /// and whether a sort follows. The plan is made again at each ``execute()``, from the
    /// indexes of that moment.
    ///
    /// ```swift
    /// try db.createIndex(ValueIndexConfiguration(["type", "createdAt"]), name: "by-type")
    /// let q = try db.createQuery("SELECT META().id FROM _ WHERE type = 'task' ORDER BY createdAt DESC LIMIT 20")
    /// print(try q.explain())
    /// // SCAN INDEX by-type (type, createdAt) BACKWARDS
    /// //   RANGE type = 'task'
    /// //   COVERING: rows from the index's values, no document read
    /// // …
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen``; ``SetteeError/Code/corrupted`` when the index
    ///   catalog cannot be read.
    public func explain() throws -> String {
        let (database, s) = try compiled()
        if !s.joins.isEmpty { return try QueryExecutor.joinExplanation(s, database: database, restriction: indexRestriction) }
        let channels = self.channels
        let restriction = indexRestriction
        return try database.core.read { tx in
            let plan = try QueryPlanner.plan(s, indexes: QueryPlanner.candidates(try database.core.readyIndexes(tx), channels: channels,
                                                                                 restriction: restriction))
            var text = plan.explanation(s)
            if let channels {
                if plan.fullText != nil { throw QueryPlanner.fullTextWithChannels }
                let names = channels.sorted().map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ")
                if plan.scan != nil {
                    text += "\nBY CHANNEL: the index's entries of \(names) only, merged"
                } else {
                    text = text.replacingOccurrences(of: "SCAN ALL DOCUMENTS", with: "SCAN THE CHANNELS' DOCUMENTS")
                    text += "\nCHANNELS: the current documents of \(names), listed by their channel logs, in ID order"
                }
            }
            return text
        }
    }

    /// The name of the index the query would read now, or nil when it would read every
    /// document: ``explain()``'s first line, for a program. For a join, the first index one of
    /// its joins probes (`ON t.listID = META(l).id` with an index on the joined `listID`).
    ///
    /// ```swift
    /// if try query.indexUsed() == nil { print("no index serves this query") }
    /// ```
    ///
    /// - Throws: as ``explain()``.
    public func indexUsed() throws -> String? {
        let (database, s) = try compiled()
        if !s.joins.isEmpty { return try QueryExecutor.joinIndexUsed(s, database: database, restriction: indexRestriction) }
        let channels = self.channels
        let restriction = indexRestriction
        return try database.core.read { tx in
            // Planned once: the next execute() with the same indexes reuses the plan.
            let ready = QueryPlanner.candidates(try database.core.readyIndexes(tx), channels: channels, restriction: restriction)
            if let known = plans.cached(ready, useIndexes: true) { return known.plan.scan?.index.name ?? known.plan.fullText?.index.name }
            let plan = try QueryPlanner.plan(s, indexes: ready)
            plans.keep(PreparedPlan(plan: plan, statement: plan.executed(s)), for: ready, useIndexes: true)
            return plan.scan?.index.name ?? plan.fullText?.index.name
        }
    }

    /// The name of the index the last ``execute()`` read: `.some(nil)` when it read every
    /// document, nil before any run. What ``indexUsed()`` says, without planning again.
    ///
    /// ```swift
    /// let results = try query.execute()
    /// if case .some(nil) = query.indexOfLastRun { print("read every document") }
    /// ```
    @_spi(Server) public var indexOfLastRun: String?? {
        plans.last.map { $0.plan.scan?.index.name ?? $0.plan.fullText?.index.name }
    }

    /// What the last run read (``QueryStatistics``), so far when it is still running; nil before
    /// any run.
    ///
    /// ```swift
    /// _ = try query.execute()
    /// print(query.statisticsOfLastRun?.documentsExamined ?? 0)
    /// ```
    @_spi(Server) public var statisticsOfLastRun: QueryStatistics? { statistics.value }

    /// Runs the query and returns every result. Every failure surfaces here, so a result set
    /// is never silently short.
    ///
    /// ```swift
    /// for result in try query.execute() { print(result.toJSON()) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for a parameter without a value, an
    ///   aggregate outside a group, a `LIMIT` that is not a non-negative integer, an invalid or
    ///   too costly regular expression, and for a built query the builder's misuse (no data
    ///   source, an alias that names none, an invalid property path, a variable outside its
    ///   `ANY`/`EVERY`); ``SetteeError/Code/corrupted`` when a stored document cannot be read;
    ///   ``SetteeError/Code/notOpen``.
    public func execute() throws -> ResultSet {
        let (database, statement) = try compiled()
        let executor = executor(database, statement)
        let columns = self.columns
        return ResultSet(results: try executor.run().map { Result(columns: columns, values: $0.values, storedJSON: $0.body) })
    }
}

/// Values for a query's `$parameters`, set as Couchbase Lite's are: on an object, each setter
/// changing it (and returning it, so that calls chain).
///
/// ```swift
/// let params = Parameters()
/// params.setString("list-4", forName: "list")
/// params.setInt(20, forName: "limit")
/// query.parameters = params
/// ```
///
/// A query keeps a copy of the parameters it is given (as Couchbase Lite's does): changing them
/// afterwards changes nothing until they are set on the query again, which also runs a live
/// query again.
///
/// - Note: Thread-safe: its values are behind a lock.
public final class Parameters: Sendable {
    private let storage: Mutex<[String: JSONValue]>

    /// Empty parameters.
    ///
    /// ```swift
    /// let params = Parameters()
    /// ```
    public init() {
        storage = Mutex([:])
    }

    /// Parameters with the given values (by name, without the `$`).
    ///
    /// ```swift
    /// query.parameters = Parameters(["list": "list-7"])
    /// ```
    public init(_ values: [String: JSONValue]) {
        storage = Mutex(values)
    }

    /// A copy of `parameters` (empty for nil), to change without changing them.
    ///
    /// ```swift
    /// let next = Parameters(parameters: query.parameters).setInt(40, forName: "offset")
    /// ```
    public convenience init(parameters: Parameters?) {
        self.init(parameters?.values ?? [:])
    }

    /// Every value, by name.
    var values: [String: JSONValue] { storage.withLock { $0 } }

    /// The value of `name`, or nil.
    ///
    /// ```swift
    /// let list = query.parameters?.value(forName: "list")
    /// ```
    public func value(forName name: String) -> JSONValue? { storage.withLock { $0[name] } }

    /// Sets (or with nil removes) a parameter's value.
    ///
    /// ```swift
    /// params.setValue(["a", "b"], forName: "tags")
    /// ```
    @discardableResult
    public func setValue(_ value: JSONValue?, forName name: String) -> Parameters {
        storage.withLock { $0[name] = value }
        return self
    }

    /// Sets a string parameter (nil removes it).
    ///
    /// ```swift
    /// params.setString("task", forName: "type")
    /// ```
    @discardableResult
    public func setString(_ value: String?, forName name: String) -> Parameters { setValue(value.map(JSONValue.string), forName: name) }

    /// Sets an integer parameter.
    ///
    /// ```swift
    /// params.setInt(20, forName: "limit")
    /// ```
    @discardableResult
    public func setInt(_ value: Int, forName name: String) -> Parameters { setValue(.int(Int64(value)), forName: name) }

    /// Sets a 64-bit integer parameter.
    ///
    /// ```swift
    /// params.setInt64(1 << 40, forName: "size")
    /// ```
    @discardableResult
    public func setInt64(_ value: Int64, forName name: String) -> Parameters { setValue(.int(value), forName: name) }

    /// Sets a number parameter.
    ///
    /// ```swift
    /// params.setDouble(2.5, forName: "price")
    /// ```
    @discardableResult
    public func setDouble(_ value: Double, forName name: String) -> Parameters { setValue(.double(value), forName: name) }

    /// Sets a number parameter from a `Float`.
    ///
    /// ```swift
    /// params.setFloat(0.5, forName: "ratio")
    /// ```
    @discardableResult
    public func setFloat(_ value: Float, forName name: String) -> Parameters { setValue(.double(Double(value)), forName: name) }

    /// Sets a boolean parameter.
    ///
    /// ```swift
    /// params.setBoolean(false, forName: "done")
    /// ```
    @discardableResult
    public func setBoolean(_ value: Bool, forName name: String) -> Parameters { setValue(.bool(value), forName: name) }

    /// Sets a date parameter, as documents store dates: an ISO-8601 string in UTC with
    /// milliseconds (nil removes it).
    ///
    /// ```swift
    /// params.setDate(Date(timeIntervalSinceNow: -86_400), forName: "since")
    /// ```
    @discardableResult
    public func setDate(_ value: Date?, forName name: String) -> Parameters {
        setValue(value.map { .string(JSONDate.string(from: $0)) }, forName: name)
    }

    /// Sets an array parameter (nil removes it).
    ///
    /// ```swift
    /// params.setArray(["red", "green"], forName: "colors")
    /// ```
    @discardableResult
    public func setArray(_ value: [JSONValue]?, forName name: String) -> Parameters { setValue(value.map(JSONValue.array), forName: name) }

    /// Sets a dictionary parameter (nil removes it).
    ///
    /// ```swift
    /// params.setDictionary(["city": "Paris"], forName: "address")
    /// ```
    @discardableResult
    public func setDictionary(_ value: [String: JSONValue]?, forName name: String) -> Parameters {
        setValue(value.map(JSONValue.object), forName: name)
    }

    /// Sets a blob parameter: its metadata, as a document holds it (equal to a document's blob
    /// property with the same content; nil removes it).
    ///
    /// ```swift
    /// params.setBlob(Blob(contentType: "image/png", data: png), forName: "photo")
    /// ```
    @discardableResult
    public func setBlob(_ value: Blob?, forName name: String) -> Parameters {
        setValue(value.map { .object($0.properties) }, forName: name)
    }
}

/// The results of one execution of a ``Query``, in order; a `Sequence` that can be read once
/// with `next()` or whole with ``allResults()``.
///
/// ```swift
/// let results = try query.execute()
/// while let r = results.next() { print(r.toJSON()) }
/// ```
///
/// - Note: Not thread-safe: read a result set from one thread at a time (each ``Result`` may
///   then go anywhere).
public final class ResultSet: Sequence, IteratorProtocol {
    private let results: [Result]
    private var position = 0

    init(results: [Result]) {
        self.results = results
    }

    /// The next result, or nil after the last.
    ///
    /// ```swift
    /// if let first = try query.execute().next() { print(first.toJSON()) }
    /// ```
    public func next() -> Result? {
        guard position < results.count else { return nil }
        defer { position += 1 }
        return results[position]
    }

    /// The results not yet read.
    ///
    /// ```swift
    /// let titles = try query.execute().allResults().compactMap { $0.string(at: 1) }
    /// ```
    public func allResults() -> [Result] {
        defer { position = results.count }
        return Array(results[position...])
    }
}

/// Column names shared by the results of one execution.
struct Columns: Sendable {
    let names: [String]
    let index: [String: Int]
}

/// One row of a query's result: a value per column of the select list, read by position or by
/// column name. A column whose expression was MISSING has no value (`value(at:)` is nil and
/// ``toDictionary()`` leaves it out); a `null` one is `.null`.
///
/// ```swift
/// for result in try query.execute() {
///     let id = result.string(forKey: "id")
///     let title = result.string(at: 1)
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct Result: Sendable {
    let columns: Columns
    let values: [JSONValue?]
    /// The document's JSON as stored, for a query that reads stored documents
    /// (``Query/readsStoredDocuments``); nil otherwise, and for a document gone from the
    /// execution's snapshot.
    ///
    /// ```swift
    /// if let json = result.storedJSON { send(json) }
    /// ```
    @_spi(Server) public let storedJSON: [UInt8]?

    init(columns: Columns, values: [JSONValue?], storedJSON: [UInt8]? = nil) {
        self.columns = columns
        self.values = values
        self.storedJSON = storedJSON
    }

    /// The number of columns.
    ///
    /// ```swift
    /// for i in 0 ..< result.count { print(result.value(at: i) ?? "MISSING") }
    /// ```
    public var count: Int { values.count }

    /// The column names, in order.
    ///
    /// ```swift
    /// print(result.keys)
    /// ```
    public var keys: [String] { columns.names }

    /// The value of column `index`; nil when MISSING or out of range.
    ///
    /// ```swift
    /// let first = result.value(at: 0)
    /// ```
    public func value(at index: Int) -> JSONValue? {
        guard index >= 0, index < values.count else { return nil }
        return values[index]
    }

    /// The value of the column named `key`; nil when MISSING or no such column.
    ///
    /// ```swift
    /// let title = result.value(forKey: "title")
    /// ```
    public func value(forKey key: String) -> JSONValue? {
        columns.index[key].flatMap { values[$0] }
    }

    /// A string column, or nil.
    ///
    /// ```swift
    /// let title = result.string(at: 1) ?? "untitled"
    /// ```
    public func string(at index: Int) -> String? { value(at: index)?.stringValue }

    /// A string column by name, or nil.
    ///
    /// ```swift
    /// let id = result.string(forKey: "id")
    /// ```
    public func string(forKey key: String) -> String? { value(forKey: key)?.stringValue }

    /// An integer column; 0 when missing or not a number (as a document's getters).
    ///
    /// ```swift
    /// let n = result.int(at: 0)
    /// ```
    public func int(at index: Int) -> Int { TypedValue.int(value(at: index)) }

    /// An integer column by name; 0 when missing or not a number.
    ///
    /// ```swift
    /// let n = result.int(forKey: "n")
    /// ```
    public func int(forKey key: String) -> Int { TypedValue.int(value(forKey: key)) }

    /// A number column; 0 when missing or not a number.
    ///
    /// ```swift
    /// let average = result.double(at: 2)
    /// ```
    public func double(at index: Int) -> Double { value(at: index)?.doubleValue ?? 0 }

    /// A number column by name; 0 when missing or not a number.
    ///
    /// ```swift
    /// let average = result.double(forKey: "avg")
    /// ```
    public func double(forKey key: String) -> Double { value(forKey: key)?.doubleValue ?? 0 }

    /// A boolean column; false when missing (numbers: non-zero is true).
    ///
    /// ```swift
    /// let done = result.bool(at: 2)
    /// ```
    public func bool(at index: Int) -> Bool { TypedValue.bool(value(at: index)) }

    /// A boolean column by name; false when missing.
    ///
    /// ```swift
    /// let done = result.bool(forKey: "complete")
    /// ```
    public func bool(forKey key: String) -> Bool { TypedValue.bool(value(forKey: key)) }

    /// An array column, or nil.
    ///
    /// ```swift
    /// let tags = result.array(forKey: "tags") ?? []
    /// ```
    public func array(forKey key: String) -> [JSONValue]? { value(forKey: key)?.arrayValue }

    /// A dictionary column (a `*` column is the whole document), or nil.
    ///
    /// ```swift
    /// let doc = result.dictionary(forKey: "_")
    /// ```
    public func dictionary(forKey key: String) -> [String: JSONValue]? { value(forKey: key)?.objectValue }

    /// The columns by name; MISSING ones are left out.
    ///
    /// ```swift
    /// let row = result.toDictionary()
    /// ```
    public func toDictionary() -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for (name, value) in zip(columns.names, values) where out[name] == nil { out[name] = value }
        return out
    }

    /// The columns as a JSON object (canonical: keys sorted).
    ///
    /// ```swift
    /// print(result.toJSON())   // {"id":"task-1","title":"Milk"}
    /// ```
    public func toJSON() -> String {
        (try? JSONValue.object(toDictionary()).jsonText()) ?? "{}"
    }

    /// Decodes the columns (by name) into a `Decodable` type.
    ///
    /// ```swift
    /// struct Row: Decodable { var id: String; var title: String }
    /// let rows = try query.execute().map { try $0.decode(Row.self) }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the columns do not fit the type.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONCoding.decode(type, from: .object(toDictionary()))
    }
}
