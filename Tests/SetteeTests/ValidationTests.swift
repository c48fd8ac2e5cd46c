import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// Validation functions (seed 003): they see every new revision, local or replicated, with the
/// current revision, and reject with a message (`forbidden`, CouchDB's 403).
@Suite struct ValidationTests {
    @Test func validationRejectsLocalSavesWithItsMessage() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.addValidation(named: "created_at") { newRevision, _ in
            if newRevision.isDeleted { return }
            if let s = newRevision.string(forKey: "created_at"), JSONDate.date(from: s) == nil {
                throw SetteeError.forbidden("invalid date \(s)")
            }
        }
        try db.saveDocument(MutableDocument(id: "good", data: ["created_at": "2026-11-21T10:00:00.000Z"]))
        let bad = MutableDocument(id: "bad", data: ["created_at": "yesterday"])
        let error = setteeError { try db.saveDocument(bad) }
        #expect(error?.code == .forbidden)
        #expect(error?.message == "invalid date yesterday")
        #expect(bad.revisionID == nil)
        #expect(try db.document(withID: "bad") == nil)
        #expect(try db.count == 1)

        // Updates are checked too, and every concurrency-control path.
        let m = try #require(try db.document(withID: "good")).toMutable()
        m.setString("13/13/13", forKey: "created_at")
        #expect(setteeError { _ = try db.saveDocument(m, concurrencyControl: .failOnConflict) }?.code == .forbidden)
        #expect(setteeError { _ = try db.saveDocument(m) { _, _ in true } }?.code == .forbidden)
        #expect(try db.document(withID: "good")?.string(forKey: "created_at") == "2026-11-21T10:00:00.000Z")

        // An error of another kind is reported as forbidden, with the validation's name.
        db.addValidation(named: "size") { newRevision, _ in
            struct TooBig: Error {}
            if newRevision.int(forKey: "size") > 10 { throw TooBig() }
        }
        let big = setteeError { try db.saveDocument(MutableDocument(id: "big", data: ["size": 11])) }
        #expect(big?.code == .forbidden)
        #expect(big?.message.hasPrefix("size") == true)

        // Removing it lifts the rule; adding under the same name replaces it.
        db.removeValidation(named: "size")
        try db.saveDocument(MutableDocument(id: "big", data: ["size": 11]))
        db.addValidation(named: "created_at") { _, _ in }
        try db.saveDocument(bad)
        #expect(try db.count == 3)
    }

    @Test func validationRejectsOneReplicatedRevisionAndKeepsTheOthers() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        db.addValidation(named: "owner") { newRevision, _ in
            guard newRevision.isDeleted || newRevision.string(forKey: "owner") != nil else {
                throw SetteeError.forbidden("a document needs an owner")
            }
        }
        let outcomes = try db.insertRevisions([
            rev("one", "1-a", ["1-a"], ["owner": "molly"]),
            rev("two", "1-b", ["1-b"], ["title": "no owner"]),
            rev("three", "1-c", ["1-c"], ["owner": "naomi"]),
            rev("one", "2-a", ["2-a", "1-a"], ["title": "lost the owner"]),
            rev("one", "1-a", ["1-a"], ["owner": "molly"]),
        ])
        #expect(outcomes == [.inserted, .rejected(SetteeError(.forbidden, "a document needs an owner")), .inserted,
                             .rejected(SetteeError(.forbidden, "a document needs an owner")), .alreadyPresent])
        #expect(try db.document(withID: "one")?.revisionID == "1-a")
        #expect(try db.document(withID: "two") == nil)
        #expect(try db.revisionTree(withID: "two") == nil)
        #expect(try db.document(withID: "three")?.string(forKey: "owner") == "naomi")
        #expect(try db.changes(since: 0).map(\.documentID) == ["one", "three"])

        // insertRevision throws the rejection.
        let error = setteeError { try db.insertRevision(rev("four", "1-d", ["1-d"], [:])) }
        #expect(error == SetteeError(.forbidden, "a document needs an owner"))
    }

    @Test func validationSeesTheCurrentRevisionToGuardDeletions() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        let seenCurrents = Locked<[String?]>([])
        db.addValidation(named: "completed-before-delete") { newRevision, current in
            seenCurrents.withLock { $0.append(current?.revisionID) }
            if newRevision.isDeleted, current?.string(forKey: "status") != "completed" {
                throw SetteeError.forbidden("only completed tasks can be deleted")
            }
        }
        try db.saveDocument(MutableDocument(id: "task", data: ["status": "open"]))
        #expect(seenCurrents.value == [nil])   // a new document has no current revision
        let open = try #require(try db.document(withID: "task"))

        let error = setteeError { try db.deleteDocument(open) }
        #expect(error?.code == .forbidden)
        #expect(error?.message == "only completed tasks can be deleted")
        #expect(try db.document(withID: "task")?.revisionID == open.revisionID)
        // A tombstone with properties goes through the same check.
        let tomb = open.toMutable()
        tomb.isDeletion = true
        tomb.setString("completed", forKey: "status")   // the new revision says completed, the current does not
        #expect(setteeError { try db.saveDocument(tomb) }?.code == .forbidden)

        let done = open.toMutable()
        done.setString("completed", forKey: "status")
        try db.saveDocument(done)
        #expect(seenCurrents.value.last == open.revisionID)
        try db.deleteDocument(try #require(try db.document(withID: "task")))
        #expect(try db.document(withID: "task") == nil)
        #expect(seenCurrents.value.last == done.revisionID)

        // Replicated deletions see the current revision too.
        try db.saveDocument(MutableDocument(id: "remote", data: ["status": "open"]))
        let r1 = try #require(try db.document(withID: "remote")?.revisionID)
        let outcome = try db.insertRevisions([rev("remote", "2-x", ["2-x", r1], deleted: true)])
        #expect(outcome == [.rejected(SetteeError(.forbidden, "only completed tasks can be deleted"))])
        #expect(try db.document(withID: "remote") != nil)
    }

    @Test func resolutionsAreValidatedToo() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        _ = try db.insertRevisions([rev("c", "1-a", ["1-a"], ["n": 1]), rev("c", "2-b", ["2-b", "1-a"], ["n": 2]),
                                rev("c", "2-c", ["2-c", "1-a"], ["n": 3])])
        db.addValidation(named: "n") { new, _ in
            if !new.isDeleted, new.int(forKey: "n") > 100 { throw SetteeError.forbidden("n too large") }
        }
        #expect(setteeError { try db.resolveConflict(withID: "c", mergedProperties: ["n": 500]) }?.code == .forbidden)
        #expect(try db.revisionTree(withID: "c")?.isConflicted == true)
        #expect(try db.revisionTree(withID: "c")?.revisions.count == 3)
        try db.resolveConflict(withID: "c", mergedProperties: ["n": 5])
        #expect(try db.revisionTree(withID: "c")?.isConflicted == false)
    }
}
