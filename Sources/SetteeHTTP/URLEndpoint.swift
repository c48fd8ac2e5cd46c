import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
@_spi(Replication) import Settee
@_spi(Replication) import SetteeReplicator
import Synchronization

/// A remote database on a CouchDB-compatible server (`settee serve`, Sync Gateway, CouchDB 3.x),
/// replicated over HTTP(S) with the CouchDB replication protocol: the target of a replicator.
///
/// ```swift
/// let target = URLEndpoint(url: URL(string: "http://localhost:4984/todo")!)
/// var config = ReplicatorConfiguration(database: db, target: target)
/// config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
/// config.continuous = true
/// let replicator = Replicator(config: config)
/// replicator.start()
/// ```
///
/// The replicator's calls map to requests as `Formats/replication.md` lists them: `GET /db/`,
/// `_changes?style=all_docs` (a long poll with heartbeats while a continuous replication idles),
/// `_revs_diff`, `_bulk_get?revs=true&latest=true` (per document `GET …?open_revs=[…]` as
/// `multipart/mixed` for a server without it), `_bulk_docs` with `new_edits=false`, and
/// `_local/…` checkpoints. Attachments go both ways as CouchDB's `_attachments` (with `md5-`
/// digests); those older than what the receiver has are sent as stubs. Blobs a document holds
/// outside `_attachments` travel as attachments named `blob_` and the property's JSON pointer
/// (`blob_/avatar`), as Couchbase Lite sends them, and are folded back when pulled.
///
/// Credentials in the URL (`http://user:password@host/db`) are used as Basic credentials when the
/// configuration has no authenticator.
///
/// - Note: A value type; safe to use from several tasks at once (the replicator's push and pull
///   share it). Copies share their connection pool.
public struct URLEndpoint: ReplicationPeer {
    /// The database's URL.
    ///
    /// ```swift
    /// print(endpoint.url)   // http://localhost:4984/todo
    /// ```
    public let url: URL

    let authenticator: (any Authenticator)?
    let headers: [String: String]
    let pinnedServerCertificate: Data?
    let heartbeat: Duration
    let state: EndpointState

    /// An endpoint for the database at `url` (`http` or `https`).
    ///
    /// ```swift
    /// let endpoint = URLEndpoint(url: URL(string: "https://sync.example.com/db")!)
    /// ```
    public init(url: URL) {
        self.init(url: url, authenticator: nil, headers: [:], pinnedServerCertificate: nil, heartbeat: .seconds(30))
    }

    init(url: URL, authenticator: (any Authenticator)?, headers: [String: String], pinnedServerCertificate: Data?,
         heartbeat: Duration) {
        self.url = url
        self.authenticator = authenticator
        self.headers = headers
        self.pinnedServerCertificate = pinnedServerCertificate
        self.heartbeat = heartbeat
        self.state = EndpointState()
    }

    /// This endpoint with the configuration's authenticator, headers, pinned certificate and
    /// heartbeat.
    ///
    /// ```swift
    /// let remote = endpoint.configured(for: config)
    /// ```
    public func configured(for configuration: ReplicatorConfiguration) -> any ReplicationPeer {
        URLEndpoint(url: url, authenticator: configuration.authenticator, headers: configuration.headers,
                    pinnedServerCertificate: configuration.pinnedServerCertificate, heartbeat: configuration.heartbeat)
    }

    /// The endpoint of Sync Gateway 3's keyspace `{db}.{scope}.{collection}` on the same
    /// server, with the same credentials: the URL's last path segment (the database) becomes
    /// the keyspace.
    ///
    /// ```swift
    /// let tasks = try URLEndpoint(url: URL(string: "http://localhost:4984/todo")!).peer(forCollection: "tasks", scope: "store")
    /// // http://localhost:4984/todo.store.tasks
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` when the URL names no database or
    ///   already names a keyspace.
    public func peer(forCollection name: String, scope: String) throws -> any ReplicationPeer {
        if name == Collection.defaultCollectionName && scope == Scope.defaultScopeName { return self }
        return URLEndpoint(url: try Self.keyspaceURL(database: url, scope: scope, collection: name), authenticator: authenticator,
                           headers: headers, pinnedServerCertificate: pinnedServerCertificate, heartbeat: heartbeat)
    }

    /// The URL of Sync Gateway 3's keyspace `{db}.{scope}.{collection}` of the database at
    /// `url` (its last path segment); `url` itself for the default collection.
    ///
    /// ```swift
    /// let tasks = try URLEndpoint.keyspaceURL(database: URL(string: "http://localhost:4984/todo")!, scope: "store", collection: "tasks")
    /// // http://localhost:4984/todo.store.tasks
    /// ```
    ///
    /// - Throws: ``ReplicatorError/Code/invalidRequest`` when the URL names no database or
    ///   already names a keyspace.
    public static func keyspaceURL(database url: URL, scope: String, collection name: String) throws -> URL {
        if name == Collection.defaultCollectionName && scope == Scope.defaultScopeName { return url }
        let database = url.lastPathComponent
        guard !database.isEmpty, database != "/", !database.contains(".") else {
            throw ReplicatorError(.invalidRequest, "\(url.absoluteString) names no database whose collection \(scope).\(name) could be reached")
        }
        return url.deletingLastPathComponent().appendingPathComponent(database + "." + scope + "." + name)
    }

    /// The URL without credentials, query or trailing slash: the same database gives the same
    /// string, so checkpoints are found again.
    ///
    /// ```swift
    /// print(endpoint.identifier)   // http://localhost:4984/todo
    /// ```
    public var identifier: String {
        (try? transport())?.base ?? url.absoluteString
    }

