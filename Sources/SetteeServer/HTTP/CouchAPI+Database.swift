import Foundation
import HTTPTypes
import Hummingbird
import SetteeHTTP
@_spi(Replication) @_spi(Server) import Settee

extension CouchAPI {
    // MARK: - /{db}

    func databaseRoot(_ call: inout Call, name: String) async throws -> Response {
        switch call.request.method {
        case .get, .head:
            guard let db = server.database(named: name) else { throw missingDatabase(call) }
            try requireUser(call, db)
            return try databaseInfo(db, reader: try Reader(db, call.principal))
        case .put:
            // A replicator's create_target probe: 412 for a database that exists to one of its
            // users (CouchDB's replicator goes on); on the public port, 403 to anyone else
            // whether it exists or not (Sync Gateway's answer), so that nobody learns names.
            let existing = server.database(named: name)
            if call.principal != .admin, existing.map({ (try? requireUser(call, $0)) == nil }) ?? true {
                throw CouchError.forbidden("Creating a database over the public API is unsupported")
            }
            if existing != nil {
                throw CouchError(.preconditionFailed, "file_exists", "The database could not be created, the file already exists.")
            }
            return try await createDatabase(&call, name: name)
        case .delete:
            // CouchDB's guard against a document deletion missing its ID: never a database deletion.
            if call.query["rev"] != nil {
                throw CouchError.badRequest("You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
            }
            guard call.principal == .admin else { throw CouchError.forbidden("Deleting a database over the public API is unsupported") }
            if name == ReplicatorDocuments.databaseName {
                throw CouchError.forbidden("_replicator is the server's own database (its location is the configuration's `replicator`)")
            }
            if let served = server.database(named: name), !served.owned {
                throw CouchError.forbidden("this database belongs to the app serving it and is not deleted over HTTP")
            }
            guard let db = server.removeDatabase(named: name) else { throw CouchError.notFound("Database does not exist.") }
            try db.close()
            if db.walrusDirectory == nil { try db.database.delete() }
            return try jsonResponse(["ok": true])
        case .post:
            guard let db = server.database(named: name) else { throw missingDatabase(call) }
            try requireUser(call, db)
            return try await postDocument(&call, db)
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,POST,PUT")
        }
    }

    /// A user who reads only some channels gets what Sync Gateway's public port gives: no document
    /// counts and no sizes (they would tell it how much it cannot see; counting what it may read
    /// would cost a read of its channels per request). `update_seq` is the database's, as every
    /// feed's `last_seq` already tells it.
    func databaseInfo(_ db: ServedDatabase, reader: Reader) throws -> Response {
        let stats = try db.database.statistics
        let seq = stats.lastSequence
        var info: [String: JSONValue] = [
            "db_name": .string(db.name),
            "update_seq": .int(Int64(seq)),
            "committed_update_seq": .int(Int64(seq)),
            "instance_start_time": "0",
            "purge_seq": 0,
            "compact_running": .bool(db.compactionsRunning.load(ordering: .sequentiallyConsistent) > 0),
            "disk_format_version": 1,
            "state": "Online",
            // CouchDB 3's members: one node holds one copy in one shard.
            "cluster": ["q": 1, "n": 1, "w": 1, "r": 1],
            "props": db.partitioned ? ["partitioned": true] : .object([:]),
        ]
        if reader.readsAll {
            info["doc_count"] = .int(Int64(stats.documentCount))
            info["doc_del_count"] = .int(Int64(stats.deletedDocumentCount))
            // CouchDB's `file` is the bytes on disk; `active` and `external` are not measured
            // here and are left out rather than guessed.
            info["sizes"] = ["file": .int(Int64(stats.fileSize))]
        }
        return try jsonResponse(.object(info))
    }

    /// `PUT /{db}` on the admin port: a new database; the body, if any, is its configuration (the
    /// keys of `databases.<name>`), `"walrus:"` when it names no `server`.
    private func createDatabase(_ call: inout Call, name: String) async throws -> Response {
        // CouchDB's option, checked first as CouchDB does.
        let partitioned: Bool
        switch call.query["partitioned"] {
        case nil, "false"?: partitioned = false
        case "true"?: partitioned = true
        default: throw CouchError.badRequest("Invalid `partitioned` parameter")
        }
        // The body, if any, is read as a JSON value and then as a configuration (never spliced
        // into configuration text).
        let body = try await jsonValueBody(&call, limit: 1 << 20, empty: .object([:]))
        let dbConfig: ServerConfiguration.DatabaseConfig
        do {
            dbConfig = try ServerConfiguration.database(ConfigReader(body, path: "databases." + name))
        } catch {
            throw CouchError.badRequest("database configuration: \(error)")
        }
        if !dbConfig.isWalrus, !server.isDataDirectory(dbConfig.server) {
            throw CouchError.forbidden("a database made over HTTP is kept in memory (\"walrus:\") or in a directory of the configuration's databases (or under one), with no \"..\"")
        }
        let served = try ServedDatabase.open(name: name, config: dbConfig, engine: server.scripts, partitioned: partitioned)
        guard server.addDatabase(served) else {
            try served.close()
            throw CouchError(.preconditionFailed, "file_exists", "The database could not be created, the file already exists.")
        }
        return try jsonResponse(["ok": true], status: .created, headers: [.location: absoluteURL(call, [name])])
    }

    // MARK: - _all_docs

    /// An `_all_docs` request's options (for a `POST`, the body's too: a query parameter wins,
    /// CouchDB's order) and its `keys`, from the query or the body, with CouchDB's words when
    /// they are not an array.
    func allDocsRequest(_ call: inout Call, limit: Int) async throws -> (query: Call, keys: [JSONValue]?) {
        var keys: [JSONValue]?
        var params = call.query
        if call.request.method == .post {
            let body = try await jsonBody(&call, limit: limit)
            var fromBody: [String: String] = [:]
            try Self.bodyOptions(body, into: &fromBody, except: ["keys"],
                                 jsonValued: { $0.hasSuffix("key") || $0 == "startkey_docid" || $0 == "endkey_docid" })
            params = fromBody.merging(params) { _, query in query }
            if call.query["keys"] == nil, let v = body["keys"] {
                guard case .array(let a) = v else { throw CouchError.badRequest("`keys` body member must be an array.") }
                keys = a
            }
        }
        let query = Call(request: call.request, path: call.path, query: params, principal: call.principal, started: call.started)
        if keys == nil, let k = try jsonParameter(query, "keys", allDocs: true) {
            guard case .array(let a) = k else { throw CouchError.badRequest("`keys` parameter must be an array.") }
            keys = a
        }
        return (query, keys)
    }

    /// `_all_docs`, or with `prefix` `_design_docs` (the design documents, with the same options).
    func allDocs(_ call: inout Call, _ db: ServedDatabase, prefix given: String? = nil) async throws -> Response {
        try allow(call.request.method, [.get, .head, .post])
        let (query, keys) = try await allDocsRequest(&call, limit: bodyLimit(db))
        // A partition's documents are the IDs `p:…`: its range alone is read.
        let partition = try requestedPartition(query.query, db)
        let prefix = partition.map { $0 + ":" } ?? given
        let includeDocs = try flag(query, "include_docs")
        let conflicts = try flag(query, "conflicts")
        let descending = try flag(query, "descending")
        let limit = try integer(query, "limit")
        let skip = try integer(query, "skip") ?? 0
        let database = db.database
        var rows: [JSONValue] = []
        // How many rows of the index come before the range's start.
        var startOffset: Int64 = 0
        // A user sees only the documents it may read (design documents included).
        let reader = try Reader(db, call.principal)
        func readable(_ id: String) throws -> Bool { try reader.readability(of: id, revision: nil) == .readable }
        func docJSON(_ doc: Document) throws -> JSONValue { try documentJSON(doc, db, reader: reader, conflicts: conflicts) }
        if let keys {
            // As CouchDB: the keys in the order asked (reversed when descending), then skip and
            // limit. A key that is not a document ID (not a string, or not valid) is a row that
            // was not found, as one of a document that does not exist.
            for value in (descending ? keys.reversed() : keys).dropFirst(skip).prefix(limit ?? .max) {
                guard case .string(let key) = value, (try? checkDocumentID(key)) != nil,
                      let tree = try await database.revisionTree(withID: key), try readable(key) else {
                    rows.append(["key": value, "error": "not_found"])
                    continue
                }
                let deleted = tree.revisions.first { $0.revisionID == tree.currentRevisionID }?.isDeleted ?? false
                var value: [String: JSONValue] = ["rev": .string(tree.currentRevisionID)]
                if deleted { value["deleted"] = true }
                var row: [String: JSONValue] = ["id": .string(key), "key": .string(key), "value": .object(value)]
                if includeDocs {
                    db.counters.read()
                    let doc = deleted ? nil : try await database.document(withID: key)
                    Self.include(into: &row) { try doc.map(docJSON) ?? .null }
                }
                rows.append(.object(row))
            }
        } else {
            var options = AllDocumentsOptions()
            options.descending = descending
            // A reader of some channels is paged over the rows it may read (here): a page cut or
            // skipped by the library would count rows it may not, and tell where they are.
            options.skip = reader.readsAll ? skip : 0
            options.limit = reader.readsAll ? limit : nil
            options.prefix = prefix
            func key(_ names: [String]) throws -> String? {
                for n in names {
                    if let v = try jsonParameter(query, n, allDocs: true) {
                        guard case .string(let s) = v else { throw CouchError(.badRequest, "query_parse_error", "\(n) must be a JSON string") }
                        return s
                    }
                }
                return nil
            }
            // `key` is the range of that one ID.
            let only = try key(["key"])
            options.startKey = try only ?? key(["startkey", "start_key"])
            let end = try only ?? key(["endkey", "end_key"])
            options.endKey = end
            let inclusiveEnd = try only != nil || flag(query, "inclusive_end", default: true)
            // An excluded end row is dropped here, so the cursor reads one row more.
            if !inclusiveEnd, end != nil, let limit = options.limit { options.limit = oneMore(limit) }
            if let start = options.startKey, reader.readsAll {
                // The rows before the range's start, counted as CouchDB's offset counts them: a
                // walk of the IDs there, no more than a listing of them would cost. (A reader of
                // some channels has no such position: its total is the rows it gets.)
                var before = AllDocumentsOptions()
                before.descending = descending
                before.endKey = start
                before.prefix = prefix
                let walk = try database.allDocuments(before)
                while let doc = try walk.next(), doc.id != start {
                    if doc.revisionID != nil { startOffset += 1 }
                }
            }
            let cursor = try database.allDocuments(options)
            var skipped = 0
            while rows.count < limit ?? .max, let doc = try cursor.next() {
                if !inclusiveEnd, let end, doc.id == end { continue }
                guard let rev = doc.revisionID, try readable(doc.id) else { continue }
                if !reader.readsAll, skipped < skip {
                    skipped += 1
                    continue
                }
                var row: [String: JSONValue] = ["id": .string(doc.id), "key": .string(doc.id), "value": ["rev": .string(rev)]]
                if includeDocs {
                    db.counters.read()
                    Self.include(into: &row) { try docJSON(doc) }
                }
                rows.append(.object(row))
            }
        }
        // A user who reads only some channels gets the rows it may read as its total, as Sync
        // Gateway does: the database's count would tell it how much it cannot see.
        var total = reader.readsAll ? Int64(try database.count) : Int64(rows.count)
        if let prefix, partition == nil || reader.readsAll {
            // Design documents are few: counted, for every reader (they are in no channel); a
            // partition's documents for a reader of every document.
            var options = AllDocumentsOptions()
            options.prefix = prefix
            let cursor = try database.allDocuments(options)
            total = 0
            while try cursor.next() != nil { total += 1 }
        }
        var result: [String: JSONValue] = [
            "total_rows": .int(total),
            // Keys have no position in the index (CouchDB answers null); a range is counted from
            // its start (the skip, past the end no further than the rows there are).
            "offset": keys == nil ? .int(min(startOffset + min(Int64(clamping: skip), total), total)) : .null,
            "rows": .array(rows),
        ]
        if try flag(query, "update_seq") { result["update_seq"] = .int(Int64(try database.lastSequence)) }
        return try jsonResponse(.object(result))
    }

    // MARK: - _local_docs

    /// `_local_docs` (GET and POST, `_all_docs`' options): the local documents of whoever asks
    /// (on the public port a user's own; the server's records never), with `total_rows` and
    /// `offset` null, as CouchDB 3 answers.
    func localDocs(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        try allow(call.request.method, [.get, .head, .post])
        var params = call.query
        var keys: [String]?
        if call.request.method == .post {
            let body = try await jsonBody(&call, limit: bodyLimit(db))
            var fromBody: [String: String] = [:]
            try Self.bodyOptions(body, into: &fromBody, except: ["keys"], jsonValued: { $0.hasSuffix("key") })
            params = fromBody.merging(params) { _, query in query }
            if let v = body["keys"] { keys = try Self.strings(v, "keys") }
        }
        let query = Call(request: call.request, path: call.path, query: params, principal: call.principal, started: call.started)
        if keys == nil, let k = try jsonParameter(query, "keys") { keys = try Self.strings(k, "keys") }
        func key(_ names: String...) throws -> String? {
            for n in names {
                if let v = try jsonParameter(query, n) {
                    guard case .string(let s) = v else { throw CouchError(.badRequest, "query_parse_error", "\(n) must be a JSON string") }
                    return s.hasPrefix("_local/") ? String(s.dropFirst(7)) : s
                }
            }
            return nil
        }
        let includeDocs = try flag(query, "include_docs")
        let descending = try flag(query, "descending")
        let limit = try integer(query, "limit") ?? .max
        let skip = try integer(query, "skip") ?? 0
        let only = try key("key")
        let start = try only ?? key("startkey", "start_key")
        let end = try only ?? key("endkey", "end_key")
        let inclusiveEnd = try only != nil || flag(query, "inclusive_end", default: true)
        // Stored IDs: the admin port's as named, a user's under its own prefix.
        let ownPrefix = PrincipalRecords.localID("", of: call.principal)
        func stored(_ id: String) -> String { PrincipalRecords.localID(id, of: call.principal) }
        func shown(_ storedID: String) -> String? {
            guard storedID.hasPrefix(ownPrefix) else { return nil }
            let id = String(storedID.dropFirst(ownPrefix.count))
            if ownPrefix.isEmpty && (id.hasPrefix(PrincipalRecords.prefix) || id.hasPrefix(PrincipalRecords.userLocalPrefix)) { return nil }
            return id
        }
        func row(_ id: String, _ rev: String, _ properties: [String: JSONValue]?) -> JSONValue {
            var o: [String: JSONValue] = ["id": .string("_local/" + id), "key": .string("_local/" + id), "value": ["rev": .string(rev)]]
            if var p = properties {
                p["_id"] = .string("_local/" + id)
                p["_rev"] = .string(rev)
                o["doc"] = .object(p)
            }
            return .object(o)
        }
        var rows: [JSONValue] = []
        let database = db.database
        if let keys {
            for k in keys.dropFirst(skip).prefix(limit) {
                let id = k.hasPrefix("_local/") ? String(k.dropFirst(7)) : k
                guard shown(stored(id)) != nil, let (properties, rev) = try database.localDocumentWithRevision(withID: stored(id)) else {
                    rows.append(["key": .string(k), "error": "not_found"])
                    continue
                }
                rows.append(row(id, rev, includeDocs ? properties : nil))
            }
        } else if limit > 0 {
            var skipped = 0
            // Without a start, a user's listing starts at its own prefix (descending: just past it).
            let from: String? = start.map(stored) ?? (ownPrefix.isEmpty ? nil : (descending ? ownPrefix + "\u{10FFFF}" : ownPrefix))
            try database.forEachLocalDocument(from: from, descending: descending, includeProperties: includeDocs) { full, rev, properties in
                let storedID = String(full.dropFirst(7))
                guard storedID.hasPrefix(ownPrefix) else { return false }
                guard let id = shown(storedID) else { return true }
                if let end {
                    let past = descending ? id.utf8.lexicographicallyPrecedes(end.utf8) : end.utf8.lexicographicallyPrecedes(id.utf8)
                    if past || (!inclusiveEnd && id == end) { return false }
                }
                if skipped < skip {
                    skipped += 1
                    return true
                }
                rows.append(row(id, rev, properties))
                return rows.count < limit
            }
        }
        return try jsonResponse(["total_rows": nil, "offset": nil, "rows": .array(rows)])
    }

    // MARK: - _bulk_docs

    func bulkDocs(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let body = try await jsonBody(&call, limit: bodyLimit(db))
        guard let docsMember = body["docs"] else { throw CouchError.badRequest("POST body must include `docs` parameter.") }
        guard case .array(let list) = docsMember else { throw CouchError.badRequest("`docs` parameter must be an array.") }
        var newEdits = true
        if let v = body["new_edits"] {
            guard case .bool(let b) = v else { throw CouchError.badRequest("`new_edits` parameter must be a boolean.") }
            newEdits = b
        }
        // Every document is checked before anything is written: a malformed one rejects the
        // request (as CouchDB's does). A local document is its own row's error: its ID is a
        // valid one, only not for this endpoint.
        var docs: [IncomingDocument] = []
        // Where each of `docs` answers among the request's documents, and the local ones' rows.
        var positions: [Int] = []
        var localRows: [Int: JSONValue] = [:]
        for (position, item) in list.enumerated() {
            guard case .object(let o) = item else { throw CouchError.badRequest("Document must be a JSON object") }
            var d = try IncomingDocument(o)
            if d.id == nil {
                guard newEdits else { throw CouchError.badRequest("new_edits=false needs _id on every document") }
                d.id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            }
            guard let id = d.id else { continue }
            if id.hasPrefix("_local/") {
                localRows[position] = ["id": .string(id), "error": "illegal_docid",
                                       "reason": "Local documents are written one by one, with PUT /{db}/_local/{id}"]
                continue
            }
            try checkDocumentID(id, in: db)
            try checkSize(d.properties, db)
            if !newEdits {
                guard let rev = d.rev else { throw CouchError.badRequest("new_edits=false needs _rev on every document") }
                _ = try d.history(of: rev)
            } else if let rev = d.rev, parseRevision(rev) == nil {
                throw CouchError.badRequest("Invalid rev format")
            }
            docs.append(d)
            positions.append(position)
        }
        if newEdits, body["all_or_nothing"] == true {
            // CouchDB 3 has no atomic batches: it refuses them with 417, each document's row
            // saying so, and writes nothing.
            var rows = [JSONValue](repeating: .null, count: list.count)
            for (position, row) in localRows { rows[position] = row }
            for (d, position) in zip(docs, positions) {
                var row: [String: JSONValue] = ["id": .string(d.id ?? ""), "error": "not_implemented",
                                                "reason": "all_or_nothing is not supported"]
                if let rev = d.rev { row["rev"] = .string(rev) }
                rows[position] = .object(row)
            }
            return try jsonResponse(.array(rows.filter { $0 != .null }), status: .expectationFailed)
        }
        if !newEdits {
            var revisions: [ReplicatedRevision] = []
            for d in docs { revisions.append(try await replicatedRevision(d, db: db)) }
            // Revisions stored (or already there) answer nothing, as in CouchDB; a refused one
            // answers with its error.
            let outcomes = try await insert(revisions, db, as: call.principal)
            var refused: [JSONValue] = localRows.sorted { $0.key < $1.key }.map(\.value)
            for (revision, outcome) in zip(revisions, outcomes) {
                guard case .rejected(let e) = outcome else { continue }
                let c = CouchError(e)
                refused.append(["id": .string(revision.documentID), "rev": .string(revision.revisionID),
                                "error": .string(c.error), "reason": .string(c.reason)])
            }
            return try jsonResponse(.array(refused), status: .created)
        }
        // Each document's next revision is prepared (a conflict answers that document alone),
        // then all are saved in one commit; should a validation refuse one, they are saved one
        // by one so that the refusal is that document's alone.
        var results = [JSONValue](repeating: .null, count: docs.count)
        var edits: [(Int, MutableDocument)] = []
        let reader = try Reader(db, call.principal)
        func failure(_ id: String, _ error: any Error) -> JSONValue? {
            let c: CouchError
            if let e = error as? CouchError { c = e } else if let e = error as? SetteeError { c = CouchError(e) } else { return nil }
            // A design document whose functions do not compile is its own row's error, as in
            // CouchDB; any other 400 is the request's.
            guard [.conflict, .forbidden, .unauthorized, .preconditionFailed].contains(c.status)
                    || ["compilation_error", "invalid_design_doc"].contains(c.error) else { return nil }
            return ["id": .string(id), "error": .string(c.error), "reason": .string(c.reason)]
        }
        for (i, d) in docs.enumerated() {
            let id = d.id ?? ""
            do {
                let edit = try await prepareEdit(d, reader: reader)
                // A design document from the public port is that document's refusal alone.
                try checkDesignWrite(id, properties: edit.toDictionary(), db, call.principal)
                edits.append((i, edit))
            } catch {
                guard let f = failure(id, error) else { throw error }
                results[i] = f
            }
        }
        var outcomes: [Bool]
        do {
            outcomes = try await saveEdits(edits.map(\.1), db, as: call.principal)
        } catch let e as SetteeError where e.code == .forbidden || e.code == .unauthorized {
            outcomes = []
            for (i, edit) in edits {
                do {
                    outcomes.append(try await saveEdit(edit, db, as: call.principal))
                } catch {
                    guard let f = failure(edit.id, error) else { throw error }
                    results[i] = f
                    outcomes.append(true)   // answered above
                }
            }
        }
        for ((i, edit), saved) in zip(edits, outcomes) where results[i] == .null {
            if saved, let rev = edit.revisionID {
                results[i] = ["ok": true, "id": .string(edit.id), "rev": .string(rev)]
            } else {
                results[i] = ["id": .string(edit.id), "error": "conflict", "reason": "Document update conflict."]
            }
        }
        // The rows in the request's order, the local documents' among them.
        var answer = [JSONValue](repeating: .null, count: list.count)
        for (position, row) in localRows { answer[position] = row }
        for (i, row) in results.enumerated() { answer[positions[i]] = row }
        return try jsonResponse(.array(answer.filter { $0 != .null }), status: .created)
    }

    // MARK: - _bulk_get

    func bulkGet(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let body = try await jsonBody(&call, limit: bodyLimit(db))
        guard case .array(let list)? = body["docs"] else { throw CouchError.badRequest("Missing JSON list of 'docs'.") }
        let revs = try flag(call, "revs") || body["revs"] == true
        let latest = try flag(call, "latest") || body["latest"] == true
        let allAttachments = try flag(call, "attachments") || body["attachments"] == true
        let database = db.database
        let reader = try Reader(db, call.principal)
        // Per item: its ID (null when it has none) and its answers, in request order.
        var results: [(id: JSONValue, answers: [RevisionAnswer])] = []
        for item in list {
            guard case .object(let o) = item, case .string(let id)? = o["id"] else {
                results.append((.null, [.error(["id": .null, "rev": .null, "error": "bad_request", "reason": "missing id"])]))
                continue
            }
            func failure(_ rev: String?, _ error: String, _ reason: String) -> (JSONValue, [RevisionAnswer]) {
                (.string(id), [.error(["id": .string(id), "rev": rev.map(JSONValue.string) ?? .null, "error": .string(error), "reason": .string(reason)])])
            }
            var rev: String?
            if let r = o["rev"] {
                guard case .string(let s) = r else {
                    results.append(failure(nil, "bad_request", "rev must be a string"))
                    continue
                }
                rev = s
            }
            do {
                var found: [ReplicatedRevision] = []
                var target = rev
                if target == nil { target = try await database.revisionTree(withID: id)?.currentRevisionID }
                if let target {
                    found = try revisions(of: id, rev: target, latest: latest, in: database)
                }
                guard !found.isEmpty else {
                    results.append(failure(rev, "not_found", "missing"))
                    continue
                }
                // With attachments: all inline, or those newer than the revisions the client has.
                var inline: UInt64? = allAttachments ? 0 : nil
                if allAttachments, case .array(let since)? = o["atts_since"] {
                    inline = since.compactMap { $0.stringValue.flatMap(parseRevision)?.0 }.max() ?? 0
                }
                // What the user may not read is answered as a revision that does not exist.
                let answers = try found.compactMap { try RevisionAnswer.gate($0, reader, after: inline) }
                guard !answers.isEmpty else {
                    results.append(failure(rev, "not_found", "missing"))
                    continue
                }
                results.append((.string(id), answers))
            } catch let e as SetteeError where e.code == .invalidParameter {
                results.append(failure(rev, "bad_request", e.message))
            }
        }
        // CouchDB's rule for `_bulk_get`: multipart only for a client that does not take JSON
        // (so `*/*` gets JSON, where `open_revs` answers it with multipart). The answer is
        // `multipart/mixed`, so a client taking only `multipart/related` gets JSON.
        let headers = call.request.headers
        if !Self.accepts(headers, "application/json") && Self.accepts(headers, "multipart/mixed") {
            db.counters.read(results.reduce(0) { $0 + $1.answers.count })
            return try multipartMixed(results.flatMap(\.answers), revs: revs, reader: reader)
        }
        db.counters.read(results.reduce(0) { $0 + $1.answers.count })
        return try jsonResponse(["results": .array(results.map { id, answers in
            ["id": id, "docs": .array(answers.map { answer in
                switch answer {
                case .error(let e): return ["error": e]
                case .removed(let id, let rev): return ["ok": RevisionAnswer.removedJSON(id, rev)]
                case .revision(let r, let after):
                    switch answerJSON(r, revs: revs, reader: reader, inlineAfter: after) {
                    case .success(let json): return ["ok": .object(json)]
                    case .failure(let e): return ["error": e.json]
                    }
                }
            })]
        })])
    }

    // MARK: - _revs_diff, _missing_revs

    func revsDiff(_ call: inout Call, _ db: ServedDatabase, missingRevs: Bool) async throws -> Response {
        let body = try await jsonBody(&call, limit: bodyLimit(db))
        var request: [String: [String]] = [:]
        for (id, v) in body { request[id] = try Self.strings(v, "revisions of \(id)") }
        // A user learns of no revision it may not read: those are missing, as if never stored.
        let reader = try Reader(db, call.principal)
        var visible: [String: (String) -> Bool] = [:]
        if !reader.readsAll {
            for id in request.keys { visible[id] = try reader.revisionFilter(of: id) }
        }
        let filters = visible
        let diff = try db.database.revsDiff(request, visible: reader.readsAll ? nil : { id, rev in filters[id]?(rev) ?? false })
        if missingRevs {
            return try jsonResponse(["missing_revs": .object(diff.mapValues { .array($0.missing.map(JSONValue.string)) })])
        }
        return try jsonResponse(.object(diff.mapValues { r in
            var o: [String: JSONValue] = ["missing": .array(r.missing.map(JSONValue.string))]
            if !r.possibleAncestors.isEmpty { o["possible_ancestors"] = .array(r.possibleAncestors.map(JSONValue.string)) }
            return .object(o)
        }))
    }

    // MARK: - _purge (admin port)

    /// `{"id": ["rev", …]}`: Settee purges whole documents, so every leaf of a document must be
    /// listed (CouchDB can purge single branches; a request for that is refused, 400). Every
    /// document is checked first, then all are purged in one commit.
    func purge(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let body = try await jsonBody(&call, limit: bodyLimit(db))
        var requests: [(String, [String])] = []
        for (id, v) in body.sorted(by: { $0.key < $1.key }) {
            requests.append((id, Array(try Self.stringSet(v, "revisions of \(id)"))))
        }
        let database = db.database
        var purged: [String: JSONValue] = [:]
        var doomed: [(id: String, leaves: Set<String>)] = []
        for (id, revs) in requests {
            guard let tree = try await database.revisionTree(withID: id) else {
                purged[id] = []
                continue
            }
            let known = revs.filter { r in tree.revisions.contains { $0.revisionID == r } }
            guard Set(tree.leafRevisionIDs).isSubset(of: Set(revs)) else {
                throw CouchError.badRequest("purging some branches of \(id) but not all is not supported: list every leaf to purge the document")
            }
            doomed.append((id, Set(tree.leafRevisionIDs)))
            purged[id] = .array(known.sorted().map(JSONValue.string))
        }
        let checked = doomed
        try await database.inBatch { db in
            for (id, leaves) in checked {
                // A document changed since it was checked would lose a revision nobody listed.
                guard let tree = try db.revisionTree(withID: id), Set(tree.leafRevisionIDs) == leaves else { throw CouchError.conflict }
                try db.purgeDocument(withID: id)
            }
        }
        return try jsonResponse(["purge_seq": .null, "purged": .object(purged)], status: .created)
    }

    // MARK: - _local

    func localDocument(_ call: inout Call, _ db: ServedDatabase, id clientID: String) async throws -> Response {
        let database = db.database
        let fullID = "_local/" + clientID
        // The server's own records (users, sessions) are not the clients'.
        if clientID.hasPrefix(PrincipalRecords.prefix) { throw CouchError.forbidden("reserved local document ID") }
        // On the public port each user has local documents of its own (replication checkpoints):
        // no user reads, overwrites or deletes another's.
        let id = PrincipalRecords.localID(clientID, of: call.principal)
        switch call.request.method {
        case .get, .head:
            guard let (properties, rev) = try database.localDocumentWithRevision(withID: id) else {
                throw CouchError.notFound("missing")
            }
            var o = properties
            o["_id"] = .string(fullID)
            o["_rev"] = .string(rev)
            return try jsonResponse(.object(o))
        case .put:
            var body = try await jsonBody(&call, limit: bodyLimit(db))
            let rev = body.removeValue(forKey: "_rev")
            body.removeValue(forKey: "_id")
            // CouchDB's replicator sends `_revisions` with a checkpoint it updates; a local
            // document has no history, so CouchDB ignores it, and so does this.
            body.removeValue(forKey: "_revisions")
            let current = try database.localDocumentWithRevision(withID: id)?.revisionID
            let given: String? = switch rev {
            case .string(let s)?: s
            case nil, .null?: call.query["rev"]
            default: throw CouchError.badRequest("Invalid rev format")
            }
            if let current, given != current { throw CouchError.conflict }
            if current == nil, let given, given != "0-0" { throw CouchError.conflict }
            for key in body.keys where key.hasPrefix("_") {
                throw CouchError(.badRequest, "doc_validation", "Bad special document member: \(key)")
            }
            let newRev = try await database.saveLocalDocument(body, withID: id)
            return try jsonResponse(["ok": true, "id": .string(fullID), "rev": .string(newRev)], status: .created)
        case .delete:
            guard let current = try database.localDocumentWithRevision(withID: id)?.revisionID else { throw CouchError.notFound("missing") }
            guard let given = call.query["rev"], given == current else { throw CouchError.conflict }
            try await database.deleteLocalDocument(withID: id)
            return try jsonResponse(["ok": true, "id": .string(fullID), "rev": "0-0"])
        default:
            throw CouchError.methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }
}
