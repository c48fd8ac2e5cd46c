import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// CouchDB views on live servers on loopback: map functions in JavaScript, the query options of
/// CouchDB's documentation, built-in and JavaScript reduces with rereduce, views kept in the
/// commit of each write, and a user restricted by channels.
@Suite struct ViewServerTests {
    /// The Mango tests' server: `alice` reads the `red` channel (the sync function routes by `color`).
    static let config = MangoServerTests.config
    static let alice = MangoServerTests.alice

    static let design = #"""
        {"views": {
          "by_type": {"map": "function (doc) { if (doc.type) emit(doc.type, doc.n); }", "reduce": "_sum"},
          "by_tag": {"map": "function (doc) { (doc.tags || []).forEach(function (t) { emit(t, 1); }); }", "reduce": "_count"},
          "by_date": {"map": "function (doc) { if (doc.date) emit(doc.date, doc.n); }", "reduce": "_stats"},
          "types": {"map": "function (doc) { emit(doc.type, null); }", "reduce": "_approx_count_distinct"},
          "js": {"map": "function (doc) { if (doc.type === 'task') emit(doc.n % 3, doc.n); }",
                 "reduce": "function (keys, values, rereduce) { return rereduce ? {calls: values.reduce(function (a, v) { return a + v.calls; }, 0) + 1, sum: values.reduce(function (a, v) { return a + v.sum; }, 0)} : {calls: 1, sum: sum(values)}; }"},
          "linked": {"map": "function (doc) { if (doc.owner) emit(doc._id, {_id: doc.owner}); }"},
          "plain": {"map": "function (doc) { emit([doc.type, doc.n], doc.color); }"}
        }}
        """#

    /// Twelve tasks 0…11 (red when even) with dates and tags; two notes; a design document.
    func seed(_ admin: any TestClientProtocol) async throws {
        for i in 0 ..< 12 {
            let date = #"[2026, \#(1 + i % 3), \#(1 + i)]"#
            try await put(admin, "task\(i)", #"{"type": "task", "n": \#(i), "color": "\#(i % 2 == 0 ? "red" : "blue")", "tags": ["t\#(i % 3)", "all"], "date": \#(date)}"#)
        }
        try await put(admin, "note1", #"{"type": "note", "n": 100, "color": "red", "owner": "task0"}"#)
        try await put(admin, "note2", #"{"type": "note", "n": 200, "color": "blue", "owner": "task1"}"#)
        try await put(admin, "_design/app", Self.design)
    }

    func view(_ c: any TestClientProtocol, _ name: String, _ query: String = "", headers: HTTPFields = [:]) async throws -> TestResponse {
        try await c.send(.get, "/db/_design/app/_view/\(name)" + (query.isEmpty ? "" : "?" + query), headers: headers)
    }

    func keys(_ r: TestResponse) -> [JSONValue] { r.rows.compactMap { $0["key"] } }

    @Test func mapRowsAnswerCouchDBsQueryOptions() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            // All rows, in collation order, then by document ID.
            let all = try await view(admin, "plain")
            #expect(all.status == .ok, "\(all.text)")
            #expect(all["total_rows"] == 14 && all["offset"] == 0)
            #expect(all.rowIDs.prefix(3) == ["note1", "note2", "task0"])
            #expect(all.rows.first == ["id": "note1", "key": ["note", 100], "value": "red"])
            // key, keys (in the order given, each descending), ranges with both spellings.
            #expect(try await view(admin, "by_type", "reduce=false&key=" + q("\"note\"")).rowIDs == ["note1", "note2"])
            let byKeys = try await view(admin, "by_type", "reduce=false&descending=true&keys=" + q(#"["note", "nothing", "task"]"#))
            #expect(byKeys.rowIDs.prefix(3) == ["note2", "note1", "task9"], "\(byKeys.text)")
            let range = try await view(admin, "plain", "start_key=" + q(#"["task", 3]"#) + "&endkey=" + q(#"["task", 5]"#))
            #expect(range.rowIDs == ["task3", "task4", "task5"])
            let exclusive = try await view(admin, "plain", "startkey=" + q(#"["task", 3]"#) + "&end_key=" + q(#"["task", 5]"#) + "&inclusive_end=false")
            #expect(exclusive.rowIDs == ["task3", "task4"])
            let descending = try await view(admin, "plain", "descending=true&startkey=" + q(#"["task", 5]"#) + "&endkey=" + q(#"["task", 3]"#))
            #expect(descending.rowIDs == ["task5", "task4", "task3"])
            // A reversed range is refused, as CouchDB does.
            let reversed = try await view(admin, "plain", "startkey=" + q(#"["task", 5]"#) + "&endkey=" + q(#"["task", 3]"#))
            #expect(reversed.status == .badRequest && reversed["error"] == "query_parse_error")
            // startkey_docid among equal keys; limit and skip.
            let docid = try await view(admin, "by_type", "reduce=false&startkey=" + q("\"task\"") + "&startkey_docid=task5&limit=2")
            #expect(docid.rowIDs == ["task5", "task6"], "\(docid.text)")
            let paged = try await view(admin, "plain", "skip=2&limit=3")
            #expect(paged.rowIDs == ["task0", "task1", "task2"] && paged["offset"] == 2)
            // include_docs, a linked document, conflicts, update_seq.
            let docs = try await view(admin, "linked", "include_docs=true&update_seq=true")
            #expect(docs.rows.map { $0["doc"]?["_id"] } == ["task0", "task1"], "\(docs.text)")
            #expect(docs["update_seq"]?.intValue ?? 0 >= 15)
            // POST with keys in the body; a query parameter wins over the body.
            let posted = try await admin.send(.post, "/db/_design/app/_view/by_type?limit=1", json: #"{"keys": ["task"], "reduce": false, "limit": 5}"#)
            #expect(posted.rowIDs == ["task0"], "\(posted.text)")
            // Errors as CouchDB gives them.
            #expect(try await view(admin, "nothing").status == .notFound)
            #expect(try await admin.send(.get, "/db/_design/none/_view/x").status == .notFound)
            #expect(try await view(admin, "plain", "reduce=true")["error"] == "query_parse_error")
            #expect(try await view(admin, "plain", "group=true")["error"] == "query_parse_error")
            #expect(try await view(admin, "by_type", "include_docs=true")["error"] == "query_parse_error")
            #expect(try await view(admin, "by_type", "keys=" + q(#"["a"]"#))["error"] == "query_parse_error")
            // Grouping by level is not exact grouping: refused with keys, as CouchDB refuses it
            // (and with group=true as well, group_level deciding).
            for extra in ["group_level=1&", "group=true&group_level=2&", "group_level=0&"] {
                let r = try await view(admin, "by_type", extra + "keys=" + q(#"["task"]"#))
                #expect(r.status == .badRequest && r["error"] == "query_parse_error" && r["reason"] == "Multi-key fetches for reduce views must use `group=true`", "\(extra): \(r.text)")
            }
            #expect(try await view(admin, "plain", "key=" + q("{bad"))["error"] == "query_parse_error")
            #expect(try await view(admin, "plain", "limit=-1").status == .badRequest)
            #expect(try await view(admin, "plain", "update=sometimes").status == .badRequest)
        }
    }

    @Test func reducesGroupAndRereduce() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            #expect(try await view(admin, "by_type").rows == [["key": nil, "value": 366]])
            #expect(try await view(admin, "by_type", "group=true").rows == [["key": "note", "value": 300], ["key": "task", "value": 66]])
            #expect(try await view(admin, "by_tag", "key=" + q("\"all\"")).rows == [["key": nil, "value": 12]])
            #expect(try await view(admin, "by_tag", "group=true&keys=" + q(#"["t1", "t0"]"#)).rows
                    == [["key": "t1", "value": 4], ["key": "t0", "value": 4]])
            #expect(try await view(admin, "types").rows == [["key": nil, "value": 2]])
            // group_level on array keys: [year] and [year, month].
            #expect(try await view(admin, "by_date", "group_level=1").rows.map { $0["value"]?["count"] } == [12])
            let months = try await view(admin, "by_date", "group_level=2")
            #expect(keys(months) == [[2026, 1], [2026, 2], [2026, 3]], "\(months.text)")
            #expect(months.rows.first?["value"] == ["sum": 18, "count": 4, "min": 0, "max": 9, "sumsqr": 126])
            #expect(try await view(admin, "by_date", "group_level=2&skip=1&limit=1").rows.map { $0["key"] } == [[2026, 2]])
            // group_level=0: one row of every row, keyed null (for a user's rows too).
            let none = try await view(admin, "by_date", "group_level=0")
            #expect(none.rows.count == 1 && none.rows.first?["key"] == .null && none.rows.first?["value"]?["count"] == 12, "\(none.text)")
            #expect(try await view(pub, "by_date", "group_level=0", headers: Self.alice).rows.map { $0["key"] } == [.null])
            // A JavaScript reduce over more rows than one call takes is rereduced.
            var docs: [String] = []
            for i in 12 ..< 700 { docs.append(#"{"_id": "more\#(i)", "type": "task", "n": \#(i)}"#) }
            let bulk = try await admin.send(.post, "/db/_bulk_docs", json: #"{"docs": [\#(docs.joined(separator: ","))]}"#)
            #expect(bulk.status == .created)
            let js = try await view(admin, "js")
            #expect(js.rows.first?["value"]?["sum"] == .int(Int64((0 ..< 700).reduce(0, +))), "\(js.text)")
            #expect((js.rows.first?["value"]?["calls"]?.intValue ?? 0) > 2, "rereduce ran: \(js.text)")
            let grouped = try await view(admin, "js", "group=true")
            #expect(keys(grouped) == [0, 1, 2])
            #expect(grouped.rows.compactMap { $0["value"]?["sum"]?.intValue }.reduce(0, +) == (0 ..< 700).reduce(0, +))
        }
    }

    @Test func viewsFollowWritesAndDesignChanges() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            #expect(try await view(admin, "by_type", "group=true").rows.count == 2)
            // A write is in the next query: the index is kept in the write's commit.
            try await put(admin, "memo", #"{"type": "memo", "n": 1}"#)
            #expect(try await view(admin, "by_type", "reduce=false&key=" + q("\"memo\"")).rowIDs == ["memo"])
            try await admin.send(.delete, "/db/memo?rev=" + (try await currentRev(admin, "memo")))
            #expect(try await view(admin, "by_type", "reduce=false&key=" + q("\"memo\"")).rowIDs == [])
            // A map function that throws on some documents: those have no rows, the rest do.
            let rev = try await currentRev(admin, "_design/app")
            let changed = #"{"_rev": "\#(rev)", "views": {"plain": {"map": "function (doc) { if (doc.n === 3) throw new Error('three'); emit(doc.n * 2, null); }"}}}"#
            try await put(admin, "_design/app", changed)
            let doubled = try await view(admin, "plain", "limit=3")
            #expect(keys(doubled) == [0, 2, 4], "\(doubled.text)")
            #expect(try await view(admin, "plain")["total_rows"] == 13)
            let info = try await admin.send(.get, "/db/_design/app/_info")
            #expect(info["name"] == "app" && info["view_index"]?["language"] == "javascript", "\(info.text)")
            #expect(info["view_index"]?["views"]?["plain"]?["map_errors"]?.intValue ?? 0 >= 1)
            // The views the design document no longer has are gone; cleanup answers 202.
            #expect(try await view(admin, "by_type").status == .notFound)
            #expect(try await admin.send(.post, "/db/_view_cleanup", json: "{}").status == .accepted)
            let names = try server.database(named: "db")?.database.indexes ?? []
            #expect(names.filter { $0.hasPrefix("_view/") } == ["_view/app/plain"], "\(names)")
            // A design document whose function does not compile is refused.
            let broken = try await admin.send(.put, "/db/_design/bad", json: #"{"views": {"v": {"map": "function (doc) { emit(doc"}}}"#)
            #expect(broken.status == .badRequest && broken["error"] == "compilation_error", "\(broken.text)")
            let unknown = try await admin.send(.put, "/db/_design/bad", json: #"{"views": {"v": {"map": "function (doc) {}", "reduce": "_median"}}}"#)
            #expect(unknown.status == .badRequest)
        }
    }

    /// On disk across a restart: the server gives the views' functions back before any write,
    /// so the rows are kept (not rebuilt) and the next writes keep them.
    @Test func viewsSurviveARestartWithoutARebuild() async throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = base + "settee-views-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = #"{"databases": {"db": {"server": "\#(directory)", "users": {"GUEST": {"disabled": true}}}}}"#
        do {
            let server = try channelServer(config)
            defer { try? server.close() }
            try await withPorts(server) { _, admin in
                try await seed(admin)
                #expect(try await view(admin, "plain")["total_rows"] == 14)
            }
        }
        let server = try channelServer(config)
        defer { try? server.close() }
        let database = try #require(server.database(named: "db")).database
        let name = try #require(try database.indexes.first { $0.hasSuffix("/plain") })
        let info = try #require(try database.mapIndexInfo(forName: name))
        #expect(info.isReady && info.isAttached && info.rowCount == 14, "\(info)")
        try await withPorts(server) { _, admin in
            try await put(admin, "after", #"{"type": "memo", "n": 5}"#)
            let rows = try await view(admin, "plain", "key=" + q(#"["memo", 5]"#))
            #expect(rows.rowIDs == ["after"] && rows["total_rows"] == 15, "\(rows.text)")
        }
    }

    @Test func aUserSeesAndReducesOnlyWhatItMayRead() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            // Alice reads the red documents: even tasks and note1.
            let rows = try await view(pub, "plain", headers: Self.alice)
            #expect(rows.status == .ok, "\(rows.text)")
            #expect(Set(rows.rowIDs) == ["note1", "task0", "task2", "task4", "task6", "task8", "task10"])
            #expect(rows["total_rows"] == 7)
            #expect(try await view(pub, "by_type", "group=true", headers: Self.alice).rows
                    == [["key": "note", "value": 100], ["key": "task", "value": 30]])
            #expect(try await view(pub, "by_tag", headers: Self.alice).rows == [["key": nil, "value": 12]])
            // A linked document it may not read is null.
            let linked = try await view(pub, "linked", "include_docs=true", headers: Self.alice)
            #expect(linked.rows.map { $0["doc"] } == [["_id": "task0", "_rev": linked.rows.first?["doc"]?["_rev"] ?? nil,
                                                        "type": "task", "n": 0, "color": "red", "tags": ["t0", "all"], "date": [2026, 1, 1]]])
            // `_info` tells it no row counts: they count documents it cannot read.
            let info = try await pub.send(.get, "/db/_design/app/_info", headers: Self.alice)
            #expect(info.status == .ok && info["view_index"]?["views"]?["plain"] == ["ready": true], "\(info.text)")
            // Design documents and cleanup are the administrator's.
            #expect(try await pub.send(.put, "/db/_design/mine", json: #"{"views": {}}"#, headers: Self.alice).status == .forbidden)
            #expect(try await pub.send(.post, "/db/_view_cleanup", json: "{}", headers: Self.alice).status == .forbidden)
        }
    }
}

/// `_local_docs`: each caller lists its own local documents, with `_all_docs`' options.
@Suite struct LocalDocsServerTests {
    @Test func eachCallerListsItsOwnLocalDocuments() async throws {
        let server = try channelServer(ViewServerTests.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            for id in ["a", "b", "c"] {
                #expect(try await admin.send(.put, "/db/_local/\(id)", json: #"{"n": "\#(id)"}"#).status == .created)
            }
            #expect(try await pub.send(.put, "/db/_local/mine", json: #"{"n": 1}"#, headers: ViewServerTests.alice).status == .created)
            let all = try await admin.send(.get, "/db/_local_docs")
            #expect(all.rowIDs == ["_local/a", "_local/b", "_local/c"], "\(all.text)")
            #expect(all["total_rows"] == .null && all["offset"] == .null)
            #expect(all.rows.first?["value"]?["rev"] == "0-1")
            let some = try await admin.send(.get, "/db/_local_docs?descending=true&include_docs=true&limit=2&startkey=" + q("\"_local/b\""))
            #expect(some.rowIDs == ["_local/b", "_local/a"] && some.rows.first?["doc"]?["n"] == "b", "\(some.text)")
            let exclusive = try await admin.send(.get, "/db/_local_docs?endkey=" + q("\"_local/b\"") + "&inclusive_end=false")
            #expect(exclusive.rowIDs == ["_local/a"])
            let byKeys = try await admin.send(.post, "/db/_local_docs", json: #"{"keys": ["_local/c", "_local/zz"]}"#)
            #expect(byKeys.rows == [["id": "_local/c", "key": "_local/c", "value": ["rev": "0-1"]], ["key": "_local/zz", "error": "not_found"]])
            // A user sees its own only, and never the administrator's or another user's.
            let mine = try await pub.send(.get, "/db/_local_docs?include_docs=true", headers: ViewServerTests.alice)
            #expect(mine.rowIDs == ["_local/mine"] && mine.rows.first?["doc"]?["n"] == 1, "\(mine.text)")
            let theirs = try await pub.send(.post, "/db/_local_docs", json: #"{"keys": ["_local/a"]}"#, headers: ViewServerTests.alice)
            #expect(theirs.rows == [["key": "_local/a", "error": "not_found"]])
            #expect(try await pub.send(.get, "/db/_local_docs?descending=true", headers: ViewServerTests.alice).rowIDs == ["_local/mine"])
        }
    }
}