    func transport() throws -> Transport {
        try state.transport {
            try Transport(url: url, authenticator: authenticator, headers: headers, pinnedCertificate: pinnedServerCertificate)
        }
    }

    // MARK: - Database and changes

    /// `GET /db/`: the last sequence (an integer, or CouchDB's opaque string) and the document count.
    /// The first call also reads the server's welcome (`GET /`), as CouchDB's replicator does: a
    /// server that answers it with JSON but without `couchdb` is not one to replicate with.
    ///
    /// ```swift
    /// let info = try await endpoint.info()
    /// ```
    ///
    /// - Throws: ``ReplicatorError`` `remoteDatabaseNotFound` (404), `authenticationFailed`
    ///   (401, 403), `unreachable` (network, 5xx, 429).
    public func info() async throws -> PeerInfo {
        let t = try transport()
        if !state.welcomed {
            let request = t.request(.GET, "", atRoot: true)
            let reply = try await t.send(request)
            if reply.status == 200, let o = try? reply.json.objectValue, o["couchdb"] == nil {
                throw ReplicatorError(.peerFailed, "\(t.root) does not answer as a CouchDB-compatible server (no \"couchdb\" in its welcome)")
            }
            state.welcomed = true
        }
        let o = try await t.json(t.request(.GET, "")).objectValue ?? [:]
        guard let seq = o["update_seq"].flatMap(ReplicationSequence.init(json:)) else {
            throw ReplicatorError(.peerFailed, "\(t.base)/ answered without an update_seq: not a CouchDB-compatible database")
        }
        return PeerInfo(uuid: o["uuid"]?.stringValue, lastSequence: seq,
                        documentCount: UInt64(max(0, o["doc_count"]?.int64Value ?? 0)))
    }

    /// `_changes?style=all_docs&since=…&limit=…` with the request's filter: `filter=_doc_ids`
    /// (POSTed), `filter=sync_gateway/bychannel&channels=…`, or a named filter with its
    /// parameters as query parameters (strings as they are, other values as JSON).
    ///
    /// ```swift
    /// let page = try await endpoint.changes(ChangesRequest(since: .zero, limit: 500))
    /// ```
    public func changes(_ request: ChangesRequest) async throws -> ChangesPage {
        let t = try transport()
        let limit = max(1, request.limit)
        var query: [(String, String)] = [("style", "all_docs"), ("since", request.since.description), ("limit", String(limit))]
        var body: JSONValue?
        if let name = request.filterName {
            query.append(("filter", name))
            for (k, v) in request.filterParameters.sorted(by: { $0.key < $1.key }) {
                query.append((k, v.stringValue ?? ((try? v.jsonText()) ?? "null")))
            }
            if let channels = request.channels { query.append(("channels", channels.joined(separator: ","))) }
        } else if let channels = request.channels {
            query += [("filter", "sync_gateway/bychannel"), ("channels", channels.joined(separator: ","))]
        }
        if let ids = request.documentIDs {
            query.append(("filter", "_doc_ids"))
            body = ["doc_ids": .array(ids.map(JSONValue.string))]
        }
        let o = try await t.json(t.request(body == nil ? .GET : .POST, "_changes", query: query, json: body)).objectValue ?? [:]
        guard case .array(let results)? = o["results"], let last = o["last_seq"].flatMap(ReplicationSequence.init(json:)) else {
            throw ReplicatorError(.peerFailed, "\(t.base)/_changes answered without results and last_seq")
        }
        var rows: [PeerChange] = []
        rows.reserveCapacity(results.count)
        for case .object(let row) in results {
            // Sync Gateway's `_user/…` rows and rows without revisions say nothing to replicate.
            guard case .string(let id)? = row["id"], !id.isEmpty, !id.hasPrefix("_user/"),
                  let seq = row["seq"].flatMap(ReplicationSequence.init(json:)),
                  case .array(let changes)? = row["changes"] else { continue }
            let revs = changes.compactMap { $0.objectValue?["rev"]?.stringValue }
            guard let current = revs.first else { continue }
            // `"removed": [channels]` (Sync Gateway): the user lost access to the document.
            let removed = row["removed"]?.arrayValue.map { !$0.isEmpty } ?? false
            rows.append(PeerChange(sequence: seq, documentID: id, revisionID: current, isDeleted: row["deleted"] == true,
                                   leafRevisionIDs: revs, isRemoved: removed))
        }
        let reachedEnd = o["pending"]?.int64Value.map { $0 == 0 } ?? (results.count < limit)
        return ChangesPage(changes: rows, lastSequence: last, reachedEnd: reachedEnd)
    }

    /// A long poll (`_changes?feed=longpoll&since=…&heartbeat=…`), repeated until the feed has
    /// something after `sequence`. A feed that sends nothing, not even its heartbeat, for twice
    /// the heartbeat is dropped: `unreachable`, and the replicator starts again from its
    /// checkpoint.
    ///
    /// ```swift
    /// try await endpoint.waitForChanges(after: page.lastSequence)
    /// ```
    public func waitForChanges(after sequence: ReplicationSequence) async throws {
        let t = try transport()
        let beat = max(1, Int(heartbeat.components.seconds))
        while true {
            try Task.checkCancellation()
            let request = t.request(.GET, "_changes", query: [
                ("feed", "longpoll"), ("since", sequence.description), ("limit", "1"), ("style", "all_docs"),
                ("heartbeat", String(beat * 1000)), ("timeout", String(beat * 1000 * 10)),
            ])
            let reply = try await t.sendWatched(request, silence: .seconds(beat * 2))
            guard reply.status == 200 else { throw t.failure(reply, request) }
            let o = try reply.json.objectValue ?? [:]
            if let results = o["results"]?.arrayValue, !results.isEmpty { return }
            if let last = o["last_seq"].flatMap(ReplicationSequence.init(json:)), last != sequence { return }
        }
    }

