import Foundation
import Testing
import SetteeCrashKit
@_spi(Replication) @testable import Settee

/// A database of document format 8 with routed documents (`Fixtures/routing-v8`, written by the
/// last build of that format), opened by today's: grants to roles, which format 8 kept among
/// users' under `role:` and the role's name, are the roles' own after the upgrade, in the grant
/// records and in every routing read back; a user named `role:…` receives none of them; edits
/// go on revoking and granting in the new namespace; the fixture's files stay as they were.
@Suite struct RoutingFormatFixtureTests {
    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/routing-v8/routing.settee").path

    struct Seen: Equatable, CustomStringConvertible {
        var doc: String, name: String, sequence: UInt64, revoked: Bool
        var description: String { "\(doc) \(name) \(sequence)\(revoked ? " revoked" : "")" }
    }

    func grants(_ db: Database, _ principal: String, _ kind: GrantKind) throws -> [Seen] {
        try db.grants(to: principal, kind: kind).map { Seen(doc: $0.documentID, name: $0.name, sequence: $0.sequence, revoked: $0.isRevoked) }
            .sorted { ($0.doc, $0.name) < ($1.doc, $1.name) }
    }

    @Test func roleGrantsOfFormat8BecomeTheRolesOwn() throws {
        let before = try Data(contentsOf: URL(fileURLWithPath: Self.source + "/log"))
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.source, toPath: dir.path + "/routing.settee")
        var config = DatabaseConfiguration(directory: dir.path)
        config.autoCompaction = false
        var db = try Database(name: "routing", config: config)
        defer { try? db.close() }
        #expect(try db.lastSequence == 8)

        // What format 8's build printed, with `role:` grants moved to the roles.
        #expect(try grants(db, "alice", .channels) == [Seen(doc: "list", name: "a", sequence: 1, revoked: false),
                                                       Seen(doc: "list", name: "b", sequence: 1, revoked: false)])
        #expect(try grants(db, "alice", .roles) == [Seen(doc: "list", name: "editors", sequence: 1, revoked: false)])
        #expect(try grants(db, "bob", .channels) == [Seen(doc: "grant-edited", name: "c", sequence: 3, revoked: false)])
        #expect(try grants(db, "carol", .channels) == [Seen(doc: "conflicted", name: "k", sequence: 8, revoked: true)])
        #expect(try grants(db, "editors", .roleChannels) == [Seen(doc: "list", name: "drafts", sequence: 1, revoked: false)])
        #expect(try grants(db, "viewers", .roleChannels) == [Seen(doc: "grant-edited", name: "c", sequence: 2, revoked: false),
                                                             Seen(doc: "grant-edited", name: "d", sequence: 3, revoked: false)])
        #expect(try grants(db, "old", .roleChannels) == [Seen(doc: "revoked", name: "x", sequence: 5, revoked: true)])
        #expect(try grants(db, "team", .roleChannels) == [Seen(doc: "conflicted", name: "k", sequence: 7, revoked: true),
                                                          Seen(doc: "conflicted", name: "l", sequence: 8, revoked: true)])
        #expect(try grants(db, "other", .roleChannels) == [Seen(doc: "conflicted", name: "m", sequence: 8, revoked: false)])
        // A user named like the role gets nothing of it, in either spelling.
        for name in ["role:editors", "role:viewers", "role:other", "editors"] { #expect(try grants(db, name, .channels).isEmpty, "\(name)") }

        // Routings read back from sequence entries and full records of format 8.
        let list = try #require(try db.routing(ofDocumentWithID: "list"))
        #expect(list.current == RevisionRouting(channels: ["a"], access: ["alice": ["a", "b"]], roles: ["alice": ["editors"]],
                                                roleAccess: ["editors": ["drafts"]]))
        let conflicted = try #require(try db.routing(ofDocumentWithID: "conflicted"))
        #expect(conflicted.current == RevisionRouting(channels: ["m"], roleAccess: ["other": ["m"]]))
        #expect(conflicted.leaves["2-bbbb"] == RevisionRouting(channels: ["k", "l"], access: ["carol": ["k"]], roleAccess: ["team": ["l"]]))

        // An edit revokes what the role no longer has, and grants, in the roles' namespace.
        db.setRouter { input in
            let p = input.revision.toDictionary()
            var r = RevisionRouting(channels: Set(p["channels"]?.arrayValue?.compactMap(\.stringValue) ?? []))
            for (k, v) in p["roleAccess"]?.objectValue ?? [:] { r.roleAccess[k] = Set(v.arrayValue?.compactMap(\.stringValue) ?? []) }
            return r
        }
        let edited = try #require(try db.document(withID: "grant-edited")).toMutable()
        edited.setData(["channels": ["c"], "roleAccess": ["viewers": ["c"], "role:x": ["z"]]])
        try db.saveDocument(edited)
        #expect(try grants(db, "viewers", .roleChannels) == [Seen(doc: "grant-edited", name: "c", sequence: 2, revoked: false),
                                                             Seen(doc: "grant-edited", name: "d", sequence: 9, revoked: true)])
        #expect(try grants(db, "role:x", .roleChannels) == [Seen(doc: "grant-edited", name: "z", sequence: 9, revoked: false)])
        #expect(try grants(db, "bob", .channels) == [Seen(doc: "grant-edited", name: "c", sequence: 9, revoked: true)])
        #expect(try db.check().isHealthy)

        // Reopened: format 9, nothing moved twice.
        try db.close()
        db = try Database(name: "routing", config: config)
        #expect(try grants(db, "editors", .roleChannels).count == 1)
        #expect(try grants(db, "role:x", .roleChannels).count == 1)
        #expect(try db.check().isHealthy)
        #expect(try Data(contentsOf: URL(fileURLWithPath: Self.source + "/log")) == before)
    }
}
