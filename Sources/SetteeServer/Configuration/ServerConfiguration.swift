import Foundation
@_spi(Server) import Settee

/// What `settee serve` reads: the JSON configuration of seed 001, with Sync Gateway's keys.
///
/// ```swift
/// let config = try ServerConfiguration(json: """
///     {"interface": ":4984",
///      "databases": {"todo": {"server": "walrus:",
///                             "users": {"GUEST": {"disabled": false, "admin_channels": ["*"]}}}}}
///     """)
/// ```
///
/// A key it does not know, or a value of the wrong type, is an error naming its path
/// (`databases.todo.userz: unknown key`): a typo never passes silently.
///
/// - Note: A value type; `Sendable`.
public struct ServerConfiguration: Sendable, Equatable {
    /// Where the public REST API listens (`host:port`; an empty host means every interface).
    ///
    /// ```swift
    /// config.interface = "127.0.0.1:4984"
    /// ```
    public var interface: String = ":4984"
    /// Where the admin REST API listens; loopback by default, as in Sync Gateway; nil: no admin
    /// port (an app serving its own database).
    ///
    /// ```swift
    /// config.adminInterface = "127.0.0.1:4985"
    /// ```
    public var adminInterface: String? = "127.0.0.1:4985"
    /// Log keys enabled (`HTTP`, `Auth`, `Changes`, `CRUD`, …; `*` for all).
    ///
    /// ```swift
    /// config.log = ["HTTP", "Auth"]
    /// ```
    public var log: [String] = ["HTTP"]
    /// Seconds a connection may stay silent (idle between requests, or a request that stalls)
    /// before it is closed; Sync Gateway's `ServerReadTimeout`.
    ///
    /// ```swift
    /// config.serverReadTimeout = 60
    /// ```
    public var serverReadTimeout: Int = 300
    /// HTTPS on both listeners: the certificate chain (a PEM file; Sync Gateway's `SSLCert`),
    /// with ``sslKey``; nil serves plain HTTP.
    ///
    /// ```swift
    /// config.sslCert = "/etc/settee/cert.pem"
    /// config.sslKey = "/etc/settee/key.pem"
    /// ```
    public var sslCert: String?
    /// The certificate's private key (a PEM file; Sync Gateway's `SSLKey`).
    ///
    /// ```swift
    /// config.sslKey = "/etc/settee/key.pem"
    /// ```
    public var sslKey: String?
    /// Administrators of the admin port, by name, with their passwords (`adminUsers`): when
    /// there is one, every request to the admin port needs Basic credentials of one of them.
    /// Empty (the default): the admin port trusts whoever reaches it, which is why it listens on
    /// loopback by default.
    ///
    /// ```swift
    /// config.adminUsers = ["root": "correct horse battery staple"]
    /// ```
    public var adminUsers: [String: String] = [:]
    /// The most connections each listener holds open at once (Sync Gateway's
    /// `maxIncomingConnections`; 0: no limit). A connection past it is closed at once, so that
    /// clients holding sockets open cannot take the other port down with them.
    ///
    /// ```swift
    /// config.maxIncomingConnections = 10_000
    /// ```
    public var maxIncomingConnections: Int = 2000
    /// The number of file descriptors the server asks the system for at start (Sync Gateway's
    /// `maxFileDescriptors`): the soft limit is raised to this, within the hard limit.
    ///
    /// ```swift
    /// config.maxFileDescriptors = 20_000
    /// ```
    public var maxFileDescriptors: Int = 5000
    /// The deepest nesting of arrays and objects a document may have, the document itself
    /// counting as one level (`max_document_depth` is not per database: it protects every
    /// client the server answers). Deeper ones are refused with 400.
    ///
    /// ```swift
    /// config.maxDocumentDepth = 64
    /// ```
    public var maxDocumentDepth: Int = 100
    /// The longest, in milliseconds, a `_changes` feed waits for a change before it answers
    /// (CouchDB's `changes_timeout`): a request's `timeout` and `heartbeat` are clamped to it,
    /// and a request without `timeout` waits the lesser of this and 60 s.
    ///
    /// ```swift
    /// config.changesTimeout = 300_000   // five minutes
    /// ```
    public var changesTimeout: Int = 3_600_000
    /// The longest, in milliseconds, a `continuous` or `eventsource` feed with `heartbeat` stays
    /// open (CouchDB's `changes_duration`); nil (the default): until the client goes, as
    /// `heartbeat` asks. A feed that reaches it ends properly, with its `last_seq` line, and a
    /// replicator reconnects from there.
    ///
    /// ```swift
    /// config.changesDuration = 3_600_000   // every feed reconnects at least hourly
    /// ```
    public var changesDuration: Int?
    /// Whether anyone may sign up: create a user with `PUT /_users/org.couchdb.user:<name>` on
    /// the public port, without credentials, as CouchDB and PouchDB's `signUp` allow. The user
    /// is made in the databases that take sign-ups (``DatabaseConfig/allowSignUp``), and only
    /// there, with no channels and no roles of its own; what documents granted its name before
    /// it signed up is not its. Off by default, as Sync Gateway has no sign-up: users are made
    /// by the admin port.
    ///
    /// ```swift
    /// config.allowSignUp = true
    /// config.databases["todo"]?.allowSignUp = true
    /// ```
    public var allowSignUp = false
    /// Where `/_replicator`'s replication documents are kept: `"walrus:"` (the default: in
    /// memory, forgotten at each start) or a directory, whose documents are started again at
    /// every start.
    ///
    /// ```swift
    /// config.replicator = "/var/lib/settee"
    /// ```
    public var replicator = "walrus:"
    /// The databases served, by name.
    ///
    /// ```swift
    /// config.databases["todo"] = DatabaseConfig(server: "walrus:")
    /// ```
    public var databases: [String: DatabaseConfig] = [:]