    // MARK: - Revisions

    /// `POST /db/_revs_diff`. The `possible_ancestors` it reports are remembered for the
    /// insertion that follows: attachments they already hold are sent as stubs.
    ///
    /// ```swift
    /// let diff = try await endpoint.revsDiff(["doc": ["2-877"]])
    /// ```
    @_spi(Replication)
    public func revsDiff(_ revisions: [String: [String]]) async throws -> [String: RevsDiffResult] {
        let t = try transport()
        let body = JSONValue.object(revisions.mapValues { .array($0.map(JSONValue.string)) })
        let o = try await t.json(t.request(.POST, "_revs_diff", json: body)).objectValue ?? [:]
        var out: [String: RevsDiffResult] = [:]
        for (id, v) in o {
            guard case .object(let r) = v else { continue }
            let missing = r["missing"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard !missing.isEmpty else { continue }
            let ancestors = r["possible_ancestors"]?.arrayValue?.compactMap(\.stringValue) ?? []
            out[id] = RevsDiffResult(missing: missing, possibleAncestors: ancestors)
        }
        state.rememberAncestors(out.mapValues(\.possibleAncestors))
        return out
    }

    /// The revisions with their histories: `POST /db/_bulk_get?revs=true&latest=true` (attachments
    /// as stubs), then each attachment newer than the document's known ancestors streamed with
    /// `GET /db/{id}/{name}?rev=…` (to a temporary file when over 1 MiB: memory stays bounded
    /// whatever their size), as CouchDB's replicator fetches documents with attachments apart. A
    /// server that has no `_bulk_get` (404, 405, 400) is asked per document with
    /// `GET …?open_revs=[…]` as `multipart/mixed`. The attachments' content is kept for
    /// ``blob(withDigest:)`` until the next call.
    ///
    /// ```swift
    /// let revs = try await endpoint.revisions([RevisionRequest(documentID: "doc", revisionIDs: ["2-877"])])
    /// ```
    @_spi(Replication)
    public func revisions(_ requests: [RevisionRequest]) async throws -> [ReplicatedRevision] {
        try await fetch(requests).revisions
    }

    /// As ``revisions(_:)``, and what the server sent that cannot be stored, per document (a
    /// history that does not count down, a generation past 2^53 − 1, a body nested deeper than
    /// JSON is read): the rest of the batch arrives. A `_bulk_get` answer that does not parse as a
    /// whole is asked again document by document, so that one such document fails alone.
    ///
    /// ```swift
    /// let fetched = try await endpoint.fetch([RevisionRequest(documentID: "doc", revisionIDs: ["2-877"])])
    /// ```
    @_spi(Replication)
    public func fetch(_ requests: [RevisionRequest]) async throws -> RevisionFetch {
        state.clearFetched()
        let t = try transport()
        var docs: [JSONValue] = []
        for r in requests {
            for rev in r.revisionIDs {
                docs.append(["id": .string(r.documentID), "rev": .string(rev),
                             "atts_since": .array(r.knownAncestors.map(JSONValue.string))])
            }
        }
        guard !docs.isEmpty else { return RevisionFetch(revisions: [], failures: []) }
        var out: [ReplicatedRevision] = []
        var failures: [FetchFailure] = []
        if !state.noBulkGet {
            let request = t.request(.POST, "_bulk_get", query: [("revs", "true"), ("latest", "true")],
                                    json: ["docs": .array(docs)])
            let reply = try await t.send(request)
            // An answer that does not parse as a whole (one document nested too deep) is asked
            // again per document below, where such a document fails alone.
            if reply.status == 200, let body = try? reply.json {
                let known = Dictionary(requests.map { r in
                    (r.documentID, r.knownAncestors.compactMap { parseRevision($0)?.0 }.max() ?? 0)
                }, uniquingKeysWith: max)
                for case .object(let result) in body.objectValue?["results"]?.arrayValue ?? [] {
                    for case .object(let entry) in result["docs"]?.arrayValue ?? [] {
                        // An error: the revision is gone. `_removed`: the user lost access to it
                        // since the feed (Sync Gateway); the feed's removal row purges it.
                        guard case .object(var doc)? = entry["ok"], doc["_removed"] != true else { continue }
                        let id = doc["_id"]?.stringValue ?? result["id"]?.stringValue ?? ""
                        do {
                            let fetched = try await downloadAttachments(of: &doc, newerThan: known[id] ?? 0, t)
                            out.append(try received(doc, follows: fetched.follows, stored: fetched.stored))
                        } catch let e as ReplicatorError where e.isContentFailure {
                            failures.append(FetchFailure(documentID: id, revisionID: doc["_rev"]?.stringValue ?? "", error: e))
                        }
                    }
                }
                return RevisionFetch(revisions: out, failures: failures)
            }
            if reply.status != 200 {
                guard [400, 404, 405, 501].contains(reply.status) else { throw t.failure(reply, request) }
                state.noBulkGet = true
            }
        }
        for r in requests {
            do {
                out += try await openRevisions(r, t)
            } catch let e as ReplicatorError where e.isContentFailure {
                failures.append(FetchFailure(documentID: r.documentID, revisionID: r.revisionIDs.first ?? "", error: e))
            }
        }
        return RevisionFetch(revisions: out, failures: failures)
    }

    /// `GET /db/{id}?revs=true&latest=true&open_revs=[…]&attachments=true&atts_since=[…]` as
    /// `multipart/mixed` (CouchDB's replicator's own way).
    private func openRevisions(_ r: RevisionRequest, _ t: Transport) async throws -> [ReplicatedRevision] {
        let revs = try JSONValue.array(r.revisionIDs.map(JSONValue.string)).jsonText()
        var query = [("revs", "true"), ("latest", "true"), ("open_revs", revs), ("attachments", "true")]
        if !r.knownAncestors.isEmpty {
            query.append(("atts_since", try JSONValue.array(r.knownAncestors.map(JSONValue.string)).jsonText()))
        }
        let request = t.request(.GET, Transport.documentPath(r.documentID), query: query, accept: "multipart/mixed")
        let reply = try await t.send(request)
        if reply.status == 404 { return [] }
        guard reply.status == 200 else { throw t.failure(reply, request) }
        let type = reply.headers.first(name: "Content-Type") ?? ""
        if type.lowercased().hasPrefix("application/json") {
            guard let entries = try? reply.json.arrayValue else {
                throw ReplicatorError(.peerFailed, "open_revs of \(r.documentID): the answer is not a JSON array JSON can read", documentID: r.documentID)
            }
            return try entries.compactMap { e in
                try e.objectValue?["ok"]?.objectValue.flatMap { $0["_removed"] == true ? nil : try received($0, follows: [:]) }
            }
        }
        guard let boundary = Multipart.boundary(of: type) else {
            throw ReplicatorError(.peerFailed, "open_revs of \(r.documentID) answered \(type), not multipart/mixed")
        }
        var out: [ReplicatedRevision] = []
        let parts: [Multipart.Part]
        do {
            parts = try Multipart.parts(Array(reply.body.readableBytesView), boundary: boundary)
        } catch {
            throw ReplicatorError(.peerFailed, "open_revs of \(r.documentID): \(error)", documentID: r.documentID)
        }
        // A part that is not JSON this side can read (nested too deep) fails the document.
        func document(_ bytes: [UInt8]) throws -> JSONValue {
            do { return try JSONValue(parsing: bytes) } catch {
                throw ReplicatorError(.peerFailed, "open_revs of \(r.documentID): \(error)", documentID: r.documentID)
            }
        }
        for part in parts {
            let partType = part.headers["content-type"] ?? "application/json"
            if partType.contains("error=\"true\"") { continue }
            if partType.lowercased().hasPrefix("multipart/related"), let inner = Multipart.boundary(of: partType) {
                let related = try Multipart.parts(part.body, boundary: inner)
                guard let first = related.first, case .object(let doc) = try document(first.body) else { continue }
                var follows: [String: Data] = [:]
                let following = (doc["_attachments"]?.objectValue ?? [:]).filter { $0.value.objectValue?["follows"] == true }.map(\.key)
                var unnamed = following.sorted()
                for p in related.dropFirst() {
                    if let name = Multipart.filename(p.headers["content-disposition"]), following.contains(name) {
                        follows[name] = Data(p.body)
                        unnamed.removeAll { $0 == name }
                    } else if !unnamed.isEmpty {
                        follows[unnamed.removeFirst()] = Data(p.body)
                    }
                }
                out.append(try received(doc, follows: follows))
            } else if case .object(let doc) = try document(part.body), doc["_removed"] != true {
                out.append(try received(doc, follows: [:]))
            }
        }
        return out
    }

    /// Fetches the content of a document's attachments added after generation `known` (stubs
    /// with a greater `revpos`), each with `GET /db/{id}/{name}?rev=…`, and marks them `follows`:
    /// small ones in memory (`follows`), others streamed to a temporary file and made blobs
    /// (`stored`: their entries, the blobs kept until the next fetch).
    private func downloadAttachments(of doc: inout [String: JSONValue], newerThan known: UInt64,
                                     _ t: Transport) async throws -> (follows: [String: Data], stored: [String: JSONValue]) {
        guard case .object(var attachments)? = doc["_attachments"], case .string(let id)? = doc["_id"],
              case .string(let rev)? = doc["_rev"] else { return ([:], [:]) }
        var follows: [String: Data] = [:]
        var stored: [String: JSONValue] = [:]
        for (name, v) in attachments.sorted(by: { $0.key < $1.key }) {
            guard case .object(var a) = v, a["stub"] == true else { continue }
            if let revpos = a["revpos"]?.int64Value, revpos > 0, UInt64(revpos) <= known { continue }
            let request = t.request(.GET, Transport.documentPath(id) + "/" + Transport.encode(name), query: [("rev", rev)], accept: "*/*")
            let length = a["length"]?.int64Value ?? 0
            if length <= 1 << 20 {
                let reply = try await t.send(request)
                guard reply.status == 200 else { throw t.failure(reply, request) }
                follows[name] = Data(reply.body.readableBytesView)
            } else {
                // Streamed to a file: the blob is made from it and installed from it.
                let file = try await t.download(request, into: state.temporaryFile())
                let type = a["content_type"]?.stringValue ?? "application/octet-stream"
                let blob: Blob
                do { blob = try Blob(contentType: type, fileURL: file.url) } catch {
                    throw ReplicatorError(.peerFailed, "attachment \(name) of \(id): \(error)", documentID: id)
                }
                guard blob.length == UInt64(length) else {
                    throw ReplicatorError(.peerFailed, "attachment \(name) of \(id) \(rev): \(blob.length) bytes, \(length) announced", documentID: id)
                }
                state.keepFetched(blob)
                let md5 = a["digest"]?.stringValue.flatMap { $0.hasPrefix("md5-") ? $0 : nil } ?? file.md5
                stored[name] = WireAttachments.entry(blob: blob, revpos: UInt64(max(1, a["revpos"]?.int64Value ?? 1)), md5: md5)
                continue
            }
            a.removeValue(forKey: "stub")
            a["follows"] = true
            attachments[name] = .object(a)
        }
        doc["_attachments"] = .object(attachments)
        return (follows, stored)
    }

    /// A document as a server sent it, as a revision to insert: its attachments' content kept
    /// for ``blob(withDigest:)``, stubs left for the database to resolve, `blob_` attachments
    /// folded back into the properties they came from.
    private func received(_ doc: [String: JSONValue], follows: [String: Data],
                          stored: [String: JSONValue] = [:]) throws -> ReplicatedRevision {
        let sentID = doc["_id"]?.stringValue
        let incoming: IncomingDocument
        do { incoming = try IncomingDocument(doc) } catch {
            throw ReplicatorError(.peerFailed, "a document the server sent: \(error)", documentID: sentID)
        }
        guard let id = incoming.id, let rev = incoming.rev else {
            throw ReplicatorError(.peerFailed, "a document the server sent has no _id or _rev", documentID: sentID)
        }
        guard let (generation, _) = parseRevision(rev) else {
            throw ReplicatorError(.peerFailed, "\(id): revision \(rev) is malformed or its generation is above \(RevisionIDSyntax.maxGeneration)", documentID: id)
        }
        let history: [String]
        do { history = try incoming.history(of: rev) } catch { throw ReplicatorError(.peerFailed, "\(id) \(rev): \(error)", documentID: id) }
        var properties = incoming.properties
        if let attachments = incoming.attachments {
            var entries: [String: JSONValue] = [:]
            for (name, value) in attachments {
                guard case .object(let a) = value else { continue }
                if let entry = stored[name] {
                    // Downloaded to a file already: the entry is made.
                    if !name.hasPrefix(BlobAttachments.prefix) { entries[name] = entry }
                    continue
                }
                let decoded: (blob: Blob, entry: JSONValue)?
                do {
                    decoded = try WireAttachments.decode(name: name, a, follows: follows[name], generation: generation, maxSize: Int.max,
                                                         digestOfDecoded: false)
                } catch {
                    throw ReplicatorError(.peerFailed, "attachment \(name) of \(id) \(rev): \(error)", documentID: id)
                }
                if let (blob, entry) = decoded {
                    state.keepFetched(blob)
                    if name.hasPrefix(BlobAttachments.prefix) { continue }   // its property holds the reference
                    entries[name] = entry
                } else if !name.hasPrefix(BlobAttachments.prefix) {
                    var stub: [String: JSONValue] = ["stub": true]
                    for k in ["digest", "revpos", "content_type", "length"] { stub[k] = a[k] }
                    entries[name] = .object(stub)
                }
            }
            if !entries.isEmpty { properties["_attachments"] = .object(entries) }
        }
        return ReplicatedRevision(documentID: id, revisionID: rev, history: history, isDeleted: incoming.deleted, properties: properties)
    }

    // MARK: - Blobs

    /// The server cannot be asked for content by Settee's digest: every blob a revision to send
    /// references counts as missing, and ``insertRevisions(_:)`` sends as stubs those the server
    /// has by the attachment rules.
    ///
    /// ```swift
    /// let toSend = try await endpoint.missingBlobs(digests)
    /// ```
    public func missingBlobs(_ digests: [String]) async throws -> [String] { digests }

    /// Content that came with the revisions of the last ``revisions(_:)`` call.
    ///
    /// ```swift
    /// if let blob = try await endpoint.blob(withDigest: digest) { try await local.saveBlob(blob) }
    /// ```
    public func blob(withDigest digest: String) async throws -> Blob? { state.fetched(digest) }

    /// Keeps a blob to send with the revisions that reference it.
    ///
    /// ```swift
    /// try await endpoint.saveBlob(blob)
    /// ```
    public func saveBlob(_ blob: Blob) async throws { state.keepToSend(blob) }

    // MARK: - Writing

    /// `POST /db/_bulk_docs` with `new_edits=false`: each revision with `_revisions`, attachments
    /// the server lacks inline, the others as stubs. A document the server refuses (a validation's
    /// 403, a missing stub) is reported as rejected; the others as inserted. A batch the server
    /// finds too large (413) is sent in halves.
    ///
    /// ```swift
    /// let outcomes = try await endpoint.insertRevisions(batch)
    /// ```
    @_spi(Replication)
    public func insertRevisions(_ revisions: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome] {
        guard !revisions.isEmpty else { return [] }
        let t = try transport()
        var docs: [JSONValue] = []
        docs.reserveCapacity(revisions.count)
        var outcomes = [RevisionInsertOutcome](repeating: .inserted, count: revisions.count)
        var sent: [Int] = []
        for (i, r) in revisions.enumerated() {
            do {
                let doc = try outgoing(r)
                if doc.parts.isEmpty {
                    docs.append(doc.json)
                    sent.append(i)
                } else {
                    // Large attachments: the document alone, streamed as multipart/related.
                    outcomes[i] = try await putMultipart(r, doc, t)
                }
            } catch let e as SetteeError {
                // This document's content could not be read or sent: its rejection alone.
                outcomes[i] = .rejected(e)
            }
        }
        defer { state.forgetSent(revisions) }
        guard !docs.isEmpty else { return outcomes }
        let request = t.request(.POST, "_bulk_docs", json: ["new_edits": false, "docs": .array(docs)])
        let reply = try await t.send(request)
        if reply.status == 413, sent.count > 1 {
            let half = sent.count / 2
            let first = try await insertRevisions(sent.prefix(half).map { revisions[$0] })
            let second = try await insertRevisions(sent.dropFirst(half).map { revisions[$0] })
            for (i, o) in zip(sent, first + second) { outcomes[i] = o }
            return outcomes
        }
        guard reply.status == 201 || reply.status == 200 || reply.status == 202 else { throw t.failure(reply, request) }
        var refused: [String: SetteeError] = [:]
        for case .object(let e) in try reply.json.arrayValue ?? [] {
            guard case .string(let error)? = e["error"], let id = e["id"]?.stringValue else { continue }
            let failure = Self.refusal(error, e["reason"]?.stringValue)
            refused[id + "\u{0}" + (e["rev"]?.stringValue ?? "")] = failure
            refused[id + "\u{0}"] = failure
        }
        for i in sent {
            let r = revisions[i]
            if let e = refused[r.documentID + "\u{0}" + r.revisionID] ?? refused[r.documentID + "\u{0}"] { outcomes[i] = .rejected(e) }
        }
        return outcomes
    }

    /// A server's refusal of a document as the error of its rejection.
    private static func refusal(_ error: String, _ reason: String?) -> SetteeError {
        let code: SetteeError.Code = error == "forbidden" || error == "unauthorized" ? .forbidden : .notFound
        return SetteeError(code, "\(error): \(reason ?? error)")
    }

    /// `PUT /db/{id}?new_edits=false` as `multipart/related`: the document, then each attachment
    /// it marks `follows`, read from the blob store in chunks as the connection takes them.
    private func putMultipart(_ r: ReplicatedRevision, _ doc: OutgoingDocument, _ t: Transport) async throws -> RevisionInsertOutcome {
        let boundary = "settee-" + UUID().uuidString
        let json = try doc.json.jsonBytes()
        var segments: [MultipartBody.Segment] = [.bytes(ByteBuffer(string: "--\(boundary)\r\nContent-Type: application/json\r\n\r\n")),
                                                 .bytes(ByteBuffer(bytes: json))]
        var length = segments.reduce(0) { $0 + $1.length }
        for (name, blob) in doc.parts {
            let filename = name.replacingOccurrences(of: "\"", with: "%22")
            let head = ByteBuffer(string: "\r\n--\(boundary)\r\nContent-Disposition: attachment; filename=\"\(filename)\"\r\n"
                                  + "Content-Type: \(blob.contentType)\r\nContent-Length: \(blob.length)\r\n\r\n")
            segments += [.bytes(head), .blob(blob)]
            length += head.readableBytes + Int(blob.length)
        }
        let tail = ByteBuffer(string: "\r\n--\(boundary)--")
        segments.append(.bytes(tail))
        length += tail.readableBytes
        var request = t.request(.PUT, Transport.documentPath(r.documentID), query: [("new_edits", "false")])
        request.headers.replaceOrAdd(name: "Content-Type", value: "multipart/related; boundary=\"\(boundary)\"")
        request.body = .stream(MultipartBody(segments: segments), length: .known(Int64(length)))
        let reply = try await t.send(request)
        switch reply.status {
        case 200, 201, 202: return .inserted
        case 403 where (try? reply.json.objectValue?["error"]) == "forbidden", 409, 412, 413, 415:
            let o = (try? reply.json.objectValue) ?? [:]
            return .rejected(Self.refusal(o["error"]?.stringValue ?? "\(reply.status)", o["reason"]?.stringValue))
        default: throw t.failure(reply, request)
        }
    }

    /// A revision as CouchDB's `new_edits=false` document, and the attachments to send after it
    /// as parts (when they are large; small ones go inline as `data`).
    struct OutgoingDocument {
        var json: JSONValue
        var parts: [(String, Blob)]
    }

    /// Attachments up to this many bytes in all go inline in `_bulk_docs`; more, and the
    /// document is sent alone as multipart, its attachments streamed.
    static let inlineLimit: UInt64 = 1 << 20

    private func outgoing(_ r: ReplicatedRevision) throws -> OutgoingDocument {
        var o = try r.properties
        let known = state.knownGeneration(of: r.documentID)
        // A revision stored before generations were bounded (or malformed) is this document's
        // failure, not the batch's: CouchDB's peers count generations in doubles.
        guard let (generation, _) = parseRevision(r.revisionID) else {
            throw SetteeError(.invalidParameter, "revision \(r.revisionID) of \(r.documentID) cannot be sent: its generation is above \(RevisionIDSyntax.maxGeneration) or it is malformed")
        }
        var toSend: [(String, [String: JSONValue])] = []
        if case .object(let attachments)? = o["_attachments"] {
            for (name, v) in attachments { if case .object(let entry) = v { toSend.append((name, entry)) } }
        }
        let named = Set(toSend.map(\.0))
        for (pointer, entry) in BlobAttachments.blobs(in: o) where !named.contains(BlobAttachments.prefix + pointer) {
            toSend.append((BlobAttachments.prefix + pointer, entry))
        }
        // A blob outside `_attachments` has no revpos: it is always sent.
        func knownFor(_ name: String) -> UInt64 { named.contains(name) ? known : 0 }
        // Content to send: what the server cannot have already.
        let fresh = toSend.filter { name, entry in
            guard let revpos = entry["revpos"]?.int64Value, revpos > 0 else { return true }
            return UInt64(revpos) > knownFor(name)
        }
        // Lengths are stored data: added without overflow (past the limit, the sum stops mattering).
        let streamed = fresh.reduce(UInt64(0)) { sum, item in
            let (total, overflow) = sum.addingReportingOverflow(UInt64(max(0, item.1["length"]?.int64Value ?? 0)))
            return overflow ? .max : total
        } > Self.inlineLimit
        var wire: [String: JSONValue] = [:]
        var parts: [(String, Blob)] = []
        for (name, entry) in toSend {
            let (json, blob) = try outgoingAttachment(entry, name: name, known: knownFor(name), generation: generation,
                                                      documentID: r.documentID, follows: streamed)
            wire[name] = json
            if let blob { parts.append((name, blob)) }
        }
        o["_attachments"] = wire.isEmpty ? nil : .object(wire)
        o["_id"] = .string(r.documentID)
        o["_rev"] = .string(r.revisionID)
        if r.isDeleted { o["_deleted"] = true }
        // The generation is at most 2^53 − 1 here (parsed above), so it fits an Int64.
        o["_revisions"] = ["start": .int(Int64(generation)),
                           "ids": .array(r.history.map { .string(parseRevision($0).map { String($0.1) } ?? $0) })]
        // Parts follow in the order CouchDB reads them: the document's attachment names, sorted.
        return OutgoingDocument(json: .object(o), parts: parts.sorted { $0.0 < $1.0 })
    }

    /// One attachment to send: a stub when the server holds a revision at least as new as the
    /// one that added it, else its content, inline or (`follows`) as a part (an attachment with
    /// no `revpos`, one a Settee application attached, is sent with this revision's generation).
    private func outgoingAttachment(_ entry: [String: JSONValue], name: String, known: UInt64, generation: UInt64,
                                    documentID: String, follows: Bool) throws -> (JSONValue, Blob?) {
        var wire: [String: JSONValue] = ["content_type": entry["content_type"] ?? "application/octet-stream"]
        if let length = entry["length"] { wire["length"] = length }
        wire["revpos"] = .int(Int64(generation))
        if let revpos = entry["revpos"]?.int64Value, revpos > 0 {
            wire["revpos"] = .int(revpos)
            if UInt64(revpos) <= known {
                wire["stub"] = true
                if let md5 = entry["md5"] { wire["digest"] = md5 }
                return (.object(wire), nil)
            }
        }
        guard case .string(let digest)? = entry["digest"], let blob = state.toSend(digest) else {
            throw SetteeError(.notFound, "the content of attachment \(name) of \(documentID) is not available to send")
        }
        if follows {
            wire["follows"] = true
            if let md5 = entry["md5"] { wire["digest"] = md5 }
            return (.object(wire), blob)
        }
        guard let content = blob.content else {
            throw SetteeError(.notFound, "the content of attachment \(name) of \(documentID) cannot be read")
        }
        wire["data"] = .string(content.base64EncodedString())
        wire["digest"] = .string(WireAttachments.md5(content))
        return (.object(wire), nil)
    }

    // MARK: - Checkpoints

    /// `GET /db/_local/{id}`, without `_id` and `_rev` (the revision is remembered for the next
    /// save); nil on 404.
    ///
    /// ```swift
    /// let checkpoint = try await endpoint.localDocument(withID: "_local/abc")
    /// ```
    @_spi(Replication)
    public func localDocument(withID id: String) async throws -> [String: JSONValue]? {
        let t = try transport()
        let request = t.request(.GET, Transport.documentPath(id))
        let reply = try await t.send(request)
        if reply.status == 404 { return nil }
        guard reply.status == 200 else { throw t.failure(reply, request) }
        guard case .object(var o) = try reply.json else { throw ReplicatorError(.peerFailed, "\(id) is not a JSON object") }
        state.setLocalRevision(o["_rev"]?.stringValue, for: id)
        o.removeValue(forKey: "_id")
        o.removeValue(forKey: "_rev")
        return o
    }

    /// `PUT /db/_local/{id}` with the revision last seen (CouchDB needs it to replace one); a
    /// conflict reads the current revision and tries once more.
    ///
    /// ```swift
    /// try await endpoint.saveLocalDocument(["source_last_seq": 10], withID: "_local/abc")
    /// ```
    @_spi(Replication)
    public func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) async throws {
        let t = try transport()
        for attempt in 0 ..< 2 {
            var o = properties
            if let rev = state.localRevision(for: id) { o["_rev"] = .string(rev) }
            let request = t.request(.PUT, Transport.documentPath(id), json: .object(o))
            let reply = try await t.send(request)
            if reply.status == 409, attempt == 0 {
                _ = try await localDocument(withID: id)
                continue
            }
            guard [200, 201, 202].contains(reply.status) else { throw t.failure(reply, request) }
            state.setLocalRevision(try reply.json.objectValue?["rev"]?.stringValue, for: id)
            return
        }
    }
}

