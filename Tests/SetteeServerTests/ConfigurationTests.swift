import Foundation
import Logging
import Testing
@testable import SetteeServer

/// The JSON configuration, read as Sync Gateway reads it, and refused with the path of the first fault.
@Suite struct ConfigurationTests {
    /// The configuration the README and the DocC catalog show.
    @Test func theReadmesConfigurationReads() throws {
        let config = try ServerConfiguration(json: """
            {"interface": ":4984", "adminInterface": "127.0.0.1:4985",
             "databases": {"todo": {"server": "./settee-data",
               "users": {"pupshaw": {"password": "frank", "admin_channels": ["*"]}}}}}
            """)
        #expect(config.databases["todo"]?.server == "./settee-data")
        #expect(config.databases["todo"]?.users["pupshaw"]?.adminChannels == ["*"])
    }

    @Test func seed001sConfigurationReads() throws {
        let config = try ServerConfiguration(json: """
            {
              "log": ["HTTP", "Auth"],
              "databases": {
                "todo": {
                  "server": "walrus:",
                  "users": {
                    "GUEST": {"disabled": false, "admin_channels": ["*"]},
                    "pupshaw": {"password": "frank", "admin_channels": ["a"], "admin_roles": ["moderator"]}
                  },
                  "roles": {"moderator": {"admin_channels": ["b"]}},
                  "revs_limit": 500
                }
              }
            }
            """)
        #expect(config.interface == ":4984")
        #expect(config.adminInterface == "127.0.0.1:4985")
        #expect(config.log == ["HTTP", "Auth"])
        // The source's own example gives the port alone, as a number; the admin port's stays on
        // loopback.
        let bare = try ServerConfiguration(json: #"{"interface": 4984, "adminInterface": 4985}"#)
        #expect(bare.interface == ":4984" && bare.adminInterface == "127.0.0.1:4985")
        let db = try #require(config.databases["todo"])
        #expect(db.isWalrus)
        #expect(db.users["GUEST"] == .init(disabled: false, adminChannels: ["*"]))
        #expect(db.users["pupshaw"]?.password == "frank")
        #expect(db.users["pupshaw"]?.adminRoles == ["moderator"])
        #expect(db.roles["moderator"]?.adminChannels == ["b"])
        #expect(db.revsLimit == 500)
        #expect(db.maxDocumentSize == 8_000_000)
        #expect(db.maxAttachmentSize == 20_000_000)
    }

    @Test(arguments: [
        (#"{"databases": {"todo": {"userz": {}}}}"#, "databases.todo.userz: unknown key"),
        (#"{"interfase": ":4984"}"#, "interfase: unknown key"),
        (#"{"interface": true}"#, "interface: expected a port number or host:port (4984, \":4984\", \"127.0.0.1:4985\"), got true"),
        (#"{"interface": 4984.5}"#, "interface: expected a port number or host:port (4984, \":4984\", \"127.0.0.1:4985\"), got 4984.5"),
        (#"{"interface": 70000}"#, "interface: 70000 is out of range 0…65535"),
        (#"{"interface": "localhost"}"#, #"interface: expected host:port (":4984", "127.0.0.1:4985", "[::1]:0"), got "localhost""#),
        (#"{"log": "HTTP"}"#, "log: expected an array of strings"),
        (#"{"log": ["HTTP", 3]}"#, "log[1]: expected a string"),
        (#"{"databases": {"todo": {"users": {"GUEST": {"disabled": "no"}}}}}"#, "databases.todo.users.GUEST.disabled: expected true or false"),
        (#"{"databases": {"todo": {"users": {"GUEST": {"password": "x"}}}}}"#, "databases.todo.users.GUEST.password: GUEST takes only disabled and admin_channels"),
        (#"{"databases": {"todo": {"users": {"bob": {}}}}}"#, #"databases.todo.users.bob: a user needs a password (or "disabled": true)"#),
        (#"{"databases": {"todo": {"revs_limit": 5}}}"#, "databases.todo.revs_limit: 5 is out of range 20…100000"),
        (#"{"databases": {"Todo": {}}}"#, "databases.Todo: invalid database name (lowercase letters, digits and _$()+-/, starting with a letter)"),
        (#"{"databases": {"todo": {"roles": {"r": {"channels": []}}}}}"#, "databases.todo.roles.r.channels: unknown key"),
        (#"{"changesTimeout": 0}"#, "changesTimeout: 0 is out of range 100…3600000"),
        (#"{"changesDuration": "1h"}"#, "changesDuration: expected an integer"),
        (#"[1]"#, "expected an object"),
        (#"{"databases": {"todo": {"scopes": {"store": {"collections": {"tasks": {"sync": ""}}}}}}}"#,
         "databases.todo.scopes.store.collections.tasks.sync: empty: a JavaScript function, or leave the key out for the default"),
        (#"{"databases": {"todo": {"scopes": {"store": {"collections": {"tasks": {"channels": []}}}}}}}"#,
         "databases.todo.scopes.store.collections.tasks.channels: unknown key"),
        (#"{"databases": {"todo": {"scopes": {"_store": {}}}}}"#,
         "databases.todo.scopes._store: a scope name starts with neither _ nor % (_default aside): '_store'"),
        (#"{"databases": {"todo": {"scopes": {"_default": {"collections": {"a b": {}}}}}}}"#,
         "databases.todo.scopes._default.collections.a b: a collection name has only the characters A-Z, a-z, 0-9, _, - and %: 'a b'"),
        (#"{"databases": {"todo": {"scopes": {"_default": {"colections": {}}}}}}"#, "databases.todo.scopes._default.colections: unknown key"),
        (#"{"databases": {"todo": {"scopes": {"_default": {"collections": {"_default": {"import_filter": "x"}}}}}}}"#,
         "databases.todo.scopes._default.collections._default.import_filter: unknown key"),
        (#"{"databases": {"todo": {"scopes": {"_default": {"collections": {"_default": {"sync": "function(d){}"}}}}, "sync": "function(d){}"}}}"#,
         "databases.todo.sync: the default collection's sync function is given twice (here and in scopes)"),
    ])
    func faultsNameTheirPath(_ json: String, _ expected: String) {
        do {
            _ = try ServerConfiguration(json: json)
            Issue.record("accepted: \(json)")
        } catch {
            #expect(error.description == expected)
        }
    }

    /// Sync Gateway's log keys are read as it reads them: `HTTP+` is `HTTP` (and logs requests),
    /// `*` is all, its other keys are accepted; a key neither knows is named in a warning at start.
    @Test func syncGatewaysLogKeysAndAWarningForUnknownOnes() async throws {
        let keys = LogKeys(["HTTP+", "crud", "Cache", "Bogus", "Chnages"])
        #expect(keys.contains("HTTP") && keys.contains("CRUD") && !keys.contains("Auth"))
        #expect(keys.unknown == ["Bogus", "Chnages"])
        #expect(keys.warning?.contains(#""Bogus", "Chnages""#) == true)
        #expect(LogKeys(["*"]).contains("Changes") && LogKeys(["*"]).warning == nil && LogKeys(["HTTP+", "Access"]).warning == nil)
        // At start, and in effect: HTTP+ logs each request.
        let lines = LogLines()
        var config = try ServerConfiguration(json: #"{"log": ["HTTP+", "Bogus"], "databases": {"db": {"users": {"GUEST": {"disabled": false}}}}}"#)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        let server = try SetteeServer(configuration: config, logger: Logger(label: "test") { _ in CapturingLogHandler(lines: lines) })
        #expect(lines.all.contains { $0.contains(#""Bogus""#) && $0.contains("not a log key") }, "\(lines.all)")
        try await server.withClient(.live) { c in _ = try await c.send(.get, "/db") }
        #expect(lines.all.contains { $0.hasPrefix("HTTP GET /db 200") }, "\(lines.all)")
    }

    @Test func malformedJSONIsAnError() {
        #expect(throws: ConfigurationError.self) { try ServerConfiguration(json: "{\"databases\": ") }
    }

    @Test func theStandaloneDefaultServesOneLoopbackDatabaseWithGuest() {
        let config = ServerConfiguration.standalone(directory: "/tmp/x")
        #expect(config.interface == "127.0.0.1:4984")
        #expect(config.adminInterface == "127.0.0.1:4985")
        #expect(config.databases.keys.sorted() == ["db"])
        #expect(config.databases["db"]?.server == "/tmp/x")
        #expect(config.databases["db"]?.users["GUEST"]?.disabled == false)
    }

    @Test func walrusDatabasesAreEmptyAtEveryStartAndLeaveNothing() async throws {
        let first = try makeServer()
        let dir = try #require(first.database(named: "db")?.walrusDirectory)
        try await first.withClient { client async throws in
            #expect(try await client.send(.put, "/db/a", json: #"{"v":1}"#).status == .created)
        }
        try first.close()
        #expect(!FileManager.default.fileExists(atPath: dir))
        let second = try makeServer()
        try await second.withClient { client async throws in
            #expect(try await client.send(.get, "/db")["doc_count"] == 0)
            #expect(try await client.send(.get, "/db/a").status == .notFound)
        }
        try second.close()
    }
}