    /// One database's configuration (`databases.<name>`).
    ///
    /// ```swift
    /// var db = ServerConfiguration.DatabaseConfig(server: "/var/lib/settee")
    /// db.users["GUEST"] = .init(disabled: false, adminChannels: ["*"])
    /// ```
    public struct DatabaseConfig: Sendable, Equatable {
        /// `"walrus:"`: in memory, empty at every start, nothing left on disk; otherwise the
        /// directory that holds the database's files.
        ///
        /// ```swift
        /// db.server = "walrus:"
        /// ```
        public var server: String
        /// The users, by name; `GUEST` is anonymous access.
        ///
        /// ```swift
        /// db.users["pupshaw"] = .init(password: "frank", adminChannels: ["*"])
        /// ```
        public var users: [String: UserConfig] = [:]
        /// The roles, by name.
        ///
        /// ```swift
        /// db.roles["moderator"] = .init(adminChannels: ["all"])
        /// ```
        public var roles: [String: RoleConfig] = [:]
        /// The deepest revision history kept per document (Sync Gateway's `revs_limit`).
        ///
        /// ```swift
        /// db.revsLimit = 1000
        /// ```
        public var revsLimit: Int = 1000
        /// The largest document body accepted, in bytes (CouchDB's default, 8,000,000).
        ///
        /// ```swift
        /// db.maxDocumentSize = 1_000_000
        /// ```
        public var maxDocumentSize: Int = 8_000_000
        /// The largest attachment accepted, in bytes (20 MB, as seed 004 says of the server).
        ///
        /// ```swift
        /// db.maxAttachmentSize = 20_000_000
        /// ```
        public var maxAttachmentSize: Int = 20_000_000
        /// The sync function (`sync`, JavaScript source): what channels each revision goes to,
        /// what access it grants, and which writes it refuses. nil: Sync Gateway's default,
        /// `function(doc, oldDoc) { channel(doc.channels); }`. In the configuration file it may
        /// be written between back-ticks over several lines, as Sync Gateway allows.
        ///
        /// ```swift
        /// db.sync = "function(doc) { channel(doc.owner); access(doc.owner, doc.owner); }"
        /// ```
        public var sync: String?
        /// Whether users who sign up (``ServerConfiguration/allowSignUp``) become users of this
        /// database (`allowSignUp` in the file). Off by default: a database takes only the users
        /// its configuration and its administrators make.
        ///
        /// ```swift
        /// db.allowSignUp = true
        /// ```
        public var allowSignUp = false
        /// The named collections the database serves, by `scope.collection` (Sync Gateway 3's
        /// `scopes.<scope>.collections.<collection>`), each with its sync function (nil: the
        /// default one). Each is made when the database opens, and served at
        /// `/{db}.{scope}.{collection}/…`; the default collection is the database itself.
        ///
        /// ```swift
        /// db.collections["store.tasks"] = .init(sync: "function(doc) { channel(doc.list); }")
        /// ```
        public var collections: [String: CollectionConfig] = [:]

