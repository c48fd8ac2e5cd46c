import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// What a Mango client written against CouchDB 3.4 sends, answered as CouchDB 3.4 answers it
/// (`src/mango/src/mango_opts.erl`, `mango_httpd.erl`, `src/docs/src/api/database/find.rst`),
/// on live servers on loopback. Each test names CouchDB's answer it checks.
@Suite struct MangoAsCouchDBTests {
    static let config = redChannelConfig

    /// Ten tasks, numbered 0…9, red when even.
    func seed(_ admin: any TestClientProtocol) async throws {
        for i in 0 ..< 10 {
            try await put(admin, "task\(i)", #"{"type": "task", "n": \#(i), "color": "\#(i % 2 == 0 ? "red" : "blue")"}"#)
        }
    }

    func ids(_ r: TestResponse) -> [String] { (r["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } }

    /// CouchDB's `validate_idx_create` takes `w` (every client library sends the write quorum),
    /// a positive integer: 400 `invalid_pos_integer` otherwise; an unknown member is 400
    /// `invalid_key` "Invalid key … for this request.".
    @Test func indexCreationTakesTheWriteQuorum() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            let made = try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "name": "by-n", "w": 3}"#)
            #expect(made.status == .ok && made["result"] == "created", "\(made.text)")
            for w in ["0", "-1", "\"3\"", "1.5"] {
                let r = try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "w": \#(w)}"#)
                #expect(r.status == .badRequest && r["error"] == "invalid_pos_integer", "w \(w): \(r.text)")
                #expect(r["reason"]?.stringValue?.hasSuffix("is not an integer greater than zero") == true, "\(r.text)")
            }
            let unknown = try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "q": 8}"#)
            #expect(unknown.status == .badRequest && unknown["error"] == "invalid_key", "\(unknown.text)")
            #expect(unknown["reason"] == "Invalid key q for this request.")
        }
    }

