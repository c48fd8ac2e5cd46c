import Crypto
import Foundation
@_spi(Replication) @_spi(Server) import Settee
import Synchronization

/// A cache of at most `capacity` entries in two generations: a hit in the older one moves to the
/// newer; when the newer is half full it becomes the older, and the older is dropped. Every
/// operation costs O(1), whatever is asked of it (a flood of unknown names only turns it over).
///
/// ```swift
/// var cache = RecentCache<String, Int>(capacity: 4)
/// cache["a"] = 1
/// cache["a"]   // 1
/// ```
///
/// - Note: A value type; not `Sendable` unless its contents are; guard it with a lock.
struct RecentCache<Key: Hashable, Value> {
    private var newer: [Key: Value] = [:]
    private var older: [Key: Value] = [:]
    let capacity: Int

    init(capacity: Int) { self.capacity = max(2, capacity) }

    var count: Int { newer.count + older.count }

    subscript(key: Key) -> Value? {
        mutating get {
            if let v = newer[key] { return v }
            guard let v = older.removeValue(forKey: key) else { return nil }
            insert(key, v)
            return v
        }
        set {
            if let newValue {
                older.removeValue(forKey: key)
                insert(key, newValue)
            } else {
                newer.removeValue(forKey: key)
                older.removeValue(forKey: key)
            }
        }
    }

    private mutating func insert(_ key: Key, _ value: Value) {
        if newer[key] == nil && newer.count >= capacity / 2 {
            older = newer
            newer = [:]
        }
        newer[key] = value
    }

    mutating func removeAll() {
        newer = [:]
        older = [:]
    }
}

extension RecentCache: Sendable where Key: Sendable, Value: Sendable {}

/// The users, roles and sessions of one database: each its own record
/// (``PrincipalRecords``), read when asked for and kept in bounded caches, written one at a
/// time. A change of a principal writes its record (and, when what it holds changed, takes one
/// sequence); a login writes one session record. Nothing is ever written or read whole.
///
/// Also remembers the credentials verified lately (as CouchDB's authentication cache does), so
/// a client sending Basic credentials with every request costs one PBKDF2 computation, not one
/// per request; a change of the user's password makes the memory stale at once.
///
/// ```swift
/// let store = try PrincipalStore(database: db)
/// _ = try await store.saveUser(User(name: "alice", password: hash, adminChannels: ["a"], adminRoles: [], disabled: false))
/// let user = try store.user(named: "alice")
/// ```
///
/// Thread-safe: caches and counters are behind a lock; writes go through the database's
/// batches, which are serial.
final class PrincipalStore: Sendable {
    let database: Database
    static let cacheSize = 10_000
    /// How many principal changes are remembered for ``changes(after:)``.
    static let changeLogSize = 4096

    private struct State {
        var users = RecentCache<String, UserRecord?>(capacity: PrincipalStore.cacheSize)
        var formerUsers = RecentCache<String, FormerPrincipal?>(capacity: 1024)
        var roles = RecentCache<String, RoleRecord?>(capacity: PrincipalStore.cacheSize)
        var formerRoles = RecentCache<String, FormerPrincipal?>(capacity: 1024)
        var sessions = RecentCache<String, Session?>(capacity: PrincipalStore.cacheSize)
        /// SHA-256 of (name, password) → the hash those credentials matched.
        var verified = RecentCache<CredentialKey, [UInt8]>(capacity: PrincipalStore.cacheSize)
        /// Counts writes: a read that began before one does not fill the cache with what it read.
        var generation: UInt64 = 0
        /// (version, user or role name, is a role) for each change, oldest first.
        var changes: [(version: UInt64, name: String, isRole: Bool)] = []
        var userCount = 0
        var roleCount = 0
        var sessionCount = 0
        /// When sessions that are over were last swept away (``sweepSessionsNowAndThen()``).
        var lastSweep = Date()
        var sweeping = false
    }
    private let state = Mutex(State())
    /// Counts the changes of users and roles (``changes(after:)``).
    private let changeVersion = Atomic<UInt64>(0)

