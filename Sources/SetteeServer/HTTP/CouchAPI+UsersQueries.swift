import Foundation
import HTTPTypes
import Hummingbird
@_spi(Replication) @_spi(Server) import Settee

/// `/_users` as a database on the admin port, over the same user records as its documents:
/// `_all_docs` (with its options and `keys`), `_find` and `_explain` (Mango over the user
/// documents, the index chosen by CouchDB's rules), `_index` (Mango index definitions, kept in
/// the server's own database) and `_bulk_docs` (each document written as a `PUT` would).
///
/// The users are records of the served databases, not documents of one database: a query
/// reads every user (the work of a scan of `_users`, whatever the index), and an index
/// changes which queries are allowed (a sort needs one, as in CouchDB) and what `_explain`
/// says, not what is read.
extension CouchAPI {
    /// Where `_users`' Mango indexes are kept: a local document of the server's own database
    /// (`/_replicator`'s), so they last as long as the server's other records.
    static let usersIndexesID = "settee.server/users-mango-indexes"

    /// `_users`' Mango index definitions.
    func usersIndexes() throws -> [MangoIndex] {
        guard let own = server.database(named: ReplicatorDocuments.databaseName),
              case .array(let list)? = try own.database.localDocument(withID: Self.usersIndexesID)?["indexes"] else { return [] }
        return list.compactMap { v -> MangoIndex? in
            guard case .string(let ddoc)? = v["ddoc"], case .string(let name)? = v["name"],
                  let fields = try? MangoIndex.definedFields(v["fields"]) else { return nil }
            var partial: JSONValue?
            if case .object(let o)? = v["partial"], !o.isEmpty { partial = .object(o) }
            return MangoIndex(ddoc: ddoc, name: name, fields: fields, partial: partial)
        }
    }

    private func saveUsersIndexes(_ list: [MangoIndex]) async throws {
        guard let own = server.database(named: ReplicatorDocuments.databaseName) else {
            throw CouchError(.internalServerError, "internal_error", "the server's own database is not open")
        }
        let items: [JSONValue] = list.map { m in
            var item: [String: JSONValue] = ["ddoc": .string(m.ddoc), "name": .string(m.name),
                                             "fields": .array(m.fields.map { .object([$0.field: .string($0.descending ? "desc" : "asc")]) })]
            if let partial = m.partial { item["partial"] = partial }
            return .object(item)
        }
        _ = try await own.database.saveLocalDocument(["indexes": .array(items)], withID: Self.usersIndexesID)
    }

    /// Every user's document as an administrator sees it, in ID order.
    private func userDocuments() throws -> [(id: String, doc: [String: JSONValue])] {
        try server.userNames().compactMap { name in
            guard let records = try server.userRecords(name) else { return nil }
            let id = UsersDatabase.prefix + name
            guard case .object(let doc) = records.document(id: id) else { return nil }
            return (id, doc)
        }
    }

    /// What `_users` serves under itself besides user documents; nil for a user document.
    func usersEndpoint(_ call: inout Call, _ first: String, rest: [String]) async throws -> Response? {
        let method = call.request.method
        switch first {
        case "_all_docs":
            try requireAdmin(call)
            try allow(method, [.get, .head, .post])
            return try await usersAllDocs(&call)
        case "_find", "_explain":
            try requireAdmin(call)
            try allow(method, [.post])
            let r = try FindRequest(try await jsonBody(&call, limit: 1 << 20, lastKeyWins: true))
            if r.partition != nil { throw CouchError.badRequest("partition specified on non-partitioned db") }
            return first == "_find" ? try usersFind(r) : try usersExplain(r)
        case "_index":
            try requireAdmin(call)
            return try await usersIndex(&call, rest: rest)
        case "_bulk_docs":
            try requireAdmin(call)
            try allow(method, [.post])
            return try await usersBulkDocs(&call)
        default:
            return nil
        }
    }

    // MARK: - _all_docs

