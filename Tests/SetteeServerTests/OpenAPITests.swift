import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// Keeps `Formats/openapi.yaml` true to the server: every operation it lists is served and
/// answers only status codes it lists (on both ports), and every endpoint the code serves is in
/// it. Read without a YAML library, line by line, from the layout the file keeps (path keys at 2
/// spaces, method keys at 4, `responses:` at 6, status codes at 8).
@Suite struct OpenAPITests {
    /// A path template and a method (`COPY` is the YAML's `x-copy`).
    struct Operation: Hashable, Comparable, CustomStringConvertible, Sendable {
        var path: String
        var method: String
        var description: String { "\(method) \(path)" }
        static func < (a: Operation, b: Operation) -> Bool { (a.path, a.method) < (b.path, b.method) }
    }

    /// Every path and method `Sources/SetteeServer/HTTP` serves, written from the code
    /// (`CouchAPI.dispatch` and the handlers it calls, with the methods each one accepts). An
    /// endpoint added to the code and not here fails `undocumentedMethodsAre405`; one here and not in
    /// the YAML fails `theYAMLListsEveryEndpointTheCodeServes`.
    static let served: [String: [String]] = [
        "/": ["GET", "HEAD"],
        "/_up": ["GET", "HEAD"],
        "/_all_dbs": ["GET", "HEAD"],
        "/_uuids": ["GET", "HEAD"],
        "/_session": ["GET", "HEAD", "POST", "DELETE"],
        "/_replicate": ["POST"],
        "/_db_updates": ["GET", "HEAD"],
        "/_metrics": ["GET", "HEAD"],
        "/_users": ["GET", "HEAD", "PUT", "POST", "DELETE"],
        "/_users/_all_docs": ["GET", "HEAD", "POST"],
        "/_users/_find": ["POST"],
        "/_users/_explain": ["POST"],
        "/_users/_index": ["GET", "HEAD", "POST"],
        "/_users/_index/{ddoc}/json/{name}": ["DELETE"],
        "/_users/_bulk_docs": ["POST"],
        "/_users/{userdocid}": ["GET", "HEAD", "PUT", "DELETE"],
        "/{db}": ["GET", "HEAD", "PUT", "DELETE", "POST"],
        "/{db}/_all_docs": ["GET", "HEAD", "POST"],
        "/{db}/_design_docs": ["GET", "HEAD", "POST"],
        "/{db}/_local_docs": ["GET", "HEAD", "POST"],
        "/{db}/_design/{ddoc}/_view/{view}": ["GET", "HEAD", "POST"],
        "/{db}/_design/{ddoc}/_info": ["GET", "HEAD"],
        "/{db}/_design/{ddoc}/_show/{func}": ["GET", "HEAD", "POST"],
        "/{db}/_design/{ddoc}/_show/{func}/{docid}": ["GET", "HEAD", "POST"],
        "/{db}/_design/{ddoc}/_list/{func}/{view}": ["GET", "HEAD", "POST"],
        "/{db}/_design/{ddoc}/_update/{func}": ["POST", "PUT"],
        "/{db}/_design/{ddoc}/_update/{func}/{docid}": ["POST", "PUT"],
        "/{db}/_view_cleanup": ["POST"],
        "/{db}/_find": ["POST"],
        "/{db}/_explain": ["POST"],
        "/{db}/_partition/{partition}": ["GET", "HEAD"],
        "/{db}/_partition/{partition}/_all_docs": ["GET", "HEAD", "POST"],
        "/{db}/_partition/{partition}/_find": ["POST"],
        "/{db}/_partition/{partition}/_explain": ["POST"],
        "/{db}/_partition/{partition}/_design/{ddoc}/_view/{view}": ["GET", "HEAD", "POST"],
        "/{db}/_index": ["GET", "HEAD", "POST"],
        "/{db}/_index/{ddoc}/json/{name}": ["DELETE"],
        "/{db}/_index/_bulk_delete": ["POST"],
        "/{db}/_bulk_docs": ["POST"],
        "/{db}/_bulk_get": ["POST"],
        "/{db}/_changes": ["GET", "HEAD", "POST"],
        "/{db}/_revs_diff": ["POST"],
        "/{db}/_missing_revs": ["POST"],
        "/{db}/_ensure_full_commit": ["POST"],
        "/{db}/_revs_limit": ["GET", "HEAD", "PUT"],
        "/{db}/_security": ["GET", "HEAD", "PUT"],
        "/{db}/_purge": ["POST"],
        "/{db}/_compact": ["POST"],
        "/{db}/_resync": ["POST"],
        "/{db}/_local/{localid}": ["GET", "HEAD", "PUT", "DELETE"],
        "/{db}/{docid}": ["GET", "HEAD", "PUT", "POST", "DELETE", "COPY"],
        "/{db}/_design/{ddoc}": ["GET", "HEAD", "PUT", "POST", "DELETE", "COPY"],
        "/{db}/{docid}/{attname}": ["GET", "HEAD", "PUT", "DELETE"],
        "/{db}/_design/{ddoc}/{attname}": ["GET", "HEAD", "PUT", "DELETE"],
        "/{db}/_session": ["GET", "HEAD", "POST", "DELETE"],
        "/{db}/_session/{sessionid}": ["GET", "HEAD", "DELETE"],
        "/{db}/_user/": ["GET", "HEAD", "POST"],
        "/{db}/_user/{name}": ["GET", "HEAD", "PUT", "DELETE"],
        "/{db}/_role/": ["GET", "HEAD", "POST"],
        "/{db}/_role/{name}": ["GET", "HEAD", "PUT", "DELETE"],
        "/_admin/": ["GET", "HEAD"],
        "/_admin/assets/{asset}": ["GET", "HEAD"],
        "/_admin/db/{db}": ["GET", "HEAD"],
        "/_admin/db/{db}/row/{docid}": ["GET", "HEAD"],
        "/_admin/db/{db}/doc/{docid}": ["GET", "HEAD"],
        "/_admin/db/{db}/doc/{docid}/resolve": ["POST"],
        "/_admin/db/{db}/users": ["GET", "HEAD"],
        "/_admin/db/{db}/channels/{channel}": ["GET", "HEAD"],
        "/_admin/db/{db}/sync": ["GET", "HEAD", "POST"],
        "/_admin/db/{db}/query": ["GET", "HEAD", "POST"],
    ]

