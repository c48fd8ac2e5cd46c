import Foundation

/// Read access to a document's properties, shared by ``Document`` and ``MutableDocument``.
///
/// Typed getters follow Couchbase Lite: numbers and booleans default to zero and false when the
/// key is missing or holds another type; the rest return nil.
///
/// ```swift
/// if let doc = try db.document(withID: "task-1") {
///     let title = doc.string(forKey: "title") ?? "untitled"
///     let done = doc.bool(forKey: "done")
/// }
/// ```
///
/// Do not declare new conformances: only the document types conform.
public protocol DocumentReading {
    /// The value stored under `key`, or nil.
    ///
    /// ```swift
    /// if case .array(let items)? = doc.value(forKey: "items") { print(items.count) }
    /// ```
    func value(forKey key: String) -> JSONValue?
    /// Every property as a dictionary.
    ///
    /// ```swift
    /// let merged = doc.toDictionary().merging(other.toDictionary()) { mine, _ in mine }
    /// ```
    func toDictionary() -> [String: JSONValue]
    /// The document ID.
    ///
    /// ```swift
    /// print(doc.id)
    /// ```
    var id: String { get }
}

extension DocumentReading {
    /// The property names, sorted.
    ///
    /// ```swift
    /// for key in doc.keys { print(key) }
    /// ```
    public var keys: [String] { toDictionary().keys.sorted() }

    /// The number of properties.
    ///
    /// ```swift
    /// if doc.count == 0 { print("empty") }
    /// ```
    public var count: Int { toDictionary().count }

    /// Whether `key` holds a value (`null` included).
    ///
    /// ```swift
    /// if doc.contains(key: "owner") { … }
    /// ```
    public func contains(key: String) -> Bool { value(forKey: key) != nil }

    /// The property `key`, or nil.
    ///
    /// ```swift
    /// let title = doc["title"]?.stringValue
    /// ```
    public subscript(key: String) -> JSONValue? { value(forKey: key) }

    /// A string property, or nil.
    ///
    /// ```swift
    /// let name = doc.string(forKey: "name")
    /// ```
    public func string(forKey key: String) -> String? { value(forKey: key)?.stringValue }

    /// An integer property; 0 when missing or not a number (doubles are truncated).
    ///
    /// ```swift
    /// let n = doc.int(forKey: "count")
    /// ```
    public func int(forKey key: String) -> Int { TypedValue.int(value(forKey: key)) }

    /// A 64-bit integer property; 0 when missing or not a number.
    ///
    /// ```swift
    /// let big = doc.int64(forKey: "bytes")
    /// ```
    public func int64(forKey key: String) -> Int64 { Int64(int(forKey: key)) }

    /// A number as a double; 0 when missing or not a number.
    ///
    /// ```swift
    /// let price = doc.double(forKey: "price")
    /// ```
    public func double(forKey key: String) -> Double { value(forKey: key)?.doubleValue ?? 0 }

    /// A boolean property; false when missing. Numbers are true when non-zero, as in
    /// Couchbase Lite.
    ///
    /// ```swift
    /// let done = doc.bool(forKey: "done")
    /// ```
    public func bool(forKey key: String) -> Bool { TypedValue.bool(value(forKey: key)) }

    /// A boolean property (Couchbase Lite's name for ``bool(forKey:)``).
    ///
    /// ```swift
    /// let done = doc.boolean(forKey: "done")
    /// ```
    public func boolean(forKey key: String) -> Bool { bool(forKey: key) }

    /// A date stored as an ISO-8601 string, or nil.
    ///
    /// ```swift
    /// let created = doc.date(forKey: "created_at")
    /// ```
    public func date(forKey key: String) -> Date? {
        string(forKey: key).flatMap(JSONDate.date(from:))
    }

    /// An array property, or nil.
    ///
    /// ```swift
    /// let items = doc.array(forKey: "items") ?? []
    /// ```
    public func array(forKey key: String) -> [JSONValue]? { value(forKey: key)?.arrayValue }

    /// A dictionary property, or nil (a blob is a dictionary too).
    ///
    /// ```swift
    /// let address = doc.dictionary(forKey: "address")
    /// ```
    public func dictionary(forKey key: String) -> [String: JSONValue]? { value(forKey: key)?.objectValue }

    /// The JSON text of the properties (canonical: sorted keys, no whitespace).
    ///
    /// ```swift
    /// print(doc.toJSON())   // {"done":false,"title":"Buy milk"}
    /// ```
    public func toJSON() -> String {
        (try? JSONValue.object(toDictionary()).jsonText()) ?? "{}"
    }

    /// Decodes the properties into a `Decodable` type (dates as ISO-8601 strings, data as base64).
    ///
    /// ```swift
    /// struct Task: Codable { var title: String; var done: Bool }
    /// let task = try doc.decode(Task.self)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the properties do not fit the type,
    ///   ``SetteeError/Code/corrupted`` when the stored body does not parse (``Document/bodyError``).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let damaged = (self as? Document)?.bodyError { throw damaged }
        return try JSONCoding.decode(type, from: .object(toDictionary()))
    }
}

/// Couchbase Lite's typed-getter rules, shared by documents and query results: numbers and
/// booleans default to zero and false when the value is missing or of another type.
enum TypedValue {
    static func int(_ v: JSONValue?) -> Int {
        switch v {
        case .int(let v)?: return Int(clamping: v)
        case .double(let d)? where d.isFinite:
            return d >= Double(Int.max) ? .max : d <= Double(Int.min) ? .min : Int(d)
        default: return 0
        }
    }

    static func bool(_ v: JSONValue?) -> Bool {
        switch v {
        case .bool(let b)?: return b
        case .int(let i)?: return i != 0
        case .double(let d)?: return d != 0
        default: return false
        }
    }
}
