/// Builds queries from Swift values instead of SQL++ text, in the shape of Couchbase Lite's
/// QueryBuilder: `select`, then `from`, then any of `where`, `groupBy`, `having`, `orderBy`,
/// `limit`, in that order. The result compiles to the same plan as the equivalent SQL++ text
/// and runs the same way.
///
/// ```swift
/// let query = QueryBuilder
///     .select(SelectResult.expression(Meta.id), SelectResult.property("title"))
///     .from(DataSource.database(db))
///     .where(Expression.property("type").equalTo(Expression.string("task"))
///         .and(Expression.property("list.id").equalTo(Expression.parameter("list"))))
///     .orderBy(Ordering.property("createdAt").descending())
///     .limit(Expression.int(20))
/// query.parameters = Parameters().setString("list-7", forName: "list")
/// for result in try query.execute() { print(result.string(forKey: "id") ?? "") }
/// ```
///
/// Building never throws: a misuse (an invalid property path, an alias that names no data
/// source, a variable outside its `ANY`/`EVERY`) is reported by ``Query/execute()`` as a
/// ``SetteeError`` with code ``SetteeError/Code/invalidParameter``.
///
/// A caseless namespace; the queries it starts are thread-safe (``Query``).
public enum QueryBuilder {
    /// Starts a query of the given result columns.
    ///
    /// ```swift
    /// let select = QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.property("title"))
    /// ```
    public static func select(_ results: any SelectResultProtocol...) -> Select {
        select(results)
    }

    /// Starts a query of the given result columns.
    ///
    /// ```swift
    /// let select = QueryBuilder.select([SelectResult.property("title")])
    /// ```
    public static func select(_ results: [any SelectResultProtocol]) -> Select {
        Select(BuilderParts(results: results.map(BuilderResult.of)))
    }

    /// Starts a query of the given result columns without duplicate rows (`SELECT DISTINCT`).
    ///
    /// ```swift
    /// let lists = QueryBuilder.selectDistinct(SelectResult.property("taskList.id")).from(DataSource.database(db))
    /// ```
    public static func selectDistinct(_ results: any SelectResultProtocol...) -> Select {
        selectDistinct(results)
    }

    /// Starts a query of the given result columns without duplicate rows (`SELECT DISTINCT`).
    ///
    /// ```swift
    /// let lists = QueryBuilder.selectDistinct([SelectResult.property("taskList.id")])
    /// ```
    public static func selectDistinct(_ results: [any SelectResultProtocol]) -> Select {
        Select(BuilderParts(distinct: true, results: results.map(BuilderResult.of)))
    }
}

extension BuilderParts {
    func with(_ change: (inout BuilderParts) -> Void) -> BuilderParts {
        var copy = self
        change(&copy)
        return copy
    }

    func source(_ s: any DataSourceProtocol) -> BuilderParts {
        with { parts in
            if let d = s as? DatabaseSource {
                parts.source = BuilderSource(database: d.database, name: d.name, alias: d.alias)
            } else {
                parts.sourceError = "\(type(of: s)) is not a data source Settee built (DataSourceProtocol takes no other conformances)"
            }
        }
    }

    func filter(_ e: any ExpressionProtocol) -> BuilderParts { with { $0.whereClause = .of(e) } }
    func group(_ es: [any ExpressionProtocol]) -> BuilderParts { with { $0.groupBy = es.map { .of($0) } } }
    func having(_ e: any ExpressionProtocol) -> BuilderParts { with { $0.having = .of(e) } }
    func order(_ os: [any OrderingProtocol]) -> BuilderParts { with { $0.orderBy = os.map(BuilderOrdering.of) } }
    func limit(_ l: any ExpressionProtocol, _ o: (any ExpressionProtocol)?) -> BuilderParts {
        with { parts in
            parts.limit = .of(l)
            parts.offset = o.map { .of($0) }
        }
    }
}

// MARK: - Stages