    private func usersAllDocs(_ call: inout Call) async throws -> Response {
        let (query, keys) = try await allDocsRequest(&call, limit: 1 << 20)
        let includeDocs = try flag(query, "include_docs")
        let descending = try flag(query, "descending")
        let limit = try integer(query, "limit") ?? .max
        let skip = try integer(query, "skip") ?? 0
        func bound(_ names: String...) throws -> String? {
            for n in names {
                if let v = try jsonParameter(query, n, allDocs: true) {
                    guard case .string(let s) = v else { throw CouchError(.badRequest, "query_parse_error", "\(n) must be a JSON string") }
                    return s
                }
            }
            return nil
        }
        let start = try bound("startkey", "start_key", "key"), end = try bound("endkey", "end_key", "key")
        let inclusiveEnd = try flag(query, "inclusive_end", default: true)
        let all = try userDocuments()
        func row(_ id: String, _ doc: [String: JSONValue]) -> JSONValue {
            var r: [String: JSONValue] = ["id": .string(id), "key": .string(id), "value": ["rev": doc["_rev"] ?? .null]]
            if includeDocs { r["doc"] = .object(doc) }
            return .object(r)
        }
        var rows: [JSONValue] = []
        if let keys {
            let byID = Dictionary(all.map { ($0.id, $0.doc) }, uniquingKeysWith: { a, _ in a })
            for key in (descending ? keys.reversed() : keys).dropFirst(skip).prefix(limit) {
                if case .string(let id) = key, let doc = byID[id] { rows.append(row(id, doc)) } else { rows.append(["key": key, "error": "not_found"]) }
            }
        } else {
            // IDs compare by their bytes, as `_all_docs` orders them.
            let ordered = descending ? all.reversed() : all
            let inRange = ordered.filter { item in
                let afterStart = start.map { descending ? item.id.utf8.lexicographicallyPrecedes($0.utf8) || item.id == $0
                                                        : !item.id.utf8.lexicographicallyPrecedes($0.utf8) } ?? true
                let beforeEnd = end.map { e in
                    if item.id == e { return inclusiveEnd }
                    return descending ? !item.id.utf8.lexicographicallyPrecedes(e.utf8) : item.id.utf8.lexicographicallyPrecedes(e.utf8)
                } ?? true
                return afterStart && beforeEnd
            }
            rows = inRange.dropFirst(skip).prefix(limit).map { row($0.id, $0.doc) }
        }
        return try jsonResponse(["total_rows": .int(Int64(all.count)), "offset": keys == nil ? .int(Int64(min(skip, all.count))) : .null,
                                 "rows": .array(rows)])
    }

    // MARK: - _find and _explain

