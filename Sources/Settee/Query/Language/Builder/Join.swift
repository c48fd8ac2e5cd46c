/// A join of a built query (``From/join(_:)-(JoinProtocol...)``): made by ``Join``.
///
/// ```swift
/// let join: any JoinProtocol = Join.crossJoin(DataSource.collection(lists).as("l"))
/// ```
///
/// Conformances are Settee's own.
public protocol JoinProtocol: Sendable {}

/// A join that still needs its condition: ``on(_:)``.
///
/// ```swift
/// let join = Join.join(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID").from("t")))
/// ```
///
/// Conformances are Settee's own.
public protocol JoinOnProtocol: JoinProtocol {
    /// The condition a pair of rows must meet (`ON`).
    ///
    /// ```swift
    /// let join = Join.leftJoin(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID").from("t")))
    /// ```
    func on(_ expression: any ExpressionProtocol) -> any JoinProtocol
}

/// Couchbase Lite's joins of QueryBuilder: another source (a collection of the same database,
/// or the same one under another alias), combined with the rows so far. Properties and `Meta`
/// name their source with `.from(alias)`; one with no `.from` is the first source's.
///
/// ```swift
/// let query = QueryBuilder
///     .select(SelectResult.expression(Expression.property("title").from("t")),
///             SelectResult.expression(Expression.property("name").from("l")).as("list"))
///     .from(DataSource.collection(tasks).as("t"))
///     .join(Join.join(DataSource.collection(lists).as("l"))
///         .on(Meta.id.from("l").equalTo(Expression.property("listID").from("t"))))
/// ```
///
/// A caseless namespace.
public enum Join {
    /// An inner join: rows with a match only.
    ///
    /// ```swift
    /// let join = Join.join(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID")))
    /// ```
    public static func join(_ dataSource: any DataSourceProtocol) -> any JoinOnProtocol { BuiltJoin(kind: .inner, source: dataSource, on: nil) }

    /// An inner join (``join(_:)``).
    ///
    /// ```swift
    /// let join = Join.innerJoin(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID")))
    /// ```
    public static func innerJoin(_ dataSource: any DataSourceProtocol) -> any JoinOnProtocol { join(dataSource) }

    /// A left outer join: every row so far, the joined source MISSING where nothing matches.
    ///
    /// ```swift
    /// let join = Join.leftJoin(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID")))
    /// ```
    public static func leftJoin(_ dataSource: any DataSourceProtocol) -> any JoinOnProtocol {
        BuiltJoin(kind: .leftOuter, source: dataSource, on: nil)
    }

    /// A left outer join (``leftJoin(_:)``).
    ///
    /// ```swift
    /// let join = Join.leftOuterJoin(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID")))
    /// ```
    public static func leftOuterJoin(_ dataSource: any DataSourceProtocol) -> any JoinOnProtocol { leftJoin(dataSource) }

    /// A cross join: every combination.
    ///
    /// ```swift
    /// let join = Join.crossJoin(DataSource.collection(colors).as("c"))
    /// ```
    public static func crossJoin(_ dataSource: any DataSourceProtocol) -> any JoinProtocol {
        BuiltJoin(kind: .cross, source: dataSource, on: nil)
    }
}

/// A join as built.
struct BuiltJoin: JoinOnProtocol {
    let kind: SelectStatement.Join.Kind
    let source: any DataSourceProtocol
    let on: BuilderExpression?

    func on(_ expression: any ExpressionProtocol) -> any JoinProtocol {
        BuiltJoin(kind: kind, source: source, on: .of(expression))
    }
}

/// A built query's joins, as they compile.
struct BuilderJoin: Sendable {
    let kind: SelectStatement.Join.Kind
    let source: BuilderSource?
    let on: BuilderExpression?
    /// Why the join cannot compile (a foreign conformance, a missing condition).
    let error: String?

    static func of(_ j: any JoinProtocol) -> BuilderJoin {
        guard let built = j as? BuiltJoin else {
            return BuilderJoin(kind: .inner, source: nil, on: nil,
                               error: "\(type(of: j)) is not a join Settee built (JoinProtocol takes no other conformances)")
        }
        guard let d = built.source as? DatabaseSource else {
            return BuilderJoin(kind: built.kind, source: nil, on: nil,
                               error: "\(type(of: built.source)) is not a data source Settee built (DataSourceProtocol takes no other conformances)")
        }
        if built.kind != .cross && built.on == nil {
            return BuilderJoin(kind: built.kind, source: nil, on: nil, error: "a join needs its condition (.on(…)), unless it is Join.crossJoin")
        }
        return BuilderJoin(kind: built.kind, source: BuilderSource(database: d.database, name: d.fullName, alias: d.alias), on: built.on, error: nil)
    }
}

/// A query's joins (``From/join(_:)-(JoinProtocol...)``), before `where` and the rest.
///
/// ```swift
/// let rows = try QueryBuilder.select(SelectResult.all()).from(DataSource.collection(tasks).as("t"))
///     .join(Join.join(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID").from("t"))))
///     .execute()
/// ```
///
/// - Note: Thread-safe, as every ``Query``.
public final class Joins: Query, @unchecked Sendable {
    let parts: BuilderParts
    init(_ parts: BuilderParts) { self.parts = parts; super.init(building: parts) }

    /// Keeps the joined rows for which `expression` is true (`WHERE`).
    ///
    /// ```swift
    /// let open = joins.where(Expression.property("done").from("t").equalTo(Expression.boolean(false)))
    /// ```
    public func `where`(_ expression: any ExpressionProtocol) -> Where { Where(parts.filter(expression)) }

    /// Groups the joined rows (`GROUP BY`).
    ///
    /// ```swift
    /// let perList = joins.groupBy(Meta.id.from("l"))
    /// ```
    public func groupBy(_ expressions: any ExpressionProtocol...) -> GroupBy { GroupBy(parts.group(expressions)) }

    /// Sorts the joined rows (`ORDER BY`).
    ///
    /// ```swift
    /// let sorted = joins.orderBy(Ordering.expression(Expression.property("name").from("l")))
    /// ```
    public func orderBy(_ orderings: any OrderingProtocol...) -> OrderBy { OrderBy(parts.order(orderings)) }

    /// At most `limit` rows, after skipping `offset` (`LIMIT … OFFSET …`).
    ///
    /// ```swift
    /// let first = joins.limit(Expression.int(10))
    /// ```
    public func limit(_ limit: any ExpressionProtocol, offset: (any ExpressionProtocol)? = nil) -> Limit { Limit(parts.limit(limit, offset)) }
}

extension From {
    /// Joins other sources to the query's (`JOIN … ON …`, in order).
    ///
    /// ```swift
    /// let joins = QueryBuilder.select(SelectResult.all()).from(DataSource.collection(tasks).as("t"))
    ///     .join(Join.join(DataSource.collection(lists).as("l")).on(Meta.id.from("l").equalTo(Expression.property("listID").from("t"))))
    /// ```
    public func join(_ joins: any JoinProtocol...) -> Joins { Joins(parts.with { $0.joins = joins.map(BuilderJoin.of) }) }
}
