import Foundation
@_spi(Replication) import Settee
import SetteeHTTP
import SetteeTestSupport
@_spi(Replication) import SetteeReplicator
@testable import SetteeServer
import Testing

/// The replicator over HTTP with `settee serve` on a real loopback socket.
@Suite struct URLEndpointTests {
    @Test func pushThenPullCarriesDocumentsDeletionsAndAttachments() async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        let molly = try scratch.open("molly")
        let naomi = try scratch.open("naomi")
        for i in 0 ..< 120 { try await molly.saveDocument(MutableDocument(id: "doc-\(i)", data: ["n": .int(Int64(i))])) }
        let photo = MutableDocument(id: "photo", data: ["title": "cat"])
        photo.setBlob(Blob(contentType: "image/png", data: Data((0 ..< 3000).map { UInt8($0 % 251) })), forKey: "image")
        photo.setValue(["a.txt": .object(Blob(contentType: "text/plain", data: Data("attached".utf8)).properties)], forKey: "_attachments")
        try await molly.saveBlob(Blob(contentType: "text/plain", data: Data("attached".utf8)))
        try await molly.saveDocument(photo)
        if let gone = try await molly.document(withID: "doc-7") { try await molly.deleteDocument(gone) }

        let pushed = await replicate(molly, server.url(), .push) { $0.batchSize = 50 }
        #expect(pushed.error == nil, "\(String(describing: pushed.error))")
        let pulled = await replicate(naomi, server.url(), .pull, user: "naomi") { $0.batchSize = 50 }
        #expect(pulled.error == nil, "\(String(describing: pulled.error))")
        let (a, b) = (try snapshot(naomi), try snapshot(molly))
        #expect(a == b)
        let copy = try #require(try await naomi.document(withID: "photo"))
        #expect(copy.blob(forKey: "image")?.content == Data((0 ..< 3000).map { UInt8($0 % 251) }))
        let attachment = try #require(copy.dictionary(forKey: "_attachments")?["a.txt"]?.objectValue)
        let attached = try await naomi.blob(withDigest: attachment["digest"]?.stringValue ?? "")
        #expect(attached?.content == Data("attached".utf8))
        // A second run with nothing new changes nothing.
        let seq = try naomi.lastSequence
        #expect(await replicate(naomi, server.url(), .pushAndPull, user: "naomi").error == nil)
        #expect(try naomi.lastSequence == seq)
    }

    @Test func theTwoDeviceConflictConvergesThroughTheServer() async throws {
        // Seed 004: Molly and Naomi edit DocumentA while apart; both sync with the server and end
        // with the same winner and the same tree.
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        let molly = try scratch.open("molly")
        let naomi = try scratch.open("naomi")
        try await molly.saveDocument(MutableDocument(id: "DocumentA", data: ["title": "Groceries", "items": ["milk"]]))
        #expect(await replicate(molly, server.url()).error == nil)
        #expect(await replicate(naomi, server.url(), user: "naomi").error == nil)
        let m = try #require(try await molly.document(withID: "DocumentA")).toMutable()
        m.setValue(["milk", "eggs"], forKey: "items")
        try await molly.saveDocument(m)
        let n = try #require(try await naomi.document(withID: "DocumentA")).toMutable()
        n.setString("Naomi's groceries", forKey: "title")
        try await naomi.saveDocument(n)
        for _ in 0 ..< 2 {
            #expect(await replicate(molly, server.url()).error == nil)
            #expect(await replicate(naomi, server.url(), user: "naomi").error == nil)
        }
        #expect(try snapshot(molly) == snapshot(naomi))
        let mine = try await molly.document(withID: "DocumentA")?.revisionID
        let hers = try await naomi.document(withID: "DocumentA")?.revisionID
        #expect(mine != nil && mine == hers)
    }

    @Test func wrongCredentialsStopWithAnAuthenticationError() async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        let db = try scratch.open("local")
        let status = await replicate(db, server.url(), password: "wrong")
        #expect(status.activity == .stopped)
        #expect(status.error?.code == .authenticationFailed)
        let anonymous = await replicate(db, server.url(), user: nil)
        #expect(anonymous.error?.code == .authenticationFailed)
        let missing = await replicate(db, server.url("nope"))
        #expect(missing.error?.code == .remoteDatabaseNotFound)
    }
}

