import Crypto
import Foundation
import Synchronization
import HTTPTypes
import Hummingbird
@_spi(Replication) @_spi(Server) import Settee

/// CouchDB's Mango: `_find`, `_explain` and `_index`, on the library's Mango queries and value
/// indexes (one planner, one key order). An index defined here is what CouchDB makes of one: a
/// design document with `"language": "query"` (replicated, listed in `_design_docs`), and the
/// library index `_design/<ddoc>/<name>` over its fields, which the server keeps in step with the
/// design documents (at start, and whenever one changes, however it was written).
extension CouchAPI {
    /// `_find`'s members; those the library does not take are the server's.
    static let findMembers: Set<String> = ["selector", "limit", "skip", "sort", "fields", "use_index", "bookmark", "conflicts",
                                           "r", "update", "stable", "stale", "execution_stats", "allow_fallback", "partition"]

    /// What `_find` and `_explain` were asked, checked.
    struct FindRequest {
        /// The selector as sent (`_explain` gives it back) and compiled.
        var selectorJSON: JSONValue
        var selector: MangoQuery.Selector
        var limit = 25
        var skip = 0
        var sort: [MangoQuery.SortField] = []
        var fields: [String]?
        var useIndex: (ddoc: String, name: String?)?
        var bookmark: Int?
        /// The bookmark as sent: an empty page gives it back, as CouchDB does.
        var bookmarkText: String?
        /// A selector that is an empty `$or`, `$and` or `$nor` and nothing else: CouchDB
        /// answers it with no documents (nested, such a combination matches everything).
        var matchesNothing = false
        var conflicts = false
        var executionStats = false
        var allowFallback = true
        /// The partition read (`partition`, or `/_partition/{p}/_find`): nil for every document.
        var partition: String?
        var body: [String: JSONValue]

        init(_ body: [String: JSONValue]) throws {
            self.body = body
            for key in body.keys where !CouchAPI.findMembers.contains(key) {
                throw CouchError.invalidKey(key)
            }
            guard let selector = body["selector"] else { throw CouchError.badRequest("Missing required key: selector") }
            guard case .object = selector else { throw CouchError(.badRequest, "invalid_selector_json", "Selector must be a JSON object") }
            selectorJSON = selector
            if case .object(let o) = selector, o.count == 1, let (op, v) = o.first, ["$or", "$and", "$nor"].contains(op), v == .array([]) {
                matchesNothing = true
            }
            self.selector = try CouchAPI.mango { () throws(SetteeError) in try MangoQuery.Selector(selector) }
            // Checked as CouchDB's `mango_opts` checks them, with its error names.
            func text(_ v: JSONValue) -> String { (try? v.jsonText()) ?? "?" }
            func count(_ name: String) throws -> Int? {
                guard let v = body[name] else { return nil }
                guard case .int(let n) = v, n >= 0 else {
                    throw CouchError(.badRequest, "invalid_non_neg_integer", "\(text(v)) is not an integer greater than or equal to zero")
                }
                // Past 2^31 a page means nothing more (and stays far from overflow).
                return Int(min(n, Int64(Int32.max)))
            }
            func flag(_ name: String) throws -> Bool? {
                guard let v = body[name] else { return nil }
                guard case .bool(let b) = v else { throw CouchError(.badRequest, "invalid_boolean", "Invalid boolean value: \(text(v))") }
                return b
            }
            if let r = body["r"] {
                guard case .int(let n) = r, n > 0 else {
                    throw CouchError(.badRequest, "invalid_pos_integer", "\(text(r)) is not an integer greater than zero")
                }
            }
            switch body["stale"] {
            case nil, .bool(false)?, .string("ok")?, .string("false")?: break
            case let v?: throw CouchError(.badRequest, "invalid_ok_or_false_value", "Invalid value for stale: \(text(v))")
            }
            // Every index is current (written in the document's own commit): `update`,
            // `stable` and `stale` change nothing, but must be what CouchDB takes.
            _ = try flag("update")
            _ = try flag("stable")
            switch body["partition"] {
            case nil, .string("")?: break
            case .string(let p)?: partition = p
            case let v?: throw CouchError(.badRequest, "invalid_partition", "Invalid partition: \(text(v))")
            }
            limit = try count("limit") ?? 25
            skip = try count("skip") ?? 0
            if let sortJSON = body["sort"] { sort = try CouchAPI.mango { () throws(SetteeError) in try MangoQuery.sort(sortJSON) } }
            if let f = body["fields"] {
                guard case .array(let list) = f else { throw CouchError.badRequest("fields must be an array of field names") }
                fields = try list.map { v in
                    guard case .string(let s) = v else { throw CouchError.badRequest("fields must be an array of field names") }
                    return s
                }
            }
            useIndex = try CouchAPI.indexName(body["use_index"])
            switch body["bookmark"] {
            case nil, .string("nil")?: break
            case .string(let b)?:
                guard let offset = CouchAPI.offset(ofBookmark: b) else {
                    throw CouchError(.badRequest, "invalid_bookmark", "Invalid bookmark value: \"\(b)\"")
                }
                bookmark = offset
                bookmarkText = b
            default: throw CouchError(.badRequest, "invalid_bookmark", "Invalid bookmark value")
            }
            conflicts = try flag("conflicts") ?? false
            executionStats = try flag("execution_stats") ?? false
            allowFallback = try flag("allow_fallback") ?? true
        }