    /// The user documents a request matches, in the order of the index CouchDB's rules choose.
    private func usersMatches(_ r: FindRequest, choice: MangoIndexChoice) throws -> (matches: [(id: String, doc: [String: JSONValue])], read: Int) {
        let all = try userDocuments()
        // The selector is compiled by the library, as any `_find`'s; with no database served
        // there are no users either.
        guard let compiler = server.userDatabases.first?.database, !all.isEmpty else { return ([], 0) }
        var selectors = [r.selector]
        if let partial = choice.index?.partial {
            try Self.mango { () throws(SetteeError) in selectors.append(try MangoQuery.Selector(partial)) }
        }
        let test: Query
        do {
            test = try compiler.createQuery(mango: MangoQuery(selector: .all(selectors)))
        } catch let e as SetteeError {
            return try Self.mango { () throws(SetteeError) -> ([(id: String, doc: [String: JSONValue])], Int) in throw e }
        }
        var matches: [(id: String, doc: [String: JSONValue])] = []
        for item in all {
            var properties = item.doc
            let rev = properties.removeValue(forKey: "_rev")?.stringValue ?? ""
            properties["_id"] = nil
            if try test.matches(id: item.id, revisionID: rev, properties: properties) { matches.append(item) }
        }
        let descending = r.sort.first?.descending ?? false
        if let index = choice.index {
            // An index holds the documents that have each of its fields, in its fields' order.
            let paths = index.fields.map { MangoIndex.names(of: $0.field) }
            func value(_ doc: [String: JSONValue], _ names: [String]) -> JSONValue? {
                var current: JSONValue? = .object(doc)
                for n in names { current = current?.objectValue?[n] }
                return current
            }
            let keyed = matches.compactMap { m -> (key: [JSONValue], item: (id: String, doc: [String: JSONValue]))? in
                var key: [JSONValue] = []
                for p in paths {
                    guard let v = value(m.doc, p) else { return nil }
                    key.append(v)
                }
                return (key + [.string(m.id)], m)
            }
            var failure: (any Error)?
            let sorted = keyed.sorted { a, b in
                do {
                    let order = try JSONValue.collationOrder(.array(a.key), .array(b.key))
                    return descending ? order == .orderedDescending : order == .orderedAscending
                } catch {
                    failure = error
                    return false
                }
            }
            if let failure { throw failure }
            matches = sorted.map(\.item)
        } else if descending {
            matches.reverse()
        }
        return (matches, all.count)
    }

