import Foundation
@_spi(Replication) @_spi(Server) import Settee
import Synchronization

/// What one user may read, with the sequence from which it may (Sync Gateway's timed channel
/// sets): its `admin_channels`, its roles' (from `admin_roles` and `role()` grants), the channels
/// documents grant it or its roles with `access()`, and `!`. A channel granted at sequence G
/// makes a feed whose client stopped before G send that channel's older documents; a channel
/// lost at sequence R makes it tell the client to purge them.
///
/// - Note: A value type; `Sendable`.
struct UserAccess: Sendable, Equatable {
    /// Readable channels, each with the sequence from which the user has had it.
    var channels: [String: UInt64] = [:]
    /// Channels the user had and no longer has, each with the sequence at which it lost it.
    var revoked: [String: UInt64] = [:]
    /// The user's roles, each with the sequence from which it has had it.
    var roles: [String: UInt64] = [:]
    /// The names of ``channels``, made once when the access is worked out (a user may read
    /// 10,000 channels; a query asks for them as a set).
    var readable: Set<String> = []

    /// `*`: every document, whatever its channels.
    var readsAll: Bool { channels["*"] != nil }

    /// Whether a revision in `channels` is readable.
    func canRead(_ docChannels: Set<String>) -> Bool {
        if readsAll { return true }
        // The smaller side is walked: a document in 10,000 channels read by a user of ten.
        if channels.count < docChannels.count { return channels.keys.contains { docChannels.contains($0) } }
        return docChannels.contains { channels[$0] != nil }
    }

    /// Sync Gateway's `all_channels`.
    var channelNames: [String] { channels.keys.sorted() }

    /// For the sync function's `requireAccess` (which `*` alone does not pass).
    var scriptUser: (channels: Set<String>, roles: Set<String>) { (Set(channels.keys), Set(roles.keys)) }

    /// Adds `name` as held since `seq` (the earliest grant wins).
    mutating func grant(_ name: String, since seq: UInt64) {
        channels[name] = min(channels[name] ?? .max, seq)
    }

    mutating func revoke(_ name: String, at seq: UInt64) {
        revoked[name] = max(revoked[name] ?? 0, seq)
    }
}

/// When each admin-made channel (and, for a user, each role) of one user or role began and
/// ended: the admin API and the configuration change them without a document, so the server takes
/// a sequence for each change and keeps it in the principal's record (Formats/http-api.md, "Users,
/// roles and sessions on disk").
///
/// Compacted as it is written: every span still held, and the ``keptRevoked`` most recently
/// ended, so its size follows what the principal holds, not every change ever made. A span
/// forgotten is one whose revocation a client more than a hundred revocations behind no longer
/// hears of (its documents stay on the client until it next asks for them).
///
/// ```swift
/// var history = GrantHistory()
/// _ = history.apply(channels: ["a"], roles: [], at: 0)
/// ```
///
/// - Note: A value type; `Sendable`.
struct GrantHistory: Sendable, Equatable {
    /// Held since `granted`; ended at `revoked` when not nil.
    struct Span: Sendable, Equatable {
        var granted: UInt64
        var revoked: UInt64?
    }
    var channels: [String: Span] = [:]
    var roles: [String: Span] = [:]

    /// Ended spans kept per kind.
    static let keptRevoked = 100
    /// Stands for "the sequence this change takes" until one is taken (``stamp(_:)``).
    static let pending = UInt64.max

    /// Brings the spans in line with what the principal holds now, changes marked at `seq`
    /// (``pending`` for a sequence yet to take); true when anything changed.
    mutating func apply(channels current: Set<String>, roles currentRoles: Set<String>, at seq: UInt64) -> Bool {
        let a = Self.update(&channels, to: current, at: seq)
        let b = Self.update(&roles, to: currentRoles, at: seq)
        return a || b
    }

    private static func update(_ spans: inout [String: Span], to current: Set<String>, at seq: UInt64) -> Bool {
        var changed = false
        for name in current where spans[name].map({ $0.revoked != nil }) ?? true {
            spans[name] = Span(granted: seq, revoked: nil)
            changed = true
        }
        for (name, span) in spans where span.revoked == nil && !current.contains(name) {
            spans[name] = Span(granted: span.granted, revoked: seq)
            changed = true
        }
        return changed
    }

