import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// The entry points a replicator uses: the changes feed, revsDiff, revisions with history,
/// insertRevisions, and local (unreplicated) documents.
@Suite struct ReplicationAPITests {
    @Test func changesFeedOrderLimitAndSince() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        #expect(try db.changes(since: 0).isEmpty)
        #expect(try db.lastSequence == 0)
        let a = MutableDocument(id: "a", data: ["v": 1])
        try db.saveDocument(a)                                             // 1
        try db.saveDocument(MutableDocument(id: "b", data: ["v": 1]))      // 2
        try db.saveDocument(MutableDocument(id: "c", data: ["v": 1]))      // 3
        a.setInt(2, forKey: "v")
        try db.saveDocument(a)                                             // 4: a moves to the end
        try db.deleteDocument(try #require(try db.document(withID: "b")))  // 5: b moves to the end, deleted

        let all = try db.changes(since: 0)
        #expect(all.map(\.documentID) == ["c", "a", "b"])
        #expect(all.map(\.sequence) == [3, 4, 5])
        #expect(all.map(\.isDeleted) == [false, false, true])
        #expect(all[1].revisionID == a.revisionID)
        #expect(all.allSatisfy { $0.leafRevisionIDs == [$0.revisionID] && !$0.isConflicted })
        #expect(try db.changes(since: 0, limit: 2).map(\.documentID) == ["c", "a"])
        #expect(try db.changes(since: 3).map(\.documentID) == ["a", "b"])
        #expect(try db.changes(since: 4, limit: 10).map(\.documentID) == ["b"])
        #expect(try db.changes(since: 5).isEmpty)
        #expect(try db.changes(since: .max).isEmpty)
        #expect(try db.changes(since: 0, limit: 0).isEmpty)
        #expect(setteeError { _ = try db.changes(since: 0, limit: -1) }?.code == .invalidParameter)
        #expect(try db.lastSequence == 5)

        // Paging through the feed with the last sequence as checkpoint sees every document once.
        var since: UInt64 = 0
        var seen: [String] = []
        while case let batch = try db.changes(since: since, limit: 1), !batch.isEmpty {
            seen += batch.map(\.documentID)
            since = batch.last!.sequence
        }
        #expect(seen == ["c", "a", "b"])
    }