    private func usersFind(_ r: FindRequest) throws -> Response {
        let started = ContinuousClock.now
        if r.matchesNothing {
            return try jsonResponse(["docs": [], "bookmark": .string(r.bookmarkText ?? "nil")])
        }
        let choice = try MangoIndexChoice(selector: r.selectorJSON, sort: r.sort.map(\.field), fields: r.fields, indexes: try usersIndexes(),
                                          useIndex: r.useIndex, allowFallback: r.allowFallback)
        let (matches, read) = try usersMatches(r, choice: choice)
        let page = matches.dropFirst(min(r.offset, matches.count)).prefix(r.limit)
        var body = Array(#"{"docs":["#.utf8)
        for (i, m) in page.enumerated() {
            if i > 0 { body.append(UInt8(ascii: ",")) }
            let json: JSONValue = r.fields.map { Self.project(.object(m.doc), $0) } ?? .object(m.doc)
            body.append(contentsOf: try json.responseBytes())
        }
        var out: [String: JSONValue] = ["bookmark": .string(page.isEmpty ? r.bookmarkText ?? "nil" : Self.bookmark(offset: r.offset + page.count))]
        if let warning = Self.warning(r, read: choice.index, documentsExamined: read, returned: page.count) { out["warning"] = .string(warning) }
        if r.executionStats {
            let elapsed = ContinuousClock.now - started
            let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds / 1_000_000_000_000) / 1000
            out["execution_stats"] = ["total_keys_examined": .int(Int64(read)), "total_docs_examined": .int(Int64(read)),
                                      "total_quorum_docs_examined": 0, "results_returned": .int(Int64(page.count)),
                                      "execution_time_ms": .double(ms)]
        }
        body.append(contentsOf: Array("],".utf8))
        body.append(contentsOf: try JSONValue.object(out).responseBytes().dropFirst())
        body.append(0x0A)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    private func usersExplain(_ r: FindRequest) throws -> Response {
        let choice = try MangoIndexChoice(selector: r.selectorJSON, sort: r.sort.map(\.field), fields: r.fields, indexes: try usersIndexes(),
                                          useIndex: r.useIndex, allowFallback: r.allowFallback)
        let order = choice.index.map { "in the order of index \($0.ddoc)/\($0.name)" } ?? "in ID order"
        let plan = "SCAN ALL USERS (the served databases' user records as documents)\n  FILTER the selector\n  ORDER \(order)"
        return try jsonResponse(Self.explanation(dbName: UsersDatabase.name, r, choice: choice, plan: plan))
    }

    // MARK: - _index

    private func usersIndex(_ call: inout Call, rest: [String]) async throws -> Response {
        let method = call.request.method
        var parts = Array(rest.dropFirst())
        if !parts.isEmpty {
            if parts.first == "_design", parts.count == 4 { parts = ["_design/" + parts[1]] + parts.dropFirst(2) }
            guard parts.count == 3 else { throw CouchError.notFound() }
            try allow(method, [.delete])
            guard parts[1] == "json" else { throw CouchError.notFound() }
            let ddoc = Self.designID(parts[0])
            var list = try usersIndexes()
            guard let at = list.firstIndex(where: { $0.ddoc == ddoc && $0.name == parts[2] }) else { throw CouchError.notFound() }
            list.remove(at: at)
            try await saveUsersIndexes(list)
            return try jsonResponse(["ok": true])
        }
        try allow(method, [.get, .head, .post])
        if method == .post {
            let (index, _, partitioned) = try Self.requestedIndex(try await jsonBody(&call, limit: 1 << 20))
            if partitioned == true {
                throw CouchError(.badRequest, "invalid_design_doc", "partitioned option cannot be true in a non-partitioned database.")
            }
            var list = try usersIndexes()
            let result: String
            if let at = list.firstIndex(where: { $0.ddoc == index.ddoc && $0.name == index.name }) {
                result = list[at].json == index.json ? "exists" : "created"
                list[at] = index
            } else {
                guard list.count < Self.maxUsersIndexes else {
                    throw CouchError.badRequest("_users keeps at most \(Self.maxUsersIndexes) Mango indexes")
                }
                list.append(index)
                result = "created"
            }
            if result == "created" { try await saveUsersIndexes(list) }
            return try jsonResponse(["result": .string(result), "id": .string(index.ddoc), "name": .string(index.name)])
        }
        let list = [Self.allDocsIndex] + (try usersIndexes().sorted { ($0.ddoc, $0.name) < ($1.ddoc, $1.name) }.map(\.json))
        return try jsonResponse(["total_rows": .int(Int64(list.count)), "indexes": .array(list)])
    }

    /// The most Mango indexes `_users` keeps.
    static let maxUsersIndexes = 100

    // MARK: - _bulk_docs

    /// Each document written as its own `PUT` would be (the same checks and answers), one after
    /// the other; `new_edits: false` is refused (the records keep no revision history).
    private func usersBulkDocs(_ call: inout Call) async throws -> Response {
        let body = try await jsonBody(&call, limit: 16 << 20)
        if case .bool(false)? = body["new_edits"] {
            throw CouchError.badRequest("_users keeps no revision history: new_edits=false is not taken")
        }
        guard let member = body["docs"] else { throw CouchError.badRequest("POST body must include `docs` parameter.") }
        guard case .array(let docs) = member else { throw CouchError.badRequest("`docs` parameter must be an array.") }
        guard docs.count <= Self.maxUsersBulk else { throw CouchError.badRequest("_users takes at most \(Self.maxUsersBulk) documents at once") }
        var results: [JSONValue] = []
        for item in docs {
            // A document without an ID gets one, as CouchDB gives it, and is refused by name.
            let generated = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            guard case .object(let doc) = item else {
                results.append(["id": .string(generated), "error": "bad_request", "reason": "Document must be a JSON object"])
                continue
            }
            guard case .string(let id)? = doc["_id"] ?? .string(generated) else {
                results.append(["id": .string(generated), "error": "bad_request", "reason": "Document id must be a string"])
                continue
            }
            do {
                let rev = try await saveUserDocument(call, id: id, body: doc, bulk: true)
                results.append(["ok": true, "id": .string(id), "rev": .string(rev)])
            } catch let e as CouchError {
                results.append(["id": .string(id), "error": .string(e.error), "reason": .string(e.reason)])
            }
        }
        return try jsonResponse(.array(results), status: .created)
    }

    /// The most documents one `_users` `_bulk_docs` takes (each may cost a password hash).
    static let maxUsersBulk = 1000
}
