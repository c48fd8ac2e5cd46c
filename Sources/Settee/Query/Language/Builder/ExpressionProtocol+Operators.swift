// The operators of QueryBuilder expressions, each the same node the SQL++ operator parses to,
// with the same MISSING and NULL rules (<doc:Querying>).

extension ExpressionProtocol {
    private func binary(_ other: any ExpressionProtocol,
                        _ make: @escaping @Sendable (QueryExpression, QueryExpression) -> QueryExpression) -> any ExpressionProtocol {
        BuiltExpression(node: .binary(.of(self), .of(other), make))
    }

    // MARK: Arithmetic

    /// `self * expression`.
    ///
    /// ```swift
    /// let total = Expression.property("price").multiply(Expression.property("quantity"))
    /// ```
    public func multiply(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .arithmetic(.multiply, $0, $1) }
    }

    /// `self / expression`: an integer when exact, NULL when dividing by zero.
    ///
    /// ```swift
    /// let half = Expression.property("n").divide(Expression.int(2))
    /// ```
    public func divide(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .arithmetic(.divide, $0, $1) }
    }

    /// `self % expression`.
    ///
    /// ```swift
    /// let even = Expression.property("n").modulo(Expression.int(2)).equalTo(Expression.int(0))
    /// ```
    public func modulo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .arithmetic(.modulo, $0, $1) }
    }

    /// `self + expression`.
    ///
    /// ```swift
    /// let next = Expression.property("n").add(Expression.int(1))
    /// ```
    public func add(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .arithmetic(.add, $0, $1) }
    }

    /// `self - expression`.
    ///
    /// ```swift
    /// let left = Expression.property("total").subtract(Expression.property("done"))
    /// ```
    public func subtract(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .arithmetic(.subtract, $0, $1) }
    }

    // MARK: Comparison

    /// `self < expression`, in collation order.
    ///
    /// ```swift
    /// let early = Expression.property("createdAt").lessThan(Expression.int(1_700_000_000))
    /// ```
    public func lessThan(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.less, $0, $1) }
    }

    /// `self <= expression`, in collation order.
    ///
    /// ```swift
    /// let cheap = Expression.property("price").lessThanOrEqualTo(Expression.int(10))
    /// ```
    public func lessThanOrEqualTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.lessOrEqual, $0, $1) }
    }

    /// `self > expression`, in collation order.
    ///
    /// ```swift
    /// let late = Expression.property("createdAt").greaterThan(Expression.parameter("since"))
    /// ```
    public func greaterThan(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.greater, $0, $1) }
    }

    /// `self >= expression`, in collation order.
    ///
    /// ```swift
    /// let adult = Expression.property("age").greaterThanOrEqualTo(Expression.int(18))
    /// ```
    public func greaterThanOrEqualTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.greaterOrEqual, $0, $1) }
    }

    /// `self = expression`: exact (numbers by value).
    ///
    /// ```swift
    /// let isTask = Expression.property("type").equalTo(Expression.string("task"))
    /// ```
    public func equalTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.equal, $0, $1) }
    }

    /// `self != expression`.
    ///
    /// ```swift
    /// let notDone = Expression.property("status").notEqualTo(Expression.string("done"))
    /// ```
    public func notEqualTo(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.notEqual, $0, $1) }
    }

    /// `self LIKE pattern`: `%` matches any run of characters, `_` one, `\` escapes.
    ///
    /// ```swift
    /// let buy = Expression.property("title").like(Expression.string("Buy%"))
    /// ```
    public func like(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .like($0, $1) }
    }

    /// Whether the regular expression `expression` (ICU's syntax, as NSRegularExpression reads
    /// it) matches somewhere in `self`, as Couchbase Lite's `regex` and SQL++'s
    /// `REGEXP_LIKE(self, pattern)` do: anchor it with `^…$` to match the whole string. A
    /// pattern longer than 1,000 characters, invalid, or backtracking without end fails at
    /// ``Query/execute()``; a value that is not a string gives NULL.
    ///
    /// ```swift
    /// let dated = Expression.property("title").regex(Expression.string("^[0-9]{4}-[0-9]{2}"))
    /// ```
    public func regex(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .function(.regexpLike, [$0, $1]) }
    }

    /// `self IS expression`, which SQL++ for Mobile reads as `self = expression`.
    ///
    /// ```swift
    /// let isTask = Expression.property("type").is(Expression.string("task"))
    /// ```
    public func `is`(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.equal, $0, $1) }
    }

    /// `self IS NOT expression`, which SQL++ for Mobile reads as `self != expression`.
    ///
    /// ```swift
    /// let other = Expression.property("type").isNot(Expression.string("task"))
    /// ```
    public func isNot(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .compare(.notEqual, $0, $1) }
    }

    /// `self IS VALUED`: true unless `self` is MISSING or NULL.
    ///
    /// ```swift
    /// let dated = Expression.property("createdAt").isValued()
    /// ```
    public func isValued() -> any ExpressionProtocol {
        BuiltExpression(node: .unary(.of(self)) { .test(.isValued, $0) })
    }

    /// `self IS NOT VALUED`: true when `self` is MISSING or NULL.
    ///
    /// ```swift
    /// let undated = Expression.property("createdAt").isNotValued()
    /// ```
    public func isNotValued() -> any ExpressionProtocol {
        BuiltExpression(node: .unary(.of(self)) { .test(.isNotValued, $0) })
    }

    // MARK: Logic

    /// `self AND expression`: false if either is false, else MISSING, NULL, or true.
    ///
    /// ```swift
    /// let open = Expression.property("type").equalTo(Expression.string("task"))
    ///     .and(Expression.property("complete").equalTo(Expression.boolean(false)))
    /// ```
    public func and(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .and($0, $1) }
    }

    /// `self OR expression`: true if either is true, else NULL, MISSING, or false.
    ///
    /// ```swift
    /// let urgent = Expression.property("priority").greaterThan(Expression.int(2))
    ///     .or(Expression.property("flagged").equalTo(Expression.boolean(true)))
    /// ```
    public func or(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        binary(expression) { .or($0, $1) }
    }

    // MARK: Ranges and lists

    /// `self BETWEEN expression1 AND expression2`, bounds included, in collation order.
    ///
    /// ```swift
    /// let teen = Expression.property("age").between(Expression.int(13), and: Expression.int(19))
    /// ```
    public func between(_ expression1: any ExpressionProtocol, and expression2: any ExpressionProtocol) -> any ExpressionProtocol {
        BuiltExpression(node: .list([.of(self), .of(expression1), .of(expression2)]) { parts in
            guard parts.count == 3 else { return .literal(.null) }
            return .between(parts[0], parts[1], parts[2])
        })
    }

    /// `self IN (expressions…)`: true when `self` equals one of them.
    ///
    /// ```swift
    /// let chosen = Expression.property("status").in([Expression.string("open"), Expression.string("late")])
    /// ```
    public func `in`(_ expressions: [any ExpressionProtocol]) -> any ExpressionProtocol {
        BuiltExpression(node: .list([.of(self)] + expressions.map { .of($0) }) { parts in
            guard let first = parts.first else { return .literal(.null) }
            return .in(first, Array(parts.dropFirst()))
        })
    }
}
