import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import SetteeHTTP
import NIOCore
@_spi(Replication) @_spi(Server) import Settee

/// CouchDB's attachments over Settee's blobs (`WireAttachments` holds the mapping): the order of
/// a multipart upload's parts.
enum Attachments {
    /// The keys of a JSON document's `_attachments` in the order they are written, which is the
    /// order of a multipart request's attachment parts (a `JSONValue` object keeps no order).
    static func orderedNames(in json: [UInt8]) -> [String] {
        var scanner = KeyScanner(bytes: json)
        return scanner.attachmentNames()
    }
}

/// Just enough of a JSON reader to list the keys of the top-level `_attachments` object in order,
/// on a body the parser has already accepted.
private struct KeyScanner {
    let bytes: [UInt8]
    var i = 0

    mutating func skipSpace() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }

    mutating func string() -> String? {
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
        let start = i
        i += 1
        while i < bytes.count, bytes[i] != UInt8(ascii: "\"") { i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1 }
        i += 1
        guard i <= bytes.count, case .string(let s)? = try? JSONValue(parsing: Array(bytes[start ..< i])) else { return nil }
        return s
    }

    mutating func skipValue() {
        skipSpace()
        guard i < bytes.count else { return }
        switch bytes[i] {
        case UInt8(ascii: "\""): _ = string()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            repeat {
                switch bytes[i] {
                case UInt8(ascii: "\""): _ = string(); continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                default: break
                }
                i += 1
            } while depth > 0 && i < bytes.count
        default:
            while i < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]")].contains(bytes[i]) { i += 1 }
        }
    }

    /// The keys of an object starting at `i`.
    mutating func keys(collectValuesOf wanted: String? = nil, into names: inout [String]) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return false }
        i += 1
        while true {
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return false }
            guard let key = string() else { return false }
            skipSpace()
            i += 1   // ':'
            if let wanted, key == wanted {
                skipSpace()
                var inner: [String] = []
                var nested = KeyScanner(bytes: bytes, i: i)
                _ = nested.keys(into: &inner)
                names = inner
                return true
            }
            if wanted == nil { names.append(key) }
            skipValue()
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: ",") { i += 1 }
        }
    }

    mutating func keys(into names: inout [String]) -> Bool { keys(collectValuesOf: nil, into: &names) }

    mutating func attachmentNames() -> [String] {
        var names: [String] = []
        _ = keys(collectValuesOf: "_attachments", into: &names)
        return names
    }
}

extension CouchAPI {
    /// Turns a document's incoming `_attachments` into stored entries: inline `data` is decoded
    /// and stored, `follows` takes the next multipart body, a `stub` is the entry of the revision
    /// it builds on (`parent`, with the `revpos` the stub gives, if any), else 412 `missing_stub`.
    func storeAttachments(_ incoming: [String: JSONValue], parent: [String: JSONValue], generation: UInt64,
                          follows: [String: Data], db: ServedDatabase) async throws -> [String: JSONValue] {
        var stored: [String: JSONValue] = [:]
        for (name, value) in incoming {
            guard case .object(let a) = value else { throw CouchError.badRequest("attachment \(name) must be an object") }
            guard let (blob, entry) = try WireAttachments.decode(name: name, a, follows: follows[name], generation: generation,
                                                                 maxSize: db.config.maxAttachmentSize) else {
                // A stub that gives its `revpos` names the revision that added the attachment: one
                // whose entry says otherwise is not that attachment (CouchDB's check).
                func position(_ v: JSONValue?) -> Double? {
                    switch v {
                    case .int(let n)?: Double(n)
                    case .double(let d)?: d
                    default: nil
                    }
                }
                guard let previous = parent[name],
                      a["revpos"] == nil || position(a["revpos"]) == position(previous.objectValue?["revpos"]) else {
                    throw CouchError(.preconditionFailed, "missing_stub", "Invalid attachment stub in \(name) for the revision it builds on")
                }
                stored[name] = previous
                continue
            }
            try await db.database.saveBlob(blob)
            stored[name] = entry
        }
        return stored
    }

