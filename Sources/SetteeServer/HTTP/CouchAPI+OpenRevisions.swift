import Foundation
import HTTPTypes
import Hummingbird
import SetteeHTTP
import NIOCore
@_spi(Replication) @_spi(Server) import Settee

/// What `open_revs` and `_bulk_get` send for each revision asked for: one rule for `latest`, and
/// one encoder for CouchDB's `multipart/mixed` answer.
extension CouchAPI {
    /// One entry of an answer: a revision (its attachments sent when newer than `attachmentsAfter`,
    /// as stubs when that is nil), or an error object sent as it is.
    enum RevisionAnswer {
        case revision(ReplicatedRevision, attachmentsAfter: UInt64?)
        case error(JSONValue)
        /// A revision the user no longer reads: `{_id, _rev, _removed: true}` (Sync Gateway).
        case removed(id: String, rev: String)

        /// The answer for a revision the principal asked for: the revision, the `_removed` stub
        /// for one its user no longer reads, or nil for one it may not read, which the caller
        /// answers exactly as a revision that does not exist.
        static func gate(_ r: ReplicatedRevision, _ reader: Reader, after: UInt64?) throws -> RevisionAnswer? {
            switch try reader.readability(of: r.documentID, revision: r.revisionID) {
            case .readable: return .revision(r, attachmentsAfter: after)
            case .removed: return .removed(id: r.documentID, rev: r.revisionID)
            case .hidden: return nil
            }
        }

        static func removedJSON(_ id: String, _ rev: String) -> JSONValue {
            ["_id": .string(id), "_rev": .string(rev), "_removed": true]
        }
    }

    /// One revision's JSON in an answer about several (`_bulk_get`, `open_revs`), or that
    /// revision's error object: a stored revision that cannot be written (a generation stored
    /// before generations were bounded, a damaged body) fails alone, never the whole answer.
    func answerJSON(_ r: ReplicatedRevision, revs: Bool, reader: Reader, inlineAfter: UInt64?) -> Swift.Result<[String: JSONValue], RevisionError> {
        do {
            return .success(try revisionJSON(r, revs: revs, reader: reader, inlineAfter: inlineAfter))
        } catch {
            let c = CouchError(answering: error)
            if c.status == .internalServerError { server.log(.error, "\(reader.db.name)/\(r.documentID) \(r.revisionID): \(c.error): \(c.reason)") }
            return .failure(RevisionError(json: ["id": .string(r.documentID), "rev": .string(r.revisionID),
                                                 "error": .string(c.error), "reason": .string(c.reason)]))
        }
    }

    /// Sets a row's `doc` (`include_docs` of feeds and listings) to what `make` gives, or, when
    /// that document cannot be read or written, to null with the row's `error` and `reason`: one
    /// stored document never fails the answer for every reader.
    static func include(into row: inout [String: JSONValue], _ make: () throws -> JSONValue) {
        do {
            row["doc"] = try make()
        } catch {
            let c = CouchError(answering: error)
            row["doc"] = .null
            row["error"] = .string(c.error)
            row["reason"] = .string(c.reason)
        }
    }

    /// A revision's error object, as ``answerJSON(_:revs:reader:inlineAfter:)`` gives it.
    struct RevisionError: Error {
        var json: JSONValue
    }

    /// The revisions answering a request for `rev`: with `latest`, the leaves descending from it
    /// when it is not a leaf (CouchDB's replicator asks so, the revision it saw may have been
    /// replaced); an empty result means not found.
    func revisions(of id: String, rev: String, latest: Bool, in database: Database) throws -> [ReplicatedRevision] {
        if latest, let tree = try database.revisionTree(withID: id), tree.revisions.contains(where: { $0.revisionID == rev }),
           !tree.leafRevisionIDs.contains(rev) {
            let parents = Dictionary(tree.revisions.map { ($0.revisionID, $0.parentRevisionID) }, uniquingKeysWith: { a, _ in a })
            return try tree.leafRevisionIDs.compactMap { leaf in
                var cursor: String? = leaf
                while let c = cursor, c != rev { cursor = parents[c] ?? nil }
                return cursor == rev ? try database.revision(withID: id, revisionID: leaf) : nil
            }
        }
        return try database.revision(withID: id, revisionID: rev).map { [$0] } ?? []
    }

