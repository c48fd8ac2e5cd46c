/// One column of a built query's results.
///
/// ```swift
/// let columns: [any SelectResultProtocol] = [SelectResult.expression(Meta.id), SelectResult.property("title")]
/// ```
///
/// Do not declare new conformances: a query holding another type fails at
/// ``Query/execute()``.
///
/// - Note: A value; safe to share between threads.
public protocol SelectResultProtocol: Sendable {}

/// A select result that ``as(_:)`` can name.
///
/// ```swift
/// let open = SelectResult.expression(Function.count(Expression.all())).as("open")
/// ```
///
/// Do not declare new conformances.
///
/// - Note: A value; safe to share between threads.
public protocol SelectResultAs: SelectResultProtocol {
    /// The column named `alias` (SQL++'s `AS`); nil keeps the default name.
    ///
    /// ```swift
    /// let list = SelectResult.property("taskList.id").as("list")
    /// ```
    func `as`(_ alias: String?) -> any SelectResultProtocol
}

/// A select result of the whole document, which ``from(_:)`` can qualify with the data
/// source's alias.
///
/// ```swift
/// let doc = SelectResult.all().from("t")
/// ```
///
/// Do not declare new conformances.
///
/// - Note: A value; safe to share between threads.
public protocol SelectResultFrom: SelectResultProtocol {
    /// The whole document of the data source named `alias`; nil for the query's data source.
    ///
    /// ```swift
    /// let doc = SelectResult.all().from("t")
    /// ```
    func from(_ alias: String?) -> any SelectResultProtocol
}

/// The columns of a built query's results, SQL++'s select list.
///
/// A column is named by ``SelectResultAs/as(_:)``, else as SQL++ names it: a property's last
/// name (`taskList.id` is `id`), `id`, `sequence`… for ``Meta`` properties, the data source's
/// alias (or its database's name) for ``all()``, and `$1`, `$2`… by position otherwise.
///
/// ```swift
/// let query = QueryBuilder
///     .select(SelectResult.expression(Meta.id), SelectResult.property("title"), SelectResult.all())
///     .from(DataSource.database(db))
/// ```
///
/// A caseless namespace; its results are values, safe to share between threads.
public enum SelectResult {
    /// A property's value, named by its last name.
    ///
    /// ```swift
    /// let title = SelectResult.property("title")
    /// ```
    public static func property(_ property: String) -> any SelectResultAs {
        ExpressionResult(expression: Expression.property(property), alias: nil)
    }

    /// An expression's value.
    ///
    /// ```swift
    /// let total = SelectResult.expression(Expression.property("price").multiply(Expression.property("qty"))).as("total")
    /// ```
    public static func expression(_ expression: any ExpressionProtocol) -> any SelectResultAs {
        ExpressionResult(expression: expression, alias: nil)
    }

    /// The whole document (SQL++'s `*`), as a dictionary column named by the data source's
    /// alias.
    ///
    /// ```swift
    /// for r in try QueryBuilder.select(SelectResult.all()).from(DataSource.database(db)).execute() {
    ///     print(r.dictionary(forKey: db.name) ?? [:])
    /// }
    /// ```
    public static func all() -> any SelectResultFrom {
        AllResult(alias: nil)
    }
}

/// `SelectResult.expression` and `.property`.
struct ExpressionResult: SelectResultAs {
    let expression: any ExpressionProtocol
    let alias: String?

    func `as`(_ alias: String?) -> any SelectResultProtocol {
        ExpressionResult(expression: expression, alias: alias)
    }
}

/// `SelectResult.all()`.
struct AllResult: SelectResultFrom {
    let alias: String?

    func from(_ alias: String?) -> any SelectResultProtocol {
        AllResult(alias: alias)
    }
}

extension BuilderResult {
    /// The builder's form of a public select result.
    static func of(_ r: any SelectResultProtocol) -> BuilderResult {
        switch r {
        case let e as ExpressionResult: .expression(.of(e.expression), name: e.alias)
        case let a as AllResult: .all(from: a.alias)
        default: .foreign("\(type(of: r))")
        }
    }
}
