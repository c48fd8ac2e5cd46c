import Foundation
import Hummingbird
import Settee
import SetteeHTTP

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
