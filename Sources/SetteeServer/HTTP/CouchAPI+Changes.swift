import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import SetteeReplicator
@_spi(Replication) @_spi(Server) import Settee
import Synchronization

/// What a `_changes` request asks for.
struct ChangesOptions: Sendable {
    var since: FeedPosition
    /// A user's feed (its channels); nil: every document (the admin port, or a user reading `*`
    /// without a channel filter).
    var scope: FeedScope?
    var limit: Int?
    var descending: Bool
    var allLeaves: Bool
    var includeDocs: Bool
    var conflicts: Bool
    /// With include_docs: attachments inline (`attachments=true`), not as stubs.
    var attachments: Bool = false
    var filter: ChangesFilter?
    var feed: String
    var heartbeat: Duration?
    var timeout: Duration
    /// The longest a feed kept open by heartbeats lasts (`changesDuration`); nil: no bound.
    var duration: Duration?
}

/// Which rows a filtered feed keeps.
enum ChangesFilter: Sendable {
    /// `filter=_doc_ids`: these documents.
    case documentIDs(Set<String>)
    /// `filter=<name>`: a filter function the app registered, with the request's other query
    /// parameters (as strings, CouchDB's `req.query`).
    case function(PeerFilterFunction, [String: JSONValue])
    /// `filter=ddoc/name`: a design document's filter function, with CouchDB's `req` (its
    /// `query` and `userCtx`) as JSON.
    case design(FilterFunction, request: String)
    /// `filter=_selector`: the documents a Mango selector (the POST body's `selector`) matches.
    case selector(Query)
}

/// Whose channels a feed shows.
struct FeedScope: Sendable {
    var user: String
    /// `filter=sync_gateway/bychannel&channels=…`: these of the user's channels only.
    var requested: Set<String>?
}

/// What makes two feeds' next rows the same bytes.
struct FeedKey: Hashable, Sendable {
    var since: UInt64
    var upTo: UInt64
    var allLeaves: Bool
    var includeDocs: Bool
    var conflicts: Bool
    var attachments: Bool
    var eventSource: Bool
}

/// A wake-up for a waiting feed: fired by the database's change listener, awaited with a time
/// limit. It holds at most one pending wake-up, so a burst of commits costs one read. A wait is
/// one continuation and one timer (no task per wait): a thousand idle feeds cost a thousand
/// suspended continuations and nothing else.
final class ChangeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: (continuation: CheckedContinuation<Bool, Never>, id: UInt64)?
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())

    func fire() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w.continuation
            }
            s.pending = true
            return nil
        }
        waiter?.resume(returning: true)
    }

    /// Ends the wait `id` (timed out or cancelled) if it is still the one waiting.
    private func expire(_ id: UInt64?) {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard let w = s.waiter, id == nil || w.id == id else { return nil }
            s.waiter = nil
            return w.continuation
        }
        waiter?.resume(returning: false)
    }

    /// True when fired (now or meanwhile), false when `duration` passed first or the task was
    /// cancelled.
    func wait(for duration: Duration) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let id = state.withLock { s -> UInt64? in
                    if s.pending {
                        s.pending = false
                        return nil
                    }
                    s.nextID &+= 1
                    s.waiter = (c, s.nextID)
                    return s.nextID
                }
                guard let id else {
                    c.resume(returning: true)
                    return
                }
                // At most a day: no wait here is longer, and the arithmetic cannot overflow.
                let (seconds, attoseconds) = duration.components
                let nanoseconds = max(0, Int(min(max(seconds, 0), 86_400)) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
                DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.expire(id) }
            }
        } onCancel: {
            expire(nil)
        }
    }
}

extension CouchAPI {
    // MARK: - _changes

