import Foundation
import HTTPTypes
import Hummingbird
import SetteeHTTP
import NIOCore
@_spi(Replication) @_spi(Server) import Settee

extension CouchAPI {
    // MARK: - /{db}/{doc}

    func document(_ call: inout Call, _ db: ServedDatabase, id: String) async throws -> Response {
        // CouchDB checks a partitioned database's IDs whatever the method.
        try Self.checkPartitionedID(id, in: db)
        switch call.request.method {
        case .get, .head: return try getDocument(call, db, id: id)
        case .put: return try await putDocument(&call, db, id: id)
        case .delete: return try await deleteDocument(call, db, id: id)
        case HTTPRequest.Method("COPY")!: return try await copyDocument(call, db, id: id)
        case .post: return try await formUpload(&call, db, id: id)
        default: throw CouchError.methodNotAllowed("COPY,DELETE,GET,HEAD,POST,PUT")
        }
    }

    /// The JSON CouchDB sends for a revision: its properties and `_id`, `_rev`, `_deleted`, and
    /// on request `_revisions`.
    /// A restricted reader gets the history up to the first ancestor it may not know of.
    func revisionJSON(_ r: ReplicatedRevision, revs: Bool, reader: Reader, inlineAfter: UInt64? = nil) throws -> [String: JSONValue] {
        var o = try r.properties
        if case .object(let stored)? = o["_attachments"] {
            o["_attachments"] = try wireAttachments(stored, reader.db, inlineAfter: inlineAfter)
        }
        o["_id"] = .string(r.documentID)
        o["_rev"] = .string(r.revisionID)
        if r.isDeleted { o["_deleted"] = true }
        if reader.db.name == ReplicatorDocuments.databaseName {
            for (key, value) in server.replicatorDocuments.members(of: r.documentID, revision: r.revisionID) { o[key] = value }
        }
        if revs {
            // Stored before generations were bounded: its history cannot be written for peers
            // that count in doubles (answered as this revision's error where a response has one
            // per revision).
            guard let (start, _) = parseRevision(r.revisionID) else {
                throw CouchError(.internalServerError, "bad_revision", "revision \(r.revisionID) of this document has a generation above \(RevisionIDSyntax.maxGeneration) and cannot be sent with its history")
            }
            o["_revisions"] = [
                "start": .int(Int64(start)),
                "ids": .array(try reader.history(r.history, of: r.documentID).map { .string(String(parseRevision($0)?.1 ?? Substring($0))) }),
            ]
        }
        return o
    }

