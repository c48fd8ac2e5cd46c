import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// The steps a CouchDB 3 replicator takes against the server (PEERS.md part B), driven over
/// HTTP: into the server and out of it, conflicts and deletions included.
@Suite struct ReplicationProtocolTests {
    @Test func aReplicationIntoTheServerAndBackOut() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            // 1. Open the peer: update_seq and instance_start_time.
            let info = try await c.send(.get, "/db/")
            #expect(info["update_seq"] != nil && info["instance_start_time"] == "0")
            // 2. The replication log: a miss is a not_found error.
            let miss = try await c.send(.get, "/db/_local/rep-1")
            #expect(miss.status == .notFound && miss["error"] == "not_found")
            // 4. revs_diff: everything is missing on an empty target.
            let diff = try await c.send(.post, "/db/_revs_diff", json: #"{"a":["2-bb","1-aa"],"gone":["2-dd"]}"#)
            #expect(Set(diff["a"]?.objectValue?["missing"]?.arrayValue ?? []) == ["2-bb", "1-aa"], "\(diff.text)")
            #expect(diff["gone"]?.objectValue?["missing"] == ["2-dd"], "\(diff.text)")
            // 6. Write with new_edits=false: histories kept, a deletion, a conflict made on purpose.
            let write = try await c.send(.post, "/db/_bulk_docs", json: """
                {"new_edits": false, "docs": [
                  {"_id": "a", "_rev": "2-bb", "_revisions": {"start": 2, "ids": ["bb", "aa"]}, "v": 2},
                  {"_id": "gone", "_rev": "2-dd", "_revisions": {"start": 2, "ids": ["dd", "cc"]}, "_deleted": true},
                  {"_id": "a", "_rev": "2-zz", "_revisions": {"start": 2, "ids": ["zz", "aa"]}, "v": 3}
                ]}
                """)
            #expect(write.status == .created)
            #expect(try write.json == [])
            // Sent again (a 3.4 replicator may skip revs_diff): accepted, nothing changes.
            #expect(try await c.send(.post, "/db/_bulk_docs", json: #"{"new_edits":false,"docs":[{"_id":"a","_rev":"2-bb","_revisions":{"start":2,"ids":["bb","aa"]},"v":2}]}"#).status == .created)
            let after = try await c.send(.post, "/db/_revs_diff", json: #"{"a":["2-bb","3-new"]}"#)
            #expect(after["a"]?.objectValue?["missing"] == ["3-new"])
            #expect(after["a"]?.objectValue?["possible_ancestors"]?.arrayValue?.isEmpty == false)
            // 7. Checkpoint: _ensure_full_commit, then the log saved with its rev.
            let commit = try await c.send(.post, "/db/_ensure_full_commit", json: "")
            #expect(commit.status == .created && commit["instance_start_time"] == "0")
            let log1 = try await c.send(.put, "/db/_local/rep-1", json: #"{"session_id":"s1","source_last_seq":7,"history":[]}"#)
            let logRev = try #require(log1["rev"]?.stringValue)
            #expect(logRev == "0-1")
            #expect(try await c.send(.put, "/db/_local/rep-1", json: #"{"session_id":"s2"}"#).status == .conflict)
            #expect(try await c.send(.put, "/db/_local/rep-1", json: #"{"_rev":"0-1","session_id":"s2"}"#)["rev"] == "0-2")
            #expect(try await c.send(.get, "/db/_local/rep-1")["session_id"] == "s2")
            // Local documents are neither changes nor all_docs rows.
            let changes = try await c.send(.get, "/db/_changes?style=all_docs")
            let rows = try #require(changes["results"]?.arrayValue)
            #expect(rows.count == 2)
            let a = try #require(rows.first { $0.objectValue?["id"] == "a" }?.objectValue)
            #expect(Set(a["changes"]?.arrayValue?.compactMap { $0.objectValue?["rev"]?.stringValue } ?? []) == ["2-bb", "2-zz"])
            #expect(rows.first { $0.objectValue?["id"] == "gone" }?.objectValue?["deleted"] == true)
            #expect(changes["last_seq"] == 3)
            #expect(try await c.send(.get, "/db/_all_docs")["total_rows"] == 1)

            // And out of the server, as a replicator reading it: changes since 0, bulk_get with
            // histories, open_revs for one document, as JSON and as multipart/mixed.
            let bulkGet = try await c.send(.post, "/db/_bulk_get?revs=true&latest=true",
                                           json: #"{"docs":[{"id":"a","rev":"2-bb"},{"id":"a","rev":"2-zz"},{"id":"gone","rev":"2-dd"},{"id":"nope","rev":"1-x"}]}"#)
            let results = try #require(bulkGet["results"]?.arrayValue)
            #expect(results.count == 4)
            let first = try #require(results[0].objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue)
            #expect(first["_revisions"] == ["start": 2, "ids": ["bb", "aa"]])
            #expect(first["v"] == 2)
            #expect(results[2].objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_deleted"] == true)
            #expect(results[3].objectValue?["docs"]?.arrayValue?.first?.objectValue?["error"]?.objectValue?["error"] == "not_found")
            let open = try await c.send(.get, #"/db/a?revs=true&open_revs=["2-bb","9-missing"]"#)
            let openRows = try #require(try open.json.arrayValue)
            #expect(openRows[0].objectValue?["ok"]?.objectValue?["_rev"] == "2-bb")
            #expect(openRows[1].objectValue?["missing"] == "9-missing")
            let all = try await c.send(.get, "/db/a?open_revs=all", headers: [.accept: "multipart/mixed"])
            #expect(all.headers[.contentType]?.hasPrefix("multipart/mixed; boundary=") == true)
            #expect(all.text.components(separatedBy: "Content-Type: application/json").count == 3)
            // The current revision has its conflict listed.
            let current = try await c.send(.get, "/db/a?conflicts=true")
            #expect(current["_conflicts"]?.arrayValue?.count == 1)
            // Resolve it by deleting the loser, as a client does.
            let loser = try #require(current["_conflicts"]?.arrayValue?.first?.stringValue)
            #expect(try await c.send(.delete, "/db/a?rev=\(loser)").status == .ok)
            #expect(try await c.send(.get, "/db/a?conflicts=true")["_conflicts"] == nil)
        }
    }

    @Test func changesFeedOptions() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient { c async throws in
            for i in 0 ..< 5 { try await c.send(.put, "/db/d\(i)", json: #"{"i":\#(i)}"#) }
            let limited = try await c.send(.get, "/db/_changes?limit=2")
            #expect(limited["results"]?.arrayValue?.count == 2)
            #expect(limited["last_seq"] == 2 && limited["pending"] == 3)
            let since = try await c.send(.get, "/db/_changes?since=3&include_docs=true")
            let rows = try #require(since["results"]?.arrayValue)
            #expect(rows.compactMap { $0.objectValue?["id"]?.stringValue } == ["d3", "d4"])
            #expect(rows[0].objectValue?["doc"]?.objectValue?["i"] == 3)
            #expect(try await c.send(.get, #"/db/_changes?since="4-g1AAAA""#)["results"]?.arrayValue?.count == 1)
            #expect(try await c.send(.get, "/db/_changes?since=now")["results"] == [])
            let descending = try await c.send(.get, "/db/_changes?descending=true&limit=2")
            #expect(descending["results"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == ["d4", "d3"])
            let ids = try await c.send(.post, "/db/_changes?filter=_doc_ids", json: #"{"doc_ids":["d1","d3"]}"#)
            #expect(ids["results"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == ["d1", "d3"])
            let idsGet = try await c.send(.get, #"/db/_changes?filter=_doc_ids&doc_ids=["d2"]"#)
            #expect(idsGet["results"]?.arrayValue?.count == 1)
            // A longpoll with nothing new ends at its timeout with an empty result.
            let longpoll = try await c.send(.get, "/db/_changes?feed=longpoll&since=now&timeout=100")
            #expect(longpoll["results"] == [] && longpoll["last_seq"] == 5)
            // A continuous feed that times out ends with last_seq.
            let continuous = try await c.send(.get, "/db/_changes?feed=continuous&since=3&timeout=100")
            let lines = continuous.text.split(separator: "\n")
            #expect(lines.count == 3)
            #expect(lines.last?.contains("\"last_seq\":5") == true)
        }
    }

    /// Over a real socket: a continuous feed and a longpoll wake when a document is saved.
    @Test func feedsWakeOnCommits() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(.live) { c async throws in
            let port = try #require(c.port)
            // One connection per feed: HTTP/1.1 answers a connection's requests in turn.
            @Sendable func feed(_ uri: String) async throws -> String {
                let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: liveClientTimeout))
                client.connect()
                defer { Task { try? await client.shutdown() } }
                let response = try await client.execute(TestClient.Request(uri, method: .get))
                return response.body.map { String(buffer: $0) } ?? ""
            }
            try await withThrowingTaskGroup(of: String.self) { group in
                // Bounds for a hang, not timings: a loaded two-core machine running the whole suite
                // can take tens of seconds between a feed's start and the write.
                group.addTask { try await feed("/db/_changes?feed=longpoll&since=now&timeout=300000") }
                group.addTask { try await feed("/db/_changes?feed=continuous&since=now&limit=1&timeout=300000") }
                // Once both feeds wait (each registered with the database), commit.
                let served = try #require(server.database(named: "db"))
                for _ in 0 ..< 60000 where served.openFeeds.withLock({ $0.signals.count }) < 2 { try await Task.sleep(for: .milliseconds(5)) }
                #expect(served.openFeeds.withLock({ $0.signals.count }) == 2, "the feeds never started waiting")
                let wrote = try await c.send(.put, "/db/wake", json: #"{"now":true}"#)
                #expect(wrote.status == .created, "\(wrote.text)")
                var bodies: [String] = []
                for try await body in group { bodies.append(body) }
                #expect(bodies.count == 2)
                #expect(bodies.allSatisfy { $0.contains("\"id\":\"wake\"") }, "\(bodies)")
            }
        }
    }
}
