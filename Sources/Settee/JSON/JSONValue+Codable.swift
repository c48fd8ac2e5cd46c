import Foundation

extension JSONValue: Codable {
    /// Encodes the plain JSON value (no wrapper or case names), so a `JSONValue` property of a
    /// `Codable` type reads as ordinary JSON.
    ///
    /// ```swift
    /// struct Note: Codable { var title: String; var extra: JSONValue }
    /// let data = try JSONEncoder().encode(Note(title: "a", extra: ["tags": ["x"]]))
    /// // {"title":"a","extra":{"tags":["x"]}}
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Decodes whatever JSON value is there, trying null, boolean, integer, double, string,
    /// array and object in that order.
    ///
    /// ```swift
    /// let value = try JSONDecoder().decode(JSONValue.self, from: Data(#"[1, "two", null]"#.utf8))
    /// // .array([.int(1), .string("two"), .null])
    /// ```
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a JSON value")
        }
    }
}

/// Converts `Codable` values to and from ``JSONValue`` (document bodies).
///
/// Goes through Foundation's `JSONEncoder`/`JSONDecoder` and canonical JSON bytes: simple, and it
/// keeps their behaviour for keys, optionals and `Data` (base64). Dates are ISO-8601 strings in
/// UTC with milliseconds (``JSONDate``).
enum JSONCoding {
    static func encode<T: Encodable>(_ value: T) throws(SetteeError) -> JSONValue {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(JSONDate.string(from: date))
        }
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch let error as SetteeError {
            throw error
        } catch {
            throw SetteeError(.invalidParameter, "cannot encode \(T.self): \(reason(error))")
        }
        return try JSONValue(parsing: data)
    }

    /// A value's properties, for a document: it must encode as a JSON object.
    static func encodeObject<T: Encodable>(_ value: T) throws(SetteeError) -> [String: JSONValue] {
        guard case .object(let o) = try encode(value) else {
            throw SetteeError(.invalidParameter, "a document must encode as a JSON object, and \(T.self) does not")
        }
        return o
    }

    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws(SetteeError) -> T {
        let bytes = try JSONWriter.bytes(value)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            guard let date = JSONDate.date(from: try container.decode(String.self)) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO-8601 date")
            }
            return date
        }
        do {
            return try decoder.decode(T.self, from: Data(bytes))
        } catch let error as SetteeError {
            throw error
        } catch {
            throw SetteeError(.invalidParameter, "cannot decode \(T.self): \(reason(error))")
        }
    }

    /// What went wrong and where (the coding path), never the offending value: Foundation's own
    /// descriptions may quote it.
    static func reason(_ error: any Error) -> String {
        switch error {
        case let error as DecodingError:
            switch error {
            case .typeMismatch(let type, let context):
                return "expected \(type)\(path(context.codingPath))"
            case .valueNotFound(let type, let context):
                return "missing \(type) value\(path(context.codingPath))"
            case .keyNotFound(let key, let context):
                return "missing key '\(key.stringValue)'\(path(context.codingPath))"
            case .dataCorrupted(let context):
                return "invalid data\(path(context.codingPath))"
            @unknown default:
                return "decoding failed"
            }
        case let error as EncodingError:
            switch error {
            case .invalidValue(_, let context):
                return "invalid value\(path(context.codingPath))"
            @unknown default:
                return "encoding failed"
            }
        default:
            return "\(type(of: error)) thrown"
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        guard !codingPath.isEmpty else { return "" }
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                if !text.isEmpty { text += "." }
                text += key.stringValue
            }
        }
        return " at \(text)"
    }
}

/// Dates as Settee stores them: ISO-8601 / RFC 3339 text.
///
/// Written in UTC with milliseconds ("2026-11-21T10:15:30.123Z"); read with or without fractional
/// seconds and with "Z" or a numeric offset ("+02:00"). Hand-written rather than a shared
/// formatter: pure functions of their arguments, so thread-safe and identical on every platform.
enum JSONDate {
    /// Milliseconds from 1970 to 0001-01-01T00:00:00Z and to 9999-12-31T23:59:59.999Z, the range
    /// four-digit years can express; dates outside it are clamped.
    private static let earliest: Int64 = -62_135_596_800_000
    private static let latest: Int64 = 253_402_300_799_999

    static func string(from date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        // Whole milliseconds, rounded to nearest so representation error (53-bit doubles) never
        // turns .123 into .122.
        let millis: Int64
        if seconds.isNaN {
            millis = 0
        } else {
            let scaled = (seconds * 1000).rounded()
            millis = scaled <= Double(earliest) ? earliest : scaled >= Double(latest) ? latest : Int64(scaled)
        }
        let (dayNumber, msOfDay) = floorDivide(millis, 86_400_000)
        let (year, month, day) = civil(fromDays: dayNumber)
        let secondsOfDay = msOfDay / 1000
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondsOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondsOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondsOfDay % 60, 2)
        out.append(UInt8(ascii: "."))
        digits(msOfDay % 1000, 3)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `YYYY-MM-DDThh:mm:ss[.fraction](Z|±hh:mm)`; nil for anything else or an impossible date.
    static func date(from text: String) -> Date? {
        var bytes = Array(text.utf8)[...]
        func number(_ count: Int) -> Int64? {
            guard bytes.count >= count else { return nil }
            var value: Int64 = 0
            for c in bytes.prefix(count) {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(c - UInt8(ascii: "0"))
            }
            bytes.removeFirst(count)
            return value
        }
        func literal(_ options: String) -> Bool {
            guard let c = bytes.first, options.utf8.contains(c) else { return false }
            bytes.removeFirst()
            return true
        }

        guard let year = number(4), literal("-"), let month = number(2), literal("-"), let day = number(2),
              literal("Tt "), let hour = number(2), literal(":"), let minute = number(2), literal(":"),
              let second = number(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 59
        else { return nil }

        // Fraction: up to nanoseconds kept, further digits allowed and ignored.
        var nanos: Int64 = 0
        if literal(".") {
            var count = 0
            while let c = bytes.first, c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") {
                if count < 9 { nanos = nanos * 10 + Int64(c - UInt8(ascii: "0")) }
                count += 1
                bytes.removeFirst()
            }
            guard count > 0 else { return nil }
            for _ in min(count, 9)..<9 { nanos *= 10 }
        }

        var offset: Int64 = 0
        if literal("Zz") {
            // UTC
        } else if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            bytes.removeFirst()
            guard let hours = number(2) else { return nil }
            _ = literal(":")
            guard let minutes = number(2), hours <= 23, minutes <= 59 else { return nil }
            offset = (hours * 60 + minutes) * 60 * (sign == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        guard bytes.isEmpty else { return nil }

        let seconds = days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        // Whole milliseconds through one correctly rounded division, so "…30.123Z" gives the
        // same Date as `Date(timeIntervalSince1970: ….123)`.
        if nanos % 1_000_000 == 0 {
            return Date(timeIntervalSince1970: Double(seconds * 1000 + nanos / 1_000_000) / 1000)
        }
        return Date(timeIntervalSince1970: Double(seconds) + Double(nanos) / 1_000_000_000)
    }

    // MARK: Calendar arithmetic (proleptic Gregorian, days since 1970-01-01)

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    private static func isLeap(_ year: Int64) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the date (eras of 400 years, March-based years so the leap day
    /// comes last).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let (era, yearOfEra) = floorDivide(y, 400)
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of ``days(fromCivil:_:_:)``.
    private static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let (era, dayOfEra) = floorDivide(days + 719_468, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (era * 400 + yearOfEra + (month <= 2 ? 1 : 0), month, day)
    }
}
