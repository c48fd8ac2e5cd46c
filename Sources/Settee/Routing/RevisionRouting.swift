import Foundation

/// Where a revision goes and what it grants: the channels it belongs to, the channels it gives
/// principals access to and the roles it gives users (Sync Gateway's `channel()`, `access()`
/// and `role()`).
///
/// A ``Router`` computes one for every new revision; the database stores it with the revision,
/// in the same commit, and indexes the current revision's channels and grants by sequence
/// (``Database/channelChanges(_:)``, ``Database/grants(to:kind:)``).
///
/// ```swift
/// let routing = RevisionRouting(channels: ["groceries"], access: ["alice": ["groceries"]],
///                               roleAccess: ["shoppers": ["groceries"]])
/// ```
///
/// Grants to users and grants to roles live in separate namespaces: a user named like a role
/// (or like `role:` and a role's name) receives nothing granted to the role.
///
/// - Note: A value type; `Sendable`.
public struct RevisionRouting: Sendable, Hashable {
    /// The channels the revision belongs to.
    ///
    /// ```swift
    /// if routing.channels.contains("public") { … }
    /// ```
    public var channels: Set<String>
    /// Channels granted to users, by user name.
    ///
    /// ```swift
    /// routing.access["alice", default: []].insert("drafts")
    /// ```
    public var access: [String: Set<String>]
    /// Channels granted to roles, by role name (Sync Gateway's `access("role:editors", …)`).
    ///
    /// ```swift
    /// routing.roleAccess["editors", default: []].insert("drafts")
    /// ```
    public var roleAccess: [String: Set<String>]
    /// Roles granted, by user name.
    ///
    /// ```swift
    /// routing.roles["alice"] = ["editors"]
    /// ```
    public var roles: [String: Set<String>]

    /// A routing; every part defaults to nothing.
    ///
    /// ```swift
    /// let routing = RevisionRouting(channels: ["a", "b"])
    /// ```
    public init(channels: Set<String> = [], access: [String: Set<String>] = [:], roles: [String: Set<String>] = [:],
                roleAccess: [String: Set<String>] = [:]) {
        self.channels = channels
        self.access = access
        self.roles = roles
        self.roleAccess = roleAccess
    }

    /// No channel and no grant.
    var isEmpty: Bool {
        channels.isEmpty && access.values.allSatisfy(\.isEmpty) && roles.values.allSatisfy(\.isEmpty)
            && roleAccess.values.allSatisfy(\.isEmpty)
    }

    /// The longest channel, principal or role name a routing may hold, in bytes of UTF-8 (the
    /// index keys must stay within the engine's key limit).
    ///
    /// ```swift
    /// guard name.utf8.count <= RevisionRouting.maxNameLength else { throw … }
    /// ```
    public static let maxNameLength = 1000

    /// Throws ``SetteeError/Code/invalidParameter`` for an empty name, one longer than
    /// ``maxNameLength`` or one holding U+0000 (the index keys end a name with a zero byte).
    func check() throws(SetteeError) {
        func ok(_ s: String, _ what: String) throws(SetteeError) {
            guard !s.isEmpty, s.utf8.count <= Self.maxNameLength, !s.utf8.contains(0) else {
                throw SetteeError(.invalidParameter, "a \(what) name must be 1 to \(Self.maxNameLength) bytes with no U+0000")
            }
        }
        for c in channels { try ok(c, "channel") }
        for (p, cs) in access {
            try ok(p, "principal")
            for c in cs { try ok(c, "channel") }
        }
        for (u, rs) in roles {
            try ok(u, "user")
            for r in rs { try ok(r, "role") }
        }
        for (r, cs) in roleAccess {
            try ok(r, "role")
            for c in cs { try ok(c, "channel") }
        }
    }

