import Foundation
@_spi(Replication) import Settee

/// A document or request CouchDB's rules refuse: CouchDB's error name (`bad_request`,
/// `doc_validation`, `too_large`), a reason, and the HTTP status the server answers it with; a
/// client reports it.
package struct WireError: Error, Sendable, CustomStringConvertible {
    package var error: String
    package var reason: String
    package var status: Int

    package init(_ error: String, _ reason: String, status: Int = 400) {
        self.error = error
        self.reason = reason
        self.status = status
    }

    package var description: String { "\(error): \(reason)" }
}

/// Top-level members CouchDB gives meaning to; any other `_` member is refused.
let specialMembers: Set<String> = [
    "_id", "_rev", "_deleted", "_revisions", "_attachments", "_conflicts", "_deleted_conflicts",
    "_local_seq", "_revs_info",
]

/// A document as a CouchDB client sends it: the ID and revision it names, the properties, and
/// whether it is a deletion.
package struct IncomingDocument: Sendable {
    package var id: String?
    package var rev: String?
    package var deleted: Bool
    package var revisions: (start: UInt64, ids: [String])?
    package var properties: [String: JSONValue]
    /// `_attachments` as sent (data, follows or stubs), nil when absent.
    package var attachments: [String: JSONValue]?

    /// Splits a JSON document into its special members and its properties.
    package init(_ object: [String: JSONValue]) throws(WireError) {
        var properties = object
        id = nil
        rev = nil
        deleted = false
        revisions = nil
        for key in object.keys where key.hasPrefix("_") {
            guard specialMembers.contains(key) else {
                throw WireError("doc_validation", "Bad special document member: \(key)")
            }
            properties.removeValue(forKey: key)
        }
        if let v = object["_id"] {
            guard case .string(let s) = v else { throw WireError("illegal_docid", "Document id must be a string") }
            id = s
        }
        if let v = object["_rev"] {
            guard case .string(let s) = v else { throw WireError("bad_request", "Invalid rev format") }
            rev = s
        }
        if let v = object["_deleted"] {
            guard case .bool(let b) = v else { throw WireError("doc_validation", "_deleted must be a boolean") }
            deleted = b
        }
        if let v = object["_revisions"] {
            guard case .object(let r) = v, case .int(let start)? = r["start"], start > 0,
                  UInt64(start) <= RevisionIDSyntax.maxGeneration,
                  case .array(let ids)? = r["ids"], !ids.isEmpty, ids.count <= 10_000 else {
                throw WireError("doc_validation", "_revisions must be {\"start\": N, \"ids\": [...]}")
            }
            var list: [String] = []
            for i in ids {
                guard case .string(let s) = i, !s.isEmpty, !s.contains("-") else {
                    throw WireError("doc_validation", "_revisions.ids must be revision digests")
                }
                list.append(s)
            }
            guard UInt64(start) >= UInt64(list.count) else {
                throw WireError("doc_validation", "_revisions.start is smaller than its history")
            }
            revisions = (UInt64(start), list)
        }
        if let v = object["_attachments"] {
            guard case .object(let a) = v else { throw WireError("doc_validation", "_attachments must be an object") }
            attachments = a
        }
        self.properties = properties
    }

    /// The revision's history, newest first, from `_revisions` (or just the revision).
    package func history(of rev: String) throws(WireError) -> [String] {
        guard let (generation, _) = parseRevision(rev) else {
            throw WireError("bad_request", "Invalid rev format")
        }
        guard let revisions else { return [rev] }
        guard revisions.start == generation, "\(generation)-\(revisions.ids[0])" == rev else {
            throw WireError("bad_request", "_revisions does not match _rev \(rev)")
        }
        return revisions.ids.enumerated().map { "\(revisions.start - UInt64($0.offset))-\($0.element)" }
    }
}

/// `N-digest`, as the database reads revision IDs (``RevisionIDSyntax``: N from 1 to 2^53 − 1,
/// a printable ASCII digest): its generation and digest, or nil.
package func parseRevision(_ rev: String) -> (UInt64, Substring)? {
    guard let n = RevisionIDSyntax.generation(of: rev), let dash = rev.firstIndex(of: "-") else { return nil }
    return (n, rev[rev.index(after: dash)...])
}
