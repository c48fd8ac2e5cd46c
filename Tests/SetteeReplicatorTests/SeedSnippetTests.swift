import Foundation
import Settee
import SetteeReplicator
import Testing

// The Swift of the source documents, compiled with the public API only (no SPI, no @testable).
// Each snippet is as the seed prints it, except:
// - `[String: Any]` values are `JSONValue` (a merge closure's `-> Any` is `-> JSONValue`);
// - seed 002's `database.document(withID:)` is called with `try`: in Settee a read reports a
//   damaged or closed database by throwing (as Couchbase Lite 3's `document(id:)` does) rather
//   than returning nil for a document that may well exist;
// - the endpoint is a `DatabaseEndpoint` where the seed builds a `URLEndpoint`, and the
//   replicator's owner is a small class so that `self.replicator` means what it does in the seed.

// MARK: Seed 002, "Custom Conflict Resolution" (and seed 000's ConflictResolver shape)

class LocalWinConflictResolver: ConflictResolverProtocol {
    func resolve(conflict: Conflict) -> Document? {
        return conflict.localDocument
    }
}

class RemoteWinConflictResolver: ConflictResolverProtocol {
    func resolve(conflict: Conflict) -> Document? {
        return conflict.remoteDocument
    }
}

class MergeConflictResolver: ConflictResolverProtocol {
    func resolve(conflict: Conflict) -> Document? {
        let localDict = conflict.localDocument!.toDictionary()
        let remoteDict = conflict.remoteDocument!.toDictionary()
        let result = localDict.merging(remoteDict) { (current, new) -> JSONValue in
            return current // return current value in case of duplicate keys
        }
        return MutableDocument(id: conflict.documentID, data: result)
    }
}

/// Seed 000's "when a null document is returned, the conflict will be resolved as document deletion".
class DeleteOnConflictResolver: ConflictResolverProtocol {
    func resolve(conflict: Conflict) -> Document? {
        return nil
    }
}

/// Seed 002, "Configure the Replicator", in the object that owns the replicator.
final class SyncController {
    var replicator: Replicator!

    func startReplication(database: Database, target: DatabaseEndpoint, resolver: ConflictResolverProtocol) {
        var config = ReplicatorConfiguration(database: database, target: target)
        config.conflictResolver = LocalWinConflictResolver()
        config.conflictResolver = resolver   // the test's choice among the seed's resolvers
        self.replicator = Replicator(config: config)
        self.replicator.start()
    }
}

// MARK: Seed 002, "Custom Conflict Handlers"

func saveWithConflictHandler(database: Database) throws {
    guard let document = try database.document(withID: "xyz") else { return }
    let mutableDocument = document.toMutable()
    mutableDocument.setString("apples", forKey: "name")
    try database.saveDocument(mutableDocument, conflictHandler: { (new, current) -> Bool in
        let currentDict = current!.toDictionary()
        let newDict = new.toDictionary()
        let result = newDict.merging(currentDict, uniquingKeysWith: { (first, _) in first })
        new.setData(result)
        return true
    })
}

/// The Couchbase Lite names a ported app uses beside the snippets above.
func couchbaseLiteNames(database: Database) throws -> Bool {
    let doc = MutableDocument(id: "flags")
    doc.setBoolean(true, forKey: "done")
    try database.saveDocument(doc)
    let asDocument: Document = doc   // a MutableDocument is a Document
    return try database.document(withID: "flags")!.boolean(forKey: "done") && asDocument.boolean(forKey: "done")
}

@Suite struct SeedSnippetTests {
    /// `local` and `remote` share `doc` at generation 1, then each saves its own edit.
    func conflicted(_ dir: TestDirectory) async throws -> (local: Database, remote: Database) {
        let local = try dir.open("local"), remote = try dir.open("remote")
        try save(local, "doc", ["v": 0, "shared": true])
        #expect(await replicate(local, remote, .push).error == nil)
        try save(local, "doc", ["v": 1, "mine": "a"])
        try save(remote, "doc", ["v": 2, "theirs": "b"])
        return (local, remote)
    }

    @Test(arguments: ["local", "remote", "merge", "delete"])
    func seedResolversResolvePulledConflicts(_ kind: String) async throws {
        let dir = try TestDirectory()
        let (local, remote) = try await conflicted(dir)
        let resolver: ConflictResolverProtocol = switch kind {
        case "local": LocalWinConflictResolver()
        case "remote": RemoteWinConflictResolver()
        case "merge": MergeConflictResolver()
        default: DeleteOnConflictResolver()
        }
        let controller = SyncController()
        controller.startReplication(database: local, target: DatabaseEndpoint(database: remote), resolver: resolver)
        let status = await controller.replicator.waitUntilStopped()
        #expect(status.error == nil)
        let doc = try await local.document(withID: "doc")
        switch kind {
        case "local": #expect(doc?.toDictionary() == ["v": 1, "mine": "a"])
        case "remote": #expect(doc?.toDictionary() == ["v": 2, "theirs": "b"])
        case "merge": #expect(doc?.toDictionary() == ["v": 1, "mine": "a", "theirs": "b"])
        default: #expect(doc == nil)
        }
        #expect(try await local.revisionTree(withID: "doc")?.isConflicted == false)
        // The resolution is revisions: the next run pushes it, and the remote side agrees.
        controller.startReplication(database: local, target: DatabaseEndpoint(database: remote), resolver: resolver)
        #expect(await controller.replicator.waitUntilStopped().error == nil)
        #expect(try await remote.revisionTree(withID: "doc")?.isConflicted == false)
        #expect(try await remote.document(withID: "doc")?.toDictionary() == doc?.toDictionary())
    }

    @Test func seedConflictHandlerMergesTheCurrentRevision() throws {
        let dir = try TestDirectory()
        let db = try dir.open("db")
        try save(db, "xyz", ["name": "pears", "colour": "green"])
        // The seed's handler on a real conflict: another writer changed the document between the
        // read and the save; the edit's keys win, the rest of the current revision is kept.
        let stale = try #require(try db.document(withID: "xyz")).toMutable()
        try save(db, "xyz", ["name": "plums", "colour": "purple", "ripe": true])
        stale.setString("apples", forKey: "name")
        try db.saveDocument(stale, conflictHandler: { (new, current) -> Bool in
            let currentDict = current!.toDictionary()
            let newDict = new.toDictionary()
            let result = newDict.merging(currentDict, uniquingKeysWith: { (first, _) in first })
            new.setData(result)
            return true
        })
        #expect(try db.document(withID: "xyz")?.toDictionary() == ["name": "apples", "colour": "green", "ripe": true])
        // The snippet itself, on a document nobody else is changing: it saves the edit.
        try saveWithConflictHandler(database: db)
        #expect(try db.document(withID: "xyz")?.string(forKey: "name") == "apples")
        #expect(try db.document(withID: "xyz")?.boolean(forKey: "ripe") == true)
        // And on a missing document it returns without saving.
        let empty = try dir.open("empty")
        try saveWithConflictHandler(database: empty)
        #expect(try empty.count == 0)
    }

    @Test func couchbaseLiteNamesWork() throws {
        let dir = try TestDirectory()
        #expect(try couchbaseLiteNames(database: dir.open("db")))
    }
}
