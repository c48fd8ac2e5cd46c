/// A Mango query, checked and compiled once: what the sync server's `_find` hands the library
/// (no JSON or SQL++ text made again on the way), and what ``Database/createQuery(mango:)``
/// parses its text into.
///
/// The selector is compiled when it is made (``Selector/init(_:)``), so an error in it is
/// met where the request is read; selectors combine (``Selector/all(_:)``) without being
/// compiled again.
///
/// ```swift
/// var mango = MangoQuery(selector: try MangoQuery.Selector(["type": "task"]))
/// mango.sort = try MangoQuery.sort(["createdAt"])
/// mango.limit = 20
/// let query = try db.createQuery(mango: mango)
/// ```
///
/// - Note: A value type; safe to share between threads.
@_spi(Server) public struct MangoQuery: Sendable {
    /// A compiled selector (CouchDB 3's language: see ``Database/createQuery(mango:)``).
    ///
    /// ```swift
    /// let tasks = try MangoQuery.Selector(["type": "task", "done": false])
    /// ```
    ///
    /// - Note: A value type; safe to share between threads.
    public struct Selector: Sendable {
        /// The condition it compiles to.
        let condition: QueryExpression
        /// The terms it holds, counted against ``MangoCompiler/maxTerms`` with the query's.
        let terms: Int

        /// Compiles a selector.
        ///
        /// ```swift
        /// let recent = try MangoQuery.Selector(["createdAt": ["$gt": 1_700_000_000]])
        /// ```
        ///
        /// - Throws: ``SetteeError/Code/invalidParameter`` naming what is wrong (an unknown
        ///   operator, an argument of the wrong kind, a selector deeper or wider than the
        ///   bounds).
        public init(_ json: JSONValue) throws(SetteeError) {
            (condition, terms) = try MangoCompiler.selector(json)
        }

        private init(condition: QueryExpression, terms: Int) {
            self.condition = condition
            self.terms = terms
        }

        /// A selector every one of `selectors` must hold for (the empty list: every document).
        ///
        /// ```swift
        /// let mine = MangoQuery.Selector.all([request, try MangoQuery.Selector(["owner": "ann"])])
        /// ```
        public static func all(_ selectors: [Selector]) -> Selector {
            Selector(condition: .all(selectors.map(\.condition)), terms: selectors.reduce(0) { $0 + $1.terms })
        }
    }

    /// One key of `sort`: a field, ascending or descending.
    ///
    /// ```swift
    /// let newest = try MangoQuery.SortField("createdAt", descending: true)
    /// ```
    ///
    /// - Note: A value type; safe to share between threads.
    public struct SortField: Sendable, Hashable {
        /// The field's name as Mango writes it (dots separate names, `\.` is a dot in one).
        public let field: String
        /// Whether the largest comes first.
        public let descending: Bool
        let path: PropertyPath

        /// - Throws: ``SetteeError/Code/invalidParameter`` for a field name Mango cannot read.
        public init(_ field: String, descending: Bool = false) throws(SetteeError) {
            self.field = field
            self.descending = descending
            path = try MangoCompiler.path(field)
        }
    }

    /// What must hold for a document to match.
    public var selector: Selector
    /// The order of the matches, all keys in one direction; empty for the order of the index
    /// read (by ID without one). Sorting by a field keeps only documents that have it.
    public var sort: [SortField] = []
    /// The fields each match gives (dotted names nest), or nil for the whole document.
    public var fields: [String]?
    /// The most matches given, nil for all of them.
    public var limit: Int?
    /// How many matches are passed over first.
    public var skip = 0
    /// Only the documents of this partition: those whose ID is `partition:…` (CouchDB's
    /// partitioned databases). The query reads their range of IDs, or an index whose first
    /// expression is ``partitionExpression`` at this value, never the rest of the database.
    ///
    /// ```swift
    /// mango.partition = "sensor-17"
    /// ```
    @_spi(Server) public var partition: String?

