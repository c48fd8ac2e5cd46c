@_spi(Replication) import Settee

/// A document in conflict after a pull: the local side and the remote side, as the local
/// database now holds them (both revisions are stored; neither is lost until resolved).
///
/// ```swift
/// struct Newest: ConflictResolver {
///     func resolve(_ conflict: Conflict) throws -> Document? {
///         let l = conflict.localDocument?.date(forKey: "updated") ?? .distantPast
///         let r = conflict.remoteDocument?.date(forKey: "updated") ?? .distantPast
///         return l >= r ? conflict.localDocument : conflict.remoteDocument
///     }
/// }
/// ```
///
/// - Note: A value type holding immutable documents; safe to share between threads.
public struct Conflict: Sendable {
    /// The document ID.
    ///
    /// ```swift
    /// print(conflict.documentID)
    /// ```
    public let documentID: String
    /// The local revision; nil when the local side deleted the document.
    ///
    /// ```swift
    /// let mine = conflict.localDocument?.toDictionary() ?? [:]
    /// ```
    public let localDocument: Document?
    /// The revision pulled from the remote peer; nil when the remote side deleted it.
    ///
    /// ```swift
    /// let theirs = conflict.remoteDocument?.toDictionary() ?? [:]
    /// ```
    public let remoteDocument: Document?
    /// The local revision's ID (also when it is a tombstone).
    let localRevisionID: String
    /// The remote revision's ID (also when it is a tombstone).
    let remoteRevisionID: String
}

/// Decides what a conflicted document becomes (seeds 000 and 002): return the local document, the
/// remote one, a new merged document, or nil to delete it.
///
/// ```swift
/// struct MergeResolver: ConflictResolver {
///     func resolve(_ conflict: Conflict) throws -> Document? {
///         return MutableDocument(id: conflict.documentID,
///                                data: (conflict.remoteDocument?.toDictionary() ?? [:])
///                                    .merging(conflict.localDocument?.toDictionary() ?? [:]) { _, local in local })
///     }
/// }
/// ```
///
/// The result is written as revisions that replicate: the winning branch (the returned side; for
/// a merge, the side the default rule picks) gets a new revision with the result's properties,
/// every other live branch a tombstone; nil tombstones every branch. A result with another
/// document ID is accepted under the conflict's ID, with a warning; a document read from another
/// database is an error reported in the document replication event. If `resolve` throws, the
/// conflict stays, the error is reported in the event, and it is tried again when the
/// replicator next starts.
///
/// An app ported from Couchbase Lite can keep its resolvers as they are: see
/// ``ConflictResolverProtocol``. Every `ConflictResolver` is one.
///
/// - Important: Called on a serial dispatch queue of the replicator's own, one conflict at a
///   time, outside any write transaction and off Swift's cooperative pool (a resolver that blocks
///   holds up only its replicator). It must be thread-safe (`Sendable`) and should be quick:
///   ``Replicator/stop()`` lets resolutions in progress finish.
public protocol ConflictResolver: ConflictResolverProtocol, Sendable {
    /// The document the conflict resolves to; nil deletes it.
    ///
    /// ```swift
    /// func resolve(_ conflict: Conflict) throws -> Document? { conflict.remoteDocument }
    /// ```
    func resolve(_ conflict: Conflict) throws -> Document?
}

extension ConflictResolver {
    /// Calls ``resolve(_:)``: the two spellings are one resolution.
    ///
    /// ```swift
    /// let winner = try DefaultConflictResolver().resolve(conflict: conflict)
    /// ```
    public func resolve(conflict: Conflict) throws -> Document? { try resolve(conflict) }
}

/// Couchbase Lite's name and shape for a conflict resolver (seeds 000 and 002), with the same
/// meaning as ``ConflictResolver``: return the local document, the remote one, a new merged
/// document (a `MutableDocument` is a `Document`), or nil to delete it.
///
/// ```swift
/// class LocalWinConflictResolver: ConflictResolverProtocol {
///     func resolve(conflict: Conflict) -> Document? {
///         return conflict.localDocument
///     }
/// }
/// config.conflictResolver = LocalWinConflictResolver()
/// ```
///
/// - Important: Need not be `Sendable`. The replicator it is configured on calls it on a serial
///   dispatch queue of its own (off Swift's cooperative pool), one conflict at a time; an
///   instance shared by several replicators (as seed 002 recommends) is called from each of
///   them, so any state it keeps must then be thread-safe.
public protocol ConflictResolverProtocol {
    /// The document the conflict resolves to; nil deletes it. What it throws leaves the conflict
    /// for the next start and is reported in the document replication event.
    ///
    /// ```swift
    /// func resolve(conflict: Conflict) -> Document? { conflict.remoteDocument }
    /// ```
    func resolve(conflict: Conflict) throws -> Document?
}

/// The resolution used when the configuration has no resolver (DESIGN "Semantics decided" 3,
/// seed 002): a deletion wins; otherwise the side with more revisions (the higher generation);
/// ties go to the higher revision ID in ASCII order. Every peer facing the same conflict picks the
/// same side, so the resolutions they write are identical and converge.
///
/// ```swift
/// config.conflictResolver = DefaultConflictResolver()   // the same as leaving it nil
/// ```
///
/// - Note: Stateless; safe to share between threads.
public struct DefaultConflictResolver: ConflictResolver {
    /// The default resolver.
    ///
    /// ```swift
    /// let resolver = DefaultConflictResolver()
    /// ```
    public init() {}

    /// nil when either side is deleted; otherwise the side the rule above picks.
    ///
    /// ```swift
    /// let winner = try DefaultConflictResolver().resolve(conflict)
    /// ```
    ///
    /// - Throws: `SetteeError.Code.invalidParameter` when a revision ID is malformed (the
    ///   conflict then stays and is reported, as for any resolver that throws).
    public func resolve(_ conflict: Conflict) throws -> Document? {
        guard let local = conflict.localDocument, let remote = conflict.remoteDocument else { return nil }
        // The revision tree's own ranking rule, so every peer picks the side its trees would.
        return try RevisionRanking.ranksAbove(conflict.remoteRevisionID, conflict.localRevisionID) ? remote : local
    }
}