/// What an endpoint remembers between calls: its transport, the content of fetched attachments,
/// the blobs to send, the server's possible ancestors per document, `_local` revisions.
final class EndpointState: Sendable {
    private struct State {
        var transport: Transport?
        var fetched: [String: Blob] = [:]
        var toSend: [String: Blob] = [:]
        var ancestors: [String: [String]] = [:]
        var localRevisions: [String: String] = [:]
        var noBulkGet = false
        var welcomed = false
        /// Attachments downloaded to files for the last fetch.
        var files: [URL] = []
    }
    private let state = Mutex(State())

    func transport(_ make: () throws -> Transport) throws -> Transport {
        try state.withLock { s in
            if let t = s.transport { return t }
            let t = try make()
            s.transport = t
            return t
        }
    }

    var noBulkGet: Bool {
        get { state.withLock { $0.noBulkGet } }
        set { state.withLock { $0.noBulkGet = newValue } }
    }

    var welcomed: Bool {
        get { state.withLock { $0.welcomed } }
        set { state.withLock { $0.welcomed = newValue } }
    }

    func clearFetched() {
        let files = state.withLock { s in
            s.fetched = [:]
            defer { s.files = [] }
            return s.files
        }
        for f in files { try? FileManager.default.removeItem(at: f) }
    }

