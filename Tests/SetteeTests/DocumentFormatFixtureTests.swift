import Foundation
import SetteeStorage
import Testing
@_spi(Replication) @testable import Settee

/// Databases written by document formats 1, 2 and 3 (Formats/documents.md, "Version history"),
/// kept under `Fixtures/docs-v1`, `docs-v2` and `docs-v3` (Fixtures/README.md says what each
/// holds and which commit wrote it). Today's build must open each one as it is and show exactly
/// what its version wrote: every revision ID, parent, body and deletion, the leaves in winner
/// order, the conflict, blobs, local documents, expiration records, the purged document's
/// absence, the count and the changes feed. Then it edits, reopens and compacts it and reads
/// everything again. Opening upgrades the format marker, so each test works on a copy and
/// checks that the fixture's own files are left byte for byte as they were. The fixtures are
/// never regenerated: a later version must open these files.
@Suite struct DocumentFormatFixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path

    @Test func documentFormat1OpensWithItsContent() throws { try run(format: 1) }
    @Test func documentFormat2OpensWithItsContent() throws { try run(format: 2) }
    @Test func documentFormat3OpensWithItsContent() throws { try run(format: 3) }

    // MARK: - What each fixture holds

    struct Rev: Equatable {
        var id: String
        var parent: String?
        var deleted = false
        /// The body as stored (JSON text); nil when the revision keeps none.
        var body: String?
    }

    struct Doc {
        var id: String
        var sequence: UInt64
        /// The metadata's flags: 1 deleted, 2 conflicted, 4 has attachments, 8 multiple leaves.
        var flags: UInt8
        /// In stored order (parents before children).
        var revisions: [Rev]
        /// Winner first.
        var leaves: [String]
        /// The current body as the canonical writer gives it, when the stored text is not canonical.
        var canonical: String?

        init(_ id: String, sequence: UInt64, flags: UInt8 = 0, _ revisions: [Rev], leaves: [String]? = nil,
             canonical: String? = nil) {
            self.id = id
            self.sequence = sequence
            self.flags = flags
            self.revisions = revisions
            self.leaves = leaves ?? [revisions.last!.id]
            self.canonical = canonical
        }

        var current: String { leaves[0] }
        var isDeleted: Bool { flags & 1 != 0 }
        var isConflicted: Bool { flags & 2 != 0 }
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

    struct Expected {
        var uuid: String
        var lastSequence: UInt64
        var documents: [Doc]
        var expirations: [String: ExpiryRecord]
        var count: UInt64 { UInt64(documents.filter { !$0.isDeleted }.count) }

        func doc(_ id: String) -> Doc { documents.first { $0.id == id }! }
        mutating func update(_ id: String, _ change: (inout Doc) -> Void) {
            change(&documents[documents.firstIndex { $0.id == id }!])
        }
    }

    /// A chain of revisions, each the child of the one before.
    static func chain(_ revisions: [(id: String, body: String?)], deletedLast: Bool = false) -> [Rev] {
        revisions.indices.map { i in
            Rev(id: revisions[i].id, parent: i == 0 ? nil : revisions[i - 1].id,
                deleted: deletedLast && i == revisions.count - 1, body: revisions[i].body)
        }
    }

    static let unicodeID = "ünïcødé-文档-🚀"
    static let photoBytes = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    static let photoDigest = "sha1-9nNXOu4fbKxtExYt6mW9Ab9nAbE="
    static let textBlobBytes = Data("Ünïcode blob text, line 1\nline 2\n".utf8)
    static let textBlobDigest = "sha1-E5S/YVzjFKcdQL6HXYAhetQVf0A="
    /// The common ancestor of the conflict's live leaves: compaction keeps its body.
    static let conflictBase = "1-829dbe167120b43eb50edbe8894e7d6ff31f6a12"

    static let longHistory = [
        "e154d6b61b8f43f1eb35b19c4516cdf37039e939", "3390c63486390af109ea7ce823971ae90db33532",
        "ded9c3dbbd829088725b38b9e3c4439c65529045", "9a8f8fc06562778d039d6f110e56a68265bb05d6",
        "82789afa80a80dcea1f2c9892f385c70d1bdd857", "d532a85e44d62e3e3647393b29493facc181e435",
        "49c6823b7c890281f38206fe59189b1b7d84469d", "d44034e7a02fe04cf7ea7c721aa24c17d53df0d7",
        "f6fd21535d5676bce9f1f471d6e1f8e5d0d26287", "75e7866b273a223cdfe5a9390d62844012c8c8a8",
        "896870bf4f38c22211a2928791129344ac204583", "0bb83741f03c25beadc0365b9599a059c0eab002",
        "9ccbe2c8aef5fed92ababce6088dfc4c3ebbd68b", "34e65af0563aee1ea762ed6968b65aa477455128",
        "0ec3956d17c463db8967899b805a237250b4dd93", "dbe2f84407ed9c44f4a402afb8efd9e472738696",
        "ef4375ec1188de1296a0375563be2f7e3d0d828b", "9b0ab7020fd9250972fd5300a706d9ebf12e6e5f",
        "f8e56d483bc4af9986295da64cdd3787f92f949a", "d44dfac167fd605877e7a8feedd907ffdbf8ef5e",
    ]

    /// The trees an upgrade from format 1 creates (empty): the expiry trees (format 2) and the
    /// routing trees (format 5).
    static let addedTrees: Set<String> = [TreeName.expiry, TreeName.expiryByID, TreeName.routing, TreeName.channels, TreeName.grants,
                                           TreeName.indexCatalog, TreeName.collections]

    /// The fixture of `format`, exactly as its version wrote it.
    static func expected(format: Int) -> Expected {
        var docs: [Doc] = [
            Doc("plain", sequence: 1, [Rev(id: "1-13500b9dbb332371cca952a98ad452d8b7498097",
                                           body: #"{"count":3,"done":false,"nothing":null,"title":"Buy milk"}"#)]),
            Doc(unicodeID, sequence: 2, [Rev(id: "1-2d04bf6bcd3a03e9af0723124b65a581e7a78080", body: #"{"":"empty key","cjk":"日本語のテキスト","emoji":"🎉👍🏽","escapes":"quote \" backslash \\ slash / newline \n tab \t cr \r bell \u0007 nul \u0000 del \#u{7f}","name":"Zoë Ångström","rtl":"שלום","ключ":"значение"}"#)]),
            Doc("numbers", sequence: 3, [Rev(id: "1-8eab42d5f3fbe19337ebcabdb9f75e3d0e6406f3", body: #"{"avogadro":6.02214076e+23,"half":-0.5,"huge":1.7976931348623157e+308,"int64max":9223372036854775807,"int64min":-9223372036854775808,"negative":-42,"pi":3.141592653589793,"tenth":0.1,"three":3.0,"tiny":1e-300,"twoPow53plus1":9007199254740993,"uint64max":1.8446744073709552e+19,"zero":0}"#)]),
            Doc("nested", sequence: 4, [Rev(id: "1-ac9ef741ce04ba9412f71193d9f6821427e5c1f2",
                                            body: #"{"a":{"b":{"c":[1,[2,[3,{"d":"deep"}]]]}},"empty":{},"emptyList":[],"list":[true,false,null,"x",1.5,{"k":[]}]}"#)]),
            Doc("edited", sequence: 8, chain([
                ("1-bf6348b5370aa609684bd4e05d1901ab4cead634", #"{"title":"draft","v":1}"#),
                ("2-053d234e2c5670d60c97f81e595e8d3eb3a4e30b", #"{"title":"review","v":2}"#),
                ("3-50479d5ef5807c9ecbcf028d0d02acb2f974ad6c", #"{"title":"approved","v":3}"#),
                ("4-39beb3cf5a10b8eba1d4286ba05dbd713ba931f7", #"{"title":"published","v":4}"#),
            ])),
            Doc("deleted", sequence: 11, flags: 1, chain([
                ("1-6f9a1fe5dfad0377e089c5e8e0afab815938295d", #"{"x":1}"#),
                ("2-7416fb2d2cfbba6c2a517187294aed17dd9735da", #"{"x":2}"#),
                ("3-4f7934635094a823b8d1dd5788b1896c939a9518", "{}"),
            ], deletedLast: true)),
            Doc("tombstone-with-properties", sequence: 13, flags: 1, chain([
                ("1-a0201f19be78e0879b47200979dde36af9682034", #"{"task":"sweep","worker_id":"w-7"}"#),
                ("2-2cf3f6bd1a7bf4d24cfd1d4a635baec101e9628b", #"{"deleted_at":"2026-11-21","worker_id":"w-7"}"#),
            ], deletedLast: true)),
            Doc("conflicted", sequence: 17, flags: 2 | 8, [
                Rev(id: conflictBase, body: #"{"n":1,"side":"root"}"#),
                Rev(id: "2-3fccb8de829d8cc4c84b7e886a2dbfedfa9ba6ab", parent: conflictBase, body: #"{"n":2,"side":"left"}"#),
                Rev(id: "2-d07187b2c235fe23f5540c7ef5ee26d42e108da3", parent: conflictBase),
                Rev(id: "3-26bda4bb5ca998df2680c9d90ba42838a976d72c", parent: "2-d07187b2c235fe23f5540c7ef5ee26d42e108da3",
                    body: #"{"n":3,"side":"right"}"#),
                Rev(id: "2-c6e39f3d6c618c892541d2e9dcd0c29032a1f5f5", parent: conflictBase, deleted: true, body: "{}"),
            ], leaves: ["3-26bda4bb5ca998df2680c9d90ba42838a976d72c", "2-3fccb8de829d8cc4c84b7e886a2dbfedfa9ba6ab",
                        "2-c6e39f3d6c618c892541d2e9dcd0c29032a1f5f5"]),
            // CouchDB's 32-digit digests, a history that starts at generation 2, a deleted leaf
            // under capital hex and an opaque digest.
            Doc("replicated", sequence: 20, flags: 8, [
                Rev(id: "2-5d69fe6550adcb373ad7f944c958834b"),
                Rev(id: "3-eec88d0dcf0e149a029f5695404f3d3c", parent: "2-5d69fe6550adcb373ad7f944c958834b",
                    body: #"{"from":"couchdb","gen":3}"#),
                Rev(id: "3-D4F2BFCAC9F9557F06E63E3E5D66961BE8635FB2", parent: "2-5d69fe6550adcb373ad7f944c958834b",
                    deleted: true, body: #"{"reason":"superseded"}"#),
                Rev(id: "4-opaque_digest.from~a-peer", parent: "3-eec88d0dcf0e149a029f5695404f3d3c",
                    body: #"{"from":"peer","gen":4}"#),
            ], leaves: ["4-opaque_digest.from~a-peer", "3-D4F2BFCAC9F9557F06E63E3E5D66961BE8635FB2"]),
            Doc("with-blob", sequence: 21, flags: 4, [Rev(id: "1-3f1561aeb630f5a4eeb58db7f0b38377cc804427", body: #"{"caption":"a photo","pages":[{"@type":"blob","content_type":"text/plain; charset=utf-8","digest":"sha1-E5S/YVzjFKcdQL6HXYAhetQVf0A=","length":35}],"photo":{"@type":"blob","content_type":"application/octet-stream","digest":"sha1-9nNXOu4fbKxtExYt6mW9Ab9nAbE=","length":3000}}"#)]),
            // 25 saves, pruned to the default depth of 20.
            Doc("long-history", sequence: 46, chain(longHistory.indices.map { i in
                ("\(i + 6)-\(longHistory[i])", #"{"v":\#(i + 6)}"#)
            })),
        ]
        var lastSequence: UInt64 = 49   // "purged": saved at 47 and 48, purged at 49
        var expirations: [String: ExpiryRecord] = [:]
        var uuid = "48277f98f1484d078517e53bc44fdef3"
        if format >= 2 {
            docs.append(Doc("expiring", sequence: 50, [Rev(id: "1-8f130f5e7499ec2e56655bdb2a4f50a7ec07adb2",
                                                           body: #"{"ttl":"2100"}"#)]))
            docs.append(Doc("evicted-tombstone", sequence: 52, flags: 1, chain([
                ("1-58daeaf84d26d1273fafc40bc643fa603d6909a8", #"{"state":"live"}"#),
                ("2-b9026613cfca33894c272a0ff01fc2f75d289580", "{}"),
            ], deletedLast: true)))
            lastSequence = 52
            // 2100-01-01T00:00:00.5Z rounded up; 2100-05-31; 2101-01-01 with an eviction time of
            // 2026-11-21T00:00:00.25Z plus 70 years, rounded up.
            expirations = ["expiring": ExpiryRecord(expiration: 4_102_444_801),
                           "tombstone-with-properties": ExpiryRecord(expiration: 4_115_404_800),
                           "evicted-tombstone": ExpiryRecord(expiration: 4_133_980_800, eviction: 4_004_251_201)]
            uuid = "15526c4c961943fa830a62b72e79f5ef"
        }
        if format >= 3 {
            // Stored byte for byte as it arrived.
            docs.append(Doc("replicated-json", sequence: 53, [Rev(id: "1-json", body: Self.replicatedJSON)],
                            canonical: #"{"a":[1.5,"é",100.0],"b":1,"c":{"y":true,"z":null}}"#))
            lastSequence = 53
            uuid = "d81b83c09df04071a25473a54b8043bf"
        }
        return Expected(uuid: uuid, lastSequence: lastSequence, documents: docs,
                        expirations: expirations)
    }

    static let replicatedJSON = "{ \"b\": 1,\n  \"a\": [1.50, \"\\u00e9\", 1E2] , \"c\":{\"z\":null,\"y\":true} }"

    /// Parsed values of the bodies whose numbers and strings are easiest to misread.
    static let typedBodies: [String: [String: JSONValue]] = [
        "numbers": [
            "zero": 0, "negative": -42, "int64max": .int(Int64.max), "int64min": .int(Int64.min),
            "twoPow53plus1": .int(9_007_199_254_740_993), "uint64max": .double(18_446_744_073_709_551_615.0),
            "pi": 3.141592653589793, "half": -0.5, "tiny": 1e-300, "avogadro": 6.02214076e23, "tenth": 0.1,
            "three": .double(3.0), "huge": 1.7976931348623157e308,
        ],
        unicodeID: [
            "name": "Zoë Ångström", "emoji": "🎉👍🏽", "cjk": "日本語のテキスト", "rtl": "שלום",
            "escapes": "quote \" backslash \\ slash / newline \n tab \t cr \r bell \u{07} nul \u{00} del \u{7f}",
            "ключ": "значение", "": "empty key",
        ],
        "nested": [
            "a": ["b": ["c": [1, [2, [3, ["d": "deep"]]]]]],
            "list": [true, false, nil, "x", 1.5, ["k": []]],
            "empty": [:], "emptyList": [],
        ],
        "replicated-json": ["b": 1, "a": [1.5, "é", .double(100)], "c": ["z": nil, "y": true]],
    ]

    // MARK: - The run

    func run(format: Int) throws {
        let source = Self.fixtures + "/docs-v\(format)/docs.settee"
        try #require(FileManager.default.fileExists(atPath: source + "/log"), "fixture \(source) missing")
        let before = try Self.snapshot(source)
        var x = Self.expected(format: format)

        // The engine's view of an untouched copy: the format marker, the trees and the raw
        // metadata this version wrote.
        let rawDir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: source, toPath: rawDir.path + "/docs.settee")
        let raw = try Self.inspect(rawDir.path + "/docs.settee")
        #expect(raw.format == UInt64(format))
        var trees: Set = [TreeName.byID, TreeName.bySequence, TreeName.conflicts, TreeName.local, TreeName.meta]
        if format >= 2 { trees.formUnion([TreeName.expiry, TreeName.expiryByID]) }
        #expect(Set(raw.treeNames) == trees)
        Self.verifyRaw(raw, x, treeFormat: format >= 3 ? 2 : 1)

        // Today's Database, on another copy.
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: source, toPath: dir.path + "/docs.settee")
        var db = try openDatabase(dir, "docs")
        try Self.verify(db, x, "v\(format) as written")

        // Edit an old document, one whose tree mixes every kind of digest, and add one.
        let edited = try #require(try db.document(withID: "edited")).toMutable()
        edited.setInt(5, forKey: "v")
        edited.setString("archived", forKey: "title")
        try db.saveDocument(edited)
        let replicated = try #require(try db.document(withID: "replicated")).toMutable()
        replicated.setString("local", forKey: "from")
        replicated.setInt(5, forKey: "gen")
        try db.saveDocument(replicated)
        let added = MutableDocument(id: "added-after-upgrade", data: ["n": 1])
        try db.saveDocument(added)
        #expect(edited.revisionID == Self.editedRevision)
        #expect(replicated.revisionID == Self.replicatedRevision)
        #expect(added.revisionID == Self.addedRevision)
        let last = x.lastSequence
        x.update("edited") { d in
            d.revisions.append(Rev(id: Self.editedRevision, parent: d.current, body: #"{"title":"archived","v":5}"#))
            d.leaves = [Self.editedRevision]
            d.sequence = last + 1
        }
        x.update("replicated") { d in
            d.revisions.append(Rev(id: Self.replicatedRevision, parent: d.current, body: #"{"from":"local","gen":5}"#))
            d.leaves[0] = Self.replicatedRevision
            d.sequence = last + 2
        }
        x.documents.append(Doc("added-after-upgrade", sequence: last + 3, [Rev(id: Self.addedRevision, body: #"{"n":1}"#)]))
        x.lastSequence = last + 3
        try Self.verify(db, x, "v\(format) edited")
        try db.close()

        // Upgraded in place: the current format, the expiry and routing trees there, the old trees kept as they were
        // and only the edited documents' trees written anew.
        let upgraded = try Self.inspect(dir.path + "/docs.settee")
        #expect(upgraded.format == DatabaseFile.formatVersion)
        #expect(Set(upgraded.treeNames) == trees.union(Self.addedTrees))
        Self.verifyRaw(upgraded, x, treeFormat: format >= 3 ? 2 : 1, rewritten: ["edited", "replicated"],
                       implied: ["added-after-upgrade"])

        db = try openDatabase(dir, "docs")
        try Self.verify(db, x, "v\(format) edited and reopened")

        // Compaction keeps the bodies of leaves and of the conflict's common ancestor only.
        let report = try db.compact()
        #expect(report.documents == x.documents.count)
        for i in x.documents.indices {
            let leaves = Set(x.documents[i].leaves)
            for j in x.documents[i].revisions.indices {
                let r = x.documents[i].revisions[j]
                if !leaves.contains(r.id) && r.id != Self.conflictBase { x.documents[i].revisions[j].body = nil }
            }
        }
        try Self.verify(db, x, "v\(format) compacted")
        try db.close()
        db = try openDatabase(dir, "docs")
        try Self.verify(db, x, "v\(format) compacted and reopened")
        try db.close()

        // Now a database of the current format: compaction wrote every tree anew in tree format 2.
        let after = try Self.inspect(dir.path + "/docs.settee")
        #expect(after.format == DatabaseFile.formatVersion)
        #expect(Set(after.treeNames) == trees.union(Self.addedTrees))
        Self.verifyRaw(after, x, treeFormat: 2, implied: ["added-after-upgrade"])

        // An upgraded database gets indexes like a new one: built from its documents, used by
        // queries, consistent with them.
        db = try openDatabase(dir, "docs")
        try db.createIndex(ValueIndexConfiguration(["title"]), name: "titles")
        let q = try db.createQuery("SELECT META().id FROM _ WHERE title = 'archived'")
        #expect(try q.explain().hasPrefix("SCAN INDEX titles"))
        #expect(try q.execute().allResults().map { $0.string(at: 0) } == ["edited"])
        #expect(try db.check().isHealthy)
        try db.close()

        // The committed fixture is untouched.
        #expect(try Self.snapshot(source) == before)
    }

    // The revisions the edits make: SHA-1 digests of the parent, the deletion flag and the
    // canonical body (Formats/documents.md, "Revision IDs of local revisions"), the same in every
    // fixture.
    static let editedRevision = "5-7dbb6ee27b01884756e55392f3df035526989465"
    static let replicatedRevision = "5-60d9a1780ad5d65b506784a4197bb371052fbe0a"
    static let addedRevision = "1-f4f6d5cf5aef1b38c279aa13109584954e37feb7"

    // MARK: - Reading through the API

    static func verify(_ db: Database, _ x: Expected, _ label: String) throws {
        let c = Comment(rawValue: label)
        #expect(db.uuid == x.uuid, c)
        #expect(try db.count == x.count, c)
        #expect(try db.lastSequence == x.lastSequence, c)

        for d in x.documents {
            let dc = Comment(rawValue: "\(label): \(d.id)")
            let tree = try #require(try db.revisionTree(withID: d.id), dc)
            #expect(tree.documentID == d.id, dc)
            #expect(tree.currentRevisionID == d.current, dc)
            #expect(tree.leafRevisionIDs == d.leaves, dc)
            #expect(tree.isConflicted == d.isConflicted, dc)
            let leaves = Set(d.leaves)
            let infos = d.revisions.map { r in
                RevisionInfo(revisionID: r.id, generation: UInt64(r.id.prefix { $0 != "-" })!, parentRevisionID: r.parent,
                             isDeleted: r.deleted, isLeaf: leaves.contains(r.id), hasBody: r.body != nil)
            }
            #expect(tree.revisions == infos, dc)

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
                #expect(doc.map { JSONValue.object($0.toDictionary()) } == (try JSONValue(parsing: body)), rc)
            }

            let current = try db.document(withID: d.id)
            let currentBody = try #require(d.rev(d.current)?.body, dc)
            if d.isDeleted {
                #expect(current == nil, dc)
            } else {
                #expect(current?.revisionID == d.current, dc)
                #expect(current?.sequence == d.sequence, dc)
                #expect(current?.isDeleted == false, dc)
                #expect(current?.toJSON() == d.canonical ?? currentBody, dc)
                if let typed = typedBodies[d.id] { #expect(current?.toDictionary() == typed, dc) }
            }
            let live = d.isDeleted ? [] : d.leaves.filter { d.rev($0)?.deleted == false }
            #expect(try db.conflictingRevisions(withID: d.id).map(\.revisionID) == live, dc)
            let leafRevisions = try db.leafRevisions(withID: d.id)
            #expect(leafRevisions.map(\.revisionID) == d.leaves, dc)
            #expect(leafRevisions.map(\.history) == d.leaves.map { d.history(of: $0) }, dc)
            #expect(leafRevisions.map(\.isDeleted) == d.leaves.map { d.rev($0)?.deleted }, dc)
            let expiration = x.expirations[d.id]
            #expect(try db.expiryRecord(Array(d.id.utf8)) == expiration, dc)
            #expect(try db.getDocumentExpiration(withID: d.id) == expiration?.expiration.map { Date(timeIntervalSince1970: Double($0)) }, dc)
        }

        // The purged document left nothing behind.
        #expect(try db.document(withID: "purged") == nil, c)
        #expect(try db.revisionTree(withID: "purged") == nil, c)
        #expect(try db.leafRevisions(withID: "purged").isEmpty, c)
        #expect(try db.expiryRecord(Array("purged".utf8)) == nil, c)
        #expect(try db.revsDiff(["purged": [purgedRevisions[1]]])["purged"]?.missing == [purgedRevisions[1]], c)

        // The changes feed: each document once, at its latest sequence, with its leaves.
        struct Change: Equatable {
            var sequence: UInt64, id: String, revision: String, deleted: Bool, conflicted: Bool, others: [String]
        }
        let feed = try db.changes(since: 0).map {
            Change(sequence: $0.sequence, id: $0.documentID, revision: $0.revisionID, deleted: $0.isDeleted,
                   conflicted: $0.isConflicted, others: $0.otherLeafRevisionIDs)
        }
        let bySequence = x.documents.sorted { $0.sequence < $1.sequence }
        #expect(feed == bySequence.map {
            Change(sequence: $0.sequence, id: $0.id, revision: $0.current, deleted: $0.isDeleted,
                   conflicted: $0.isConflicted, others: Array($0.leaves.dropFirst()))
        }, c)
        #expect(try db.changes(since: 20).map(\.documentID) == bySequence.filter { $0.sequence > 20 }.map(\.id), c)

        // All documents in ID (UTF-8 byte) order.
        let byID = x.documents.sorted { Array($0.id.utf8).lexicographicallyPrecedes(Array($1.id.utf8)) }
        var options = AllDocumentsOptions()
        options.includeDeleted = true
        #expect(try db.allDocuments(options).readAll().map(\.id) == byID.map(\.id), c)
        #expect(try db.allDocuments().readAll().map(\.id) == byID.filter { !$0.isDeleted }.map(\.id), c)

        // Blobs: one set on the document, one stored first and nested in an array.
        let photo = try #require(try db.document(withID: "with-blob")?.blob(forKey: "photo"), c)
        #expect(photo.digest == photoDigest && photo.length == 3000 && photo.contentType == "application/octet-stream", c)
        #expect(photo.content == photoBytes, c)
        let text = try #require(try db.blob(withDigest: textBlobDigest, contentType: "text/plain; charset=utf-8"), c)
        #expect(text.length == 35, c)
        #expect(text.content == textBlobBytes, c)
        let blobFiles = try FileManager.default.contentsOfDirectory(atPath: db.path + "/blobs").filter { $0.hasSuffix(".blob") }
        #expect(blobFiles.sorted() == ["1394bf615ce314a71d40be875d80217ad4157f40.blob", "f673573aee1f6cac6d13162dea65bd01bf6701b1.blob"], c)

        // Local documents, with or without the prefix.
        let checkpoint = try #require(try db.localDocumentWithRevision(withID: "checkpoint-α"), c)
        #expect(checkpoint.revisionID == "0-2", c)
        #expect(checkpoint.properties == ["last_seq": 42, "session": "s-1", "history": [["seq": 17], ["seq": 42]]], c)
        let repl = try #require(try db.localDocumentWithRevision(withID: "_local/repl-1"), c)
        #expect(repl.revisionID == "0-1", c)
        #expect(try db.localDocument(withID: "repl-1") == ["remote": "https://example.com/db"], c)
        #expect(repl.properties == ["remote": "https://example.com/db"], c)

        // The document layer holds together.
        let check = try db.check()
        #expect(check.isHealthy, "\(label): \(check)")
        #expect(check.documents == x.documents.count, c)
        #expect(check.revisions == x.documents.reduce(0) { $0 + $1.revisions.count }, c)
    }

    /// The purged document's revisions ({"secret":"gone"}, then {"secret":"still gone"}).
    static let purgedRevisions = ["1-9798c4cdcc6040bb2eee6603d8c33f2acc8da71e", "2-c33ad0ffb3f2a037546c9330165e0bf07b9f542c"]

    // MARK: - Reading through the engine

    struct RawDocument: Equatable {
        var flags: UInt8
        var sequence: UInt64
        var revisionID: String
        var treeRef: UInt64
        /// The first byte of the stored revision tree; nil for tree ref 0.
        var treeFormat: UInt8?
    }

    struct Raw {
        var format: UInt64
        var treeNames: [String]
        var documents: [String: RawDocument]
        var sequences: [UInt64: String]
        var expiryIndex: [String]
        var local: [String: [UInt8]]
    }

    /// Reads a closed database's trees with the engine alone (after the engine's own check).
    static func inspect(_ path: String) throws -> Raw {
        let store = try Store(directory: path)
        defer { try? store.close() }
        _ = try store.check()
        return try store.read { tx in
            func all(_ name: String) throws -> [([UInt8], [UInt8])] {
                guard let tree = tx.tree(named: name) else { return [] }
                var out: [([UInt8], [UInt8])] = []
                try tx.forEach(in: tree) { k, v in
                    out.append((Array(k), Array(v)))
                    return true
                }
                return out
            }
            let meta = try #require(tx.tree(named: TreeName.meta))
            let f = try #require(try tx.value(forKey: MetaKey.format, in: meta))
            var documents: [String: RawDocument] = [:]
            for (k, v) in try all(TreeName.byID) {
                let m = try v.withUnsafeBytes { try DocMeta(decoding: $0) }
                let treeFormat = m.treeRef == 0 ? nil : try tx.withValue(at: ValueRef(rawValue: m.treeRef)) { $0.first }
                documents[String(decoding: k, as: UTF8.self)] = RawDocument(
                    flags: m.flags.rawValue, sequence: m.sequence, revisionID: m.revisionID, treeRef: m.treeRef,
                    treeFormat: treeFormat)
            }
            var sequences: [UInt64: String] = [:]
            for (k, v) in try all(TreeName.bySequence) {
                let seq = k.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                sequences[seq] = try v.withUnsafeBytes { try SequenceEntry(decoding: $0) }.documentID
            }
            let expiryIndex = try all(TreeName.expiry).map { k, _ in
                "\(k.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) \(String(decoding: k.dropFirst(8), as: UTF8.self))"
            }
            var local: [String: [UInt8]] = [:]
            for (k, v) in try all(TreeName.local) { local[String(decoding: k, as: UTF8.self)] = v }
            return Raw(format: f.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) },
                       treeNames: tx.treeNames, documents: documents, sequences: sequences, expiryIndex: expiryIndex,
                       local: local)
        }
    }

    /// Checks the engine's view: each document's metadata, its stored tree's format (2 for the
    /// documents in `rewritten`), tree ref 0 for those in `implied`, the sequence index, the
    /// expiry index and the local documents' stored values.
    static func verifyRaw(_ raw: Raw, _ x: Expected, treeFormat: UInt8, rewritten: Set<String> = [],
                          implied: Set<String> = []) {
        #expect(Set(raw.documents.keys) == Set(x.documents.map(\.id)))
        for d in x.documents {
            let c = Comment(rawValue: "raw \(d.id)")
            guard let r = raw.documents[d.id] else { continue }
            #expect(r.flags == d.flags, c)
            #expect(r.sequence == d.sequence, c)
            #expect(r.revisionID == d.current, c)
            if implied.contains(d.id) {
                #expect(r.treeRef == 0, c)
            } else {
                #expect(r.treeRef != 0, c)
                #expect(r.treeFormat == (rewritten.contains(d.id) ? 2 : treeFormat), c)
            }
            #expect(raw.sequences[d.sequence] == d.id, c)
        }
        #expect(raw.sequences.count == x.documents.count)
        #expect(raw.expiryIndex == x.expirations.sorted { $0.value.due! < $1.value.due! }.map { "\($0.value.due!) \($0.key)" })
        #expect(raw.local == [
            "checkpoint-α": [2] + Array(#"{"history":[{"seq":17},{"seq":42}],"last_seq":42,"session":"s-1"}"#.utf8),
            "repl-1": [1] + Array(#"{"remote":"https://example.com/db"}"#.utf8),
        ])
    }

    /// Every file under `path` with its bytes.
    static func snapshot(_ path: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        let e = try #require(FileManager.default.enumerator(atPath: path))
        while let name = e.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue {
                out[name] = try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))
            }
        }
        return out
    }
}
