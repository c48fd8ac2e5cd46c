import AsyncHTTPClient
import Foundation
import NIOCore
@_spi(Replication) import Settee
import SetteeHTTP
@_spi(Replication) import SetteeReplicator
@testable import SetteeServer
import Synchronization
import Testing

struct LocalWins: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? { conflict.localDocument }
}

struct RemoteWins: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? { conflict.remoteDocument }
}

/// Seed 002's merge: the union of both sides, the local value kept for a key in both.
struct Merge: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? {
        let local = conflict.localDocument?.toDictionary() ?? [:]
        let remote = conflict.remoteDocument?.toDictionary() ?? [:]
        return MutableDocument(id: conflict.documentID, data: local.merging(remote) { current, _ in current }).toDocument()
    }
}

struct Deleting: ConflictResolver {
    func resolve(_ conflict: Conflict) throws -> Document? { nil }
}

/// What a CountingPeer saw, shared by it and its configured copy.
final class Counter: Sendable {
    let inserted = Mutex<[String]>([])
    let insertCalls = Mutex(0)
    let onInsert = Mutex<(@Sendable (Int) -> Void)?>(nil)
}

/// A peer that counts the documents inserted into it and can act on the n-th insertion.
struct CountingPeer: ReplicationPeer {
    let inner: any ReplicationPeer
    let counter: Counter
    var identifier: String { inner.identifier }
    func configured(for configuration: ReplicatorConfiguration) -> any ReplicationPeer {
        CountingPeer(inner: inner.configured(for: configuration), counter: counter)
    }
    func info() async throws -> PeerInfo { try await inner.info() }
    func changes(_ request: ChangesRequest) async throws -> ChangesPage { try await inner.changes(request) }
    func waitForChanges(after sequence: ReplicationSequence) async throws { try await inner.waitForChanges(after: sequence) }
    func revsDiff(_ revisions: [String: [String]]) async throws -> [String: RevsDiffResult] { try await inner.revsDiff(revisions) }
    func revisions(_ requests: [RevisionRequest]) async throws -> [ReplicatedRevision] { try await inner.revisions(requests) }
    func missingBlobs(_ digests: [String]) async throws -> [String] { try await inner.missingBlobs(digests) }
    func blob(withDigest digest: String) async throws -> Blob? { try await inner.blob(withDigest: digest) }
    func saveBlob(_ blob: Blob) async throws { try await inner.saveBlob(blob) }
    func insertRevisions(_ revisions: [ReplicatedRevision]) async throws -> [RevisionInsertOutcome] {
        let outcomes = try await inner.insertRevisions(revisions)
        counter.inserted.withLock { $0 += revisions.map(\.documentID) }
        let n = counter.insertCalls.withLock { $0 += 1; return $0 }
        counter.onInsert.withLock { $0 }?(n)
        return outcomes
    }
    func localDocument(withID id: String) async throws -> [String: JSONValue]? { try await inner.localDocument(withID: id) }
    func saveLocalDocument(_ properties: [String: JSONValue], withID id: String) async throws {
        try await inner.saveLocalDocument(properties, withID: id)
    }
}

/// The replicator's scenarios that make sense over HTTP, against `settee serve` on a socket.
@Suite struct HTTPScenarioTests {
    @Test(arguments: ["local", "remote", "merge", "delete"])
    func seed002ResolversThroughTheServer(_ kind: String) async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        let a = try scratch.open("a"), b = try scratch.open("b")
        try await a.saveDocument(MutableDocument(id: "doc", data: ["v": 0, "shared": true]))
        #expect(await replicate(a, server.url(), .push).error == nil)
        #expect(await replicate(b, server.url(), .pull, user: "naomi").error == nil)
        let mine = try #require(try await a.document(withID: "doc")).toMutable()
        mine.setData(["v": 1, "mine": "a"])
        try await a.saveDocument(mine)
        let theirs = try #require(try await b.document(withID: "doc")).toMutable()
        theirs.setData(["v": 2, "theirs": "b"])
        try await b.saveDocument(theirs)
        #expect(await replicate(b, server.url(), .push, user: "naomi").error == nil)