    /// A replicated generation above 2^53 − 1 is that revision's rejection; one at the limit is
    /// stored, and an edit on top of it is an error, never an overflow.
    @Test func generationsFromPeersAreBounded() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let top = "\(RevisionIDSyntax.maxGeneration)-a"
        let outcomes = try db.insertRevisions([rev("big", "18446744073709551615-a", ["18446744073709551615-a"]),
                                               rev("big", "9007199254740992-a", ["9007199254740992-a"]),
                                               rev("top", top, [top], ["v": 1])])
        guard case .rejected(let e1) = outcomes[0], case .rejected(let e2) = outcomes[1] else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(e1.code == .invalidParameter && e2.code == .invalidParameter && e1.message.contains("2^53"), "\(e1) \(e2)")
        #expect(outcomes[2] == .inserted)
        #expect(try db.revisionTree(withID: "big") == nil)
        let edit = try #require(try db.document(withID: "top")).toMutable()
        edit.setInt(2, forKey: "v")
        #expect(setteeError { try db.saveDocument(edit) }?.code == .invalidParameter)
        let doomed = try #require(try db.document(withID: "top"))
        #expect(setteeError { try db.deleteDocument(doomed) }?.code == .invalidParameter)
        #expect(try db.document(withID: "top")?.revisionID == top)
        #expect(setteeError { _ = try RevisionIDSyntax.child(of: RevisionIDSyntax.maxGeneration) }?.code == .invalidParameter)
        #expect(try RevisionIDSyntax.child(of: RevisionIDSyntax.maxGeneration - 1) == RevisionIDSyntax.maxGeneration)
    }

    @Test func changesOfAConflictedDocumentListEveryLeaf() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try db.insertRevisions([
            rev("doc", "1-a", ["1-a"], ["v": 1]),
            rev("doc", "2-b", ["2-b", "1-a"], ["v": 2]),
            rev("doc", "2-c", ["2-c", "1-a"], ["v": 3]),
            rev("doc", "2-d", ["2-d", "1-a"], deleted: true),
        ])
        try db.saveDocument(MutableDocument(id: "other", data: [:]))
        let changes = try db.changes(since: 0)
        #expect(changes.map(\.documentID) == ["doc", "other"])
        let doc = changes[0]
        #expect(doc.revisionID == "2-c")
        #expect(doc.isConflicted)
        #expect(!doc.isDeleted)
        #expect(doc.leafRevisionIDs == ["2-c", "2-b", "2-d"])   // undeleted first, then the tombstone
        // Each insert took a sequence; the document keeps only its latest.
        #expect(doc.sequence == 4)
        #expect(try db.lastSequence == 5)
    }

    @Test func revsDiffAndRevisionsWithHistory() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try db.insertRevisions([rev("d", "1-a", ["1-a"], ["v": 1]), rev("d", "2-b", ["2-b", "1-a"], ["v": 2]),
                                rev("d", "3-c", ["3-c", "2-b", "1-a"], ["v": 3])])
        let diff = try db.revsDiff(["d": ["3-c", "4-x", "2-b", "4-x"], "unknown": ["1-z", "2-y"], "_bad": ["1-a"]])
        #expect(diff["d"] == RevsDiffResult(missing: ["4-x"], possibleAncestors: ["3-c"]))
        #expect(diff["unknown"] == RevsDiffResult(missing: ["1-z", "2-y"], possibleAncestors: []))
        #expect(diff["_bad"] == nil)
        #expect(try db.revsDiff(["d": ["1-a", "2-b"]]).isEmpty)

        let r = try #require(try db.revision(withID: "d", revisionID: "3-c"))
        #expect(r.history == ["3-c", "2-b", "1-a"])
        #expect(try r.properties == ["v": 3])
        #expect(!r.isDeleted)
        #expect(try db.revision(withID: "d", revisionID: "2-b")?.history == ["2-b", "1-a"])
        #expect(try db.revision(withID: "d", revisionID: "9-z") == nil)
        #expect(try db.revision(withID: "nobody", revisionID: "1-a") == nil)
        #expect(try db.leafRevisions(withID: "nobody").isEmpty)

        // A revision that arrives with history joins the tree at its newest known ancestor.
        #expect(try db.insertRevision(rev("d", "5-e", ["5-e", "4-x", "3-c", "2-b"], ["v": 5])))
        let tree = try #require(try db.revisionTree(withID: "d"))
        #expect(tree.revisions.map(\.revisionID) == ["1-a", "2-b", "3-c", "4-x", "5-e"])
        #expect(tree.revisions.first { $0.revisionID == "4-x" }?.hasBody == false)
        #expect(tree.leafRevisionIDs == ["5-e"])
        // A history that shares nothing with the tree starts a new branch (a conflict).
        #expect(try db.insertRevision(rev("d", "3-q", ["3-q", "2-p"], ["v": 30])))
        #expect(try db.revisionTree(withID: "d")?.isConflicted == true)
        #expect(try db.revisionTree(withID: "d")?.revisions.first { $0.revisionID == "2-p" }?.parentRevisionID == nil)
        // Already present.
        #expect(try db.insertRevision(rev("d", "3-c", ["3-c", "2-b"], ["v": 3])) == false)
        #expect(try db.insertRevisions([rev("d", "5-e", ["5-e"]), rev("d", "6-f", ["6-f", "5-e"], ["v": 6])])
                == [.alreadyPresent, .inserted])
        #expect(try db.document(withID: "d")?.revisionID == "6-f")
        // Leaves come current first, with their history and bodies.
        let leaves = try db.leafRevisions(withID: "d")
        #expect(leaves.map(\.revisionID) == ["6-f", "3-q"])
        #expect(leaves[0].history.prefix(3) == ["6-f", "5-e", "4-x"])
        #expect(try leaves[1].properties == ["v": 30])
    }

    @Test func blobReferencesNeedTheirContent() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let blob = Blob(contentType: "text/plain", data: Data("attached".utf8))
        let outcomes = try db.insertRevisions([
            rev("x", "1-a", ["1-a"], ["file": .object(blob.properties)]),
            rev("y", "1-a", ["1-a"], ["v": 1]),
        ])
        guard case .rejected(let e) = outcomes[0] else { Issue.record("accepted without content"); return }
        #expect(e.code == .notFound)
        #expect(outcomes[1] == .inserted)
        try db.saveBlob(blob)
        #expect(try db.insertRevisions([rev("x", "1-a", ["1-a"], ["file": .object(blob.properties)])]) == [.inserted])
        #expect(try db.document(withID: "x")?.blob(forKey: "file")?.content == Data("attached".utf8))
    }

    @Test func attachmentStubsResolveAgainstWhatTheDatabaseHas() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let blob = Blob(contentType: "text/plain", data: Data("hello".utf8))
        try db.saveBlob(blob)
        var entry = blob.properties
        entry["md5"] = "md5-XUFAKrxLKna5cZ2REBfFkg=="
        try db.insertRevision(rev("d", "1-a", ["1-a"], ["_attachments": ["a.txt": .object(entry)]]))
        // By name, from the revision's own ancestor.
        let stub: JSONValue = ["stub": true, "revpos": 1, "digest": "md5-XUFAKrxLKna5cZ2REBfFkg=="]
        #expect(try db.insertRevision(rev("d", "2-b", ["2-b", "1-a"], ["v": 2, "_attachments": ["a.txt": stub]])))
        let second = try #require(try db.document(withID: "d"))
        #expect(second.dictionary(forKey: "_attachments")?["a.txt"]?.objectValue?["digest"] == .string(blob.digest))
        // On another branch, by its md5 (the receiver named a leaf of another branch in atts_since).
        #expect(try db.insertRevision(rev("d", "2-c", ["2-c", "1-x"], ["_attachments": ["b.txt": stub]])))
        let other = try #require(try db.document(withID: "d", revisionID: "2-c"))
        #expect(other.dictionary(forKey: "_attachments")?["b.txt"]?.objectValue?["digest"] == .string(blob.digest))
        // A stub that names nothing here: rejected, missing_stub, nothing stored.
        let unknown: JSONValue = ["stub": true, "digest": "md5-AAAAAAAAAAAAAAAAAAAAAA=="]
        let outcome = try db.insertRevisions([rev("d", "3-d", ["3-d", "2-b", "1-a"], ["_attachments": ["a.txt": unknown]])])
        guard case .rejected(let e) = outcome[0] else { Issue.record("accepted \(outcome)"); return }
        #expect(e.code == .notFound && e.message.hasPrefix("missing_stub"))
        #expect(try db.revisionTree(withID: "d")?.revisions.contains { $0.revisionID == "3-d" } == false)
    }

    @Test func jsonBodiesAreCheckedAndStoredAsTheyCame() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        func json(_ id: String, _ revID: String, _ text: String, deleted: Bool = false) -> ReplicatedRevision {
            ReplicatedRevision(documentID: id, revisionID: revID, history: [revID], isDeleted: deleted, json: Array(text.utf8))
        }
        let spaced = #" { "title" : "Naomi\u0027s",  "n": [1, 2.5e1, -0] } "#
        let missingBlob = Blob(contentType: "text/plain", data: Data("never saved".utf8))
        let outcomes = try db.insertRevisions([
            json("a", "1-a", spaced),
            json("b", "1-b", #"{"v":1,}"#),                 // not JSON
            json("c", "1-c", #"{"_id":"c"}"#),               // a reserved key
            json("d", "1-d", #"[1]"#),                       // not an object
            json("e", "1-e", #"{"k":1,"k":2}"#),             // a duplicate key
            json("f", "1-f", "{}", deleted: true),
            json("g", "1-g", #"{"x":{"@type":"blob","digest":"\#(missingBlob.digest)","length":1}}"#),
        ])
        #expect(outcomes[0] == .inserted)
        for (i, code) in [(1, SetteeError.Code.invalidJSON), (2, .invalidParameter), (3, .invalidJSON), (4, .invalidJSON), (6, .notFound)] {
            guard case .rejected(let e) = outcomes[i] else { Issue.record("revision \(i) was accepted"); continue }
            #expect(e.code == code, "revision \(i): \(e)")
        }
        #expect(outcomes[5] == .inserted)
        // Stored byte for byte, read as properties.
        let doc = try #require(try db.document(withID: "a"))
        #expect(doc.string(forKey: "title") == "Naomi's")
        #expect(doc["n"] == [1, 25.0, 0])
        let back = try #require(try db.revision(withID: "a", revisionID: "1-a"))
        #expect(back.json == Array(spaced.utf8))
        #expect(try back.properties == ["title": "Naomi's", "n": [1, 25.0, 0]])
        #expect(back == ReplicatedRevision(documentID: "a", revisionID: "1-a", history: ["1-a"], isDeleted: false,
                                           properties: ["title": "Naomi's", "n": [1, 25.0, 0]]))
        #expect(try db.document(withID: "f") == nil)
        #expect(try db.revision(withID: "f", revisionID: "1-f")?.properties == [:])
        // A body that is not a JSON object never reads as empty properties.
        for bad in ["[1]", "{\"a\":", "", "{\"a\":1,\"a\":2}"] {
            let r = ReplicatedRevision(documentID: "z", revisionID: "1-z", history: ["1-z"], isDeleted: false, json: Array(bad.utf8))
            #expect(throws: SetteeError.self, "\(bad)") { _ = try r.properties }
        }
        // Rejected ones left nothing.
        for id in ["b", "c", "d", "e", "g"] { #expect(try db.revisionTree(withID: id) == nil, "\(id)") }
        #expect(try db.count == 1)

        // Validations see a JSON body's properties.
        db.addValidation(named: "needs title") { new, _ in
            if new.string(forKey: "title") == nil && !new.isDeleted { throw SetteeError.forbidden("no title") }
        }
        let checked = try db.insertRevisions([json("h", "1-h", #"{"title":"ok"}"#), json("i", "1-i", #"{"other":1}"#)])
        #expect(checked[0] == .inserted)
        guard case .rejected(let e) = checked[1] else { Issue.record("validation skipped"); return }
        #expect(e.code == .forbidden)

        // A revision made from JSON, changed through `properties`, carries properties from then on.
        var edited = json("j", "1-j", #"{"v":1}"#)
        #expect(try edited.properties == ["v": 1])
        var changed = try edited.properties
        changed["title"] = "set"
        edited.setProperties(changed)
        #expect(edited.json == nil)
        #expect(try db.insertRevision(edited))
        #expect(try db.document(withID: "j")?.toDictionary() == ["v": 1, "title": "set"])
    }

    @Test func localDocumentsAreNeverReplicatedOrListed() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        try db.saveDocument(MutableDocument(id: "regular", data: ["v": 1]))
        let seq = try db.lastSequence

        #expect(try db.localDocument(withID: "checkpoint") == nil)
        #expect(try db.saveLocalDocument(["last_seq": 42], withID: "checkpoint") == "0-1")
        #expect(try db.saveLocalDocument(["last_seq": 43, "session": "s"], withID: "_local/checkpoint") == "0-2")
        let (props, revision) = try #require(try db.localDocumentWithRevision(withID: "checkpoint"))
        #expect(props == ["last_seq": 43, "session": "s"])
        #expect(revision == "0-2")
        #expect(try db.localDocument(withID: "_local/checkpoint")?["last_seq"] == 43)
        // Local documents may use "_" keys (checkpoints are CouchDB-shaped).
        try db.saveLocalDocument(["_rev": "0-1", "history": []], withID: "other")

        #expect(try db.allDocuments().readAll().map(\.id) == ["regular"])
        var options = AllDocumentsOptions()
        options.includeDeleted = true
        #expect(try db.allDocuments(options).readAll().map(\.id) == ["regular"])
        #expect(try db.changes(since: 0).map(\.documentID) == ["regular"])
        #expect(try db.document(withID: "checkpoint") == nil)
        #expect(try db.count == 1)
        #expect(try db.lastSequence == seq)

        try db.deleteLocalDocument(withID: "checkpoint")
        #expect(try db.localDocument(withID: "checkpoint") == nil)
        #expect(setteeError { try db.deleteLocalDocument(withID: "checkpoint") }?.code == .notFound)
        #expect(setteeError { _ = try db.saveLocalDocument([:], withID: "") }?.code == .invalidParameter)
        #expect(setteeError { _ = try db.saveLocalDocument([:], withID: "_local/") }?.code == .invalidParameter)
        // Saved again after deletion, it starts over.
        #expect(try db.saveLocalDocument(["last_seq": 1], withID: "checkpoint") == "0-1")
        #expect(try db.changes(since: 0).count == 1)
    }
}