    private func getDocument(_ call: Call, _ db: ServedDatabase, id: String) throws -> Response {
        let database = db.database
        let reader = try Reader(db, call.principal)
        if let rev = call.query["rev"], parseRevision(rev) == nil { throw CouchError.badRequest("Invalid rev format") }
        if call.query["open_revs"] == nil {
            switch try reader.readability(of: id, revision: call.query["rev"]) {
            case .readable: break
            case .hidden: throw CouchError.notFound("missing")
            case .removed:
                guard let rev = try call.query["rev"] ?? database.revisionTree(withID: id)?.currentRevisionID else { throw CouchError.notFound("missing") }
                return try jsonResponse(RevisionAnswer.removedJSON(id, rev))
            }
        }
        db.counters.read()
        // A replication document's state is not its revision's: always the full path (below).
        let replication = db.name == ReplicatorDocuments.databaseName
        if call.query.isEmpty, !replication, let fast = try currentDocumentFast(call, database, id: id) { return fast }
        let revs = try flag(call, "revs")
        if let openRevs = call.query["open_revs"] {
            return try openRevisions(call, reader, id: id, spec: openRevs, revs: revs)
        }
        guard let tree = try database.revisionTree(withID: id) else { throw CouchError.notFound("missing") }
        let meta = try flag(call, "meta")
        let target: String
        if let rev = call.query["rev"] {
            target = rev
        } else {
            guard let current = tree.revisions.first(where: { $0.revisionID == tree.currentRevisionID }), !current.isDeleted else {
                throw CouchError.notFound("deleted")
            }
            target = tree.currentRevisionID
        }
        // A replication document's ETag changes with its state too.
        let state = replication ? server.replicatorDocuments.members(of: id, revision: target)["_replication_state_time"]?.stringValue : nil
        let etag = state.map { "\"\(target)-\($0)\"" } ?? "\"\(target)\""
        // The revision must still be there (compaction drops old bodies) before a cached copy
        // of it is confirmed.
        guard let revision = try database.revision(withID: id, revisionID: target) else { throw CouchError.notFound("missing") }
        if let notModified = Self.notModified(call, etag: etag) { return notModified }
        let inline = try inlineAfter(call, tree: tree)
        // Attachments asked for as parts of a multipart/related answer rather than inline.
        let related = inline != nil && Self.accepts(call.request.headers, "multipart/related")
        var o = try revisionJSON(revision, revs: revs, reader: reader, inlineAfter: related ? nil : inline)
        // Other leaves and the history, as far as the reader may know of them.
        let visible = try reader.revisionFilter(of: id)
        let leaves = tree.revisions.filter { tree.leafRevisionIDs.contains($0.revisionID) && $0.revisionID != target && visible($0.revisionID) }
        if try meta || flag(call, "conflicts") {
            let live = leaves.filter { !$0.isDeleted }.map(\.revisionID)
            if !live.isEmpty { o["_conflicts"] = .array(live.map(JSONValue.string)) }
        }
        if try meta || flag(call, "deleted_conflicts") {
            let dead = leaves.filter(\.isDeleted).map(\.revisionID)
            if !dead.isEmpty { o["_deleted_conflicts"] = .array(dead.map(JSONValue.string)) }
        }
        if try meta || flag(call, "revs_info") {
            let known = Dictionary(tree.revisions.map { ($0.revisionID, $0) }, uniquingKeysWith: { a, _ in a })
            o["_revs_info"] = .array(try reader.history(revision.history, of: id).map { rev in
                // Available only while its body is kept (compaction drops old bodies).
                let status = known[rev].map { $0.isDeleted ? "deleted" : $0.hasBody ? "available" : "missing" } ?? "missing"
                return ["rev": .string(rev), "status": .string(status)]
            })
        }
        if try flag(call, "local_seq"), target == tree.currentRevisionID, let doc = try database.document(withID: id) {
            o["_local_seq"] = .int(Int64(doc.sequence))
        }
        if related, let inline, let multipart = try relatedDocument(o, revision, db, after: inline, headers: [.eTag: etag]) {
            return multipart
        }
        return try jsonResponse(.object(o), headers: [.eTag: etag])
    }

