/// A variable of `ANY`/`EVERY … SATISFIES`: bound to each element of the array in turn, read
/// in the condition.
///
/// ```swift
/// let tag = ArrayExpression.variable("tag")
/// ```
///
/// Do not declare new conformances.
///
/// - Note: A value; safe to share between threads.
public protocol VariableExpressionProtocol: ExpressionProtocol {}

/// Range predicates: whether any, every, or any and every element of an array satisfies a
/// condition (SQL++'s `ANY v IN array SATISFIES condition END`, `EVERY …`, `ANY AND EVERY …`).
///
/// ```swift
/// let urgent = ArrayExpression.any(ArrayExpression.variable("tag"))
///     .in(Expression.property("tags"))
///     .satisfies(ArrayExpression.variable("tag").equalTo(Expression.string("urgent")))
/// ```
///
/// An element satisfies the condition when the condition is true (NULL and MISSING do not).
/// Over an empty array ANY is false, EVERY true, ANY AND EVERY false. Over a MISSING value all
/// three are MISSING, over NULL they are NULL, and over any other value that is not an array
/// they are false.
///
/// A caseless namespace; its expressions are values, safe to share between threads.
public enum ArrayExpression {
    /// A variable, or a path into one (`"item.name"`: the `name` of the element bound to
    /// `item`). Used outside the `satisfies` of an `ANY`/`EVERY` that binds it, it fails at
    /// ``Query/execute()``.
    ///
    /// ```swift
    /// let cheap = ArrayExpression.variable("item.price").lessThan(Expression.int(5))
    /// ```
    public static func variable(_ name: String) -> any VariableExpressionProtocol {
        VariableExpression(name: name)
    }

    /// True when at least one element satisfies the condition.
    ///
    /// ```swift
    /// let anyUrgent = ArrayExpression.any(ArrayExpression.variable("t")).in(Expression.property("tags"))
    ///     .satisfies(ArrayExpression.variable("t").equalTo(Expression.string("urgent")))
    /// ```
    public static func any(_ variable: any VariableExpressionProtocol) -> ArrayExpressionIn {
        ArrayExpressionIn(quantifier: .any, variable: variable)
    }

    /// True when no element fails the condition (an empty array satisfies it).
    ///
    /// ```swift
    /// let allCheap = ArrayExpression.every(ArrayExpression.variable("i")).in(Expression.property("items"))
    ///     .satisfies(ArrayExpression.variable("i.price").lessThan(Expression.int(5)))
    /// ```
    public static func every(_ variable: any VariableExpressionProtocol) -> ArrayExpressionIn {
        ArrayExpressionIn(quantifier: .every, variable: variable)
    }

    /// True when the array has elements and every one satisfies the condition.
    ///
    /// ```swift
    /// let allDone = ArrayExpression.anyAndEvery(ArrayExpression.variable("s")).in(Expression.property("steps"))
    ///     .satisfies(ArrayExpression.variable("s.done").equalTo(Expression.boolean(true)))
    /// ```
    public static func anyAndEvery(_ variable: any VariableExpressionProtocol) -> ArrayExpressionIn {
        ArrayExpressionIn(quantifier: .anyAndEvery, variable: variable)
    }
}

/// A range predicate waiting for its array: ``in(_:)``.
///
/// ```swift
/// let start = ArrayExpression.any(ArrayExpression.variable("t")).in(Expression.property("tags"))
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ArrayExpressionIn: Sendable {
    let quantifier: QueryExpression.Quantifier
    let variable: any VariableExpressionProtocol

    /// The array whose elements are bound to the variable in turn (read outside the
    /// variable's scope).
    ///
    /// ```swift
    /// let start = ArrayExpression.any(ArrayExpression.variable("t")).in(Expression.property("tags"))
    /// ```
    public func `in`(_ expression: any ExpressionProtocol) -> ArrayExpressionSatisfies {
        ArrayExpressionSatisfies(quantifier: quantifier, variable: variable, array: expression)
    }
}

/// A range predicate waiting for its condition: ``satisfies(_:)``.
///
/// ```swift
/// let urgent = ArrayExpression.any(ArrayExpression.variable("t")).in(Expression.property("tags"))
///     .satisfies(ArrayExpression.variable("t").equalTo(Expression.string("urgent")))
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ArrayExpressionSatisfies: Sendable {
    let quantifier: QueryExpression.Quantifier
    let variable: any VariableExpressionProtocol
    let array: any ExpressionProtocol

    /// The complete predicate: `expression` is evaluated once per element, with the element
    /// bound to the variable.
    ///
    /// ```swift
    /// let urgent = ArrayExpression.any(ArrayExpression.variable("t")).in(Expression.property("tags"))
    ///     .satisfies(ArrayExpression.variable("t").equalTo(Expression.string("urgent")))
    /// ```
    public func satisfies(_ expression: any ExpressionProtocol) -> any ExpressionProtocol {
        guard let variable = variable as? VariableExpression else {
            return BuiltExpression(node: .failure("\(type(of: self.variable)) is not a variable Settee built (VariableExpressionProtocol takes no other conformances)"))
        }
        let name: String
        switch variable.path {
        case .success(let path):
            guard path.components.count == 1, case .name(let n) = path.components[0] else {
                return BuiltExpression(node: .failure("the variable of ANY/EVERY is a name, not the path \"\(variable.name)\""))
            }
            name = n
        case .failure(let error):
            return BuiltExpression(node: .failure(error.message))
        }
        let (array, condition) = (BuilderExpression.of(array), BuilderExpression.of(expression))
        let q = quantifier
        return BuiltExpression(node: .node([array, condition]) { (scope: inout BuildScope, _) throws(SetteeError) in
            // The array is read outside the variable's scope, the condition inside it.
            let source = try array.build(&scope)
            scope.variables.append(name)
            defer { scope.variables.removeLast() }
            return .quantified(q, variable: name, in: source, satisfies: try condition.build(&scope))
        })
    }
}

/// `ArrayExpression.variable`: a name and a path into its value.
struct VariableExpression: VariableExpressionProtocol, BuilderNodeProviding {
    let name: String

    var path: Swift.Result<PropertyPath, SetteeError> {
        Swift.Result { () throws(SetteeError) in try PropertyPath(name) }
    }

    var node: BuilderExpression {
        let name = name
        let parsed: PropertyPath
        switch path {
        case .success(let p): parsed = p
        case .failure(let error): return .failure(error.message)
        }
        return BuilderExpression(depth: 1) { (scope: inout BuildScope) throws(SetteeError) in
            guard case .name(let variable)? = parsed.components.first, scope.variables.contains(variable) else {
                throw SetteeError(.invalidParameter, "QueryBuilder: ArrayExpression.variable(\"\(name)\") is used outside the ANY/EVERY that binds it")
            }
            return .variable(variable, PropertyPath(components: Array(parsed.components.dropFirst())))
        }
    }
}