        let resolver: any ConflictResolver = switch kind {
        case "local": LocalWins()
        case "remote": RemoteWins()
        case "merge": Merge()
        default: Deleting()
        }
        #expect(await replicate(a, server.url(), .pushAndPull) { $0.conflictResolver = resolver }.error == nil)
        let doc = try await a.document(withID: "doc")
        switch kind {
        case "local": #expect(doc?.toDictionary() == ["v": 1, "mine": "a"])
        case "remote": #expect(doc?.toDictionary() == ["v": 2, "theirs": "b"])
        case "merge": #expect(doc?.toDictionary() == ["v": 1, "mine": "a", "theirs": "b"])
        default: #expect(doc == nil)
        }
        #expect(try await a.revisionTree(withID: "doc")?.isConflicted == false)
        // The resolution went to the server as revisions: the other device gets the same.
        #expect(await replicate(b, server.url(), .pushAndPull, user: "naomi").error == nil)
        #expect(try snapshot(a) == snapshot(b))
        #expect(try await b.revisionTree(withID: "doc")?.isConflicted == false)
    }

    @Test func filteredPullWithParametersAndAFilteredDelete() async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        try server.server.registerFilter(named: "jobs/by_worker", in: "db") { doc, params in
            doc["worker_id"] != nil && doc["worker_id"] == params["worker_id"]
        }
        let office = try scratch.open("office"), device = try scratch.open("device")
        for i in 0 ..< 12 {
            try await office.saveDocument(MutableDocument(id: "job-\(i)", data: ["worker_id": .string("w-\(i % 3)"), "n": .int(Int64(i))]))
        }
        #expect(await replicate(office, server.url(), .push).error == nil)
        let config: (inout ReplicatorConfiguration) -> Void = {
            $0.filterName = "jobs/by_worker"
            $0.filterParameters = ["worker_id": "w-1"]
        }
        #expect(await replicate(device, server.url(), .pull, user: "naomi", configure: config).error == nil)
        #expect(try device.count == 4)
        #expect(try await device.document(withID: "job-1") != nil)
        #expect(try await device.document(withID: "job-2") == nil)

        // Seed 003's filtered delete: the tombstone that keeps worker_id passes the filter and
        // reaches the device; a plain tombstone does not.
        let kept = try #require(try await office.document(withID: "job-1")).toMutable()
        kept.setData(["worker_id": "w-1", "deleted_by": "ops"])
        kept.isDeletion = true
        try await office.saveDocument(kept)
        try await office.deleteDocument(try #require(try await office.document(withID: "job-4")))
        #expect(await replicate(office, server.url(), .push).error == nil)
        #expect(await replicate(device, server.url(), .pull, user: "naomi", configure: config).error == nil)
        #expect(try await device.document(withID: "job-1") == nil)
        #expect(try await device.document(withID: "job-4") != nil)

        // An unknown filter stops the run with the server's answer.
        let bad = await replicate(device, server.url(), .pull, user: "naomi") { $0.filterName = "nope/nope" }
        #expect(bad.error?.code == .peerFailed)
        // Document IDs are the server's _doc_ids filter.
        let picked = try scratch.open("picked")
        #expect(await replicate(picked, server.url(), .pull, user: "naomi") { $0.documentIDs = ["job-3", "job-5"] }.error == nil)
        #expect(try picked.count == 2)
    }

    @Test func aReplicationStoppedMidBatchResumesFromItsCheckpoint() async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        let a = try scratch.open("a")
        try a.inBatch {
            for i in 0 ..< 1000 { try a.saveDocument(MutableDocument(id: String(format: "doc-%05d", i), data: ["n": .int(Int64(i))])) }
        }
        let counter = Counter()
        var config = ReplicatorConfiguration(database: a, target: CountingPeer(inner: URLEndpoint(url: server.url()), counter: counter))
        config.replicatorType = .push
        config.batchSize = 100
        config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
        let replicator = Replicator(config: config)
        // The stop arrives while the fourth batch is being inserted: that batch is acknowledged.
        counter.onInsert.withLock { $0 = { n in if n == 4 { replicator.stop() } } }
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        let first = counter.inserted.withLock { $0 }
        #expect(first.count == 400)
        let served = try #require(server.server.database(named: "db")?.database)
        #expect(try served.count == 400)

        counter.onInsert.withLock { $0 = nil }
        counter.inserted.withLock { $0 = [] }
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        let second = counter.inserted.withLock { $0 }
        #expect(try served.count == 1000)
        #expect(Set(second).isDisjoint(with: first) && second.count == 600)
    }
}