    /// Opens the store: moves the records of a database written before one record per principal,
    /// applies the configured users and roles over the stored ones, and counts what there is.
    init(database: Database, users: [String: ServerConfiguration.UserConfig] = [:],
         roles: [String: ServerConfiguration.RoleConfig] = [:]) throws {
        self.database = database
        try migrateLegacyRecords()
        try applyConfiguration(users: users, roles: roles)
        var users = 0, roles = 0, sessions = 0
        try database.forEachLocalDocument(from: PrincipalRecords.prefix, includeProperties: false) { id, _, _ in
            let bare = id.dropFirst(7)
            guard bare.hasPrefix(PrincipalRecords.prefix) else { return false }
            if bare.hasPrefix(PrincipalRecords.userPrefix) { users += 1 }
            else if bare.hasPrefix(PrincipalRecords.rolePrefix) { roles += 1 }
            else if bare.hasPrefix(PrincipalRecords.sessionPrefix) { sessions += 1 }
            return true
        }
        state.withLock { s in
            s.userCount = users
            s.roleCount = roles
            s.sessionCount = sessions
        }
    }

    /// How many users (GUEST included), roles and session records there are.
    var counts: (users: Int, roles: Int, sessions: Int) { state.withLock { ($0.userCount, $0.roleCount, $0.sessionCount) } }

    // MARK: Reading

    /// Reads through the cache at `path`: `load` runs outside the lock, and what it read is kept
    /// only if no write happened meanwhile.
    private func cached<V: Sendable>(_ key: String, _ path: WritableKeyPath<State, RecentCache<String, V?>>,
                                     _ load: () throws -> V?) throws -> V? {
        let (hit, generation) = state.withLock { s -> (V??, UInt64) in (s[keyPath: path][key], s.generation) }
        if let hit { return hit }
        let value = try load()
        state.withLock { s in
            if s.generation == generation { s[keyPath: path][key] = .some(value) }
        }
        return value
    }

    /// The stored record of user `name`; nil when there is none.
    ///
    /// - Throws: ``SetteeError/Code/corrupted`` for a record that does not decode.
    func userRecord(named name: String) throws -> UserRecord? {
        guard Self.isPlausible(name) else { return nil }
        return try cached(name, \.users) { try Self.readUser(database, name) }
    }

    func user(named name: String) throws -> User? { try userRecord(named: name)?.user }

    func roleRecord(named name: String) throws -> RoleRecord? {
        guard Self.isPlausible(name) else { return nil }
        return try cached(name, \.roles) { try Self.readRole(database, name) }
    }

    func role(named name: String) throws -> Role? { try roleRecord(named: name)?.role }

    /// What is kept of a deleted role (its channels' revocations).
    func formerRole(named name: String) throws -> FormerPrincipal? {
        guard Self.isPlausible(name) else { return nil }
        return try cached(name, \.formerRoles) { try Self.readFormer(database, PrincipalRecords.formerRoleID(name), name) }
    }

    /// A name no record can have (empty, or too long for a local document ID even hashed) is
    /// looked for nowhere.
    private static func isPlausible(_ name: String) -> Bool { !name.isEmpty && name.utf8.count <= 64 << 10 }

    var guestEnabled: Bool {
        get throws { try user(named: User.guestName).map { !$0.disabled } ?? false }
    }

    static func readUser(_ db: Database, _ name: String) throws -> UserRecord? {
        guard let o = try db.localDocument(withID: PrincipalRecords.userID(name)) else { return nil }
        return try PrincipalRecords.decodeUser(name, o)
    }

    static func readRole(_ db: Database, _ name: String) throws -> RoleRecord? {
        guard let o = try db.localDocument(withID: PrincipalRecords.roleID(name)) else { return nil }
        return try PrincipalRecords.decodeRole(name, o)
    }

    static func readFormer(_ db: Database, _ id: String, _ name: String) throws -> FormerPrincipal? {
        guard let o = try db.localDocument(withID: id) else { return nil }
        return try PrincipalRecords.decodeFormer(name, o)
    }

    /// Every user's name (GUEST's too), sorted: one pass over the users' record IDs.
    func userNames() throws -> [String] { try names(PrincipalRecords.userPrefix) }

    func roleNames() throws -> [String] { try names(PrincipalRecords.rolePrefix) }

