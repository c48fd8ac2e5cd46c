import Crypto
import Foundation
import Settee

/// CouchDB's attachments over Settee's blobs, both ways.
///
/// Settee keeps a document's `_attachments` as a dictionary of blobs by name, each
/// `{"@type": "blob", "content_type", "digest": "sha1-…", "length", "revpos", "md5": "md5-…"}`:
/// the SHA-1 digest is the blob store's content address, `revpos` the generation that added the
/// attachment, `md5` the digest CouchDB and its replicator check. On the wire each is CouchDB's
/// `{"content_type", "digest": "md5-…", "length", "revpos"}` with `stub: true`, `data` (base64)
/// or `follows: true` (its bytes in a part of a multipart body).
package enum WireAttachments {
    /// The MD5 digest CouchDB shows: `md5-` and the base64 of the 16 bytes.
    package static func md5(_ data: some DataProtocol) -> String {
        "md5-" + Data(Insecure.MD5.hash(data: data)).base64EncodedString()
    }

    /// The longest `content_type` an attachment may have: it is sent back as a header.
    package static let maxContentTypeLength = 255

    /// Whether `type` can be a `Content-Type` header as it is: 1 to 255 characters, visible ASCII
    /// and spaces only.
    package static func isContentType(_ type: String) -> Bool {
        !type.isEmpty && type.utf8.count <= maxContentTypeLength && type.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// The stored entry of content just received.
    package static func entry(blob: Blob, revpos: UInt64, md5: String) -> JSONValue {
        var o = blob.properties
        o["revpos"] = .int(Int64(revpos))
        o["md5"] = .string(md5)
        return .object(o)
    }

    /// One received attachment with its content (`data`, or `follows` with the bytes of its
    /// part), decoded (gzip too) and checked against its `length` and `md5-` digest: the blob to
    /// store and the entry that references it. Nil for a stub, which names content the receiver
    /// has already.
    ///
    /// A server that stored an attachment compressed names it by the MD5 of the compressed bytes
    /// (CouchDB does, for text types) and sends it decoded: with `digestOfDecoded` false, a
    /// digest that does not match the decoded content is kept as the entry's `md5` (what the
    /// server's stubs will name) instead of refusing the content.
    ///
    /// - Throws: `WireError` for a bad name, bad base64, a missing part, an unknown encoding
    ///   (415), content over `maxSize` (413), a length or digest that does not match.
    package static func decode(name: String, _ a: [String: JSONValue], follows: Data?, generation: UInt64,
                               maxSize: Int, digestOfDecoded: Bool = true) throws -> (blob: Blob, entry: JSONValue)? {
        guard !name.isEmpty, !name.hasPrefix("_") else {
            throw WireError("bad_request", "Attachment name '\(name)' starts with prohibited character '_'")
        }
        if a["stub"] == true { return nil }
        var content: Data
        if case .string(let b64)? = a["data"] {
            guard let d = Base64.decode(b64) else { throw WireError("bad_request", "Invalid attachment data for \(name)") }
            content = d
        } else if a["follows"] == true {
            guard let d = follows else { throw WireError("bad_request", "attachment \(name) follows, but its part is missing") }
            content = d
        } else {
            throw WireError("bad_request", "attachment \(name) needs data, follows or stub")
        }
        let gzipped: Bool
        switch a["encoding"] {
        case nil, .string("identity")?:
            gzipped = false
        case .string("gzip")?:
            // Sent as CouchDB stores it: its digest is the encoded bytes' MD5, its length the
            // decoded one. Stored decoded (the blob store compresses on its own).
            if case .string(let claimed)? = a["digest"], claimed.hasPrefix("md5-"), claimed != md5(content) {
                throw WireError("bad_request", "attachment \(name): digest \(claimed) does not match its encoded content")
            }
            content = try Gzip.decompress(content, limit: maxSize)
            gzipped = true
        default:
            throw WireError("bad_request", "attachment \(name): unknown encoding \(a["encoding"].flatMap { try? $0.jsonText() } ?? "")", status: 415)
        }
        guard content.count <= maxSize else {
            throw WireError("too_large", "Attachment \(name) is \(content.count) bytes; the limit is \(maxSize)", status: 413)
        }
        if case .int(let length)? = a["length"], length != Int64(content.count) {
            throw WireError("bad_request", "attachment \(name): length \(length) does not match its \(content.count) bytes")
        }
        var digest = md5(content)
        if !gzipped, case .string(let claimed)? = a["digest"], claimed.hasPrefix("md5-"), claimed != digest {
            guard !digestOfDecoded else {
                throw WireError("bad_request", "attachment \(name): digest \(claimed) does not match its content")
            }
            digest = claimed
        }
        let type: String
        switch a["content_type"] {
        case nil, .null?: type = "application/octet-stream"
        case .string(let t)? where isContentType(t): type = t
        default:
            throw WireError("bad_request", "attachment \(name): content_type must be a media type of at most \(maxContentTypeLength) visible ASCII characters")
        }
        let blob = Blob(contentType: type, data: content)
        var revpos = generation
        if case .int(let r)? = a["revpos"], r > 0, UInt64(r) <= generation { revpos = UInt64(r) }
        return (blob, entry(blob: blob, revpos: revpos, md5: digest))
    }
}