        /// One named collection's configuration.
        ///
        /// ```swift
        /// let tasks = ServerConfiguration.DatabaseConfig.CollectionConfig(sync: nil)
        /// ```
        ///
        /// - Note: A value type; safe to share between threads.
        public struct CollectionConfig: Sendable, Equatable {
            /// The collection's sync function; nil: Sync Gateway's default,
            /// `function(doc, oldDoc) { channel(doc.channels); }`.
            ///
            /// ```swift
            /// tasks.sync = "function(doc) { channel(doc.list); }"
            /// ```
            public var sync: String?

            /// A collection with `sync` as its sync function.
            ///
            /// ```swift
            /// let c = ServerConfiguration.DatabaseConfig.CollectionConfig(sync: "function(doc) { channel(doc.list); }")
            /// ```
            public init(sync: String? = nil) { self.sync = sync }
        }

        /// A database stored at `server` (`"walrus:"` or a directory).
        ///
        /// ```swift
        /// let db = ServerConfiguration.DatabaseConfig(server: "walrus:")
        /// ```
        public init(server: String) { self.server = server }

        /// Whether the database lives in memory only.
        ///
        /// ```swift
        /// if db.isWalrus { print("development database") }
        /// ```
        public var isWalrus: Bool { server == "walrus:" }
    }

    /// A user of `databases.<name>.users` (`GUEST` takes only `disabled` and `admin_channels`).
    ///
    /// ```swift
    /// let user = ServerConfiguration.UserConfig(password: "frank", adminChannels: ["*"])
    /// ```
    public struct UserConfig: Sendable, Equatable {
        /// The password (kept only as a salted hash once the server starts).
        ///
        /// ```swift
        /// user.password = "frank"
        /// ```
        public var password: String?
        /// Channels granted by the administrator.
        ///
        /// ```swift
        /// user.adminChannels = ["public"]
        /// ```
        public var adminChannels: [String] = []
        /// Roles granted by the administrator.
        ///
        /// ```swift
        /// user.adminRoles = ["moderator"]
        /// ```
        public var adminRoles: [String] = []
        /// A disabled user cannot authenticate (a disabled GUEST: anonymous requests get 401).
        ///
        /// ```swift
        /// user.disabled = true
        /// ```
        public var disabled = false
        /// An e-mail address, kept and shown, not used.
        ///
        /// ```swift
        /// user.email = "pupshaw@example.com"
        /// ```
        public var email: String?

        /// A user.
        ///
        /// ```swift
        /// let guest = ServerConfiguration.UserConfig(disabled: false, adminChannels: ["*"])
        /// ```
        public init(password: String? = nil, disabled: Bool = false, adminChannels: [String] = [], adminRoles: [String] = []) {
            self.password = password
            self.disabled = disabled
            self.adminChannels = adminChannels
            self.adminRoles = adminRoles
        }
    }

