/// The full-text functions of QueryBuilder: `MATCH` and `RANK` of SQL++, over a
/// ``FullTextIndexConfiguration`` index.
///
/// ```swift
/// try db.createIndex(FullTextIndexConfiguration(["title", "notes"], language: "english"), name: "text")
/// let query = QueryBuilder
///     .select(SelectResult.expression(Meta.id), SelectResult.property("title"))
///     .from(DataSource.database(db))
///     .where(FullTextFunction.match(index: "text", query: "milk OR eggs"))
///     .orderBy(Ordering.expression(FullTextFunction.rank(index: "text")).descending())
/// ```
///
/// A query has one `match` at most, in `where` at its top level or joined there by `and`
/// (not under `or` or `not`); `execute()` throws otherwise.
///
/// A caseless namespace; its expressions are values, safe to share between threads.
public enum FullTextFunction {
    /// Whether the document holds the words of `query` in the full-text index `index`:
    /// words (all of them: `milk eggs`), `OR`, `NOT`, prefixes (`mil*`), phrases in double
    /// quotes and parentheses, as the DocC article Querying describes.
    ///
    /// ```swift
    /// let found = FullTextFunction.match(index: "text", query: "\"fresh milk\" OR cream*")
    /// ```
    public static func match(index: String, query: String) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.match(index: index, query: .literal(.string(query)))))
    }

    /// ``match(index:query:)`` with the query given by an expression: a parameter, so that
    /// one compiled query serves every search.
    ///
    /// ```swift
    /// let q = QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.database(db))
    ///     .where(FullTextFunction.match(index: "text", query: Expression.parameter("search")))
    /// q.parameters = Parameters().setString("milk", forName: "search")
    /// ```
    public static func match(index: String, query: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(node: .unary(.of(query)) { .match(index: index, query: $0) })
    }

    /// How well the document matches the query's `match` of `index` (BM25: higher is more
    /// relevant; order by it descending).
    ///
    /// ```swift
    /// let best = Ordering.expression(FullTextFunction.rank(index: "text")).descending()
    /// ```
    public static func rank(index: String) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.rank(index: index)))
    }
}