    /// Whether a change waits for its sequence.
    var needsSequence: Bool {
        [channels, roles].contains { $0.values.contains { $0.granted == Self.pending || $0.revoked == Self.pending } }
    }

    /// Gives the pending changes their sequence, and forgets the oldest ended spans.
    mutating func stamp(_ seq: UInt64) {
        func fix(_ m: inout [String: Span]) {
            for (k, s) in m where s.granted == Self.pending || s.revoked == Self.pending {
                m[k] = Span(granted: s.granted == Self.pending ? seq : s.granted, revoked: s.revoked == Self.pending ? seq : s.revoked)
            }
        }
        fix(&channels)
        fix(&roles)
    }

    /// Keeps every span still held and the ``keptRevoked`` most recently ended of each kind.
    mutating func compact() {
        func trim(_ m: inout [String: Span]) {
            let ended = m.filter { $0.value.revoked != nil }
            guard ended.count > Self.keptRevoked else { return }
            let oldest = ended.sorted { ($0.value.revoked ?? 0, $0.key) < ($1.value.revoked ?? 0, $1.key) }
            for (k, _) in oldest.prefix(ended.count - Self.keptRevoked) { m.removeValue(forKey: k) }
        }
        trim(&channels)
        trim(&roles)
    }

    var isEmpty: Bool { channels.isEmpty && roles.isEmpty }

    // MARK: Stored form

    /// `{"channels": {name: [granted, revoked or null]}, "roles": {…}}`, `roles` only when any.
    var json: JSONValue {
        func spans(_ m: [String: Span]) -> JSONValue {
            .object(m.mapValues { s in .array([.int(Int64(clamping: s.granted)), s.revoked.map { .int(Int64(clamping: $0)) } ?? .null]) })
        }
        var o: [String: JSONValue] = ["channels": spans(channels)]
        if !roles.isEmpty { o["roles"] = spans(roles) }
        return .object(o)
    }

    init() {}

    /// Reads the stored form; `what` names the record in an error.
    init(json: JSONValue?, what: String) throws {
        guard let json else { return }
        guard case .object(let o) = json else { throw SetteeError(.corrupted, "\(what): history is not an object") }
        channels = try Self.spans(o["channels"], what)
        roles = try Self.spans(o["roles"], what)
    }

    static func spans(_ v: JSONValue?, _ what: String) throws -> [String: Span] {
        guard let v else { return [:] }
        guard case .object(let names) = v else { throw SetteeError(.corrupted, "\(what): history is malformed") }
        return try names.mapValues { pair in
            guard case .array(let a) = pair, a.count == 2, case .int(let g) = a[0], g >= 0 else {
                throw SetteeError(.corrupted, "\(what): history is malformed")
            }
            switch a[1] {
            case .null: return Span(granted: UInt64(g), revoked: nil)
            case .int(let r) where r >= 0: return Span(granted: UInt64(g), revoked: UInt64(r))
            default: throw SetteeError(.corrupted, "\(what): history is malformed")
            }
        }
    }
}

/// A user's access as cached, with what it was worked out from: the library's grants version,
/// the principals' version, and the roles it depends on (held, lost or named but missing).
struct CachedAccess: Sendable {
    var grants: UInt64
    var principals: UInt64
    var access: UserAccess
    var roles: Set<String>
}

extension ServedDatabase {
    /// What `name` may read now (a user of this database, or GUEST): worked out from the
    /// database's grants and the admin-made channels and roles when first asked for, and kept
    /// until something it was worked out from changes: a commit that changes this user's grants
    /// or its roles' (the library names the principals each commit touched), or a change of the
    /// user or one of its roles. A grant to one user leaves everyone else's access as cached;
    /// a grant, a revocation or an admin change counts at once for whom it names.
    func access(for name: String) throws -> UserAccess {
        // The versions are read before the work: a change meanwhile makes the entry stale.
        let grants = database.grantsVersion
        let principalsVersion = principals.version
        if var hit = accessCache.withLock({ $0[name] }) {
            if hit.grants == grants && hit.principals == principalsVersion { return hit.access }
            if stillHolds(hit, for: name) {
                hit.grants = grants
                hit.principals = principalsVersion
                let kept = hit
                accessCache.withLock { $0[name] = kept }
                return hit.access
            }
        }
        let (access, roles) = try computeAccess(for: name)
        accessCache.withLock { $0[name] = CachedAccess(grants: grants, principals: principalsVersion, access: access, roles: roles) }
        return access
    }

