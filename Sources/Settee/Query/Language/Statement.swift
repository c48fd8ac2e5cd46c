/// The statement every query language compiles to: a parsed `SELECT` of SQL++ for Mobile, what
/// QueryBuilder builds, and what Mango selectors and views are turned into.
///
/// ```swift
/// let s = try SQLParser.parse("SELECT META().id, title FROM _ WHERE type = 'task' ORDER BY createdAt DESC LIMIT 20")
/// ```
///
/// - Note: A value type; safe to share between threads.
struct SelectStatement: Sendable, Hashable {
    /// One item of the select list.
    enum Item: Sendable, Hashable {
        /// `*` or `alias.*`: the whole document, under the data source's name.
        case all
        /// An expression, with the name its column takes in a result.
        case expression(QueryExpression, name: String)
    }

    /// One key of `ORDER BY`.
    struct Ordering: Sendable, Hashable {
        var expression: QueryExpression
        var descending: Bool
    }

    var distinct = false
    var items: [Item] = []
    /// The data source: `_` or `_default` (the database's documents), or a collection name.
    var source = "_"
    /// The source's alias (its name when none is given).
    var alias = "_"
    var whereClause: QueryExpression?
    var groupBy: [QueryExpression] = []
    var having: QueryExpression?
    var orderBy: [Ordering] = []
    var limit: QueryExpression?
    var offset: QueryExpression?
    /// Set when the statement reads the rows of a map index (a view) instead of documents.
    var mapSource: MapSource?
    /// `JOIN`s after the first source, in order (empty for a query of one source).
    var joins: [Join] = []

    /// One `JOIN` of a statement: another source (a collection of the same database, or the
    /// same one again) under its own alias, combined with the rows so far.
    struct Join: Sendable, Hashable {
        enum Kind: String, Sendable, Hashable {
            /// Rows with a match only.
            case inner = "INNER"
            /// Every row so far; the joined source MISSING where nothing matches.
            case leftOuter = "LEFT OUTER"
            /// Every combination (no `ON`).
            case cross = "CROSS"
        }
        var kind: Kind
        var source: String
        var alias: String
        /// nil for `CROSS JOIN`.
        var on: QueryExpression?
    }

    /// What a joined row's property holding a source's `META()` is named after: a name no
    /// identifier can spell. `META(alias).id` is parsed as `⟨this⟩.alias.id`, and read from a
    /// joined row's `⟨this⟩alias.id` (``qualifyingForJoin()``).
    static let metaKey = "\u{1}meta"

    /// A path for `META(alias).property`; read as ``QueryExpression/meta(_:)`` once the
    /// statement has one source (``resolvingAlias()``).
    static func metaPath(_ alias: String, _ property: QueryExpression.MetaProperty) -> QueryExpression {
        .property(PropertyPath(components: [.name(metaKey), .name(alias), .name(property.rawValue)]))
    }

    /// Every alias of the statement: the first source's, then each join's.
    var aliases: [String] { [alias] + joins.map(\.alias) }

    /// Only documents whose ID begins with these bytes (a Mango query of one partition,
    /// ``MangoQuery/partition``): a scan of every document reads their range of IDs alone,
    /// and an index's rows of other documents are passed over.
    var documentIDPrefix: String?

    /// The rows a view query reads (CouchDB's view parameters, typed): a map index's key
    /// ranges in order, their direction, and how rows are grouped (nil: rows one by one).
    /// `readingValues`: whether a grouped read needs the rows' values (a `_sum`), not only
    /// how many rows each group has (a `_count`).
    struct MapSource: Sendable, Hashable {
        var index: String
        var ranges: [MapIndexRange]
        var descending: Bool
        var grouping: MapIndexGrouping?
        var readingValues: Bool

        /// The statement of a view query: `SELECT key, value, META().id` from the index's rows,
        /// in key order (`ORDER BY key`, descending when asked), grouped by `grouping`.
        var statement: SelectStatement {
            var s = SelectStatement()
            s.source = index
            s.alias = index
            s.items = [.expression(.property(PropertyPath(components: [.name("key")])), name: "key"),
                       .expression(.property(PropertyPath(components: [.name("value")])), name: "value"),
                       .expression(.meta(.id), name: "id")]
            s.orderBy = [.init(expression: .property(PropertyPath(components: [.name("key")])), descending: descending)]
            s.mapSource = self
            return s
        }
    }

    /// A column's name when the query gives none: a property's last name, `id` for
    /// `META().id` (and so on), else `$1`, `$2`… by the column's position (Couchbase Lite's rule,
    /// for SQL++ text and QueryBuilder alike).
    static func defaultColumnName(_ e: QueryExpression, index: Int) -> String {
        switch e {
        case .property(let path):
            for c in path.components.reversed() { if case .name(let n) = c { return n } }
        case .meta(let m):
            return m.rawValue
        default: break
        }
        return "$\(index + 1)"
    }

