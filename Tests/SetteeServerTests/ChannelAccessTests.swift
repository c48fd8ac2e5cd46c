import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

// MARK: - Helpers (this file only)

/// Resumes one continuation once, whichever of its racers comes first.
private final class FirstAnswer<T: Sendable>: Sendable {
    let continuation = Mutex<CheckedContinuation<T?, any Error>?>(nil)
    func resume(_ result: Swift.Result<T?, any Error>) {
        let c = continuation.withLock { c in
            defer { c = nil }
            return c
        }
        c?.resume(with: result)
    }
}

/// What `operation` returns, or nil if it has not returned within `limit` (it is then left
/// running: a request the server never answers cannot be cancelled from here).
private func answer<T: Sendable>(within limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T? {
    let first = FirstAnswer<T>()
    return try await withCheckedThrowingContinuation { c in
        first.continuation.withLock { $0 = c }
        Task {
            do { first.resume(.success(try await operation())) } catch { first.resume(.failure(error)) }
        }
        Task {
            try? await Task.sleep(for: limit)
            first.resume(.success(nil))
        }
    }
}

private let pw = "pw"


private func user(_ name: String) -> HTTPFields { basic(name, pw) }

/// A feed's `last_seq`, as the text a client sends back as `since`.
private func lastSeq(_ r: TestResponse) throws -> String {
    let v = try #require(r["last_seq"])
    if let s = v.stringValue { return s }
    return try v.jsonText()
}

/// The rows of a user's feed after `since`, by document ID.
private func feed(_ c: any TestClientProtocol, _ who: HTTPFields, since: String = "0", extra: String = "") async throws -> (rows: [String: JSONValue], last: String, all: [JSONValue]) {
    let r = try await c.send(.get, "/db/_changes?since=\(q(since))\(extra)", headers: who)
    #expect(r.status == .ok, "\(r.text)")
    var byID: [String: JSONValue] = [:]
    for row in r.rows { if let id = row["id"]?.stringValue { byID[id] = row } }
    return (byID, try lastSeq(r), r.rows)
}

// MARK: - The access matrix

/// Who may read what, on every read endpoint: a user with the document's channel, one without it,
/// one with `*`, GUEST (enabled, with a channel of its own), and the admin port.
@Suite struct ChannelAccessTests {
    static let config = """
        {"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": false, "admin_channels": ["g"]},
                    "alice": {"password": "pw", "admin_channels": ["a"]},
                    "bob": {"password": "pw", "admin_channels": ["b"]},
                    "star": {"password": "pw", "admin_channels": ["*"]}}}}}
        """

    /// Documents and their channels; all but docAB carry an attachment (docAB takes the
    /// plain-GET fast path).
    static let docs: [String: [String]] = ["docA": ["a"], "docB": ["b"], "docG": ["g"], "docAB": ["a", "b"], "docNone": []]
    static let all = Set(docs.keys)

    struct Viewer: Sendable, CustomStringConvertible {
        var description: String
        var admin: Bool
        var headers: HTTPFields
        var readable: Set<String>
    }

    static let viewers: [Viewer] = [
        Viewer(description: "alice (a)", admin: false, headers: user("alice"), readable: ["docA", "docAB"]),
        Viewer(description: "bob (b)", admin: false, headers: user("bob"), readable: ["docB", "docAB"]),
        Viewer(description: "star (*)", admin: false, headers: user("star"), readable: all),
        Viewer(description: "GUEST (g)", admin: false, headers: [:], readable: ["docG"]),
        Viewer(description: "admin port", admin: true, headers: [:], readable: all),
    ]

    @Test func everyReadEndpointChecksChannels() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            var revs: [String: String] = [:]
            for (id, channels) in Self.docs.sorted(by: { $0.key < $1.key }) {
                var body: [String: JSONValue] = ["channels": .array(channels.map(JSONValue.string)), "tag": .string("body of \(id)")]
                if id != "docAB" {
                    body["_attachments"] = ["note.txt": ["content_type": "text/plain", "data": .string(Data("bytes of \(id)".utf8).base64EncodedString())]]
                }
                revs[id] = try await put(admin, id, try JSONValue.object(body).jsonText())
            }
            for v in Self.viewers {
                try await Self.check(v.admin ? admin : pub, v, revs: revs)
            }
            // COPY reads its source: a document alice may not read is missing for her.
            let copyB = try await pub.execute(uri: "/db/docB", method: HTTPRequest.Method("COPY")!,
                                              headers: adding(user("alice"), HTTPField.Name("Destination")!, "copyB"), body: nil)
            #expect(copyB.status == .notFound && copyB["reason"] == "missing", "\(copyB.text)")
            #expect(try await admin.send(.get, "/db/copyB").status == .notFound)
            let copyA = try await pub.execute(uri: "/db/docA", method: HTTPRequest.Method("COPY")!,
                                              headers: adding(user("alice"), HTTPField.Name("Destination")!, "copyA"), body: nil)
            #expect(copyA.status == .created, "\(copyA.text)")
            #expect(try await pub.send(.get, "/db/copyA", headers: user("alice"))["tag"] == "body of docA")
        }
    }

    static func check(_ c: any TestClientProtocol, _ v: Viewer, revs: [String: String]) async throws {
        let ids = all.sorted()
        let h = v.headers
        for id in ids {
            let can = v.readable.contains(id)
            let rev = try #require(revs[id])
            // GET, GET ?rev=
            for uri in ["/db/\(id)", "/db/\(id)?rev=\(rev)"] {
                let r = try await c.send(.get, uri, headers: h)
                if can {
                    #expect(r.status == .ok && r["_id"] == .string(id) && r["tag"] == .string("body of \(id)"), "\(v) \(uri): \(r.status) \(r.text)")
                } else {
                    // Exactly as a document that does not exist.
                    #expect(r.status == .notFound && r["error"] == "not_found" && r["reason"] == "missing", "\(v) \(uri): \(r.status) \(r.text)")
                }
            }
            // open_revs=all and open_revs=[rev], as JSON
            for spec in ["all", q("[\"\(rev)\"]")] {
                let r = try await c.send(.get, "/db/\(id)?open_revs=\(spec)", headers: adding(h, .accept, "application/json"))
                if !can && spec == "all" {
                    #expect(r.status == .notFound && r["reason"] == "missing", "\(v) open_revs all of \(id): \(r.status) \(r.text)")
                    continue
                }
                #expect(r.status == .ok, "\(v) open_revs \(spec) of \(id): \(r.status)")
                let entries = (try? r.json)?.arrayValue ?? []
                #expect(entries.count == 1, "\(v) open_revs \(spec) of \(id): \(r.text)")
                if can {
                    #expect(entries.first?["ok"]?["_id"] == .string(id) && entries.first?["ok"]?["_rev"] == .string(rev)
                            && entries.first?["ok"]?["tag"] == .string("body of \(id)") && entries.first?["ok"]?["_removed"] == nil,
                            "\(v) open_revs \(spec) of \(id): \(r.text)")
                } else {
                    #expect(entries.first?["ok"] == nil && entries.first?["missing"] == .string(rev),
                            "\(v) open_revs \(spec) of \(id): \(r.text)")
                }
            }
            // Attachment
            if id != "docAB" {
                let r = try await c.send(.get, "/db/\(id)/note.txt", headers: h)
                if can {
                    #expect(r.status == .ok && r.text == "bytes of \(id)", "\(v) attachment of \(id): \(r.status) \(r.text)")
                } else {
                    #expect(r.status == .notFound && r["error"] == "not_found" && !r.text.contains("bytes of"),
                            "\(v) attachment of \(id): \(r.status) \(r.text)")
                }
            }
        }
        // _bulk_get, every document in one request
        let bulk = try await c.send(.post, "/db/_bulk_get", json: try JSONValue.object(["docs": .array(ids.map { ["id": .string($0)] })]).jsonText(),
                                    headers: adding(h, .accept, "application/json"))
        #expect(bulk.status == .ok, "\(v) _bulk_get: \(bulk.text)")
        let results = bulk["results"]?.arrayValue ?? []
        #expect(results.compactMap { $0["id"]?.stringValue } == ids, "\(v) _bulk_get: \(bulk.text)")
        for item in results {
            guard let id = item["id"]?.stringValue else { continue }
            let answer = item["docs"]?[0]
            if v.readable.contains(id) {
                #expect(answer?["ok"]?["_id"] == .string(id) && answer?["ok"]?["tag"] == .string("body of \(id)"), "\(v) _bulk_get \(id): \(item)")
            } else {
                #expect(answer?["ok"] == nil && answer?["error"]?["error"] == "not_found" && answer?["error"]?["rev"] == .null,
                        "\(v) _bulk_get \(id): \(item)")
            }
        }
        // _all_docs: plain, keys (GET and POST), include_docs
        let plain = try await c.send(.get, "/db/_all_docs", headers: h)
        #expect(plain.status == .ok && plain.rowIDs == v.readable.sorted(), "\(v) _all_docs: \(plain.text)")
        // Its total is what it may read, never the database's count.
        #expect(plain["total_rows"] == .int(Int64(v.readable.count)), "\(v) _all_docs total_rows: \(plain.text)")
        let keysJSON = try JSONValue.array(ids.map(JSONValue.string)).jsonText()
        let byKeys = try await c.send(.get, "/db/_all_docs?keys=\(q(keysJSON))", headers: h)
        let byKeysPost = try await c.send(.post, "/db/_all_docs", json: "{\"keys\": \(keysJSON)}", headers: h)
        for r in [byKeys, byKeysPost] {
            #expect(r.status == .ok && r.rows.count == ids.count, "\(v) _all_docs keys: \(r.text)")
            for (id, row) in zip(ids, r.rows) {
                if v.readable.contains(id) {
                    #expect(row["id"] == .string(id) && row["value"]?["rev"] == .string(revs[id] ?? ""), "\(v) _all_docs keys \(id): \(row)")
                } else {
                    #expect(row["key"] == .string(id) && row["error"] == "not_found" && row["value"] == nil, "\(v) _all_docs keys \(id): \(row)")
                }
            }
        }
        let withDocs = try await c.send(.get, "/db/_all_docs?include_docs=true", headers: h)
        #expect(withDocs.rowIDs == v.readable.sorted(), "\(v) _all_docs include_docs: \(withDocs.text)")
        for row in withDocs.rows {
            #expect(row["doc"]?["tag"] == .string("body of \(row["id"]?.stringValue ?? "")"), "\(v) _all_docs include_docs: \(row)")
        }
        // _changes: normal, include_docs, longpoll
        let changes = try await c.send(.get, "/db/_changes", headers: h)
        #expect(changes.status == .ok && Set(changes.rowIDs) == v.readable && changes.rowIDs.count == v.readable.count,
                "\(v) _changes: \(changes.text)")
        #expect(changes.rows.allSatisfy { $0["removed"] == nil }, "\(v) _changes: \(changes.text)")
        let changesDocs = try await c.send(.get, "/db/_changes?include_docs=true", headers: h)
        #expect(Set(changesDocs.rowIDs) == v.readable, "\(v) _changes include_docs: \(changesDocs.text)")
        for row in changesDocs.rows {
            let id = row["id"]?.stringValue ?? ""
            #expect(row["doc"]?["_id"] == .string(id) && row["doc"]?["tag"] == .string("body of \(id)"), "\(v) _changes include_docs: \(row)")
        }
        let longpoll = try await c.send(.get, "/db/_changes?feed=longpoll&since=0&timeout=5000", headers: h)
        #expect(longpoll.status == .ok && Set(longpoll.rowIDs) == v.readable, "\(v) longpoll: \(longpoll.text)")
        // A continuous feed (ended by its timeout): one line per row, then last_seq.
        let continuous = try await c.send(.get, "/db/_changes?feed=continuous&since=0&timeout=300", headers: h)
        let lines = continuous.text.split(separator: "\n").compactMap { try? JSONValue(parsing: Array($0.utf8)) }
        #expect(continuous.status == .ok && lines.last?["last_seq"] != nil, "\(v) continuous: \(continuous.text)")
        let streamed = lines.compactMap { $0["id"]?.stringValue }
        #expect(Set(streamed) == v.readable && streamed.count == v.readable.count, "\(v) continuous: \(continuous.text)")
    }

    /// A longpoll of a user waits through writes it may not read and wakes for the one it may.
    @Test func aLongpollWakesOnlyForTheUsersChannels() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await put(admin, "first", #"{"channels": ["a"]}"#)
            let since = try lastSeq(try await pub.send(.get, "/db/_changes", headers: user("alice")))
            let served = try #require(server.database(named: "db"))
            let poll = Task {
                try await pub.send(.get, "/db/_changes?feed=longpoll&since=\(since)&timeout=600000", headers: user("alice"))
            }
            // Once the longpoll waits, a write it may not read, then one it may: it answers with
            // that one alone (an answer at the first write would list nothing; a timeout, nothing).
            for _ in 0 ..< 60_000 where served.openFeeds.withLock({ $0.signals.count }) == 0 { try await Task.sleep(for: .milliseconds(10)) }
            try await put(admin, "forB", #"{"channels": ["b"]}"#)
            try await put(admin, "forA", #"{"channels": ["a"]}"#)
            let r = try await poll.value
            #expect(r.status == .ok)
            #expect(r.rowIDs == ["forA"], "\(r.text)")
        }
    }

    // MARK: - Removal

    /// A document that leaves one of the user's channels: `_removed` on every read of it, a
    /// `removed` row in its feed, gone from `_all_docs`; a tombstone stays in its channel.
    @Test func aDocumentThatLeavesAChannelIsRemovedForItsReaders() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            let alice = user("alice")
            try await put(admin, "d1", #"{"channels": ["a"], "n": 1}"#)
            let d2rev = try await put(admin, "d2", #"{"channels": ["a"], "n": 2}"#)
            try await put(admin, "d3", #"{"channels": ["b"], "n": 3}"#)
            let before = try await feed(pub, alice)
            #expect(Set(before.rows.keys) == ["d1", "d2"])
            // d1 moves to b.
            let old = try await currentRev(admin, "d1")
            let moved = try await put(admin, "d1", #"{"_rev": "\#(old)", "channels": ["b"], "n": 10}"#)
            // GET: the stub, nothing of the body.
            let get = try await pub.send(.get, "/db/d1", headers: alice)
            #expect(get.status == .ok)
            #expect(try get.json == ["_id": "d1", "_rev": .string(moved), "_removed": true], "\(get.text)")
            let open = try await pub.send(.get, "/db/d1?open_revs=all", headers: adding(alice, .accept, "application/json"))
            #expect(try open.json == [["ok": ["_id": "d1", "_rev": .string(moved), "_removed": true]]], "\(open.text)")
            let openRev = try await pub.send(.get, "/db/d1?open_revs=\(q("[\"\(moved)\"]"))", headers: adding(alice, .accept, "application/json"))
            #expect(try openRev.json == [["ok": ["_id": "d1", "_rev": .string(moved), "_removed": true]]], "\(openRev.text)")
            let bulk = try await pub.send(.post, "/db/_bulk_get", json: #"{"docs": [{"id": "d1"}, {"id": "d2"}]}"#, headers: alice)
            let results = bulk["results"]?.arrayValue ?? []
            #expect(results.first?["docs"]?[0]?["ok"] == ["_id": "d1", "_rev": .string(moved), "_removed": true], "\(bulk.text)")
            #expect(results.last?["docs"]?[0]?["ok"]?["n"] == 2)
            // The attachment-less document's body never leaks, through any read.
            for r in [get, open, openRev, bulk] { #expect(!r.text.contains("\"n\":10") && !r.text.contains("\"n\": 10")) }
            // A document alice never read is forbidden, not removed.
            #expect(try await pub.send(.get, "/db/d3", headers: alice).status == .notFound)
            // bob reads d1 in full.
            #expect(try await pub.send(.get, "/db/d1", headers: user("bob"))["n"] == 10)
            // _all_docs: only d2.
            #expect(try await pub.send(.get, "/db/_all_docs", headers: alice).rowIDs == ["d2"])
            // The feed from before the move: one removal row for d1 at its new revision.
            let after = try await feed(pub, alice, since: before.last)
            #expect(after.all.count == 1, "\(after.all)")
            #expect(after.rows["d1"]?["removed"] == ["a"])
            #expect(after.rows["d1"]?["changes"]?[0]?["rev"] == .string(moved))
            #expect(after.rows["d1"]?["seq"]?.intValue != nil, "a removal by an edit is a plain sequence")
            // From the start: d2 as it is, d1 removed.
            let fromStart = try await feed(pub, alice)
            #expect(fromStart.rows["d2"]?["removed"] == nil && fromStart.rows["d1"]?["removed"] == ["a"])
            // include_docs: the stub in place of the body.
            let withDocs = try await feed(pub, alice, since: before.last, extra: "&include_docs=true")
            #expect(withDocs.rows["d1"]?["doc"] == ["_id": "d1", "_rev": .string(moved), "_removed": true])
            // bob's feed has d1 as a plain change.
            let bobs = try await feed(pub, user("bob"))
            #expect(bobs.rows["d1"] != nil && bobs.rows["d1"]?["removed"] == nil)
            // A tombstone keeps its channels: alice's feed sends d2's deletion (not a removal).
            let del = try await admin.send(.delete, "/db/d2?rev=\(d2rev)")
            #expect(del.status == .ok)
            let deletion = try await feed(pub, alice, since: after.last)
            #expect(deletion.all.count == 1 && deletion.rows["d2"]?["deleted"] == true && deletion.rows["d2"]?["removed"] == nil,
                    "\(deletion.all)")
            // The tombstone is alice's 404, not a 403.
            #expect(try await pub.send(.get, "/db/d2", headers: alice).status == .notFound)
        }
    }

    /// A channel the user loses: its documents are `_removed` for the user, and a feed from a
    /// position that had them sends removal rows (`R:N`); a new client gets nothing of them. A
    /// channel granted later: its older documents come as `G:N` rows, once.
    @Test func channelsLostAndGrantedByTheAdministrator() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            let alice = user("alice")
            #expect(try await admin.send(.put, "/db/_user/alice", json: #"{"admin_channels": ["a", "c"]}"#).status == .ok)
            try await put(admin, "a1", #"{"channels": ["a"]}"#)
            try await put(admin, "c1", #"{"channels": ["c"]}"#)
            try await put(admin, "c2", #"{"channels": ["c"]}"#)
            try await put(admin, "d1", #"{"channels": ["d"]}"#)
            try await put(admin, "d2", #"{"channels": ["d"]}"#)
            let first = try await feed(pub, alice)
            #expect(Set(first.rows.keys) == ["a1", "c1", "c2"])
            let since = try #require(Int(first.last))

            // Lost: c.
            #expect(try await admin.send(.put, "/db/_user/alice", json: #"{"admin_channels": ["a"]}"#).status == .ok)
            #expect(try await admin.send(.get, "/db/_user/alice")["all_channels"] == ["!", "a"])
            let c1 = try await currentRev(admin, "c1")
            #expect(try await pub.send(.get, "/db/c1", headers: alice).json == ["_id": "c1", "_rev": .string(c1), "_removed": true])
            #expect(try await pub.send(.get, "/db/d1", headers: alice).status == .notFound)
            let lost = try await feed(pub, alice, since: first.last)
            #expect(Set(lost.rows.keys) == ["c1", "c2"], "\(lost.all)")
            for id in ["c1", "c2"] {
                let row = lost.rows[id]
                #expect(row?["removed"] == ["c"], "\(String(describing: row))")
                let seq = row?["seq"]?.stringValue ?? ""
                let parts = seq.split(separator: ":").compactMap { Int($0) }
                #expect(parts.count == 2 && parts[0] > since && parts[1] <= since, "removal at R:N with N the client's: \(seq)")
            }
            // The same feed from its end: nothing more; a client that never had them gets none.
            #expect(try await feed(pub, alice, since: lost.last).all.isEmpty)
            let fresh = try await feed(pub, alice)
            #expect(Set(fresh.rows.keys) == ["a1"], "\(fresh.all)")

            // Granted: d, whose documents are older than alice's position.
            #expect(try await admin.send(.put, "/db/_user/alice", json: #"{"admin_channels": ["a", "d"]}"#).status == .ok)
            let session = try await pub.send(.get, "/db/_session", headers: alice)
            let grantedAt = try #require(session["userCtx"]?["channels"]?["d"]?.intValue)
            #expect(grantedAt > since)
            let granted = try await feed(pub, alice, since: lost.last)
            #expect(Set(granted.rows.keys) == ["d1", "d2"], "\(granted.all)")
            for id in ["d1", "d2"] {
                let seq = granted.rows[id]?["seq"]?.stringValue ?? ""
                #expect(seq.hasPrefix("\(grantedAt):"), "backfill at G:N: \(seq)")
                #expect(granted.rows[id]?["removed"] == nil)
            }
            #expect(try await pub.send(.get, "/db/d1", headers: alice).status == .ok)
            // Once: the feed from its end sends nothing again.
            #expect(try await feed(pub, alice, since: granted.last).all.isEmpty)
            // A limit of one walks the backfill one G:N row at a time.
            let one = try await feed(pub, alice, since: lost.last, extra: "&limit=1")
            #expect(one.all.count == 1 && one.last.contains(":"), "\(one.all) \(one.last)")
            let two = try await feed(pub, alice, since: one.last, extra: "&limit=1")
            #expect(two.all.count == 1 && Set(one.rows.keys).union(two.rows.keys) == ["d1", "d2"], "\(two.all)")
        }
    }

    // MARK: - Computed channels, roles and grants

    static let syncConfig = """
        {"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true},
                    "alice": {"password": "pw", "admin_channels": ["a"]},
                    "vaultie": {"password": "pw", "admin_channels": ["a", "vault"]},
                    "carol": {"password": "pw", "admin_channels": ["own"], "admin_roles": ["editors"]}},
          "roles": {"editors": {"admin_channels": ["ed"]}, "readers": {"admin_channels": ["rd"]}},
          "sync": `function(doc, oldDoc) {
              if (doc.type == "grant") { access(doc.to, doc.grants); }
              if (doc.type == "membership") { role(doc.user, doc.roles); }
              if (doc.type == "secret") { requireAccess("vault"); }
              if (doc.owner) { requireUser(doc.owner); }
              if (doc.type == "banned") { throw({forbidden: "banned: " + doc._id}); }
              if (doc.type == "anonymous") { throw({unauthorized: "sign in first"}); }
              channel(doc.channels);
          }`}}}
        """

    /// `_session` and admin `_user` give the computed channels: admin channels, roles' channels,
    /// `access()` grants to the user and to its roles, and `role()` grants.
    @Test func sessionAndUserShowComputedChannels() async throws {
        let server = try channelServer(Self.syncConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            let carol = user("carol")
            let initial = try await admin.send(.get, "/db/_user/carol")
            #expect(initial["all_channels"] == ["!", "ed", "own"], "\(initial.text)")
            #expect(initial["roles"] == ["editors"])
            try await put(admin, "g1", #"{"type": "grant", "to": "carol", "grants": ["acc"]}"#)
            try await put(admin, "g2", #"{"type": "grant", "to": "role:readers", "grants": ["rc"]}"#)
            try await put(admin, "m1", #"{"type": "membership", "user": "carol", "roles": ["role:readers"]}"#)
            func seq(_ id: String) async throws -> Int {
                try #require(try await admin.send(.get, "/db/\(id)?local_seq=true")["_local_seq"]?.intValue)
            }
            let g1 = try await seq("g1"), m1 = try await seq("m1")
            let computed = try await admin.send(.get, "/db/_user/carol")
            #expect(computed["all_channels"] == ["!", "acc", "ed", "own", "rc", "rd"], "\(computed.text)")
            #expect(computed["admin_channels"] == ["own"])
            #expect(computed["roles"] == ["editors", "readers"])
            let session = try await pub.send(.get, "/db/_session", headers: carol)
            #expect(session["userCtx"]?["name"] == "carol")
            #expect(session["userCtx"]?["roles"] == ["editors", "readers"])
            let channels = try #require(session["userCtx"]?["channels"]?.objectValue, "\(session.text)")
            #expect(channels == ["!": 0, "own": 0, "ed": 0, "acc": .int(Int64(g1)), "rd": .int(Int64(m1)), "rc": .int(Int64(m1))],
                    "\(session.text)")
            // Those channels are what carol reads.
            for (id, ch) in [("in-acc", "acc"), ("in-rc", "rc"), ("in-rd", "rd"), ("in-ed", "ed"), ("in-zz", "zz")] {
                try await put(admin, id, #"{"channels": ["\#(ch)"]}"#)
            }
            for id in ["in-acc", "in-rc", "in-rd", "in-ed"] {
                #expect(try await pub.send(.get, "/db/\(id)", headers: carol).status == .ok, "\(id)")
            }
            #expect(try await pub.send(.get, "/db/in-zz", headers: carol).status == .notFound)
            // alice has none of it.
            #expect(try await pub.send(.get, "/db/in-acc", headers: user("alice")).status == .notFound)
            // The grant withdrawn: acc gone, its document removed for carol.
            let g1rev = try await currentRev(admin, "g1")
            try await put(admin, "g1", #"{"_rev": "\#(g1rev)", "type": "grant", "to": "carol", "grants": []}"#)
            #expect(try await admin.send(.get, "/db/_user/carol")["all_channels"] == ["!", "ed", "own", "rc", "rd"])
            #expect(try await pub.send(.get, "/db/in-acc", headers: carol)["_removed"] == true)
            // The membership withdrawn: the role's channels go with it.
            let m1rev = try await currentRev(admin, "m1")
            #expect(try await admin.send(.delete, "/db/m1?rev=\(m1rev)").status == .ok)
            let after = try await admin.send(.get, "/db/_user/carol")
            #expect(after["all_channels"] == ["!", "ed", "own"], "\(after.text)")
            #expect(after["roles"] == ["editors"])
            #expect(try await pub.send(.get, "/db/in-rc", headers: carol)["_removed"] == true)
            #expect(try await pub.send(.get, "/db/in-ed", headers: carol).status == .ok)
        }
    }

    /// `filter=sync_gateway/bychannel` narrows a feed to the requested channels among the user's.
    @Test func theByChannelFilterIntersectsWithTheUsersChannels() async throws {
        let server = try channelServer("""
            {"databases": {"db": {"server": "walrus:",
              "users": {"ab": {"password": "pw", "admin_channels": ["a", "b"]},
                        "star": {"password": "pw", "admin_channels": ["*"]}}}}}
            """)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            for (id, ch) in [("inA", #"["a"]"#), ("inB", #"["b"]"#), ("inC", #"["c"]"#), ("inBC", #"["b", "c"]"#), ("none", "[]")] {
                try await put(admin, id, #"{"channels": \#(ch)}"#)
            }
            func ids(_ c: any TestClientProtocol, _ h: HTTPFields, _ query: String) async throws -> Set<String> {
                let r = try await c.send(.get, "/db/_changes\(query)", headers: h)
                #expect(r.status == .ok, "\(query): \(r.text)")
                return Set(r.rowIDs)
            }
            let bychannel = "?filter=sync_gateway/bychannel&channels="
            #expect(try await ids(pub, user("ab"), "") == ["inA", "inB", "inBC"])
            #expect(try await ids(pub, user("ab"), bychannel + "b,c") == ["inB", "inBC"])
            #expect(try await ids(pub, user("ab"), bychannel + "c") == [])
            #expect(try await ids(pub, user("ab"), bychannel + "a") == ["inA"])
            #expect(try await ids(pub, user("star"), "") == ["inA", "inB", "inC", "inBC", "none"])
            #expect(try await ids(pub, user("star"), bychannel + "c") == ["inC", "inBC"])
            #expect(try await ids(admin, [:], bychannel + "c") == ["inC", "inBC"])
            #expect(try await ids(admin, [:], bychannel + "a,b") == ["inA", "inB", "inBC"])
            // The same as a POST body and as a longpoll.
            let post = try await pub.send(.post, "/db/_changes", json: #"{"filter": "sync_gateway/bychannel", "channels": "b,c"}"#, headers: user("ab"))
            #expect(Set(post.rowIDs) == ["inB", "inBC"], "\(post.text)")
            #expect(try await ids(pub, user("ab"), bychannel + "b,c&feed=longpoll&timeout=3000") == ["inB", "inBC"])
            // No channels: 400.
            #expect(try await pub.send(.get, "/db/_changes?filter=sync_gateway/bychannel", headers: user("ab")).status == .badRequest)
        }
    }

    // MARK: - The sync function from the configuration

    /// `throw({forbidden})`, `throw({unauthorized})`, `requireAccess` and `requireUser` on PUT,
    /// and per document in `_bulk_docs` (new_edits true and false): the rest is saved.
    @Test func syncFunctionRejectionsPerDocument() async throws {
        let server = try channelServer(Self.syncConfig)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            let alice = user("alice")
            func putAs(_ h: HTTPFields, _ id: String, _ json: String, on c: any TestClientProtocol) async throws -> TestResponse {
                try await c.send(.put, "/db/\(id)", json: json, headers: h)
            }
            // requireAccess("vault")
            let secret = try await putAs(alice, "s1", #"{"type": "secret", "channels": ["a"]}"#, on: pub)
            #expect(secret.status == .forbidden && secret["error"] == "forbidden" && secret["reason"] == "missing channel access", "\(secret.text)")
            #expect(try await putAs(user("vaultie"), "s2", #"{"type": "secret", "channels": ["a"]}"#, on: pub).status == .created)
            #expect(try await putAs([:], "s3", #"{"type": "secret"}"#, on: admin).status == .created, "every require… passes on the admin port")
            // requireUser(doc.owner)
            #expect(try await putAs(alice, "o1", #"{"owner": "alice", "channels": ["a"]}"#, on: pub).status == .created)
            let wrongOwner = try await putAs(alice, "o2", #"{"owner": "bob"}"#, on: pub)
            #expect(wrongOwner.status == .forbidden && wrongOwner["reason"] == "wrong user", "\(wrongOwner.text)")
            #expect(try await putAs([:], "o3", #"{"owner": "bob"}"#, on: admin).status == .created)
            // throw({forbidden}) refuses everyone, the admin port included; throw({unauthorized}) is a 401.
            let banned = try await putAs(alice, "b1", #"{"type": "banned"}"#, on: pub)
            #expect(banned.status == .forbidden && banned["reason"] == "banned: b1", "\(banned.text)")
            #expect(try await putAs([:], "b2", #"{"type": "banned"}"#, on: admin).status == .forbidden)
            let anonymous = try await putAs(alice, "u1", #"{"type": "anonymous"}"#, on: pub)
            #expect(anonymous.status == .unauthorized && anonymous["error"] == "unauthorized" && anonymous["reason"] == "sign in first",
                    "\(anonymous.text)")
            for id in ["s1", "o2", "b1", "b2", "u1"] {
                #expect(try await admin.send(.get, "/db/\(id)").status == .notFound, "\(id) was not saved")
            }

            // _bulk_docs: each refusal answers its document, the rest are saved.
            let bulk = try await pub.send(.post, "/db/_bulk_docs", json: """
                {"docs": [{"_id": "k1", "channels": ["a"]},
                          {"_id": "k2", "type": "secret"},
                          {"_id": "k3", "owner": "bob"},
                          {"_id": "k4", "type": "banned"},
                          {"_id": "k5", "type": "anonymous"},
                          {"_id": "k6", "owner": "alice", "channels": ["a"]}]}
                """, headers: alice)
            #expect(bulk.status == .created)
            let rows = try #require(try bulk.json.arrayValue, "\(bulk.text)")
            #expect(rows.count == 6)
            #expect(rows.map { $0["id"]?.stringValue ?? "" } == ["k1", "k2", "k3", "k4", "k5", "k6"])
            #expect(rows[0]["ok"] == true && rows[5]["ok"] == true, "\(bulk.text)")
            #expect(rows[1]["error"] == "forbidden" && rows[1]["reason"] == "missing channel access")
            #expect(rows[2]["error"] == "forbidden" && rows[2]["reason"] == "wrong user")
            #expect(rows[3]["error"] == "forbidden" && rows[3]["reason"] == "banned: k4")
            #expect(rows[4]["error"] == "unauthorized" && rows[4]["reason"] == "sign in first")
            for (id, saved) in [("k1", true), ("k2", false), ("k3", false), ("k4", false), ("k5", false), ("k6", true)] {
                #expect(try await admin.send(.get, "/db/\(id)").status == (saved ? .ok : .notFound), "\(id)")
            }

            // new_edits=false (a replicator's upload): the refused revisions are listed, the rest stored.
            func rev(_ n: Int) -> String { "1-" + String(repeating: String(n), count: 32) }
            let replicated = try await pub.send(.post, "/db/_bulk_docs", json: """
                {"new_edits": false, "docs": [
                    {"_id": "r1", "_rev": "\(rev(1))", "channels": ["a"]},
                    {"_id": "r2", "_rev": "\(rev(2))", "type": "secret"},
                    {"_id": "r3", "_rev": "\(rev(3))", "type": "banned"},
                    {"_id": "r4", "_rev": "\(rev(4))", "type": "anonymous"},
                    {"_id": "r5", "_rev": "\(rev(5))", "owner": "bob"},
                    {"_id": "r6", "_rev": "\(rev(6))", "channels": ["a"]}]}
                """, headers: alice)
            #expect(replicated.status == .created)
            let refused = try #require(try replicated.json.arrayValue, "\(replicated.text)")
            let byID = Dictionary(refused.compactMap { r in r["id"]?.stringValue.map { ($0, r) } }, uniquingKeysWith: { a, _ in a })
            #expect(Set(byID.keys) == ["r2", "r3", "r4", "r5"], "\(replicated.text)")
            #expect(byID["r2"]?["error"] == "forbidden" && byID["r2"]?["rev"] == .string(rev(2)) && byID["r2"]?["reason"] == "missing channel access")
            #expect(byID["r3"]?["error"] == "forbidden" && byID["r3"]?["reason"] == "banned: r3")
            #expect(byID["r4"]?["error"] == "unauthorized" && byID["r4"]?["reason"] == "sign in first")
            #expect(byID["r5"]?["error"] == "forbidden" && byID["r5"]?["reason"] == "wrong user")
            #expect(try await admin.send(.get, "/db/r1")["_rev"] == .string(rev(1)))
            #expect(try await admin.send(.get, "/db/r6")["_rev"] == .string(rev(6)))
            for id in ["r2", "r3", "r4", "r5"] { #expect(try await admin.send(.get, "/db/\(id)").status == .notFound, "\(id)") }
            // What alice saved is hers to read.
            #expect(try await pub.send(.get, "/db/r6", headers: alice).status == .ok)
        }
    }

    /// A sync function that never returns is stopped after its time limit: that write is refused
    /// naming the function, and the server goes on serving.
    ///
    /// Run in a `settee serve` process of its own, with clients that give up after 60 s: should a
    /// function not be stopped, its write never ends, and the test fails and kills that process
    /// rather than hang the run or share its JavaScriptCore with the other tests' servers.
    @Test(.timeLimit(.minutes(5))) func aSyncFunctionThatLoopsForeverIsStopped() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("settee-spin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let configURL = root.appendingPathComponent("config.json")
        try Data("""
            {"interface": "127.0.0.1:0", "adminInterface": "127.0.0.1:0", "log": [],
             "databases": {"db": {"server": "walrus:",
              "users": {"alice": {"password": "pw", "admin_channels": ["a"]}},
              "sync": `function(doc) {
                  if (doc.spin) { while (true) {} }
                  channel(doc.channels);
              }`}}}
            """.utf8).write(to: configURL)
        let process = try KillRecoveryTests.ServeProcess.launch(try KillRecoveryTests.setteeExecutable(), config: configURL, in: root)
        defer { process.forceKill() }
        let publicPort = try await process.publicPort()
        let line = try #require(process.stdoutText.split(separator: "\n").first { $0.hasPrefix("settee: serving ") })
        let adminPort = try #require(line.range(of: ", admin port ").flatMap { Int(line[$0.upperBound...].prefix { $0.isNumber }) })
        let pub = TestClient(host: "127.0.0.1", port: publicPort, configuration: .init(timeout: liveClientTimeout))
        let admin = TestClient(host: "127.0.0.1", port: adminPort, configuration: .init(timeout: liveClientTimeout))
        pub.connect()
        admin.connect()
        struct Answer: Sendable {
            var status: HTTPResponse.Status
            var body: JSONValue?
            var text: String
        }
        @Sendable func send(_ c: TestClient, _ method: HTTPRequest.Method, _ uri: String, _ json: String? = nil,
                            _ headers: HTTPFields = [:]) async throws -> Answer {
            var h = headers
            if json != nil { h[.contentType] = "application/json" }
            let r = try await c.execute(.init(uri, method: method, authority: "127.0.0.1", headers: h, body: json.map { ByteBuffer(string: $0) }))
            let text = r.body.map { String(buffer: $0) } ?? ""
            return Answer(status: r.status, body: try? JSONValue(parsing: Array(text.utf8)), text: text)
        }
        let started = ContinuousClock.now
        guard let spin = try await answer(within: .seconds(60), { try await send(pub, .put, "/db/spin", #"{"spin": true}"#, user("alice")) }) else {
            Issue.record("the looping sync function was not stopped: no answer in \(ContinuousClock.now - started)")
            return   // the writer is stuck in JavaScript for good: the process is killed
        }
        #expect(spin.status == .forbidden, "\(spin.text)")
        #expect(spin.body?["reason"]?.stringValue?.contains("sync function") == true, "\(spin.text)")
        // Served on: reads, and writes through the same function.
        #expect(try await send(pub, .get, "/db", nil, user("alice")).status == .ok)
        #expect(try await send(pub, .put, "/db/fine", #"{"channels": ["a"]}"#, user("alice")).status == .created)
        #expect(try await send(pub, .get, "/db/fine", nil, user("alice")).status == .ok)
        #expect(try await send(admin, .get, "/db/spin").status == .notFound)
        // The admin port's writes run it too.
        guard let spin2 = try await answer(within: .seconds(60), { try await send(admin, .put, "/db/spin2", #"{"spin": true}"#) }) else {
            Issue.record("the looping sync function was not stopped on the admin port")
            return
        }
        #expect(spin2.status == .forbidden, "\(spin2.text)")
        #expect(try await send(admin, .put, "/db/fine2", #"{"channels": ["a"]}"#).status == .created)
        try await pub.shutdown()
        try await admin.shutdown()
        process.signal(SIGTERM)
        let stopped = try await process.waitForExit()
        #expect(stopped == .exited(0), "after SIGTERM the server \(stopped); stderr: \(process.stderrText)")
    }

    /// A sync function that does not compile stops the server's start, naming the line.
    @Test func aSyncFunctionWithASyntaxErrorStopsTheStart() throws {
        let config = try ServerConfiguration(json: """
            {"databases": {"db": {"server": "walrus:",
              "sync": `function(doc) {
                  channel(doc.channels);
                  var x = ;
              }`}}}
            """)
        #expect(config.databases["db"]?.sync?.contains("var x = ;") == true)
        var c = config
        c.interface = "127.0.0.1:0"
        c.adminInterface = nil
        c.log = []
        do {
            let server = try SetteeServer(configuration: c)
            try? server.close()
            Issue.record("the server started with a broken sync function")
        } catch let error as ConfigurationError {
            #expect(error.path == "databases.db.sync", "\(error)")
            #expect(error.description.contains("line 3"), "\(error)")
        }
        // An unclosed back-tick is the configuration's own error.
        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration(json: #"{"databases": {"db": {"sync": `function(doc) {}}}}"#)
        }
    }

    // MARK: - Design documents

    /// `validate_doc_update` refuses per document (403 / 401) on every write, replicated ones too,
    /// and runs for the admin port as well, whose userCtx has the role `_admin`.
    @Test func validateDocUpdateFromADesignDocument() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            let alice = user("alice")
            let design = #"""
                {"validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) { var admin = userCtx.roles.indexOf('_admin') >= 0; if (newDoc.type == 'locked') throw({forbidden: 'locked (' + (admin ? '_admin' : userCtx.name) + ')'}); if (newDoc.type == 'members' && !admin) throw({unauthorized: 'members only'}); if (!admin && newDoc.author !== undefined && newDoc.author !== userCtx.name) throw({forbidden: 'author must be ' + userCtx.name}); if (oldDoc && oldDoc.frozen && !newDoc._deleted) throw({forbidden: 'frozen'}); }"}
                """#
            // Only the admin port writes design documents.
            let refused = try await pub.send(.put, "/db/_design/rules", json: design, headers: alice)
            #expect(refused.status == .forbidden, "\(refused.text)")
            let bad = try await admin.send(.put, "/db/_design/broken", json: #"{"validate_doc_update": "function(newDoc) { if ( }"}"#)
            #expect(bad.status == .badRequest && bad["error"] == "compilation_error", "\(bad.text)")
            let designRev = try await put(admin, "_design/rules", design)
            // In _bulk_docs, a design document from the public port is refused alone; the rest is saved.
            let mixed = try await pub.send(.post, "/db/_bulk_docs", json: #"{"docs": [{"_id": "plain", "channels": ["a"]}, {"_id": "_design/sneaky", "filters": {}}]}"#,
                                           headers: alice)
            #expect(mixed.status == .created, "\(mixed.text)")
            let mixedRows = (try? mixed.json)?.arrayValue ?? []
            #expect(mixedRows.count == 2 && mixedRows.first?["ok"] == true, "\(mixed.text)")
            #expect(mixedRows.last?["id"] == "_design/sneaky" && mixedRows.last?["error"] == "forbidden", "\(mixed.text)")
            #expect(try await admin.send(.get, "/db/plain").status == .ok)
            #expect(try await admin.send(.get, "/db/_design/sneaky").status == .notFound)
            let replicatedDesign = try await pub.send(.post, "/db/_bulk_docs", json: """
                {"new_edits": false, "docs": [{"_id": "_design/sneaky", "_rev": "1-\(String(repeating: "d", count: 32))", "filters": {}}]}
                """, headers: alice)
            #expect((try? replicatedDesign.json)?[0]?["error"] == "forbidden", "\(replicatedDesign.text)")
            #expect(try await admin.send(.get, "/db/_design/sneaky").status == .notFound)
            // Any user reads it.
            #expect(try await pub.send(.get, "/db/_design/rules", headers: alice).status == .ok)

            func status(_ c: any TestClientProtocol, _ h: HTTPFields, _ id: String, _ json: String) async throws -> TestResponse {
                try await c.send(.put, "/db/\(id)", json: json, headers: h)
            }
            let locked = try await status(pub, alice, "l1", #"{"type": "locked", "channels": ["a"]}"#)
            #expect(locked.status == .forbidden && locked["reason"] == "locked (alice)", "\(locked.text)")
            let lockedAdmin = try await status(admin, [:], "l2", #"{"type": "locked"}"#)
            #expect(lockedAdmin.status == .forbidden && lockedAdmin["reason"] == "locked (_admin)", "\(lockedAdmin.text)")
            let members = try await status(pub, alice, "m1", #"{"type": "members", "channels": ["a"]}"#)
            #expect(members.status == .unauthorized && members["reason"] == "members only", "\(members.text)")
            #expect(try await status(admin, [:], "m2", #"{"type": "members"}"#).status == .created)
            #expect(try await status(pub, alice, "a1", #"{"author": "alice", "channels": ["a"]}"#).status == .created)
            let author = try await status(pub, alice, "a2", #"{"author": "bob", "channels": ["a"]}"#)
            #expect(author.status == .forbidden && author["reason"] == "author must be alice", "\(author.text)")
            #expect(try await status(admin, [:], "a3", #"{"author": "bob"}"#).status == .created)
            // oldDoc: a frozen document refuses its edits, from anyone.
            let frozen = try await put(admin, "f1", #"{"frozen": true, "channels": ["a"]}"#)
            #expect(try await status(pub, alice, "f1", #"{"_rev": "\#(frozen)", "channels": ["a"]}"#).status == .forbidden)
            #expect(try await status(admin, [:], "f1", #"{"_rev": "\#(frozen)"}"#)["reason"] == "frozen")

            // _bulk_docs: per document.
            let bulk = try await pub.send(.post, "/db/_bulk_docs", json: """
                {"docs": [{"_id": "k1", "channels": ["a"]}, {"_id": "k2", "type": "locked"}, {"_id": "k3", "type": "members"},
                          {"_id": "k4", "author": "bob"}, {"_id": "k5", "author": "alice", "channels": ["a"]}]}
                """, headers: alice)
            let rows = try #require(try bulk.json.arrayValue, "\(bulk.text)")
            #expect(rows.count == 5)
            #expect(rows[0]["ok"] == true && rows[4]["ok"] == true, "\(bulk.text)")
            #expect(rows[1]["error"] == "forbidden" && rows[1]["reason"] == "locked (alice)")
            #expect(rows[2]["error"] == "unauthorized" && rows[2]["reason"] == "members only")
            #expect(rows[3]["error"] == "forbidden" && rows[3]["reason"] == "author must be alice")
            // Replicated revisions too.
            let rev = "1-" + String(repeating: "e", count: 32)
            let replicated = try await pub.send(.post, "/db/_bulk_docs", json: """
                {"new_edits": false, "docs": [{"_id": "r1", "_rev": "\(rev)", "type": "locked"},
                                              {"_id": "r2", "_rev": "\(rev)", "channels": ["a"]}]}
                """, headers: alice)
            let refusedRows = try #require(try replicated.json.arrayValue, "\(replicated.text)")
            #expect(refusedRows.count == 1 && refusedRows.first?["id"] == "r1" && refusedRows.first?["error"] == "forbidden"
                    && refusedRows.first?["reason"] == "locked (alice)", "\(replicated.text)")
            #expect(try await admin.send(.get, "/db/r2").status == .ok)
            #expect(try await admin.send(.get, "/db/r1").status == .notFound)
            for id in ["l1", "l2", "m1", "a2", "k2", "k3", "k4"] {
                #expect(try await admin.send(.get, "/db/\(id)").status == .notFound, "\(id) was not saved")
            }
            // Deleting the design document removes its rule.
            #expect(try await admin.send(.delete, "/db/_design/rules?rev=\(designRev)").status == .ok)
            #expect(try await status(pub, alice, "l3", #"{"type": "locked", "channels": ["a"]}"#).status == .created)
        }
    }

    /// A design document's filter with parameters (`req.query`) and the user (`req.userCtx`),
    /// within the user's channels.
    @Test func aParameterizedDesignFilter() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await put(admin, "_design/app", #"""
                {"filters": {"byType": "function(doc, req) { return doc.type == req.query.type; }",
                             "mine": "function(doc, req) { return doc.owner !== undefined && doc.owner === req.userCtx.name; }"}}
                """#)
            try await put(admin, "t1", #"{"type": "x", "channels": ["a"]}"#)
            try await put(admin, "t2", #"{"type": "y", "channels": ["a"]}"#)
            try await put(admin, "t3", #"{"type": "x", "channels": ["b"]}"#)
            try await put(admin, "t4", #"{"type": "x", "owner": "alice", "channels": ["a"]}"#)
            try await put(admin, "t5", #"{"type": "z", "owner": "bob", "channels": ["a", "b"]}"#)
            func ids(_ c: any TestClientProtocol, _ h: HTTPFields, _ query: String) async throws -> Set<String> {
                let r = try await c.send(.get, "/db/_changes?\(query)", headers: h)
                #expect(r.status == .ok, "\(query): \(r.text)")
                return Set(r.rowIDs)
            }
            #expect(try await ids(admin, [:], "filter=app/byType&type=x") == ["t1", "t3", "t4"])
            #expect(try await ids(admin, [:], "filter=app/byType&type=y") == ["t2"])
            #expect(try await ids(admin, [:], "filter=app/byType&type=none") == [])
            #expect(try await ids(pub, user("alice"), "filter=app/byType&type=x") == ["t1", "t4"])
            #expect(try await ids(pub, user("bob"), "filter=app/byType&type=x") == ["t3"])
            #expect(try await ids(pub, user("star"), "filter=app/byType&type=x&include_docs=true") == ["t1", "t3", "t4"])
            #expect(try await ids(pub, user("alice"), "filter=app/mine") == ["t4"])
            #expect(try await ids(pub, user("bob"), "filter=app/mine") == ["t5"])
            #expect(try await ids(admin, [:], "filter=app/mine") == [])
            #expect(try await ids(pub, user("alice"), "filter=app/byType&type=x&feed=longpoll&timeout=3000") == ["t1", "t4"])
            #expect(try await pub.send(.get, "/db/_changes?filter=app/nope", headers: user("alice")).status == .notFound)
        }
    }

    // MARK: - _resync

    /// A changed sync function: `_resync` reroutes every document, counts those whose routing
    /// changed, gives them new sequences, and a user's feed from its old position sends what it
    /// now reads (and removes what it no longer does).
    @Test func resyncAfterTheSyncFunctionChanged() async throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = base + "settee-resync-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func config(_ sync: String) -> String {
            """
            {"databases": {"db": {"server": "\(directory)",
              "users": {"alice": {"password": "pw", "admin_channels": ["round"]}},
              "sync": `\(sync)`}}}
            """
        }
        let byColor = "function(doc) { channel(doc.color); }"
        let byShape = "function(doc) {\n  channel(doc.shape);\n}"
        let docs: [(String, String, String)] = [("d1", "red", "round"), ("d2", "blue", "round"), ("d3", "red", "square"),
                                                 ("d4", "round", "square"), ("d5", "same", "same")]
        // Sync A routes by color.
        func phaseA() async throws -> (String, [String: Int]) {
            let server = try channelServer(config(byColor))
            defer { try? server.close() }
            return try await withPorts(server) { pub, admin in
                for (id, color, shape) in docs { try await put(admin, id, #"{"color": "\#(color)", "shape": "\#(shape)"}"#) }
                let f = try await feed(pub, user("alice"))
                #expect(Set(f.rows.keys) == ["d4"])
                var seqs: [String: Int] = [:]
                for (id, _, _) in docs {
                    seqs[id] = try #require(try await admin.send(.get, "/db/\(id)?local_seq=true")["_local_seq"]?.intValue)
                }
                return (f.last, seqs)
            }
        }
        let (oldSince, oldSeqs) = try await phaseA()
        // Sync B routes by shape.
        let server = try channelServer(config(byShape))
        defer { try? server.close() }
        let database = try #require(server.database(named: "db")?.database)
        // Nothing rerouted until asked.
        #expect(try database.routing(ofDocumentWithID: "d1")?.current.channels == ["red"])
        try await withPorts(server) { pub, admin in
            #expect(try await pub.send(.post, "/db/_resync", json: "{}", headers: user("alice")).status == .forbidden)
            let resync = try await admin.send(.post, "/db/_resync", json: "{}")
            #expect(resync.status == .ok)
            #expect(try resync.json == ["changes": 4], "\(resync.text)")
            for (id, _, shape) in docs {
                #expect(try database.routing(ofDocumentWithID: id)?.current.channels == [shape], "\(id)")
                let seq = try #require(try await admin.send(.get, "/db/\(id)?local_seq=true")["_local_seq"]?.intValue)
                if id == "d5" {
                    #expect(seq == oldSeqs[id], "an unchanged document keeps its sequence")
                } else {
                    #expect(seq > (oldSeqs.values.max() ?? 0), "\(id) takes a new sequence")
                }
            }
            // A second resync changes nothing.
            #expect(try await admin.send(.post, "/db/_resync", json: "{}").json == ["changes": 0])
            // alice's feed from where she stood: d1, d2 now readable, d4 removed.
            let f = try await feed(pub, user("alice"), since: oldSince)
            #expect(Set(f.rows.keys) == ["d1", "d2", "d4"], "\(f.all)")
            #expect(f.rows["d1"]?["removed"] == nil && f.rows["d2"]?["removed"] == nil)
            #expect(f.rows["d4"]?["removed"] == ["round"])
            #expect(try await pub.send(.get, "/db/d1", headers: user("alice")).status == .ok)
            #expect(try await pub.send(.get, "/db/d4", headers: user("alice"))["_removed"] == true)
            #expect(try await pub.send(.get, "/db/d3", headers: user("alice")).status == .notFound)
            // The admin's channel view agrees.
            let round = try await admin.send(.get, "/db/_changes?filter=sync_gateway/bychannel&channels=round")
            #expect(Set(round.rows.filter { $0["removed"] == nil }.compactMap { $0["id"]?.stringValue }) == ["d1", "d2"], "\(round.text)")
        }
    }
}