    /// A role of `databases.<name>.roles`.
    ///
    /// ```swift
    /// let role = ServerConfiguration.RoleConfig(adminChannels: ["all"])
    /// ```
    public struct RoleConfig: Sendable, Equatable {
        /// Channels the role grants.
        ///
        /// ```swift
        /// role.adminChannels = ["all"]
        /// ```
        public var adminChannels: [String] = []

        /// A role.
        ///
        /// ```swift
        /// let role = ServerConfiguration.RoleConfig(adminChannels: ["all"])
        /// ```
        public init(adminChannels: [String] = []) { self.adminChannels = adminChannels }
    }

    /// An empty configuration: the default interfaces and no database.
    ///
    /// ```swift
    /// var config = ServerConfiguration()
    /// config.databases["db"] = .init(server: "walrus:")
    /// ```
    public init() {}

    /// The configuration `settee serve` uses without a file: one database `db` stored under
    /// `directory`, both ports on loopback only, GUEST enabled with every channel.
    ///
    /// ```swift
    /// let config = ServerConfiguration.standalone(directory: "./settee-data")
    /// ```
    public static func standalone(directory: String) -> ServerConfiguration {
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:4984"
        var db = DatabaseConfig(server: directory)
        db.users["GUEST"] = UserConfig(disabled: false, adminChannels: ["*"])
        config.databases["db"] = db
        config.replicator = directory
        return config
    }

    /// Reads a configuration from JSON text.
    ///
    /// ```swift
    /// let config = try ServerConfiguration(json: String(contentsOfFile: path, encoding: .utf8))
    /// ```
    ///
    /// - Throws: ``ConfigurationError`` naming the path of the first key that is unknown, of the
    ///   wrong type or out of range, or the place where the JSON does not parse.
    public init(json: String) throws(ConfigurationError) {
        let text = try Self.expandingBackticks(json)
        let value: JSONValue
        do {
            value = try JSONValue(parsing: text)
        } catch {
            throw ConfigurationError(path: "", message: "not valid JSON: \(error.message)")
        }
        let top = try ConfigReader(value, path: "").object()
        for (key, v) in top {
            let r = ConfigReader(v, path: key)
            switch key {
            case "interface": interface = try r.address()
            case "adminInterface": adminInterface = try r.address(bareHost: "127.0.0.1")
            case "log": log = try r.strings()
            case "ServerReadTimeout": serverReadTimeout = try r.int(in: 1 ... 86_400)
            case "SSLCert": sslCert = try r.string()
            case "SSLKey": sslKey = try r.string()
            case "adminUsers":
                for (name, uv) in try r.object() {
                    let u = r.child(name, uv)
                    guard !name.isEmpty, !name.contains(":") else { throw ConfigurationError(path: u.path, message: "an administrator's name is not empty and has no colon") }
                    var password: String?
                    for (key, pv) in try u.object() {
                        guard key == "password" else { throw ConfigurationError(path: u.path + "." + key, message: "unknown key") }
                        password = try u.child(key, pv).string()
                    }
                    guard let password, !password.isEmpty else { throw ConfigurationError(path: u.path, message: "an administrator needs a password") }
                    adminUsers[name] = password
                }
            case "maxIncomingConnections": maxIncomingConnections = try r.int(in: 0 ... 1_000_000)
            case "maxFileDescriptors": maxFileDescriptors = try r.int(in: 64 ... 10_000_000)
            case "maxDocumentDepth": maxDocumentDepth = try r.int(in: 2 ... 200)
            case "changesTimeout": changesTimeout = try r.int(in: 100 ... 3_600_000)
            case "changesDuration": changesDuration = try r.int(in: 100 ... 86_400_000)
            case "allowSignUp": allowSignUp = try r.bool()
            case "replicator":
                replicator = try r.string()
                guard !replicator.isEmpty else { throw ConfigurationError(path: key, message: "empty: \"walrus:\" or a directory") }
            case "databases":
                for (name, dv) in try r.object() {
                    let dr = ConfigReader(dv, path: "databases." + name)
                    guard Self.isValidDatabaseName(name) else {
                        throw ConfigurationError(path: dr.path, message: "invalid database name (lowercase letters, digits and _$()+-/, starting with a letter)")
                    }
                    databases[name] = try Self.database(dr)
                }
            default: throw ConfigurationError(path: key, message: "unknown key")
            }
        }
        if (sslCert == nil) != (sslKey == nil) {
            throw ConfigurationError(path: sslCert == nil ? "SSLCert" : "SSLKey", message: "SSLCert and SSLKey go together")
        }
    }

