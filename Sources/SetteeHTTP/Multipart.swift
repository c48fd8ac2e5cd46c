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

    /// The `boundary` parameter of a multipart content type.
    package static func boundary(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let kv = parameter.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            let value = kv[1].trimmingCharacters(in: .whitespaces)
            let unquoted = value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2 ? String(value.dropFirst().dropLast()) : value
            return unquoted.isEmpty ? nil : unquoted
        }
        return nil
    }

    /// The parts of `body`; a body without its closing delimiter, or a part without its blank
    /// line after the headers, is malformed (400).
    package static func parts(_ body: [UInt8], boundary: String) throws -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        var positions: [Int] = []
        var i = 0
        while let at = find(delimiter, in: body, from: i) {
            positions.append(at)
            i = at + delimiter.count
        }
        guard positions.count >= 2 else { throw SetteeError(.invalidParameter, "multipart body: delimiters missing") }
        let closing = positions[positions.count - 1] + delimiter.count
        guard closing + 2 <= body.count, body[closing] == UInt8(ascii: "-"), body[closing + 1] == UInt8(ascii: "-") else {
            throw SetteeError(.invalidParameter, "multipart body is truncated: no closing delimiter")
        }
        var parts: [Part] = []
        for (n, start) in positions.dropLast().enumerated() {
            var from = start + delimiter.count
            // The rest of the delimiter line.
            guard let lineEnd = find([0x0D, 0x0A], in: body, from: from) else { throw SetteeError(.invalidParameter, "multipart body: malformed delimiter") }
            from = lineEnd + 2
            var to = positions[n + 1]
            if to >= 2, body[to - 2] == 0x0D, body[to - 1] == 0x0A { to -= 2 }
            guard from <= to else { throw SetteeError(.invalidParameter, "multipart body: empty part") }
            let chunk = Array(body[from ..< to])
            let headerEnd: Int
            let bodyStart: Int
            if chunk.starts(with: [0x0D, 0x0A]) {
                headerEnd = 0
                bodyStart = 2
            } else {
                guard let blank = find([0x0D, 0x0A, 0x0D, 0x0A], in: chunk, from: 0) else {
                    throw SetteeError(.invalidParameter, "multipart body: a part has no end of headers")
                }
                headerEnd = blank
                bodyStart = blank + 4
            }
            var headers: [String: String] = [:]
            for line in String(decoding: chunk[0 ..< headerEnd], as: UTF8.self).split(separator: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { throw SetteeError(.invalidParameter, "multipart body: malformed part header") }
                headers[line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            parts.append(Part(headers: headers, body: Array(chunk[bodyStart...])))
        }
        return parts
    }

    package static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        let first = needle[0]
        var i = start
        while i <= haystack.count - needle.count {
            if haystack[i] == first && haystack[i ..< i + needle.count].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
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
