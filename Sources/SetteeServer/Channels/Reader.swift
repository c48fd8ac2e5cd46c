import Foundation
@_spi(Replication) @_spi(Server) import Settee

/// What one request's principal may read of a database: worked out once per request (a user's
/// access reads its grants), then asked per document and per revision.
///
/// A user learns nothing of what it may not read: a document or revision it may not read is
/// answered exactly as one that does not exist, a revision ID of one is never sent (not in
/// `_revs_diff`, `_conflicts`, `open_revs=all`, `style=all_docs` feeds), and a history it is sent
/// stops before the first ancestor known to have been in channels the user does not read
/// (revision IDs are digests of bodies: a body with little in it can be guessed from one).
///
/// - Note: A value type; `Sendable`.
struct Reader: Sendable {
    let db: ServedDatabase
    /// nil: reads everything (the admin port, a user with `*`).
    let access: UserAccess?

    init(_ db: ServedDatabase, _ principal: Principal) throws {
        self.db = db
        if case .user(let name) = principal {
            let a = try db.access(for: name)
            access = a.readsAll ? nil : a
        } else {
            access = nil
        }
    }

    /// The reader of a user whose access is already worked out.
    init(_ db: ServedDatabase, access: UserAccess) {
        self.db = db
        self.access = access.readsAll ? nil : access
    }

    var readsAll: Bool { access == nil }

    /// The channels whose current documents the user may read (nil: every document).
    var channels: Set<String>? { access.map { $0.readable.count == $0.channels.count ? $0.readable : Set($0.channels.keys) } }

    /// Whether the user may read revision `revision` of a document (the current one when nil).
    func readability(of id: String, revision: String?) throws -> ServedDatabase.Readability {
        guard let access, !id.hasPrefix("_design/") else { return .readable }
        // No routing: in no channel (or saved before any router), so no user reads it.
        guard let routing = try db.database.routing(ofDocumentWithID: id, grants: false) else { return .hidden }
        let channels = revision.map { routing.channels(ofRevision: $0) } ?? routing.current.channels
        if access.canRead(channels) { return .readable }
        // It left a channel the user reads, or it is in one the user lost: the user had it.
        let left = routing.membership.contains { $0.value.isRemoved && access.channels[$0.key] != nil }
        let lost = channels.contains { access.revoked[$0] != nil }
        return left || lost ? .removed : .hidden
    }

    /// A filter for the revisions of one document: whether the user may know of each.
    func revisionFilter(of id: String) throws -> (String) -> Bool {
        guard let access, !id.hasPrefix("_design/") else { return { _ in true } }
        guard let routing = try db.database.routing(ofDocumentWithID: id, grants: false) else { return { _ in false } }
        return { rev in access.canRead(routing.channels(ofRevision: rev)) }
    }

    /// `revisions` (of document `id`) that the user may know of, in their order.
    func visible(_ revisions: [String], of id: String) throws -> [String] {
        guard !readsAll else { return revisions }
        let filter = try revisionFilter(of: id)
        return revisions.filter(filter)
    }

    /// A revision's history (newest first) as the user may see it: up to, not including, the
    /// first ancestor known to have been in channels the user does not read.
    func history(_ history: [String], of id: String) throws -> [String] {
        guard !readsAll, history.count > 1 else { return history }
        let filter = try revisionFilter(of: id)
        var out = [history[0]]
        for rev in history.dropFirst() {
            guard filter(rev) else { break }
            out.append(rev)
        }
        return out
    }
}

extension ServedDatabase {
    /// Whether a user may read a revision of a document (see ``Reader``). `hidden` is answered
    /// exactly as a document that does not exist.
    enum Readability { case readable, removed, hidden }

    func readability(of id: String, revision: String?, for principal: Principal) throws -> Readability {
        try Reader(self, principal).readability(of: id, revision: revision)
    }
}