    func changes(_ call: inout Call, _ db: ServedDatabase) async throws -> Response {
        var params = call.query
        var docIDs: Set<String>?
        var selector: JSONValue?
        if call.request.method == .post {
            let body = try await jsonBody(&call, limit: bodyLimit(db))
            try Self.bodyOptions(body, into: &params, except: ["doc_ids", "selector"])
            if let v = body["doc_ids"] { docIDs = try Self.stringSet(v, "doc_ids") }
            selector = body["selector"]
        }
        let q = Call(request: call.request, path: call.path, query: params, principal: call.principal, started: call.started)
        var filter = docIDs.map(ChangesFilter.documentIDs)
        var requested: Set<String>?
        if let name = params["filter"] {
            if name == "sync_gateway/bychannel" {
                guard let list = params["channels"], !list.isEmpty else {
                    throw CouchError.badRequest("filter=sync_gateway/bychannel needs channels")
                }
                requested = Set(list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            } else if name == "_doc_ids" {
                if docIDs == nil, let v = try jsonParameter(q, "doc_ids") { docIDs = try Self.stringSet(v, "doc_ids") }
                guard let docIDs else { throw CouchError.badRequest("filter=_doc_ids needs doc_ids") }
                filter = .documentIDs(docIDs)
            } else if name == "_selector" {
                guard case .object? = selector, let selector else {
                    throw CouchError.badRequest("Selector must be specified in POST payload")
                }
                do {
                    filter = .selector(try db.database.createQuery(mango: MangoQuery(selector: try MangoQuery.Selector(selector))))
                } catch let e as SetteeError {
                    throw CouchError(.badRequest, "invalid_selector", e.message)
                }
            } else if let function = db.filters.withLock({ $0[name] }) {
                let reserved: Set<String> = ["filter", "since", "feed", "style", "limit", "descending", "include_docs", "conflicts",
                                             "attachments", "heartbeat", "timeout", "doc_ids"]
                filter = .function(function, params.filter { !reserved.contains($0.key) }.mapValues(JSONValue.string))
            } else if let slash = name.firstIndex(of: "/") {
                let ddoc = "_design/" + name[..<slash]
                let fname = String(name[name.index(after: slash)...])
                guard let function = db.routing.design.withLock({ $0[ddoc]?.filters[fname] }) else {
                    throw CouchError.notFound("missing json key: \(fname)")
                }
                let reserved: Set<String> = ["filter", "since", "feed", "style", "limit", "descending", "include_docs", "conflicts",
                                             "attachments", "heartbeat", "timeout", "doc_ids"]
                let query = JSONValue.object(params.filter { !reserved.contains($0.key) }.mapValues(JSONValue.string))
                let writer: Writer? = try call.principal.name.map { n in
                    let a = try db.access(for: n)
                    return Writer(name: n, channels: Set(a.channels.keys), roles: Set(a.roles.keys))
                }
                let req: JSONValue = ["query": query, "userCtx": RoutingState.userContext(writer, database: db.name)]
                filter = .design(function, request: try req.jsonText())
            } else {
                throw CouchError.badRequest("Unknown filter \"\(name)\"; this server knows _doc_ids, _selector, sync_gateway/bychannel, design documents' filters\(db.filters.withLock { $0.keys.sorted() }.map { ", " + $0 }.joined())")
            }
        }
        // A user's feed shows its channels; `*` without a channel filter shows everything.
        var scope: FeedScope?
        if case .user(let name) = call.principal {
            let readsAll = try db.access(for: name).readsAll
            if requested != nil || !readsAll { scope = FeedScope(user: name, requested: requested) }
        } else if let requested {
            scope = FeedScope(user: "", requested: requested)
        }
        let database = db.database
        var feed = params["feed"] ?? "normal"
        // CouchDB's sugar for continuous.
        if feed == "live" { feed = "continuous" }
        // Where an EventSource reconnects from: its `Last-Event-ID` header (a browser sends it),
        // else a `last-event-id` parameter, rather than `since`.
        let lastEventID = params["last-event-id"] ?? params["Last-Event-ID"]
        let resumeFrom = feed == "eventsource" ? call.request.headers[HTTPField.Name("Last-Event-ID")!] ?? lastEventID : lastEventID
        let since: FeedPosition
        switch resumeFrom ?? params["since"] {
        case nil: since = FeedPosition(0)
        case "now"?: since = FeedPosition(try database.lastSequence)
        case let text?:
            guard let p = FeedPosition(parsing: text) else {
                throw CouchError(.badRequest, "bad_request", "Malformed sequence supplied in 'since' parameter.")
            }
            since = p
        }
        guard ["normal", "longpoll", "continuous", "eventsource"].contains(feed) else {
            throw CouchError.badRequest("Supported `feed` types: normal, continuous, live, longpoll, eventsource")
        }
        let style = params["style"] ?? "main_only"
        guard style == "main_only" || style == "all_docs" else { throw CouchError.badRequest("Supported `style` values: main_only, all_docs") }
        // Both bounded before they become durations, by `changesTimeout` (an hour unless
        // configured); a heartbeat is at least a second (or the bound, when that is less).
        let longest = server.configuration.changesTimeout
        let heartbeat = try Self.heartbeat(params["heartbeat"]).map { Duration.milliseconds(min(max(1000, $0), longest)) }
        let timeout = Duration.milliseconds(min(try integer(q, "timeout") ?? 60_000, longest))
        let options = ChangesOptions(since: since, scope: scope, limit: try integer(q, "limit"), descending: try flag(q, "descending"),
                                     allLeaves: style == "all_docs", includeDocs: try flag(q, "include_docs"),
                                     conflicts: try flag(q, "conflicts"),
                                     attachments: try flag(q, "attachments"), filter: filter, feed: feed,
                                     heartbeat: heartbeat, timeout: timeout,
                                     duration: server.configuration.changesDuration.map { Duration.milliseconds($0) })
        if feed == "normal" || (feed == "longpoll" && options.descending) {
            return try normalFeed(db, options)
        }
        return try streamingFeed(db, options)
    }

    /// The `heartbeat` parameter in milliseconds: `true` is the default interval (60 s, as
    /// CouchDB's `changes_timeout`); else a positive integer (400 `bad_request` otherwise, with
    /// CouchDB's reasons).
    static func heartbeat(_ text: String?) throws -> Int? {
        guard let text else { return nil }
        if text.lowercased() == "true" { return 60_000 }
        guard let n = Int(text) else {
            throw CouchError.badRequest("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
        }
        guard n > 0 else { throw CouchError.badRequest("The heartbeat value should be a positive integer (in milliseconds).") }
        return n
    }

    /// A `normal` or `longpoll` feed's body as CouchDB writes it: one result per line (clients
    /// such as python-cloudant read it line by line), then `last_seq` and `pending`.
    static func changesBody(_ rows: [JSONValue], last: JSONValue, pending: Int) throws -> [UInt8] {
        var out = Array("{\"results\":[\n".utf8)
        for (i, row) in rows.enumerated() {
            if i > 0 { out += Array(",\n".utf8) }
            out += try row.responseBytes()
        }
        out += Array("\n],\n\"last_seq\":".utf8) + (try last.jsonBytes()) + Array(",\"pending\":\(pending)}\n".utf8)
        return out
    }

    /// A JSON array of strings (`keys`, `doc_ids`, a revision list), or 400 naming it.
    static func strings(_ v: JSONValue, _ name: String) throws -> [String] {
        guard case .array(let a) = v else { throw CouchError.badRequest("\(name) must be a JSON array of strings") }
        return try a.map { x in
            guard case .string(let s) = x else { throw CouchError.badRequest("\(name) must be a JSON array of strings") }
            return s
        }
    }

    static func stringSet(_ v: JSONValue, _ name: String) throws -> Set<String> { Set(try strings(v, name)) }

    /// Options sent in a POST body, as the query parameters they stand for: JSON there, text in
    /// a query (a string option is its text; `startkey` and the like stay JSON).
    static func bodyOptions(_ body: [String: JSONValue], into params: inout [String: String], except: Set<String>,
                            jsonValued: (String) -> Bool = { _ in false }) throws {
        for (k, v) in body where !except.contains(k) {
            if case .string(let s) = v, !jsonValued(k) { params[k] = s } else { params[k] = try v.jsonText() }
        }
    }

    /// The rows after `since` (at most `limit`), and the position to continue from.
    func rows(_ db: ServedDatabase, _ o: ChangesOptions, since: FeedPosition, limit: Int?) throws -> (rows: [JSONValue], last: FeedPosition, more: Bool) {
        let database = db.database
        var entries: [FeedEntry]
        var last: FeedPosition
        var more = false
        let readLimit = o.filter == nil ? limit : nil
        if let scope = o.scope {
            let access = scope.user.isEmpty ? UserAccess(channels: ["*": 0]) : try db.access(for: scope.user)
            (entries, more, last) = try db.channelEntries(access: access, requested: scope.requested, since: since,
                                                          limit: readLimit)
        } else {
            let from = since.sequencesDone
            var changes: [ChangeEntry]
            if o.descending {
                changes = try database.changes(since: from).reversed()
            } else {
                changes = try database.changes(since: from, limit: readLimit.map(oneMore))
            }
            if let readLimit, changes.count > readLimit {
                changes = Array(changes.prefix(readLimit))
                more = true
            }
            entries = changes.map { e in
                FeedEntry(position: FeedPosition(e.sequence), documentID: e.documentID, revisionID: e.revisionID, isDeleted: e.isDeleted,
                          isConflicted: e.isConflicted, otherLeaves: e.otherLeafRevisionIDs, removed: nil)
            }
            if o.descending {
                last = entries.last?.position ?? FeedPosition(from)
            } else if more || o.filter != nil {
                let end = try database.lastSequence
                last = entries.last?.position ?? FeedPosition(max(from, end))
            } else {
                last = entries.last?.position ?? FeedPosition(from)
            }
        }
        let unfiltered = entries.last?.position
        switch o.filter {
        case .documentIDs(let ids)?:
            entries = entries.filter { ids.contains($0.documentID) }
        case .function(let function, let parameters)?:
            // The current revision, tombstones included (one that kept its properties can pass).
            entries = try entries.filter { e in
                if e.removed != nil { return true }
                guard let doc = try database.document(withID: e.documentID, revisionID: e.revisionID) else { return false }
                return function(doc, parameters)
            }
        case .design(let function, let request)?:
            entries = try entries.filter { e in
                if e.removed != nil { return true }
                guard let doc = try database.document(withID: e.documentID, revisionID: e.revisionID) else { return false }
                let json = try RoutingState.json(doc)
                do {
                    return try function.run(doc: json, req: request)
                } catch {
                    throw CouchError(.internalServerError, "filter_error", "\(error)")
                }
            }
        case .selector(let query)?:
            entries = try entries.filter { e in
                if e.removed != nil { return true }
                guard let doc = try database.document(withID: e.documentID, revisionID: e.revisionID) else { return false }
                do {
                    return try query.matches(id: doc.id, properties: doc.toDictionary(), isDeleted: doc.isDeleted)
                } catch let error as SetteeError {
                    throw CouchError(.badRequest, "invalid_selector", error.message)
                }
            }
        case nil:
            break
        }
        if let limit, entries.count > limit {
            entries = Array(entries.prefix(limit))
            more = true
            last = entries.last?.position ?? last
        } else if o.filter != nil, let unfiltered, !more {
            last = max(last, unfiltered)
        }
        var rows: [JSONValue] = []
        rows.reserveCapacity(entries.count)
        for e in entries {
            var row: [String: JSONValue] = [
                "seq": e.position.json,
                "id": .string(e.documentID),
                "changes": .array(([e.revisionID] + (o.allLeaves ? e.otherLeaves : [])).map { ["rev": .string($0)] }),
            ]
            if e.isDeleted { row["deleted"] = true }
            if let removed = e.removed { row["removed"] = .array(removed.sorted().map(JSONValue.string)) }
            if o.includeDocs {
                db.counters.read()
                Self.include(into: &row) { try feedDocument(db, o, e) }
            }
            rows.append(.object(row))
        }
        if !o.descending { last = max(last, since) }
        return (rows, last, more)
    }

    /// A feed row's `doc` (include_docs): the revision with CouchDB's members, `_removed` for one
    /// the user lost, null for one no longer stored.
    private func feedDocument(_ db: ServedDatabase, _ o: ChangesOptions, _ e: FeedEntry) throws -> JSONValue {
        let database = db.database
        if e.removed != nil {
            return ["_id": .string(e.documentID), "_rev": .string(e.revisionID), "_removed": true]
        }
        guard let r = try database.revision(withID: e.documentID, revisionID: e.revisionID) else { return .null }
        var doc = try r.properties
        if case .object(let stored)? = doc["_attachments"] {
            doc["_attachments"] = try wireAttachments(stored, db, inlineAfter: o.attachments ? 0 : nil)
        }
        doc["_id"] = .string(e.documentID)
        doc["_rev"] = .string(e.revisionID)
        if e.isDeleted { doc["_deleted"] = true }
        if o.conflicts, e.isConflicted {
            // The entry's other leaves: for a user's feed, those it may know of.
            let tree = try database.revisionTree(withID: e.documentID)
            let others = e.otherLeaves
            let live = tree?.revisions.filter { !$0.isDeleted }.map(\.revisionID) ?? []
            doc["_conflicts"] = .array(others.filter { $0 != e.revisionID && live.contains($0) }.map(JSONValue.string))
        }
        return .object(doc)
    }

    /// A feed's next rows as the bytes it writes. Feeds that wake for the same commit with the
    /// same position and options share one read and one encoding: a thousand feeds cost one read
    /// of the changes, not a thousand.
    func encodedRows(_ db: ServedDatabase, _ o: ChangesOptions, since: FeedPosition, limit: Int?) throws -> (bytes: [UInt8], count: Int, last: FeedPosition) {
        let shareable = limit == nil && o.filter == nil && !o.descending && o.scope == nil && since.isPlain
        let key = FeedKey(since: since.major, upTo: try db.database.lastSequence, allLeaves: o.allLeaves, includeDocs: o.includeDocs,
                          conflicts: o.conflicts, attachments: o.attachments, eventSource: o.feed == "eventsource")
        if shareable, let hit = db.feedCache.withLock({ $0[key] }) { return hit }
        let (rows, last, _) = try self.rows(db, o, since: since, limit: limit)
        var out: [UInt8] = []
        for row in rows {
            if o.feed == "eventsource" {
                let seq = row.objectValue?["seq"].flatMap { try? $0.jsonText() } ?? ""
                out += Array("data: ".utf8) + (try row.responseBytes()) + Array("\nid: \(seq)\n\n".utf8)
            } else {
                out += try row.responseBytes() + [0x0A]
            }
        }
        let result = (out, rows.count, last)
        // Only a read that reached the sequence it was keyed by is shared (a commit meanwhile
        // would make it hold more than the key says).
        if shareable, last <= FeedPosition(key.upTo) {
            db.feedCache.withLock { cache in
                if cache.count >= 16 { cache.removeAll() }
                cache[key] = result
            }
        }
        return result
    }

    private func normalFeed(_ db: ServedDatabase, _ o: ChangesOptions) throws -> Response {
        let (rows, last, more) = try self.rows(db, o, since: o.since, limit: o.limit)
        // Sync Gateway does not count what remains of a user's feed; 1 says "ask again".
        let pending = more && !o.descending ? (o.scope == nil ? try db.database.changes(since: last.sequencesDone).count : 1) : 0
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: try Self.changesBody(rows, last: last.json, pending: pending))))
    }

    /// `longpoll`, `continuous` and `eventsource`: written as changes commit. The feed waits on
    /// the database's change listener (no thread, no polling), writes a heartbeat newline when
    /// asked, and ends at its timeout (with `last_seq`), when the client goes, or when the server
    /// shuts down.
    private func streamingFeed(_ db: ServedDatabase, _ o: ChangesOptions) throws -> Response {
        let signal = ChangeSignal()
        // Subscribed before the first read, so a commit in between is not missed.
        let token = db.database.addChangeListener { _ in signal.fire() }
        let contentType = o.feed == "eventsource" ? "text/event-stream" : "application/json"
        let logChanges = server.logKeys.contains("Changes")
        let logger = server.logger
        let body = ResponseBody { writer in
            let registration = db.registerFeed(signal, user: o.scope?.user)
            defer {
                token.remove()
                if let registration { db.unregisterFeed(registration) }
            }
            var since = o.since
            var written = 0
            let clock = ContinuousClock()
            var deadline = clock.now + o.timeout
            let end = o.duration.map { clock.now + $0 }
            let stopping = Mutex(registration == nil)
            // The database closing (deleted, or the server stopping) ends the feed as a timeout
            // does: its answer is finished properly, never cut.
            func closing() -> Bool { stopping.withLock { $0 } || db.isClosing }
            func read<T>(_ body: () throws -> T) throws -> T? {
                do { return try body() } catch let e as SetteeError where e.code == .notOpen { return nil }
            }
            try await withGracefulShutdownHandler {
                if o.feed == "longpoll" {
                    var rows: [JSONValue] = []
                    var last = since
                    while true {
                        guard let page = try read({ try self.rows(db, o, since: since, limit: o.limit) }) else { break }
                        (rows, last, _) = page
                        if !rows.isEmpty || closing() { break }
                        let wait = min(o.heartbeat ?? o.timeout, deadline - clock.now)
                        if wait <= .zero { break }
                        if !(await signal.wait(for: wait)), o.heartbeat != nil, clock.now < deadline {
                            try await writer.write(ByteBuffer(string: "\n"))
                        }
                        if clock.now >= deadline { break }
                    }
                    try await writer.write(ByteBuffer(bytes: try Self.changesBody(rows, last: last.json, pending: 0)))
                    return
                }
                while !closing() {
                    let remaining = o.limit.map { $0 - written }
                    guard let (out, count, last) = try read({ try self.encodedRows(db, o, since: since, limit: remaining) }) else { break }
                    if count > 0 {
                        try await writer.write(ByteBuffer(bytes: out))
                        written += count
                        deadline = clock.now + o.timeout
                        if logChanges { logger.info("Changes: \(count) rows to a \(o.feed) feed of \(db.name)") }
                    }
                    since = last
                    if let limit = o.limit, written >= limit { break }
                    var wait = o.heartbeat ?? (deadline - clock.now)
                    if let end { wait = min(wait, end - clock.now) }
                    if wait <= .zero { break }
                    if !(await signal.wait(for: wait)) {
                        if o.heartbeat != nil {
                            try await writer.write(ByteBuffer(string: o.feed == "eventsource" ? "event: heartbeat\ndata: \n\n" : "\n"))
                        } else {
                            break   // timed out
                        }
                    }
                }
                if o.feed == "continuous" {
                    try await writer.write(ByteBuffer(bytes: try JSONValue.object(["last_seq": since.json, "pending": 0]).jsonBytes() + [0x0A]))
                }
            } onGracefulShutdown: {
                stopping.withLock { $0 = true }
                signal.fire()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: contentType, .cacheControl: "must-revalidate"], body: body)
    }
}