    /// CouchDB's `validate_use_index`: `null` and `[]` are no index; `"ddoc/name"` and
    /// `"_design/ddoc/name"` name an index as `["ddoc", "name"]` does; anything else is 400
    /// `invalid_index_name`.
    @Test func useIndexTakesEveryFormCouchDBTakes() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            for path in ["/db/_find", "/db/_explain"] {
                let r = try await admin.send(.post, path, json: #"{"selector": {"n": {"$gt": 7}}, "use_index": null}"#)
                #expect(r.status == .ok, "\(path): \(r.text)")
                // No index was named, so no "was not used" in the warning.
                #expect(r["warning"]?.stringValue?.contains("was not used") != true, "\(r.text)")
            }
            let partial = #"{"index": {"fields": ["n"], "partial_filter_selector": {"color": "red"}}, "ddoc": "p", "name": "reds"}"#
            #expect(try await admin.send(.post, "/db/_index", json: partial)["result"] == "created")
            // A partial index named restricts the answer to what it holds, however it is named.
            for named in [#""p/reds""#, #""_design/p/reds""#, #"["p", "reds"]"#, #"["_design/p", "reds"]"#] {
                let r = try await admin.send(.post, "/db/_find", json: #"{"selector": {"n": {"$gt": 3}}, "use_index": \#(named)}"#)
                #expect(r.status == .ok && Set(ids(r)) == ["task4", "task6", "task8"], "\(named): \(r.text)")
            }
            for bad in [#""a/b/c""#, #""_design/a/b/c""#, #"["a", "b", "c"]"#, #"[1]"#, "3", #"{"ddoc": "p"}"#] {
                let r = try await admin.send(.post, "/db/_find", json: #"{"selector": {}, "use_index": \#(bad)}"#)
                #expect(r.status == .badRequest && r["error"] == "invalid_index_name", "\(bad): \(r.text)")
            }
        }
    }

    /// CouchDB's `GET /` has `features` (what clients read to choose what to use) and the
    /// server's `uuid`, 32 hex digits that stay the same while the server's own data does.
    @Test func theWelcomeHasFeaturesAndAStableUUID() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("welcome-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = #"{"replicator": "\#(directory)", "databases": {"db": {"server": "walrus:"}}}"#
        func welcome() async throws -> [JSONValue] {
            let server = try channelServer(config)
            defer { try? server.close() }
            return try await withPorts(server) { pub, admin in
                var seen: [JSONValue] = []
                for c in [pub, admin, pub] {
                    let r = try await c.send(.get, "/")
                    #expect(r.status == .ok && r["couchdb"] == "Welcome", "\(r.text)")
                    #expect(r["features"] == ["partitioned"], "\(r.text)")
                    seen.append(try #require(r["uuid"]))
                }
                return seen
            }
        }
        let first = try await welcome()
        let uuid = try #require(first[0].stringValue)
        #expect(uuid.count == 32 && uuid.allSatisfy(\.isHexDigit) && uuid == uuid.lowercased(), "\(uuid)")
        #expect(Set(first).count == 1, "\(first)")
        // After a restart over the same directory: the same server.
        #expect(try await welcome()[0] == first[0])
        // Another server's differs.
        let other = try channelServer(Self.config)
        defer { try? other.close() }
        #expect(other.uuid != uuid)
    }

    /// `GET /{db}/_index?limit=&skip=` pages the whole list (`_all_docs` first), `total_rows`
    /// counting every index; `limit` under 1 or `skip` under 0 is `invalid_list_index_params`
    /// (CouchDB answers it with a 500; here a 400: the request is what is wrong).
    @Test func theIndexListPages() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            for name in ["a", "b", "c"] {
                #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["\#(name)"]}, "ddoc": "d", "name": "\#(name)"}"#)["result"] == "created")
            }
            func names(_ query: String) async throws -> (Int?, [String]) {
                let r = try await admin.send(.get, "/db/_index" + query)
                #expect(r.status == .ok, "\(query): \(r.text)")
                return (r["total_rows"]?.intValue, (r["indexes"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue })
            }
            #expect(try await names("") == (4, ["_all_docs", "a", "b", "c"]))
            #expect(try await names("?limit=2") == (4, ["_all_docs", "a"]))
            #expect(try await names("?skip=1&limit=2") == (4, ["a", "b"]))
            #expect(try await names("?skip=3") == (4, ["c"]))
            #expect(try await names("?skip=10") == (4, []))
            for bad in ["?limit=0", "?skip=-1", "?limit=x", "?skip=1.5"] {
                let r = try await admin.send(.get, "/db/_index" + bad)
                #expect(r.status == .badRequest && r["error"] == "invalid_list_index_params", "\(bad): \(r.text)")
            }
        }
    }

    /// Paths under `_index` that are not `{ddoc}/json/{name}` or `_bulk_delete` are 404
    /// `not_found` whatever the method (CouchDB's last `handle_index_req` clause); an index path
    /// with another method is 405; `_bulk_delete` removes each named design document's indexes,
    /// answering `success` and `fail` in the reverse of the request's order, as CouchDB does.
    @Test func indexPathsAndBulkDeleteAnswerAsCouchDB() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            for (ddoc, name) in [("x", "one"), ("y", "two"), ("y", "three"), ("z", "four")] {
                #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["\#(name)"]}, "ddoc": "\#(ddoc)", "name": "\#(name)"}"#)["result"] == "created")
            }
            for (method, path) in [(HTTPRequest.Method.get, "/db/_index/a"), (.delete, "/db/_index/a"), (.delete, "/db/_index/a/b"),
                                   (.get, "/db/_index/_design/x"), (.delete, "/db/_index/x/json/one/more"), (.delete, "/db/_index/x/text/one")] {
                let r = try await admin.send(method, path)
                #expect(r.status == .notFound && r["error"] == "not_found", "\(method) \(path): \(r.text)")
            }
            #expect(try await admin.send(.get, "/db/_index/x/json/one").status == .methodNotAllowed)
            #expect(try await admin.send(.get, "/db/_index/_bulk_delete").status == .methodNotAllowed)
            // Only an administrator deletes, as only one creates.
            let forbidden = try await pub.send(.post, "/db/_index/_bulk_delete", json: #"{"docids": ["x"]}"#, headers: basic("alice", "pw"))
            #expect(forbidden.status == .forbidden, "\(forbidden.text)")
            for (bad, error) in [(#"{"docids": "x"}"#, "invalid_bulk_docs"), (#"{}"#, "invalid_bulk_docs"), (#"{"docids": [3]}"#, "invalid_index_name"),
                                 (#"{"docids": ["x"], "w": 0}"#, "invalid_pos_integer"), (#"{"docids": ["x"], "all": true}"#, "invalid_key")] {
                let r = try await admin.send(.post, "/db/_index/_bulk_delete", json: bad)
                #expect(r.status == .badRequest && r["error"]?.stringValue == error, "\(bad): \(r.text)")
            }
            let deleted = try await admin.send(.post, "/db/_index/_bulk_delete", json: #"{"docids": ["_design/x", "nothing", "y"], "w": 3}"#)
            #expect(deleted.status == .ok, "\(deleted.text)")
            #expect(deleted["success"] == [["id": "_design/y", "ok": true], ["id": "_design/x", "ok": true]], "\(deleted.text)")
            #expect(deleted["fail"] == [["id": "_design/nothing", "error": "not_found"]], "\(deleted.text)")
            let left = try await admin.send(.get, "/db/_index")
            #expect(left["indexes"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["_all_docs", "four"], "\(left.text)")
            #expect(try await admin.send(.get, "/db/_design/x").status == .notFound)
            #expect(try await admin.send(.get, "/db/_design/y").status == .notFound)
        }
    }

    /// A request whose `Content-Type` is sent twice with the same value is taken as CouchDB takes
    /// it; two that differ are 400, not a guess.
    @Test func aRepeatedContentTypeIsOne() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            var twice = HTTPFields()
            twice.append(HTTPField(name: .contentType, value: "application/json"))
            twice.append(HTTPField(name: .contentType, value: "application/json"))
            let saved = try await admin.send(.put, "/db/doc", json: #"{"a": 1}"#, headers: twice)
            #expect(saved.status == .created, "\(saved.text)")
            let found = try await admin.send(.post, "/db/_find", json: #"{"selector": {"a": 1}}"#, headers: twice)
            #expect(found.status == .ok && found["docs"]?.arrayValue?.count == 1, "\(found.text)")
            var differing = HTTPFields()
            differing.append(HTTPField(name: .contentType, value: "application/json"))
            differing.append(HTTPField(name: .contentType, value: "text/html"))
            let refused = try await admin.send(.put, "/db/other", json: #"{"a": 1}"#, headers: differing)
            #expect(refused.status == .badRequest, "\(refused.text)")
            #expect(try await admin.send(.get, "/db/other").status == .notFound)
        }
    }

    /// Selector semantics CouchDB 3.4 has (checked against CouchDB 3.4.3): a selector that is
    /// only an empty `$or`, `$and` or `$nor` matches nothing, while nested ones match everything
    /// (its matcher's rule); a key repeated in the selector keeps its last value; a field part
    /// that is a number also names an array's element (`favorites.3`); an unknown `$type`
    /// matches nothing.
    @Test func selectorsMatchAsCouchDBMatches() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await put(admin, "a", #"{"x": 1, "favorites": ["x", "y", "z", "w"], "m": {"3": "w"}}"#)
            try await put(admin, "b", #"{"x": 2, "favorites": "q"}"#)
            func found(_ selector: String) async throws -> Set<String> {
                let r = try await admin.send(.post, "/db/_find", json: #"{"selector": \#(selector)}"#)
                #expect(r.status == .ok, "\(selector): \(r.text)")
                return Set(ids(r))
            }
            for empty in [#"{"$or": []}"#, #"{"$and": []}"#, #"{"$nor": []}"#] {
                let r = try await admin.send(.post, "/db/_find", json: #"{"selector": \#(empty), "execution_stats": true}"#)
                #expect(r.status == .ok && ids(r).isEmpty && r["bookmark"] == "nil", "\(empty): \(r.text)")
                #expect(r["execution_stats"]?["results_returned"] == 0)
            }
            #expect(try await found(#"{"$and": [{"$or": []}]}"#) == ["a", "b"])
            #expect(try await found(#"{"$or": [{"x": 1}, {"$or": []}]}"#) == ["a", "b"])
            #expect(try await found(#"{"x": 1, "$or": []}"#) == ["a"])
            #expect(try await found(#"{"x": 1, "x": 2}"#) == ["b"])
            #expect(try await found(#"{"x": {"$eq": 2, "$eq": 1}}"#) == ["a"])
            #expect(try await found(#"{"favorites.3": "w"}"#) == ["a"])
            #expect(try await found(#"{"favorites.0": {"$exists": true}}"#) == ["a"])
            #expect(try await found(#"{"favorites.4": {"$exists": true}}"#).isEmpty)
            #expect(try await found(#"{"m.3": "w"}"#) == ["a"])
            #expect(try await found(#"{"x": {"$type": "blob"}}"#).isEmpty)
            #expect(try await found(#"{"x": {"$not": {"$type": "blob"}}}"#) == ["a", "b"])
            // A duplicate key anywhere else in a document is still refused.
            #expect(try await admin.send(.put, "/db/c", json: #"{"x": 1, "x": 2}"#).status == .badRequest)
        }
    }

    /// The bookmark of an empty page is the one the request gave (CouchDB's), so a client that
    /// pages until no documents come keeps a valid bookmark; without one it is `"nil"`.
    @Test func anEmptyPageKeepsItsBookmark() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            var bookmark: String?
            var seen: [String] = []
            for _ in 0 ..< 10 {
                let page = #"{"selector": {"type": "task"}, "limit": 4"# + (bookmark.map { #", "bookmark": "\#($0)""# } ?? "") + "}"
                let r = try await admin.send(.post, "/db/_find", json: page)
                #expect(r.status == .ok, "\(r.text)")
                let next = try #require(r["bookmark"]?.stringValue)
                if ids(r).isEmpty {
                    #expect(next == bookmark, "\(r.text)")
                    break
                }
                seen += ids(r)
                bookmark = next
            }
            #expect(seen.count == 10 && Set(seen).count == 10, "\(seen)")
            let none = try await admin.send(.post, "/db/_find", json: #"{"selector": {"type": "nothing"}}"#)
            #expect(none["bookmark"] == "nil")
        }
    }

    /// A `text` or `nouveau` index asks for a search service: 503 "required index service
    /// unavailable", as a CouchDB without one answers; an unknown type is 400 `invalid_index`.
    @Test func searchIndexesAnswerAsCouchDBWithoutSearch() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            for type in ["text", "nouveau"] {
                let r = try await admin.send(.post, "/db/_index", json: #"{"index": {}, "type": "\#(type)"}"#)
                #expect(r.status == .serviceUnavailable && r["error"] == "required index service unavailable", "\(r.text)")
                #expect(r["reason"]?.stringValue == type)
            }
            let bogus = try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["x"]}, "type": "bogus"}"#)
            #expect(bogus.status == .badRequest && bogus["error"] == "invalid_index" && bogus["reason"] == "Invalid type for index: bogus")
            #expect(try await admin.send(.get, "/db/_index")["total_rows"] == 1)
        }
    }

    /// `execution_stats` as CouchDB's: the keys the query read (index entries, or every
    /// document's ID without an index), the documents it read, what it returned; a user's
    /// count only what it may read (its query reads its channels and nothing else).
    @Test func executionStatsCountWhatTheQueryRead() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            func stats(_ c: any TestClientProtocol, _ body: String, _ h: HTTPFields = [:]) async throws -> (Int?, Int?, Int?, Int?) {
                let r = try await c.send(.post, "/db/_find", json: body, headers: h)
                #expect(r.status == .ok, "\(r.text)")
                let s = r["execution_stats"]
                return (s?["total_keys_examined"]?.intValue, s?["total_docs_examined"]?.intValue,
                        s?["total_quorum_docs_examined"]?.intValue, s?["results_returned"]?.intValue)
            }
            // No index: every document read.
            #expect(try await stats(admin, #"{"selector": {"n": {"$gte": 7}}, "execution_stats": true}"#) == (10, 10, 0, 3))
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "name": "n", "ddoc": "n"}"#)["result"] == "created")
            // The index: its entries in range, and their documents.
            #expect(try await stats(admin, #"{"selector": {"n": {"$gte": 7}}, "execution_stats": true}"#) == (3, 3, 0, 3))
            #expect(try await stats(admin, #"{"selector": {"n": {"$gte": 7}, "color": "red"}, "execution_stats": true}"#) == (3, 3, 0, 1))
            // Alice reads red (n even): her entries only, with the index and without one.
            let alice = basic("alice", "pw")
            #expect(try await stats(pub, #"{"selector": {"n": {"$gte": 3}}, "execution_stats": true}"#, alice) == (3, 3, 0, 3))
            #expect(try await stats(pub, #"{"selector": {"type": "task"}, "execution_stats": true}"#, alice) == (5, 5, 0, 5))
            // Without execution_stats there are none.
            #expect(try await admin.send(.post, "/db/_find", json: #"{"selector": {"n": 1}}"#)["execution_stats"] == nil)
        }
    }

    /// The index CouchDB 3.4 reads, and `_explain` as it answers (each expectation is CouchDB
    /// 3.4.3's answer to the same requests over the same indexes): usable indexes by the fields
    /// the selector requires and the sort, then the most leading ranged fields, the fewest
    /// fields, the name; candidates with their reasons and rankings; `mrargs`' keys.
    @Test func theIndexReadIsTheOneCouchDBReads() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await put(admin, "a", #"{"x": 1, "y": "b"}"#)
            try await put(admin, "b", #"{"x": 2, "y": "c"}"#)
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["x"]}, "ddoc": "dx", "name": "x"}"#)["result"] == "created")
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["x", "y"]}, "ddoc": "dxy", "name": "xy"}"#)["result"] == "created")
            func explain(_ body: String) async throws -> TestResponse {
                let r = try await admin.send(.post, "/db/_explain", json: body)
                #expect(r.status == .ok, "\(body): \(r.text)")
                return r
            }
            func candidates(_ r: TestResponse) -> [String: [String: JSONValue]] {
                var out: [String: [String: JSONValue]] = [:]
                for c in r["index_candidates"]?.arrayValue ?? [] {
                    if let name = c["index"]?["name"]?.stringValue, case .object(let a)? = c["analysis"] { out[name] = a }
                }
                return out
            }
            let one = try await explain(#"{"selector": {"x": {"$gt": 0}}, "fields": ["x", "_id"]}"#)
            #expect(one["index"]?["name"] == "x" && one["covering"] == true, "\(one.text)")
            #expect(candidates(one) == ["xy": ["usable": false, "reasons": [["name": "field_mismatch"]], "ranking": 2, "covering": true],
                                        "_all_docs": ["usable": true, "reasons": [["name": "unfavored_type"]], "ranking": 1, "covering": .null]], "\(one.text)")
            #expect(one["selector_hints"] == [["type": "json", "indexable_fields": ["x"], "unindexable_fields": []]])
            #expect(one["mrargs"]?["include_docs"] == false && one["mrargs"]?["start_key"] == [0] && one["mrargs"]?["end_key"] == ["<MAX>"])
            #expect(one["plan"]?.stringValue?.contains("SCAN INDEX _design/dx/x") == true, "\(one.text)")

            let two = try await explain(#"{"selector": {"x": {"$gt": 1, "$lte": 5}, "y": {"$eq": 3}}, "sort": [{"x": "desc"}]}"#)
            #expect(two["index"]?["name"] == "xy", "\(two.text)")
            #expect(two["mrargs"]?["start_key"] == [5, 3, "<MAX>"] && two["mrargs"]?["end_key"] == [1, 3] && two["mrargs"]?["direction"] == "rev", "\(two.text)")

            let three = try await explain(#"{"selector": {"x": 3, "y": {"$gt": "a"}}}"#)
            #expect(three["index"]?["name"] == "xy" && three["mrargs"]?["start_key"] == [3, "a"] && three["mrargs"]?["end_key"] == [3, "<MAX>"], "\(three.text)")
            #expect(candidates(three) == ["x": ["usable": true, "reasons": [["name": "less_overlap"]], "ranking": 1, "covering": false],
                                          "_all_docs": ["usable": true, "reasons": [["name": "unfavored_type"]], "ranking": 2, "covering": .null]], "\(three.text)")
            #expect(three["plan"]?.stringValue?.contains("SCAN INDEX _design/dxy/xy") == true, "\(three.text)")
            let found = try await admin.send(.post, "/db/_find", json: #"{"selector": {"x": 2, "y": {"$gt": "a"}}}"#)
            #expect(ids(found) == ["b"] && found["warning"] == nil, "\(found.text)")

            // The selector as CouchDB 3.4.3 shows it, normalized.
            for (sent, shown) in [(#"{"a": 1, "b": {"$gt": 2}}"#, #"{"$and": [{"a": {"$eq": 1}}, {"b": {"$gt": 2}}]}"#),
                                  (#"{"a": {"b": 1}}"#, #"{"a.b": {"$eq": 1}}"#), (#"{"$not": {"a": {"$gt": 1}}}"#, #"{"a": {"$lte": 1}}"#),
                                  (#"{"a": {"$not": {"$regex": "x"}}}"#, #"{"a": {"$not": {"$regex": "x"}}}"#), ("{}", "{}")] {
                let r = try await explain(#"{"selector": \#(sent)}"#)
                #expect(r["selector"] == (try JSONValue(parsing: shown)), "\(sent): \(r.text)")
            }
            let none = try await explain(#"{"selector": {"y": 1}}"#)
            #expect(none["index"]?["name"] == "_all_docs" && none["mrargs"]?["start_key"] == .null && none["mrargs"]?["end_key"] == "<MAX>", "\(none.text)")
            #expect(none["fields"] == [] && none["opts"]?["fields"] == [] && none["covering"] == false)

            func find(_ body: String) async throws -> TestResponse { try await admin.send(.post, "/db/_find", json: body) }
            let noFallback = try await find(#"{"selector": {"y": 1}, "allow_fallback": false}"#)
            #expect(noFallback.status == .badRequest && noFallback["error"] == "invalid_index"
                    && noFallback["reason"] == "You must specify an index with the `use_index` parameter.", "\(noFallback.text)")
            let named = try await find(#"{"selector": {"y": 1}, "use_index": ["dx", "x"]}"#)
            #expect(named["warning"] == "_design/dx, x was not used because it is not a valid index for this query.\nNo matching index found, create an index to optimize query time.", "\(named.text)")
            let ddoc = try await find(#"{"selector": {"y": 1}, "use_index": "dx"}"#)
            #expect(ddoc["warning"] == "_design/dx was not used because it does not contain a valid index for this query.\nNo matching index found, create an index to optimize query time.", "\(ddoc.text)")
            let sorted = try await find(#"{"selector": {"y": 1}, "sort": ["y"]}"#)
            #expect(sorted.status == .badRequest && sorted["error"] == "no_usable_index"
                    && sorted["reason"] == "No index exists for this sort, try indexing by the sort fields.", "\(sorted.text)")
            // A sort the index serves once a leading field is held equal.
            let held = try await find(#"{"selector": {"x": 1, "y": {"$gt": null}}, "sort": ["y"]}"#)
            #expect(held.status == .ok && ids(held) == ["a"], "\(held.text)")
            // A partial index is read only when named; otherwise it is a candidate that is not usable.
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["x"], "partial_filter_selector": {"x": {"$gt": 1}}}, "ddoc": "px", "name": "px"}"#)["result"] == "created")
            let partial = try await explain(#"{"selector": {"x": {"$gt": 0}}}"#)
            #expect(partial["index"]?["name"] == "x" && candidates(partial)["px"] == ["usable": false, "reasons": [["name": "is_partial"]], "ranking": 3, "covering": false], "\(partial.text)")
        }
    }

    /// With `"conflicts": true` a selector sees `_conflicts` as CouchDB's does (checked against
    /// CouchDB 3.4.3); without it there is no such field. A user sees only the conflicts it may
    /// read, in the answer and to the selector alike.
    @Test func conflictsAreSeenBySelectorsWhenAskedFor() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            for (id, second) in [("c1", "red"), ("c2", "red"), ("c3", "blue")] {
                #expect(try await admin.send(.put, "/db/\(id)?new_edits=false", json: #"{"_rev": "1-aaa", "color": "red", "v": 1}"#).status == .created)
                #expect(try await admin.send(.put, "/db/\(id)?new_edits=false", json: #"{"_rev": "1-bbb", "color": "\#(second)", "v": 2}"#).status == .created)
            }
            try await put(admin, "plain", #"{"color": "red", "v": 3}"#)
            // Before every conflicted one in ID order: a page must not stop at it.
            try await put(admin, "a0", #"{"color": "red"}"#)
            func find(_ c: any TestClientProtocol, _ body: String, _ h: HTTPFields = [:]) async throws -> TestResponse {
                let r = try await c.send(.post, "/db/_find", json: body, headers: h)
                #expect(r.status == .ok, "\(body): \(r.text)")
                return r
            }
            let conflicted = try await find(admin, #"{"selector": {"_conflicts": {"$exists": true}}, "conflicts": true}"#)
            #expect(Set(ids(conflicted)) == ["c1", "c2", "c3"], "\(conflicted.text)")
            #expect(conflicted["docs"]?.arrayValue?.first?["_conflicts"] == ["1-aaa"], "\(conflicted.text)")
            #expect(ids(try await find(admin, #"{"selector": {"_conflicts": {"$exists": true}}}"#)).isEmpty)
            #expect(ids(try await find(admin, #"{"selector": {"_conflicts": {"$exists": false}, "v": {"$gt": 0}}, "conflicts": true}"#)) == ["plain"])
            // `$eq` compares the whole array, `$all` its elements (CouchDB's answers).
            #expect(ids(try await find(admin, #"{"selector": {"$or": [{"_conflicts": "1-aaa"}, {"v": 3}]}, "conflicts": true}"#)) == ["plain"])
            #expect(Set(ids(try await find(admin, #"{"selector": {"$or": [{"_conflicts": {"$all": ["1-aaa"]}}, {"v": 3}]}, "conflicts": true}"#))) == ["c1", "c2", "c3", "plain"])
            // Paged among the matches.
            let first = try await find(admin, #"{"selector": {"_conflicts": {"$exists": true}}, "conflicts": true, "limit": 2}"#)
            let bookmark = try #require(first["bookmark"]?.stringValue)
            let next = try await find(admin, #"{"selector": {"_conflicts": {"$exists": true}}, "conflicts": true, "limit": 2, "bookmark": "\#(bookmark)"}"#)
            #expect(ids(first).count == 2 && Set(ids(first) + ids(next)) == ["c1", "c2", "c3"], "\(first.text) \(next.text)")
            // Alice reads red: c3's winning revision is blue, so she reads c3 at 1-aaa with no
            // conflict she may see; c1 and c2 are in conflict with revisions she reads.
            let alice = basic("alice", "pw")
            let hers = try await find(pub, #"{"selector": {"_conflicts": {"$exists": true}}, "conflicts": true}"#, alice)
            #expect(Set(ids(hers)).isSubset(of: ["c1", "c2"]) && !ids(hers).contains("c3"), "\(hers.text)")
        }
    }

    /// The index CouchDB chooses for a selector that only requires its field (`$mod`, `$regex`:
    /// no range) is read whole, so its matches come in that index's order (CouchDB 3.4.3's answer
    /// to the same request); `_explain` shows its `end_key` as `["<MAX>"]` and the sort as an
    /// object, as CouchDB does.
    @Test func anIndexChosenWithoutARangeIsReadInItsOrder() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            // IDs in the reverse of `n`'s order: an ID scan would give them backwards.
            for i in 0 ..< 10 { try await put(admin, "t\(9 - i)", #"{"n": \#(i)}"#) }
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "n", "name": "n"}"#)["result"] == "created")
            let r = try await admin.send(.post, "/db/_find", json: #"{"selector": {"n": {"$mod": [3, 0]}}, "fields": ["_id", "n"]}"#)
            #expect(r["docs"] == [["_id": "t9", "n": 0], ["_id": "t6", "n": 3], ["_id": "t3", "n": 6], ["_id": "t0", "n": 9]], "\(r.text)")
            #expect(r["warning"] == nil, "\(r.text)")
            let e = try await admin.send(.post, "/db/_explain", json: #"{"selector": {"n": {"$mod": [3, 0]}}}"#)
            #expect(e["index"]?["name"] == "n" && e["mrargs"]?["start_key"] == [] && e["mrargs"]?["end_key"] == ["<MAX>"], "\(e.text)")
            let sorted = try await admin.send(.post, "/db/_explain", json: #"{"selector": {"n": {"$gt": 1}}, "sort": [{"n": "desc"}]}"#)
            #expect(sorted["opts"]?["sort"] == ["n": "desc"], "\(sorted.text)")
        }
    }
}
