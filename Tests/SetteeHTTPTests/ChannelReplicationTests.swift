import AsyncHTTPClient
import Foundation
import NIOCore
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
@testable import SetteeServer
import Synchronization
import Testing

/// `settee serve` with channels, on real loopback sockets: a database `db` whose users are given
/// as a JSON fragment (password `secret`), with a sync function that grants access with
/// `access()`, refuses documents of type `banned` and, without channel `vault`, of type `secret`.
private final class ChannelServer: Sendable {
    let server: SetteeServer
    let port: Int
    let adminPort: Int
    private let task: Task<Void, any Error>

    static let sync = """
        `function(doc, oldDoc) {
            if (doc.type == "grant") { access(doc.to, doc.grants); }
            if (doc.type == "banned") { throw({forbidden: "banned " + doc._id}); }
            if (doc.type == "secret") { requireAccess("vault"); }
            channel(doc.channels);
        }`
        """

    static func start(users: String) async throws -> ChannelServer {
        var config = try ServerConfiguration(json: """
            {"databases": {"db": {"server": "walrus:",
              "users": {"GUEST": {"disabled": true}, \(users)},
              "sync": \(sync)}}}
            """)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        let server = try SetteeServer(configuration: config)
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let task = Task { try await server.run { ports.continuation.yield($0) } }
        var iterator = ports.stream.makeAsyncIterator()
        guard let listening = await iterator.next() else { throw CancellationError() }
        return ChannelServer(server: server, port: listening.publicPort, adminPort: listening.adminPort ?? 0, task: task)
    }

    private init(server: SetteeServer, port: Int, adminPort: Int, task: Task<Void, any Error>) {
        self.server = server
        self.port = port
        self.adminPort = adminPort
        self.task = task
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)/db")! }

    func stop() async {
        task.cancel()
        _ = try? await task.value
        try? server.close()
    }

    /// A request to the admin port; the status and the JSON answer.
    @discardableResult
    func admin(_ method: String, _ path: String, _ json: String? = nil) async throws -> (status: Int, body: JSONValue) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(adminPort)/db/\(path)")
        switch method {
        case "PUT": request.method = .PUT
        case "POST": request.method = .POST
        case "DELETE": request.method = .DELETE
        default: request.method = .GET
        }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        // A deadline for a hung server, not a timing: a loaded two-core machine can take a while.
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(600))
        let bytes = Array(try await response.body.collect(upTo: 1 << 22).readableBytesView)
        return (Int(response.status.code), bytes.isEmpty ? .null : try JSONValue(parsing: bytes))
    }

    /// Writes a document through the admin port (the sync function routes it); its new revision.
    @discardableResult
    func put(_ id: String, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let (status, body) = try await admin("PUT", id, json)
        #expect(status == 201, "PUT \(id): \(status) \(body)", sourceLocation: sourceLocation)
        return body["rev"]?.stringValue ?? ""
    }

    func rev(_ id: String) async throws -> String {
        try #require(try await admin("GET", id).body["_rev"]?.stringValue)
    }
}

/// A replicator's warnings and errors.
private final class Warnings: Sendable {
    let messages = Mutex<[String]>([])
}

/// A replicator with the server as user `user` (password `secret`), its statuses, events and
/// warnings recorded; started.
private func start(_ db: Database, _ server: ChannelServer, _ type: ReplicatorType, user: String, continuous: Bool, reset: Bool = false,
                   configure: (inout ReplicatorConfiguration) -> Void = { _ in }) -> (Replicator, Recorder, Warnings) {
    var config = ReplicatorConfiguration(database: db, target: URLEndpoint(url: server.url))
    config.replicatorType = type
    config.continuous = continuous
    config.authenticator = BasicAuthenticator(username: user, password: "secret")
    config.heartbeat = .seconds(1)
    config.maxAttemptWaitTime = .milliseconds(500)
    let warnings = Warnings()
    config.logHandler = { @Sendable level, message in
        if level >= .warning { warnings.messages.withLock { $0.append(message) } }
    }
    configure(&config)
    let replicator = Replicator(config: config)
    let recorder = Recorder()
    recorder.attach(replicator)
    replicator.start(reset: reset)
    return (replicator, recorder, warnings)
}

/// The IDs of the live documents of a database.
private func liveIDs(_ db: Database) throws -> Set<String> {
    var ids: Set<String> = []
    let cursor = try db.allDocuments(AllDocumentsOptions())
    while let doc = try cursor.next() { ids.insert(doc.id) }
    return ids
}

/// For messages: the live IDs, sorted (none when unreadable).
private func shown(_ db: Database) -> [String] { ((try? liveIDs(db)) ?? []).sorted() }

