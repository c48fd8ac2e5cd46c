import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing
@_spi(Replication) @_spi(Server) import Settee
import SetteeCrashKit
import SetteeHTTP
import SetteeStorage
import SetteeReplicator
@testable import SetteeServer

/// The server's own edges against an attacker, on live servers on loopback: replication URLs,
/// branches written over documents a user cannot read, requests that would hold a connection,
/// paths outside the data, and the descriptors connections may take.
@Suite struct HostileServerTests {
    static let config = """
        {"databases": {"db": {"server": "walrus:",
          "users": {"GUEST": {"disabled": true},
                    "alice": {"password": "pw", "admin_channels": ["red"]},
                    "bob": {"password": "pw", "admin_channels": ["red", "blue"]}}},
                       "copy": {"server": "walrus:"}}}
        """

    /// A URL's port past 16 bits is refused where the URL arrives (`_replicate`, a
    /// `_replicator` document, which then fails, even when started again at the next start),
    /// and by the library's `URLEndpoint` (the replicator stops with an error), never a trap.
    @Test func replicationURLsWithImpossiblePortsFailCleanly() async throws {
        let directory = NSTemporaryDirectory() + "settee-ports-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = try ServerConfiguration(json: Self.config)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        config.replicator = directory
        for round in 0 ..< 2 {
            let server = try SetteeServer(configuration: config)
            try await running(server) { _, admin in
                if round == 0 {
                    for target in [#""http://127.0.0.1:70000/db""#, #"{"url": "http://127.0.0.1:99999/db"}"#, #""http://127.0.0.1:0/db""#,
                                   #""http:///db""#, #""ftp://127.0.0.1/db""#] {
                        let r = try await admin.send(.post, "/_replicate", json: #"{"source": "db", "target": \#(target)}"#)
                        #expect(r.status == .badRequest, "\(target): \(r.status) \(r.text)")
                    }
                    try await admin.send(.put, "/_replicator/far", json: #"{"source": "db", "target": "http://127.0.0.1:99999/db", "continuous": true}"#)
                }
                let far = try await replicationState(admin, "far", until: "failed")
                #expect(far["_replication_state_reason"]?.stringValue?.contains("99999") == true, "\(far)")
                #expect(try await admin.send(.get, "/db").status == .ok)
            }
        }
        let db = try Database(name: "local", config: DatabaseConfiguration(directory: directory + "-local"))
        defer {
            try? db.close()
            try? FileManager.default.removeItem(atPath: directory + "-local")
        }
        let replicator = Replicator(config: ReplicatorConfiguration(database: db, target: URLEndpoint(url: URL(string: "http://127.0.0.1:70000/db")!)))
        replicator.start()
        let status = await replicator.waitUntilStopped()
        #expect(status.error?.code == .invalidRequest, "\(String(describing: status.error))")
    }

    /// A `_replicate` naming this server's own public URL with a user's credentials goes over
    /// HTTP as that user: a wrong password copies nothing, and a user copies only what it may
    /// read.
    @Test func replicatingToThisServersURLAppliesTheCredentials() async throws {
        var config = try ServerConfiguration(json: Self.config)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        let server = try SetteeServer(configuration: config)
        try await whileRunning(server) { ports in
            let admin = TestClient(host: "127.0.0.1", port: try #require(ports.adminPort), configuration: .init(timeout: liveClientTimeout))
            admin.connect()
            defer { Task { try? await admin.shutdown() } }
            let c = LiveClient(client: admin)
            try await put(c, "red1", #"{"channels": ["red"]}"#)
            try await put(c, "blue1", #"{"channels": ["blue"]}"#)
            let wrong = try await c.send(.post, "/_replicate",
                                         json: #"{"source": "http://alice:nope@127.0.0.1:\#(ports.publicPort)/db", "target": "copy"}"#)
            #expect(wrong.status == .unauthorized, "\(wrong.text)")
            #expect(try await c.send(.get, "/copy")["doc_count"] == 0)
            let header = "Basic " + Data("alice:nope".utf8).base64EncodedString()
            let viaHeader = try await c.send(.post, "/_replicate", json: """
                {"source": {"url": "http://127.0.0.1:\(ports.publicPort)/db", "headers": {"Authorization": "\(header)"}}, "target": "copy"}
                """)
            #expect(viaHeader.status == .unauthorized, "\(viaHeader.text)")
            let alice = try await c.send(.post, "/_replicate",
                                         json: #"{"source": "http://alice:pw@127.0.0.1:\#(ports.publicPort)/db", "target": "copy"}"#)
            #expect(alice.status == .ok, "\(alice.text)")
            #expect(try await c.send(.get, "/copy/red1").status == .ok)
            #expect(try await c.send(.get, "/copy/blue1").status == .notFound)
            // Without credentials the URL is the database itself.
            let plain = try await c.send(.post, "/_replicate", json: #"{"source": "http://127.0.0.1:\#(ports.publicPort)/db", "target": "copy"}"#)
            #expect(plain.status == .ok, "\(plain.text)")
            #expect(try await c.send(.get, "/copy/blue1").status == .ok)
        }
    }

    /// Under the default sync function a user cannot push a branch onto a document whose
    /// current revision it cannot read: `99-beef` from alice (red) does not become the winner
    /// of bob's blue document, in `_bulk_docs` or a PUT; a branch of a document she reads, a
    /// new document, and a revision the document already holds are accepted.
    @Test func aBranchOverAHiddenRevisionIsRefused() async throws {
        let server = try channelServer(Self.config)
        try await withPorts(server) { pub, admin in
            let secret = try await put(admin, "bobs", #"{"channels": ["blue"], "pin": "1234"}"#)
            let alice = HostileClientTests.alice
            let branch = #"{"new_edits": false, "docs": [{"_id": "bobs", "_rev": "99-beef", "channels": ["red"], "pin": "mine"}]}"#
            let r = try await pub.send(.post, "/db/_bulk_docs", json: branch, headers: alice)
            #expect(r.status == .created, "\(r.text)")
            #expect((try? r.json)?.arrayValue?.first?["error"] == "forbidden", "\(r.text)")
            let single = try await pub.send(.put, "/db/bobs?new_edits=false", json: #"{"_rev": "99-beef", "channels": ["red"]}"#, headers: alice)
            #expect(single.status == .forbidden, "\(single.text)")
            #expect(try await currentRev(admin, "bobs") == secret)
            #expect(try await admin.send(.get, "/db/bobs?open_revs=all").text.contains("99-beef") == false)
            // What she may do.
            try await put(admin, "shared", #"{"channels": ["red"]}"#)
            let ok = #"{"new_edits": false, "docs": [{"_id": "shared", "_rev": "5-cafe", "channels": ["red"]}, {"_id": "hers", "_rev": "3-abc", "channels": ["red"]}, {"_id": "bobs", "_rev": "\#(secret)", "channels": ["blue"], "pin": "1234"}]}"#
            let accepted = try await pub.send(.post, "/db/_bulk_docs", json: ok, headers: alice)
            #expect(accepted.status == .created && ((try? accepted.json)?.arrayValue ?? []).allSatisfy { $0["error"] == nil }, "\(accepted.text)")
            #expect(try await currentRev(admin, "shared") == "5-cafe")
            // Bob reads blue: his branch lands.
            let bobs = try await pub.send(.put, "/db/bobs?new_edits=false", json: #"{"_rev": "99-beef", "channels": ["blue"]}"#,
                                          headers: HostileClientTests.bob)
            #expect(bobs.status == .created, "\(bobs.text)")
        }
    }

    /// A CONNECT is answered (405, or 400 for a target that is no path) and its connection
    /// closed at once (the HTTP decoder would read what follows as a tunnel's bytes and never
    /// answer again: idle connections held so would fill the listener); a TRACE leaves the
    /// connection serving.
    @Test func connectEndsItsConnection() async throws {
        let server = try channelServer(Self.config)
        try await whileRunning(server) { ports in
            var buffer = [UInt8](repeating: 0, count: 4096)
            for target in ["/db", "/", "example.com:443", "127.0.0.1:\(ports.publicPort)"] {
                // Long waits: the suite runs its tests in parallel on two cores.
                let fd = try loopbackSocket(port: ports.publicPort, timeout: 300)
                defer { close(fd) }
                let request = "CONNECT \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                _ = request.withCString { send(fd, $0, strlen($0), 0) }
                var received = [UInt8]()
                let started = ContinuousClock.now
                var closed = false
                var failure: Int32 = 0
                while ContinuousClock.now - started < .seconds(300) {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n == 0 { closed = true; break }
                    // Other tests' child processes end with signals: a read they interrupt is tried again.
                    if n < 0 { if errno == EINTR { continue }; failure = errno; break }
                    received += buffer[0 ..< n]
                }
                let text = String(decoding: received, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 405") || text.hasPrefix("HTTP/1.1 400"), "\(target): \(text)")
                #expect(text.lowercased().contains("connection: close"), "\(target): \(text)")
                #expect(closed, "\(target): the connection stayed open (errno \(failure))")
            }
            // TRACE: answered, and the same connection answers the next request.
            let kept = try loopbackSocket(port: ports.publicPort, timeout: 300)
            defer { close(kept) }
            let two = "TRACE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /_up HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            _ = two.withCString { send(kept, $0, strlen($0), 0) }
            var got = [UInt8]()
            while !String(decoding: got, as: UTF8.self).contains("\"ok\"") {
                let n = recv(kept, &buffer, buffer.count, 0)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                got += buffer[0 ..< n]
            }
            #expect(String(decoding: got, as: UTF8.self).contains("\"status\":\"ok\""), "\(String(decoding: got, as: UTF8.self))")
        }
    }

    /// Deleting a conflict's losing leaf answers the new tombstone's revision (the child of that
    /// leaf), and the winner stays.
    @Test func deletingALosingLeafAnswersTheTombstone() async throws {
        let server = try channelServer(Self.config)
        try await withPorts(server) { _, admin in
            let docs = #"{"new_edits": false, "docs": [{"_id": "c", "_rev": "2-aaa", "_revisions": {"start": 2, "ids": ["aaa", "root"]}, "v": 1}, {"_id": "c", "_rev": "3-bbb", "_revisions": {"start": 3, "ids": ["bbb", "xxx", "root"]}, "v": 2}]}"#
            #expect(try await admin.send(.post, "/db/_bulk_docs", json: docs).status == .created)
            #expect(try await currentRev(admin, "c") == "3-bbb")
            let r = try await admin.send(.delete, "/db/c?rev=2-aaa")
            #expect(r.status == .ok, "\(r.text)")
            let tombstone = try #require(r["rev"]?.stringValue)
            #expect(tombstone.hasPrefix("3-") && tombstone != "3-bbb", "\(r.text)")
            #expect(r.headers[.eTag] == "\"\(tombstone)\"")
            #expect(try await admin.send(.get, "/db/c?rev=\(tombstone)")["_deleted"] == true)
            #expect(try await currentRev(admin, "c") == "3-bbb")
        }
    }

    /// A database made over HTTP keeps its files in memory or under the configuration's data
    /// directories: `..`, another directory of the host, or a link out of the data are refused.
    @Test func databasesMadeOverHTTPStayInTheData() async throws {
        let base = NSTemporaryDirectory() + "settee-confine-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: base) }
        let data = base + "/data"
        let outside = base + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: data + "/escape", withDestinationPath: outside)
        var config = try ServerConfiguration(json: #"{"databases": {"db": {"server": "\#(data)"}}}"#)
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        let server = try SetteeServer(configuration: config)
        try await withPorts(server) { _, admin in
            for path in ["data/../evil2", data + "/../outside", outside, "/tmp", data + "/escape", data + "/escape/deeper", "relative"] {
                let r = try await admin.send(.put, "/evil", json: #"{"server": "\#(path)"}"#)
                #expect(r.status == .forbidden, "\(path): \(r.status) \(r.text)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
            #expect(try await admin.send(.put, "/inside", json: #"{"server": "\#(data)/more"}"#).status == .created)
            #expect(try await admin.send(.put, "/memory", json: #"{"server": "walrus:"}"#).status == .created)
            #expect(try await admin.send(.put, "/plain").status == .created)
        }
    }

    /// A database whose disk fills answers writes 507 with a plain reason (no system call, no
    /// error number) and `Retry-After`, serves reads meanwhile, and takes writes again by itself
    /// once space is freed; nothing acknowledged is lost.
    @Test func aFullDiskAnswers507AndHealsByItself() async throws {
        let directory = NSTemporaryDirectory() + "settee-full-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = FullDisk(capacity: 1 << 40)
        let db = try Database(name: "db", config: DatabaseConfiguration(directory: directory),
                              openFile: { (path) throws(StorageError) in try disk.open(path) })
        defer { try? db.close() }
        try await db.saveDocument(MutableDocument(id: "first"))
        disk.capacity = disk.used + (64 << 10)
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = "127.0.0.1:0"
        config.log = []
        let server = try SetteeServer(serving: db, as: "db", configuration: config,
                                      users: ["GUEST": .init(disabled: false, adminChannels: ["*"])])
        try await withPorts(server) { pub, admin in
            var random = SplitMix(seed: 3)
            func noise() -> String { String((0 ..< 4000).map { _ in Character(UnicodeScalar(UInt8(97 + random.next(below: 26)))) }) }
            var acknowledged: [String] = []
            var full: TestResponse?
            for i in 0 ..< 2000 {
                let docs = (0 ..< 4).map { #"{"_id": "d\#(i)-\#($0)", "pad": "\#(noise())"}"# }.joined(separator: ",")
                let r = try await pub.send(.post, "/db/_bulk_docs", json: #"{"docs": [\#(docs)]}"#)
                if r.status == .created, let rows = (try? r.json)?.arrayValue {
                    if let failed = rows.first(where: { $0["error"] != nil }) {
                        #expect(failed["error"] == "insufficient_storage", "\(failed)")
                        full = r
                        break
                    }
                    acknowledged += rows.compactMap { $0["id"]?.stringValue }
                } else {
                    full = r
                    break
                }
            }
            let refused = try #require(full, "the disk never filled")
            #expect(!refused.text.contains("errno") && !refused.text.contains("pwrite") && !refused.text.lowercased().contains("no space left"),
                    "\(refused.text)")
            let single = try await pub.send(.put, "/db/more", json: #"{"pad": "\#(noise())\#(noise())\#(noise())"}"#)
            #expect(single.status.code == 507 && single["error"] == "insufficient_storage" && single.headers[.retryAfter] != nil,
                    "\(single.status) \(single.text)")
            // Reads go on.
            #expect(try await pub.send(.get, "/db/first").status == .ok)
            #expect(try await pub.send(.get, "/db/_all_docs?limit=5").status == .ok)
            #expect(try await admin.send(.get, "/db").status == .ok)
            // Space is back: the same server and database take writes.
            disk.capacity = 1 << 40
            #expect(try await pub.send(.put, "/db/more", json: #"{"pad": "x"}"#).status == .created)
            for id in acknowledged.shuffled().prefix(50) { #expect(try await pub.send(.get, "/db/\(id)").status == .ok, "\(id)") }
            #expect(try await admin.send(.get, "/db")["doc_count"]?.intValue == acknowledged.count + 2)
        }
    }

    /// The connections each listener may hold come from the descriptors the system grants:
    /// both listeners and the databases' files fit, and the admin port keeps a share.
    @Test func connectionLimitsFitTheDescriptors() {
        for (descriptors, databases) in [(1024, 1), (1024, 10), (256, 3), (100_000, 2), (64, 1)] {
            let (pub, admin) = SetteeServer.connectionLimits(descriptors: descriptors, configured: 2000, databases: databases)
            #expect(pub >= 16 && admin >= 8, "\(descriptors)")
            if descriptors >= 512 {
                #expect(pub + admin + 32 + 16 * databases <= descriptors, "\(descriptors), \(databases): \(pub) + \(admin)")
                #expect(admin >= (pub + admin) / 11, "\(descriptors): admin \(admin) of \(pub + admin)")
            }
            #expect(pub <= 2000 && admin <= 2000)
        }
        #expect(SetteeServer.connectionLimits(descriptors: nil, configured: 2000, databases: 1) == (2000, 2000))
        let unlimited = SetteeServer.connectionLimits(descriptors: 1024, configured: 0, databases: 1)
        #expect(unlimited.public > 0 && unlimited.public + unlimited.admin <= 1024)
    }

    /// A view whose map function is slow on some documents (a user writes many of them) costs
    /// the commit at most its map time (`mapTimePerCommit`): the rest of the rows are made after
    /// the commit, outside the write lock, and a read of the view waits for them, so another
    /// user's write goes through meanwhile and the view still answers every row.
    @Test func aSlowViewDoesNotHoldOtherWrites() async throws {
        let server = try channelServer(Self.config)
        try await withPorts(server) { pub, admin in
            let map = "function (doc) { if (doc.slow) { var t = Date.now(); while (Date.now() - t < 30) {} } if (doc.n !== undefined) emit(doc.n, null); }"
            try await put(admin, "_design/v", #"{"views": {"slow": {"map": "\#(map)"}}}"#)
            #expect(try await admin.send(.get, "/db/_design/v/_view/slow").status == .ok)
            let docs = (0 ..< 40).map { #"{"_id": "s\#($0)", "n": \#($0), "slow": true, "channels": ["red"]}"# }.joined(separator: ",")
            let started = ContinuousClock.now
            let bulk = try await pub.send(.post, "/db/_bulk_docs", json: #"{"docs": [\#(docs)]}"#, headers: HostileClientTests.alice)
            let bulkTook = ContinuousClock.now - started
            #expect(bulk.status == .created, "\(bulk.text)")
            let other = try await pub.send(.put, "/db/bobs-note", json: #"{"channels": ["blue"], "n": 1000}"#, headers: HostileClientTests.bob)
            #expect(other.status == .created, "\(other.text)")
            let view = try await admin.send(.get, "/db/_design/v/_view/slow")
            #expect(view.status == .ok && view.rows.count == 41, "\(view.text.prefix(300))")
            print("HostileServerTests: a bulk of 40 documents whose map takes 30 ms each returned in \(bulkTook) (1.2 s of map time)")
        }
    }
}