    /// A plain GET of the current revision: the stored JSON with `_id` and `_rev` spliced in, no
    /// parse and no rewrite. Nil when the document needs more (attachments, or it is missing or
    /// deleted, whose 404 says which).
    private func currentDocumentFast(_ call: Call, _ database: Database, id: String) throws -> Response? {
        guard let doc = try database.document(withID: id), let rev = doc.revisionID else { return nil }
        let etag = "\"\(rev)\""
        if let notModified = Self.notModified(call, etag: etag) { return notModified }
        guard var out = try Self.spliced(try doc.storedJSON, id: id, rev: rev) else { return nil }
        out.append(0x0A)
        return Response(status: .ok, headers: [.contentType: "application/json", .eTag: etag],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: out)))
    }

    /// A document's stored JSON with `_id` and `_rev` spliced in front of its members (no parse,
    /// no rewrite); nil when it has attachments, whose stubs the wire form rewrites.
    static func spliced(_ json: [UInt8], id: String, rev: String) throws -> [UInt8]? {
        guard json.count >= 2, json.first == UInt8(ascii: "{"), !mentionsAttachments(json) else { return nil }
        var out = Array(#"{"_id":"#.utf8)
        out.reserveCapacity(json.count + id.utf8.count + rev.utf8.count + 24)
        out.append(contentsOf: try JSONValue.string(id).jsonBytes())
        out.append(contentsOf: Array(#","_rev":"#.utf8))
        out.append(contentsOf: try JSONValue.string(rev).jsonBytes())
        if json.count > 2 { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: json.dropFirst())
        return out
    }

    /// Whether `"_attachments"` occurs anywhere in `json` (a cheap, conservative test: a nested
    /// or quoted one counts too, and only costs the parsed path).
    static func mentionsAttachments(_ json: [UInt8]) -> Bool {
        let key = Array("_attachments\"".utf8)
        return json.withUnsafeBytes { b in
            func at(_ i: Int) -> Bool {
                i >= 1 && i + key.count <= b.count && b[i - 1] == UInt8(ascii: "\"") && b[i ..< i + key.count].elementsEqual(key)
            }
            // Eight bytes at a time: a word with no `_` in it is passed over whole.
            let underscores: UInt64 = 0x5F5F_5F5F_5F5F_5F5F
            var i = 0
            while i + 8 <= b.count {
                let w = b.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ underscores
                if (w &- 0x0101_0101_0101_0101) & ~w & 0x8080_8080_8080_8080 != 0 {
                    for j in i ..< i + 8 where b[j] == UInt8(ascii: "_") && at(j) { return true }
                }
                i += 8
            }
            while i < b.count {
                if b[i] == UInt8(ascii: "_") && at(i) { return true }
                i += 1
            }
            return false
        }
    }

    /// Which attachments go inline: all with `attachments=true`, those added after the newest
    /// known revision of `atts_since` (the revisions the client has), none otherwise.
    func inlineAfter(_ call: Call, tree: RevisionTree?) throws -> UInt64? {
        if let since = try jsonParameter(call, "atts_since") {
            guard case .array(let revs) = since else { throw CouchError.badRequest("atts_since must be a JSON array") }
            let known = Set(tree?.revisions.map(\.revisionID) ?? [])
            return revs.compactMap { r -> UInt64? in
                guard case .string(let rev) = r, known.contains(rev) else { return nil }
                return parseRevision(rev)?.0
            }.max() ?? 0
        }
        return try flag(call, "attachments") ? 0 : nil
    }

    /// `open_revs=all` or `open_revs=["rev",…]`: JSON `[{"ok": doc} | {"missing": rev}]`, or
    /// `multipart/mixed` when the client asks for it.
    private func openRevisions(_ call: Call, _ reader: Reader, id: String, spec: String, revs: Bool) throws -> Response {
        let database = reader.db.database
        var entries: [(String, ReplicatedRevision?)] = []
        if spec == "all" {
            entries = try database.leafRevisions(withID: id).map { ($0.revisionID, $0) }
        } else {
            guard case .array(let list)? = try jsonParameter(call, "open_revs") else {
                throw CouchError.badRequest("open_revs must be \"all\" or a JSON array of revisions")
            }
            let latest = try flag(call, "latest")
            for item in list {
                guard case .string(let rev) = item, parseRevision(rev) != nil else { throw CouchError.badRequest("Invalid rev format") }
                let found = try revisions(of: id, rev: rev, latest: latest, in: database)
                entries += found.isEmpty ? [(rev, nil)] : found.map { ($0.revisionID, $0) }
            }
        }
        let inline = try inlineAfter(call, tree: try database.revisionTree(withID: id))
        // A revision the user may not read is answered as one that does not exist.
        var answers: [RevisionAnswer] = []
        for (rev, r) in entries {
            if let r, let answer = try RevisionAnswer.gate(r, reader, after: inline) {
                answers.append(answer)
            } else if spec != "all" {
                answers.append(.error(["missing": .string(rev)]))
            }
        }
        if spec == "all" && answers.isEmpty { throw CouchError.notFound("missing") }
        if acceptsMultipartMixed(call) {
            // Attachments follow their document (all of them unless atts_since says otherwise).
            return try multipartMixed(answers.map { a in
                if case .revision(let r, _) = a { return .revision(r, attachmentsAfter: inline ?? 0) }
                return a
            }, revs: revs, reader: reader)
        }
        return try jsonResponse(.array(answers.map { a in
            switch a {
            case .revision(let r, let after):
                switch answerJSON(r, revs: revs, reader: reader, inlineAfter: after) {
                case .success(let json): return ["ok": .object(json)]
                case .failure(let e): return ["error": e.json]
                }
            case .removed(let id, let rev): return ["ok": RevisionAnswer.removedJSON(id, rev)]
            case .error(let e): return e.objectValue?["missing"] != nil ? e : ["error": e]
            }
        }))
    }

    private func putDocument(_ call: inout Call, _ db: ServedDatabase, id: String) async throws -> Response {
        try checkDocumentID(id, in: db)
        let body: [String: JSONValue]
        var follows: [String: Data] = [:]
        if let type = try Self.contentType(call.request.headers), type.lowercased().hasPrefix("multipart/related") {
            (body, follows) = try await multipartDocument(&call, db, contentType: type)
        } else {
            // Whatever the type says (curl's default is a form's): CouchDB reads a document
            // PUT as JSON. A page of another site cannot send a PUT without asking first.
            body = try await documentBody(&call, db, anyType: true)
        }
        var incoming = try IncomingDocument(ReplicatorDocuments.clientMembers(body, of: db))
        // The URL names the document, whatever the body's `_id` says (CouchDB's rule).
        incoming.id = id
        if let rev = call.query["rev"] {
            if parseRevision(rev) == nil { throw CouchError.badRequest("Invalid rev format") }
            if let bodyRev = incoming.rev, bodyRev != rev { throw CouchError.badRequest("Document rev from request body and query string have different values") }
            incoming.rev = rev
        }
        incoming.rev = try Self.revision(incoming.rev, ifMatch: call.request.headers[.ifMatch])
        let newEdits = try flag(call, "new_edits", default: true)
        if call.query["batch"] == "ok" {
            return try await batchSave(incoming, to: db, newEdits: newEdits, follows: follows, as: call.principal)
        }
        let rev = try await save(incoming, to: db, newEdits: newEdits, follows: follows, as: call.principal)
        return try jsonResponse(["ok": true, "id": .string(id), "rev": .string(rev)], status: .created,
                                headers: [.eTag: "\"\(rev)\"", .location: location(call, db, id)])
    }

    /// A document sent as a request's JSON body; CouchDB's words when it is not an object.
    func documentBody(_ call: inout Call, _ db: ServedDatabase, anyType: Bool = false) async throws -> [String: JSONValue] {
        guard case .object(let o) = try await jsonValueBody(&call, limit: bodyLimit(db), anyType: anyType) else {
            throw Self.documentNotAnObject
        }
        return o
    }

    /// `POST /{db}`: a new document, its ID from the body or generated.
    func postDocument(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let body = try await documentBody(&call, db)
        var incoming = try IncomingDocument(ReplicatorDocuments.clientMembers(body, of: db))
        let id = incoming.id ?? UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        incoming.id = id
        if call.query["batch"] == "ok" {
            return try await batchSave(incoming, to: db, newEdits: true, as: call.principal)
        }
        let rev = try await save(incoming, to: db, newEdits: true, as: call.principal)
        return try jsonResponse(["ok": true, "id": .string(id), "rev": .string(rev)], status: .created,
                                headers: [.eTag: "\"\(rev)\"", .location: location(call, db, id)])
    }

    /// `?batch=ok`: CouchDB's "accepted, not yet written" answer, 202 `{"ok": true, "id": …}`
    /// without a revision. What CouchDB checks before it accepts (the ID, the revision's form,
    /// the size: `save`'s 400 and 413) is still an error; a conflict or a refusal by the sync
    /// function is not: as in CouchDB, such a write is dropped and logged (`CRUD`), which is
    /// what a client asking for batch mode agrees to. The write itself is done before
    /// answering, so nothing accepted waits in memory.
    private func batchSave(_ incoming: IncomingDocument, to db: ServedDatabase, newEdits: Bool, follows: [String: Data] = [:],
                           as principal: Principal) async throws -> Response {
        guard let id = incoming.id else { throw CouchError.badRequest("Document id is missing") }
        do {
            _ = try await save(incoming, to: db, newEdits: newEdits, follows: follows, as: principal)
        } catch let e as CouchError where [.conflict, .forbidden, .unauthorized].contains(e.status) {
            server.log(.notice, "CRUD: \(db.name)/\(id) in batch mode not saved: \(e.error): \(e.reason)")
        } catch let e as SetteeError where [.conflict, .forbidden, .unauthorized].contains(e.code) {
            server.log(.notice, "CRUD: \(db.name)/\(id) in batch mode not saved: \(e.code): \(e.message)")
        }
        return try jsonResponse(["ok": true, "id": .string(id)], status: .accepted)
    }

    /// The revision a write names, from the request (`?rev=` or the body's `_rev`, already
    /// reconciled) and its `If-Match` header (the revision as an ETag, quoted or not): the
    /// same, or 400 when they disagree; a malformed one is 400 "Invalid rev format".
    static func revision(_ explicit: String?, ifMatch: String?) throws -> String? {
        if let explicit, parseRevision(explicit) == nil { throw CouchError.badRequest("Invalid rev format") }
        guard let ifMatch else { return explicit }
        let etag = ifMatch.trimmingCharacters(in: CharacterSet(charactersIn: "\"").union(.whitespaces))
        guard parseRevision(etag) != nil else { throw CouchError.badRequest("Invalid rev format") }
        if let explicit, explicit != etag { throw CouchError.badRequest("Document rev and etag have different values") }
        return etag
    }

    /// Saves one incoming document: a new revision on top of `_rev` (409 when that is not the
    /// current one), or with `new_edits=false` the revision as given, with its history.
    func save(_ incoming: IncomingDocument, to db: ServedDatabase, newEdits: Bool, follows: [String: Data] = [:],
              as principal: Principal) async throws -> String {
        guard let id = incoming.id else { throw CouchError.badRequest("Document id is missing") }
        try checkDocumentID(id, in: db)
        try checkSize(incoming.properties, db)
        if !newEdits {
            let revision = try await replicatedRevision(incoming, db: db, follows: follows)
            if case .rejected(let e)? = try await insert([revision], db, as: principal).first { throw e }
            return revision.revisionID
        }
        let edit = try await prepareEdit(incoming, reader: try Reader(db, principal), follows: follows)
        guard try await saveEdit(edit, db, as: principal), let rev = edit.revisionID else {
            throw CouchError.conflict
        }
        if server.logKeys.contains("CRUD") { server.log(.info, "CRUD: \(db.name)/\(id) saved as \(rev)\(incoming.deleted ? " (deleted)" : "")") }
        return rev
    }

    /// The edit a `new_edits=true` document makes, to save with failOnConflict: a new revision on
    /// top of `_rev` (409 when that is not a live leaf), its attachments stored.
    func prepareEdit(_ incoming: IncomingDocument, reader: Reader, follows: [String: Data] = [:]) async throws -> MutableDocument {
        guard let id = incoming.id else { throw CouchError.badRequest("Document id is missing") }
        if let rev = incoming.rev, parseRevision(rev) == nil { throw CouchError.badRequest("Invalid rev format") }
        let db = reader.db
        let database = db.database
        let edit: MutableDocument
        if let base = try await editBase(reader, id: id, rev: incoming.rev) {
            edit = base.toMutable()
            try await setProperties(incoming, of: edit, parent: base.dictionary(forKey: "_attachments") ?? [:],
                                    generation: try childGeneration(of: base.revisionID), follows: follows, db: db)
        } else {
            // Missing or deleted: a new document (continuing a tombstone's branch). A rev that
            // names no current revision is a conflict, unless it is the tombstone's.
            var generation: UInt64 = 1
            if let tree = try await database.revisionTree(withID: id) {
                if let rev = incoming.rev, try tree.currentRevisionID != rev || reader.readability(of: id, revision: rev) != .readable {
                    throw CouchError.conflict
                }
                generation = try childGeneration(of: tree.currentRevisionID)
            } else if incoming.rev != nil {
                throw CouchError.conflict
            }
            edit = MutableDocument(id: id)
            try await setProperties(incoming, of: edit, parent: [:], generation: generation, follows: follows, db: db)
        }
        edit.isDeletion = incoming.deleted
        return edit
    }

    /// The generation of a revision made on top of `rev` (1 on top of none). A stored revision
    /// whose generation is at Settee's limit (2^53 − 1), or above it (written before the limit),
    /// takes no further edit: 400.
    func childGeneration(of rev: String?) throws -> UInt64 {
        guard let rev else { return 1 }
        guard let (generation, _) = parseRevision(rev) else {
            throw CouchError.badRequest("revision \(rev) cannot be edited: its generation is above \(RevisionIDSyntax.maxGeneration)")
        }
        return try RevisionIDSyntax.child(of: generation)
    }

    /// The revision an edit naming `rev` starts from when the document is live: the current one,
    /// or a conflict's losing leaf (the edit, saved with failOnConflict, continues that branch as
    /// CouchDB's does). 409 when `rev` is neither, or names a revision the reader may not read
    /// (a user cannot confirm a guessed revision ID by writing on top of it); nil when the
    /// document is missing or deleted.
    func editBase(_ reader: Reader, id: String, rev: String?) async throws -> Document? {
        let database = reader.db.database
        guard let current = try await database.document(withID: id) else { return nil }
        if let rev, try reader.readability(of: id, revision: rev) != .readable { throw CouchError.conflict }
        if rev == current.revisionID { return current }
        guard let rev, let tree = try await database.revisionTree(withID: id), tree.leafRevisionIDs.contains(rev),
              let leaf = try await database.document(withID: id, revisionID: rev), !leaf.isDeleted else {
            throw CouchError.conflict
        }
        return leaf
    }

    /// A `new_edits=false` document as the revision to insert, its attachments stored (stubs name
    /// attachments of the newest revision of its history this database has).
    func replicatedRevision(_ incoming: IncomingDocument, db: ServedDatabase, follows: [String: Data] = [:]) async throws -> ReplicatedRevision {
        guard let id = incoming.id else { throw CouchError.badRequest("Document id is missing") }
        guard let rev = incoming.rev, let (generation, _) = parseRevision(rev) else { throw CouchError.badRequest("new_edits=false needs _rev") }
        let history = try incoming.history(of: rev)
        var properties = incoming.properties
        if let attachments = incoming.attachments {
            var parent: [String: JSONValue] = [:]
            for ancestor in history {
                if let r = try db.database.revision(withID: id, revisionID: ancestor) {
                    parent = try r.properties["_attachments"]?.objectValue ?? [:]
                    break
                }
            }
            let stored = try await storeAttachments(attachments, parent: parent, generation: generation, follows: follows, db: db)
            if !stored.isEmpty { properties["_attachments"] = .object(stored) }
        }
        return ReplicatedRevision(documentID: id, revisionID: rev, history: history, isDeleted: incoming.deleted, properties: properties)
    }

    /// Sets an edit's properties and attachments (stubs resolved against `parent`).
    private func setProperties(_ incoming: IncomingDocument, of edit: MutableDocument, parent: [String: JSONValue],
                               generation: UInt64, follows: [String: Data], db: ServedDatabase) async throws {
        var properties = incoming.properties
        if let attachments = incoming.attachments {
            let stored = try await storeAttachments(attachments, parent: parent, generation: generation, follows: follows, db: db)
            if !stored.isEmpty { properties["_attachments"] = .object(stored) }
        }
        edit.setData(properties)
    }

    /// `COPY /{db}/{doc}` with `Destination: id` (or `id?rev=…` to overwrite that revision): the
    /// source revision's properties and attachments saved as the destination's next revision.
    private func copyDocument(_ call: Call, _ db: ServedDatabase, id: String) async throws -> Response {
        guard let destination = call.request.headers[HTTPField.Name("Destination")!], !destination.isEmpty else {
            throw CouchError.badRequest("Destination header is mandatory for COPY.")
        }
        // A URL would name a document of another database or server (CouchDB refuses it too).
        let lowered = destination.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            throw CouchError.badRequest("Destination URL must be relative.")
        }
        let parts = destination.split(separator: "?", maxSplits: 1)
        guard let target = String(parts[0]).removingPercentEncoding else { throw CouchError.badRequest("Destination is not valid percent-encoded UTF-8") }
        let targetRev = parts.count > 1 ? try Self.queryParameters(String(parts[1]))["rev"] : nil
        if let targetRev, parseRevision(targetRev) == nil { throw CouchError.badRequest("Invalid rev format") }
        let database = db.database
        let source: Document?
        if let rev = try Self.revision(call.query["rev"], ifMatch: call.request.headers[.ifMatch]) {
            source = try await database.document(withID: id, revisionID: rev)
        } else {
            source = try await database.document(withID: id)
        }
        guard let source, !source.isDeleted else { throw CouchError.notFound("missing") }
        if let e = source.bodyError { throw e }
        guard try db.readability(of: id, revision: source.revisionID, for: call.principal) == .readable else {
            throw CouchError.notFound("missing")
        }
        try checkDocumentID(target, in: db)
        let edit: MutableDocument
        if let current = try await database.document(withID: target) {
            guard targetRev == current.revisionID else { throw CouchError.conflict }
            edit = current.toMutable()
        } else {
            edit = MutableDocument(id: target)
        }
        // The attachments' blobs are shared: their entries are copied as they are.
        edit.setData(source.toDictionary())
        guard try await saveEdit(edit, db, as: call.principal), let rev = edit.revisionID else {
            throw CouchError.conflict
        }
        return try jsonResponse(["ok": true, "id": .string(target), "rev": .string(rev)], status: .created,
                                headers: [.eTag: "\"\(rev)\"", .location: location(call, db, target)])
    }

    private func deleteDocument(_ call: Call, _ db: ServedDatabase, id: String) async throws -> Response {
        try checkDocumentID(id, in: db)
        let named = try Self.revision(call.query["rev"], ifMatch: call.request.headers[.ifMatch])
        // As CouchDB: nothing to delete is 404, "missing" or "deleted"; what the user may not read
        // is missing.
        guard try await db.database.revisionTree(withID: id) != nil,
              try Reader(db, call.principal).readability(of: id, revision: nil) == .readable else { throw CouchError.notFound("missing") }
        guard try await db.database.document(withID: id) != nil else { throw CouchError.notFound("deleted") }
        guard let rev = named else { throw CouchError.conflict }
        var incoming = try IncomingDocument([:])
        incoming.id = id
        incoming.rev = rev
        incoming.deleted = true
        let newRev = try await save(incoming, to: db, newEdits: true, as: call.principal)
        return try jsonResponse(["ok": true, "id": .string(id), "rev": .string(newRev)], headers: [.eTag: "\"\(newRev)\""])
    }

    /// A document ID as CouchDB checks it (400 `illegal_docid`): not empty, no leading `_`
    /// but `_design/` (a `_local/` ID names a local document, which has its own endpoints),
    /// at most 1,000 bytes.
    /// In a partitioned database, also `partition:id` (``checkPartitionedID(_:in:)``).
    func checkDocumentID(_ id: String, in db: ServedDatabase? = nil) throws {
        guard !id.isEmpty else { throw CouchError(.badRequest, "illegal_docid", "Document id must not be empty") }
        if id.hasPrefix("_") && !(id.hasPrefix("_design/") && id.count > "_design/".count) {
            throw CouchError(.badRequest, "illegal_docid", "Only reserved document ids may start with underscore.")
        }
        guard id.utf8.count <= 1000 else { throw CouchError(.badRequest, "illegal_docid", "Document id is longer than 1000 bytes") }
        if let db { try Self.checkPartitionedID(id, in: db) }
    }

    /// A document's size and nesting within the limits: a document deeper than
    /// `maxDocumentDepth` (100 levels, the document itself counting as one) is refused, so that
    /// every client reading it back (whose parsers stop at some depth) can.
    func checkSize(_ properties: [String: JSONValue], _ db: ServedDatabase) throws {
        let document = JSONValue.object(properties)
        let depth = document.nestingDepth
        guard depth <= server.configuration.maxDocumentDepth else {
            throw CouchError.badRequest("Document nests \(depth) levels of arrays and objects; the limit is \(server.configuration.maxDocumentDepth)")
        }
        let size = try document.jsonBytes().count
        guard size <= db.config.maxDocumentSize else {
            throw CouchError.tooLarge("Document is \(size) bytes; the limit is \(db.config.maxDocumentSize)")
        }
    }

    /// 304 when `If-None-Match` lists `etag`, strong or weak (`W/"…"`), as CouchDB compares
    /// them; nil otherwise.
    static func notModified(_ call: Call, etag: String) -> Response? {
        guard let header = call.request.headers[.ifNoneMatch] else { return nil }
        let listed = header.split(whereSeparator: { $0 == "," || $0 == " " }).map { $0.hasPrefix("W/") ? $0.dropFirst(2) : $0 }
        guard listed.contains(where: { $0 == etag || $0 == "*" }) else { return nil }
        return Response(status: .notModified, headers: [.eTag: etag, .contentLength: "0"])
    }

    /// A path segment with every byte that is not a path character percent-encoded: letters,
    /// digits and `-._~!$&'()*+,=:@` are kept (Foundation's `urlPathAllowed` without `/`; `;` is
    /// encoded, as it is there), `/` included: byte by byte, and the text
    /// itself when nothing needs encoding (most IDs; it runs for every created document's
    /// `Location`).
    static func percentEncoded(_ id: String) -> String {
        if id.utf8.allSatisfy({ segmentAllowed[Int($0)] }) { return id }
        var out: [UInt8] = []
        out.reserveCapacity(id.utf8.count * 3)
        for b in id.utf8 {
            if segmentAllowed[Int(b)] {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(upperHexDigits[Int(b >> 4)])
                out.append(upperHexDigits[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let segmentAllowed: [Bool] = (0 ... 255).map { b in
        (UInt8(ascii: "a") ... UInt8(ascii: "z")).contains(UInt8(b)) || (UInt8(ascii: "A") ... UInt8(ascii: "Z")).contains(UInt8(b))
            || (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(UInt8(b)) || "-._~!$&'()*+,=:@".utf8.contains(UInt8(b))
    }
    private static let upperHexDigits = Array("0123456789ABCDEF".utf8)
}
