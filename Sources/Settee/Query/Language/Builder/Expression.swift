import Foundation

/// An expression of a query built with ``QueryBuilder``: a property, a constant, a parameter,
/// or an operation on other expressions.
///
/// Expressions are made by ``Expression``, ``Meta``, ``Function``, ``ArrayFunction`` and
/// ``ArrayExpression``, and combined with the methods of this protocol:
///
/// ```swift
/// let open = Expression.property("type").equalTo(Expression.string("task"))
///     .and(Expression.property("complete").equalTo(Expression.boolean(false)))
/// ```
///
/// Do not declare new conformances: Settee compiles only the expressions it builds, and a
/// query holding another type fails at ``Query/execute()``.
///
/// - Note: Expressions are values; safe to share between threads.
public protocol ExpressionProtocol: Sendable {}

/// A property expression, which ``from(_:)`` can qualify with the data source's alias.
///
/// ```swift
/// let title = Expression.property("title").from("t")
/// ```
///
/// Do not declare new conformances.
///
/// - Note: A value; safe to share between threads.
public protocol PropertyExpressionProtocol: ExpressionProtocol {
    /// The property of the data source named `alias` (its `as` alias, or its database's name).
    /// An alias that names no data source of the query fails at ``Query/execute()``.
    ///
    /// ```swift
    /// let title = Expression.property("title").from("t")
    /// ```
    func from(_ alias: String) -> any ExpressionProtocol
}

/// The names of Settee's expressions, as Couchbase Lite's QueryBuilder spells them: properties,
/// constants, parameters, and logical negation.
///
/// ```swift
/// let isTask = Expression.property("type").equalTo(Expression.string("task"))
/// let inList = Expression.property("list.id").equalTo(Expression.parameter("list"))
/// ```
///
/// A caseless namespace; its expressions are values, safe to share between threads. In code
/// that imports Foundation too, `Expression` is Settee's (Settee's declaration shadows
/// Foundation's); spell `Foundation.Expression` for the other.
public enum Expression {
    /// A property of the document, by its path (`"list.id"`, `"tags[0]"`, `"a\\.b"` for the
    /// one property `a.b`), MISSING where the document has none. An invalid path fails at
    /// ``Query/execute()``.
    ///
    /// ```swift
    /// let listID = Expression.property("list.id")
    /// ```
    public static func property(_ property: String) -> any PropertyExpressionProtocol {
        PropertyExpression(path: property, alias: nil)
    }

    /// The whole document, as an object. In ``Function/count(_:)`` it counts rows, as
    /// `count(*)` does.
    ///
    /// ```swift
    /// let n = SelectResult.expression(Function.count(Expression.all())).as("n")
    /// ```
    public static func all() -> any PropertyExpressionProtocol {
        DocumentExpression(alias: nil)
    }

    /// A constant: nil or `NSNull` (NULL), a `JSONValue`, `String`, `Bool`, an integer, a
    /// `Double` or `Float`, a `Date` (its ISO-8601 string), or an array or `[String: Any]`
    /// dictionary of these. Another type, or a number JSON cannot hold (NaN, infinity), fails
    /// at ``Query/execute()``.
    ///
    /// ```swift
    /// let tags = Expression.value(["urgent", "home"])
    /// ```
    public static func value(_ value: Any?) -> any ExpressionProtocol {
        do throws(SetteeError) {
            return BuiltExpression(node: .leaf(.literal(try BuilderValue.json(value, depth: 0))))
        } catch {
            return BuiltExpression(node: .failure(error.message))
        }
    }

    /// A string constant; nil is NULL.
    ///
    /// ```swift
    /// let task = Expression.string("task")
    /// ```
    public static func string(_ value: String?) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.literal(value.map(JSONValue.string) ?? .null)))
    }

    /// An integer constant.
    ///
    /// ```swift
    /// let twenty = Expression.int(20)
    /// ```
    public static func int(_ value: Int) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.literal(.int(Int64(value)))))
    }

    /// A 64-bit integer constant.
    ///
    /// ```swift
    /// let big = Expression.int64(1 << 40)
    /// ```
    public static func int64(_ value: Int64) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.literal(.int(value))))
    }

    /// A number constant. NaN and infinities, which JSON cannot hold, fail at
    /// ``Query/execute()``.
    ///
    /// ```swift
    /// let price = Expression.double(2.5)
    /// ```
    public static func double(_ value: Double) -> any ExpressionProtocol {
        Expression.value(value)
    }

    /// A number constant from a `Float` (as the `Double` of the same value).
    ///
    /// ```swift
    /// let ratio = Expression.float(0.5)
    /// ```
    public static func float(_ value: Float) -> any ExpressionProtocol {
        Expression.value(value)
    }

    /// A boolean constant.
    ///
    /// ```swift
    /// let done = Expression.property("complete").equalTo(Expression.boolean(true))
    /// ```
    public static func boolean(_ value: Bool) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.literal(.bool(value))))
    }

    /// A date constant: the ISO-8601 string (UTC, milliseconds) documents store dates as, so
    /// that dates compare as their strings do; nil is NULL.
    ///
    /// ```swift
    /// let since = Expression.property("createdAt").greaterThan(Expression.date(Date(timeIntervalSince1970: 0)))
    /// ```
    public static func date(_ value: Date?) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.literal(value.map { JSONValue($0) } ?? .null)))
    }

    /// An array constant (see ``value(_:)`` for what it may hold); nil is NULL.
    ///
    /// ```swift
    /// let pair = Expression.array([1, 2])
    /// ```
    public static func array(_ value: [Any]?) -> any ExpressionProtocol {
        Expression.value(value)
    }

    /// A dictionary constant (see ``value(_:)`` for what it may hold); nil is NULL.
    ///
    /// ```swift
    /// let origin = Expression.dictionary(["x": 0, "y": 0])
    /// ```
    public static func dictionary(_ value: [String: Any]?) -> any ExpressionProtocol {
        Expression.value(value)
    }

    /// A parameter, given by ``Query/parameters`` before each execution (`$name` in SQL++).
    ///
    /// ```swift
    /// let inList = Expression.property("list.id").equalTo(Expression.parameter("list"))
    /// query.parameters = Parameters().setString("list-7", forName: "list")
    /// ```
    public static func parameter(_ name: String) -> any ExpressionProtocol {
        BuiltExpression(node: .leaf(.parameter(name)))
    }

    /// Logical negation, the same as ``not(_:)`` (Couchbase Lite's other name for it; for a
    /// number's negation subtract it from zero).
    ///
    /// ```swift
    /// let open = Expression.negated(Expression.property("complete"))
    /// ```
    public static func negated(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        not(expression)
    }

    /// `NOT expression`: true for a false value, NULL for NULL, MISSING for MISSING.
    ///
    /// ```swift
    /// let open = Expression.not(Expression.property("complete"))
    /// ```
    public static func not(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(node: .unary(.of(expression)) { .not($0) })
    }
}

