@_spi(Server) import Settee

extension CouchAPI {
    /// A path's first segment read as Sync Gateway 3's keyspace: `db.scope.collection`, or
    /// `db.collection` in scope `_default` (Formats/http-api.md, "Keyspaces").
    struct Keyspace: Equatable {
        let database: String
        let scope: String
        let collection: String

        /// The database's default collection, which `/db/…` also names.
        var isDefault: Bool { scope == Scope.defaultScopeName && collection == Collection.defaultCollectionName }
        var name: String { "\(database).\(scope).\(collection)" }
    }

    /// The keyspace a path's first segment names; nil for a segment without a dot (a database,
    /// or a server endpoint such as `_all_dbs`). Database names have no dot, so a dot always
    /// starts a keyspace.
    ///
    /// - Throws: 400 for a keyspace of more than three parts, or a scope or collection name
    ///   Couchbase Lite would refuse.
    static func keyspace(_ segment: String) throws -> Keyspace? {
        guard !segment.hasPrefix("_"), segment.utf8.contains(UInt8(ascii: ".")) else { return nil }
        let parts = segment.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else {
            throw CouchError.badRequest("a keyspace is db, db.collection or db.scope.collection")
        }
        let database = parts[0]
        let scope = parts.count == 3 ? parts[1] : Scope.defaultScopeName
        let collection = parts[parts.count - 1]
        guard ServerConfiguration.isValidDatabaseName(database) else {
            throw CouchError.illegalDatabaseName(database)
        }
        do {
            try Database.checkKeyspaceName(scope, of: "scope")
            try Database.checkKeyspaceName(collection, of: "collection")
        } catch {
            throw CouchError.badRequest("keyspace \(segment.prefix(300)): \(error.message)")
        }
        return Keyspace(database: database, scope: scope, collection: collection)
    }
}
