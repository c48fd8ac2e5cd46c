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