/// Replication through channels: what a user pulls, how grants and revocations reach a
/// continuous pull, what the sync function refuses in a push, and seed 003's filtered pull.
@Suite struct ChannelReplicationTests {
    /// (a) A pull by channel gets exactly that channel's documents; a pull without channels gets
    /// all of the user's.
    @Test func aPullGetsTheRequestedChannelsOfTheUser() async throws {
        let scratch = try Scratch()
        let server = try await ChannelServer.start(users: #""u": {"password": "secret", "admin_channels": ["a", "b"]}"#)
        defer { Task { await server.stop() } }
        for c in ["a", "b", "c"] {
            for i in 0 ..< 4 { try await server.put("\(c)\(i)", #"{"channels": ["\#(c)"], "n": \#(i)}"#) }
        }
        try await server.put("ac", #"{"channels": ["a", "c"]}"#)
        try await server.put("none", #"{"n": 0}"#)
        let onlyA = try scratch.open("only-a")
        #expect(await replicate(onlyA, server.url, .pull, user: "u") { $0.channels = ["a"] }.error == nil)
        #expect(try liveIDs(onlyA) == ["a0", "a1", "a2", "a3", "ac"])
        let all = try scratch.open("all")
        #expect(await replicate(all, server.url, .pull, user: "u").error == nil)
        #expect(try liveIDs(all) == ["a0", "a1", "a2", "a3", "ac", "b0", "b1", "b2", "b3"])
        #expect(try await all.document(withID: "b2")?["n"] == 2)
        // A channel that is not the user's gives nothing.
        let onlyC = try scratch.open("only-c")
        #expect(await replicate(onlyC, server.url, .pull, user: "u") { $0.channels = ["c"] }.error == nil)
        #expect(try liveIDs(onlyC) == [])
        // Two channels asked for: their union.
        let bc = try scratch.open("bc")
        #expect(await replicate(bc, server.url, .pull, user: "u") { $0.channels = ["b", "c"] }.error == nil)
        #expect(try liveIDs(bc) == ["b0", "b1", "b2", "b3"])
    }

    /// (b) A continuous pull as a user: a channel the administrator grants brings its older
    /// documents without the replication starting over; revoked, they are purged locally and
    /// reported with `.accessRemoved`. The same through a document's `access()` grant.
    @Test func grantsAndRevocationsReachAContinuousPull() async throws {
        let scratch = try Scratch()
        let server = try await ChannelServer.start(users: #""u": {"password": "secret", "admin_channels": ["a"]}"#)
        defer { Task { await server.stop() } }
        for c in ["a", "x", "y"] {
            for i in 0 ..< 3 { try await server.put("\(c)\(i)", #"{"channels": ["\#(c)"]}"#) }
        }
        // xa is readable through a whatever happens to x.
        try await server.put("xa", #"{"channels": ["x", "a"]}"#)
        let xs: Set<String> = ["x0", "x1", "x2"], ys: Set<String> = ["y0", "y1", "y2"], as_: Set<String> = ["a0", "a1", "a2", "xa"]
        let local = try scratch.open("device")
        let (replicator, recorder, warnings) = start(local, server, .pull, user: "u", continuous: true)
        #expect(try await eventually { try liveIDs(local) == as_ })
        #expect(await eventually { recorder.activities.last == .idle && Set(recorder.documents.withLock { $0.map(\.id) }) == as_ })
        func events(after mark: Int) -> [ReplicatedDocument] { recorder.documents.withLock { Array($0.dropFirst(mark)) } }
        func mark() -> Int { recorder.documents.withLock { $0.count } }

        // Granted by the administrator: x's documents, older than the pull's position, arrive.
        var m = mark()
        #expect(try await server.admin("PUT", "_user/u", #"{"admin_channels": ["a", "x"]}"#).status == 200)
        #expect(try await eventually { try liveIDs(local) == as_.union(xs) }, "\(shown(local))")
        // Events are published once a batch is stored: wait for them too.
        #expect(await eventually { Set(events(after: m).map(\.id)).isSuperset(of: xs) })
        var got = events(after: m)
        #expect(Set(got.map(\.id)) == xs, "only the granted channel's documents: \(got)")
        #expect(got.allSatisfy { $0.error == nil && $0.flags.isEmpty })

        // Revoked: purged locally, reported as access removed.
        m = mark()
        #expect(try await server.admin("PUT", "_user/u", #"{"admin_channels": ["a"]}"#).status == 200)
        #expect(try await eventually { try liveIDs(local) == as_ }, "\(shown(local))")
        for id in xs { #expect(try await local.revisionTree(withID: id) == nil, "\(id) is purged, not deleted") }
        #expect(await eventually { Set(events(after: m).filter { $0.flags.contains(.accessRemoved) }.map(\.id)) == xs })
        got = events(after: m)
        #expect(got.allSatisfy { xs.contains($0.id) && $0.flags == .accessRemoved && $0.error == nil }, "\(got)")

        // Granted by a document's access(): y's documents arrive.
        m = mark()
        try await server.put("grant-u", #"{"type": "grant", "to": "u", "grants": ["y"]}"#)
        #expect(try await eventually { try liveIDs(local) == as_.union(ys) }, "\(shown(local))")
        #expect(await eventually { Set(events(after: m).map(\.id)).isSuperset(of: ys) })
        got = events(after: m)
        #expect(Set(got.map(\.id)) == ys, "\(got)")
        // The grant document itself is in no channel: not pulled.
        #expect(try await local.revisionTree(withID: "grant-u") == nil)

        // The grant withdrawn by an update of that document: purged, access removed.
        m = mark()
        try await server.put("grant-u", #"{"_rev": "\#(try await server.rev("grant-u"))", "type": "grant", "to": "u", "grants": []}"#)
        #expect(try await eventually { try liveIDs(local) == as_ }, "\(shown(local))")
        #expect(await eventually { Set(events(after: m).filter { $0.flags.contains(.accessRemoved) }.map(\.id)) == ys })

        // Granted again: the purged documents come back.
        #expect(try await server.admin("PUT", "_user/u", #"{"admin_channels": ["a", "x"]}"#).status == 200)
        #expect(try await eventually { try liveIDs(local) == as_.union(xs) }, "\(shown(local))")

        // One session throughout: never offline, no retry.
        replicator.stop()
        let final = await replicator.waitUntilStopped()
        #expect(final.error == nil)
        #expect(!recorder.activities.contains(.offline), "\(recorder.activities)")
        #expect(warnings.messages.withLock { $0 }.isEmpty, "\(warnings.messages.withLock { $0 })")
        #expect(recorder.documents.withLock { $0.allSatisfy { $0.error == nil } })
    }

    /// One-shot pulls in batches of two, from their checkpoint: a channel that comes with a role
    /// given by the administrator brings its older documents; the role's channel taken away,
    /// they are purged, except one still readable through another channel.
    @Test func oneShotPullsInSmallBatchesAcrossARoleGrantAndItsRevocation() async throws {
        let scratch = try Scratch()
        let server = try await ChannelServer.start(users: #""u": {"password": "secret", "admin_channels": ["a"]}"#)
        defer { Task { await server.stop() } }
        for c in ["a", "x"] {
            for i in 0 ..< 5 { try await server.put("\(c)\(i)", #"{"channels": ["\#(c)"]}"#) }
        }
        try await server.put("xa", #"{"channels": ["x", "a"]}"#)
        let as_: Set<String> = ["a0", "a1", "a2", "a3", "a4", "xa"], xs: Set<String> = ["x0", "x1", "x2", "x3", "x4"]
        let local = try scratch.open("device")
        func pull() async throws -> [ReplicatedDocument] {
            let (r, recorder, warnings) = start(local, server, .pull, user: "u", continuous: false) { $0.batchSize = 2 }
            #expect(await r.waitUntilStopped().error == nil)
            // Listeners are called in order on a queue: once the stopped status is in, every
            // document event before it is too.
            #expect(await eventually { recorder.activities.last == .stopped })
            #expect(warnings.messages.withLock { $0 }.isEmpty)
            return recorder.documents.withLock { $0 }
        }
        _ = try await pull()
        #expect(try liveIDs(local) == as_)
        // A role with x, given to u.
        #expect(try await server.admin("PUT", "_role/rx", #"{"admin_channels": ["x"]}"#).status == 201)
        #expect(try await server.admin("PUT", "_user/u", #"{"admin_channels": ["a"], "admin_roles": ["rx"]}"#).status == 200)
        #expect(try await server.admin("GET", "_user/u").body["all_channels"] == ["!", "a", "x"])
        let granted = try await pull()
        #expect(try liveIDs(local) == as_.union(xs), "\(shown(local))")
        #expect(Set(granted.map(\.id)) == xs, "only the new channel's documents: \(granted)")
        // The role loses x: purged, but xa (also in a) stays.
        #expect(try await server.admin("PUT", "_role/rx", #"{"admin_channels": []}"#).status == 200)
        let revoked = try await pull()
        #expect(try liveIDs(local) == as_, "\(shown(local))")
        #expect(Set(revoked.filter { $0.flags.contains(.accessRemoved) }.map(\.id)) == xs, "\(revoked)")
        #expect(!revoked.contains { $0.id == "xa" }, "\(revoked)")
        // Nothing more to do from there.
        #expect(try await pull().isEmpty)
        #expect(try liveIDs(local) == as_)
    }

    /// (c) A document an edit on the server moves out of the user's channels is purged during a
    /// continuous pull; one deleted on the server arrives as a deletion (its tombstone stays in
    /// its channel).
    @Test func aDocumentMovedOutOfTheUsersChannelsIsPurged() async throws {
        let scratch = try Scratch()
        let server = try await ChannelServer.start(users: #""u": {"password": "secret", "admin_channels": ["a", "b"]}"#)
        defer { Task { await server.stop() } }
        for id in ["m0", "m1", "m2", "m3"] { try await server.put(id, #"{"channels": ["a"], "title": "\#(id)"}"#) }
        let local = try scratch.open("device")
        let (replicator, recorder, _) = start(local, server, .pull, user: "u", continuous: true)
        #expect(try await eventually { try liveIDs(local) == ["m0", "m1", "m2", "m3"] })
        // The first pull's events are published after its documents are stored.
        #expect(await eventually { recorder.documents.withLock { $0.count } == 4 })
        let mark = recorder.documents.withLock { $0.count }
        // m0 leaves for a channel u does not read; m1 moves to b, which u reads; m2 is deleted.
        let moved = try await server.put("m0", #"{"_rev": "\#(try await server.rev("m0"))", "channels": ["z"], "title": "moved"}"#)
        try await server.put("m1", #"{"_rev": "\#(try await server.rev("m1"))", "channels": ["b"], "title": "m1 in b"}"#)
        let (deleted, _) = try await server.admin("DELETE", "m2?rev=\(try await server.rev("m2"))")
        #expect(deleted == 200)
        #expect(try await eventually { try liveIDs(local) == ["m1", "m3"] && local.document(withID: "m1")?["title"] == "m1 in b" },
                "\(shown(local))")
        #expect(try await local.revisionTree(withID: "m0") == nil, "purged, not deleted")
        let m2 = try #require(try await local.revisionTree(withID: "m2"), "the deletion arrived as a tombstone")
        #expect(m2.revisions.first { $0.revisionID == m2.currentRevisionID }?.isDeleted == true)
        #expect(await eventually { recorder.documents.withLock { Array($0.dropFirst(mark)) }.contains { $0.id == "m0" } })
        let after = recorder.documents.withLock { Array($0.dropFirst(mark)) }
        #expect(after.filter { $0.id == "m0" }.allSatisfy { $0.flags == .accessRemoved && $0.revisionID == moved }, "\(after)")
        #expect(after.filter { $0.id == "m2" }.allSatisfy { $0.flags == .deleted }, "\(after)")
        #expect(!after.contains { $0.id == "m1" && $0.flags.contains(.accessRemoved) }, "\(after)")
        replicator.stop()
        #expect(await replicator.waitUntilStopped().error == nil)
    }

    /// (d) A push the sync function refuses in part: each refused document is reported with its
    /// error, the rest stored.
    @Test func aPushTheSyncFunctionRefusesInPart() async throws {
        let scratch = try Scratch()
        let server = try await ChannelServer.start(users: #""u": {"password": "secret", "admin_channels": ["a"]}, "v": {"password": "secret", "admin_channels": ["a", "vault"]}"#)
        defer { Task { await server.stop() } }
        let local = try scratch.open("device")
        for i in 0 ..< 6 { try await local.saveDocument(MutableDocument(id: "ok\(i)", data: ["channels": ["a"], "n": .int(Int64(i))])) }
        try await local.saveDocument(MutableDocument(id: "ban1", data: ["type": "banned", "channels": ["a"]]))
        try await local.saveDocument(MutableDocument(id: "ban2", data: ["type": "banned"]))
        try await local.saveDocument(MutableDocument(id: "sec1", data: ["type": "secret", "channels": ["a"]]))
        // A channel u cannot read is still one it may write to.
        try await local.saveDocument(MutableDocument(id: "elsewhere", data: ["channels": ["z"]]))
        let (replicator, recorder, _) = start(local, server, .push, user: "u", continuous: false)
        #expect(await replicator.waitUntilStopped().error == nil)
        #expect(await eventually { recorder.activities.last == .stopped })
        #expect(recorder.documents.withLock { $0.count } == 10)
        let docs = recorder.documents.withLock { $0 }
        let failed = docs.filter { $0.error != nil }
        #expect(Set(failed.map(\.id)) == ["ban1", "ban2", "sec1"], "\(docs)")
        #expect(failed.allSatisfy { $0.error?.code == .rejected && $0.error?.underlying?.code == .forbidden }, "\(failed)")
        #expect(failed.first { $0.id == "ban1" }?.error?.message.contains("banned ban1") == true, "\(failed)")
        #expect(failed.first { $0.id == "sec1" }?.error?.message.contains("missing channel access") == true, "\(failed)")
        for i in 0 ..< 6 { #expect(try await server.admin("GET", "ok\(i)").body["n"] == .int(Int64(i))) }
        #expect(try await server.admin("GET", "elsewhere").status == 200)
        for id in ["ban1", "ban2", "sec1"] { #expect(try await server.admin("GET", id).status == 404, "\(id)") }
        // The user with vault pushes sec1 (from the start: the checkpoint is past the refused
        // revisions, which are not sent again otherwise); the banned ones stay refused.
        let (again, recorded, _) = start(local, server, .push, user: "v", continuous: false, reset: true)
        #expect(await again.waitUntilStopped().error == nil)
        #expect(await eventually { recorded.activities.last == .stopped })
        #expect(try await server.admin("GET", "sec1").status == 200)
        #expect(try await server.admin("GET", "ban1").status == 404)
        #expect(Set(recorded.documents.withLock { $0.filter { $0.error != nil }.map(\.id) }) == ["ban1", "ban2"])
    }

    /// (e) Seed 003's server-side filter: `_design/grocery` with `filters.sharedItems`, pulled as
    /// `grocery/sharedItems` with parameters (`req.query`); a deletion that keeps its fields passes
    /// the filter, a plain one does not.
    @Test func seed003SharedItemsFilterOnTheServer() async throws {
        let scratch = try Scratch()
        let server = try await ChannelServer.start(users: #""reader": {"password": "secret", "admin_channels": ["*"]}, "u": {"password": "secret", "admin_channels": ["list"]}"#)
        defer { Task { await server.stop() } }
        try await server.put("_design/grocery", #"""
            {"filters": {"sharedItems": "function(doc, req) { if (!doc.shared) return false; return !req.query.owner || doc.owner == req.query.owner; }"}}
            """#)
        let items: [(String, Bool, String, String)] = [("i0", true, "ann", "list"), ("i1", true, "bob", "list"), ("i2", false, "ann", "list"),
                                                      ("i3", true, "ann", "list"), ("i4", false, "bob", "list"), ("i5", true, "ann", "other")]
        for (id, shared, owner, channel) in items {
            try await server.put(id, #"{"shared": \#(shared), "owner": "\#(owner)", "channels": ["\#(channel)"], "text": "item \#(id)"}"#)
        }
        let anns = try scratch.open("anns")
        let annFilter: (inout ReplicatorConfiguration) -> Void = {
            $0.filterName = "grocery/sharedItems"
            $0.filterParameters = ["owner": "ann"]
        }
        #expect(await replicate(anns, server.url, .pull, user: "reader", configure: annFilter).error == nil)
        #expect(try liveIDs(anns) == ["i0", "i3", "i5"])
        #expect(try await anns.document(withID: "i3")?["text"] == "item i3")
        let shared = try scratch.open("shared")
        #expect(await replicate(shared, server.url, .pull, user: "reader") { $0.filterName = "grocery/sharedItems" }.error == nil)
        #expect(try liveIDs(shared) == ["i0", "i1", "i3", "i5"])
        // Within a user's channels: u reads list, not other.
        let usersOwn = try scratch.open("users-own")
        #expect(await replicate(usersOwn, server.url, .pull, user: "u", configure: annFilter).error == nil)
        #expect(try liveIDs(usersOwn) == ["i0", "i3"])

        // Deleting under a filtered pull: i0's tombstone keeps its fields and reaches the device;
        // i3's plain tombstone fails the filter and does not.
        try await server.put("i0", #"{"_rev": "\#(try await server.rev("i0"))", "_deleted": true, "shared": true, "owner": "ann", "channels": ["list"]}"#)
        let (status, _) = try await server.admin("DELETE", "i3?rev=\(try await server.rev("i3"))")
        #expect(status == 200)
        #expect(await replicate(anns, server.url, .pull, user: "reader", configure: annFilter).error == nil)
        #expect(try liveIDs(anns) == ["i3", "i5"])
        #expect(try await anns.revisionTree(withID: "i0") != nil, "i0 deleted, not purged")
    }
}