    /// A new temporary file's URL, removed at the next `clearFetched` or when the endpoint goes.
    func temporaryFile() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("settee-attachment-\(UUID().uuidString)")
        state.withLock { $0.files.append(url) }
        return url
    }

    deinit {
        for f in state.withLock({ $0.files }) { try? FileManager.default.removeItem(at: f) }
    }
    func keepFetched(_ blob: Blob) { state.withLock { $0.fetched[blob.digest] = blob } }
    func fetched(_ digest: String) -> Blob? { state.withLock { $0.fetched[digest] } }

    func keepToSend(_ blob: Blob) { state.withLock { $0.toSend[blob.digest] = blob } }
    func toSend(_ digest: String) -> Blob? { state.withLock { $0.toSend[digest] } }

    func rememberAncestors(_ byDocument: [String: [String]]) {
        state.withLock { s in for (id, a) in byDocument { s.ancestors[id] = a } }
    }

    /// The highest generation among the server's possible ancestors of a document.
    func knownGeneration(of id: String) -> UInt64 {
        state.withLock { $0.ancestors[id] ?? [] }.compactMap { parseRevision($0)?.0 }.max() ?? 0
    }

    /// Forgets what a sent batch needed: its documents' ancestors and its blobs.
    func forgetSent(_ revisions: [ReplicatedRevision]) {
        state.withLock { s in
            for r in revisions {
                s.ancestors.removeValue(forKey: r.documentID)
                for d in r.blobDigests { s.toSend.removeValue(forKey: d) }
            }
        }
    }

    func localRevision(for id: String) -> String? { state.withLock { $0.localRevisions[id] } }
    func setLocalRevision(_ rev: String?, for id: String) { state.withLock { $0.localRevisions[id] = rev } }
}