/// `POST /_replicate` on the admin port, driven by Settee's replicator.
@Suite struct ReplicateEndpointTests {
    @Test func oneShotAndContinuousReplicationsBetweenServers() async throws {
        let scratch = try Scratch()
        let a = try await LiveServer.start()
        let b = try await LiveServer.start()
        defer { Task { await a.stop(); await b.stop() } }
        let source = try #require(a.server.database(named: "db")?.database)
        let target = try #require(b.server.database(named: "db")?.database)
        for i in 0 ..< 30 { try await source.saveDocument(MutableDocument(id: "d\(i)", data: ["n": .int(Int64(i))])) }
        _ = scratch
        let remote = "http://molly:secret@127.0.0.1:\(b.port)/db"
        func post(_ port: Int, _ json: String) async throws -> (Int, JSONValue) {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/_replicate")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
            // A deadline for a hung server, not a timing: a loaded two-core machine can take a while.
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(600))
            let body = try await response.body.collect(upTo: 1 << 20)
            return (Int(response.status.code), try JSONValue(parsing: Array(body.readableBytesView)))
        }
        // One-shot push from a served database to a URL.
        let (status, answer) = try await post(a.adminPort, #"{"source":"db","target":"\#(remote)"}"#)
        #expect(status == 200, "\(answer)")
        #expect(answer.objectValue?["docs_written"] == 30)
        #expect(try target.count == 30)
        // Continuous pull from a URL into a served database: later changes follow; cancel stops it.
        try await target.saveDocument(MutableDocument(id: "from-b", data: [:]))
        let (started, job) = try await post(a.adminPort, #"{"source":{"url":"\#(remote)"},"target":"db","continuous":true}"#)
        #expect(started == 202, "\(job)")
        #expect(try await eventually { try source.document(withID: "from-b") != nil })
        try await target.saveDocument(MutableDocument(id: "later", data: [:]))
        #expect(try await eventually { try source.document(withID: "later") != nil })
        let (cancelled, _) = try await post(a.adminPort, #"{"source":{"url":"\#(remote)"},"target":"db","continuous":true,"cancel":true}"#)
        #expect(cancelled == 200)
        let (again, _) = try await post(a.adminPort, #"{"source":{"url":"\#(remote)"},"target":"db","continuous":true,"cancel":true}"#)
        #expect(again == 404)
        // Errors: wrong credentials 401, a missing remote database 404, two URLs 400, the public port 403.
        #expect(try await post(a.adminPort, #"{"source":"db","target":"http://molly:nope@127.0.0.1:\#(b.port)/db"}"#).0 == 401)
        #expect(try await post(a.adminPort, #"{"source":"db","target":"http://molly:secret@127.0.0.1:\#(b.port)/nope"}"#).0 == 404)
        #expect(try await post(a.port, #"{"source":"db","target":"\#(remote)"}"#).0 == 403)
        // Two URLs, as CouchDB 3 takes them. Two of this server (either port): its databases,
        // the target created by create_target.
        let here = "http://127.0.0.1:\(a.adminPort)", herePublic = "http://molly:secret@127.0.0.1:\(a.port)"
        let (mirrored, mirror) = try await post(a.adminPort, #"{"source":"\#(herePublic)/db","target":"\#(here)/mirror","create_target":true}"#)
        #expect(mirrored == 200, "\(mirror)")
        let mirrorDB = try #require(a.server.database(named: "mirror")?.database)
        #expect(try mirrorDB.count == source.count && source.count == 32)
        // Two of another server: through a relay, histories as they are; create_target there
        // is a PUT on the target's URL.
        let (copied, copy) = try await post(a.adminPort, #"{"source":"\#(remote)","target":"http://127.0.0.1:\#(b.adminPort)/copy","create_target":true}"#)
        #expect(copied == 200, "\(copy)")
        #expect(copy.objectValue?["docs_written"] == 32)
        let copyDB = try #require(b.server.database(named: "copy")?.database)
        #expect(try copyDB.count == 32)
        for id in ["d0", "from-b", "later"] {
            let (copied, original) = (try await copyDB.revisionTree(withID: id), try await target.revisionTree(withID: id))
            #expect(copied != nil && copied?.currentRevisionID == original?.currentRevisionID)
        }
        // Without create_target a missing target is 404, as before.
        #expect(try await post(a.adminPort, #"{"source":"\#(remote)","target":"http://127.0.0.1:\#(b.adminPort)/none"}"#).0 == 404)
    }
}

/// A server's validation refusing pushed revisions: each refusal is that document's event, the
/// rest go in.
@Suite struct RejectionTests {
    @Test func aRevisionTheServerRefusesIsReportedForItsDocument() async throws {
        let scratch = try Scratch()
        let served = try scratch.open("served")
        served.addValidation(named: "created_at") { new, _ in
            if !new.isDeleted, new["created_at"] == "yesterday" { throw SetteeError.forbidden("invalid date") }
        }
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = nil
        config.log = []
        let server = try SetteeServer(serving: served, as: "db", configuration: config,
                                      users: ["GUEST": .init(disabled: false, adminChannels: ["*"])])
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let running = Task { try await server.run { ports.continuation.yield($0) } }
        var iterator = ports.stream.makeAsyncIterator()
        let port = try #require(await iterator.next()).publicPort
        defer { running.cancel() }

        let device = try scratch.open("device")
        for i in 0 ..< 10 {
            try await device.saveDocument(MutableDocument(id: "doc-\(i)", data: ["created_at": .string(i == 3 || i == 7 ? "yesterday" : "2026-11-26")]))
        }
        var replicatorConfig = ReplicatorConfiguration(database: device, target: URLEndpoint(url: URL(string: "http://127.0.0.1:\(port)/db")!))
        replicatorConfig.replicatorType = .push
        replicatorConfig.logHandler = { @Sendable _, _ in }
        let replicator = Replicator(config: replicatorConfig)
        let recorder = Recorder()
        recorder.attach(replicator)
        replicator.start()
        #expect(await replicator.waitUntilStopped().error == nil)
        #expect(try served.count == 8)
        #expect(await eventually { recorder.documents.withLock { $0.count } == 10 })
        let failed = recorder.documents.withLock { $0.filter { $0.error != nil } }
        #expect(Set(failed.map(\.id)) == ["doc-3", "doc-7"])
        #expect(failed.allSatisfy { $0.error?.code == .rejected && $0.error?.underlying?.code == .forbidden })
    }
}