/// Continuous replication over HTTP: changes flow both ways as they are made, and a server that
/// goes away sends the replicator offline until it is back.
@Suite struct ContinuousHTTPTests {
    @Test func aServerStoppedAndRestartedUnderAContinuousReplication() async throws {
        let scratch = try Scratch()
        let serverData = scratch.path + "/server"
        var server = try await LiveServer.start(directory: serverData)
        let port = server.port
        let molly = try scratch.open("molly")
        let (replicator, recorder) = startContinuous(molly, server.url(), .pushAndPull, wait: .milliseconds(500))
        #expect(await eventually { replicator.status.activity == .idle })
        for i in 0 ..< 20 { try await molly.saveDocument(MutableDocument(id: "before-\(i)", data: ["n": .int(Int64(i))])) }
        #expect(try await eventually { try server.server.database(named: "db")?.database.count == 20 })

        await server.stop()
        for i in 0 ..< 20 { try await molly.saveDocument(MutableDocument(id: "during-\(i)", data: ["n": .int(Int64(i))])) }
        #expect(await eventually { replicator.status.activity == .offline })
        #expect(replicator.status.error?.code == .unreachable)

        server = try await LiveServer.start(directory: serverData, port: port)
        #expect(try await eventually { try server.server.database(named: "db")?.database.count == 40 })
        #expect(await eventually { replicator.status.activity == .idle })
        // What the server receives from another client reaches this one too.
        let naomi = try scratch.open("naomi")
        try await naomi.saveDocument(MutableDocument(id: "from-naomi", data: ["hello": "molly"]))
        #expect(await replicate(naomi, server.url(), .push, user: "naomi").error == nil)
        #expect(try await eventually { try molly.document(withID: "from-naomi") != nil })
        replicator.stop()
        let final = await replicator.waitUntilStopped()
        #expect(final.error == nil)
        let seen = recorder.activities
        let offline = try #require(seen.firstIndex(of: .offline))
        #expect(seen[offline...].contains(.busy) && seen[offline...].contains(.idle))
        await server.stop()
    }
}

/// Large attachments go as their own multipart request and come back streamed to a file.
@Suite struct LargeAttachmentTests {
    @Test func aLargeAttachmentAndABlobInAPropertyRoundTrip() async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        defer { Task { await server.stop() } }
        let a = try scratch.open("a"), b = try scratch.open("b")
        var generator = SeededRandom(seed: 42)
        let big = Data((0 ..< 3_000_000).map { _ in UInt8.random(in: 0 ... 255, using: &generator) })
        let video = Blob(contentType: "video/mp4", data: big)
        try await a.saveBlob(video)
        let doc = MutableDocument(id: "clip", data: ["title": "beach"])
        doc.setValue(["clip.mp4": .object(video.properties)], forKey: "_attachments")
        doc.setBlob(Blob(contentType: "image/jpeg", data: Data(big.prefix(1_500_000))), forKey: "poster")
        try await a.saveDocument(doc)
        #expect(await replicate(a, server.url(), .push).error == nil)
        #expect(await replicate(b, server.url(), .pull, user: "naomi").error == nil)
        let copy = try #require(try await b.document(withID: "clip"))
        #expect(copy.blob(forKey: "poster")?.content == big.prefix(1_500_000))
        let entry = try #require(copy.dictionary(forKey: "_attachments")?["clip.mp4"]?.objectValue)
        #expect(entry["digest"] == .string(video.digest))
        #expect(try await b.blob(withDigest: video.digest)?.content == big)
        #expect(try snapshot(a) == snapshot(b))
        // A new revision that keeps the attachment sends it as a stub, both ways.
        let edited = copy.toMutable()
        edited.setString("beach at night", forKey: "title")
        try await b.saveDocument(edited)
        #expect(await replicate(b, server.url(), .pushAndPull, user: "naomi").error == nil)
        #expect(await replicate(a, server.url(), .pull).error == nil)
        #expect(try await a.document(withID: "clip")?.string(forKey: "title") == "beach at night")
        #expect(try snapshot(a) == snapshot(b))
    }
}

