/// A property of a document's metadata, which ``from(_:)`` can qualify with the data
/// source's alias.
///
/// ```swift
/// let id = Meta.id.from("t")
/// ```
///
/// Do not declare new conformances.
///
/// - Note: A value; safe to share between threads.
public protocol MetaExpressionProtocol: ExpressionProtocol {
    /// The metadata of the data source named `alias`. An alias that names no data source of
    /// the query fails at ``Query/execute()``.
    ///
    /// ```swift
    /// let id = Meta.id.from("t")
    /// ```
    func from(_ alias: String) -> any ExpressionProtocol
}

/// Documents' metadata, SQL++'s `META()`: a result column of one is named `id`, `sequence`,
/// `deleted`, `expiration` or `revisionID`.
///
/// ```swift
/// let query = QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.expression(Meta.sequence))
///     .from(DataSource.database(db))
/// ```
///
/// A caseless namespace; its expressions are values, safe to share between threads.
public enum Meta {
    /// The document's ID (`META().id`).
    ///
    /// ```swift
    /// let one = Meta.id.equalTo(Expression.string("task-1"))
    /// ```
    public static var id: any MetaExpressionProtocol { MetaExpression(property: .id, alias: nil) }

    /// The sequence of the document's last change (`META().sequence`).
    ///
    /// ```swift
    /// let recent = Meta.sequence.greaterThan(Expression.int64(1_000))
    /// ```
    public static var sequence: any MetaExpressionProtocol { MetaExpression(property: .sequence, alias: nil) }

    /// Whether the document is deleted (`META().deleted`; always false today, as queries read
    /// live documents).
    ///
    /// ```swift
    /// let live = Meta.deleted.equalTo(Expression.boolean(false))
    /// ```
    public static var deleted: any MetaExpressionProtocol { MetaExpression(property: .deleted, alias: nil) }

    /// When the document expires, in milliseconds since 1970, or NULL (`META().expiration`).
    ///
    /// ```swift
    /// let expiring = Meta.expiration.isValued()
    /// ```
    public static var expiration: any MetaExpressionProtocol { MetaExpression(property: .expiration, alias: nil) }

    /// The ID of the document's current revision (`META().revisionID`).
    ///
    /// ```swift
    /// let revision = SelectResult.expression(Meta.revisionID)
    /// ```
    public static var revisionID: any MetaExpressionProtocol { MetaExpression(property: .revisionID, alias: nil) }
}

/// A `Meta` property, before `.from`.
struct MetaExpression: MetaExpressionProtocol, BuilderNodeProviding {
    let property: QueryExpression.MetaProperty
    let alias: String?

    var node: BuilderExpression {
        let (property, alias) = (property, alias)
        return BuilderExpression(depth: 1) { (scope: inout BuildScope) throws(SetteeError) in
            guard let alias else { return .meta(property) }
            try scope.checkAlias(alias, of: "Meta.\(property.rawValue)")
            // Which source's: a join's row has one of each (one source's reads it as META()).
            return SelectStatement.metaPath(alias, property)
        }
    }

    func from(_ alias: String) -> any ExpressionProtocol {
        MetaExpression(property: property, alias: alias)
    }
}
