import Foundation
import HTTPTypes
import Hummingbird
@_spi(Server) import Settee

/// CouchDB views: `GET/POST /{db}/_design/{ddoc}/_view/{view}`, `GET /{db}/_design/{ddoc}/_info`
/// and `POST /{db}/_view_cleanup`, on the library's map indexes (ServedDatabase+Views.swift).
extension CouchAPI {
    /// A view request's options, as CouchDB reads them.
    struct ViewOptions {
        var keys: [JSONValue]?
        var key: JSONValue?
        var startKey: JSONValue?
        var endKey: JSONValue?
        var startDocID: String?
        var endDocID: String?
        var inclusiveEnd = true
        var descending = false
        var limit: Int?
        var skip = 0
        var group = false
        var groupLevel: Int?
        var reduce: Bool?
        var includeDocs = false
        var conflicts = false
        var updateSeq = false
        /// The partition read (`partition`, or `/_partition/{p}/_design/…`).
        var partition: String?

        static let jsonValued: Set<String> = ["key", "keys", "startkey", "start_key", "endkey", "end_key"]

        init(_ call: Call, api: CouchAPI) throws {
            func json(_ names: String...) throws -> JSONValue? {
                for n in names {
                    guard let text = call.query[n] else { continue }
                    do {
                        return try JSONValue(parsing: text)
                    } catch {
                        throw CouchError(.badRequest, "query_parse_error", "Invalid JSON value for \(n): \(text)")
                    }
                }
                return nil
            }
            func text(_ names: String...) -> String? { names.lazy.compactMap { call.query[$0] }.first }
            key = try json("key")
            if let k = try json("keys") {
                guard case .array(let list) = k else { throw CouchError(.badRequest, "query_parse_error", "`keys` must be an array") }
                keys = list
            }
            startKey = try json("startkey", "start_key")
            endKey = try json("endkey", "end_key")
            startDocID = text("startkey_docid", "start_key_doc_id")
            endDocID = text("endkey_docid", "end_key_doc_id")
            inclusiveEnd = try api.flag(call, "inclusive_end", default: true)
            descending = try api.flag(call, "descending")
            limit = try api.integer(call, "limit")
            skip = try api.integer(call, "skip") ?? 0
            group = try api.flag(call, "group")
            groupLevel = try api.integer(call, "group_level")
            if call.query["reduce"] != nil { reduce = try api.flag(call, "reduce") }
            includeDocs = try api.flag(call, "include_docs")
            conflicts = try api.flag(call, "conflicts")
            updateSeq = try api.flag(call, "update_seq")
            // Accepted and checked; every view is whole after each commit, so all ask the same.
            if let u = call.query["update"], !["true", "false", "lazy"].contains(u) {
                throw CouchError(.badRequest, "query_parse_error", "Invalid value for `update`: \(u)")
            }
            if let s = call.query["stale"], !["ok", "update_after", "false"].contains(s) {
                throw CouchError(.badRequest, "query_parse_error", "Invalid value for `stale`: \(s)")
            }
            if let p = call.query["partition"] {
                guard !p.isEmpty else { throw CouchError(.badRequest, "query_parse_error", "Invalid value for `partition`.") }
                try CouchAPI.checkPartition(p)
                partition = p
            }
            _ = try api.flag(call, "stable")
            _ = try api.flag(call, "sorted", default: true)
            if keys != nil && (key != nil || startKey != nil || endKey != nil) {
                throw CouchError(.badRequest, "query_parse_error", "`keys` is incompatible with `key`, `start_key` and `end_key`")
            }
        }

        /// The slices of the index to read, in order; a partition's are its `[partition, key]`
        /// rows.
        func ranges() throws -> [MapIndexRange] {
            func stored(_ k: JSONValue?) -> JSONValue? {
                guard let k else { return nil }
                return partition.map { [.string($0), k] } ?? k
            }
            let first = partition.map(JSONValue.string)
            if let keys {
                return keys.map { k in
                    var r = MapIndexRange.key(stored(k) ?? k)
                    r.startDocumentID = startDocID
                    r.endDocumentID = endDocID
                    r.firstElement = first
                    return r
                }
            }
            var r = MapIndexRange()
            r.firstElement = first
            r.startKey = stored(key ?? startKey)
            r.endKey = stored(key ?? endKey)
            r.startDocumentID = startDocID
            r.endDocumentID = endDocID
            r.inclusiveEnd = key != nil || inclusiveEnd
            if key == nil, let s = startKey, let e = endKey {
                let order = try JSONValue.collationOrder(s, e)
                if order == (descending ? .orderedAscending : .orderedDescending) {
                    throw CouchError(.badRequest, "query_parse_error",
                                     "No rows can match your key range, reverse your start_key and end_key or set descending=\(!descending)")
                }
            }
            return [r]
        }
    }