        /// Where the page starts among the matches.
        var offset: Int { (bookmark ?? 0) + skip }
    }

    /// An index named as CouchDB's `use_index` and `_bulk_delete` take one: absent, `null`
    /// or `[]` for none; `"ddoc"`, `"ddoc/name"` (either with `_design/`), `["ddoc"]` or
    /// `["ddoc", "name"]`. The ddoc is given with its `_design/` prefix.
    static func indexName(_ value: JSONValue?) throws -> (ddoc: String, name: String?)? {
        func invalid() -> CouchError {
            CouchError(.badRequest, "invalid_index_name", "Invalid index name: \((try? value?.jsonText()) ?? "")")
        }
        switch value {
        case nil, .null?: return nil
        case .string(let s)?:
            // An empty name names nothing (CouchDB then finds no such index: a warning).
            if s.isEmpty { return nil }
            let parts = s.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            switch parts.count {
            case 1: return (designID(parts[0]), nil)
            case 2 where parts[0] == "_design": return (designID(parts[1]), nil)
            case 2: return (designID(parts[0]), parts[1])
            case 3 where parts[0] == "_design": return (designID(parts[1]), parts[2])
            default: throw invalid()
            }
        case .array(let a)?:
            let names = try a.map { v -> String in
                guard case .string(let s) = v else { throw invalid() }
                return s
            }
            switch names.count {
            case 0: return nil
            case 1: return (designID(names[0]), nil)
            case 2: return (designID(names[0]), names[1])
            default: throw invalid()
            }
        default: throw invalid()
        }
    }

    /// `_design/name` for a design document named with or without its prefix.
    static func designID(_ name: String) -> String { name.hasPrefix("_design/") ? name : "_design/" + name }

    /// A bookmark is where the next page starts among the matches, opaque to clients.
    static func bookmark(offset: Int) -> String {
        // Without base64's padding (read back by padding again).
        String(decoding: Data("settee:\(offset)".utf8).base64EncodedString().utf8.prefix { $0 != UInt8(ascii: "=") }, as: UTF8.self)
    }

