/// A QueryBuilder expression before compilation: what it becomes once the query's data source
/// and the variables in scope are known (`.from(alias)` must name the data source; a variable
/// must be bound by an enclosing `ANY`/`EVERY`).
///
/// The builder's methods cannot throw (Couchbase Lite's do not), so a misuse (an invalid path,
/// a value JSON cannot hold) becomes a node that fails when compiled: ``Query/execute()``
/// throws it.
///
/// - Note: A value type; safe to share between threads.
struct BuilderExpression: Sendable {
    /// How deep the tree under this node is. Bounded when the node is built, as for parsed
    /// text: evaluating (or releasing) a tree recurses through every level.
    let depth: Int
    let build: @Sendable (inout BuildScope) throws(SetteeError) -> QueryExpression

    /// A complete expression.
    static func leaf(_ e: QueryExpression) -> BuilderExpression {
        BuilderExpression(depth: 1) { _ throws(SetteeError) in e }
    }

    /// A misuse, reported at execution.
    static func failure(_ message: String) -> BuilderExpression {
        let error = SetteeError(.invalidParameter, "QueryBuilder: \(message)")
        return BuilderExpression(depth: 1) { _ throws(SetteeError) in throw error }
    }

    /// A node over `children`, or a failure when it would nest deeper than parsed text may.
    static func node(_ children: [BuilderExpression],
                     _ make: @escaping @Sendable (inout BuildScope, [BuilderExpression]) throws(SetteeError) -> QueryExpression) -> BuilderExpression {
        let depth = (children.map(\.depth).max() ?? 0) + 1
        guard depth <= SQLParser.maxDepth else {
            // The children are dropped here, so no tree deeper than the bound ever exists.
            return .failure("expressions nested more than \(SQLParser.maxDepth) deep")
        }
        return BuilderExpression(depth: depth) { (scope: inout BuildScope) throws(SetteeError) in try make(&scope, children) }
    }

    static func unary(_ a: BuilderExpression, _ make: @escaping @Sendable (QueryExpression) -> QueryExpression) -> BuilderExpression {
        node([a]) { (scope: inout BuildScope, _) throws(SetteeError) in make(try a.build(&scope)) }
    }

    static func binary(_ a: BuilderExpression, _ b: BuilderExpression,
                       _ make: @escaping @Sendable (QueryExpression, QueryExpression) -> QueryExpression) -> BuilderExpression {
        node([a, b]) { (scope: inout BuildScope, _) throws(SetteeError) in
            let x = try a.build(&scope)
            return make(x, try b.build(&scope))
        }
    }

    static func list(_ items: [BuilderExpression], _ make: @escaping @Sendable ([QueryExpression]) -> QueryExpression) -> BuilderExpression {
        node(items) { (scope: inout BuildScope, items) throws(SetteeError) in
            var compiled: [QueryExpression] = []
            for i in items { compiled.append(try i.build(&scope)) }
            return make(compiled)
        }
    }
}

/// What compiling a builder expression knows: the data source's names and the variables bound
/// around the expression.
struct BuildScope {
    /// The alias of the data source, or its database's name when it has none.
    let alias: String
    /// The database's name: a property may be qualified by it, as by the alias.
    let sourceName: String
    /// Innermost last.
    var variables: [String] = []
    /// The aliases of the sources joined to the first (empty: a query of one source).
    var joined: [String] = []

    /// Checks that `.from(name)` names a data source.
    func checkAlias(_ name: String, of what: String) throws(SetteeError) {
        guard name == alias || name == sourceName || joined.contains(name) else {
            throw SetteeError(.invalidParameter, "QueryBuilder: \(what).from(\"\(name)\") names no data source of the query (its alias is \"\(alias)\")")
        }
    }
}

/// The builder's own conformances to the public protocols carry their nodes; the protocols
/// have no other conformances.
protocol BuilderNodeProviding {
    var node: BuilderExpression { get }
}

extension BuilderExpression {
    /// The node of a public expression; a failure for a type that is not one of Settee's.
    static func of(_ e: any ExpressionProtocol) -> BuilderExpression {
        guard let provider = e as? any BuilderNodeProviding else {
            return .failure("\(type(of: e)) is not an expression Settee built (ExpressionProtocol takes no other conformances)")
        }
        return provider.node
    }
}