    /// `GET/POST /{db}/_design/{ddoc}/_view/{view}`.
    func view(_ call: inout Call, _ db: ServedDatabase, ddoc: String, name: String) async throws -> Response {
        try allow(call.request.method, [.get, .head, .post])
        return try jsonResponse(.object(try await viewResult(&call, db, ddoc: ddoc, name: name)))
    }

    /// A view's answer for a request (its options in the query, or for a `POST` in the body
    /// too), as the caller may read it: `{total_rows, offset, rows}` or reduced `{rows}`.
    func viewResult(_ call: inout Call, _ db: ServedDatabase, ddoc: String, name: String) async throws -> [String: JSONValue] {
        var params = call.query
        if call.request.method == .post {
            let body = try await jsonBody(&call, limit: bodyLimit(db))
            // The query string wins over the body, as in CouchDB.
            var fromBody: [String: String] = [:]
            try Self.bodyOptions(body, into: &fromBody, except: [], jsonValued: { ViewOptions.jsonValued.contains($0) })
            params = fromBody.merging(params) { _, query in query }
        }
        let query = Call(request: call.request, path: call.path, query: params, principal: call.principal, started: call.started)
        let options = try ViewOptions(query, api: self)
        let (view, rowCount) = try await readyView(db, ddoc: ddoc, name: name)
        // CouchDB's rule: a partitioned view is read one partition at a time, a global one whole.
        if view.partitioned && options.partition == nil {
            throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is mandatory for queries to this view.")
        }
        if !view.partitioned && options.partition != nil {
            throw CouchError(.badRequest, "query_parse_error", "`partition` parameter is not supported in this design doc")
        }
        let reducing: Bool
        if let r = options.reduce, r {
            guard view.reduce != nil else { throw CouchError(.badRequest, "query_parse_error", "Reduce is invalid for map-only views.") }
            reducing = true
        } else {
            reducing = options.reduce == nil && view.reduce != nil
        }
        if !reducing && (options.group || options.groupLevel != nil) && view.reduce == nil {
            throw CouchError(.badRequest, "query_parse_error", "Invalid use of grouping on a map view.")
        }
        if reducing && options.includeDocs {
            throw CouchError(.badRequest, "query_parse_error", "`include_docs` is invalid for reduce")
        }
        // As CouchDB: only exact grouping (`group=true`, no `group_level`) takes keys.
        if reducing && options.keys != nil && !(options.group && options.groupLevel == nil) {
            throw CouchError(.badRequest, "query_parse_error", "Multi-key fetches for reduce views must use `group=true`")
        }
        let reader = try Reader(db, call.principal)
        var out: [String: JSONValue]
        do {
            if reducing, let reduce = view.reduce {
                out = ["rows": .array(try reducedRows(db, view, reduce: reduce, options: options, reader: reader))]
            } else {
                out = try mapRows(db, view, rowCount: rowCount, options: options, reader: reader)
            }
        } catch let e as SetteeError where e.code == .busy {
            throw CouchError(.serviceUnavailable, "index_building", "The view's index is being rebuilt; try again shortly")
        }
        if options.updateSeq { out["update_seq"] = .int(Int64(try db.database.lastSequence)) }
        return out
    }