    /// The names of the result's columns, in select-list order (`*` is named by the data
    /// source's alias, as Couchbase Lite names it).
    var columnNames: [String] {
        items.map { item in
            switch item {
            case .all: alias
            case .expression(_, let name): name
            }
        }
    }

    /// The statement of a join, checked: its aliases distinct, every `alias.` path read in
    /// the joined row as it is, a path that names no alias read as the first source's, and
    /// `*` one column per source, named by its alias (Couchbase Lite's results of a join).
    func qualifyingForJoin() throws(SetteeError) -> SelectStatement {
        let names = aliases
        guard Set(names).count == names.count else {
            throw SetteeError(.invalidParameter, "query: each source of a join needs an alias of its own (\(names.joined(separator: ", ")))")
        }
        var s = self
        let known = Set(names)
        let first = alias
        func qualify(_ e: QueryExpression) -> QueryExpression { e.qualifyingPaths(known: known, first: first) }
        s.items = []
        for item in items {
            switch item {
            case .all: for a in names { s.items.append(.expression(.property(PropertyPath(components: [.name(a)])), name: a)) }
            case .expression(let e, let name): s.items.append(.expression(qualify(e), name: name))
            }
        }
        s.whereClause = whereClause.map(qualify)
        s.groupBy = groupBy.map(qualify)
        s.having = having.map(qualify)
        s.joins = joins.map { j in Join(kind: j.kind, source: j.source, alias: j.alias, on: j.on.map(qualify)) }
        var named: [String: QueryExpression] = [:]
        for case .expression(let e, let name) in s.items where named[name] == nil { named[name] = e }
        s.orderBy = orderBy.map { o in
            if case .property(let path) = o.expression, path.components.count == 1, case .name(let n) = path.components[0],
               !known.contains(n), let column = named[n] {
                return Ordering(expression: column, descending: o.descending)
            }
            return Ordering(expression: qualify(o.expression), descending: o.descending)
        }
        return s
    }

    /// The statement with `alias.property` read as `property` (the data source's own name
    /// prefixes a path as its alias does).
    func resolvingAlias() -> SelectStatement {
        var s = self
        let names = Set([alias, source])
        func strip(_ e: QueryExpression) -> QueryExpression { e.removingPrefix(names) }
        s.items = items.map { item in
            if case .expression(let e, let name) = item { return .expression(strip(e), name: name) }
            return item
        }
        s.whereClause = whereClause.map(strip)
        s.groupBy = groupBy.map(strip)
        s.having = having.map(strip)
        // ORDER BY may name a column by its AS name (`ORDER BY open DESC`).
        var named: [String: QueryExpression] = [:]
        for case .expression(let e, let name) in s.items where named[name] == nil { named[name] = e }
        s.orderBy = orderBy.map { o in
            let e = strip(o.expression)
            if case .property(let path) = e, path.components.count == 1, case .name(let n) = path.components[0],
               let column = named[n] {
                return Ordering(expression: column, descending: o.descending)
            }
            return Ordering(expression: e, descending: o.descending)
        }
        return s
    }
}

extension QueryExpression {
    /// The expression with each property path that starts with one of `names` and goes on
    /// past it shortened by that first step, and `META(alias)` read as `META()`.
    func removingPrefix(_ names: Set<String>) -> QueryExpression {
        replacing { e in
            guard case .property(let path) = e, path.components.count > 1, case .name(let head) = path.components[0] else { return nil }
            if head == SelectStatement.metaKey {
                // `META(alias).p` of a statement of one source: its META().
                guard path.components.count == 3, case .name(let p) = path.components[2], let m = MetaProperty(rawValue: p) else { return nil }
                return .meta(m)
            }
            return names.contains(head) ? .property(PropertyPath(components: Array(path.components.dropFirst()))) : nil
        }
    }

    /// The expression of a join's statement: each path that starts with none of the `known`
    /// aliases prefixed with `first`, `META(alias).p` read from the joined row's
    /// `⟨metaKey⟩alias`, and `META()` as `META(first)`.
    func qualifyingPaths(known: Set<String>, first: String) -> QueryExpression {
        replacing { e in
            switch e {
            case .property(let path):
                if case .name(let head)? = path.components.first {
                    if known.contains(head) { return nil }
                    if head == SelectStatement.metaKey, path.components.count == 3, case .name(let a) = path.components[1] {
                        return .property(PropertyPath(components: [.name(SelectStatement.metaKey + a), path.components[2]]))
                    }
                }
                return .property(PropertyPath(components: [.name(first)] + path.components))
            case .meta(let m):
                return .property(PropertyPath(components: [.name(SelectStatement.metaKey + first), .name(m.rawValue)]))
            default:
                return nil
            }
        }
    }
}
