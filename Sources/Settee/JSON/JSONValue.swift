/// A JSON value: what document properties, array elements and dictionary values are.
///
/// Literals build values directly, so documents read like JSON:
///
/// ```swift
/// let doc = MutableDocument(id: "list-1", data: [
///     "title": "Groceries",
///     "items": ["apples", "milk"],
///     "done": false,
///     "count": 2,
/// ])
/// ```
///
/// Integers that fit in 64 bits are kept exact as ``int(_:)``; other numbers are ``double(_:)``.
/// A blob inside a document is a dictionary with `"@type": "blob"` (see ``Blob``).
///
/// A value type; safe to share between threads.
public enum JSONValue: Sendable, Hashable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer (JSON numbers without fraction or exponent that fit in 64 bits).
    case int(Int64)
    /// Any other number; never NaN or infinite.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object (a dictionary keyed by strings).
    case object([String: JSONValue])
}