    /// The expression of a document's partition (its ID up to the first `:`), as an index
    /// expression: an index whose first expression it is serves one partition's queries.
    ///
    /// ```swift
    /// try db.createIndex(ValueIndexConfiguration([MangoQuery.partitionExpression, "n"]), name: "by-n")
    /// ```
    @_spi(Server) public static var partitionExpression: String { QueryExpression.partitionOfID.sqlText }

    /// A query of `selector`, every match, whole documents, in no set order.
    ///
    /// ```swift
    /// let everything = MangoQuery(selector: try MangoQuery.Selector([:]))
    /// ```
    public init(selector: Selector) {
        self.selector = selector
    }

    /// The members a query's JSON may have. `_find`'s others (`bookmark`, `use_index`, `r`,
    /// `conflicts`, `update`, `stable`, `execution_stats`) belong to the server.
    public static let members: Set<String> = ["selector", "sort", "fields", "limit", "skip"]

    /// A query from its JSON: `selector`, and optionally `sort`, `fields`, `limit`, `skip`.
    ///
    /// ```swift
    /// let q = try MangoQuery(parsing: ["selector": ["type": "task"], "limit": 20])
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` naming what is wrong.
    public init(parsing json: JSONValue) throws(SetteeError) {
        guard case .object(let q) = json else { throw MangoCompiler.fail("a Mango query is a JSON object") }
        for key in q.keys where !Self.members.contains(key) {
            throw MangoCompiler.fail("unknown member \(key) (a Mango query has \(Self.members.sorted().joined(separator: ", ")))")
        }
        guard let selector = q["selector"] else { throw MangoCompiler.fail("missing required key: selector") }
        self.selector = try Selector(selector)
        if let sort = q["sort"] { self.sort = try Self.sort(sort) }
        if let fields = q["fields"] {
            guard case .array(let list) = fields else { throw MangoCompiler.fail("fields must be an array of field names") }
            guard list.count <= MangoCompiler.maxTerms else { throw MangoCompiler.tooManyTerms() }
            var names: [String] = []
            for f in list {
                guard case .string(let name) = f else { throw MangoCompiler.fail("fields must be an array of field names") }
                names.append(name)
            }
            self.fields = names
        }
        func count(_ name: String) throws(SetteeError) -> Int? {
            guard let value = q[name] else { return nil }
            guard case .int(let n) = value, n >= 0, n <= Int64(Int32.max) else {
                throw MangoCompiler.fail("\(name) must be a non-negative integer")
            }
            return Int(n)
        }
        limit = try count("limit")
        skip = try count("skip") ?? 0
    }

    /// `sort` as Mango writes it: field names, or `{"field": "asc" | "desc"}`, all in one
    /// direction.
    ///
    /// ```swift
    /// let order = try MangoQuery.sort([["createdAt": "desc"]])
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for another shape or mixed directions.
    public static func sort(_ value: JSONValue) throws(SetteeError) -> [SortField] {
        guard case .array(let list) = value else { throw MangoCompiler.fail("sort must be an array") }
        guard list.count <= MangoCompiler.maxTerms else { throw MangoCompiler.tooManyTerms() }
        var out: [SortField] = []
        for item in list {
            switch item {
            case .string(let name):
                out.append(try SortField(name))
            case .object(let o) where o.count == 1:
                guard let (name, direction) = o.first, case .string(let d) = direction, d == "asc" || d == "desc" else {
                    throw MangoCompiler.fail("sort direction of \(o.keys.first ?? "") must be \"asc\" or \"desc\"")
                }
                out.append(try SortField(name, descending: d == "desc"))
            default:
                throw MangoCompiler.fail("each sort entry is a field name or {\"field\": \"asc\" | \"desc\"}")
            }
        }
        if Set(out.map(\.descending)).count > 1 { throw MangoCompiler.fail("sorts currently only support a single direction for all fields") }
        return out
    }
}