    func encode(into w: inout ByteWriter) {
        // Sorted so that equal routings encode to equal bytes; one element needs no sort (the
        // common case, kept cheap: this runs on every write).
        func strings(_ s: Set<String>) {
            w.varint(UInt64(s.count))
            if s.count <= 1 {
                for x in s { w.string(x) }
            } else {
                for x in s.sorted() { w.string(x) }
            }
        }
        func map(_ m: [String: Set<String>]) {
            w.varint(UInt64(m.count))
            guard !m.isEmpty else { return }
            for k in m.keys.sorted() {
                w.string(k)
                strings(m[k] ?? [])
            }
        }
        strings(channels)
        map(access)
        map(roles)
        map(roleAccess)
    }

    /// Reads an encoding; `legacy` is the one written before roles had grants of their own
    /// (three maps, a role's grants in ``access`` under `role:` and its name), read as the
    /// server then meant it.
    ///
    /// `grants: false` reads the channels alone and steps over the grants without making them
    /// (a document granting 100,000 channels costs its bytes, not 100,000 strings and sets).
    init?(reading r: inout ByteReader, legacy: Bool = false, grants: Bool = true) {
        guard grants else {
            func skipStrings() -> Bool {
                guard let n = r.count(limit: r.remaining) else { return false }
                for _ in 0 ..< n {
                    guard let len = r.count(limit: r.remaining), r.bytes(len) != nil else { return false }
                }
                return true
            }
            func skipMap() -> Bool {
                guard let n = r.count(limit: r.remaining) else { return false }
                for _ in 0 ..< n {
                    guard let len = r.count(limit: r.remaining), r.bytes(len) != nil, skipStrings() else { return false }
                }
                return true
            }
            guard let c = Self.readStrings(&r), skipMap(), skipMap(), legacy || skipMap() else { return nil }
            self.init(channels: c)
            return
        }
        func strings() -> Set<String>? {
            guard let n = r.count(limit: r.remaining) else { return nil }
            var s = Set<String>(minimumCapacity: n)
            for _ in 0 ..< n {
                guard let x = r.string() else { return nil }
                s.insert(x)
            }
            return s
        }
        func map() -> [String: Set<String>]? {
            guard let n = r.count(limit: r.remaining) else { return nil }
            var m: [String: Set<String>] = [:]
            for _ in 0 ..< n {
                guard let k = r.string(), let v = strings() else { return nil }
                m[k] = v
            }
            return m
        }
        guard let c = strings(), let a = map(), let ro = map() else { return nil }
        guard legacy else {
            guard let ra = map() else { return nil }
            self.init(channels: c, access: a, roles: ro, roleAccess: ra)
            return
        }
        var users: [String: Set<String>] = [:]
        var roleGrants: [String: Set<String>] = [:]
        for (principal, channels) in a {
            if let role = Self.legacyRole(principal) { roleGrants[role, default: []].formUnion(channels) } else { users[principal] = channels }
        }
        self.init(channels: c, access: users, roles: ro, roleAccess: roleGrants)
    }

    private static func readStrings(_ r: inout ByteReader) -> Set<String>? {
        guard let n = r.count(limit: r.remaining) else { return nil }
        var s = Set<String>(minimumCapacity: n)
        for _ in 0 ..< n {
            guard let x = r.string() else { return nil }
            s.insert(x)
        }
        return s
    }

    /// The role a principal of the legacy encoding names (`role:` and a name), or nil for a user.
    static func legacyRole(_ principal: String) -> String? {
        guard principal.hasPrefix("role:"), principal.utf8.count > 5 else { return nil }
        return String(principal.dropFirst(5))
    }
}

