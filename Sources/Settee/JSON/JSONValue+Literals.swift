import Foundation

// Literal conformances, so documents and queries can be written as JSON-looking Swift.

extension JSONValue: ExpressibleByNilLiteral {
    /// `nil` is JSON `null`.
    ///
    /// ```swift
    /// let value: JSONValue = nil   // .null
    /// ```
    public init(nilLiteral: ()) {
        self = .null
    }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// `true` and `false` are JSON booleans.
    ///
    /// ```swift
    /// let done: JSONValue = false   // .bool(false)
    /// ```
    public init(booleanLiteral value: Bool) {
        self = .bool(value)
    }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// Integer literals are exact ``JSONValue/int(_:)`` values.
    ///
    /// ```swift
    /// let count: JSONValue = 42   // .int(42)
    /// ```
    public init(integerLiteral value: Int64) {
        self = .int(value)
    }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// Floating-point literals are ``JSONValue/double(_:)`` values.
    ///
    /// ```swift
    /// let price: JSONValue = 9.95   // .double(9.95)
    /// ```
    public init(floatLiteral value: Double) {
        self = .double(value)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByStringInterpolation {
    /// String literals, interpolated or not, are JSON strings.
    ///
    /// ```swift
    /// let n = 3
    /// let title: JSONValue = "List \(n)"   // .string("List 3")
    /// ```
    public init(stringLiteral value: String) {
        self = .string(value)
    }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// Array literals are JSON arrays; their elements are literals too.
    ///
    /// ```swift
    /// let tags: JSONValue = ["home", 2, nil, true]
    /// ```
    public init(arrayLiteral elements: JSONValue...) {
        self = .array(elements)
    }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Dictionary literals with string keys are JSON objects.
    ///
    /// A key repeated in one literal keeps its last value (a `Dictionary` literal would trap).
    ///
    /// ```swift
    /// let doc: JSONValue = ["title": "Groceries", "items": ["apples", "milk"], "done": false]
    /// ```
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Initializers from Swift values

extension JSONValue {
    /// A JSON string.
    ///
    /// ```swift
    /// let name = "Ada"
    /// let value = JSONValue(name)   // .string("Ada")
    /// ```
    public init(_ value: String) {
        self = .string(value)
    }

    /// A JSON integer.
    ///
    /// ```swift
    /// let value = JSONValue(items.count)   // .int(…)
    /// ```
    public init(_ value: Int) {
        self = .int(Int64(value))
    }

    /// A JSON number that is not an integer.
    ///
    /// NaN and infinities are accepted here but rejected when the value is written
    /// (``jsonBytes()``, saving a document), since JSON cannot represent them.
    ///
    /// ```swift
    /// let value = JSONValue(0.25)   // .double(0.25)
    /// ```
    public init(_ value: Double) {
        self = .double(value)
    }

    /// A JSON boolean.
    ///
    /// ```swift
    /// let value = JSONValue(list.isEmpty)   // .bool(…)
    /// ```
    public init(_ value: Bool) {
        self = .bool(value)
    }

    /// A date, as the ISO-8601 string Settee uses everywhere: UTC with milliseconds.
    ///
    /// ```swift
    /// let value = JSONValue(Date(timeIntervalSince1970: 0))   // .string("1970-01-01T00:00:00.000Z")
    /// ```
    public init(_ date: Date) {
        self = .string(JSONDate.string(from: date))
    }
}

// MARK: - Accessors

extension JSONValue {
    /// The string, if this is a string.
    ///
    /// ```swift
    /// let title = doc["title"]?.stringValue ?? "Untitled"
    /// ```
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number as an `Int`, if it is an integer, or a double with an exact integral value,
    /// that fits in `Int`.
    ///
    /// ```swift
    /// let count = doc["count"]?.intValue ?? 0   // 2 for 2 and for 2.0, nil for 2.5
    /// ```
    public var intValue: Int? {
        switch self {
        case .int(let value): return Int(exactly: value)
        case .double(let value): return Int(exactly: value)
        default: return nil
        }
    }

    /// The number as an `Int64`, if it is an integer, or a double with an exact integral value
    /// that fits in `Int64`.
    ///
    /// ```swift
    /// let size = doc["size"]?.int64Value
    /// ```
    public var int64Value: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int64(exactly: value)
        default: return nil
        }
    }

    /// The number as a `Double`; integers are converted (rounding beyond 2⁵³).
    ///
    /// ```swift
    /// let price = doc["price"]?.doubleValue ?? 0   // 3.0 for 3, 2.5 for 2.5
    /// ```
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The boolean, if this is a boolean.
    ///
    /// ```swift
    /// if doc["done"]?.boolValue == true { archive(doc) }
    /// ```
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    ///
    /// ```swift
    /// for item in doc["items"]?.arrayValue ?? [] { print(item) }
    /// ```
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, if this is an object.
    ///
    /// ```swift
    /// let keys = doc["address"]?.objectValue?.keys.sorted() ?? []
    /// ```
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// Whether this is JSON `null`.
    ///
    /// ```swift
    /// if doc["deletedAt"]?.isNull ?? true { showActive() }
    /// ```
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The member named `key`, if this is an object that has it.
    ///
    /// ```swift
    /// let city = doc["address"]?["city"]?.stringValue
    /// ```
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index`, if this is an array and the index is in range.
    ///
    /// ```swift
    /// let first = doc["items"]?[0]?.stringValue
    /// ```
    public subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }
}

// MARK: - Description

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text with sorted keys (the canonical form, see ``jsonText()``).
    ///
    /// Unlike ``jsonText()`` it never fails: NaN and infinities, which JSON cannot carry, show
    /// as `NaN`, `Infinity` and `-Infinity`.
    ///
    /// ```swift
    /// let value: JSONValue = ["b": 1, "a": [true, nil]]
    /// print(value)   // {"a":[true,null],"b":1}
    /// ```
    public var description: String {
        var out: [UInt8] = []
        JSONWriter.writeForDescription(self, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