    private func names(_ prefix: String) throws -> [String] {
        var out: [String] = []
        var hashed: [String] = []
        try database.forEachLocalDocument(from: prefix, includeProperties: false) { id, _, _ in
            let bare = id.dropFirst(7)
            guard bare.hasPrefix(prefix) else { return false }
            let part = bare.dropFirst(prefix.count)
            if let name = PrincipalRecords.decode(part) { out.append(name) } else { hashed.append(String(bare)) }
            return true
        }
        for id in hashed {
            if case .string(let name)? = try database.localDocument(withID: id)?["name"] { out.append(name) }
        }
        return out.sorted()
    }

    // MARK: Changes, for the access cache

    /// The version of the users and roles: it changes after every change of one.
    var version: UInt64 { changeVersion.load(ordering: .acquiring) }

    /// The users and roles changed after `version`; nil when that is further back than what is
    /// remembered (then anything may have changed).
    func changes(after version: UInt64) -> (users: Set<String>, roles: Set<String>)? {
        state.withLock { s in
            guard version < changeVersion.load(ordering: .relaxed) else { return ([], []) }
            // The log holds every change after `version` when its oldest is at most the next one.
            guard let first = s.changes.first, first.version <= version + 1 else { return nil }
            var users: Set<String> = [], roles: Set<String> = []
            for c in s.changes where c.version > version {
                if c.isRole { roles.insert(c.name) } else { users.insert(c.name) }
            }
            return (users, roles)
        }
    }

    /// Notes a change of user or role `name` (after it committed, and after the cache holds it).
    private func noteChange(_ name: String, isRole: Bool) {
        state.withLock { s in
            let next = changeVersion.load(ordering: .relaxed) + 1
            s.changes.append((next, name, isRole))
            if s.changes.count > Self.changeLogSize { s.changes.removeFirst(s.changes.count - Self.changeLogSize / 2) }
            changeVersion.store(next, ordering: .releasing)
        }
    }

    /// Runs a write in one batch, with the caches kept true around it: the entries it changes
    /// are dropped before and set after, and a read that overlapped it keeps nothing it read.
    @discardableResult
    private func write<T: Sendable>(dropping drop: (inout State) -> Void,
                                    _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        state.withLock { s in
            s.generation &+= 1
            drop(&s)
        }
        let result = Mutex<T?>(nil)
        defer { state.withLock { $0.generation &+= 1 } }
        try await database.inBatch { db in
            let value = try body(db)
            result.withLock { $0 = value }
        }
        guard case .some(let value) = result.withLock({ $0 }) else { throw SetteeError(.cancelled, "a principal write did not finish") }
        return value
    }

    // MARK: Writing users and roles

    /// What a write of a user did: the record before (nil for a new user) and after.
    struct UserWrite: Sendable {
        var old: UserRecord?
        var new: UserRecord
    }

    /// Creates or replaces user `user.name`. Its history follows its admin channels and roles:
    /// when those of an existing user change, the change takes a sequence. `endSessions` ends
    /// the user's sessions (a new password, a disabled user).
    @discardableResult
    func saveUser(_ user: User, endSessions: Bool = false) async throws -> UserWrite {
        let name = user.name
        let written = try await write(dropping: { s in
            s.users[name] = nil
            s.formerUsers[name] = nil
        }) { db in try Self.writeUser(db, user, endSessions: endSessions) }
        state.withLock { s in
            s.users[name] = .some(written.new)
            if written.old == nil { s.userCount += 1 }
        }
        noteChange(name, isRole: false)
        return written
    }

    /// The write itself, in the caller's batch: the stored record (or the former user's) is read
    /// there, so the last write holds the latest state.
    static func writeUser(_ db: Database, _ user: User, endSessions: Bool) throws -> UserWrite {
        let old = try readUser(db, user.name)
        let former = old == nil ? try readFormer(db, PrincipalRecords.formerUserID(user.name), user.name) : nil
        var record = UserRecord(user: user, history: old?.history ?? former?.history ?? GrantHistory(),
                                sessionsFrom: old?.sessionsFrom ?? former?.sessionsFrom)
        // A user seen for the first time has had what it has from the start: no client of it
        // can have missed anything.
        let known = old != nil || former != nil
        _ = record.history.apply(channels: Set(user.adminChannels), roles: Set(user.adminRoles), at: known ? GrantHistory.pending : 0)
        if record.history.needsSequence { record.history.stamp(try db.takeSequence()) }
        record.history.compact()
        if endSessions { record.sessionsFrom = Date().timeIntervalSince1970 }
        if record != old { try db.saveLocalDocument(PrincipalRecords.encode(record), withID: PrincipalRecords.userID(user.name)) }
        if former != nil { try db.deleteLocalDocument(withID: PrincipalRecords.formerUserID(user.name)) }
        return UserWrite(old: old, new: record)
    }

