import Synchronization
internal import SetteeStorage

/// Routing's share of an open database: the router, and the count and log of the commits that
/// changed what documents grant.
final class ChannelRouting: Sendable {
    /// What routes new revisions to channels (``Database/setRouter(_:)``). Boxed: a function
    /// value kept directly in a `Mutex` is re-wrapped in a reabstraction thunk by every
    /// `withLock` (its `inout` is written back), a chain that grew with each write until the
    /// writer's stack overflowed.
    let routerBox = Mutex<RouterBox?>(nil)
    /// Counts the commits that changed what documents grant (``Database/grantsVersion``).
    let grantsVersion = Atomic<UInt64>(0)
    /// What the last commits that changed grants changed, by ``grantsVersion`` (oldest first; nil
    /// for a commit that changed too many principals to list): what
    /// ``Database/grantChanges(after:)`` answers from.
    let grantLog = Mutex<[(version: UInt64, changes: [GrantKind: Set<String>]?)]>([])
    static let grantLogSize = 512

    /// The router, read without touching the stored function value.
    var router: Router? { routerBox.withLock { $0 }?.router }
}

extension DatabaseCore {
    var router: Router? { parts.routing.router }
}

/// Routing's part in one write transaction: the routing of the revision being added, computed
/// before its commit; the document's channel entries and grants at its commit; what the
/// transaction changed of grants, logged once it committed.
final class RoutingCommit: CommitParticipant {
    /// The routing of the revision being added, computed before its commit
    /// (``WriteContext/route(id:key:revisionID:deleted:body:tree:parent:)``).
    var pending: (key: [UInt8], revisionID: String, routing: RevisionRouting)?
    /// Whether this transaction wrote to `doc.grants`.
    var grantsChanged = false
    /// The principals whose grants this transaction changed, by kind; nil past
    /// ``maxListedGrantChanges`` (then any may have).
    var grantChanges: [GrantKind: Set<String>]? = [:]
    static let maxListedGrantChanges = 4096

    func documentChanged(_ change: inout CommittedDocument, in c: WriteContext) throws {
        guard let tree = change.tree, let new = change.new else {
            change.channels.old = try c.purgeRouting(key: change.key, sequence: change.old?.sequence, seq: change.sequence)
            return
        }
        let (routing, channels) = try c.updateRouting(id: change.id, key: change.key, tree: tree, winner: change.winner,
                                                      flags: new.flags, seq: change.sequence, oldSequence: change.old?.sequence)
        change.routing = routing
        change.channels = channels
    }

    func willCommit(_ c: WriteContext) throws {}

    func didCommit(_ c: WriteContext) {
        guard grantsChanged else { return }
        let routing = c.core.parts.routing
        // Logged before the version moves on: whoever reads the new version finds its entry.
        routing.grantLog.withLock { log in
            let next = routing.grantsVersion.load(ordering: .relaxed) + 1
            log.append((next, grantChanges))
            if log.count > ChannelRouting.grantLogSize { log.removeFirst(log.count - ChannelRouting.grantLogSize / 2) }
            routing.grantsVersion.store(next, ordering: .releasing)
        }
    }
}
