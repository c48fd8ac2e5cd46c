import Foundation
import SetteeStorage
import Testing
@_spi(Replication) @testable import Settee

/// A database of document format 10, the last format before named collections
/// (`Fixtures/docs-v10`, written by the last build of that format; Fixtures/README.md says what
/// it holds and which commit wrote it), opened by today's: every document is in the default
/// collection, with every revision ID, parent, body and deletion, the conflict's leaves in
/// winner order, the blob's bytes, the local document, the expiration, the routing, the counts,
/// the changes feed, and the three indexes answering queries as they did; edits then keep the
/// indexes in step. Opening upgrades the format marker, so the test works on a copy and checks
/// that the fixture's own files are left byte for byte as they were. The fixture is never
/// regenerated: a later version must open these files.
@Suite struct CollectionFormatFixtureTests {
    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/docs-v10/docs.settee").path

    // MARK: - What the fixture holds

    struct Rev: Equatable {
        var id: String
        var parent: String?
        var deleted = false
        /// The body as stored (canonical JSON); nil when the revision keeps none.
        var body: String?
    }

    struct Doc {
        var id: String
        var sequence: UInt64
        var deleted = false
        /// In stored order (parents before children).
        var revisions: [Rev]
        /// Winner first.
        var leaves: [String]

        init(_ id: String, sequence: UInt64, deleted: Bool = false, _ revisions: [Rev], leaves: [String]? = nil) {
            self.id = id
            self.sequence = sequence
            self.deleted = deleted
            self.revisions = revisions
            self.leaves = leaves ?? [revisions.last!.id]
        }

        var current: String { leaves[0] }
        /// Two or more live leaves.
        var isConflicted: Bool { !deleted && leaves.filter { rev($0)?.deleted == false }.count > 1 }
        func rev(_ id: String) -> Rev? { revisions.first { $0.id == id } }
        /// The revision and its ancestors, newest first.
        func history(of id: String) -> [String] {
            var out: [String] = []
            var next: String? = id
            while let r = next.flatMap(rev) {
                out.append(r.id)
                next = r.parent
            }
            return out
        }
    }

    /// A chain of revisions, each the child of the one before.
    static func chain(_ revisions: [(id: String, body: String?)], deletedLast: Bool = false) -> [Rev] {
        revisions.indices.map { i in
            Rev(id: revisions[i].id, parent: i == 0 ? nil : revisions[i - 1].id,
                deleted: deletedLast && i == revisions.count - 1, body: revisions[i].body)
        }
    }

    static let uuid = "b85f9bd8bc1346e1b29ea56d89342dea"
    static let unicodeID = "ünïcødé-文档-🚀"
    static let photoBytes = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    static let photoDigest = "sha1-9nNXOu4fbKxtExYt6mW9Ab9nAbE="
    static let conflictBase = "1-829dbe167120b43eb50edbe8894e7d6ff31f6a12"
    static let lastSequence: UInt64 = 15
    /// 2100-01-01T00:00:00Z.
    static let expiration = Date(timeIntervalSince1970: 4_102_444_800)

