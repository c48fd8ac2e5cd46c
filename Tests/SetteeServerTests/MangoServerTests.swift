import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// `_find`, `_explain` and `_index` on live servers on loopback, as CouchDB's documentation
/// describes them and its clients use them, and as a user restricted by channels meets them.
@Suite struct MangoServerTests {
    static let config = redChannelConfig
    static let alice = basic("alice", "pw")

    /// Twelve tasks, numbered 0…11, red when even; two notes; a design document.
    func seed(_ admin: any TestClientProtocol) async throws {
        for i in 0 ..< 12 {
            try await put(admin, "task\(i)", #"{"type": "task", "n": \#(i), "color": "\#(i % 2 == 0 ? "red" : "blue")", "tags": ["t\#(i % 3)"]}"#)
        }
        try await put(admin, "note1", #"{"type": "note", "color": "red", "text": "hello"}"#)
        try await put(admin, "note2", #"{"type": "note", "color": "blue"}"#)
        try await put(admin, "_design/app", #"{"type": "task", "n": 100}"#)
    }

    func find(_ c: any TestClientProtocol, _ body: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await c.send(.post, "/db/_find", json: body, headers: headers)
    }

    func ids(_ r: TestResponse) -> [String] { (r["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } }

    @Test func indexesAreCreatedListedUsedAndDeleted() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            // Without an index: the answer, and CouchDB's warning.
            let before = try await find(admin, #"{"selector": {"type": "task", "n": {"$gte": 9}}}"#)
            #expect(before.status == .ok && Set(ids(before)) == ["task9", "task10", "task11"], "\(before.text)")
            #expect(before["warning"]?.stringValue?.contains("No matching index found") == true)
            let create = #"{"index": {"fields": ["type", "n"]}, "ddoc": "tasks", "name": "by-n"}"#
            let created = try await admin.send(.post, "/db/_index", json: create)
            #expect(created["result"] == "created" && created["id"] == "_design/tasks" && created["name"] == "by-n", "\(created.text)")
            #expect(try await admin.send(.post, "/db/_index", json: create)["result"] == "exists")
            // Listed, with the special _all_docs index first.
            let list = try await pub.send(.get, "/db/_index", headers: Self.alice)
            #expect(list["total_rows"] == 2)
            let names = list["indexes"]?.arrayValue?.compactMap { $0["name"]?.stringValue }
            #expect(names == ["_all_docs", "by-n"], "\(list.text)")
            #expect(list["indexes"]?.arrayValue?.last?["def"]?["fields"] == [["type": "asc"], ["n": "asc"]])
            // The design document CouchDB makes of it.
            let ddoc = try await admin.send(.get, "/db/_design/tasks")
            #expect(ddoc["language"] == "query" && ddoc["views"]?["by-n"] != nil, "\(ddoc.text)")
            // Its definition as it was sent (the listing above shows it normalized).
            #expect(ddoc["views"]?["by-n"]?["options"]?["def"] == ["fields": ["type", "n"]], "\(ddoc.text)")
            // Used: sorted, paged, no warning.
            let sorted = try await find(admin, #"{"selector": {"type": "task"}, "sort": [{"type": "desc"}, {"n": "desc"}], "limit": 3}"#)
            #expect(ids(sorted) == ["task11", "task10", "task9"], "\(sorted.text)")
            #expect(sorted["warning"] == nil)
            let explained = try await admin.send(.post, "/db/_explain", json: #"{"selector": {"type": "task", "n": {"$gt": 3}}}"#)
            #expect(explained["index"]?["name"] == "by-n" && explained["index"]?["ddoc"] == "_design/tasks", "\(explained.text)")
            #expect(explained["dbname"] == "db" && explained["selector"] == ["$and": [["n": ["$gt": 3]], ["type": ["$eq": "task"]]]], "\(explained.text)")
            // Deleted: gone from the list and from the plan; the design document with it.
            #expect(try await admin.send(.delete, "/db/_index/_design/tasks/json/by-n")["ok"] == true)
            #expect(try await admin.send(.delete, "/db/_index/tasks/json/by-n").status == .notFound)
            #expect(try await admin.send(.get, "/db/_index")["total_rows"] == 1)
            #expect(try await admin.send(.get, "/db/_design/tasks").status == .notFound)
            let after = try await admin.send(.post, "/db/_explain", json: #"{"selector": {"type": "task"}}"#)
            #expect(after["index"]?["name"] == "_all_docs")
        }
    }

    /// A design document written as any other (PUT, replication) defines Mango indexes too.
    @Test func aDesignDocumentWrittenDirectlyBecomesAnIndex() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            try await put(admin, "_design/direct", #"{"language": "query", "views": {"by-tag": {"map": {"fields": {"tags": "asc"}}, "reduce": "_count", "options": {"def": {"fields": ["n"]}}}}}"#)
            var name: JSONValue?
            for _ in 0 ..< 200 {
                name = try await admin.send(.post, "/db/_explain", json: #"{"selector": {"n": 5}}"#)["index"]?["name"]
                if name == "by-tag" { break }
                try await Task.sleep(for: .milliseconds(25))
            }
            #expect(name == "by-tag")
            #expect(ids(try await find(admin, #"{"selector": {"n": 5}}"#)) == ["task5"])
        }
    }

    /// Selectors as CouchDB's documentation shows them: operators, arrays, missing fields,
    /// `fields`, `conflicts`; design documents are never in the answer.
    @Test func selectorsFieldsAndConflicts() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            func found(_ selector: String) async throws -> Set<String> {
                let r = try await find(admin, #"{"selector": \#(selector), "limit": 100}"#)
                #expect(r.status == .ok, "\(selector): \(r.text)")
                return Set(ids(r))
            }
            #expect(try await found(#"{"_id": {"$gt": null}}"#).count == 14)
            #expect(try await found(#"{"type": "note", "text": {"$exists": false}}"#) == ["note2"])
            #expect(try await found(#"{"tags": {"$all": ["t1"]}, "n": {"$lt": 5}}"#) == ["task1", "task4"])
            #expect(try await found(#"{"tags": {"$in": ["t2"]}, "n": {"$mod": [4, 1]}}"#) == ["task5"])
            #expect(try await found(#"{"$or": [{"n": 0}, {"text": {"$regex": "^hel"}}]}"#) == ["task0", "note1"])
            #expect(try await found(#"{"n": {"$type": "number", "$not": {"$lt": 10}}}"#) == ["task10", "task11"])
            #expect(try await found(#"{"type": "task", "$nor": [{"n": {"$lt": 10}}, {"color": "red"}]}"#) == ["task11"])
            #expect(try await found(#"{"tags": {"$size": 1}, "n": {"$in": [3, 30]}}"#) == ["task3"])
            let projected = try await find(admin, #"{"selector": {"n": 7}, "fields": ["n", "tags", "missing.field"]}"#)
            #expect(projected["docs"] == [["n": 7, "tags": ["t1"]]], "\(projected.text)")
            // A conflict made by a replicated revision shows with conflicts: true.
            let rev = try await currentRev(admin, "task7")
            let gen = rev.split(separator: "-")[0]
            let other = "\(gen)-ffffffffffffffffffffffffffffffff"
            let bulk = try await admin.send(.post, "/db/_bulk_docs",
                                            json: #"{"new_edits": false, "docs": [{"_id": "task7", "_rev": "\#(other)", "type": "task", "n": 7, "color": "blue"}]}"#)
            #expect(bulk.status == .created, "\(bulk.text)")
            let conflicted = try await find(admin, #"{"selector": {"n": 7}, "conflicts": true}"#)
            #expect(conflicted["docs"]?[0]?["_conflicts"]?.arrayValue?.isEmpty == false, "\(conflicted.text)")
        }
    }

    /// Bookmarks page through every match exactly once; a bad one is refused.
    @Test func bookmarksPageThroughEveryMatch() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "name": "n"}"#).status == .ok)
            for (client, headers, expected) in [(admin, HTTPFields(), 12), (pub, Self.alice, 6)] {
                var seen: [String] = []
                var bookmark = "nil"
                for _ in 0 ..< 10 {
                    let r = try await find(client, #"{"selector": {"n": {"$gte": 0}}, "sort": ["n"], "limit": 5, "bookmark": "\#(bookmark)"}"#, headers: headers)
                    #expect(r.status == .ok, "\(r.text)")
                    let page = ids(r)
                    // The empty last page gives back the bookmark it was given, as CouchDB's does.
                    if page.isEmpty { #expect(r["bookmark"]?.stringValue == bookmark); break }
                    seen += page
                    bookmark = try #require(r["bookmark"]?.stringValue)
                }
                #expect(seen.count == expected && Set(seen).count == expected, "\(seen)")
                #expect(seen == seen.sorted { Int($0.dropFirst(4))! < Int($1.dropFirst(4))! })
            }
            let bad = try await find(admin, #"{"selector": {}, "bookmark": "not-a-bookmark"}"#)
            #expect(bad.status == .badRequest && bad["error"] == "invalid_bookmark")
        }
    }

    /// The test that sends a stored document as it is finds `"_attachments"` wherever it
    /// starts (the scan passes over eight bytes at a time) and nothing else.
    @Test func attachmentsAreFoundAtEveryOffset() {
        for pad in 0 ..< 24 {
            let filler = String(repeating: "x", count: pad)
            #expect(CouchAPI.mentionsAttachments(Array(#"{"a":"\#(filler)","_attachments":{}}"#.utf8)), "\(pad)")
            #expect(CouchAPI.mentionsAttachments(Array(#"{"\#(filler)_attachments":1}"#.utf8)) == (pad == 0), "\(pad)")
            #expect(!CouchAPI.mentionsAttachments(Array(#"{"a":"\#(filler)_attachment","b_":"_"}"#.utf8)), "\(pad)")
        }
        #expect(CouchAPI.mentionsAttachments(Array(#""_attachments""#.utf8)))
        #expect(!CouchAPI.mentionsAttachments(Array(#""_attachments"#.utf8)))
        #expect(!CouchAPI.mentionsAttachments([]))
    }

    /// A user finds only what it may read, counted and paged among those; it may list
    /// indexes but not make or delete them; design documents never show.
    @Test func aUserFindsOnlyWhatItMayRead() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let all = try await find(pub, #"{"selector": {"type": {"$gt": null}}, "limit": 100, "execution_stats": true}"#, headers: Self.alice)
            #expect(Set(ids(all)) == Set((0 ..< 12).filter { $0 % 2 == 0 }.map { "task\($0)" } + ["note1"]), "\(all.text)")
            #expect(all["execution_stats"]?["results_returned"] == 7 && all["execution_stats"]?["total_docs_examined"] == 7, "\(all.text)")
            // A sort needs an index that serves it, as in CouchDB.
            let sortedBefore = try await find(pub, #"{"selector": {"type": "task"}, "sort": ["n"]}"#, headers: Self.alice)
            #expect(sortedBefore.status == .badRequest && sortedBefore["error"] == "no_usable_index", "\(sortedBefore.text)")
            // With an index (kept by channel) alice's query reads her channel's entries only,
            // and follows a document out of her channel and another into it.
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "by-n", "name": "n"}"#).status == .ok)
            let skipped = try await find(pub, #"{"selector": {"type": "task"}, "sort": ["n"], "skip": 2, "limit": 2}"#, headers: Self.alice)
            #expect(ids(skipped) == ["task4", "task6"], "\(skipped.text)")
            let byN = #"{"selector": {"n": {"$gte": 3}}, "sort": ["n"], "limit": 3}"#
            #expect(ids(try await find(pub, byN, headers: Self.alice)) == ["task4", "task6", "task8"])
            let plan = try await pub.send(.post, "/db/_explain", json: byN, headers: Self.alice)
            #expect(plan["plan"]?.stringValue?.contains("BY CHANNEL: the index's entries of '!', 'red' only") == true, "\(plan.text)")
            #expect(try await admin.send(.post, "/db/_explain", json: byN)["plan"]?.stringValue?.contains("CHANNEL") == false)
            let six = try await admin.send(.get, "/db/task6")
            try await put(admin, "task6", #"{"_rev": "\#(six["_rev"]?.stringValue ?? "")", "type": "task", "n": 6, "color": "blue"}"#)
            let five = try await admin.send(.get, "/db/task5")
            try await put(admin, "task5", #"{"_rev": "\#(five["_rev"]?.stringValue ?? "")", "type": "task", "n": 5, "color": "red"}"#)
            #expect(ids(try await find(pub, byN, headers: Self.alice)) == ["task4", "task5", "task8"])
            #expect(try await pub.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}}"#, headers: Self.alice).status == .forbidden)
            #expect(try await pub.send(.delete, "/db/_index/x/json/y", headers: Self.alice).status == .forbidden)
            #expect(try await pub.send(.get, "/db/_index", headers: Self.alice).status == .ok)
            #expect(try await find(pub, #"{"selector": {}}"#).status == .unauthorized)
        }
    }

    @Test(arguments: [
        (#"{"limit": 3}"#, "bad_request", "Missing required key: selector"),
        (#"{"selector": []}"#, "invalid_selector_json", "Selector must be a JSON object"),
        (#"{"selector": {"a": {"$bogus": 1}}}"#, "invalid_operator", "Invalid operator: $bogus"),
        (#"{"selector": {"a": {"$beginsWith": 3}}}"#, "invalid_operator", "Invalid operator: $beginsWith"),
        (#"{"selector": {"a": {"$in": 3}}}"#, "bad_arg", "Bad argument for operator $in: 3"),
        (#"{"selector": {"a": {"$near": [1, 2]}}}"#, "not_supported", "Unsupported operator: $near"),
        (#"{"selector": {}, "limit": -1}"#, "invalid_non_neg_integer", "-1 is not an integer greater than or equal to zero"),
        (#"{"selector": {}, "r": 0}"#, "invalid_pos_integer", "0 is not an integer greater than zero"),
        (#"{"selector": {}, "update": "no"}"#, "invalid_boolean", "Invalid boolean value: \"no\""),
        (#"{"selector": {}, "stable": 1}"#, "invalid_boolean", "Invalid boolean value: 1"),
        (#"{"selector": {}, "stale": "yes"}"#, "invalid_ok_or_false_value", "Invalid value for stale: \"yes\""),
        (#"{"selector": {}, "partition": "p1"}"#, "bad_request", "partition specified on non-partitioned db"),
        (#"{"selector": {}, "sort": [{"a": "asc"}, {"b": "desc"}]}"#, "bad_request", "single direction"),
        (#"{"selector": {}, "use_index": 3}"#, "invalid_index_name", "Invalid index name: 3"),
        (#"{"selector": {}, "frobnicate": true}"#, "invalid_key", "Invalid key frobnicate for this request."),
        (#"{"selector": {"a": {"$regex": "("}}}"#, "bad_request", "regular expression"),
    ])
    func badFindRequestsAreRefused(_ body: String, _ error: String, _ reason: String) async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await put(admin, "d", #"{"a": "x"}"#)
            let r = try await find(admin, body)
            #expect(r.status == .badRequest && r["error"]?.stringValue == error, "\(body): \(r.text)")
            #expect(r["reason"]?.stringValue?.contains(reason) == true, "\(body): \(r.text)")
        }
    }

    @Test func badIndexRequestsAreRefusedAndUseIndexFallsBack() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            for body in [#"{}"#, #"{"index": {"fields": []}}"#, #"{"index": {"fields": [{"a": "up"}]}}"#,
                         #"{"index": {"fields": ["a", {"b": "desc"}]}}"#, #"{"index": {"fields": ["a"]}, "type": "geo"}"#,
                         #"{"index": {"fields": ["a"], "partial_filter_selector": {"a": {"$nope": 1}}}}"#,
                         #"{"index": {"fields": ["a..b"]}}"#] {
                let r = try await admin.send(.post, "/db/_index", json: body)
                #expect(r.status == .badRequest, "\(body): \(r.text)")
            }
            // A partial index named by use_index restricts the answer to what it holds.
            let partial = #"{"index": {"fields": ["n"], "partial_filter_selector": {"color": "red"}}, "ddoc": "p", "name": "reds"}"#
            let made = try await admin.send(.post, "/db/_index", json: partial)
            #expect(made["result"] == "created", "\(made.text)")
            let reds = try await find(admin, #"{"selector": {"n": {"$gt": 5}}, "use_index": ["p", "reds"], "limit": 100}"#)
            #expect(Set(ids(reds)) == ["task6", "task8", "task10"], "\(reds.text)")
            // An index that cannot serve: a warning, or with allow_fallback false an error.
            let unusable = #"{"selector": {"type": "note"}, "use_index": "_design/nothing"}"#
            let warned = try await find(admin, unusable)
            #expect(warned.status == .ok && warned["warning"]?.stringValue?.contains("_design/nothing") == true, "\(warned.text)")
            let refused = try await find(admin, #"{"selector": {"type": "note"}, "use_index": "_design/nothing", "allow_fallback": false}"#)
            #expect(refused.status == .badRequest && refused["error"] == "invalid_index", "\(refused.text)")
            #expect(refused["reason"] == "_design/nothing specified by `use_index` could not be found or it is not suitable.")
        }
    }

    /// `_design_docs`: the design documents, with `_all_docs`'s options, for any user.
    @Test func designDocsListsTheDesignDocuments() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "idx"}"#).status == .ok)
            for (c, h) in [(admin, HTTPFields()), (pub, Self.alice)] {
                let r = try await c.send(.get, "/db/_design_docs?include_docs=true", headers: h)
                #expect(r.rowIDs == ["_design/app", "_design/idx"] && r["total_rows"] == 2, "\(r.text)")
                #expect(r.rows.last?["doc"]?["language"] == "query")
            }
            let limited = try await admin.send(.get, "/db/_design_docs?descending=true&limit=1")
            #expect(limited.rowIDs == ["_design/idx"])
            let keyed = try await admin.send(.post, "/db/_design_docs", json: #"{"keys": ["_design/app"]}"#)
            #expect(keyed.rowIDs == ["_design/app"], "\(keyed.text)")
        }
    }

    /// Indexes made over HTTP are the library's and outlive the server.
    @Test func indexesSurviveARestart() async throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = base + "settee-mango-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = #"{"databases": {"db": {"server": "\#(directory)", "users": {"GUEST": {"disabled": false, "admin_channels": ["*"]}}}}}"#
        do {
            let server = try channelServer(config)
            defer { try? server.close() }
            try await withPorts(server) { _, admin in
                try await seed(admin)
                #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "d", "name": "n"}"#).status == .ok)
            }
        }
        let server = try channelServer(config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin async throws in
            #expect(try await admin.send(.post, "/db/_explain", json: #"{"selector": {"n": {"$gt": 3}}}"#)["index"]?["name"] == "n")
            #expect(try await admin.send(.get, "/db/_index")["total_rows"] == 2)
            #expect(ids(try await find(admin, #"{"selector": {"n": {"$gt": 9}}, "sort": ["n"]}"#)) == ["task10", "task11"])
        }
    }
}
