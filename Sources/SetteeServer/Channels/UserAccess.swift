import Foundation
import Settee
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

    /// `*`: every document, whatever its channels.
    var readsAll: Bool { channels["*"] != nil }

    /// Whether a revision in `channels` is readable.
    func canRead(_ docChannels: Set<String>) -> Bool {
        readsAll || docChannels.contains { channels[$0] != nil }
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

/// When each admin-made channel and role of a user or role began and ended (the admin API and
/// the configuration change them without a document, so the server takes a sequence for each
/// change and keeps it here). Kept in the principals record under `history`
/// (Formats/http-api.md, "Users and sessions on disk").
struct PrincipalHistory: Sendable, Equatable {
    /// name → since (nil ended) / ended at.
    struct Span: Sendable, Equatable {
        var granted: UInt64
        var revoked: UInt64?
    }
    var userChannels: [String: [String: Span]] = [:]
    var userRoles: [String: [String: Span]] = [:]
    var roleChannels: [String: [String: Span]] = [:]

    /// Brings `spans` in line with `current`, changes marked at `seq`; true when anything changed.
    static func update(_ spans: inout [String: Span], to current: Set<String>, at seq: UInt64) -> Bool {
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

    /// Applies the users' and roles' current admin channels and roles; a sequence is taken only
    /// if a known principal's changed (a principal seen for the first time has had what it has
    /// from the start: no client of it can have missed anything). Returns whether anything changed.
    mutating func update(users: [User], roles: [Role], takeSequence: () throws -> UInt64) rethrows -> Bool {
        var copy = self
        // A sequence far above any real one stands for "the one to take" while comparing.
        let marker = UInt64.max
        var changed = false
        for u in users {
            let at: UInt64 = userChannels[u.name] == nil ? 0 : marker
            changed = Self.update(&copy.userChannels[u.name, default: [:]], to: Set(u.adminChannels), at: at) || changed
            changed = Self.update(&copy.userRoles[u.name, default: [:]], to: Set(u.adminRoles), at: at) || changed
        }
        for r in roles {
            let at: UInt64 = roleChannels[r.name] == nil ? 0 : marker
            changed = Self.update(&copy.roleChannels[r.name, default: [:]], to: Set(r.adminChannels), at: at) || changed
        }
        // A deleted user or role loses everything it had.
        let userNames = Set(users.map(\.name))
        for name in copy.userChannels.keys where !userNames.contains(name) {
            changed = Self.update(&copy.userChannels[name, default: [:]], to: [], at: marker) || changed
            changed = Self.update(&copy.userRoles[name, default: [:]], to: [], at: marker) || changed
        }
        let roleNames = Set(roles.map(\.name))
        for name in copy.roleChannels.keys where !roleNames.contains(name) {
            changed = Self.update(&copy.roleChannels[name, default: [:]], to: [], at: marker) || changed
        }
        guard changed else { return false }
        let stamped = [copy.userChannels, copy.userRoles, copy.roleChannels].contains { m in
            m.values.contains { $0.values.contains { $0.granted == marker || $0.revoked == marker } }
        }
        guard stamped else {
            self = copy
            return true
        }
        let seq = try takeSequence()
        func stamp(_ m: inout [String: [String: Span]]) {
            for (k, spans) in m {
                m[k] = spans.mapValues { s in Span(granted: s.granted == marker ? seq : s.granted, revoked: s.revoked == marker ? seq : s.revoked) }
            }
        }
        stamp(&copy.userChannels)
        stamp(&copy.userRoles)
        stamp(&copy.roleChannels)
        self = copy
        return true
    }

    // MARK: Stored form

    var json: JSONValue {
        func pair(_ span: Span) -> JSONValue {
            let revoked: JSONValue = span.revoked.map { JSONValue.int(Int64($0)) } ?? JSONValue.null
            return JSONValue.array([JSONValue.int(Int64(span.granted)), revoked])
        }
        func spans(_ m: [String: [String: Span]]) -> JSONValue {
            var out: [String: JSONValue] = [:]
            for (k, s) in m { out[k] = JSONValue.object(s.mapValues(pair)) }
            return JSONValue.object(out)
        }
        return ["user_channels": spans(userChannels), "user_roles": spans(userRoles), "role_channels": spans(roleChannels)]
    }

    init() {}

    init(json: JSONValue?) throws {
        guard let json else { return }
        func spans(_ key: String) throws -> [String: [String: Span]] {
            guard let v = json.objectValue?[key] else { return [:] }
            guard case .object(let o) = v else { throw SetteeError(.corrupted, "stored principal history: \(key) is not an object") }
            return try o.mapValues { inner in
                guard case .object(let names) = inner else { throw SetteeError(.corrupted, "stored principal history is malformed") }
                return try names.mapValues { pair in
                    guard case .array(let a) = pair, a.count == 2, case .int(let g) = a[0], g >= 0 else {
                        throw SetteeError(.corrupted, "stored principal history is malformed")
                    }
                    if case .int(let r) = a[1], r >= 0 { return Span(granted: UInt64(g), revoked: UInt64(r)) }
                    return Span(granted: UInt64(g), revoked: nil)
                }
            }
        }
        userChannels = try spans("user_channels")
        userRoles = try spans("user_roles")
        roleChannels = try spans("role_channels")
    }
}

extension ServedDatabase {
    /// What `name` may read now (a user of this database, or GUEST): worked out from the
    /// database's grants and the admin-made channels and roles, and kept until either changes
    /// (the library's ``Database/grantsVersion``, the server's ``principalsVersion``), so a grant,
    /// a revocation or an admin change counts at once, and a user granted 100,000 channels does
    /// not read them all again for every request.
    func access(for name: String) throws -> UserAccess {
        // The versions are read before the work: a change meanwhile makes the entry stale.
        let grants = database.grantsVersion
        let principals = principalsVersion.load(ordering: .acquiring)
        if let hit = accessCache.withLock({ $0[name] }), hit.grants == grants, hit.principals == principals {
            return hit.access
        }
        let access = try computeAccess(for: name)
        accessCache.withLock { cache in
            if cache.count >= Self.accessCacheSize { cache.removeAll(keepingCapacity: true) }
            cache[name] = (grants, principals, access)
        }
        return access
    }

    /// How many users' access is kept at once (past it, the cache starts again).
    static let accessCacheSize = 4096

    private func computeAccess(for name: String) throws -> UserAccess {
        var access = UserAccess()
        access.grant("!", since: 0)
        let history = principalHistory.withLock { $0 }
        let database = self.database
        // Channels: the user's admin channels, with their history.
        for (c, span) in history.userChannels[name] ?? [:] {
            if let r = span.revoked { access.revoke(c, at: r) } else { access.grant(c, since: span.granted) }
        }
        // A signed-up user's name may have been granted things before it existed: not its.
        let from = users.user(named: name)?.grantsFrom
        func counts(_ g: Grant) -> Bool { from.map { g.sequence > $0 } ?? true }
        for g in try database.grants(to: name, kind: .channels) where counts(g) {
            if g.isRevoked { access.revoke(g.name, at: g.sequence) } else { access.grant(g.name, since: g.sequence) }
        }
        // Roles: admin roles and role() grants.
        var roles: [String: UInt64] = [:]
        var lostRoles: [String: UInt64] = [:]
        for (role, span) in history.userRoles[name] ?? [:] {
            if let r = span.revoked { lostRoles[role] = max(lostRoles[role] ?? 0, r) } else { roles[role] = min(roles[role] ?? .max, span.granted) }
        }
        for g in try database.grants(to: name, kind: .roles) where counts(g) {
            if g.isRevoked { lostRoles[g.name] = max(lostRoles[g.name] ?? 0, g.sequence) } else { roles[g.name] = min(roles[g.name] ?? .max, g.sequence) }
        }
        // A role that no longer exists gives nothing.
        for role in roles.keys where users.role(named: role) == nil { lostRoles[role] = roles.removeValue(forKey: role) }
        access.roles = roles
        func roleChannels(_ role: String) throws -> [(String, UInt64, UInt64?)] {
            var out: [(String, UInt64, UInt64?)] = (history.roleChannels[role] ?? [:]).map { ($0.key, $0.value.granted, $0.value.revoked) }
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
        return access
    }

    /// Records, with a sequence of their own, the changes of admin channels and roles since the
    /// last record (inside the write that saves the principals).
    func updatePrincipalHistory(_ db: Database) throws {
        let allUsers = users.userNames.compactMap(users.user(named:))
        let allRoles = users.roleNames.compactMap(users.role(named:))
        var history = principalHistory.withLock { $0 }
        if try history.update(users: allUsers, roles: allRoles, takeSequence: { try db.takeSequence() }) {
            principalHistory.withLock { $0 = history }
        }
    }
}