/// Blobs a document holds outside `_attachments`, sent as attachments named `blob_` and the
/// property's JSON pointer (Couchbase Lite's convention), so that a server stores their content.
enum BlobAttachments {
    static let prefix = "blob_"

    /// Each blob reference outside `_attachments`, by JSON pointer (`/avatar`, `/pages/0`).
    static func blobs(in properties: [String: JSONValue]) -> [(String, [String: JSONValue])] {
        var out: [(String, [String: JSONValue])] = []
        func walk(_ v: JSONValue, _ pointer: String) {
            switch v {
            case .object(let o):
                if o["@type"] == "blob", o["digest"]?.stringValue != nil { out.append((pointer, o)); return }
                for (k, x) in o { walk(x, pointer + "/" + escape(k)) }
            case .array(let a):
                for (i, x) in a.enumerated() { walk(x, pointer + "/\(i)") }
            default: break
            }
        }
        for (k, v) in properties where k != "_attachments" { walk(v, "/" + escape(k)) }
        return out
    }

    private static func escape(_ key: String) -> String {
        key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }
}

/// A multipart body as a stream: fixed bytes and blobs read in 64 KiB chunks, so a large
/// attachment is never held whole in memory.
struct MultipartBody: AsyncSequence, Sendable {
    enum Segment: Sendable {
        case bytes(ByteBuffer)
        case blob(Blob)