    /// `multipart/mixed`, as CouchDB answers a replicator: per revision a `multipart/related` part
    /// (the document with `follows`, then the attachments' bodies) when it has attachments to
    /// send, else an `application/json` part; an error as `application/json; error="true"`.
    func multipartMixed(_ answers: [RevisionAnswer], revs: Bool, reader: Reader) throws -> Response {
        let db = reader.db
        let boundary = Self.boundary()
        var body: [UInt8] = []
        for answer in answers {
            body += Array("--\(boundary)\r\n".utf8)
            switch answer {
            case .error(let json):
                body += Array("Content-Type: application/json; error=\"true\"\r\n\r\n".utf8)
                body += try json.jsonBytes()
            case .removed(let id, let rev):
                body += Array("Content-Type: application/json\r\n\r\n".utf8)
                body += try RevisionAnswer.removedJSON(id, rev).jsonBytes()
            case .revision(let r, let after):
                var o: [String: JSONValue]
                switch answerJSON(r, revs: revs, reader: reader, inlineAfter: nil) {
                case .success(let json): o = json
                case .failure(let e):
                    body += Array("Content-Type: application/json; error=\"true\"\r\n\r\n".utf8)
                    body += try e.json.jsonBytes()
                    body += Array("\r\n".utf8)
                    continue
                }
                var parts: [(name: String, type: String, content: Data)] = []
                if let after, case .object(let stored)? = try r.properties["_attachments"], !stored.isEmpty {
                    let following = try followingAttachments(stored, db, after: after)
                    o["_attachments"] = following.json
                    parts = following.parts
                }
                if parts.isEmpty {
                    body += Array("Content-Type: application/json\r\n\r\n".utf8)
                    body += try JSONValue.object(o).responseBytes()
                } else {
                    let inner = Self.boundary()
                    body += Array("Content-Type: multipart/related; boundary=\"\(inner)\"\r\n\r\n".utf8)
                    body += try Self.related(o, parts, boundary: inner)
                }
            }
            body += Array("\r\n".utf8)
        }
        body += Array("--\(boundary)--".utf8)
        return Response(status: .ok, headers: [.contentType: "multipart/mixed; boundary=\"\(boundary)\""],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// A document and the attachments that follow it as the body of a `multipart/related`
    /// message (CouchDB's form): the JSON part, then one part per attachment, in the order the
    /// JSON lists them.
    static func related(_ document: [String: JSONValue], _ parts: [(name: String, type: String, content: Data)],
                        boundary: String) throws -> [UInt8] {
        var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n".utf8)
        body += try JSONValue.object(document).responseBytes()
        for part in parts {
            let filename = part.name.replacingOccurrences(of: "\"", with: "%22")
            body += Array("\r\n--\(boundary)\r\nContent-Disposition: attachment; filename=\"\(filename)\"\r\nContent-Type: \(part.type)\r\nContent-Length: \(part.content.count)\r\n\r\n".utf8)
            body += Array(part.content)
        }
        body += Array("\r\n--\(boundary)--".utf8)
        return body
    }

    /// A single revision with the attachments `after` lets through as parts, answered as
    /// `multipart/related` (for a `GET` asking `Accept: multipart/related`); nil when no
    /// attachment follows (then the JSON answer is the same).
    func relatedDocument(_ document: [String: JSONValue], _ revision: ReplicatedRevision, _ db: ServedDatabase, after: UInt64,
                         headers: HTTPFields) throws -> Response? {
        guard case .object(let stored)? = try revision.properties["_attachments"], !stored.isEmpty else { return nil }
        let following = try followingAttachments(stored, db, after: after)
        guard !following.parts.isEmpty else { return nil }
        var o = document
        o["_attachments"] = following.json
        let boundary = Self.boundary()
        var fields = headers
        fields[.contentType] = "multipart/related; boundary=\"\(boundary)\""
        return Response(status: .ok, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try Self.related(o, following.parts, boundary: boundary))))
    }

    /// Whether the client's `Accept` takes `type`, as CouchDB (mochiweb) decides it: a media
    /// range naming it, its `main/*` or `*/*`, not weighted `q=0`; without `Accept`, no (so a
    /// client that says nothing gets JSON). CouchDB's replicator asks `multipart/mixed` for
    /// `open_revs`; `*/*` takes it too, as CouchDB answers it.
    static func accepts(_ headers: HTTPFields, _ type: String) -> Bool {
        let ranges = headers[values: .accept]
        guard !ranges.isEmpty else { return false }
        let main = type.split(separator: "/").first.map { String($0) + "/*" } ?? type
        for range in ranges.joined(separator: ",").split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let media = parts.first, media == type || media == main || media == "*/*" else { continue }
            let refused = parts.dropFirst().contains { p in
                p.hasPrefix("q=") && (Double(p.dropFirst(2)) ?? 1) == 0
            }
            if !refused { return true }
        }
        return false
    }

    /// Whether the client takes `multipart/mixed` (``accepts(_:_:)``).
    func acceptsMultipartMixed(_ call: Call) -> Bool { Self.accepts(call.request.headers, "multipart/mixed") }

    private static func boundary() -> String {
        UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }
}