    /// CouchDB's form of stored `_attachments`: stubs, or with `data` for those added after
    /// generation `inlineAfter` (nil: none inline).
    func wireAttachments(_ stored: [String: JSONValue], _ db: ServedDatabase, inlineAfter: UInt64?) throws -> JSONValue {
        var out: [String: JSONValue] = [:]
        for (name, value) in stored {
            guard case .object(let e) = value, case .string(let digest)? = e["digest"] else {
                throw SetteeError(.corrupted, "attachment \(name) is not a blob")
            }
            let type = e["content_type"]?.stringValue ?? "application/octet-stream"
            let revpos = e["revpos"]?.int64Value ?? 1
            var wire: [String: JSONValue] = [
                "content_type": .string(type),
                "length": e["length"] ?? 0,
                "revpos": .int(revpos),
            ]
            let inline = inlineAfter.map { UInt64(max(revpos, 0)) > $0 } ?? false
            var content: Data?
            if inline || e["md5"] == nil {
                guard let blob = try db.database.blob(withDigest: digest, contentType: type), let data = blob.content else {
                    throw SetteeError(.notFound, "the content of attachment \(name) is missing")
                }
                content = data
            }
            wire["digest"] = .string(e["md5"]?.stringValue ?? WireAttachments.md5(content ?? Data()))
            if inline, let content {
                wire["data"] = .string(content.base64EncodedString())
            } else {
                wire["stub"] = true
            }
            out[name] = .object(wire)
        }
        return .object(out)
    }

    /// The attachments a multipart answer sends as parts after the document: entries marked
    /// `follows` for those added after generation `after`, stubs for the others; and the parts'
    /// contents in the order the JSON lists the names (sorted, as the writer sorts keys).
    func followingAttachments(_ stored: [String: JSONValue], _ db: ServedDatabase, after: UInt64)
    throws -> (json: JSONValue, parts: [(name: String, type: String, content: Data)]) {
        guard case .object(var wire) = try wireAttachments(stored, db, inlineAfter: nil) else { return (.object([:]), []) }
        var parts: [(name: String, type: String, content: Data)] = []
        for name in wire.keys.sorted() {
            guard case .object(var e)? = wire[name], UInt64(max(e["revpos"]?.int64Value ?? 1, 0)) > after,
                  case .object(let s)? = stored[name], case .string(let digest)? = s["digest"] else { continue }
            let type = Self.headerType(e["content_type"])
            guard let blob = try db.database.blob(withDigest: digest, contentType: type), let content = blob.content else {
                throw SetteeError(.notFound, "the content of attachment \(name) is missing")
            }
            e.removeValue(forKey: "stub")
            e["follows"] = true
            wire[name] = .object(e)
            parts.append((name, type, content))
        }
        return (.object(wire), parts)
    }

    /// A stored attachment's type as a header: a type stored before types were checked (too
    /// long, or with control characters) goes out as plain bytes, so no header echoes unbounded
    /// or malformed input.
    static func headerType(_ stored: JSONValue?) -> String {
        stored?.stringValue.flatMap { WireAttachments.isContentType($0) ? $0 : nil } ?? "application/octet-stream"
    }

    // MARK: - /{db}/{doc}/{attachment}