    /// The configuration text with each back-tick string (Sync Gateway's way to write a sync
    /// function over several lines) turned into a JSON string. Back-ticks inside JSON strings
    /// are left alone.
    static func expandingBackticks(_ text: String) throws(ConfigurationError) -> String {
        guard text.contains("`") else { return text }
        var out = ""
        var inString = false
        var escaped = false
        var raw: String?
        for ch in text {
            if var r = raw {
                if ch == "`" {
                    out += (try? JSONValue.string(r).jsonText()) ?? "\"\""
                    raw = nil
                } else {
                    r.append(ch)
                    raw = r
                }
                continue
            }
            if inString {
                if escaped { escaped = false } else if ch == "\\" { escaped = true } else if ch == "\"" { inString = false }
                out.append(ch)
            } else if ch == "`" {
                raw = ""
            } else {
                if ch == "\"" { inString = true }
                out.append(ch)
            }
        }
        if raw != nil { throw ConfigurationError(path: "", message: "a back-tick string is not closed") }
        return out
    }

    /// Whether `name` is a database name CouchDB accepts (`^[a-z][a-z0-9_$()+/-]*$`).
    ///
    /// ```swift
    /// ServerConfiguration.isValidDatabaseName("todo")   // true
    /// ```
    public static func isValidDatabaseName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (UInt8(ascii: "a") ... UInt8(ascii: "z")).contains(first), name.utf8.count <= 238 else {
            return false
        }
        return name.utf8.allSatisfy { c in
            (UInt8(ascii: "a") ... UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(c)
                || "_$()+-/".utf8.contains(c)
        }
    }