    /// CouchDB and Sync Gateway endpoints the server does not serve: each must be a routing miss.
    /// One that starts being served belongs in `served` and in the YAML.
    static let notServed = [
        "/_active_tasks", "/_scheduler/jobs", "/_dbs_info", "/_membership",
        "/_node/_local/_config", "/_config", "/_global_changes", "/_utils", "/_expvar",
        "/db/_shards", "/db/_purged_infos_limit", "/db/_online", "/db/_offline",
        "/db/_raw/doc1", "/db/_dump/x", "/db/_config", "/db/_blipsync", "/db/_bulk_docs_by_channel",
    ]

    static let methods = ["get", "put", "post", "delete", "head", "options", "patch", "trace", "x-copy"]

    static var yamlURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Formats/openapi.yaml")
    }

    /// The operations of the YAML's `paths:` block and the status codes each lists.
    static func documented(_ text: String) -> [Operation: Set<Int>] {
        var out: [Operation: Set<Int>] = [:]
        var inPaths = false
        var path: String?
        var operation: Operation?
        var inResponses = false
        var blockScalarIndent: Int?   // inside a `|` or `>` text: lines deeper than its key
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(raw)
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let indent = line.prefix { $0 == " " }.count
            if let keyIndent = blockScalarIndent {
                if indent > keyIndent { continue }
                blockScalarIndent = nil
            }
            guard !trimmed.hasPrefix("- "), let colon = trimmed.firstIndex(of: ":") else { continue }
            var key = String(trimmed[..<colon])
            if key.count >= 2, let q = key.first, q == "'" || q == "\"", key.last == q { key = String(key.dropFirst().dropLast()) }
            let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("|") || value.hasPrefix(">") { blockScalarIndent = indent }
            if indent == 0 {
                inPaths = key == "paths"
                path = nil
                operation = nil
                continue
            }
            guard inPaths else { continue }
            switch indent {
            case 2:
                path = key
                operation = nil
            case 4:
                inResponses = false
                if let path, methods.contains(key) {
                    let op = Operation(path: path, method: key == "x-copy" ? "COPY" : key.uppercased())
                    out[op] = out[op] ?? []
                    operation = op
                } else {
                    operation = nil
                }
            case 6:
                inResponses = key == "responses"
            case 8:
                if inResponses, let operation, key.count == 3, let code = Int(key) { out[operation]?.insert(code) }
            default:
                break
            }
        }
        return out
    }

    static func loadDocumented() throws -> [Operation: Set<Int>] {
        try documented(String(contentsOf: yamlURL, encoding: .utf8))
    }

    @Test func theReaderFindsTheYAMLsOperations() throws {
        let documented = try Self.loadDocumented()
        #expect(documented.count >= 70, "\(documented.count) operations read from \(Self.yamlURL.path)")
        #expect(documented[Operation(path: "/{db}/{docid}", method: "PUT")]?.contains(409) == true)
        #expect(documented[Operation(path: "/{db}/{docid}", method: "COPY")] != nil)
        for (op, codes) in documented {
            #expect(!codes.isEmpty, "\(op) lists no status code")
        }
    }

    @Test func theYAMLListsEveryEndpointTheCodeServes() throws {
        let documented = Set(try Self.loadDocumented().keys)
        let served = Set(Self.served.flatMap { path, methods in methods.map { Operation(path: path, method: $0) } })
        for op in served.subtracting(documented).sorted() {
            Issue.record("served but not in openapi.yaml: \(op)")
        }
        for op in documented.subtracting(served).sorted() {
            Issue.record("in openapi.yaml but not in this test's list of what the code serves: \(op)")
        }
    }

    // MARK: - Requests

    /// What one server holds before an operation is tried: a user, a role, a document and a
    /// design document with an attachment each, a local document and a session.
    struct Fixture: Sendable {
        var rev: String
        var ddocRev: String
        var session: String
    }

    static func makeFixture(_ server: SetteeServer) async throws -> Fixture {
        try await server.withClient(admin: true) { a async throws in
            let att = #""_attachments":{"att.txt":{"content_type":"text/plain","data":"aGVsbG8="}}"#
            let doc = try await a.send(.put, "/db/doc1", json: #"{"v":1,\#(att)}"#)
            let views = #""views":{"v":{"map":"function (doc) { emit(doc.v, null); }","reduce":"_count"}},"#
                + #""shows":{"f":"function (doc, req) { return 'shown'; }"},"lists":{"f":"function (head, req) { return 'listed'; }"},"#
                + #""updates":{"f":"function (doc, req) { return [null, 'updated']; }"}"#
            let ddoc = try await a.send(.put, "/db/_design/app", json: #"{"language":"javascript",\#(views),\#(att)}"#)
            try #require(try await a.send(.put, "/db/_local/cp", json: #"{"x":1}"#).status == .created)
            try #require(try await a.send(.put, "/db/_role/moderator", json: #"{"admin_channels":["m"]}"#).status == .created)
            let session = try await a.send(.post, "/db/_session", json: #"{"name":"alice"}"#)
            return Fixture(rev: try #require(doc["rev"]?.stringValue, "\(doc.text)"),
                           ddocRev: try #require(ddoc["rev"]?.stringValue, "\(ddoc.text)"),
                           session: try #require(session["session_id"]?.stringValue, "\(session.text)"))
        }
    }

    /// The path with its parameters filled in with values the fixture holds.
    static func uri(_ template: String, _ f: Fixture) -> String {
        template
            .replacingOccurrences(of: "{db}", with: "db")
            .replacingOccurrences(of: "{docid}", with: "doc1")
            .replacingOccurrences(of: "{ddoc}", with: "app")
            .replacingOccurrences(of: "{attname}", with: "att.txt")
            .replacingOccurrences(of: "{localid}", with: "cp")
            .replacingOccurrences(of: "{userdocid}", with: "org.couchdb.user:alice")
            .replacingOccurrences(of: "{view}", with: "v")
            .replacingOccurrences(of: "{func}", with: "f")
            .replacingOccurrences(of: "{sessionid}", with: f.session)
            .replacingOccurrences(of: "{asset}", with: "admin.css")
            .replacingOccurrences(of: "{channel}", with: "red")
            .replacingOccurrences(of: "{partition}", with: "p1")
            .replacingOccurrences(of: "{name}", with: template.contains("/_role/") ? "moderator" : "alice")
    }

    /// A plausible request for the operation: its query, headers and body.
    static func request(_ op: Operation, _ f: Fixture) -> (query: String, headers: HTTPFields, body: String?) {
        let rev = op.path.contains("{ddoc}") ? f.ddocRev : f.rev
        let json: HTTPFields = [.contentType: "application/json"]
        switch (op.method, op.path) {
        case ("POST", "/_session"), ("POST", "/{db}/_session"): return ("", json, #"{"name":"alice","password":"pw"}"#)
        case ("POST", "/{db}"): return ("", json, #"{"made":"by post"}"#)
        case ("POST", "/{db}/_all_docs"), ("POST", "/{db}/_design_docs"): return ("", json, #"{"keys":["doc1","nope"]}"#)
        case ("POST", "/{db}/_find"), ("POST", "/{db}/_explain"): return ("", json, #"{"selector":{"v":{"$gt":0}},"limit":5}"#)
        case ("POST", "/{db}/_index"): return ("", json, #"{"index":{"fields":["v"]},"ddoc":"idx","name":"v"}"#)
        case ("POST", "/{db}/_index/_bulk_delete"): return ("", json, #"{"docids":["_design/nothing"],"w":2}"#)
        case ("POST", "/{db}/_local_docs"): return ("", json, #"{"keys":["_local/cp","_local/nope"]}"#)
        case ("POST", "/{db}/_design/{ddoc}/_view/{view}"): return ("?group=true", json, #"{"keys":[1,2]}"#)
        case ("GET", "/{db}/_design/{ddoc}/_view/{view}"): return ("?reduce=false&include_docs=true&update_seq=true", [:], nil)
        case ("POST", "/{db}/_view_cleanup"): return ("", json, "{}")
        case ("POST", "/{db}/_bulk_docs"): return ("", json, #"{"docs":[{"_id":"bulk1","v":1}]}"#)
        case ("POST", "/{db}/_bulk_get"): return ("?revs=true", json, #"{"docs":[{"id":"doc1"},{"id":"nope","rev":"1-x"}]}"#)
        case ("POST", "/{db}/_changes"): return ("?style=all_docs", json, #"{"doc_ids":["doc1"]}"#)
        case ("POST", "/{db}/_revs_diff"), ("POST", "/{db}/_missing_revs"): return ("", json, #"{"doc1":["1-x","2-y"]}"#)
        case ("POST", "/{db}/_purge"): return ("", json, #"{"nothing":["1-a"]}"#)
        case ("PUT", "/{db}/_revs_limit"): return ("", json, "1000")
        case ("PUT", "/{db}/_security"): return ("", json, "{}")
        case ("PUT", "/{db}/_local/{localid}"): return ("", json, #"{"_rev":"0-1","x":2}"#)
        case ("DELETE", "/{db}/_local/{localid}"): return ("?rev=0-1", [:], nil)
        case ("PUT", "/{db}/{docid}"), ("PUT", "/{db}/_design/{ddoc}"):
            return ("", json, #"{"_rev":"\#(rev)","v":2,"_attachments":{"att.txt":{"stub":true}}}"#)
        case ("DELETE", "/{db}/{docid}"), ("DELETE", "/{db}/_design/{ddoc}"): return ("?rev=\(rev)", [:], nil)
        case ("COPY", _): return ("", [HTTPField.Name("Destination")!: "copy1"], nil)
        case ("PUT", "/{db}/{docid}/{attname}"), ("PUT", "/{db}/_design/{ddoc}/{attname}"):
            return ("?rev=\(rev)", [.contentType: "text/plain"], "hi")
        case ("DELETE", "/{db}/{docid}/{attname}"), ("DELETE", "/{db}/_design/{ddoc}/{attname}"): return ("?rev=\(rev)", [:], nil)
        case ("POST", "/{db}/_user/"): return ("", json, #"{"name":"bob","password":"pw2","admin_channels":["b"]}"#)
        case ("PUT", "/{db}/_user/{name}"): return ("", json, #"{"admin_channels":["x"]}"#)
        case ("POST", "/{db}/_role/"): return ("", json, #"{"name":"editor","admin_channels":["e"]}"#)
        case ("PUT", "/{db}/_role/{name}"): return ("", json, #"{"admin_channels":["y"]}"#)
        case ("GET", "/_uuids"): return ("?count=2", [:], nil)
        case ("POST", "/_users"): return ("", json, #"{"_id":"org.couchdb.user:zed","name":"zed","password":"pw","roles":[],"type":"user"}"#)
        case ("PUT", "/_users/{userdocid}"): return ("", json, #"{"name":"alice","password":"pw9","roles":[],"type":"user"}"#)
        case ("DELETE", "/_users/{userdocid}"): return ("?rev=1-0123", [:], nil)
        case ("GET", "/_users/_all_docs"): return ("?include_docs=true", [:], nil)
        case ("POST", "/_users/_all_docs"): return ("", json, #"{"keys":["org.couchdb.user:alice"]}"#)
        case ("POST", "/_users/_find"), ("POST", "/_users/_explain"): return ("", json, #"{"selector":{"name":"alice"}}"#)
        case ("POST", "/_users/_index"): return ("", json, #"{"index":{"fields":["name"]},"ddoc":"app","name":"alice"}"#)
        case ("POST", "/_users/_bulk_docs"): return ("", json, #"{"docs":[{"_id":"org.couchdb.user:yan","name":"yan","password":"pw","roles":[],"type":"user"}]}"#)
        case ("GET", "/{db}/_all_docs"): return ("?include_docs=true&update_seq=true", [:], nil)
        case ("GET", "/{db}/_changes"): return ("?include_docs=true&style=all_docs", [:], nil)
        default: return ("", [:], nil)
        }
    }

    /// Why a response says the server does not serve the operation, if it does.
    static func routingMiss(_ r: TestResponse) -> String? {
        let body = (try? r.json)?.objectValue
        let error = body?["error"]?.stringValue, reason = body?["reason"]?.stringValue
        if r.status == .methodNotAllowed { return "405 \(error ?? "")" }
        if r.status == .notFound && reason == "Database does not exist." { return "404 Database does not exist." }
        if error == "illegal_database_name" { return "illegal_database_name" }
        if reason == "Only reserved document ids may start with underscore." { return "a reserved document ID" }
        return nil
    }

    /// The problems with one response to `op`: a routing miss, a status the YAML does not list,
    /// an error body that is not `{"error", "reason"}`.
    static func problems(_ op: Operation, port: String, _ r: TestResponse, listed: Set<Int>) -> [String] {
        var out: [String] = []
        let what = "\(op) on the \(port) port: \(r.status.code) \(r.text.prefix(200))"
        if let miss = routingMiss(r) { out.append("not served (\(miss)): \(what)") }
        if !listed.contains(r.status.code) { out.append("status not listed in openapi.yaml \(listed.sorted()): \(what)") }
        if r.status.code >= 400 && op.method != "HEAD" {
            let keys = (try? r.json)?.objectValue.map { Set($0.keys) }
            let typed = (try? r.json)?.objectValue.map { $0["error"]?.stringValue != nil && $0["reason"]?.stringValue != nil } ?? false
            if keys != ["error", "reason"] || !typed { out.append("error body is not {error, reason}: \(what)") }
        }
        return out
    }

    @Test func everyDocumentedOperationIsServedAndAnswersAListedStatus() async throws {
        let documented = try Self.loadDocumented()
        // One fresh server per operation (operations change what the next would find), eight
        // at a time; the public port first (anonymous, as GUEST), then the admin port.
        let operations = documented.keys.sorted()
        let problems = try await withThrowingTaskGroup(of: [String].self) { group in
            var next = 0
            var all: [String] = []
            func add() {
                guard next < operations.count else { return }
                let op = operations[next]
                let listed = documented[op] ?? []
                next += 1
                group.addTask { try await Self.exercise(op, listed: listed) }
            }
            for _ in 0 ..< 8 { add() }
            while let found = try await group.next() {
                all += found
                add()
            }
            return all
        }
        for p in problems.sorted() { Issue.record(Comment(rawValue: p)) }
    }

    static func exercise(_ op: Operation, listed: Set<Int>) async throws -> [String] {
        let server = try makeServer(users: ["alice": .init(password: "pw")])
        defer { try? server.close() }
        let fixture = try await makeFixture(server)
        let (query, headers, body) = request(op, fixture)
        let uri = uri(op.path, fixture) + query
        let method = HTTPRequest.Method(op.method)!
        var out: [String] = []
        for (port, admin) in [("public", false), ("admin", true)] {
            let r = try await server.withClient(admin: admin) { c async throws in
                try await c.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
            }
            out += problems(op, port: port, r, listed: listed)
        }
        if op.path == "/{db}/_compact" {
            // Let the compaction the admin port started finish before the database closes.
            try await Task.sleep(for: .milliseconds(200))
        }
        return out
    }

    /// The methods the YAML does not list for a path are 405 on the admin port (where no access
    /// check comes first): a method added to an endpoint in the code fails here until the YAML and
    /// `served` list it.
    @Test func undocumentedMethodsAre405() async throws {
        let documented = try Self.loadDocumented()
        let paths = Set(documented.keys.map(\.path)).sorted()
        let probe = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "COPY"]
        let server = try makeServer(users: ["alice": .init(password: "pw")])
        defer { try? server.close() }
        let fixture = try await Self.makeFixture(server)
        var problems: [String] = []
        for path in paths {
            for method in probe where documented[Operation(path: path, method: method)] == nil {
                let uri = Self.uri(path, fixture)
                let r = try await server.withClient(admin: true) { a async throws in
                    try await a.execute(uri: uri, method: HTTPRequest.Method(method)!)
                }
                if r.status != .methodNotAllowed || r["error"] != "method_not_allowed" || r.headers[.allow] == nil {
                    problems.append("\(method) \(path) is not in openapi.yaml but answers \(r.status.code) \(r.text.prefix(200))")
                }
            }
        }
        for p in problems { Issue.record(Comment(rawValue: p)) }
    }

    /// CouchDB and Sync Gateway endpoints the server does not serve are routing misses.
    @Test func endpointsNotServedAreRoutingMisses() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            for path in Self.notServed {
                for method in [HTTPRequest.Method.get, .post] {
                    let r = try await a.send(method, path, json: method == .post ? "{}" : nil)
                    #expect(Self.routingMiss(r) != nil, "\(method) \(path) answers \(r.status.code) \(r.text.prefix(200)): document it")
                }
            }
        }
    }
}