/// A query's result columns, waiting for its data source: ``from(_:)``. Executing it throws
/// (it reads nothing).
///
/// ```swift
/// let query = QueryBuilder.select(SelectResult.property("title")).from(DataSource.database(db))
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class Select: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// The data source the query reads.
    ///
    /// ```swift
    /// let query = QueryBuilder.select(SelectResult.all()).from(DataSource.database(db).as("t"))
    /// ```
    public func from(_ dataSource: any DataSourceProtocol) -> From { From(parts.source(dataSource)) }
}

/// A query with its data source; ``where(_:)``, ``groupBy(_:)-(ExpressionProtocol...)``,
/// ``orderBy(_:)-(OrderingProtocol...)`` and ``limit(_:offset:)`` may follow.
///
/// ```swift
/// let all = try QueryBuilder.select(SelectResult.all()).from(DataSource.database(db)).execute()
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class From: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// Keeps the documents for which `expression` is true (`WHERE`).
    ///
    /// ```swift
    /// let tasks = QueryBuilder.select(SelectResult.property("title")).from(DataSource.database(db))
    ///     .where(Expression.property("type").equalTo(Expression.string("task")))
    /// ```
    public func `where`(_ expression: any ExpressionProtocol) -> Where { Where(parts.filter(expression)) }

    /// Groups the rows by the values of `expressions` (`GROUP BY`).
    ///
    /// ```swift
    /// let perList = QueryBuilder.select(SelectResult.property("taskList.id"), SelectResult.expression(Function.count(Expression.all())))
    ///     .from(DataSource.database(db)).groupBy(Expression.property("taskList.id"))
    /// ```
    public func groupBy(_ expressions: any ExpressionProtocol...) -> GroupBy { GroupBy(parts.group(expressions)) }

    /// Groups the rows by the values of `expressions` (`GROUP BY`).
    ///
    /// ```swift
    /// let perList = select.from(DataSource.database(db)).groupBy([Expression.property("taskList.id")])
    /// ```
    public func groupBy(_ expressions: [any ExpressionProtocol]) -> GroupBy { GroupBy(parts.group(expressions)) }

    /// Orders the rows (`ORDER BY`).
    ///
    /// ```swift
    /// let newest = select.from(DataSource.database(db)).orderBy(Ordering.property("createdAt").descending())
    /// ```
    public func orderBy(_ orderings: any OrderingProtocol...) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Orders the rows (`ORDER BY`).
    ///
    /// ```swift
    /// let newest = select.from(DataSource.database(db)).orderBy([Ordering.property("createdAt").descending()])
    /// ```
    public func orderBy(_ orderings: [any OrderingProtocol]) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Returns at most `limit` rows, after skipping `offset` (`LIMIT … OFFSET …`); both must
    /// be non-negative integers (constants or parameters).
    ///
    /// ```swift
    /// let page = select.from(DataSource.database(db)).limit(Expression.int(20), offset: Expression.parameter("skip"))
    /// ```
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)? = nil) -> Limit { Limit(parts.limit(limit, offset)) }
}

/// A query with its condition; ``groupBy(_:)-(ExpressionProtocol...)``,
/// ``orderBy(_:)-(OrderingProtocol...)`` and ``limit(_:offset:)`` may follow.
///
/// ```swift
/// let tasks = QueryBuilder.select(SelectResult.property("title")).from(DataSource.database(db))
///     .where(Expression.property("type").equalTo(Expression.string("task")))
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class Where: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// Groups the matching rows by the values of `expressions` (`GROUP BY`).
    ///
    /// ```swift
    /// let perList = tasks.groupBy(Expression.property("taskList.id"))
    /// ```
    public func groupBy(_ expressions: any ExpressionProtocol...) -> GroupBy { GroupBy(parts.group(expressions)) }

    /// Groups the matching rows by the values of `expressions` (`GROUP BY`).
    ///
    /// ```swift
    /// let perList = tasks.groupBy([Expression.property("taskList.id")])
    /// ```
    public func groupBy(_ expressions: [any ExpressionProtocol]) -> GroupBy { GroupBy(parts.group(expressions)) }

    /// Orders the matching rows (`ORDER BY`).
    ///
    /// ```swift
    /// let newest = tasks.orderBy(Ordering.property("createdAt").descending())
    /// ```
    public func orderBy(_ orderings: any OrderingProtocol...) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Orders the matching rows (`ORDER BY`).
    ///
    /// ```swift
    /// let newest = tasks.orderBy([Ordering.property("createdAt").descending()])
    /// ```
    public func orderBy(_ orderings: [any OrderingProtocol]) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Returns at most `limit` matching rows, after skipping `offset`.
    ///
    /// ```swift
    /// let firstTen = tasks.limit(Expression.int(10))
    /// ```
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)? = nil) -> Limit { Limit(parts.limit(limit, offset)) }
}