    /// The view's definition and its rows, once its library index is whole (built or rebuilt
    /// first when its design document changed and the rebuild has not finished).
    func readyView(_ db: ServedDatabase, ddoc: String, name: String) async throws -> (view: ViewDefinition, rows: Int) {
        let id = Self.designID(ddoc)
        guard let doc = try await db.database.document(withID: id), !doc.isDeleted, let revision = doc.revisionID else {
            throw CouchError.notFound("missing")
        }
        let views: [ViewDefinition]
        if let known = db.designViews.withLock({ $0[id] }), known.revision == revision {
            views = known.views
        } else {
            views = ViewDefinition.views(in: doc.toDictionary(), id: id, partitioned: db.partitioned)
            db.designViews.withLock { cache in
                // Bounded: design documents are few, but a database may be given many.
                if cache.count >= 256 { cache.removeAll() }
                cache[id] = (revision, views)
            }
        }
        guard let view = views.first(where: { $0.name == name }) else {
            throw CouchError.notFound("missing_named_view")
        }
        do {
            _ = try db.mapConfiguration(view)
        } catch {
            throw CouchError(.badRequest, "compilation_error", "\(error)")
        }
        func whole() throws -> Int? {
            guard let info = try db.database.mapIndexInfo(forName: view.libraryName),
                  info.version == view.version && info.isReady && info.isAttached else { return nil }
            return info.rowCount
        }
        if let rows = try whole() { return (view, rows) }
        try await db.syncMangoIndexes()
        guard let rows = try whole() else { throw CouchError(.serviceUnavailable, "index_building", "The view's index could not be built") }
        return (view, rows)
    }

    /// Map rows: `{"total_rows", "offset", "rows": [{"id", "key", "value"[, "doc"]}]}`.
    private func mapRows(_ db: ServedDatabase, _ view: ViewDefinition, rowCount: Int, options: ViewOptions,
                         reader: Reader) throws -> [String: JSONValue] {
        var picked: [MapIndexRow] = []
        var skipped = 0
        let limit = options.limit ?? .max
        if limit > 0 {
            try db.database.mapIndexRows(view.libraryName, ranges: try options.ranges(), descending: options.descending) { row in
                guard try reader.readsAll || reader.readability(of: row.documentID, revision: nil) == .readable else { return true }
                if skipped < options.skip {
                    skipped += 1
                    return true
                }
                picked.append(row)
                return picked.count < limit
            }
        }
        var rows: [JSONValue] = []
        rows.reserveCapacity(picked.count)
        for row in picked {
            var o: [String: JSONValue] = ["id": .string(row.documentID), "key": Self.userKey(row.key, view), "value": row.value]
            if options.includeDocs {
                // A value `{"_id": …}` names the document to include (CouchDB's linked documents).
                var target = row.documentID
                if case .object(let v) = row.value, case .string(let linked)? = v["_id"] { target = linked }
                Self.include(into: &o) {
                    guard try reader.readability(of: target, revision: nil) == .readable,
                          let doc = try db.database.document(withID: target), !doc.isDeleted else { return .null }
                    return try documentJSON(doc, db, reader: reader, conflicts: options.conflicts)
                }
            }
            rows.append(.object(o))
        }
        // A user's total counts what it was given (as `_all_docs` does): the view's count
        // would tell it how many rows it cannot read.
        let total = reader.readsAll ? rowCount : skipped + rows.count
        return ["total_rows": .int(Int64(total)), "offset": .int(Int64(options.skip)), "rows": .array(rows)]
    }