    /// How many users' access is kept at once.
    static let accessCacheSize = 10_000

    /// Whether nothing `cached` was worked out from changed since.
    private func stillHolds(_ cached: CachedAccess, for name: String) -> Bool {
        guard let grants = database.grantChanges(after: cached.grants), let changed = principals.changes(after: cached.principals) else {
            return false
        }
        if grants[.channels]?.contains(name) == true || grants[.roles]?.contains(name) == true { return false }
        if let roles = grants[.roleChannels], !roles.isDisjoint(with: cached.roles) { return false }
        return !changed.users.contains(name) && changed.roles.isDisjoint(with: cached.roles)
    }

    /// Works out a user's access; returns it with the roles it depends on.
    private func computeAccess(for name: String) throws -> (UserAccess, Set<String>) {
        accessComputations.add(1, ordering: .relaxed)
        var access = UserAccess()
        access.grant("!", since: 0)
        let database = self.database
        let record = try principals.userRecord(named: name)
        // Channels: the user's admin channels, with their history. As in Sync Gateway 3, a
        // user's and a role's `admin_channels` are the default collection's: a named
        // collection's channels come from its own sync function's grants.
        let adminChannels = parent == nil
        for (c, span) in adminChannels ? record?.history.channels ?? [:] : [:] {
            if let r = span.revoked { access.revoke(c, at: r) } else { access.grant(c, since: span.granted) }
        }
        // A signed-up user's name may have been granted things before it existed: not its.
        let from = record?.user.grantsFrom
        func counts(_ g: Grant) -> Bool { from.map { g.sequence > $0 } ?? true }
        for g in try database.grants(to: name, kind: .channels) where counts(g) {
            if g.isRevoked { access.revoke(g.name, at: g.sequence) } else { access.grant(g.name, since: g.sequence) }
        }
        // Roles: admin roles and role() grants.
        var roles: [String: UInt64] = [:]
        var lostRoles: [String: UInt64] = [:]
        for (role, span) in record?.history.roles ?? [:] {
            if let r = span.revoked { lostRoles[role] = max(lostRoles[role] ?? 0, r) } else { roles[role] = min(roles[role] ?? .max, span.granted) }
        }
        for g in try database.grants(to: name, kind: .roles) where counts(g) {
            if g.isRevoked { lostRoles[g.name] = max(lostRoles[g.name] ?? 0, g.sequence) } else { roles[g.name] = min(roles[g.name] ?? .max, g.sequence) }
        }
        let dependsOn = Set(roles.keys).union(lostRoles.keys)
        // A role that no longer exists gives nothing.
        for role in roles.keys where try principals.role(named: role) == nil { lostRoles[role] = roles.removeValue(forKey: role) }
        access.roles = roles
        func roleChannels(_ role: String) throws -> [(String, UInt64, UInt64?)] {
            let history = try principals.roleRecord(named: role)?.history ?? principals.formerRole(named: role)?.history ?? GrantHistory()
            var out: [(String, UInt64, UInt64?)] = adminChannels ? history.channels.map { ($0.key, $0.value.granted, $0.value.revoked) } : []
            for g in try database.grants(to: role, kind: .roleChannels) {
                out.append((g.name, g.isRevoked ? 0 : g.sequence, g.isRevoked ? g.sequence : nil))
            }
            return out
        }
        for (role, since) in roles {
            for (c, granted, revoked) in try roleChannels(role) {
                if let revoked { access.revoke(c, at: max(revoked, since)) } else { access.grant(c, since: max(granted, since)) }
            }
        }
        for (role, lostAt) in lostRoles where roles[role] == nil {
            for (c, _, _) in try roleChannels(role) { access.revoke(c, at: lostAt) }
        }
        // Revoked means lost and not held through anything else.
        access.revoked = access.revoked.filter { access.channels[$0.key] == nil }
        access.readable = Set(access.channels.keys)
        return (access, dependsOn)
    }
}
