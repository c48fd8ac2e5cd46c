/// One key of a built query's order.
///
/// ```swift
/// let newestFirst: any OrderingProtocol = Ordering.property("createdAt").descending()
/// ```
///
/// Do not declare new conformances: a query ordered by another type fails at
/// ``Query/execute()``.
///
/// - Note: A value; safe to share between threads.
public protocol OrderingProtocol: Sendable {}

/// The keys of a built query's order (SQL++'s `ORDER BY`), in collation order: MISSING
/// first, then NULL, then values as CouchDB's collation orders them.
///
/// ```swift
/// let query = QueryBuilder.select(SelectResult.property("title"))
///     .from(DataSource.database(db))
///     .orderBy(Ordering.property("createdAt").descending(), Ordering.expression(Meta.id))
/// ```
///
/// A caseless namespace; its orderings are values, safe to share between threads.
public enum Ordering {
    /// An ordering whose direction may still be chosen; ascending unless
    /// ``descending()`` says otherwise. (Couchbase Lite's `SortOrder`, nested here so that
    /// Foundation's `SortOrder` keeps its name in code importing both.)
    ///
    /// ```swift
    /// let byTitle: any Ordering.SortOrder = Ordering.property("title")
    /// ```
    ///
    /// Do not declare new conformances.
    public protocol SortOrder: OrderingProtocol {
        /// The key in ascending order (`ASC`).
        ///
        /// ```swift
        /// let oldestFirst = Ordering.property("createdAt").ascending()
        /// ```
        func ascending() -> any OrderingProtocol

        /// The key in descending order (`DESC`).
        ///
        /// ```swift
        /// let newestFirst = Ordering.property("createdAt").descending()
        /// ```
        func descending() -> any OrderingProtocol
    }

    /// Ordering by a property (or by a result column of that name, as SQL++ text orders
    /// by an `AS` name).
    ///
    /// ```swift
    /// let newestFirst = Ordering.property("createdAt").descending()
    /// ```
    public static func property(_ property: String) -> any SortOrder {
        ExpressionOrdering(expression: Expression.property(property), isDescending: false)
    }

    /// Ordering by an expression's value.
    ///
    /// ```swift
    /// let byName = Ordering.expression(Function.lower(Expression.property("name")))
    /// ```
    public static func expression(_ expression: any ExpressionProtocol) -> any SortOrder {
        ExpressionOrdering(expression: expression, isDescending: false)
    }
}

/// `Ordering.property` and `.expression`.
struct ExpressionOrdering: Ordering.SortOrder {
    let expression: any ExpressionProtocol
    let isDescending: Bool

    func ascending() -> any OrderingProtocol { ExpressionOrdering(expression: expression, isDescending: false) }
    func descending() -> any OrderingProtocol { ExpressionOrdering(expression: expression, isDescending: true) }
}

extension BuilderOrdering {
    /// The builder's form of a public ordering; a failing one for a type that is not Settee's.
    static func of(_ o: any OrderingProtocol) -> BuilderOrdering {
        guard let e = o as? ExpressionOrdering else {
            return BuilderOrdering(expression: .failure("\(type(of: o)) is not an ordering Settee built (OrderingProtocol takes no other conformances)"),
                                   descending: false)
        }
        return BuilderOrdering(expression: .of(e.expression), descending: e.isDescending)
    }
}