    /// A database's keys (`databases.<name>`, or an admin `PUT /{db}`'s body).
    static func database(_ r: ConfigReader) throws(ConfigurationError) -> DatabaseConfig {
        var db = DatabaseConfig(server: "walrus:")
        for (key, v) in try r.object() {
            let k = r.child(key, v)
            switch key {
            case "server":
                db.server = try k.string()
                if db.server.hasPrefix("walrus:") && db.server != "walrus:" {
                    throw ConfigurationError(path: k.path, message: "a persisted walrus is a directory: give the directory itself")
                }
                if db.server.isEmpty { throw ConfigurationError(path: k.path, message: "empty: \"walrus:\" or a directory") }
            case "users":
                for (name, uv) in try k.object() {
                    let u = k.child(name, uv)
                    if let problem = PrincipalName.problem(name, kind: .user) { throw ConfigurationError(path: u.path, message: problem) }
                    db.users[name] = try user(u, isGuest: name == "GUEST", requirePassword: true)
                }
            case "roles":
                for (name, rv) in try k.object() {
                    if let problem = PrincipalName.problem(name, kind: .role) {
                        throw ConfigurationError(path: k.child(name, rv).path, message: problem)
                    }
                    db.roles[name] = try role(k.child(name, rv))
                }
            case "allowSignUp": db.allowSignUp = try k.bool()
            case "revs_limit": db.revsLimit = try k.int(in: 20 ... 100_000)
            case "max_document_size": db.maxDocumentSize = try k.int(in: 1024 ... 16 << 20)
            case "max_attachment_size": db.maxAttachmentSize = try k.int(in: 1024 ... 1 << 31)
            case "sync":
                let source = try k.string()
                guard !source.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                    throw ConfigurationError(path: k.path, message: "empty: a JavaScript function, or leave the key out for the default")
                }
                if db.sync != nil { throw ConfigurationError(path: k.path, message: "the default collection's sync function is given twice (here and in scopes)") }
                db.sync = source
            case "scopes":
                // Sync Gateway 3's keyspaces: `scopes.<scope>.collections.<collection>`.
                let (sync, named) = try scopes(k)
                if let sync {
                    if db.sync != nil { throw ConfigurationError(path: k.path, message: "the default collection's sync function is given twice (here and in sync)") }
                    db.sync = sync
                }
                db.collections = named
            default: throw ConfigurationError(path: k.path, message: "unknown key")
            }
        }
        return db
    }

    /// Sync Gateway 3's `scopes` of a database: the default collection's sync function, if it
    /// gives one, and the named collections by `scope.collection`, their names checked as
    /// Couchbase Lite checks them.
    static func scopes(_ r: ConfigReader) throws(ConfigurationError) -> (String?, [String: DatabaseConfig.CollectionConfig]) {
        var sync: String?
        var named: [String: DatabaseConfig.CollectionConfig] = [:]
        for (scopeName, sv) in try r.object() {
            let scope = r.child(scopeName, sv)
            do { try Database.checkKeyspaceName(scopeName, of: "scope") } catch { throw ConfigurationError(path: scope.path, message: error.message) }
            for (key, cv) in try scope.object() {
                let collections = scope.child(key, cv)
                guard key == "collections" else { throw ConfigurationError(path: collections.path, message: "unknown key") }
                for (name, v) in try collections.object() {
                    let collection = collections.child(name, v)
                    do { try Database.checkKeyspaceName(name, of: "collection") } catch { throw ConfigurationError(path: collection.path, message: error.message) }
                    let isDefault = scopeName == Scope.defaultScopeName && name == Collection.defaultCollectionName
                    var config = DatabaseConfig.CollectionConfig()
                    for (ck, value) in try collection.object() {
                        let c = collection.child(ck, value)
                        guard ck == "sync" else { throw ConfigurationError(path: c.path, message: "unknown key") }
                        let source = try c.string()
                        guard !source.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                            throw ConfigurationError(path: c.path, message: "empty: a JavaScript function, or leave the key out for the default")
                        }
                        config.sync = source
                    }
                    if isDefault { sync = config.sync } else { named[scopeName + "." + name] = config }
                }
            }
        }
        return (sync, named)
    }

    /// A role's keys.
    static func role(_ r: ConfigReader) throws(ConfigurationError) -> RoleConfig {
        var role = RoleConfig()
        for (key, v) in try r.object() {
            switch key {
            case "admin_channels": role.adminChannels = try r.child(key, v).strings()
            default: throw ConfigurationError(path: r.path + "." + key, message: "unknown key")
            }
        }
        return role
    }

    /// A user's keys (GUEST's are fewer); without `requirePassword`, a user may come without one
    /// (an admin API update that keeps the stored password).
    static func user(_ r: ConfigReader, isGuest: Bool, requirePassword: Bool) throws(ConfigurationError) -> UserConfig {
        var user = UserConfig()
        for (key, v) in try r.object() {
            let k = r.child(key, v)
            switch (key, isGuest) {
            case ("disabled", _): user.disabled = try k.bool()
            case ("admin_channels", _): user.adminChannels = try k.strings()
            case ("password", false): user.password = try k.string()
            case ("admin_roles", false):
                user.adminRoles = try k.strings()
                for role in user.adminRoles {
                    if let problem = PrincipalName.problem(role, kind: .role) { throw ConfigurationError(path: k.path, message: problem) }
                }
            case ("email", false): user.email = try k.string()
            case (_, true) where ["password", "admin_roles", "email"].contains(key):
                throw ConfigurationError(path: k.path, message: "GUEST takes only disabled and admin_channels")
            default: throw ConfigurationError(path: k.path, message: "unknown key")
            }
        }
        if requirePassword && !isGuest && user.password == nil && !user.disabled {
            throw ConfigurationError(path: r.path, message: "a user needs a password (or \"disabled\": true)")
        }
        return user
    }
}