    /// Every document the generator wrote, in sequence order.
    static let documents: [Doc] = [
        Doc("plain", sequence: 1, [Rev(id: "1-e5723b9c78f7fa39a25d56269dba6b8c33466577",
                                       body: #"{"count":3,"done":false,"nothing":null,"title":"Buy milk","type":"note"}"#)]),
        Doc(unicodeID, sequence: 2, [Rev(id: "1-43dfc92323ad027216f0e57cbb32cd7a06e80075", body: #"{"cjk":"日本語のテキスト","emoji":"🎉👍🏽","escapes":"quote \" backslash \\ newline \n tab \t nul \u0000","name":"Zoë Ångström","title":"Café Zoë","type":"note","ключ":"значение"}"#)]),
        Doc("numbers", sequence: 3, [Rev(id: "1-22b35b63f6fb6910e68eb35761586f037f57b51c", body: #"{"int64max":9223372036854775807,"int64min":-9223372036854775808,"negative":-42,"nested":{"a":[1,[2,{"b":null}]],"empty":{}},"pi":3.141592653589793,"tenth":0.1,"three":3.0,"type":"numbers","zero":0}"#)]),
        Doc("edited", sequence: 6, chain([
            ("1-6e3eee542aeaffbc84b9519888550bade22ed836", #"{"title":"draft","type":"task","v":1}"#),
            ("2-883b989962299574de1c09b25f551423a15e0e4b", #"{"title":"review","type":"task","v":2}"#),
            ("3-79da7314eb1ec2675a553a5c887eff96022d9aa8", #"{"title":"published report","type":"task","v":3}"#),
        ])),
        Doc("deleted", sequence: 8, deleted: true, chain([
            ("1-ce7fc29331eae249c47370fe907139a3ed75b15b", #"{"title":"Spilt milk","type":"task"}"#),
            ("2-9d566a2496e8cd483532706262ea4fe243e8aead", "{}"),
        ], deletedLast: true)),
        // Replicated: two live leaves and a deleted one under a common root; 2-d07187b2… arrived
        // as history only, without a body.
        Doc("conflicted", sequence: 12, [
            Rev(id: conflictBase, body: #"{"n":1,"side":"root","type":"task"}"#),
            Rev(id: "2-3fccb8de829d8cc4c84b7e886a2dbfedfa9ba6ab", parent: conflictBase, body: #"{"n":2,"side":"left","type":"task"}"#),
            Rev(id: "2-d07187b2c235fe23f5540c7ef5ee26d42e108da3", parent: conflictBase),
            Rev(id: "3-26bda4bb5ca998df2680c9d90ba42838a976d72c", parent: "2-d07187b2c235fe23f5540c7ef5ee26d42e108da3",
                body: #"{"n":3,"side":"right","type":"task"}"#),
            Rev(id: "2-c6e39f3d6c618c892541d2e9dcd0c29032a1f5f5", parent: conflictBase, deleted: true, body: "{}"),
        ], leaves: ["3-26bda4bb5ca998df2680c9d90ba42838a976d72c", "2-3fccb8de829d8cc4c84b7e886a2dbfedfa9ba6ab",
                    "2-c6e39f3d6c618c892541d2e9dcd0c29032a1f5f5"]),
        Doc("with-blob", sequence: 13, [Rev(id: "1-e796a68d6609ad6789f193cc99a1021e20ca4cc5", body: #"{"caption":"a photo","photo":{"@type":"blob","content_type":"application/octet-stream","digest":"sha1-9nNXOu4fbKxtExYt6mW9Ab9nAbE=","length":3000},"type":"photo"}"#)]),
        Doc("expiring", sequence: 14, [Rev(id: "1-968ebf09f5bc2852dcbcdbb0cd584bbd472b0c2c", body: #"{"ttl":"2100","type":"note"}"#)]),
        Doc("routed", sequence: 15, [Rev(id: "1-90ca56bc9f50cba7133ca9cd5b11105f76f13cfa", body: #"{"access":{"alice":["news"]},"channels":["news","sport"],"title":"Breaking news","type":"note"}"#)]),
    ]

    /// Parsed values of the bodies whose numbers and strings are easiest to misread.
    static let typedBodies: [String: [String: JSONValue]] = [
        "numbers": [
            "type": "numbers", "zero": 0, "negative": -42, "int64max": .int(Int64.max), "int64min": .int(Int64.min),
            "pi": 3.141592653589793, "tenth": 0.1, "three": .double(3.0), "nested": ["a": [1, [2, ["b": nil]]], "empty": [:]],
        ],
        unicodeID: [
            "type": "note", "title": "Café Zoë", "name": "Zoë Ångström", "emoji": "🎉👍🏽", "cjk": "日本語のテキスト",
            "escapes": "quote \" backslash \\ newline \n tab \t nul \u{00}", "ключ": "значение",
        ],
    ]

    // MARK: - The run

    @Test func documentFormat10OpensInTheDefaultCollection() throws {
        try #require(FileManager.default.fileExists(atPath: Self.source + "/log"), "fixture \(Self.source) missing")
        let before = try DocumentFormatFixtureTests.snapshot(Self.source)
        #expect(before.keys.sorted() == ["blobs/f673573aee1f6cac6d13162dea65bd01bf6701b1.blob", "log"])

        // An untouched copy is of format 10.
        let rawDir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.source, toPath: rawDir.path + "/docs.settee")
        #expect(try Self.storedFormat(rawDir.path + "/docs.settee") == 10)

        // Today's Database, on another copy.
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.source, toPath: dir.path + "/docs.settee")
        var config = DatabaseConfiguration(directory: dir.path)
        config.autoCompaction = false
        var db = try Database(name: "docs", config: config)
        defer { try? db.close() }
        #expect(try db.statistics.formatVersion == DatabaseFile.formatVersion)
        try Self.verify(db, "v10 as written")

        // Reopened: the upgraded files read the same.
        try db.close()
        db = try Database(name: "docs", config: config)
        try Self.verify(db, "v10 reopened")

        // Edits keep the indexes in step: a document leaves `task` and changes its title, a new
        // one enters both indexes.
        let collection = try db.defaultCollection()
        let edited = try #require(try collection.document(id: "edited")).toMutable()
        edited.setString("done", forKey: "type")
        edited.setString("archived", forKey: "title")
        try db.saveDocument(edited)
        try db.saveDocument(MutableDocument(id: "added-after-upgrade", data: ["type": "task", "title": "Almond milk"]))
        #expect(try db.lastSequence == Self.lastSequence + 2)
        #expect(try collection.count == 9)
        #expect(try Self.ids(db, "SELECT META().id FROM _ WHERE type = 'task' ORDER BY META().id") == ["added-after-upgrade", "conflicted"])
        #expect(try Self.ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'milk') ORDER BY META().id") == ["added-after-upgrade", "plain"])
        #expect(try Self.ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'report') ORDER BY META().id") == [])
        #expect(try Self.rows(db, "SELECT META().id, type FROM _ WHERE title >= 'A' ORDER BY title") == [
            ["added-after-upgrade", "task"], ["edited", "done"], ["routed", "note"], ["plain", "note"], [Self.unicodeID, "note"],
        ])
        #expect(try db.check().isHealthy)
        try db.close()

        // The committed fixture is untouched.
        #expect(try DocumentFormatFixtureTests.snapshot(Self.source) == before)
    }

    // MARK: - Reading through the API

    static func verify(_ db: Database, _ label: String) throws {
        let c = Comment(rawValue: label)
        let collection = try db.defaultCollection()
        #expect(db.uuid == uuid, c)
        #expect(try db.count == 8, c)
        #expect(try collection.count == 8, c)
        #expect(try db.lastSequence == lastSequence, c)

        for d in documents {
            let dc = Comment(rawValue: "\(label): \(d.id)")
            let tree = try #require(try db.revisionTree(withID: d.id), dc)
            #expect(tree.documentID == d.id, dc)
            #expect(tree.currentRevisionID == d.current, dc)
            #expect(tree.leafRevisionIDs == d.leaves, dc)
            #expect(tree.isConflicted == d.isConflicted, dc)
            let leaves = Set(d.leaves)
            #expect(tree.revisions == d.revisions.map { r in
                RevisionInfo(revisionID: r.id, generation: UInt64(r.id.prefix { $0 != "-" })!, parentRevisionID: r.parent,
                             isDeleted: r.deleted, isLeaf: leaves.contains(r.id), hasBody: r.body != nil)
            }, dc)

            for r in d.revisions {
                let rc = Comment(rawValue: "\(label): \(d.id) \(r.id)")
                let stored = try db.revision(withID: d.id, revisionID: r.id)
                let doc = try db.document(withID: d.id, revisionID: r.id)
                guard let body = r.body else {
                    #expect(stored == nil, rc)
                    #expect(doc == nil, rc)
                    continue
                }
                #expect(stored?.json.map { String(decoding: $0, as: UTF8.self) } == body, rc)
                #expect(stored?.history == d.history(of: r.id), rc)
                #expect(stored?.isDeleted == r.deleted, rc)
                #expect(doc?.revisionID == r.id, rc)
                #expect(doc?.isDeleted == r.deleted, rc)
                #expect(doc?.toJSON() == body, rc)
            }

            // The current revision, through the default collection and the database.
            let current = try collection.document(id: d.id)
            if d.deleted {
                #expect(current == nil, dc)
                #expect(try db.document(withID: d.id) == nil, dc)
            } else {
                #expect(current?.id == d.id, dc)
                #expect(current?.revisionID == d.current, dc)
                #expect(current?.sequence == d.sequence, dc)
                #expect(current?.isDeleted == false, dc)
                #expect(current?.toJSON() == d.rev(d.current)?.body, dc)
                #expect(try db.document(withID: d.id)?.revisionID == d.current, dc)
                if let typed = typedBodies[d.id] { #expect(current?.toDictionary() == typed, dc) }
            }
            let live = d.deleted ? [] : d.leaves.filter { d.rev($0)?.deleted == false }
            #expect(try db.conflictingRevisions(withID: d.id).map(\.revisionID) == live, dc)
            let leafRevisions = try db.leafRevisions(withID: d.id)
            #expect(leafRevisions.map(\.revisionID) == d.leaves, dc)
            #expect(leafRevisions.map(\.history) == d.leaves.map { d.history(of: $0) }, dc)
            #expect(leafRevisions.map(\.isDeleted) == d.leaves.map { d.rev($0)?.deleted }, dc)
            #expect(try db.getDocumentExpiration(withID: d.id) == (d.id == "expiring" ? expiration : nil), dc)
        }

        // The changes feed: each document once, at its latest sequence, with its leaves.
        struct Change: Equatable {
            var sequence: UInt64, id: String, revision: String, deleted: Bool, conflicted: Bool, others: [String]
        }
        let feed = try db.changes(since: 0).map {
            Change(sequence: $0.sequence, id: $0.documentID, revision: $0.revisionID, deleted: $0.isDeleted,
                   conflicted: $0.isConflicted, others: $0.otherLeafRevisionIDs)
        }
        #expect(feed == documents.map {
            Change(sequence: $0.sequence, id: $0.id, revision: $0.current, deleted: $0.deleted,
                   conflicted: $0.isConflicted, others: Array($0.leaves.dropFirst()))
        }, c)
        #expect(try db.changes(since: 8).map(\.documentID) == ["conflicted", "with-blob", "expiring", "routed"], c)

        // All documents in ID (UTF-8 byte) order.
        let byID = documents.sorted { Array($0.id.utf8).lexicographicallyPrecedes(Array($1.id.utf8)) }
        var options = AllDocumentsOptions()
        options.includeDeleted = true
        #expect(try db.allDocuments(options).readAll().map(\.id) == byID.map(\.id), c)
        #expect(try db.allDocuments().readAll().map(\.id) == byID.filter { !$0.deleted }.map(\.id), c)

        // The blob: its reference and its bytes.
        let photo = try #require(try collection.document(id: "with-blob")?.blob(forKey: "photo"), c)
        #expect(photo.digest == photoDigest && photo.length == 3000 && photo.contentType == "application/octet-stream", c)
        #expect(photo.content == photoBytes, c)
        #expect(try db.blob(withDigest: photoDigest)?.content == photoBytes, c)
        let blobFiles = try FileManager.default.contentsOfDirectory(atPath: db.path + "/blobs").filter { $0.hasSuffix(".blob") }
        #expect(blobFiles == ["f673573aee1f6cac6d13162dea65bd01bf6701b1.blob"], c)

        // The local document, saved twice.
        let checkpoint = try #require(try db.localDocumentWithRevision(withID: "checkpoint-α"), c)
        #expect(checkpoint.revisionID == "0-2", c)
        #expect(checkpoint.properties == ["last_seq": 13, "session": "s-1", "history": [["seq": 7], ["seq": 13]]], c)
        #expect(try db.localDocument(withID: "_local/checkpoint-α") == checkpoint.properties, c)

        // The routed document: its channels, its channel logs and its grant.
        let routing = try #require(try db.routing(ofDocumentWithID: "routed"), c)
        #expect(routing.current == RevisionRouting(channels: ["news", "sport"], access: ["alice": ["news"]]), c)
        let logs = try db.channelChanges([ChannelQuery(channel: "news", after: 0), ChannelQuery(channel: "sport", after: 0)])
        #expect(logs.map { $0.map { "\($0.sequence) \($0.documentID)" } } == [["15 routed"], ["15 routed"]], c)
        let grants = try db.grants(to: "alice", kind: .channels)
        #expect(grants.map { "\($0.documentID) \($0.name) \($0.sequence) \($0.isRevoked)" } == ["routed news 15 false"], c)
        for id in ["plain", "conflicted", "expiring"] { #expect(try db.routing(ofDocumentWithID: id) == nil, c) }

        // The indexes, answering as they did: a value index, a full-text index (accents kept) and
        // a value index with a covering expression.
        #expect(try db.indexes == ["byType", "text", "titles"], c)
        let byType = "SELECT META().id FROM _ WHERE type = 'task' ORDER BY META().id"
        #expect(try db.createQuery(byType).explain().hasPrefix("SCAN INDEX byType (type)\n  RANGE type = 'task'"), c)
        #expect(try ids(db, byType) == ["conflicted", "edited"], c)
        let milk = "SELECT META().id FROM _ WHERE MATCH(text, 'milk') ORDER BY META().id"
        #expect(try db.createQuery(milk).explain().hasPrefix("SEARCH FULL-TEXT INDEX text (title)"), c)
        #expect(try ids(db, milk) == ["plain"], c)
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'café') ORDER BY META().id") == [unicodeID], c)
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'report') ORDER BY META().id") == ["edited"], c)
        let titles = "SELECT META().id, type FROM _ WHERE title >= 'A' ORDER BY title"
        let plan = try db.createQuery(titles).explain()
        #expect(plan.hasPrefix("SCAN INDEX titles (title) KEEPING (type)\n  RANGE title >= 'A'"), "\(label): \(plan)")
        #expect(plan.contains("COVERING") && plan.contains("in index order, no sort"), "\(label): \(plan)")
        #expect(try rows(db, titles) == [["routed", "note"], ["plain", "note"], [unicodeID, "note"], ["edited", "task"]], c)

        // The document layer holds together.
        let check = try db.check()
        #expect(check.isHealthy, "\(label): \(check)")
        #expect(check.documents == documents.count, c)
        #expect(check.revisions == documents.reduce(0) { $0 + $1.revisions.count }, c)
    }

    static func ids(_ db: Database, _ sql: String) throws -> [String] {
        try db.createQuery(sql).execute().allResults().map { $0.string(at: 0) ?? "-" }
    }

    static func rows(_ db: Database, _ sql: String) throws -> [[String]] {
        try db.createQuery(sql).execute().allResults().map { r in (0..<r.count).map { r.string(at: $0) ?? "-" } }
    }

    /// The `format` marker of a closed database, read with the engine alone.
    static func storedFormat(_ path: String) throws -> UInt64 {
        let store = try Store(directory: path)
        defer { try? store.close() }
        return try store.read { tx in
            let meta = try #require(tx.tree(named: TreeName.meta))
            let f = try #require(try tx.value(forKey: MetaKey.format, in: meta))
            return f.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        }
    }
}