    func attachment(_ call: inout Call, _ db: ServedDatabase, id: String, name: String) async throws -> Response {
        try Self.checkPartitionedID(id, in: db)
        switch call.request.method {
        case .get, .head: return try getAttachment(call, db, id: id, name: name)
        case .put: return try await putAttachment(&call, db, id: id, name: name)
        case .delete: return try await deleteAttachment(call, db, id: id, name: name)
        default: throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    private func getAttachment(_ call: Call, _ db: ServedDatabase, id: String, name: String) throws -> Response {
        let database = db.database
        let revision: ReplicatedRevision?
        if let rev = try Self.revision(call.query["rev"], ifMatch: nil) {
            // A revision that is not there, or that the user may not read, is CouchDB's "missing".
            guard let found = try database.revision(withID: id, revisionID: rev),
                  try db.readability(of: id, revision: rev, for: call.principal) == .readable else {
                throw CouchError.notFound("missing")
            }
            revision = found
        } else {
            guard let tree = try database.revisionTree(withID: id),
                  tree.revisions.first(where: { $0.revisionID == tree.currentRevisionID })?.isDeleted == false else {
                throw CouchError.notFound("Document is missing attachment")
            }
            revision = try database.revision(withID: id, revisionID: tree.currentRevisionID)
        }
        // What the user may not read is missing, as for a document that does not exist.
        if let revision, try db.readability(of: id, revision: revision.revisionID, for: call.principal) != .readable {
            throw CouchError.notFound("Document is missing attachment")
        }
        guard let revision, case .object(let atts)? = try revision.properties["_attachments"],
              case .object(let e)? = atts[name], case .string(let digest)? = e["digest"] else {
            throw CouchError.notFound("Document is missing attachment")
        }
        let type = Self.headerType(e["content_type"])
        guard let blob = try database.blob(withDigest: digest, contentType: type), let content = blob.content else {
            throw SetteeError(.notFound, "the content of attachment \(name) is missing")
        }
        let md5 = e["md5"]?.stringValue ?? WireAttachments.md5(content)
        // CouchDB's ETag of an attachment is its MD5 in base64, quoted, without the `md5-`.
        let etag = "\"\(md5.hasPrefix("md5-") ? String(md5.dropFirst(4)) : md5)\""
        if let notModified = Self.notModified(call, etag: etag) { return notModified }
        var headers: HTTPFields = [.contentType: type, .eTag: etag, .acceptRanges: "bytes"]
        Self.neverActive(&headers, contentType: type, name: name)
        // `bytes=0-` is the whole body: CouchDB answers it as a plain 200.
        if let range = call.request.headers[.range], range.trimmingCharacters(in: .whitespaces) != "bytes=0-" {
            guard let (start, end) = Self.byteRange(range, length: content.count) else {
                var e = CouchError(.rangeNotSatisfiable, "range_not_satisfiable", "Requested range not satisfiable")
                e.headers[.contentRange] = "bytes */\(content.count)"
                throw e
            }
            headers[.contentRange] = "bytes \(start)-\(end)/\(content.count)"
            return Response(status: .partialContent, headers: headers,
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: content[content.startIndex + start ... content.startIndex + end])))
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: content)))
    }

    /// A sandbox that gives a page no script and no origin of its own, and no type sniffing:
    /// what attachments and rendering functions answer is never active on either port's origin.
    static func sandboxed(_ headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = "sandbox; default-src 'none'"
        headers[.xContentTypeOptions] = "nosniff"
    }

    /// An attachment is data, never a page of either port's origin: a sandbox that gives it no
    /// script and no origin of its own, no type sniffing, and for a type a browser would run (HTML,
    /// SVG, XML, JavaScript, …) a download instead of a display.
    static func neverActive(_ headers: inout HTTPFields, contentType: String, name: String) {
        sandboxed(&headers)
        let mime = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        let scriptable = ["text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml", "text/xsl",
                          "application/xslt+xml", "text/javascript", "application/javascript", "application/x-javascript",
                          "application/ecmascript", "text/ecmascript", "application/x-shockwave-flash", "application/pdf",
                          "multipart/x-mixed-replace", "text/vtt", "application/rss+xml", "application/atom+xml"]
        if mime.isEmpty || scriptable.contains(mime) || mime.hasSuffix("+xml") || mime.hasSuffix("/xml") {
            // The name is the client's: quoted, with anything that could end the quote encoded.
            let safe = name.utf8.prefix(200).map { b -> String in
                (0x20 ..< 0x7F).contains(b) && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") && b != UInt8(ascii: "%")
                    ? String(UnicodeScalar(b)) : String(format: "%%%02X", b)
            }.joined()
            headers[.contentDisposition] = "attachment; filename=\"\(safe)\""
        }
    }

    /// One `bytes=a-b`, `bytes=a-` or `bytes=-n` range within `length`; nil when malformed or
    /// unsatisfiable.
    static func byteRange(_ header: String, length: Int) -> (Int, Int)? {
        guard header.hasPrefix("bytes="), length > 0 else { return nil }
        let spec = header.dropFirst(6)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash], last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            guard let n = Int(last), n > 0 else { return nil }
            return (max(0, length - n), length - 1)
        }
        guard let a = Int(first), a >= 0, a < length else { return nil }
        if last.isEmpty { return (a, length - 1) }
        guard let b = Int(last), b >= a else { return nil }
        return (a, min(b, length - 1))
    }

    private func putAttachment(_ call: inout Call, _ db: ServedDatabase, id: String, name: String) async throws -> Response {
        guard !name.hasPrefix("_") else { throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'") }
        let rev = try Self.revision(call.query["rev"], ifMatch: call.request.headers[.ifMatch])
        let type = try Self.contentType(call.request.headers) ?? "application/octet-stream"
        guard WireAttachments.isContentType(type) else {
            throw CouchError.badRequest("Content-Type must be a media type of at most \(WireAttachments.maxContentTypeLength) characters")
        }
        let buffer = try await call.collectBody(upTo: db.config.maxAttachmentSize)
        let content = Data(buffer.readableBytesView)
        // CouchDB's Location of an attachment PUT names the attachment.
        return try await updateAttachments(db, id: id, rev: rev, location: location(call, db, id, name), as: call.principal) { current, generation in
            let blob = Blob(contentType: type, data: content)
            try await db.database.saveBlob(blob)
            current[name] = WireAttachments.entry(blob: blob, revpos: generation, md5: WireAttachments.md5(content))
        }
    }

    private func deleteAttachment(_ call: Call, _ db: ServedDatabase, id: String, name: String) async throws -> Response {
        guard let rev = try Self.revision(call.query["rev"], ifMatch: call.request.headers[.ifMatch]) else {
            throw CouchError.conflict
        }
        return try await updateAttachments(db, id: id, rev: rev, status: .ok, as: call.principal) { current, _ in
            guard current.removeValue(forKey: name) != nil else { throw CouchError.notFound("Document is missing attachment") }
        }
    }

    /// A new revision of `id` on top of `rev` whose attachments `change` edits (CouchDB answers
    /// 201 to a PUT, 200 to a DELETE).
    func updateAttachments(_ db: ServedDatabase, id: String, rev: String?, status: HTTPResponse.Status = .created, location: String? = nil,
                                   as principal: Principal,
                                   _ change: (inout [String: JSONValue], UInt64) async throws -> Void) async throws -> Response {
        try checkDocumentID(id, in: db)
        let database = db.database
        let edit: MutableDocument
        let reader = try Reader(db, principal)
        // A revision the document does not have (or one the user may not read, alike) is
        // CouchDB's 409 `not_found` "missing_rev"; one it has that is not a leaf, a conflict.
        if let rev {
            let known = try await database.revisionTree(withID: id)?.revisions.contains { $0.revisionID == rev } ?? false
            guard known, try reader.readability(of: id, revision: rev) == .readable else {
                throw CouchError(.conflict, "not_found", "missing_rev")
            }
        }
        if let base = try await editBase(reader, id: id, rev: rev) {
            if let e = base.bodyError { throw e }
            edit = base.toMutable()
        } else {
            if let rev {
                guard let tree = try await database.revisionTree(withID: id), tree.currentRevisionID == rev,
                      try reader.readability(of: id, revision: rev) == .readable else { throw CouchError.conflict }
            }
            edit = MutableDocument(id: id)
        }
        let generation = try childGeneration(of: edit.revisionID)
        var atts = edit.dictionary(forKey: "_attachments") ?? [:]
        try await change(&atts, generation)
        edit.setValue(atts.isEmpty ? nil : .object(atts), forKey: "_attachments")
        guard try await saveEdit(edit, db, as: principal), let newRev = edit.revisionID else {
            throw CouchError.conflict
        }
        var headers: HTTPFields = [.eTag: "\"\(newRev)\""]
        if let location { headers[.location] = location }
        return try jsonResponse(["ok": true, "id": .string(id), "rev": .string(newRev)], status: status, headers: headers)
    }
}
