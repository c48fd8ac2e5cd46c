import Foundation

/// The regular expressions one execution of a query has compiled, by pattern: a pattern is
/// compiled once, not once per document.
///
/// ```swift
/// let regexes = RegexCache()
/// let v = try e.evaluate(row, parameters: [:], regexes: regexes)
/// ```
///
/// - Note: Not thread-safe: one execution (one thread) owns it.
final class RegexCache {
    /// The longest pattern accepted, in characters: a bound on what one compilation costs.
    static let maxPatternLength = 1_000
    /// How many patterns are kept: patterns read from documents could each be different.
    static let capacity = 64
    /// How long one match may run, in ICU's progress reports (each about 10,000 steps of its
    /// backtracking matcher): a pattern like `(a+)+$` is exponential on some strings.
    static let maxProgressReports = 500

    private var compiled: [String: NSRegularExpression] = [:]

    /// The compiled form of `pattern`.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` naming a pattern that is too long or
    ///   not a regular expression.
    func regex(_ pattern: String) throws(SetteeError) -> NSRegularExpression {
        if let r = compiled[pattern] { return r }
        let r = try Self.compile(pattern)
        if compiled.count < Self.capacity { compiled[pattern] = r }
        return r
    }

    static func compile(_ pattern: String) throws(SetteeError) -> NSRegularExpression {
        guard pattern.count <= maxPatternLength else {
            throw SetteeError(.invalidParameter, "query: a regular expression longer than \(maxPatternLength) characters (\(quoted(pattern)))")
        }
        do {
            return try NSRegularExpression(pattern: pattern)
        } catch {
            throw SetteeError(.invalidParameter, "query: \(quoted(pattern)) is not a valid regular expression")
        }
    }

    /// The pattern as an error names it: quoted, and cut after 100 characters.
    static func quoted(_ pattern: String) -> String {
        pattern.count > 100 ? "\"\(pattern.prefix(100))…\"" : "\"\(pattern)\""
    }

    /// Whether `regex` matches somewhere in `string`.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` when the match runs longer than
    ///   ``maxProgressReports`` allow (catastrophic backtracking): an error, not a guess.
    static func matches(_ regex: NSRegularExpression, _ string: String) throws(SetteeError) -> Bool {
        var found = false
        var reports = 0
        let range = NSRange(location: 0, length: (string as NSString).length)
        regex.enumerateMatches(in: string, options: [.reportProgress], range: range) { match, flags, stop in
            if match != nil {
                found = true
                stop.pointee = true
            } else if flags.contains(.progress) {
                reports += 1
                if reports > maxProgressReports { stop.pointee = true }
            }
        }
        guard found || reports <= maxProgressReports else {
            throw SetteeError(.invalidParameter, "query: the regular expression \(quoted(regex.pattern)) takes too long to match a value (it backtracks too much)")
        }
        return found
    }
}

extension QueryExpression {
    /// `REGEXP_LIKE(s, pattern)` and `REGEXP_CONTAINS(s, pattern)`: whether the pattern (ICU's
    /// syntax, as Foundation's NSRegularExpression reads it) matches somewhere in `s`. MISSING
    /// in, MISSING out; NULL or a value that is not a string, NULL.
    static func regexpContains(_ args: [JSONValue?], regexes: RegexCache?) throws(SetteeError) -> JSONValue? {
        guard args.count == 2 else { return .null }
        guard let s = args[0], let p = args[1] else { return nil }
        guard case .string(let string) = s, case .string(let pattern) = p else { return .null }
        let regex: NSRegularExpression
        if let regexes { regex = try regexes.regex(pattern) } else { regex = try RegexCache.compile(pattern) }
        return .bool(try RegexCache.matches(regex, string))
    }
}
