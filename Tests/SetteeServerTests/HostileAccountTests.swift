import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// Accounts against an attacker, on live servers on loopback: a same-named user of another
/// database, names chosen to look like someone else's or a role, grants waiting for a name,
/// guessing, a page of another site, and log lines forged through IDs.
@Suite struct HostileAccountTests {
    /// Two databases whose users named bob are two people.
    static let twoBobs = """
        {"allowSignUp": true, "databases": {
          "dba": {"server": "walrus:", "users": {"GUEST": {"disabled": true},
                  "bob": {"password": "a-secret", "admin_channels": ["a"], "admin_roles": ["boss"]}}},
          "dbb": {"server": "walrus:", "allowSignUp": true, "users": {"GUEST": {"disabled": true},
                  "bob": {"password": "b-secret", "admin_channels": ["*"]}}}}}
        """

    /// Bob of `dbb` proves nothing in `dba`: through `/_users` he sees only his own record's
    /// hash, changes no password and deletes nobody while the name is also someone else's;
    /// his session opens `dbb` only; bob of `dba` keeps his password, his documents and his
    /// roles.
    @Test func aSameNamedUserOfAnotherDatabaseTakesNothing() async throws {
        let server = try channelServer(Self.twoBobs)
        try await withPorts(server) { pub, admin in
            #expect(try await admin.send(.put, "/dba/secret", json: #"{"pin": "1234", "channels": ["a"]}"#).status == .created)
            let bobA = basic("bob", "a-secret"), bobB = basic("bob", "b-secret")
            let seenByAdmin = try await admin.send(.get, "/_users/org.couchdb.user:bob")
            let mine = try await pub.send(.get, "/_users/org.couchdb.user:bob", headers: bobB)
            #expect(mine.status == .ok, "\(mine.text)")
            // The administrator's document shows dba's record first; bob of dbb is shown his.
            #expect(mine["derived_key"] != nil && mine["derived_key"] != seenByAdmin["derived_key"], "\(mine.text)")
            #expect(mine["roles"] == [], "\(mine.text)")
            let theirs = try await pub.send(.get, "/_users/org.couchdb.user:bob", headers: bobA)
            #expect(theirs["derived_key"] == seenByAdmin["derived_key"] && theirs["roles"] == ["boss"], "\(theirs.text)")
            // No change, no deletion, whatever revision he names.
            for rev in [mine["_rev"]?.stringValue ?? "", seenByAdmin["_rev"]?.stringValue ?? ""] {
                let change = #"{"_rev": "\#(rev)", "name": "bob", "password": "mine-now", "roles": [], "type": "user"}"#
                let r = try await pub.send(.put, "/_users/org.couchdb.user:bob", json: change, headers: bobB)
                #expect(r.status == .forbidden, "\(r.text)")
                #expect(try await pub.send(.delete, "/_users/org.couchdb.user:bob?rev=\(rev)", headers: bobB).status == .forbidden)
            }
            #expect(try await pub.send(.get, "/dba/secret", headers: bobA)["pin"] == "1234")
            #expect(try await pub.send(.get, "/dba/secret", headers: bobB).status == .unauthorized)
            #expect(try await pub.send(.get, "/dba/secret", headers: basic("bob", "mine-now")).status == .unauthorized)
            // A session of his, made server-wide, opens his database only.
            let login = try await pub.send(.post, "/_session", json: #"{"name": "bob", "password": "b-secret"}"#)
            let cookie = try #require(login.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            #expect(try await pub.send(.get, "/dbb", headers: [.cookie: cookie]).status == .ok)
            #expect(try await pub.send(.get, "/dba", headers: [.cookie: cookie]).status == .unauthorized)
            #expect(try await pub.send(.get, "/dba/secret", headers: [.cookie: cookie]).status == .unauthorized)
            let context = try await pub.send(.get, "/_session", headers: [.cookie: cookie])
            #expect(context["userCtx"]?["roles"] == [], "\(context.text)")
            let viaCookie = try await pub.send(.get, "/_users/org.couchdb.user:bob", headers: [.cookie: cookie])
            #expect(viaCookie["derived_key"] == mine["derived_key"], "\(viaCookie.text)")
            // Bob of dba is untouched.
            #expect(try await pub.send(.get, "/dba", headers: bobA).status == .ok)
            // One bob who holds both (the same password in both databases) acts on both.
            #expect(try await admin.send(.put, "/dba/_user/carol", json: #"{"password": "c"}"#).status == .created)
            #expect(try await admin.send(.put, "/dbb/_user/carol", json: #"{"password": "c"}"#).status == .created)
            let carol = try await pub.send(.get, "/_users/org.couchdb.user:carol", headers: basic("carol", "c"))
            let rev = try #require(carol["_rev"]?.stringValue)
            let change = #"{"_rev": "\#(rev)", "name": "carol", "password": "c2", "roles": [], "type": "user"}"#
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:carol", json: change, headers: basic("carol", "c")).status == .created)
            #expect(try await pub.send(.get, "/dba", headers: basic("carol", "c2")).status == .ok)
            #expect(try await pub.send(.get, "/dbb", headers: basic("carol", "c2")).status == .ok)
        }
    }

    /// Names that look like a role, the system, GUEST, another user or markup are refused on
    /// every path that makes users, and make nothing.
    @Test func hostileNamesAreRefusedEverywhere() async throws {
        let server = try channelServer(Self.twoBobs)
        try await withPorts(server) { pub, admin in
            let names = ["role:editor", "_admin", "guest", "Guest", "a:b", "x/../y", "alice ", " alice", "\u{0430}lice", "<svg onload=alert(1)>",
                         "e\u{301}", "al\u{200B}ice", "tab\tname", "line\nbreak", "", String(repeating: "n", count: 201), "a,b", "back`tick", "--"]
            for name in names {
                let id = "org.couchdb.user:" + name
                let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
                let body = try JSONValue.object(["name": .string(name), "password": "pw", "roles": [], "type": "user"]).jsonText()
                let signUp = try await pub.send(.put, "/_users/\(encoded)", json: body)
                #expect(signUp.status == .badRequest || signUp.status == .forbidden, "sign-up \(name.debugDescription): \(signUp.status) \(signUp.text)")
                let made = try await admin.send(.put, "/_users/\(encoded)", json: body)
                #expect(made.status == .badRequest || made.status == .forbidden, "_users \(name.debugDescription): \(made.status) \(made.text)")
                let path = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
                if !name.isEmpty {
                    let user = try await admin.send(.put, "/dbb/_user/\(path)", json: #"{"password": "pw"}"#)
                    #expect(user.status == .badRequest, "_user \(name.debugDescription): \(user.status) \(user.text)")
                    let role = try await admin.send(.put, "/dbb/_role/\(path)", json: #"{"admin_channels": []}"#)
                    #expect(role.status == .badRequest || name == "guest" || name == "Guest",
                            "_role \(name.debugDescription): \(role.status) \(role.text)")
                }
            }
            let users = try await admin.send(.get, "/dbb/_user/").json
            #expect(users == ["GUEST", "bob"], "\(users)")
            // The configuration is held to the same rules.
            for bad in [#"{"databases": {"d": {"users": {"a:b": {"password": "x"}}}}}"#,
                        #"{"databases": {"d": {"roles": {"_admin": {}}}}}"#,
                        #"{"databases": {"d": {"users": {"u": {"password": "x", "admin_roles": ["role:x"]}}}}}"#] {
                #expect(throws: ConfigurationError.self, "\(bad)") { try ServerConfiguration(json: bad) }
            }
            // Names that are fine.
            for good in ["alice", "Zoë", "日本", "bob.smith+tag@example.com", "user 2", "ΑΒΓ", "Дима"] {
                let path = good.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? good
                #expect(try await admin.send(.put, "/dbb/_user/\(path)", json: #"{"password": "pw"}"#).status == .created, "\(good)")
            }
        }
    }

    /// A grant to a role is the role's: a user named like the role (it cannot be named
    /// `role:…`) reads nothing through it; the role's users do.
    @Test func aRolesGrantIsNotAUsersOfTheSameName() async throws {
        let config = """
            {"databases": {"db": {"server": "walrus:",
              "sync": `function (doc) { channel(doc.channels); if (doc.grant) access("role:" + doc.grant, doc.to); }`,
              "roles": {"editor": {}},
              "users": {"GUEST": {"disabled": true}, "editor": {"password": "pw"},
                        "ed": {"password": "pw", "admin_roles": ["editor"]}}}}}
            """
        let server = try channelServer(config)
        try await withPorts(server) { pub, admin in
            try await put(admin, "plan", #"{"channels": ["secret"], "text": "x"}"#)
            try await put(admin, "grant", #"{"grant": "editor", "to": "secret"}"#)
            #expect(try await pub.send(.get, "/db/plan", headers: basic("ed", "pw")).status == .ok)
            #expect(try await pub.send(.get, "/db/plan", headers: basic("editor", "pw")).status == .notFound)
            let editor = try await admin.send(.get, "/db/_user/editor")
            #expect(editor["all_channels"] == ["!"], "\(editor.text)")
        }
    }

    /// A document may grant a name nobody has yet. Someone who then signs up with that name
    /// gets nothing of it (documents granting it afterwards count); a user the administrator
    /// makes gets it, as in Sync Gateway. A sign-up joins only the databases that take them.
    @Test func signUpTakesNoGrantMadeBeforeIt() async throws {
        let config = """
            {"allowSignUp": true, "databases": {
              "db": {"server": "walrus:", "allowSignUp": true,
                     "sync": `function (doc) { channel(doc.channels); if (doc.share) access(doc.share, doc.channels); }`,
                     "users": {"GUEST": {"disabled": true}}},
              "closed": {"server": "walrus:", "users": {"GUEST": {"disabled": true}}}}}
            """
        let server = try channelServer(config)
        try await withPorts(server) { pub, admin in
            try await put(admin, "shared", #"{"channels": ["bobs"], "share": "futureuser", "text": "bob's plans"}"#)
            try await put(admin, "early", #"{"channels": ["early"], "share": "provisioned"}"#)
            let signUp = #"{"name": "futureuser", "password": "pw", "roles": [], "type": "user"}"#
            #expect(try await pub.send(.put, "/_users/org.couchdb.user:futureuser", json: signUp).status == .created)
            let me = basic("futureuser", "pw")
            #expect(try await pub.send(.get, "/db/shared", headers: me).status == .notFound)
            #expect(try await pub.send(.get, "/db/_changes", headers: me).rowIDs.isEmpty)
            // Granted after the sign-up: readable.
            try await put(admin, "later", #"{"channels": ["later"], "share": "futureuser"}"#)
            #expect(try await pub.send(.get, "/db/later", headers: me).status == .ok)
            #expect(try await pub.send(.get, "/db/_changes", headers: me).rowIDs == ["later"])
            // Not a user of the database that takes no sign-ups.
            #expect(try await admin.send(.get, "/closed/_user/futureuser").status == .notFound)
            #expect(try await pub.send(.get, "/closed", headers: me).status == .unauthorized)
            // The administrator provisions a user its grants were waiting for.
            #expect(try await admin.send(.put, "/db/_user/provisioned", json: #"{"password": "pw"}"#).status == .created)
            #expect(try await pub.send(.get, "/db/early", headers: basic("provisioned", "pw")).status == .ok)
            // And a server whose databases all refuse sign-ups refuses them.
            let none = try channelServer(#"{"allowSignUp": true, "databases": {"db": {"server": "walrus:"}}}"#)
            try await withPorts(none) { pub2, _ in
                let r = try await pub2.send(.put, "/_users/org.couchdb.user:zed", json: #"{"name": "zed", "password": "pw", "roles": [], "type": "user"}"#)
                #expect(r.status == .forbidden, "\(r.text)")
            }
        }
    }

    /// Nobody learns which users or databases exist by trying: with sign-up off, a write of
    /// another's user document is 403 whether the name is taken or not; to an anonymous client
    /// or wrong credentials, a database that is not served answers as a served one whose user
    /// the caller is not.
    @Test func namesAreNotEnumerable() async throws {
        let config = """
            {"databases": {"db": {"server": "walrus:", "users": {"GUEST": {"disabled": true}, "alice": {"password": "pw"}}},
                           "open": {"server": "walrus:", "users": {"GUEST": {"disabled": false, "admin_channels": ["*"]}}}}}
            """
        let server = try channelServer(config)
        try await withPorts(server) { pub, _ in
            func answer(_ r: TestResponse) -> String { "\(r.status.code) \(r.text)" }
            for who in [HTTPFields(), basic("alice", "pw")] {
                let taken = try await pub.send(.put, "/_users/org.couchdb.user:alice", json: #"{"name": "alice", "password": "x", "roles": [], "type": "user"}"#,
                                               headers: who == [:] ? [:] : basic("nobody", "x"))
                let free = try await pub.send(.put, "/_users/org.couchdb.user:zelda", json: #"{"name": "zelda", "password": "x", "roles": [], "type": "user"}"#,
                                              headers: who == [:] ? [:] : basic("nobody", "x"))
                #expect(taken.status == free.status, "\(answer(taken)) / \(answer(free))")
            }
            let anonymous = try await pub.send(.put, "/_users/org.couchdb.user:alice", json: #"{"name": "alice", "password": "x", "roles": [], "type": "user"}"#)
            let fresh = try await pub.send(.put, "/_users/org.couchdb.user:zelda", json: #"{"name": "zelda", "password": "x", "roles": [], "type": "user"}"#)
            #expect(answer(anonymous) == answer(fresh))
            // (A wrong password is tried on GET only: five wrong ones would be throttled.)
            for headers in [HTTPFields(), basic("alice", "pw"), basic("alice", "wrong")] {
                for method in [HTTPRequest.Method.get, .head, .post, .put] where method == .get || headers != basic("alice", "wrong") {
                    let served = try await pub.send(method, method == .post ? "/db" : "/db", json: method == .post ? "{}" : nil, headers: headers)
                    let missing = try await pub.send(method, "/nosuchdb", json: method == .post ? "{}" : nil, headers: headers)
                    if headers == basic("alice", "pw") { continue }   // alice is a user of db: of course it differs
                    #expect(served.status == missing.status && served.body == missing.body, "\(method) \(headers): \(answer(served)) / \(answer(missing))")
                }
                guard headers != basic("alice", "wrong") else { continue }
                let doc = try await pub.send(.get, "/db/x", headers: headers)
                let missingDoc = try await pub.send(.get, "/nosuchdb/x", headers: headers)
                if headers != basic("alice", "pw") { #expect(doc.status == missingDoc.status, "\(answer(doc)) / \(answer(missingDoc))") }
            }
            // A user of the server is told a name is not served (a replicator reports db_not_found).
            #expect(try await pub.send(.get, "/nosuchdb", headers: basic("alice", "pw")).status == .notFound)
        }
    }

    /// Guessing is held back per client and name: after five wrong passwords in a minute the
    /// next tries are 429 with `Retry-After`, for users' Basic credentials and logins alike, and
    /// for the administrators' on the admin port; another name, or a client that guesses
    /// nothing, is not held up. Sign-ups are a rate.
    @Test func guessesAndSignUpsAreThrottled() async throws {
        var config = try ServerConfiguration(json: Self.twoBobs)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        config.adminUsers = ["root": "hunter2"]
        let server = try SetteeServer(configuration: config)
        // The throttle's clock stands still: how long a loaded machine takes to answer does not
        // change what is counted.
        server.passwordGuesses.frozenTime.store(Date().timeIntervalSince1970, ordering: .relaxed)
        try await withPorts(server) { pub, admin in
            // Wrong guesses until held back.
            var statuses: [UInt16] = []
            for i in 0 ..< 12 {
                let r = try await pub.send(.get, "/dbb", headers: basic("bob", "guess\(i)"))
                statuses.append(UInt16(r.status.code))
                if r.status == .tooManyRequests {
                    #expect(r.headers[.retryAfter] != nil)
                    break
                }
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == 401 } && statuses.last == 429, "\(statuses)")
            // The right password is held back too while the client waits; logins are the same throttle.
            #expect(try await pub.send(.get, "/dbb", headers: basic("bob", "b-secret")).status == .tooManyRequests)
            #expect(try await pub.send(.post, "/_session", json: #"{"name": "bob", "password": "b-secret"}"#).status == .tooManyRequests)
            // Another name from the same client is not held up by bob's (behind a proxy, the
            // guesses at one name do not lock the others out).
            #expect(try await pub.send(.get, "/dba", headers: basic("nobody", "x")).status == .unauthorized)
            // The administrators' password, on the admin port.
            statuses = []
            for i in 0 ..< 12 {
                let r = try await admin.send(.get, "/_all_dbs", headers: basic("root", "guess\(i)"))
                statuses.append(UInt16(r.status.code))
                if r.status == .tooManyRequests { break }
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == 401 } && statuses.last == 429, "\(statuses)")
            #expect(try await admin.send(.get, "/_all_dbs", headers: basic("root", "hunter2")).status == .tooManyRequests)
            // The throttle itself: another client is not held up; a success clears one's record.
            let throttle = ClientThrottle(perClient: 3, overall: 1000, window: 60)
            for _ in 0 ..< 3 { throttle.failed("10.0.0.1") }
            #expect(throws: CouchError.self) { try throttle.check("10.0.0.1") }
            #expect(throws: Never.self) { try throttle.check("10.0.0.2") }
            let later = Date().addingTimeInterval(2.5)
            #expect(throws: Never.self) { try throttle.check("10.0.0.1", now: later) }
            throttle.failed("10.0.0.1", now: later)
            #expect(throws: CouchError.self) { try throttle.check("10.0.0.1", now: later.addingTimeInterval(3.5)) }
            #expect(throws: Never.self) { try throttle.check("10.0.0.1", now: later.addingTimeInterval(4.5)) }
            throttle.succeeded("10.0.0.1")
            #expect(throws: Never.self) { try throttle.check("10.0.0.1", now: later.addingTimeInterval(1)) }
            let rate = ClientThrottle(perClient: 2, overall: 3, window: 60)
            try rate.admit("a")
            try rate.admit("a")
            #expect(throws: CouchError.self) { try rate.admit("a") }
            try rate.admit("b")
            #expect(throws: CouchError.self) { try rate.admit("c") }
            #expect(throws: Never.self) { try rate.admit("c", now: Date().addingTimeInterval(61)) }
            #expect(ServerRequestContext.clientKey(try SocketAddress(ipAddress: "2001:db8:1:2:3:4:5:6", port: 1))
                    == ServerRequestContext.clientKey(try SocketAddress(ipAddress: "2001:db8:1:2:ffff:4:5:7", port: 9)))
            #expect(ServerRequestContext.clientKey(try SocketAddress(ipAddress: "::ffff:10.1.2.3", port: 1)) == "10.1.2.3")
        }
    }

    /// A page of another site cannot write through the browser of a logged-in user: a
    /// cross-site form or `text/plain` POST, with Basic credentials or a session cookie, is 403
    /// on the public port and writes nothing; the same request from the server's own origin, or
    /// from a client that is not a browser, is served.
    @Test func crossSiteWritesAreRefusedOnThePublicPort() async throws {
        let server = try channelServer(Self.twoBobs)
        try await withPorts(server) { pub, admin in
            let bob = basic("bob", "b-secret")
            let forged: [HTTPFields] = [
                adding(adding(bob, .origin, "https://evil.example"), .contentType, "text/plain"),
                adding(adding(bob, HTTPField.Name("Sec-Fetch-Site")!, "cross-site"), .contentType, "text/plain"),
                adding(adding(bob, .origin, "null"), .contentType, "text/plain"),
            ]
            for headers in forged {
                let r = try await pub.send(.post, "/dbb", json: #"{"_id": "forged", "x": 1}"#, headers: headers)
                #expect(r.status == .forbidden, "\(headers): \(r.status) \(r.text)")
                let login = try await pub.send(.post, "/_session", json: "name=bob&password=b-secret",
                                               headers: adding(headers, .contentType, "application/x-www-form-urlencoded"))
                #expect(login.status == .forbidden && login.headers[.setCookie] == nil, "\(login.text)")
            }
            #expect(try await admin.send(.get, "/dbb/forged").status == .notFound)
            // Reading is not a write; the server's own origin and plain clients write.
            #expect(try await pub.send(.get, "/dbb", headers: adding(bob, .origin, "https://evil.example")).status == .ok)
            let own = try await pub.send(.post, "/dbb", json: #"{"_id": "mine"}"#, headers: adding(bob, .origin, "http://localhost"))
            #expect(own.status == .created, "\(own.text)")
            #expect(try await pub.send(.post, "/dbb", json: #"{"_id": "plain"}"#, headers: bob).status == .created)
        }
    }

    /// Every logged value has its control characters escaped: a document ID, a user name or
    /// a path with a line break writes one log line, never a forged second one.
    @Test func logLinesCannotBeForged() async throws {
        let lines = LogLines()
        var config = try ServerConfiguration(json: Self.twoBobs)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = ["HTTP", "CRUD", "Auth"]
        let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
        let server = try SetteeServer(configuration: config, logger: logger)
        try await withPorts(server) { pub, admin async throws in
            #expect(try await admin.send(.put, "/dbb/docidtest%0A2026-11-29%20FORGED%20line%1B%5B31m", json: "{}").status == .created)
            #expect(try await pub.send(.get, "/dbb", headers: basic("bob%0Ainjected", "x")).status == .unauthorized)
            #expect(try await pub.send(.get, "/dbb/%0Aforged%0D", headers: basic("bob", "b-secret")).status == .notFound)
        }
        let logged = lines.all
        #expect(logged.contains { $0.contains("docidtest\\u{a}2026-11-29 FORGED line\\u{1b}[31m") }, "\(logged)")
        for line in logged {
            #expect(!line.contains("\n") && !line.contains("\r") && !line.unicodeScalars.contains { $0.value == 0x1B }, "\(line.debugDescription)")
        }
    }
}

/// Log lines kept by ``CapturingLogHandler``. Thread-safe.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// A log handler that keeps every message it is given.
struct CapturingLogHandler: LogHandler {
    let lines: LogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(lines: LogLines) { self.lines = lines }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { lines.append(event.message.description) }
}