/// A grouped query; ``having(_:)``, ``orderBy(_:)-(OrderingProtocol...)`` and
/// ``limit(_:offset:)`` may follow.
///
/// ```swift
/// let perList = QueryBuilder
///     .select(SelectResult.property("taskList.id"), SelectResult.expression(Function.count(Expression.all())).as("n"))
///     .from(DataSource.database(db))
///     .groupBy(Expression.property("taskList.id"))
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class GroupBy: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// Keeps the groups for which `expression` is true (`HAVING`).
    ///
    /// ```swift
    /// let busy = perList.having(Function.count(Expression.all()).greaterThan(Expression.int(3)))
    /// ```
    public func having(_ expression: any ExpressionProtocol) -> Having { Having(parts.having(expression)) }

    /// Orders the groups (`ORDER BY`).
    ///
    /// ```swift
    /// let biggest = perList.orderBy(Ordering.property("n").descending())
    /// ```
    public func orderBy(_ orderings: any OrderingProtocol...) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Orders the groups (`ORDER BY`).
    ///
    /// ```swift
    /// let biggest = perList.orderBy([Ordering.property("n").descending()])
    /// ```
    public func orderBy(_ orderings: [any OrderingProtocol]) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Returns at most `limit` groups, after skipping `offset`.
    ///
    /// ```swift
    /// let firstFive = perList.limit(Expression.int(5))
    /// ```
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)? = nil) -> Limit { Limit(parts.limit(limit, offset)) }
}

/// A grouped query with its group condition; ``orderBy(_:)-(OrderingProtocol...)`` and
/// ``limit(_:offset:)`` may follow.
///
/// ```swift
/// let busy = perList.having(Function.count(Expression.all()).greaterThan(Expression.int(3)))
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class Having: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// Orders the remaining groups (`ORDER BY`).
    ///
    /// ```swift
    /// let biggest = busy.orderBy(Ordering.property("n").descending())
    /// ```
    public func orderBy(_ orderings: any OrderingProtocol...) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Orders the remaining groups (`ORDER BY`).
    ///
    /// ```swift
    /// let biggest = busy.orderBy([Ordering.property("n").descending()])
    /// ```
    public func orderBy(_ orderings: [any OrderingProtocol]) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// Returns at most `limit` of the remaining groups, after skipping `offset`.
    ///
    /// ```swift
    /// let top = busy.limit(Expression.int(3))
    /// ```
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)? = nil) -> Limit { Limit(parts.limit(limit, offset)) }
}

/// An ordered query; ``limit(_:offset:)`` may follow.
///
/// ```swift
/// let newest = QueryBuilder.select(SelectResult.property("title")).from(DataSource.database(db))
///     .orderBy(Ordering.property("createdAt").descending())
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class OrderBy: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// Returns at most `limit` rows in order, after skipping `offset`.
    ///
    /// ```swift
    /// let newestTwenty = newest.limit(Expression.int(20))
    /// ```
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)? = nil) -> Limit { Limit(parts.limit(limit, offset)) }
}

/// A query with its limit: the last stage.
///
/// ```swift
/// let page = newest.limit(Expression.int(20), offset: Expression.int(40))
/// for result in try page.execute() { print(result.toJSON()) }
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class Limit: Query, @unchecked Sendable {
    init(_ parts: BuilderParts) { super.init(building: parts) }
}