/// What a ``Router`` is given for a new revision.
///
/// ```swift
/// db.setRouter { input in
///     RevisionRouting(channels: Set(input.revision.array(forKey: "channels")?.compactMap(\.stringValue) ?? []))
/// }
/// ```
///
/// - Note: A value type; `Sendable`.
public struct RoutingInput: Sendable {
    /// The new revision (its ID, deletion and body).
    ///
    /// ```swift
    /// let owner = input.revision.string(forKey: "owner")
    /// ```
    public var revision: Document
    /// The nearest ancestor of the new revision whose body the database keeps (for a local edit,
    /// the revision edited). When the revision's history reaches no kept body although the
    /// document exists (a branch replicated in with a history this database does not hold, or
    /// whose ancestors' bodies compaction dropped), the document's current revision (a tombstone,
    /// if it is deleted): a peer that invents a history cannot make its revision look like a new
    /// document. Nil only for a new document.
    ///
    /// ```swift
    /// let wasOwner = input.parent?.string(forKey: "owner")
    /// ```
    public var parent: Document?
    /// The routing stored with ``parent`` when that revision is a leaf the database routed;
    /// nil otherwise.
    ///
    /// ```swift
    /// if input.revision.isDeleted { return input.parentRouting ?? RevisionRouting() }
    /// ```
    public var parentRouting: RevisionRouting?
}

/// Computes the routing of every new revision, inside the write that stores it (local saves,
/// deletions, conflict resolutions and replicated revisions alike), after the validations.
///
/// Throwing rejects the revision: a ``SetteeError`` with code ``SetteeError/Code/forbidden`` or
/// ``SetteeError/Code/unauthorized`` keeps its code and message; any other error is reported as
/// `forbidden` with the error's description. It runs on the writer's thread with the write lock
/// held: it must not use the database.
///
/// ```swift
/// db.setRouter { input in RevisionRouting(channels: ["everyone"]) }
/// ```
public typealias Router = @Sendable (_ input: RoutingInput) throws -> RevisionRouting

/// A document's routing as the database holds it (``Database/routing(ofDocumentWithID:)``).
///
/// ```swift
/// if let r = try db.routing(ofDocumentWithID: "list1"), r.current.channels.contains("a") { … }
/// ```
///
/// - Note: A value type; `Sendable`.
public struct DocumentRouting: Sendable, Hashable {
    /// The routing the indexes hold for the document: its current revision's.
    ///
    /// ```swift
    /// print(routing.current.channels)
    /// ```
    public var current: RevisionRouting
    /// The routing of each leaf revision the router saw, by revision ID.
    ///
    /// ```swift
    /// let losing = routing.leaves["2-877"]?.channels
    /// ```
    public var leaves: [String: RevisionRouting]
    /// Every channel the document is in or has left, with the sequence of its entry in that
    /// channel's log.
    ///
    /// ```swift
    /// let left = routing.membership.filter { $0.value.isRemoved }.keys
    /// ```
    public var membership: [String: ChannelMembership]
    /// The channels of older revisions whose bodies are kept, where they differ from the current
    /// revision's (see ``channels(ofRevision:)``).
    var innerChannels: [String: Set<String>] = [:]

    /// The channels a revision of the document was in when it was saved: a leaf's own; an older
    /// revision's as they were when it stopped being a leaf (known while its body is kept, which
    /// is while it can be read); for a revision the router never saw, the current revision's.
    ///
    /// ```swift
    /// let readable = routing.channels(ofRevision: "2-877").contains { userChannels.contains($0) }
    /// ```
    public func channels(ofRevision revisionID: String) -> Set<String> {
        leaves[revisionID]?.channels ?? innerChannels[revisionID] ?? current.channels
    }
}

/// A document's entry in one channel's log: in the channel since `sequence`, or removed from it
/// at `sequence`.
///
/// ```swift
/// if membership.isRemoved { print("left at \(membership.sequence)") }
/// ```
///
/// - Note: A value type; `Sendable`.
public struct ChannelMembership: Sendable, Hashable {
    /// The sequence of the entry.
    ///
    /// ```swift
    /// print(membership.sequence)
    /// ```
    public var sequence: UInt64
    /// Whether the document left the channel at ``sequence``.
    ///
    /// ```swift
    /// if membership.isRemoved { … }
    /// ```
    public var isRemoved: Bool
}