    static func offset(ofBookmark b: String) -> Int? {
        guard b.utf8.count <= 64 else { return nil }
        var text = b
        while text.utf8.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), let s = String(data: data, encoding: .utf8), s.hasPrefix("settee:"),
              let n = Int(s.dropFirst(7)), n >= 0, n <= Int(Int32.max) else { return nil }
        return n
    }

    /// What the library says of a Mango query it cannot take, as CouchDB says it.
    static func mango<T>(_ body: () throws(SetteeError) -> T) throws -> T {
        do {
            return try body()
        } catch let e where e.code == .invalidParameter {
            let reason = e.message.hasPrefix("mango: ") ? String(e.message.dropFirst(7)) : e.message
            // The library words these as CouchDB does; their error names follow the words.
            let error = reason.hasPrefix("Invalid operator: ") ? "invalid_operator"
                : reason.hasPrefix("Bad argument for operator ") ? "bad_arg"
                : reason.hasPrefix("Unsupported operator: ") ? "not_supported"
                : reason.contains("selector") ? "invalid_selector" : "bad_request"
            throw CouchError(.badRequest, error, reason)
        }
    }

    /// What leaves design documents out of `_find`, compiled once.
    static let notDesignDocuments = Swift.Result { () throws(SetteeError) in
        try MangoQuery.Selector(["_id": ["$not": ["$beginsWith": "_design/"]]])
    }

    /// The index CouchDB's rules choose for a request (``MangoIndexChoice``): in a partitioned
    /// database, among the partitioned indexes for a partition's query and among the global
    /// ones for the others.
    func indexChoice(_ db: ServedDatabase, _ r: FindRequest) throws -> MangoIndexChoice {
        try MangoIndexChoice(selector: r.selectorJSON, sort: r.sort.map(\.field), fields: r.fields, indexes: try mangoIndexes(db),
                             useIndex: r.useIndex, allowFallback: r.allowFallback,
                             partitioned: db.partitioned ? r.partition != nil : nil)
    }

    /// A `_find` or `_explain` request's partition, from its body or its path
    /// (`/_partition/{p}/_find`), checked against the database.
    func partition(of r: FindRequest, _ call: Call, _ db: ServedDatabase) throws -> String? {
        var p = r.partition
        if let fromPath = call.query["partition"] {
            if let given = p, given != fromPath { throw CouchError.badRequest("Conflicting value for `partition` in query string") }
            p = fromPath
        }
        guard let p else { return nil }
        guard db.partitioned else { throw CouchError.badRequest("partition specified on non-partitioned db") }
        try Self.checkPartition(p)
        return p
    }

    /// The library query for a request, reading the index `choice` names (or none, for
    /// `_all_docs`): its selector (and the partial index's, when that is the one read),
    /// design documents left out as CouchDB leaves them out, the sort;
    /// `skip` and `limit` too when every match may be read. A user's query is restricted to
    /// its channels, so nearly every match is one it may read: it reads up to the end of the
    /// page (`skip` is counted by the server among the matches that pass its check), never
    /// ahead of it. The request's parts go to the library as they were compiled when it was
    /// read.
    /// `selector`: read in place of the request's (a wider one the server checks further: then
    /// no page bound is the library's, as the server passes over some of what it reads).
    func libraryQuery(_ db: ServedDatabase, _ r: FindRequest, choice: MangoIndexChoice, readsAll: Bool, idsOnly: Bool = false,
                      selector: MangoQuery.Selector? = nil) throws -> Query {
        var selectors = [selector ?? r.selector, try Self.notDesignDocuments.get()]
        if let partial = choice.index?.partial {
            try Self.mango { () throws(SetteeError) in selectors.append(try MangoQuery.Selector(partial)) }
        }
        // The index chosen holds only documents with its fields, which the selector requires:
        // said outright, so that the library reads that index even when no condition ranges
        // over it (`$mod`, `$regex`…), in its order, as CouchDB does.
        if let first = choice.index?.fields.first?.field, first != "_id", first != "_rev" {
            try Self.mango { () throws(SetteeError) in
                selectors.append(try MangoQuery.Selector([first: ["$exists": true]]))
            }
        }
        var mango = MangoQuery(selector: .all(selectors))
        mango.sort = r.sort
        mango.partition = r.partition
        // `_id` and `_rev` only: the documents are read as stored.
        if idsOnly { mango.fields = ["_id"] }
        if selector != nil {
            // Every match may be passed over by the server's check: it reads until its page is full.
        } else if readsAll {
            mango.skip = r.offset
            mango.limit = r.limit
        } else {
            mango.limit = r.offset + r.limit
        }
        let query: Query
        do {
            query = try db.database.createQuery(mango: mango)
        } catch let e as SetteeError {
            return try Self.mango { () throws(SetteeError) -> Query in throw e }
        }
        query.indexRestriction = choice.index.map { .only($0.libraryName) } ?? .none
        return query
    }

    static let allDocsIndex: JSONValue = ["ddoc": .null, "name": "_all_docs", "type": "special", "def": ["fields": [["_id": "asc"]]]]

    /// The warnings CouchDB gives with the answer, one per line (`mango_cursor:maybe_add_warning`):
    /// a `use_index` not read, no index read, and many documents read per result.
    static func warning(_ r: FindRequest, read index: MangoIndex?, documentsExamined: Int, returned: Int) -> String? {
        var lines: [String] = []
        if let use = r.useIndex, !(index.map { $0.ddoc == use.ddoc && (use.name == nil || $0.name == use.name) } ?? false) {
            lines.append(use.name.map { "\(use.ddoc), \($0) was not used because it is not a valid index for this query." }
                         ?? "\(use.ddoc) was not used because it does not contain a valid index for this query.")
        }
        if index == nil { lines.append("No matching index found, create an index to optimize query time.") }
        // CouchDB's default `index_scan_warning_threshold`.
        if documentsExamined > 10 * max(returned, 1) {
            lines.append("The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.")
        }
        return lines.isEmpty ? nil : lines.joined(separator: "\n")
    }

    /// The largest page (`skip` and `limit`) a `_find` reads at once rather than streamed.
    static let pageReadAtOnce = 500

    /// `POST /{db}/_find`.
    func find(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let started = ContinuousClock.now
        var r = try FindRequest(try await jsonBody(&call, limit: bodyLimit(db), lastKeyWins: true))
        r.partition = try partition(of: r, call, db)
        let reader = try Reader(db, call.principal)
        if r.matchesNothing {
            var out: [String: JSONValue] = ["docs": [], "bookmark": .string(r.bookmarkText ?? "nil")]
            if r.executionStats {
                out["execution_stats"] = ["total_keys_examined": 0, "total_docs_examined": 0, "total_quorum_docs_examined": 0,
                                          "results_returned": 0, "execution_time_ms": 0.0]
            }
            return try jsonResponse(.object(out))
        }
        // Whole documents go out as stored (no parse, no rewrite) unless fields or conflicts
        // are asked for.
        let asStored = r.fields == nil && !r.conflicts
        let choice = try indexChoice(db, r)
        // With `conflicts`, the selector may test `_conflicts`, which only the document with its
        // revision tree holds (for a user, the conflicts it may read): the library reads every
        // document the selector could match with those conditions held true, and the whole
        // selector is checked here on each, `_conflicts` included.
        var exact: Query?
        var widened: MangoQuery.Selector?
        let normalized = MangoIndexChoice.normalized(r.selectorJSON)
        let onConflicts = { (f: String) in f == "_conflicts" || f.hasPrefix("_conflicts.") }
        if r.conflicts, MangoIndexChoice.fields(normalized).contains(where: onConflicts) {
            do {
                exact = try db.database.createQuery(mango: MangoQuery(selector: r.selector))
            } catch let e as SetteeError {
                _ = try Self.mango { () throws(SetteeError) in throw e }
            }
            let wide = MangoIndexChoice.json(MangoIndexChoice.widened(normalized, replacing: onConflicts))
            widened = try Self.mango { () throws(SetteeError) in try MangoQuery.Selector(wide) }
        }
        // The server counts `skip` and `limit` when it may pass over what the library gives.
        let serverPages = !reader.readsAll || exact != nil
        let query = try libraryQuery(db, r, choice: choice, readsAll: !serverPages, idsOnly: asStored, selector: widened)
        // A user's query reads the documents of its channels, from their entries alone: its
        // cost follows what it may read, not the database's size.
        query.channels = reader.channels
        // Each match comes with its document as stored, from the query's own snapshot.
        query.readsStoredDocuments = asStored
        var docs: [[UInt8]] = []
        var matched = 0
        // One match: false once the page is full.
        func take(_ result: Result) async throws -> Bool {
            guard let id = result.string(forKey: "_id") else { return true }
            // A user's statistics count only what it may read: nothing leaks through them.
            guard try reader.readsAll || reader.readability(of: id, revision: nil) == .readable else { return true }
            var checked: JSONValue?
            if let exact {
                guard let doc = try await db.database.document(withID: id), !doc.isDeleted, let rev = doc.revisionID else { return true }
                let json = try documentJSON(doc, db, reader: reader, conflicts: true)
                guard case .object(var properties) = json else { return true }
                properties["_id"] = nil
                properties["_rev"] = nil
                guard try exact.matches(id: id, revisionID: rev, properties: properties) else { return true }
                checked = json
            }
            matched += 1
            if serverPages && matched <= r.offset { return true }
            if asStored, let rev = result.string(forKey: "_rev") {
                guard let found = try foundDocument(db, id: id, revision: rev, reader: reader, stored: result.storedJSON) else { return true }
                docs.append(found)
                return docs.count < r.limit
            }
            var json: JSONValue
            if let checked {
                json = checked
            } else if !r.conflicts, case .object(var o)? = result.value(at: 2), o["_attachments"] == nil, let rev = result.string(forKey: "_rev") {
                // The query read the document: its properties are the answer (attachments'
                // stubs and conflicts need the stored document).
                o["_id"] = .string(id)
                o["_rev"] = .string(rev)
                json = .object(o)
            } else {
                guard let doc = try await db.database.document(withID: id), !doc.isDeleted else { return true }
                json = try documentJSON(doc, db, reader: reader, conflicts: r.conflicts)
            }
            if let fields = r.fields { json = Self.project(json, fields) }
            docs.append(try json.responseBytes())
            return docs.count < r.limit
        }
        do {
            // A user reads the matches it may read: skipped and counted among those only. The
            // library reads no further than the page (its limit); a page of a few hundred is
            // read on this thread, a larger one streams from a reading thread of its own.
            // A query whose matches the server checks further has no page bound: it streams, and
            // stops when the page is full.
            if exact == nil && r.offset + r.limit <= Self.pageReadAtOnce {
                for result in try query.execute() where !(try await take(result)) { break }
            } else {
                for try await result in query.results() where !(try await take(result)) { break }
            }
        } catch let e as SetteeError where e.code == .invalidParameter {
            throw CouchError(.badRequest, "bad_request", e.message)
        }
        // What the run read: for a user, the entries and documents of its own channels only
        // (its query reads nothing else). None before the run started.
        let read = query.statisticsOfLastRun ?? QueryStatistics(keysExamined: 0, documentsExamined: 0)
        let warning = Self.warning(r, read: choice.index, documentsExamined: read.documentsExamined, returned: docs.count)
        // An empty page keeps the bookmark it was given (the end was reached before it).
        var out: [String: JSONValue] = ["bookmark": .string(docs.isEmpty ? r.bookmarkText ?? "nil" : Self.bookmark(offset: r.offset + docs.count))]
        if let warning { out["warning"] = .string(warning) }
        if r.executionStats {
            let ms = Double((ContinuousClock.now - started).components.attoseconds / 1_000_000_000_000) / 1000
                + Double((ContinuousClock.now - started).components.seconds) * 1000
            // A quorum read is CouchDB's second read of a document from other copies (`r` > 1):
            // one node has one copy.
            out["execution_stats"] = ["total_keys_examined": .int(Int64(read.keysExamined)),
                                      "total_docs_examined": .int(Int64(read.documentsExamined)),
                                      "total_quorum_docs_examined": 0, "results_returned": .int(Int64(docs.count)),
                                      "execution_time_ms": .double(ms)]
        }
        // `{"docs": [...], ` and then the other members.
        var body = Array(#"{"docs":["#.utf8)
        for (i, d) in docs.enumerated() {
            if i > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: d)
        }
        body.append(contentsOf: Array("],".utf8))
        body.append(contentsOf: try JSONValue.object(out).responseBytes().dropFirst())
        body.append(0x0A)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// A document `_find` matched at revision `revision`, as its answer gives it: the stored
    /// JSON with `_id` and `_rev` spliced in, or, with attachments, as ``documentJSON(_:_:reader:conflicts:)``
    /// makes it. A document changed since the query's snapshot is given at the revision the
    /// query matched (kept until a compaction), when the user may read that one; nil when it
    /// is gone. `stored`: the matched revision's JSON as the query read it, when it did (no
    /// second read then, unless the document has attachments).
    func foundDocument(_ db: ServedDatabase, id: String, revision: String, reader: Reader, stored: [UInt8]? = nil) throws -> [UInt8]? {
        if let stored, let bytes = try Self.spliced(stored, id: id, rev: revision) { return bytes }
        guard var doc = try db.database.document(withID: id) else { return nil }
        if doc.revisionID != revision {
            guard try reader.readability(of: id, revision: revision) == .readable,
                  let matched = try db.database.document(withID: id, revisionID: revision) else { return nil }
            doc = matched
        }
        if doc.isDeleted { return nil }
        if let bytes = try Self.spliced(try doc.storedJSON, id: id, rev: revision) { return bytes }
        return try documentJSON(doc, db, reader: reader, conflicts: false).responseBytes()
    }

    /// `POST /{db}/_explain`: the index `_find` would read, and how.
    func explain(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        var r = try FindRequest(try await jsonBody(&call, limit: bodyLimit(db), lastKeyWins: true))
        r.partition = try partition(of: r, call, db)
        let reader = try Reader(db, call.principal)
        let choice = try indexChoice(db, r)
        let query = try libraryQuery(db, r, choice: choice, readsAll: reader.readsAll)
        query.channels = reader.channels
        let plan = try query.explain()
        return try jsonResponse(Self.explanation(dbName: db.name, r, choice: choice, plan: plan))
    }

    /// `_explain`'s answer for a request and the index chosen for it: CouchDB 3.4's members,
    /// and `plan`, what the server reads.
    static func explanation(dbName: String, _ r: FindRequest, choice: MangoIndexChoice, plan: String) -> JSONValue {
        let index = choice.index?.json ?? allDocsIndex
        // CouchDB 3.4's answer, member for member; `plan` is the library's own account.
        let fields: JSONValue = .array((r.fields ?? []).map(JSONValue.string))
        var opts: [String: JSONValue] = ["use_index": .array([]), "bookmark": .string(r.bookmarkText ?? "nil"),
                                         "limit": .int(Int64(r.limit)), "skip": .int(Int64(r.skip)), "sort": .object(Dictionary(r.sort.map { ($0.field, JSONValue.string($0.descending ? "desc" : "asc")) },
                                                                                                                uniquingKeysWith: { a, _ in a })),
                                         "fields": fields, "partition": .string(r.partition ?? ""), "r": r.body["r"] ?? 1, "conflicts": .bool(r.conflicts),
                                         "stale": r.body["stale"] ?? false, "update": r.body["update"] ?? true, "stable": r.body["stable"] ?? false,
                                         "execution_stats": .bool(r.executionStats), "allow_fallback": .bool(r.allowFallback)]
        if let use = r.useIndex { opts["use_index"] = .array([.string(use.ddoc)] + (use.name.map { [.string($0)] } ?? [])) }
        let candidates: [JSONValue] = choice.candidates.map { c in
            ["index": c.index?.json ?? allDocsIndex,
             "analysis": ["usable": .bool(c.usable), "reasons": .array(c.reasons.prefix(1).map { ["name": .string($0)] }),
                          "ranking": .int(Int64(c.ranking)), "covering": c.covering.map(JSONValue.bool) ?? .null]]
        }
        let descending = r.sort.first?.descending ?? false
        let keys = choice.keyRange(descending: descending)
        // The selector as CouchDB shows it: normalized (members of an object in name order).
        let out: JSONValue = ["dbname": .string(dbName), "index": index, "partitioned": .bool(choice.index?.partitioned ?? false),
                              "selector": MangoIndexChoice.json(choice.node), "opts": .object(opts),
                              "limit": .int(Int64(r.limit)), "skip": .int(Int64(r.skip)), "fields": fields,
                              "index_candidates": .array(candidates),
                              "selector_hints": [["type": "json", "indexable_fields": .array(choice.indexableFields.map(JSONValue.string)),
                                                  "unindexable_fields": .array(choice.unindexableFields.map(JSONValue.string))]],
                              "mrargs": ["include_docs": .bool(!choice.covering), "view_type": "map", "reduce": false, "partition": r.partition.map(JSONValue.string) ?? .null,
                                         "start_key": keys.start, "end_key": keys.end, "direction": descending ? "rev" : "fwd",
                                         "stable": r.body["stable"] ?? false, "update": r.body["update"] ?? true, "conflicts": "undefined"],
                              "covering": .bool(choice.covering), "plan": .string(plan)]
        return out
    }

    /// A document as `_find` and `include_docs` return it: `_id`, `_rev`, properties,
    /// attachment stubs, `_conflicts` when asked (those the reader may know of).
    func documentJSON(_ doc: Document, _ db: ServedDatabase, reader: Reader, conflicts: Bool) throws -> JSONValue {
        guard let rev = doc.revisionID else { return .null }
        var o = doc.toDictionary()
        if let e = doc.bodyError { throw e }
        if case .object(let stored)? = o["_attachments"] { o["_attachments"] = try wireAttachments(stored, db, inlineAfter: nil) }
        o["_id"] = .string(doc.id)
        o["_rev"] = .string(rev)
        if conflicts, let tree = try db.database.revisionTree(withID: doc.id) {
            let visible = try reader.revisionFilter(of: doc.id)
            let others = tree.revisions.filter { tree.leafRevisionIDs.contains($0.revisionID) && !$0.isDeleted && $0.revisionID != rev && visible($0.revisionID) }
            if !others.isEmpty { o["_conflicts"] = .array(others.map { .string($0.revisionID) }) }
        }
        return .object(o)
    }

    /// `fields`: only the named fields (dotted names nest), as CouchDB returns them.
    static func project(_ doc: JSONValue, _ fields: [String]) -> JSONValue {
        guard case .object(let o) = doc else { return doc }
        var out: [String: JSONValue] = [:]
        for f in fields {
            let parts = f.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            var value: JSONValue? = .object(o)
            for p in parts { if case .object(let d)? = value { value = d[p] } else { value = nil } }
            guard let value else { continue }
            out = insert(value, at: parts[...], into: out)
        }
        return .object(out)
    }

    private static func insert(_ value: JSONValue, at path: ArraySlice<String>, into o: [String: JSONValue]) -> [String: JSONValue] {
        var o = o
        guard let first = path.first else { return o }
        if path.count == 1 {
            o[first] = value
        } else {
            var inner: [String: JSONValue] = [:]
            if case .object(let existing)? = o[first] { inner = existing }
            o[first] = .object(insert(value, at: path.dropFirst(), into: inner))
        }
        return o
    }

    // MARK: - Indexes

    /// The Mango indexes of the database's `"language": "query"` design documents, in
    /// design-document then name order.
    func mangoIndexes(_ db: ServedDatabase) throws -> [MangoIndex] {
        try db.mangoIndexes()
    }

    /// `GET|POST /{db}/_index`, `POST /{db}/_index/_bulk_delete`,
    /// `DELETE /{db}/_index/{ddoc}/json/{name}`; any other path under `_index` is 404, as
    /// CouchDB answers it.
    func index(_ call: inout Call, _ db: ServedDatabase, _ rest: [String]) async throws -> Response {
        let method = call.request.method
        var parts = Array(rest.dropFirst())
        if parts == ["_bulk_delete"] {
            try allow(method, [.post])
            try requireAdmin(call)
            return try await bulkDeleteIndexes(&call, db)
        }
        if !parts.isEmpty {
            // `{ddoc}/{type}/{name}`, the ddoc with or without `_design/`.
            if parts.first == "_design", parts.count == 4 { parts = ["_design/" + parts[1]] + parts.dropFirst(2) }
            guard parts.count == 3 else { throw CouchError.notFound() }
            try allow(method, [.delete])
            try requireAdmin(call)
            guard parts[1] == "json" else { throw CouchError.notFound() }
            return try await deleteIndexes(db, ddoc: Self.designID(parts[0]), name: parts[2])
        }
        try allow(method, [.get, .head, .post])
        if method == .post {
            try requireAdmin(call)
            return try await createIndex(&call, db)
        }
        let list = [Self.allDocsIndex] + (try mangoIndexes(db).map(\.json))
        // CouchDB's `limit` (at least 1) and `skip` over the whole list, `_all_docs` first.
        func parameter(_ name: String) throws -> Int? {
            guard let text = call.query[name] else { return nil }
            guard let n = Int(text), name == "limit" ? n >= 1 : n >= 0 else {
                throw CouchError(.badRequest, "invalid_list_index_params", "Index parameter ranges: limit > 1, skip > 0")
            }
            return n
        }
        let skip = min(try parameter("skip") ?? 0, list.count)
        let limit = try parameter("limit") ?? list.count
        let page = list[skip...].prefix(limit)
        return try jsonResponse(["total_rows": .int(Int64(list.count)), "indexes": .array(Array(page))])
    }

    /// The most design documents one `_bulk_delete` names.
    static let maxBulkDeleteIndexes = 1000

    /// `POST /{db}/_index/_bulk_delete`: `{"docids": [ddoc, …], "w"?}` removes each design
    /// document's Mango indexes; answers `{"success": [{"id", "ok": true}], "fail": [{"id",
    /// "error"}]}`, each list in the reverse of the request's order as CouchDB gives them.
    private func bulkDeleteIndexes(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let body = try await jsonBody(&call, limit: bodyLimit(db))
        for key in body.keys where !["docids", "w"].contains(key) { throw CouchError.invalidKey(key) }
        try Self.writeQuorum(body["w"])
        guard case .array(let list)? = body["docids"], list.count <= Self.maxBulkDeleteIndexes else {
            throw CouchError(.badRequest, "invalid_bulk_docs",
                             "Bulk Delete requires an array of non-null docids (at most \(Self.maxBulkDeleteIndexes))")
        }
        var ddocs: [String] = []
        for item in list {
            guard case .string = item, let named = try Self.indexName(item) else {
                throw CouchError(.badRequest, "invalid_index_name", "Invalid index name: \((try? item.jsonText()) ?? "")")
            }
            ddocs.append(named.ddoc)
        }
        var success: [JSONValue] = [], fail: [JSONValue] = []
        for ddoc in ddocs {
            do {
                _ = try await deleteIndexes(db, ddoc: ddoc, name: nil)
                success.insert(["id": .string(ddoc), "ok": true], at: 0)
            } catch let e as CouchError where e.status == .notFound {
                fail.insert(["id": .string(ddoc), "error": "not_found"], at: 0)
            }
        }
        return try jsonResponse(["success": .array(success), "fail": .array(fail)])
    }

    /// CouchDB's write quorum `w`, which every client library sends: a positive integer,
    /// meaningless on one node.
    static func writeQuorum(_ value: JSONValue?) throws {
        guard let value else { return }
        guard case .int(let n) = value, n > 0 else {
            throw CouchError(.badRequest, "invalid_pos_integer", "\((try? value.jsonText()) ?? "") is not an integer greater than zero")
        }
    }

    /// A `POST /_index` body checked as CouchDB checks it (members, `w`, the type first, then
    /// the definition), and the index it asks for: `ddoc` and `name` default to the SHA-1 of the
    /// definition. `def` is the definition as sent.
    /// `partitioned`: as asked (nil: the database's default).
    static func requestedIndex(_ body: [String: JSONValue]) throws -> (index: MangoIndex, def: [String: JSONValue], partitioned: Bool?) {
        for key in body.keys where !["index", "ddoc", "name", "type", "w", "partitioned"].contains(key) {
            throw CouchError.invalidKey(key)
        }
        try writeQuorum(body["w"])
        // The type first, as CouchDB: a text or nouveau index needs a search service this
        // server does not have, which CouchDB without one answers with a 503.
        switch body["type"] {
        case nil, .string("json")?: break
        case .string(let t)? where t == "text" || t == "nouveau":
            throw CouchError(.serviceUnavailable, "required index service unavailable", t)
        case .string(let t)?: throw CouchError(.badRequest, "invalid_index", "Invalid type for index: \(t)")
        default: throw CouchError(.badRequest, "invalid_string", "Invalid string value: \((try? body["type"]?.jsonText()) ?? "")")
        }
        guard case .object(let def)? = body["index"] else { throw CouchError.badRequest("Missing required key: index") }
        for key in def.keys where !["fields", "partial_filter_selector"].contains(key) {
            throw CouchError(.badRequest, "invalid_index", "Invalid key \(key) in the index definition")
        }
        let fields = try MangoIndex.definedFields(def["fields"])
        var partial: JSONValue?
        if let given = def["partial_filter_selector"] {
            guard case .object(let o) = given else { throw CouchError(.badRequest, "invalid_selector", "partial_filter_selector must be a selector") }
            // Checked by compiling it, as a query would.
            do { _ = try MangoQuery.Selector(given) } catch {
                throw CouchError(.badRequest, "invalid_selector", error.message)
            }
            if !o.isEmpty { partial = given }
        }
        var partitioned: Bool?
        switch body["partitioned"] {
        case nil, .string("db_default")?: break
        case .bool(let b)?: partitioned = b
        case let v?: throw CouchError(.badRequest, "invalid_partitioned_value", "Invalid value for partitioned: \((try? v.jsonText()) ?? "")")
        }
        let digest = Insecure.SHA1.hash(data: Data(try JSONValue.object(def).jsonText().utf8)).map { String(format: "%02x", $0) }.joined()
        func text(_ key: String) throws -> String? {
            guard let v = body[key] else { return nil }
            guard case .string(let s) = v, !s.isEmpty, s.utf8.count <= 200, !s.contains("/") || s.hasPrefix("_design/") else {
                throw CouchError(.badRequest, "invalid_index", "\(key) must be a non-empty name")
            }
            return s
        }
        let index = MangoIndex(ddoc: designID(try text("ddoc") ?? digest), name: try text("name") ?? digest, fields: fields, partial: partial)
        return (index, def, partitioned)
    }

    private func createIndex(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        let (index, def, partitioned) = try Self.requestedIndex(try await jsonBody(&call, limit: bodyLimit(db)))
        let (ddoc, name, fields, partial) = (index.ddoc, index.name, index.fields, index.partial)
        if partitioned == true && !db.partitioned {
            throw CouchError(.badRequest, "invalid_design_doc", "partitioned option cannot be true in a non-partitioned database.")
        }
        let dbPartitioned = db.partitioned
        let view: JSONValue = ["map": ["fields": .object(Dictionary(uniqueKeysWithValues: fields.map { ($0.field, JSONValue.string($0.descending ? "desc" : "asc")) })),
                                       "partial_filter_selector": partial ?? .object([:])],
                               // The definition as sent (CouchDB keeps it so; `_index` lists it normalized).
                               "reduce": "_count", "options": ["def": .object(def)]]
        let result = try await db.write(as: .admin) { database -> String in
            let existing = try database.document(withID: ddoc)
            var props = existing?.toDictionary() ?? [:]
            if existing != nil, props["language"] != .string("query") {
                throw CouchError(.badRequest, "invalid_index", "\(ddoc) is not a design document of Mango indexes (its language is not \"query\")")
            }
            // One design document's indexes are all partitioned or all global (CouchDB's
            // `set_ddoc_partitioned`): a new one may set its option, an existing one must agree.
            if let partitioned {
                if existing != nil {
                    guard ViewDefinition.partitioned(props, database: dbPartitioned) == partitioned else {
                        throw CouchError(.badRequest, "invalid_partitioned_option",
                                         "Requested partitioned option does not match existing value on design document \(ddoc)")
                    }
                } else {
                    props["options"] = ["partitioned": .bool(partitioned)]
                }
            }
            var views = props["views"]?.objectValue ?? [:]
            if views[name] == view { return "exists" }
            views[name] = view
            props["language"] = "query"
            props["views"] = .object(views)
            let doc = existing.map { $0.toMutable() } ?? MutableDocument(id: ddoc)
            doc.setData(props)
            try database.saveDocument(doc)
            return "created"
        }
        try await db.syncMangoIndexes()
        return try jsonResponse(["result": .string(result), "id": .string(ddoc), "name": .string(name)])
    }

    /// Removes index `name` of design document `ddoc` (every one of its indexes when `name` is
    /// nil), and the design document with its last index; 404 when there is none.
    private func deleteIndexes(_ db: ServedDatabase, ddoc: String, name: String?) async throws -> Response {
        try await db.write(as: .admin) { database in
            guard let existing = try database.document(withID: ddoc), existing.toDictionary()["language"] == .string("query"),
                  var views = existing.toDictionary()["views"]?.objectValue, name.map({ views[$0] != nil }) ?? !views.isEmpty else {
                throw CouchError.notFound()
            }
            if let name { views[name] = nil } else { views = [:] }
            if views.isEmpty {
                try database.deleteDocument(existing)
            } else {
                let doc = existing.toMutable()
                doc.setValue(.object(views), forKey: "views")
                try database.saveDocument(doc)
            }
        }
        try await db.syncMangoIndexes()
        return try jsonResponse(["ok": true])
    }
}