        var length: Int {
            switch self {
            case .bytes(let b): return b.readableBytes
            case .blob(let b): return Int(b.length)
            }
        }
    }

    let segments: [Segment]

    struct AsyncIterator: AsyncIteratorProtocol {
        var segments: [Segment]
        var index = 0
        var stream: InputStream?
        /// Chunk buffers used in turn: by the time one comes round again the connection has
        /// written it and let it go, so it is refilled in place. A new buffer per chunk would cost
        /// an allocation each, which after large frees glibc serves from its heap and keeps
        /// (tens of MiB for a 100 MB attachment).
        var ring: [ByteBuffer] = []
        var turn = 0

        mutating func next() async throws -> ByteBuffer? {
            while index < segments.count {
                switch segments[index] {
                case .bytes(let b):
                    index += 1
                    return b
                case .blob(let blob):
                    let source: InputStream
                    if let open = stream {
                        source = open
                    } else {
                        guard let s = blob.contentStream else {
                            throw SetteeError(.notFound, "the content of blob \(blob.digest) cannot be read")
                        }
                        s.open()
                        stream = s
                        source = s
                    }
                    if ring.isEmpty { ring = (0 ..< 4).map { _ in ByteBuffer() } }
                    turn = (turn + 1) % ring.count
                    var buffer = ring[turn]
                    ring[turn] = ByteBuffer()   // this copy alone holds the storage while it is filled
                    buffer.clear()
                    var result = 0
                    buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 64 << 10) { raw in
                        guard let base = raw.baseAddress else { return 0 }
                        result = source.read(base.assumingMemoryBound(to: UInt8.self), maxLength: raw.count)
                        return Swift.max(0, result)
                    }
                    if result > 0 {
                        ring[turn] = buffer
                        return buffer
                    }
                    // (InputStream.streamError is not available everywhere: a negative count says it.)
                    if result < 0 { throw SetteeError(.io, "reading the content of blob \(blob.digest) failed") }
                    stream?.close()
                    stream = nil
                    index += 1
                }
            }
            return nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(segments: segments) }
}

extension ReplicatorError {
    /// A document the server sent that cannot be stored (that document's failure), as opposed to
    /// the server or the network failing (the batch's).
    fileprivate var isContentFailure: Bool { code == .peerFailed && documentID != nil }
}