    /// Deletes user `name`: what it held ends (a sequence, when it held anything), its sessions
    /// end, and a former-user record keeps both. Returns false when there is no such user.
    @discardableResult
    func deleteUser(named name: String) async throws -> Bool {
        let deleted = try await write(dropping: { s in
            s.users[name] = nil
            s.formerUsers[name] = nil
        }) { db -> Bool in
            guard let old = try Self.readUser(db, name) else { return false }
            var former = FormerPrincipal(history: old.history, sessionsFrom: Date().timeIntervalSince1970)
            _ = former.history.apply(channels: [], roles: [], at: GrantHistory.pending)
            if former.history.needsSequence { former.history.stamp(try db.takeSequence()) }
            former.history.compact()
            try db.saveLocalDocument(PrincipalRecords.encode(former, name: name), withID: PrincipalRecords.formerUserID(name))
            try db.deleteLocalDocument(withID: PrincipalRecords.userID(name))
            return true
        }
        guard deleted else { return false }
        state.withLock { s in
            s.users[name] = .some(nil)
            s.userCount -= 1
        }
        noteChange(name, isRole: false)
        return true
    }

    /// Creates or replaces role `role.name` (its history as a user's).
    func saveRole(_ role: Role) async throws {
        let name = role.name
        let (old, new) = try await write(dropping: { s in
            s.roles[name] = nil
            s.formerRoles[name] = nil
        }) { db in try Self.writeRole(db, role) }
        state.withLock { s in
            s.roles[name] = .some(new)
            s.formerRoles[name] = .some(nil)
            if old == nil { s.roleCount += 1 }
        }
        noteChange(name, isRole: true)
    }

    static func writeRole(_ db: Database, _ role: Role) throws -> (old: RoleRecord?, new: RoleRecord) {
        let old = try readRole(db, role.name)
        let former = old == nil ? try readFormer(db, PrincipalRecords.formerRoleID(role.name), role.name) : nil
        var record = RoleRecord(role: role, history: old?.history ?? former?.history ?? GrantHistory())
        let known = old != nil || former != nil
        _ = record.history.apply(channels: Set(role.adminChannels), roles: [], at: known ? GrantHistory.pending : 0)
        if record.history.needsSequence { record.history.stamp(try db.takeSequence()) }
        record.history.compact()
        if record != old { try db.saveLocalDocument(PrincipalRecords.encode(record), withID: PrincipalRecords.roleID(role.name)) }
        if former != nil { try db.deleteLocalDocument(withID: PrincipalRecords.formerRoleID(role.name)) }
        return (old, record)
    }

    /// Deletes role `name`; its channels end for every user that held it. False when there is
    /// no such role.
    @discardableResult
    func deleteRole(named name: String) async throws -> Bool {
        let former = try await write(dropping: { s in
            s.roles[name] = nil
            s.formerRoles[name] = nil
        }) { db -> FormerPrincipal? in
            guard let old = try Self.readRole(db, name) else { return nil }
            var former = FormerPrincipal(history: old.history)
            _ = former.history.apply(channels: [], roles: [], at: GrantHistory.pending)
            if former.history.needsSequence { former.history.stamp(try db.takeSequence()) }
            former.history.compact()
            try db.saveLocalDocument(PrincipalRecords.encode(former, name: name), withID: PrincipalRecords.formerRoleID(name))
            try db.deleteLocalDocument(withID: PrincipalRecords.roleID(name))
            return former
        }
        guard let former else { return false }
        state.withLock { s in
            s.roles[name] = .some(nil)
            s.formerRoles[name] = .some(former)
            s.roleCount -= 1
        }
        noteChange(name, isRole: true)
        return true
    }

    // MARK: Credentials