    /// Reduced rows: one for the whole range, or one per group (`group`, `group_level`).
    private func reducedRows(_ db: ServedDatabase, _ view: ViewDefinition, reduce: String, options: ViewOptions,
                             reader: Reader) throws -> [JSONValue] {
        let reducer = try ViewReducer(reduce, view: view, db: db)
        // group_level=0 is one group of every row, as without grouping.
        let grouping: Int? = options.groupLevel.map { $0 < 1 ? nil : $0 } ?? (options.group ? Int.max : nil)
        func groupKey(_ stored: JSONValue) -> JSONValue {
            guard let level = grouping else { return .null }
            let key = Self.userKey(stored, view)
            if level == Int.max { return key }
            if case .array(let a) = key { return .array(Array(a.prefix(level))) }
            return key
        }
        var out: [JSONValue] = []
        var skipped = 0
        let limit = options.limit ?? .max
        var current: (key: JSONValue, accumulator: ViewReducer.Accumulator)?
        func close() throws -> Bool {
            guard let c = current else { return true }
            current = nil
            if skipped < options.skip {
                skipped += 1
                return true
            }
            out.append(["key": c.key, "value": try c.accumulator.finish()])
            return out.count < limit
        }
        guard limit > 0 else { return [] }
        // Built-in reduces over rows all readable: the library groups the stored rows by their
        // collation keys and parses only what the reduce reads (nothing per row for `_count`).
        // A partitioned view's stored keys are `[partition, key]`: a level of the key is not one
        // of them, so its levels are grouped from the rows walked.
        let levelOfPartitionedKey = view.partitioned && grouping != nil && grouping != Int.max
        if reader.readsAll, !levelOfPartitionedKey, let natural = reducer.readsValues {
            let grouped: MapIndexGrouping = switch grouping {
            case nil: .all
            case Int.max?: .exact
            case let level?: .level(level)
            }
            var rows: ViewReducer.Accumulator?
            try db.database.mapIndexGroups(view.libraryName, ranges: try options.ranges(), descending: options.descending,
                                           grouping: grouped, readingValues: natural, value: { value in
                let accumulator = rows ?? reducer.accumulator()
                rows = accumulator
                try accumulator.add(value: value)
            }, group: { key, n in
                let accumulator = rows ?? reducer.accumulator()
                rows = nil
                if !natural { accumulator.add(rows: n) }
                current = (grouping == nil ? key : Self.userKey(key, view), accumulator)
                return try close()
            })
            return out
        }
        var going = true
        try db.database.mapIndexRows(view.libraryName, ranges: try options.ranges(), descending: options.descending) { row in
            guard try reader.readsAll || reader.readability(of: row.documentID, revision: nil) == .readable else { return true }
            let key = groupKey(row.key)
            if let c = current, try JSONValue.collationOrder(c.key, key) != .orderedSame {
                going = try close()
                if !going { return false }
            }
            if current == nil { current = (key, reducer.accumulator()) }
            try current?.accumulator.add(key: Self.userKey(row.key, view), id: row.documentID, value: row.value)
            return true
        }
        if going { _ = try close() }
        return out
    }

    /// A row's key as the view's map function emitted it: a partitioned view keeps it after
    /// the partition.
    static func userKey(_ stored: JSONValue, _ view: ViewDefinition) -> JSONValue {
        guard view.partitioned, case .array(let pair) = stored, pair.count == 2 else { return stored }
        return pair[1]
    }

    /// `GET /{db}/_design/{ddoc}/_info`.
    func designInfo(_ call: Call, _ db: ServedDatabase, ddoc: String) async throws -> Response {
        try allow(call.request.method, [.get, .head])
        let id = Self.designID(ddoc)
        guard let doc = try await db.database.document(withID: id), !doc.isDeleted else { throw CouchError.notFound("missing") }
        let views = ViewDefinition.views(in: doc.toDictionary(), id: id, partitioned: db.partitioned)
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var detail: [String: JSONValue] = [:]
        var building = false
        let errors = db.viewErrors.withLock { $0 }
        // A user is not told how many rows (or failing documents) there are: most may be of
        // documents it cannot read.
        let readsAll = try Reader(db, call.principal).readsAll
        for v in views {
            for b in (v.version + "\u{0}" + (v.reduce ?? "")).utf8 {
                hash = (hash ^ UInt64(b)) &* 0x100_0000_01B3
            }
            let info = try db.database.mapIndexInfo(forName: v.libraryName)
            let ready = info.map { $0.isReady && $0.version == v.version } ?? false
            building = building || !ready
            detail[v.name] = readsAll ? ["rows": .int(Int64(info?.rowCount ?? 0)), "ready": .bool(ready),
                                         "map_errors": .int(Int64(errors[v.libraryName] ?? 0))] : ["ready": .bool(ready)]
        }
        let name = String(id.dropFirst("_design/".count))
        let index: JSONValue = ["signature": .string(String(hash, radix: 16)), "language": "javascript",
                                "update_seq": .int(Int64(try db.database.lastSequence)), "purge_seq": 0,
                                "updater_running": .bool(building), "compact_running": .bool(db.compactionsRunning.load(ordering: .sequentiallyConsistent) > 0), "waiting_clients": 0,
                                "waiting_commit": false, "views": .object(detail)]
        return try jsonResponse(["name": .string(name), "view_index": index])
    }

    /// `POST /{db}/_view_cleanup`: removes the indexes of views no design document defines.
    func viewCleanup(_ db: ServedDatabase) async throws -> Response {
        try await db.syncMangoIndexes()
        return try jsonResponse(["ok": true], status: .accepted)
    }
}