/// HTTPS with a self-signed server: trusted when its certificate is pinned, refused otherwise.
@Suite struct HTTPSTests {
    /// A self-signed P-256 certificate for 127.0.0.1 made by Debian's `openssl`: (cert PEM, key PEM, cert DER).
    static func selfSigned(in dir: String, name: String) throws -> (cert: String, key: String, der: Data) {
        let cert = "\(dir)/\(name)-cert.pem", key = "\(dir)/\(name)-key.pem", der = "\(dir)/\(name)-cert.der"
        for args in [["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                      "-out", cert, "-days", "2", "-subj", "/CN=settee-test", "-addext", "subjectAltName=IP:127.0.0.1"],
                     ["x509", "-in", cert, "-outform", "der", "-out", der]] {
            let run = try Subprocess.runBlocking("/usr/bin/openssl", args)
            guard run.termination == .exited(0) else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\(run)"]) }
        }
        return (cert, key, try Data(contentsOf: URL(fileURLWithPath: der)))
    }

    @Test func aPinnedCertificateOfASelfSignedServer() async throws {
        let scratch = try Scratch()
        let good = try Self.selfSigned(in: scratch.path, name: "server")
        let other = try Self.selfSigned(in: scratch.path, name: "other")
        let server = try await LiveServer.start(tls: (good.cert, good.key))
        defer { Task { await server.stop() } }
        #expect(server.url().scheme == "https")
        let db = try scratch.open("local")
        try await db.saveDocument(MutableDocument(id: "secret", data: ["over": "tls"]))
        let pinned = await replicate(db, server.url()) { $0.pinnedServerCertificate = good.der }
        #expect(pinned.error == nil, "\(String(describing: pinned.error))")
        #expect(try await server.server.database(named: "db")?.database.document(withID: "secret") != nil)
        // Another certificate pinned, or none (the system's roots do not know this one): refused.
        let wrong = await replicate(db, server.url()) { $0.pinnedServerCertificate = other.der; $0.maxAttempts = 1 }
        #expect(wrong.error?.code == .authenticationFailed, "\(String(describing: wrong.error))")
        let unpinned = await replicate(db, server.url())
        #expect(unpinned.error?.code == .authenticationFailed, "\(String(describing: unpinned.error))")
    }
}

/// A continuous pull whose long poll goes silent (the network drops everything, nothing is
/// closed) drops it after twice the heartbeat and reopens from its checkpoint.
@Suite struct SilentFeedTests {
    @Test func aFeedSilentPastItsHeartbeatIsReopened() async throws {
        let scratch = try Scratch()
        let server = try await LiveServer.start()
        let proxy = try await FaultProxy.start(to: server.port, seed: 1)
        proxy.faulty = false
        defer { Task { await proxy.stop(); await server.stop() } }
        let db = try scratch.open("device")
        let url = try #require(URL(string: "http://127.0.0.1:\(proxy.port)/db"))
        let (replicator, recorder) = startContinuous(db, url, .pull, wait: .milliseconds(100))
        #expect(await eventually { replicator.status.activity == .idle })
        proxy.freezeOpenConnections()
        let served = try #require(server.server.database(named: "db")?.database)
        try await served.saveDocument(MutableDocument(id: "while-silent", data: [:]))
        // The frozen long poll never answers: the watchdog drops it (2 s), the run starts again
        // on a new connection and the document arrives.
        #expect(try await eventually { try db.document(withID: "while-silent") != nil })
        #expect(recorder.activities.contains(.offline))
        replicator.stop()
        _ = await replicator.waitUntilStopped()
    }
}

/// The multipart reader's search against a naive one, on random bodies built from few letters
/// (so that near-matches abound).
@Suite struct MultipartSearchTests {
    @Test func theSearchFindsWhatANaiveOneFinds() {
        let seed = UInt64.random(in: 0 ... .max)
        print("MultipartSearchTests seed \(seed)")
        var rng = SeededRandom(seed: seed)
        for _ in 0 ..< 2000 {
            let needle = (0 ..< Int(rng.next() % 6 + 1)).map { _ in UInt8(ascii: "a") + UInt8(rng.next() % 2) }
            let haystack = (0 ..< Int(rng.next() % 60)).map { _ in UInt8(ascii: "a") + UInt8(rng.next() % 2) }
            var naive: [Int] = []
            var i = 0
            while i + needle.count <= haystack.count {
                if haystack[i ..< i + needle.count].elementsEqual(needle) {
                    naive.append(i)
                    i += needle.count
                } else {
                    i += 1
                }
            }
            #expect(Multipart.Finder(needle).all(in: haystack) == naive, "seed \(seed): \(needle) in \(haystack)")
            let from = Int(rng.next() % UInt64(haystack.count + 1))
            let expected = (from ..< max(from, haystack.count)).first { s in
                s + needle.count <= haystack.count && haystack[s ..< s + needle.count].elementsEqual(needle)
            }
            #expect(Multipart.find(needle, in: haystack, from: from) == expected, "seed \(seed): from \(from)")
        }
    }
}


/// Strict base64: everything Foundation writes reads back; nothing else does.
@Suite struct Base64Tests {
    @Test func strictBase64() {
        let seed = UInt64.random(in: 0 ... .max)
        print("Base64Tests seed \(seed)")
        var rng = SeededRandom(seed: seed)
        for _ in 0 ..< 500 {
            let data = Data((0 ..< Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            #expect(Base64.decode(data.base64EncodedString()) == data, "seed \(seed)")
        }
        for bad in ["a", "ab=", "abc==", "a===", "====", "aGVsbG8=====", "aGVs bG8=", "YQ==YQ==", "YR==", "Zm9=", "Zm9v\n", "Zm-v", "Zm_v"] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
        #expect(Base64.decode("") == Data())
        #expect(Base64.decode("////") == Data([0xFF, 0xFF, 0xFF]))
    }
}