/// A configuration that cannot be used: where, and why.
///
/// ```swift
/// do { _ = try ServerConfiguration(json: text) } catch { print(error) }   // databases.todo.userz: unknown key
/// ```
///
/// - Note: A value type; `Sendable`.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The dotted path of the key at fault (empty: the whole file).
    ///
    /// ```swift
    /// print(error.path)   // "databases.todo.userz"
    /// ```
    public var path: String
    /// What is wrong with it.
    ///
    /// ```swift
    /// print(error.message)   // "unknown key"
    /// ```
    public var message: String

    /// An error at `path`.
    ///
    /// ```swift
    /// throw ConfigurationError(path: "interface", message: "not host:port")
    /// ```
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// `path: message`.
    ///
    /// ```swift
    /// print(error.description)
    /// ```
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Typed reads of one configuration value, each failing with the value's path.
struct ConfigReader {
    let value: JSONValue
    var path: String

    init(_ value: JSONValue, path: String) {
        self.value = value
        self.path = path
    }

    func child(_ key: String, _ value: JSONValue) -> ConfigReader { ConfigReader(value, path: path.isEmpty ? key : path + "." + key) }

    private func wrongType(_ expected: String) -> ConfigurationError {
        ConfigurationError(path: path, message: "expected \(expected)")
    }

    func object() throws(ConfigurationError) -> [(String, JSONValue)] {
        guard case .object(let o) = value else { throw wrongType("an object") }
        return o.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    func string() throws(ConfigurationError) -> String {
        guard case .string(let s) = value else { throw wrongType("a string") }
        return s
    }

    func bool() throws(ConfigurationError) -> Bool {
        guard case .bool(let b) = value else { throw wrongType("true or false") }
        return b
    }

    func int(in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard case .int(let i) = value else { throw wrongType("an integer") }
        guard let n = Int(exactly: i), range.contains(n) else {
            throw ConfigurationError(path: path, message: "\(i) is out of range \(range.lowerBound)…\(range.upperBound)")
        }
        return n
    }

    func strings() throws(ConfigurationError) -> [String] {
        guard case .array(let a) = value else { throw wrongType("an array of strings") }
        var out: [String] = []
        for (i, v) in a.enumerated() {
            guard case .string(let s) = v else {
                throw ConfigurationError(path: "\(path)[\(i)]", message: "expected a string")
            }
            out.append(s)
        }
        return out
    }

    /// `host:port`, `:port` or `[v6]:port`, the port 0…65535; or the port alone, a number.
    /// A bare port number (`"interface": 4984`, as in the source's example) listens on
    /// `bareHost`: every interface for the public port, loopback for the admin port (which is
    /// only ever reachable from this machine unless a host says otherwise).
    func address(bareHost: String = "") throws(ConfigurationError) -> String {
        switch value {
        case .int: return "\(bareHost):\(try int(in: 0 ... 65535))"
        case .string: break
        default: throw ConfigurationError(path: path, message: "expected a port number or host:port (4984, \":4984\", \"127.0.0.1:4985\"), got \((try? value.jsonText()) ?? "a value of another type")")
        }
        let s = try string()
        guard ListenAddress(s) != nil else {
            throw ConfigurationError(path: path, message: "expected host:port (\":4984\", \"127.0.0.1:4985\", \"[::1]:0\"), got \"\(s)\"")
        }
        return s
    }
}

/// A parsed `host:port`.
struct ListenAddress: Equatable {
    var host: String
    var port: Int

    init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        guard let port = Int(text[text.index(after: colon)...]), (0 ... 65535).contains(port) else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { host = "0.0.0.0" }
        self.host = host
        self.port = port
    }
}