/// One channel's log query: entries after `after`, up to `through`, at most `limit`.
///
/// ```swift
/// let q = ChannelQuery(channel: "a", after: 0, through: .max, limit: 100)
/// ```
///
/// - Note: A value type; `Sendable`.
public struct ChannelQuery: Sendable, Hashable {
    /// The channel.
    ///
    /// ```swift
    /// print(query.channel)
    /// ```
    public var channel: String
    /// Entries with a sequence greater than this.
    ///
    /// ```swift
    /// print(query.after)
    /// ```
    public var after: UInt64
    /// Entries with a sequence at most this.
    ///
    /// ```swift
    /// print(query.through)
    /// ```
    public var through: UInt64
    /// At most this many entries.
    ///
    /// ```swift
    /// print(query.limit)
    /// ```
    public var limit: Int

    /// A query.
    ///
    /// ```swift
    /// let q = ChannelQuery(channel: "a", after: since, through: last, limit: 500)
    /// ```
    public init(channel: String, after: UInt64, through: UInt64 = .max, limit: Int = .max) {
        self.channel = channel
        self.after = after
        self.through = through
        self.limit = limit
    }
}

/// An entry of a channel's log: a document that entered (or changed in) the channel at
/// `sequence`, or left it.
///
/// ```swift
/// for e in entries where e.isRemoved { print("\(e.documentID) left") }
/// ```
///
/// - Note: A value type; `Sendable`.
public struct ChannelChange: Sendable, Hashable {
    /// The sequence of the change.
    ///
    /// ```swift
    /// print(change.sequence)
    /// ```
    public var sequence: UInt64
    /// The document.
    ///
    /// ```swift
    /// print(change.documentID)
    /// ```
    public var documentID: String
    /// The document's current revision at that change.
    ///
    /// ```swift
    /// print(change.revisionID)
    /// ```
    public var revisionID: String
    /// Whether that revision is a tombstone.
    ///
    /// ```swift
    /// if change.isDeleted { … }
    /// ```
    public var isDeleted: Bool
    /// Whether the document left the channel at this change.
    ///
    /// ```swift
    /// if change.isRemoved { … }
    /// ```
    public var isRemoved: Bool
    /// Whether the document had leaves other than its current revision at that change (a
    /// conflict, or a deleted branch): `style=all_docs` reads its tree.
    ///
    /// ```swift
    /// if change.hasOtherLeaves { leaves = try db.leafRevisions(withID: change.documentID) }
    /// ```
    public var hasOtherLeaves: Bool
}

/// Which grants ``Database/grants(to:kind:)`` reads.
///
/// ```swift
/// let roles = try db.grants(to: "alice", kind: .roles)
/// ```
///
/// - Note: A value type; `Sendable`.
public enum GrantKind: UInt8, Sendable, Hashable {
    /// Channels given to users by ``RevisionRouting/access``.
    case channels = 0x61
    /// Roles given by ``RevisionRouting/roles``.
    case roles = 0x72
    /// Channels given to roles by ``RevisionRouting/roleAccess`` (the principal is the role's
    /// name).
    case roleChannels = 0x41
}

/// A grant to a principal by one document: the name granted (a channel or a role), the
/// sequence at which it was granted (or, if revoked, at which it was revoked).
///
/// ```swift
/// let channels = try db.grants(to: "alice", kind: .channels).filter { !$0.isRevoked }.map(\.name)
/// ```
///
/// - Note: A value type; `Sendable`.
public struct Grant: Sendable, Hashable {
    /// The document whose current revision grants it (or last did).
    ///
    /// ```swift
    /// print(grant.documentID)
    /// ```
    public var documentID: String
    /// The channel or role.
    ///
    /// ```swift
    /// print(grant.name)
    /// ```
    public var name: String
    /// When it was granted, or when it was revoked.
    ///
    /// ```swift
    /// print(grant.sequence)
    /// ```
    public var sequence: UInt64
    /// Whether the document no longer grants it.
    ///
    /// ```swift
    /// if grant.isRevoked { … }
    /// ```
    public var isRevoked: Bool
}