// MARK: - The builder's conformances

/// An expression the builder made.
struct BuiltExpression: ExpressionProtocol, BuilderNodeProviding {
    let node: BuilderExpression
}

/// `Expression.property`, before `.from`.
struct PropertyExpression: PropertyExpressionProtocol, BuilderNodeProviding {
    let path: String
    let alias: String?

    var node: BuilderExpression {
        let (path, alias) = (path, alias)
        let parsed: PropertyPath
        do throws(SetteeError) { parsed = try PropertyPath(path) } catch { return .failure(error.message) }
        return BuilderExpression(depth: 1) { (scope: inout BuildScope) throws(SetteeError) in
            guard let alias else { return .property(parsed) }
            try scope.checkAlias(alias, of: "Expression.property(\"\(path)\")")
            // Qualified as SQL++ text qualifies it (`t.title`); the statement's alias
            // resolution then takes the alias off, once.
            return .property(PropertyPath(components: [.name(alias)] + parsed.components))
        }
    }

    func from(_ alias: String) -> any ExpressionProtocol {
        PropertyExpression(path: path, alias: alias)
    }
}

/// `Expression.all()`: the whole document.
struct DocumentExpression: PropertyExpressionProtocol, BuilderNodeProviding {
    let alias: String?

    var node: BuilderExpression {
        let alias = alias
        return BuilderExpression(depth: 1) { (scope: inout BuildScope) throws(SetteeError) in
            if let alias { try scope.checkAlias(alias, of: "Expression.all()") }
            // In a join, `Expression.all().from("l")` is that source's document.
            if let alias, !scope.joined.isEmpty { return .property(PropertyPath(components: [.name(alias)])) }
            return .property(PropertyPath(components: []))
        }
    }

    func from(_ alias: String) -> any ExpressionProtocol {
        DocumentExpression(alias: alias)
    }
}

/// Swift values as JSON, for `Expression.value`.
enum BuilderValue {
    /// Nesting deeper than this is refused (a constant is evaluated and released recursively).
    static let maxDepth = 256

    static func json(_ value: Any?, depth: Int) throws(SetteeError) -> JSONValue {
        guard depth <= maxDepth else {
            throw SetteeError(.invalidParameter, "QueryBuilder: a constant nested more than \(maxDepth) deep")
        }
        guard let value else { return .null }
        switch value {
        case let v as JSONValue: return v
        case is NSNull: return .null
        case let v as String: return .string(v)
        case let v as Substring: return .string(String(v))
        case let v as Bool: return .bool(v)
        case let v as Int: return .int(Int64(v))
        case let v as Int64: return .int(v)
        case let v as Int32: return .int(Int64(v))
        case let v as Int16: return .int(Int64(v))
        case let v as Int8: return .int(Int64(v))
        case let v as UInt: return v <= UInt(Int64.max) ? .int(Int64(v)) : try number(Double(v))
        case let v as UInt64: return v <= UInt64(Int64.max) ? .int(Int64(v)) : try number(Double(v))
        case let v as UInt32: return .int(Int64(v))
        case let v as UInt16: return .int(Int64(v))
        case let v as UInt8: return .int(Int64(v))
        case let v as Double: return try number(v)
        case let v as Float: return try number(Double(v))
        case let v as Date: return JSONValue(v)
        case let v as [Any]:
            var out: [JSONValue] = []
            for e in v { out.append(try json(e, depth: depth + 1)) }
            return .array(out)
        case let v as [String: Any]:
            var out: [String: JSONValue] = [:]
            for (k, e) in v { out[k] = try json(e, depth: depth + 1) }
            return .object(out)
        default:
            // An Optional inside an `Any` (an element of `[Int?]`): its value, or NULL.
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .optional {
                return try json(mirror.children.first?.value, depth: depth + 1)
            }
            throw SetteeError(.invalidParameter, "QueryBuilder: a constant of type \(type(of: value)), which JSON cannot hold")
        }
    }

    private static func number(_ d: Double) throws(SetteeError) -> JSONValue {
        guard d.isFinite else { throw SetteeError(.invalidParameter, "QueryBuilder: the number \(d), which JSON cannot hold") }
        return .double(d)
    }
}
