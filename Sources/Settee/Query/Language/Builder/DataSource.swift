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
        DatabaseSource(database: database, name: database.name, alias: nil)
    }

    /// Every live document of `collection` (Couchbase Lite 3); without an alias, the data
    /// source is named by the collection's name (as `FROM scope.collection` names it in SQL++).
    ///
    /// ```swift
    /// let query = QueryBuilder.select(SelectResult.all())
    ///     .from(DataSource.collection(try db.defaultCollection()))   // results under "_default"
    /// ```
    public static func collection(_ collection: Collection) -> any DataSourceAs {
        DatabaseSource(database: collection.store, name: collection.name, alias: nil)
    }
}

/// `DataSource.database` and `DataSource.collection`: the database, and the name the source goes
/// by without an alias.
struct DatabaseSource: DataSourceAs {
    let database: Database
    let name: String
    let alias: String?
    /// How SQL++ names the source: `scope.collection` for a collection (a join finds it by it).
    var fullName: String { database.core.isDefault ? name : database.core.fullName }

    func `as`(_ alias: String) -> any DataSourceProtocol {
        DatabaseSource(database: database, name: name, alias: alias)
    }
}
