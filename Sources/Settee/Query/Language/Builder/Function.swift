/// The functions of QueryBuilder expressions: strings, numbers, and the aggregates of
/// grouped queries. Each is the function SQL++ text calls by the same name, with the same
/// rules: MISSING in, MISSING out; NULL or a value of the wrong type, NULL.
///
/// ```swift
/// let milk = Function.lower(Expression.property("title")).equalTo(Expression.string("milk"))
/// ```
///
/// A caseless namespace; its expressions are values, safe to share between threads.
public enum Function {
    private static func call(_ f: QueryExpression.Function, _ args: [any ExpressionProtocol]) -> any ExpressionProtocol {
        BuiltExpression(node: .list(args.map { .of($0) }) { .function(f, $0) })
    }

    private static func aggregate(_ a: QueryExpression.Aggregate, _ e: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(node: .unary(.of(e)) { argument in
            // count of the whole document is count(*), as SQL++ text writes it.
            if a == .count, case .property(let path) = argument, path.components.isEmpty { return .aggregate(.count, nil) }
            return .aggregate(a, argument)
        })
    }

    // MARK: Strings

    /// The string in lower case.
    ///
    /// ```swift
    /// let title = Function.lower(Expression.property("title"))
    /// ```
    public static func lower(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.lower, [expression]) }

    /// The string in upper case.
    ///
    /// ```swift
    /// let code = Function.upper(Expression.property("code"))
    /// ```
    public static func upper(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.upper, [expression]) }

    /// The string's length in characters.
    ///
    /// ```swift
    /// let long = Function.length(Expression.property("title")).greaterThan(Expression.int(40))
    /// ```
    public static func length(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.length, [expression]) }

    /// The string without the white space at its ends.
    ///
    /// ```swift
    /// let name = Function.trim(Expression.property("name"))
    /// ```
    public static func trim(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.trim, [expression]) }

    /// Whether the string contains `substring` (exactly, case included).
    ///
    /// ```swift
    /// let milky = Function.contains(Expression.property("title"), substring: Expression.string("milk"))
    /// ```
    public static func contains(_ expression: any ExpressionProtocol, substring: any ExpressionProtocol) -> any ExpressionProtocol {
        call(.contains, [expression, substring])
    }

    // MARK: Numbers

    /// The number's absolute value.
    ///
    /// ```swift
    /// let distance = Function.abs(Expression.property("delta"))
    /// ```
    public static func abs(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.abs, [expression]) }

    /// The largest integer not above the number.
    ///
    /// ```swift
    /// let whole = Function.floor(Expression.property("price"))
    /// ```
    public static func floor(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.floor, [expression]) }

    /// The smallest integer not below the number.
    ///
    /// ```swift
    /// let pages = Function.ceil(Expression.property("words").divide(Expression.int(300)))
    /// ```
    public static func ceil(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.ceil, [expression]) }

    /// The nearest integer, halves away from zero.
    ///
    /// ```swift
    /// let stars = Function.round(Expression.property("rating"))
    /// ```
    public static func round(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { call(.round, [expression]) }

    // MARK: Aggregates

    /// How many rows of the group have a value (neither MISSING nor NULL);
    /// `count(Expression.all())` counts the rows.
    ///
    /// ```swift
    /// let n = SelectResult.expression(Function.count(Expression.all())).as("n")
    /// ```
    public static func count(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { aggregate(.count, expression) }

    /// The sum of the group's values; NULL when there are none or one is not a number.
    ///
    /// ```swift
    /// let total = SelectResult.expression(Function.sum(Expression.property("amount"))).as("total")
    /// ```
    public static func sum(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { aggregate(.sum, expression) }

    /// The mean of the group's values; NULL when there are none or one is not a number.
    ///
    /// ```swift
    /// let mean = SelectResult.expression(Function.avg(Expression.property("score")))
    /// ```
    public static func avg(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { aggregate(.avg, expression) }

    /// The group's least value, in collation order.
    ///
    /// ```swift
    /// let first = SelectResult.expression(Function.min(Expression.property("createdAt")))
    /// ```
    public static func min(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { aggregate(.min, expression) }

    /// The group's greatest value, in collation order.
    ///
    /// ```swift
    /// let last = SelectResult.expression(Function.max(Expression.property("createdAt")))
    /// ```
    public static func max(_ expression: any ExpressionProtocol) -> any ExpressionProtocol { aggregate(.max, expression) }
}

/// Functions of arrays, SQL++'s `ARRAY_CONTAINS` and `ARRAY_LENGTH`.
///
/// ```swift
/// let urgent = ArrayFunction.contains(Expression.property("tags"), value: Expression.string("urgent"))
/// ```
///
/// A caseless namespace; its expressions are values, safe to share between threads.
public enum ArrayFunction {
    /// Whether the array holds `value` (compared as `=` compares); NULL when `value` is NULL or
    /// the expression is not an array.
    ///
    /// ```swift
    /// let urgent = ArrayFunction.contains(Expression.property("tags"), value: Expression.string("urgent"))
    /// ```
    public static func contains(_ expression: any ExpressionProtocol, value: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(node: .binary(.of(expression), .of(value)) { .function(.arrayContains, [$0, $1]) })
    }

    /// The array's number of elements; NULL when the expression is not an array.
    ///
    /// ```swift
    /// let tagged = ArrayFunction.length(Expression.property("tags")).greaterThan(Expression.int(0))
    /// ```
    public static func length(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(node: .unary(.of(expression)) { .function(.arrayLength, [$0]) })
    }
}
