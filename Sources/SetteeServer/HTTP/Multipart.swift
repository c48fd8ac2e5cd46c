import Foundation
import HTTPTypes
import Hummingbird
import Settee
import SetteeHTTP

extension CouchAPI {
    /// A `multipart/related` document upload: the JSON document first, then one part per
    /// attachment marked `"follows": true`, named by `Content-Disposition` or, without one, in
    /// the order the document lists them.
    func multipartDocument(_ call: inout Call, _ db: ServedDatabase, contentType: String) async throws -> ([String: JSONValue], [String: Data]) {
        guard let boundary = Multipart.boundary(of: contentType) else {
            throw CouchError.badRequest("multipart/related needs a boundary of 1 to \(Multipart.maxBoundaryLength) characters")
        }
        let limit = bodyLimit(db) + db.config.maxAttachmentSize
        let buffer = try await call.collectBody(upTo: limit)
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
        // The names still waiting for their part, in the document's order; a part named by its
        // Content-Disposition takes that name, another the next waiting one. Linear in the parts.
        let order = Attachments.orderedNames(in: first.body).filter { attachments[$0]?.objectValue?["follows"] == true }
        var waiting = Set(order)
        var next = 0
        func nextWaiting() -> String? {
            while next < order.count, !waiting.contains(order[next]) { next += 1 }
            return next < order.count ? order[next] : nil
        }
        var follows: [String: Data] = [:]
        for part in parts.dropFirst() {
            let name: String
            if let named = Multipart.filename(part.headers["content-disposition"]), waiting.contains(named) {
                name = named
            } else if let first = nextWaiting() {
                name = first
            } else {
                throw CouchError.badRequest("multipart body has a part no attachment follows")
            }
            waiting.remove(name)
            follows[name] = Data(part.body)
        }
        if let missing = nextWaiting() { throw CouchError.badRequest("multipart body is missing the part of attachment \(missing)") }
        return (document, follows)
    }
}

extension CouchAPI {
    /// `POST /{db}/{docid}` with `multipart/form-data`: CouchDB's form upload. The form's `_rev`
    /// field names the document's current revision (none for a new document); each file of its
    /// `_attachments` field is added to the document, or replaces the attachment of its name,
    /// under the file's name and type. A form is what any page can post to any site unasked,
    /// so the request must come from a page of this server: its `Referer` (and `Origin`, when
    /// sent) must name the host the request was sent to, as CouchDB requires.
    func formUpload(_ call: inout Call, _ db: ServedDatabase, id: String) async throws -> Response {
        try checkDocumentID(id)
        let type = try Self.contentType(call.request.headers) ?? ""
        guard type.lowercased().hasPrefix("multipart/form-data") else {
            throw CouchError.unsupportedMediaType("Content-Type must be multipart/form-data")
        }
        try checkSameOriginForm(call)
        guard let boundary = Multipart.boundary(of: type) else {
            throw CouchError.badRequest("multipart/form-data needs a boundary of 1 to \(Multipart.maxBoundaryLength) characters")
        }
        let buffer = try await call.collectBody(upTo: bodyLimit(db) + db.config.maxAttachmentSize)
        var rev: String?
        var files: [(name: String, type: String, content: Data)] = []
        for part in try Multipart.parts(Array(buffer.readableBytesView), boundary: boundary) {
            let disposition = part.headers["content-disposition"]
            switch Self.formFieldName(disposition) {
            case "_rev":
                rev = String(decoding: part.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            case "_attachments":
                // A file input left empty sends a part without a file name: nothing to add.
                guard let name = Multipart.filename(disposition), !name.isEmpty else { continue }
                guard !name.hasPrefix("_") else { throw CouchError.badRequest("Attachment name '\(name)' starts with prohibited character '_'") }
                let fileType = part.headers["content-type"] ?? "application/octet-stream"
                guard WireAttachments.isContentType(fileType) else {
                    throw CouchError.badRequest("Content-Type must be a media type of at most \(WireAttachments.maxContentTypeLength) characters")
                }
                guard part.body.count <= db.config.maxAttachmentSize else {
                    throw CouchError.tooLarge("attachment \(name) is over the limit of \(db.config.maxAttachmentSize) bytes")
                }
                files.append((name, fileType, Data(part.body)))
            case "_doc":
                throw CouchError.badRequest("a form's _doc field is not supported: send the document with PUT")
            default:
                continue
            }
        }
        if let rev, rev.isEmpty { throw CouchError.badRequest("Invalid rev format") }
        let named = try Self.revision(rev, ifMatch: nil)
        return try await updateAttachments(db, id: id, rev: named, as: call.principal) { current, generation in
            for file in files {
                let blob = Blob(contentType: file.type, data: file.content)
                try await db.database.saveBlob(blob)
                current[file.name] = WireAttachments.entry(blob: blob, revpos: generation, md5: WireAttachments.md5(file.content))
            }
        }
    }

    /// A form post's `Referer` names the host the request went to (and `Origin`, when sent,
    /// is that host's); a browser sends both for a form of any page, so a page of another site
    /// is refused: 400 as CouchDB's `validate_referer`, 403 for a foreign origin.
    private func checkSameOriginForm(_ call: Call) throws {
        let host = (call.request.head.authority ?? "").lowercased()
        guard let referer = call.request.headers[.referer] else { throw CouchError.badRequest("Referer header required.") }
        guard let url = URL(string: referer), let refererHost = url.host?.lowercased() else {
            throw CouchError.badRequest("Referer header must match host.")
        }
        let refererAuthority = url.port.map { "\(refererHost):\($0)" } ?? refererHost
        guard !host.isEmpty, refererAuthority == host else { throw CouchError.badRequest("Referer header must match host.") }
        if let origin = call.request.headers[.origin], let o = URL(string: origin) {
            let originAuthority = (o.host?.lowercased() ?? "") + (o.port.map { ":\($0)" } ?? "")
            guard originAuthority == host else { throw CouchError.forbidden("the form comes from another site (\(origin))") }
        } else if call.request.headers[.origin] != nil {
            throw CouchError.forbidden("the form comes from another site")
        }
        if call.request.headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased() == "cross-site" {
            throw CouchError.forbidden("the form comes from another site")
        }
    }

    /// The `name` of a `Content-Disposition: form-data; name="…"` header.
    static func formFieldName(_ disposition: String?) -> String? {
        guard let disposition else { return nil }
        for parameter in disposition.split(separator: ";").dropFirst() {
            let kv = parameter.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces).lowercased() == "name" else { continue }
            var value = kv[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            return value
        }
        return nil
    }
}
