import Foundation
import Hummingbird
import Settee

/// MIME multipart bodies (`multipart/related` uploads of a document with its attachments, as
/// CouchDB's replicator sends them).
enum Multipart {
    struct Part {
        /// Header names lower-cased.
        var headers: [String: String]
        var body: [UInt8]
    }

    /// The `boundary` parameter of a multipart content type.
    static func boundary(of contentType: String) -> String? {
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
    static func parts(_ body: [UInt8], boundary: String) throws -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        var positions: [Int] = []
        var i = 0
        while let at = find(delimiter, in: body, from: i) {
            positions.append(at)
            i = at + delimiter.count
        }
        guard positions.count >= 2 else { throw CouchError.badRequest("multipart body: delimiters missing") }
        let closing = positions[positions.count - 1] + delimiter.count
        guard closing + 2 <= body.count, body[closing] == UInt8(ascii: "-"), body[closing + 1] == UInt8(ascii: "-") else {
            throw CouchError.badRequest("multipart body is truncated: no closing delimiter")
        }
        var parts: [Part] = []
        for (n, start) in positions.dropLast().enumerated() {
            var from = start + delimiter.count
            // The rest of the delimiter line.
            guard let lineEnd = find([0x0D, 0x0A], in: body, from: from) else { throw CouchError.badRequest("multipart body: malformed delimiter") }
            from = lineEnd + 2
            var to = positions[n + 1]
            if to >= 2, body[to - 2] == 0x0D, body[to - 1] == 0x0A { to -= 2 }
            guard from <= to else { throw CouchError.badRequest("multipart body: empty part") }
            let chunk = Array(body[from ..< to])
            let headerEnd: Int
            let bodyStart: Int
            if chunk.starts(with: [0x0D, 0x0A]) {
                headerEnd = 0
                bodyStart = 2
            } else {
                guard let blank = find([0x0D, 0x0A, 0x0D, 0x0A], in: chunk, from: 0) else {
                    throw CouchError.badRequest("multipart body: a part has no end of headers")
                }
                headerEnd = blank
                bodyStart = blank + 4
            }
            var headers: [String: String] = [:]
            for line in String(decoding: chunk[0 ..< headerEnd], as: UTF8.self).split(separator: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { throw CouchError.badRequest("multipart body: malformed part header") }
                headers[line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            parts.append(Part(headers: headers, body: Array(chunk[bodyStart...])))
        }
        return parts
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
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
    static func filename(_ disposition: String?) -> String? {
        guard let disposition, let range = disposition.range(of: "filename=") else { return nil }
        var value = disposition[range.upperBound...].split(separator: ";").first.map(String.init) ?? ""
        value = value.trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2 { value = String(value.dropFirst().dropLast()) }
        return value.removingPercentEncoding ?? value
    }
}

extension CouchAPI {
    /// A `multipart/related` document upload: the JSON document first, then one part per
    /// attachment marked `"follows": true`, named by `Content-Disposition` or, without one, in
    /// the order the document lists them.
    func multipartDocument(_ call: inout Call, _ db: ServedDatabase, contentType: String) async throws -> ([String: JSONValue], [String: Data]) {
        guard let boundary = Multipart.boundary(of: contentType) else {
            throw CouchError.badRequest("multipart/related needs a boundary")
        }
        let limit = bodyLimit(db) + db.config.maxAttachmentSize
        let buffer = try await call.request.collectBody(upTo: limit)
        let parts = try Multipart.parts(Array(buffer.readableBytesView), boundary: boundary)
        guard let first = parts.first else { throw CouchError.badRequest("multipart body has no document part") }
        let document: [String: JSONValue]
        do {
            guard case .object(let o) = try JSONValue(parsing: first.body) else { throw CouchError.badRequest("the document part must be a JSON object") }
            document = o
        } catch let e as SetteeError {
            throw CouchError.badRequest("invalid UTF-8 JSON in the document part: \(e.message)")
        }
        let attachments = document["_attachments"]?.objectValue ?? [:]
        var pending = Attachments.orderedNames(in: first.body).filter { attachments[$0]?.objectValue?["follows"] == true }
        var follows: [String: Data] = [:]
        for part in parts.dropFirst() {
            let name: String
            if let named = Multipart.filename(part.headers["content-disposition"]), pending.contains(named) {
                name = named
                pending.removeAll { $0 == named }
            } else if !pending.isEmpty {
                name = pending.removeFirst()
            } else {
                throw CouchError.badRequest("multipart body has a part no attachment follows")
            }
            follows[name] = Data(part.body)
        }
        guard pending.isEmpty else { throw CouchError.badRequest("multipart body is missing the part of attachment \(pending[0])") }
        return (document, follows)
    }
}
