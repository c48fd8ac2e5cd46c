import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// The query surface (`_find`, `_explain`, `_index`, `_changes?filter=_selector`, views) against
/// a hostile user, on live servers on loopback: selectors built to cost the most, and probes of
/// documents the user cannot read through errors, statistics and rows.
@Suite struct HostileQueryTests {
    static let config = """
        {"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true},
                    "alice": {"password": "pw", "admin_channels": ["red"]},
                    "bob": {"password": "pw", "admin_channels": ["red", "blue"]}}}}}
        """
    static let alice = basic("alice", "pw")
    static let bob = basic("bob", "pw")

    /// `{"op": [{"n": 0}, {"n": 1}, …]}` as JSON text.
    static func branches(_ op: String, _ count: Int) -> String {
        #"{"\#(op)": ["# + (0 ..< count).map { #"{"n": \#($0)}"# }.joined(separator: ",") + "]}"
    }

    /// A selector of 20,000 branches or fields (about 230 KB) is a 400 naming the bound on every
    /// endpoint that takes one, for any user and on the admin port; the server lives on and a
    /// wide selector within the bound answers.
    @Test func wideSelectorsAreRefusedAndTheServerLives() async throws {
        let server = try channelServer(Self.config)
        try await withPorts(server) { pub, admin in
            for i in 0 ..< 30 { try await put(admin, "d\(i)", #"{"n": \#(i), "channels": ["red"]}"#) }
            let fields = "{" + (0 ..< 20_000).map { #""f\#($0)": 1"# }.joined(separator: ",") + "}"
            let selectors = [Self.branches("$or", 20_000), Self.branches("$and", 20_000), Self.branches("$nor", 20_000), fields,
                             #"{"n": {"$in": [\#((0 ..< 20_000).map(String.init).joined(separator: ","))]}}"#]
            for selector in selectors {
                for (client, headers) in [(pub, Self.alice), (admin, HTTPFields())] {
                    for path in ["/db/_find", "/db/_explain", "/db/_changes?filter=_selector"] {
                        let r = try await client.send(.post, path, json: #"{"selector": \#(selector)}"#, headers: headers)
                        #expect(r.status == .badRequest, "\(path): \(r.status) \(r.text.prefix(200))")
                        #expect(r["reason"]?.stringValue?.contains("terms") == true, "\(path): \(r.text.prefix(200))")
                    }
                }
                let index = #"{"index": {"fields": ["n"], "partial_filter_selector": \#(selector)}, "name": "wide"}"#
                let r = try await admin.send(.post, "/db/_index", json: index)
                #expect(r.status == .badRequest && r["error"] == "invalid_selector", "\(r.text.prefix(200))")
            }
            #expect(try await admin.send(.get, "/db").status == .ok)
            // 1,500 branches: within the bound, answered, evaluated without a recursion each.
            let wide = try await pub.send(.post, "/db/_find", json: #"{"selector": \#(Self.branches("$or", 1_500)), "limit": 100}"#,
                                          headers: Self.alice)
            #expect(wide.status == .ok, "\(wide.text.prefix(200))")
            #expect(wide["docs"]?.arrayValue?.count == 30)
        }
    }

    /// Alice reads `red`. What she sends (a regular expression that backtracks past its budget
    /// on some string, a slow one, statistics, sorts, views) never runs on a `blue` document:
    /// the status, rows and statistics of each of her queries are the same whatever the hidden
    /// documents hold, and become different when she is the one who can read them (bob).
    @Test func hiddenDocumentsNeverMeetAUsersQuery() async throws {
        let server = try channelServer(Self.config)
        try await withPorts(server) { pub, admin in
            for i in 0 ..< 12 { try await put(admin, "r\(i)", #"{"pin": "\#(1000 + i)", "n": \#(i), "channels": ["red"]}"#) }
            try await put(admin, "_design/v", #"{"views": {"pins": {"map": "function (doc) { if (doc.pin) emit(doc.pin, doc.n); }", "reduce": "_count"}}}"#)
            let probes: [(String, String)] = [
                ("/db/_find", #"{"selector": {"pin": {"$regex": "^(a+)+$"}}, "execution_stats": true}"#),
                ("/db/_find", #"{"selector": {"pin": {"$gt": "1005"}}, "sort": ["pin"], "execution_stats": true}"#),
                ("/db/_find", #"{"selector": {"n": {"$gte": 0}, "pin": {"$regex": "^1"}}, "fields": ["_id", "pin"], "limit": 5, "skip": 2}"#),
                ("/db/_explain", #"{"selector": {"pin": {"$regex": "^(a+)+$"}}}"#),
                ("/db/_changes?filter=_selector", #"{"selector": {"pin": {"$regex": "^(a+)+$"}}}"#),
                ("/db/_changes?filter=_selector&include_docs=true", #"{"selector": {"pin": {"$gte": "1"}}}"#),
            ]
            let views = ["/db/_design/v/_view/pins?reduce=false", "/db/_design/v/_view/pins?group=true",
                         "/db/_design/v/_view/pins?startkey=%22a%22&reduce=false", "/db/_design/v/_view/pins"]
            /// Every probe's status and body, the time each took left out.
            func answers(_ headers: HTTPFields) async throws -> [String] {
                var out: [String] = []
                for (path, body) in probes {
                    let r = try await pub.send(.post, path, json: body, headers: headers)
                    var json = (try? r.json) ?? .null
                    if case .object(var o) = json {
                        if case .object(var stats)? = o["execution_stats"] {
                            stats["execution_time_ms"] = nil
                            o["execution_stats"] = .object(stats)
                        }
                        // A feed's position moves with any write: only its rows say what was read.
                        o["last_seq"] = nil
                        if case .array(let rows)? = o["results"] {
                            o["results"] = .array(rows.map { row in
                                guard case .object(var r) = row else { return row }
                                r["seq"] = nil
                                return .object(r)
                            })
                        }
                        json = .object(o)
                    }
                    out.append("\(path) \(body): \(r.status.code) \(try json.jsonText())")
                }
                for path in views {
                    let r = try await pub.send(.get, path, headers: headers)
                    out.append("\(path): \(r.status.code) \(r.text)")
                }
                return out
            }
            // Mango indexes: her queries read indexes that will hold the hidden documents too.
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["pin"]}, "name": "pin"}"#).status == .ok)
            #expect(try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "name": "n"}"#).status == .ok)
            let before = try await answers(Self.alice)
            #expect(before.allSatisfy { $0.contains(" 200 ") }, "\(before.filter { !$0.contains(" 200 ") })")
            // Hidden documents that would match, fail, cost and sort among hers.
            let evil = String(repeating: "a", count: 40) + "!"
            try await put(admin, "secret", #"{"pin": "\#(evil)", "n": 3, "channels": ["blue"]}"#)
            try await put(admin, "s2", #"{"pin": "1007", "n": 100, "channels": ["blue"]}"#)
            try await put(admin, "s3", #"{"pin": "0000", "n": 4}"#)
            for i in 0 ..< 200 { try await put(admin, "h\(i)", #"{"pin": "\#(2000 + i)", "n": \#(i), "channels": ["blue"]}"#) }
            let after = try await answers(Self.alice)
            for (b, a) in zip(before, after) {
                #expect(a == b, "a hidden document changed alice's answer:\nbefore \(b.prefix(300))\nafter  \(a.prefix(300))")
            }
            // Bob reads blue: the same regular expression now meets the hidden document.
            let bobs = try await pub.send(.post, "/db/_find", json: probes[0].1, headers: Self.bob)
            #expect(bobs.status == .badRequest, "\(bobs.text)")
            // A hidden document that changes, then leaves: still nothing.
            try await put(admin, "secret", #"{"_rev": "\#(try await currentRev(admin, "secret"))", "pin": "\#(evil)x", "channels": ["blue"]}"#)
            try await put(admin, "s2", #"{"_rev": "\#(try await currentRev(admin, "s2"))", "pin": "1007", "channels": []}"#)
            for (a, again) in zip(after, try await answers(Self.alice)) {
                #expect(again == a, "a hidden document's change reached alice:\nbefore \(a.prefix(300))\nafter  \(again.prefix(300))")
            }
        }
    }
}
