import Foundation
import Settee

/// MIME multipart bodies (a document with its attachments as `multipart/related`, several as
/// `multipart/mixed`): read by the server from CouchDB's replicator and by URLEndpoint from servers.
package enum Multipart {
    package struct Part {
        /// Header names lower-cased.
        package var headers: [String: String]
        package var body: [UInt8]

        package init(headers: [String: String], body: [UInt8]) {
            self.headers = headers
            self.body = body
        }
    }

    /// The longest boundary RFC 2046 allows, in characters.
    package static let maxBoundaryLength = 70

    /// The `boundary` parameter of a multipart content type: 1 to 70 characters (RFC 2046), else
    /// nil.
    package static func boundary(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let kv = parameter.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            let value = kv[1].trimmingCharacters(in: .whitespaces)
            let unquoted = value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2 ? String(value.dropFirst().dropLast()) : value
            return unquoted.isEmpty || unquoted.utf8.count > maxBoundaryLength ? nil : unquoted
        }
        return nil
    }

    /// The parts of `body`; a body without its closing delimiter, or a part without its blank
    /// line after the headers, is malformed (400). Linear in the body: the delimiters are found
    /// in one pass, and every later search stays within its part.
    package static func parts(_ body: [UInt8], boundary: String) throws -> [Part] {
        guard !boundary.isEmpty, boundary.utf8.count <= maxBoundaryLength else {
            throw SetteeError(.invalidParameter, "multipart boundary must be 1 to \(maxBoundaryLength) characters")
        }
        let delimiter = Array("--\(boundary)".utf8)
        let positions = Finder(delimiter).all(in: body)
        guard positions.count >= 2 else { throw SetteeError(.invalidParameter, "multipart body: delimiters missing") }
        let closing = positions[positions.count - 1] + delimiter.count
        guard closing + 2 <= body.count, body[closing] == UInt8(ascii: "-"), body[closing + 1] == UInt8(ascii: "-") else {
            throw SetteeError(.invalidParameter, "multipart body is truncated: no closing delimiter")
        }
        let lineEnd = Finder([0x0D, 0x0A]), blankLine = Finder([0x0D, 0x0A, 0x0D, 0x0A])
        var parts: [Part] = []
        for (n, start) in positions.dropLast().enumerated() {
            var to = positions[n + 1]
            // The rest of the delimiter line, within this part.
            guard let end = lineEnd.first(in: body, from: start + delimiter.count, before: to) else {
                throw SetteeError(.invalidParameter, "multipart body: malformed delimiter")
            }
            let from = end + 2
            if to >= 2, body[to - 2] == 0x0D, body[to - 1] == 0x0A { to -= 2 }
            guard from <= to else { throw SetteeError(.invalidParameter, "multipart body: empty part") }
            let headerEnd: Int
            let bodyStart: Int
            if to - from >= 2, body[from] == 0x0D, body[from + 1] == 0x0A {
                headerEnd = from
                bodyStart = from + 2
            } else {
                guard let blank = blankLine.first(in: body, from: from, before: to) else {
                    throw SetteeError(.invalidParameter, "multipart body: a part has no end of headers")
                }
                headerEnd = blank
                bodyStart = blank + 4
            }
            var headers: [String: String] = [:]
            for line in String(decoding: body[from ..< headerEnd], as: UTF8.self).split(separator: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { throw SetteeError(.invalidParameter, "multipart body: malformed part header") }
                headers[line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            parts.append(Part(headers: headers, body: Array(body[min(bodyStart, to) ..< to])))
        }
        return parts
    }

    /// The first occurrence of `needle` in `haystack` at or after `start`.
    package static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        Finder(needle).first(in: haystack, from: start, before: haystack.count)
    }

    /// Knuth–Morris–Pratt search for one needle: each byte of a haystack is looked at a bounded
    /// number of times, whatever the needle and the haystack hold (a naive search is quadratic
    /// on a long boundary repeated almost everywhere).
    package struct Finder {
        package let needle: [UInt8]
        /// For each prefix of the needle, the length of its longest proper prefix that is also its suffix.
        private let fallback: [Int]

        package init(_ needle: [UInt8]) {
            self.needle = needle
            var table = [Int](repeating: 0, count: needle.count)
            var k = 0
            for i in needle.indices.dropFirst() {
                while k > 0 && needle[i] != needle[k] { k = table[k - 1] }
                if needle[i] == needle[k] { k += 1 }
                table[i] = k
            }
            fallback = table
        }

        /// The first match starting at or after `start` and ending at or before `end`.
        package func first(in haystack: [UInt8], from start: Int, before end: Int) -> Int? {
            var found: Int?
            scan(haystack, from: start, before: end) { at in
                found = at
                return false
            }
            return found
        }

        /// Every match, left to right, none overlapping the one before.
        package func all(in haystack: [UInt8]) -> [Int] {
            var out: [Int] = []
            scan(haystack, from: 0, before: haystack.count) { at in
                out.append(at)
                return true
            }
            return out
        }

        private func scan(_ haystack: [UInt8], from start: Int, before end: Int, _ found: (Int) -> Bool) {
            let m = needle.count
            let limit = min(end, haystack.count)
            guard m > 0, start >= 0, start < limit else { return }
            var k = 0
            var i = start
            while i < limit {
                let b = haystack[i]
                while k > 0 && b != needle[k] { k = fallback[k - 1] }
                if b == needle[k] { k += 1 }
                if k == m {
                    if !found(i + 1 - m) { return }
                    k = 0   // matches do not overlap
                }
                i += 1
            }
        }
    }

    /// The `filename` of a `Content-Disposition` header.
    package static func filename(_ disposition: String?) -> String? {
        guard let disposition, let range = disposition.range(of: "filename=") else { return nil }
        var value = disposition[range.upperBound...].split(separator: ";").first.map(String.init) ?? ""
        value = value.trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2 { value = String(value.dropFirst().dropLast()) }
        return value.removingPercentEncoding ?? value
    }
}
