/// What a built query reads.
///
/// ```swift
/// let source: any DataSourceProtocol = DataSource.database(db).as("t")
/// ```
///
/// Do not declare new conformances: a query from another type fails at ``Query/execute()``.
///
/// - Note: A value; safe to share between threads.
public protocol DataSourceProtocol: Sendable {}

/// A data source that ``as(_:)`` can give an alias.
///
/// ```swift
/// let tasks = DataSource.database(db).as("t")
/// ```
///
/// Do not declare new conformances.
///
/// - Note: A value; safe to share between threads.
public protocol DataSourceAs: DataSourceProtocol {
    /// The data source under the name `alias`: properties may be qualified by it
    /// (`Expression.property("title").from("t")`, as `t.title` in SQL++), and
    /// ``SelectResult/all()`` is named by it.
    ///
    /// ```swift
    /// let tasks = DataSource.database(db).as("t")
    /// ```
    func `as`(_ alias: String) -> any DataSourceProtocol
}

/// The data sources of built queries: a database's live documents.
///
/// ```swift
/// let query = QueryBuilder.select(SelectResult.all()).from(DataSource.database(db))
/// ```
///
/// A caseless namespace; its data sources are values, safe to share between threads.
public enum DataSource {
    /// Every live document of `database`; without an alias, the data source is named by the
    /// database's name (as `FROM` names it in SQL++ text). A database closed before the query
    /// runs makes ``Query/execute()`` throw ``SetteeError/Code/notOpen``.
    ///
    /// ```swift
    /// let query = QueryBuilder.select(SelectResult.property("title")).from(DataSource.database(db))
    /// ```
    public static func database(_ database: Database) -> any DataSourceAs {
        DatabaseSource(database: database, alias: nil)
    }
}

/// `DataSource.database`.
struct DatabaseSource: DataSourceAs {
    let database: Database
    let alias: String?

    func `as`(_ alias: String) -> any DataSourceProtocol {
        DatabaseSource(database: database, alias: alias)
    }
}