/// An ordering before compilation.
struct BuilderOrdering: Sendable {
    var expression: BuilderExpression
    var descending: Bool
}

/// One select result before compilation.
enum BuilderResult: Sendable {
    /// `SelectResult.all()`, with the alias `.from` gave.
    case all(from: String?)
    /// An expression and the name `.as` gave it.
    case expression(BuilderExpression, name: String?)
    /// A conformance that is not Settee's.
    case foreign(String)
}

/// The data source of a built query.
struct BuilderSource: Sendable {
    let database: Database
    /// The database's name, or the collection's.
    let name: String
    let alias: String?
}

/// What the stages of QueryBuilder accumulate, compiled to the ``SelectStatement`` SQL++ text
/// also parses into: one plan for both.
struct BuilderParts: Sendable {
    var distinct = false
    var results: [BuilderResult] = []
    var source: BuilderSource?
    var whereClause: BuilderExpression?
    var groupBy: [BuilderExpression] = []
    var having: BuilderExpression?
    var orderBy: [BuilderOrdering] = []
    var limit: BuilderExpression?
    var offset: BuilderExpression?
    var joins: [BuilderJoin] = []
    /// A data source that is not Settee's.
    var sourceError: String?

    /// The statement, with aliases resolved as the parser resolves them.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for the first misuse found.
    func compile() throws(SetteeError) -> SelectStatement {
        if let sourceError { throw SetteeError(.invalidParameter, "QueryBuilder: \(sourceError)") }
        guard let source else {
            throw SetteeError(.invalidParameter, "QueryBuilder: a query needs a data source (.from(DataSource.database(db)))")
        }
        guard !results.isEmpty else {
            throw SetteeError(.invalidParameter, "QueryBuilder: a query selects at least one result")
        }
        if let alias = source.alias, alias.isEmpty {
            throw SetteeError(.invalidParameter, "QueryBuilder: a data source's alias may not be empty")
        }
        var scope = BuildScope(alias: source.alias ?? source.name, sourceName: source.name)
        var s = SelectStatement()
        for j in joins {
            if let error = j.error { throw SetteeError(.invalidParameter, "QueryBuilder: \(error)") }
            guard let js = j.source else { continue }
            if let alias = js.alias, alias.isEmpty { throw SetteeError(.invalidParameter, "QueryBuilder: a data source's alias may not be empty") }
            scope.joined.append(js.alias ?? js.name)
        }
        s.distinct = distinct
        s.source = source.name
        s.alias = scope.alias
        for (index, r) in results.enumerated() {
            switch r {
            case .all(let from):
                if let from { try scope.checkAlias(from, of: "SelectResult.all()") }
                // In a join, `SelectResult.all().from("l")` is that source's document alone.
                if let from, !joins.isEmpty {
                    s.items.append(.expression(.property(PropertyPath(components: [.name(from)])), name: from))
                } else {
                    s.items.append(.all)
                }
            case .expression(let e, let name):
                let compiled = try e.build(&scope)
                // `SelectResult.expression(Expression.all())` is the whole document, named as `*` is.
                if name == nil, case .property(let path) = compiled, path.components.isEmpty {
                    s.items.append(.all)
                } else {
                    s.items.append(.expression(compiled, name: name ?? SelectStatement.defaultColumnName(compiled, index: index)))
                }
            case .foreign(let type):
                throw SetteeError(.invalidParameter, "QueryBuilder: \(type) is not a select result Settee built (SelectResultProtocol takes no other conformances)")
            }
        }
        s.whereClause = try whereClause?.build(&scope)
        for g in groupBy { s.groupBy.append(try g.build(&scope)) }
        s.having = try having?.build(&scope)
        for o in orderBy { s.orderBy.append(.init(expression: try o.expression.build(&scope), descending: o.descending)) }
        s.limit = try limit?.build(&scope)
        s.offset = try offset?.build(&scope)
        if !joins.isEmpty {
            for j in joins {
                guard let js = j.source else { continue }
                // The joined source found as SQL++ text names it, by its database object.
                s.joins.append(.init(kind: j.kind, source: js.name, alias: js.alias ?? js.name.split(separator: ".").last.map(String.init) ?? js.name,
                                     on: try j.on?.build(&scope)))
            }
            return try s.qualifyingForJoin()
        }
        let resolved = s.resolvingAlias()
        try resolved.checkFullText()
        return resolved
    }
}
