import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) import Settee
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
}