    /// The user whose name and password these are, or nil; an unknown name and a wrong password
    /// take the same time and give the same answer. PBKDF2 runs on ``PasswordHasher``'s threads.
    func authenticate(name: String, password: String) async throws -> User? {
        let key = Self.credentialKey(name: name, password: password)
        guard let user = try user(named: name), !user.isGuest, !user.disabled, let hash = user.password else {
            try await PasswordHasher.shared.spendCheckTime()
            return nil
        }
        // Remembered only against the hash it matched: a new password forgets it.
        if state.withLock({ $0.verified[key] }) == hash.hash { return user }
        guard try await PasswordHasher.shared.check(password, against: hash) else { return nil }
        state.withLock { $0.verified[key] = hash.hash }
        return user
    }

    /// What a verified name and password are remembered under: a digest of both, never the
    /// password itself; hashed in place (it is worked out on every request with credentials).
    private static func credentialKey(name: String, password: String) -> CredentialKey {
        var hasher = SHA256()
        var name = name, password = password
        name.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        withUnsafeBytes(of: UInt8(0)) { hasher.update(bufferPointer: $0) }
        password.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return hasher.finalize().withUnsafeBytes { raw in
            CredentialKey(words: (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                                  raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
        }
    }

    /// A SHA-256 digest as four words: a key hashed without an allocation.
    struct CredentialKey: Hashable, Sendable {
        var words: (UInt64, UInt64, UInt64, UInt64)
        static func == (a: Self, b: Self) -> Bool { a.words == b.words }
        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
            hasher.combine(words.3)
        }
    }

    // MARK: Sessions

    /// A new session for `user` (under `id` when given: one login, several databases) lasting
    /// `ttl` seconds from each use: one record written.
    func createSession(for user: String, id given: String? = nil, ttl: TimeInterval) async throws -> (id: String, session: Session) {
        let id = given ?? Session.newID()
        let session = Session(user: user, expires: Date().addingTimeInterval(ttl), ttl: ttl)
        let existed = try await write(dropping: { $0.sessions[id] = nil }) { db -> Bool in
            let existed = try db.localDocument(withID: PrincipalRecords.sessionID(id)) != nil
            try db.saveLocalDocument(PrincipalRecords.encode(session), withID: PrincipalRecords.sessionID(id))
            return existed
        }
        state.withLock { s in
            s.sessions[id] = .some(session)
            if !existed { s.sessionCount += 1 }
        }
        sweepSessionsNowAndThen()
        return (id, session)
    }

    /// How often the records of sessions that are over are swept away, at most.
    static let sweepInterval: TimeInterval = 3600

    /// Starts a sweep in the background when the last was ``sweepInterval`` ago: called at each
    /// login, so a server that nobody logs in to has nothing to sweep and does no work for it.
    private func sweepSessionsNowAndThen() {
        let due = state.withLock { s -> Bool in
            guard !s.sweeping, Date().timeIntervalSince(s.lastSweep) >= Self.sweepInterval else { return false }
            s.sweeping = true
            return true
        }
        guard due else { return }
        Task.detached { [self] in
            // A failure (a full disk, a closed database) leaves the records to the next sweep.
            _ = try? await sweepSessions()
            state.withLock { s in
                s.sweeping = false
                s.lastSweep = Date()
            }
        }
    }

    /// The live session with this ID, and whether this use extended it: a session used after a
    /// tenth of its life has passed is extended to a full life again (sliding expiry, as Sync
    /// Gateway does), which rewrites its record. A session made before its user's
    /// `sessions_from`, or whose user is gone, is no session.
    func session(_ id: String) async throws -> (Session, refreshed: Bool)? {
        guard Session.isWellFormed(id) else { return nil }
        let stored = try cached(id, \.sessions) {
            try database.localDocument(withID: PrincipalRecords.sessionID(id)).flatMap(PrincipalRecords.decodeSession)
        }
        guard var session = stored else { return nil }
        let now = Date()
        guard session.expires > now, let record = try userRecord(named: session.user),
              session.created.timeIntervalSince1970 >= (record.sessionsFrom ?? 0) else {
            try await deleteSession(id)
            return nil
        }
        guard session.expires.timeIntervalSince(now) < session.ttl * 0.9 else { return (session, false) }
        session.expires = now.addingTimeInterval(session.ttl)
        let extended = session
        try await write(dropping: { $0.sessions[id] = nil }) { db in
            _ = try db.saveLocalDocument(PrincipalRecords.encode(extended), withID: PrincipalRecords.sessionID(id))
        }
        state.withLock { $0.sessions[id] = .some(extended) }
        return (session, true)
    }

    /// Ends a session (logging out): its record is deleted.
    func deleteSession(_ id: String) async throws {
        guard Session.isWellFormed(id) else { return }
        let removed = try await write(dropping: { $0.sessions[id] = nil }) { db -> Bool in
            guard try db.localDocument(withID: PrincipalRecords.sessionID(id)) != nil else { return false }
            try db.deleteLocalDocument(withID: PrincipalRecords.sessionID(id))
            return true
        }
        state.withLock { s in
            s.sessions[id] = .some(nil)
            if removed { s.sessionCount -= 1 }
        }
    }

    /// Ends every session of `user`: one write (its `sessions_from`), whatever their number;
    /// the records themselves go with the next sweep.
    func endSessions(of user: String) async throws {
        guard let record = try userRecord(named: user) else { return }
        try await saveUser(record.user, endSessions: true)
    }

    /// Deletes the records of sessions that are over (expired, or ended with their user), in
    /// batches of a thousand; returns how many.
    @discardableResult
    func sweepSessions(now: Date = Date()) async throws -> Int {
        var removed = 0
        var start = PrincipalRecords.sessionPrefix
        while true {
            var page: [(id: String, session: Session?)] = []
            try database.forEachLocalDocument(from: start, includeProperties: true) { id, _, properties in
                let bare = String(id.dropFirst(7))
                guard bare.hasPrefix(PrincipalRecords.sessionPrefix), page.count < 1000 else { return false }
                page.append((bare, properties.flatMap(PrincipalRecords.decodeSession)))
                return true
            }
            // Checked after the read: a user's record is read on its own.
            var over: [String] = []
            for (id, session) in page {
                if let session, session.expires > now, let record = try userRecord(named: session.user),
                   session.created.timeIntervalSince1970 >= (record.sessionsFrom ?? 0) { continue }
                over.append(id)
            }
            if !over.isEmpty {
                let ids = over
                let prefixLength = PrincipalRecords.sessionPrefix.count
                try await write(dropping: { s in for id in ids { s.sessions[String(id.dropFirst(prefixLength))] = nil } }) { db in
                    for id in ids { try? db.deleteLocalDocument(withID: id) }
                }
                removed += ids.count
                state.withLock { $0.sessionCount = max(0, $0.sessionCount - ids.count) }
            }
            guard page.count >= 1000, let last = page.last?.id else { return removed }
            // The next page starts after the last record read (a zero byte sorts before any other).
            start = last + "\u{1}"
        }
    }

    // MARK: The configuration

    /// Applies the configuration's users and roles: a name it defines is the configuration's,
    /// whatever is stored (a stored name it does not define is kept, so a user once made by
    /// the admin API stays after it leaves the configuration file). Only what differs is
    /// written, and a changed user's or role's channels take a sequence like any other change.
    /// A configured password that is not the stored one was changed in the file: the user's
    /// sessions end.
    private func applyConfiguration(users: [String: ServerConfiguration.UserConfig],
                                    roles: [String: ServerConfiguration.RoleConfig]) throws {
        guard !users.isEmpty || !roles.isEmpty else { return }
        let db = database
        try db.inBatch {
            for (name, c) in users.sorted(by: { $0.key < $1.key }) {
                let stored = try Self.readUser(db, name)
                var password: PasswordHash?
                var changed = false
                if name != User.guestName, let given = c.password {
                    // The stored hash is kept when it is this password's: no new salt at every start.
                    if let hash = stored?.user.password, hash.matches(given) {
                        password = hash
                    } else {
                        password = PasswordHash(password: given)
                        changed = stored?.user.password != nil
                    }
                }
                let user = User(name: name, password: password, adminChannels: c.adminChannels, adminRoles: c.adminRoles,
                                disabled: c.disabled, email: c.email, grantsFrom: stored?.user.grantsFrom)
                _ = try Self.writeUser(db, user, endSessions: changed)
            }
            for (name, r) in roles.sorted(by: { $0.key < $1.key }) {
                _ = try Self.writeRole(db, Role(name: name, adminChannels: r.adminChannels))
            }
        }
    }

    // MARK: Databases written before one record per principal

    /// Moves `settee.server/principals` and `settee.server/sessions` (one document each for every
    /// user, role, history and session) to one record each, in one batch, then deletes them.
    private func migrateLegacyRecords() throws {
        let db = database
        let principals = try db.localDocument(withID: PrincipalRecords.legacyPrincipalsID)
        let sessions = try db.localDocument(withID: PrincipalRecords.legacySessionsID)
        guard principals != nil || sessions != nil else { return }
        try db.inBatch {
            if let principals {
                // The history: {"user_channels": {user: {channel: span}}, "user_roles": …, "role_channels": …}.
                let history = principals["history"]?.objectValue ?? [:]
                func spans(_ key: String, _ name: String) throws -> [String: GrantHistory.Span] {
                    try GrantHistory.spans(history[key]?.objectValue?[name], "stored principal history of \(name.escapedForLog)")
                }
                var users: Set<String> = []
                for (name, v) in principals["users"]?.objectValue ?? [:] {
                    guard case .object(let o) = v else { throw SetteeError(.corrupted, "stored user \(name.escapedForLog) is not an object") }
                    var record = try PrincipalRecords.decodeUser(name, o, legacy: true)
                    record.history.channels = try spans("user_channels", name)
                    record.history.roles = try spans("user_roles", name)
                    record.history.compact()
                    try db.saveLocalDocument(PrincipalRecords.encode(record), withID: PrincipalRecords.userID(name))
                    users.insert(name)
                }
                var roles: Set<String> = []
                for (name, v) in principals["roles"]?.objectValue ?? [:] {
                    guard case .object(let o) = v else { throw SetteeError(.corrupted, "stored role \(name.escapedForLog) is not an object") }
                    var record = try PrincipalRecords.decodeRole(name, o)
                    record.history.channels = try spans("role_channels", name)
                    record.history.compact()
                    try db.saveLocalDocument(PrincipalRecords.encode(record), withID: PrincipalRecords.roleID(name))
                    roles.insert(name)
                }
                // Deleted users and roles whose history was kept: their former records.
                let now = Date().timeIntervalSince1970
                let formerUsers = Set((history["user_channels"]?.objectValue ?? [:]).keys).union((history["user_roles"]?.objectValue ?? [:]).keys)
                for name in formerUsers.subtracting(users) {
                    var f = FormerPrincipal(history: GrantHistory(), sessionsFrom: now)
                    f.history.channels = try spans("user_channels", name)
                    f.history.roles = try spans("user_roles", name)
                    f.history.compact()
                    try db.saveLocalDocument(PrincipalRecords.encode(f, name: name), withID: PrincipalRecords.formerUserID(name))
                }
                for name in Set((history["role_channels"]?.objectValue ?? [:]).keys).subtracting(roles) {
                    var f = FormerPrincipal()
                    f.history.channels = try spans("role_channels", name)
                    f.history.compact()
                    try db.saveLocalDocument(PrincipalRecords.encode(f, name: name), withID: PrincipalRecords.formerRoleID(name))
                }
                try db.deleteLocalDocument(withID: PrincipalRecords.legacyPrincipalsID)
            }
            if let sessions {
                let now = Date()
                for (id, v) in sessions {
                    guard Session.isWellFormed(id), let o = v.objectValue, var session = PrincipalRecords.decodeSession(o),
                          session.expires > now else { continue }
                    session.created = now
                    try db.saveLocalDocument(PrincipalRecords.encode(session), withID: PrincipalRecords.sessionID(id))
                }
                try db.deleteLocalDocument(withID: PrincipalRecords.legacySessionsID)
            }
        }
    }
}

extension ServedDatabase {
    /// A session's life from each use, unless made with another (Sync Gateway's default).
    static let sessionTTL: TimeInterval = 24 * 3600

    /// After a change of user `name` (or of a role, nil): the feeds whose access it may change
    /// answer for the new access at once.
    func principalChanged(user name: String?) {
        wakeFeeds(of: name.map { [$0] })
    }
}
