import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// CouchDB 3's partitioned databases as CouchDB 3.4 answers them (`chttpd_db:handle_partition_req`,
/// `couch_partition`, `couch_mrview_util:validate_args`, `mango_idx:get_usable_indexes`), on live
/// servers on loopback: every document ID `partition:id`, and a partition's `_all_docs`,
/// `_find` and views reading that partition alone.
@Suite struct PartitionedDatabaseTests {
    /// `pdb` is made partitioned over HTTP, with alice reading the red channel.
    static let pdbBody = #"{"server": "walrus:", "users": {"alice": {"password": "pw", "admin_channels": ["red"]}}, "sync": "function(doc) { channel(doc.color); }"}"#

    /// Three partitions: `s1` holds 20 documents (n 0…19, red when even), `s2` 30 and `s3` 5
    /// (n from 100).
    func seed(_ admin: any TestClientProtocol) async throws {
        let made = try await admin.send(.put, "/pdb?partitioned=true", json: Self.pdbBody)
        #expect(made.status == .created, "\(made.text)")
        var docs: [String] = []
        for (p, count, base) in [("s1", 20, 0), ("s2", 30, 0), ("s3", 5, 100)] {
            for i in 0 ..< count {
                docs.append(#"{"_id": "\#(p):d\#(String(format: "%02d", i))", "n": \#(base + i), "color": "\#(i % 2 == 0 ? "red" : "blue")"}"#)
            }
        }
        let r = try await admin.send(.post, "/pdb/_bulk_docs", json: #"{"docs": [\#(docs.joined(separator: ","))]}"#)
        #expect(r.status == .created, "\(r.text)")
    }

    func ids(_ r: TestResponse) -> [String] { (r["docs"]?.arrayValue ?? []).compactMap { $0["_id"]?.stringValue } }

    /// `PUT /{db}?partitioned=true` makes one (`props.partitioned` in `GET /{db}`, `partitioned`
    /// among the welcome's `features`); another value is 400 "Invalid `partitioned` parameter";
    /// a database that is not partitioned answers `_partition` with 400 "database is not
    /// partitioned", and `partition` in `_find` or `_all_docs` with CouchDB's refusals.
    @Test func aPartitionedDatabaseIsMadeAndShown() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            let info = try await admin.send(.get, "/pdb")
            #expect(info["props"] == ["partitioned": true], "\(info.text)")
            #expect(try await admin.send(.get, "/db")["props"] == .object([:]))
            let bad = try await admin.send(.put, "/other?partitioned=yes")
            #expect(bad.status == .badRequest && bad["reason"] == "Invalid `partitioned` parameter", "\(bad.text)")
            #expect(try await admin.send(.get, "/other").status == .notFound)
            let plain = try await admin.send(.get, "/db/_partition/s1")
            #expect(plain.status == .badRequest && plain["reason"] == "database is not partitioned", "\(plain.text)")
            let find = try await admin.send(.post, "/db/_find", json: #"{"selector": {}, "partition": "s1"}"#)
            #expect(find.status == .badRequest && find["reason"] == "partition specified on non-partitioned db", "\(find.text)")
            let all = try await admin.send(.get, "/db/_all_docs?partition=s1")
            #expect(all.status == .badRequest && all["error"] == "query_parse_error", "\(all.text)")
            #expect(try await admin.send(.get, "/")["features"] == ["partitioned"])
        }
    }

    /// `couch_partition:validate_docid`: `partition:id` with a partition that is not empty and
    /// does not start with `_`; design and local documents as anywhere. The same on every way
    /// in: `PUT`, `_bulk_docs` (with `new_edits=false` too), `GET`.
    @Test func documentIDsNameTheirPartition() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            try await seed(admin)
            let plain = try await admin.send(.put, "/pdb/plain", json: "{}")
            #expect(plain.status == .badRequest && plain["error"] == "illegal_docid" && plain["reason"] == "Doc id must be of form partition:id",
                    "\(plain.text)")
            let underscore = try await admin.send(.put, "/pdb/_x:y", json: "{}")
            #expect(underscore.status == .badRequest, "\(underscore.text)")
            let emptyPartition = try await admin.send(.put, "/pdb/:y", json: "{}")
            #expect(emptyPartition.status == .badRequest && emptyPartition["error"] == "illegal_partition"
                    && emptyPartition["reason"] == "Partition must not be empty", "\(emptyPartition.text)")
            let bulk = try await admin.send(.post, "/pdb/_bulk_docs", json: #"{"docs": [{"_id": "nocolon"}]}"#)
            #expect(bulk.status == .badRequest && bulk["error"] == "illegal_docid", "\(bulk.text)")
            let replicated = try await admin.send(.post, "/pdb/_bulk_docs",
                                                  json: #"{"new_edits": false, "docs": [{"_id": "nocolon", "_rev": "1-abc"}]}"#)
            #expect(replicated.status == .badRequest, "\(replicated.text)")
            #expect(try await admin.send(.get, "/pdb/nocolon").status == .badRequest)
            #expect(try await admin.send(.put, "/pdb/_local/anything", json: "{}").status == .created)
            #expect(try await admin.send(.put, "/pdb/s9:fine", json: "{}").status == .created)
            // Nothing was written by the refusals.
            #expect(try await admin.send(.get, "/pdb/_partition/s9")["doc_count"] == 1)
            #expect(try await admin.send(.get, "/pdb")["doc_count"] == 56)
        }
    }

    /// `GET /{db}/_partition/{p}`: its documents and deleted documents; a partition starting
    /// with `_` is 400 `illegal_partition`, `POST` is 405 (but for `_…`, CouchDB's 400 first);
    /// a user who reads some channels is told no counts.
    @Test func aPartitionsInfoCountsItsDocuments() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let rev = try #require(try await admin.send(.get, "/pdb/s3:d00")["_rev"]?.stringValue)
            #expect(try await admin.send(.delete, "/pdb/s3:d00?rev=\(rev)").status == .ok)
            let s3 = try await admin.send(.get, "/pdb/_partition/s3")
            #expect(s3.status == .ok && s3["partition"] == "s3" && s3["db_name"] == "pdb", "\(s3.text)")
            #expect(s3["doc_count"] == 4 && s3["doc_del_count"] == 1, "\(s3.text)")
            #expect(try await admin.send(.get, "/pdb/_partition/none")["doc_count"] == 0)
            let under = try await admin.send(.get, "/pdb/_partition/_x")
            #expect(under.status == .badRequest && under["error"] == "illegal_partition", "\(under.text)")
            #expect(try await admin.send(.post, "/pdb/_partition/_x", json: "{}")["error"] == "illegal_partition")
            #expect(try await admin.send(.post, "/pdb/_partition/s1", json: "{}").status == .methodNotAllowed)
            #expect(try await admin.send(.get, "/pdb/_partition").status == .badRequest)
            #expect(try await admin.send(.get, "/pdb/_partition/s1/_changes").status == .notFound)
            let user = try await pub.send(.get, "/pdb/_partition/s3", headers: basic("alice", "pw"))
            #expect(user.status == .ok && user["doc_count"] == nil, "\(user.text)")
        }
    }

    /// A partition's `_all_docs` is its range of IDs: its documents alone, a `start_key` within
    /// it honoured, `total_rows` its count; a `partition` in the query that differs from the
    /// path's is 400.
    @Test func aPartitionsAllDocsReadsItsRange() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let s3 = try await admin.send(.get, "/pdb/_partition/s3/_all_docs")
            #expect(s3.rowIDs == (0 ..< 5).map { "s3:d0\($0)" } && s3["total_rows"] == 5, "\(s3.text)")
            let from = try await admin.send(.get, "/pdb/_partition/s1/_all_docs?start_key=%22s1:d17%22")
            #expect(from.rowIDs == ["s1:d17", "s1:d18", "s1:d19"], "\(from.text)")
            let back = try await admin.send(.get, "/pdb/_partition/s3/_all_docs?descending=true&limit=2")
            #expect(back.rowIDs == ["s3:d04", "s3:d03"], "\(back.text)")
            let viaQuery = try await admin.send(.get, "/pdb/_all_docs?partition=s3")
            #expect(viaQuery.rowIDs.count == 5, "\(viaQuery.text)")
            let conflicting = try await admin.send(.get, "/pdb/_partition/s3/_all_docs?partition=s1")
            #expect(conflicting.status == .badRequest && conflicting["reason"] == "Conflicting value for `partition` in query string")
            // A user: its channels' documents of the partition, and no more as a total.
            let user = try await pub.send(.get, "/pdb/_partition/s3/_all_docs", headers: basic("alice", "pw"))
            #expect(user.rowIDs == ["s3:d00", "s3:d02", "s3:d04"] && user["total_rows"] == 3, "\(user.text)")
        }
    }

    /// A partition's `_find` reads the partition alone: without an index, its range of
    /// documents (`total_docs_examined` is the partition's size, not the database's); with a
    /// partitioned index (the default in a partitioned database), that index's entries of the
    /// partition. Global queries choose among global indexes only, partition queries among
    /// partitioned ones, with CouchDB's words when none can sort.
    @Test func aPartitionsFindReadsThePartitionAlone() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let scan = try await admin.send(.post, "/pdb/_partition/s3/_find", json: #"{"selector": {"n": {"$gte": 102}}, "execution_stats": true}"#)
            #expect(Set(ids(scan)) == ["s3:d02", "s3:d03", "s3:d04"], "\(scan.text)")
            #expect(scan["execution_stats"]?["total_docs_examined"] == 5, "\(scan.text)")
            // The same partition named in the body.
            let body = try await admin.send(.post, "/pdb/_find", json: #"{"selector": {"n": {"$gte": 102}}, "partition": "s3"}"#)
            #expect(Set(ids(body)) == ["s3:d02", "s3:d03", "s3:d04"], "\(body.text)")
            let whole = try await admin.send(.post, "/pdb/_find", json: #"{"selector": {"n": {"$lt": 2}}, "limit": 100}"#)
            #expect(Set(ids(whole)) == ["s1:d00", "s1:d01", "s2:d00", "s2:d01"], "\(whole.text)")

            let made = try await admin.send(.post, "/pdb/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "by-n", "name": "n"}"#)
            #expect(made["result"] == "created", "\(made.text)")
            let ddoc = try await admin.send(.get, "/pdb/_design/by-n")
            #expect(ddoc["options"] == nil || ddoc["options"]?["partitioned"] == true, "\(ddoc.text)")
            let list = try await admin.send(.get, "/pdb/_index")
            #expect(list["indexes"]?.arrayValue?.last?["partitioned"] == true, "\(list.text)")

            let sorted = try await admin.send(.post, "/pdb/_partition/s2/_find",
                                              json: #"{"selector": {"n": {"$gte": 25}}, "sort": ["n"], "execution_stats": true}"#)
            #expect(ids(sorted) == (25 ..< 30).map { "s2:d\($0)" }, "\(sorted.text)")
            // The index's entries of the partition in the range, and no others.
            #expect(sorted["execution_stats"]?["total_keys_examined"] == 5, "\(sorted.text)")
            let explained = try await admin.send(.post, "/pdb/_partition/s2/_explain", json: #"{"selector": {"n": {"$gte": 25}}, "sort": ["n"]}"#)
            #expect(explained["index"]?["name"] == "n" && explained["partitioned"] == true, "\(explained.text)")
            #expect(explained["mrargs"]?["partition"] == "s2" && explained["opts"]?["partition"] == "s2", "\(explained.text)")

            // A global query may not read a partitioned index: it cannot sort by `n`.
            let global = try await admin.send(.post, "/pdb/_find", json: #"{"selector": {"n": {"$gte": 25}}, "sort": ["n"]}"#)
            #expect(global.status == .badRequest && global["error"] == "no_usable_index", "\(global.text)")
            #expect(global["reason"] == "No global index exists for this sort, try indexing by the sort fields.", "\(global.text)")
            let wrongSort = try await admin.send(.post, "/pdb/_partition/s2/_find", json: #"{"selector": {"color": "red"}, "sort": ["color"]}"#)
            #expect(wrongSort["reason"] == "No partitioned index exists for this sort, try indexing by the sort fields.", "\(wrongSort.text)")

            // A global index, asked for, serves the global query.
            let globalIndex = #"{"index": {"fields": ["n"]}, "ddoc": "global-n", "name": "n", "partitioned": false}"#
            #expect(try await admin.send(.post, "/pdb/_index", json: globalIndex)["result"] == "created")
            let nowGlobal = try await admin.send(.post, "/pdb/_find", json: #"{"selector": {"n": {"$gte": 103}}, "sort": ["n"]}"#)
            #expect(ids(nowGlobal) == ["s3:d03", "s3:d04"], "\(nowGlobal.text)")
            // One design document's indexes agree on being partitioned.
            let mismatch = try await admin.send(.post, "/pdb/_index", json: #"{"index": {"fields": ["color"]}, "ddoc": "by-n", "partitioned": false}"#)
            #expect(mismatch.status == .badRequest && mismatch["error"] == "invalid_partitioned_option", "\(mismatch.text)")

            // A user reads its channels' documents of the partition, through the index.
            let user = try await pub.send(.post, "/pdb/_partition/s2/_find", json: #"{"selector": {"n": {"$gte": 25}}, "sort": ["n"]}"#,
                                          headers: basic("alice", "pw"))
            #expect(ids(user) == ["s2:d26", "s2:d28"], "\(user.text)")

            let conflicting = try await admin.send(.post, "/pdb/_partition/s2/_find", json: #"{"selector": {}, "partition": "s1"}"#)
            #expect(conflicting.status == .badRequest, "\(conflicting.text)")
            let badPartition = try await admin.send(.post, "/pdb/_find", json: #"{"selector": {}, "partition": "_x"}"#)
            #expect(badPartition.status == .badRequest && badPartition["error"] == "illegal_partition", "\(badPartition.text)")
        }
    }

    /// Views of a partitioned design document are read one partition at a time (400 "`partition`
    /// parameter is mandatory for queries to this view." otherwise), their keys as emitted;
    /// a global design document's (`options.partitioned: false`) are read whole (400 "`partition`
    /// parameter is not supported in this design doc" for a partition). Reduce, grouping and
    /// `group_level` count the partition's rows alone.
    @Test func partitionedViewsAreReadOnePartitionAtATime() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let ddoc = #"{"views": {"by-color": {"map": "function(doc) { emit([doc.color, doc.n], 1); }", "reduce": "_count"}, "by-n": {"map": "function(doc) { emit(doc.n, null); }"}, "sum": {"map": "function(doc) { emit(doc.color, doc.n); }", "reduce": "function(keys, values, rereduce) { return sum(values); }"}}}"#
            #expect(try await admin.send(.put, "/pdb/_design/app", json: ddoc).status == .created)
            let global = #"{"options": {"partitioned": false}, "views": {"all": {"map": "function(doc) { emit(doc.n, null); }"}}}"#
            #expect(try await admin.send(.put, "/pdb/_design/global", json: global).status == .created)

            let mandatory = try await admin.send(.get, "/pdb/_design/app/_view/by-n")
            #expect(mandatory.status == .badRequest && mandatory["reason"] == "`partition` parameter is mandatory for queries to this view.",
                    "\(mandatory.text)")
            let rows = try await admin.send(.get, "/pdb/_partition/s3/_design/app/_view/by-n")
            #expect(rows.rowIDs == (0 ..< 5).map { "s3:d0\($0)" }, "\(rows.text)")
            #expect(rows.rows.first?["key"] == 100, "\(rows.text)")
            let ranged = try await admin.send(.get, "/pdb/_partition/s1/_design/app/_view/by-n?start_key=15&end_key=17&inclusive_end=false")
            #expect(ranged.rows.compactMap { $0["key"] } == [15, 16], "\(ranged.text)")
            let down = try await admin.send(.get, "/pdb/_partition/s1/_design/app/_view/by-n?descending=true&limit=2")
            #expect(down.rows.compactMap { $0["key"] } == [19, 18], "\(down.text)")
            let keys = try await admin.send(.post, "/pdb/_partition/s1/_design/app/_view/by-n", json: #"{"keys": [3, 104, 1]}"#)
            #expect(keys.rows.compactMap { $0["key"] } == [3, 1], "\(keys.text)")
            let viaQuery = try await admin.send(.get, "/pdb/_design/app/_view/by-n?partition=s3&limit=1")
            #expect(viaQuery.rowIDs == ["s3:d00"], "\(viaQuery.text)")

            let count = try await admin.send(.get, "/pdb/_partition/s2/_design/app/_view/by-color")
            #expect(count.rows.first?["value"] == 30, "\(count.text)")
            let grouped = try await admin.send(.get, "/pdb/_partition/s2/_design/app/_view/by-color?group_level=1")
            #expect(grouped.rows == [["key": ["blue"], "value": 15], ["key": ["red"], "value": 15]], "\(grouped.text)")
            let exact = try await admin.send(.get, "/pdb/_partition/s3/_design/app/_view/by-color?group=true&limit=2")
            #expect(exact.rows == [["key": ["blue", 101], "value": 1], ["key": ["blue", 103], "value": 1]], "\(exact.text)")
            let summed = try await admin.send(.get, "/pdb/_partition/s3/_design/app/_view/sum?group=true")
            #expect(summed.rows == [["key": "blue", "value": 204], ["key": "red", "value": 306]], "\(summed.text)")

            let all = try await admin.send(.get, "/pdb/_design/global/_view/all")
            #expect(all.rows.count == 55, "\(all.text)")
            let refused = try await admin.send(.get, "/pdb/_partition/s1/_design/global/_view/all")
            #expect(refused.status == .badRequest && refused["reason"] == "`partition` parameter is not supported in this design doc",
                    "\(refused.text)")

            // A user: its channels' rows of the partition.
            let user = try await pub.send(.get, "/pdb/_partition/s3/_design/app/_view/by-n", headers: basic("alice", "pw"))
            #expect(user.rowIDs == ["s3:d00", "s3:d02", "s3:d04"], "\(user.text)")
        }
    }

    /// A design document may not be partitioned in a database that is not
    /// (`couch_mrview:validate`), nor may an index ask to be.
    @Test func nothingIsPartitionedInADatabaseThatIsNot() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            let ddoc = #"{"options": {"partitioned": true}, "views": {"v": {"map": "function(doc) { emit(doc.n); }"}}}"#
            let r = try await admin.send(.put, "/db/_design/p", json: ddoc)
            #expect(r.status == .badRequest && r["error"] == "invalid_design_doc", "\(r.text)")
            #expect(r["reason"] == "partitioned option cannot be true in a non-partitioned database.", "\(r.text)")
            let index = try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "partitioned": true}"#)
            #expect(index.status == .badRequest, "\(index.text)")
            let badType = try await admin.send(.put, "/db/_design/q", json: #"{"options": {"partitioned": "yes"}}"#)
            #expect(badType.status == .badRequest, "\(badType.text)")
        }
    }

    /// A user's `_all_docs` pages count only what it may read: `limit` fills the page with its
    /// own documents and `skip` passes over its own, so neither tells where the others are
    /// (whole database and partition alike).
    @Test func aUsersPagesCountOnlyWhatItReads() async throws {
        let server = try channelServer(redChannelConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let alice = basic("alice", "pw")
            let page = try await pub.send(.get, "/pdb/_partition/s1/_all_docs?limit=3", headers: alice)
            #expect(page.rowIDs == ["s1:d00", "s1:d02", "s1:d04"], "\(page.text)")
            let next = try await pub.send(.get, "/pdb/_partition/s1/_all_docs?limit=2&skip=3", headers: alice)
            #expect(next.rowIDs == ["s1:d06", "s1:d08"], "\(next.text)")
            let whole = try await pub.send(.get, "/pdb/_all_docs?limit=2&skip=1&descending=true", headers: alice)
            #expect(whole.rowIDs == ["s3:d02", "s3:d00"], "\(whole.text)")
            let excluded = try await pub.send(.get, "/pdb/_all_docs?limit=2&end_key=%22s1:d04%22&inclusive_end=false", headers: alice)
            #expect(excluded.rowIDs == ["s1:d00", "s1:d02"], "\(excluded.text)")
        }
    }
}
