import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Settee
import SetteeTestSupport
import Synchronization
import Testing

/// `settee serve` killed with SIGKILL under a `_bulk_docs` load, restarted: every acknowledged
/// document is there, with the body and revision its acknowledgement named.
///
/// The real executable, a real socket, a database in a directory. The rounds share the directory,
/// so each restart also reopens what every earlier kill and restart left. `SETTEE_KILL_SEED=N`
/// repeats a run's kill delays.
@Suite struct KillRecoveryTests {
    static let rounds = 3
    static let clients = 4
    static let batchSize = 50

    // A bound for a hang, not a timing: a loaded two-core machine runs the rounds slowly.
    @Test(.timeLimit(.minutes(10)))
    func everyAcknowledgedDocumentSurvivesSIGKILL() async throws {
        let seed = ProcessInfo.processInfo.environment["SETTEE_KILL_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1 ... 1_000_000)
        print("seed \(seed) (KillRecoveryTests: SETTEE_KILL_SEED=\(seed) repeats it)")
        var rng = SplitMix64(seed: seed)
        let executable = try Self.setteeExecutable()

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("settee-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let configURL = root.appendingPathComponent("config.json")
        let config: JSONValue = [
            "interface": "127.0.0.1:0",
            "adminInterface": "127.0.0.1:0",
            // No request logging: the debug build is slow enough, and nobody reads it.
            "log": [],
            "databases": ["db": [
                "server": .string(root.appendingPathComponent("data").path),
                "users": ["GUEST": ["disabled": false, "admin_channels": ["*"]]],
            ]],
        ]
        try Data(config.jsonText().utf8).write(to: configURL)

        let ledger = Ledger()
        for round in 0 ..< Self.rounds {
            // Kill points spread from just after the first acknowledgement to well into the load:
            // a time, or a count of documents if that comes first, as the documents to read back
            // (the test's run time) grow with the server's speed.
            let delay = Duration.milliseconds(Int.random(in: 0 ... 1500, using: &rng))
            let target = Int.random(in: 1 ... 6000, using: &rng)
            let start = ContinuousClock.now

            // 1. Serve, load, kill.
            let loaded = try ServeProcess.launch(executable, config: configURL, in: root)
            defer { loaded.forceKill() }
            let loadPort = try await loaded.publicPort()
            try await Self.loadAndKill(loaded, port: loadPort, round: round, delay: delay, target: target, ledger: ledger)
            let killed = try await loaded.waitForExit()
            #expect(killed == .signaled(SIGKILL), "round \(round): the server ended by \(killed), not SIGKILL")

            // 2. Serve the same directory again: everything acknowledged, in every round so far.
            let restarted = try ServeProcess.launch(executable, config: configURL, in: root)
            defer { restarted.forceKill() }
            let port = try await restarted.publicPort()
            let stored = try await Self.verify(port: port, round: round, ledger: ledger)

            // 3. A graceful stop after a recovery: SIGTERM, exit status 0.
            restarted.signal(SIGTERM)
            let stopped = try await restarted.waitForExit()
            #expect(stopped == .exited(0),
                    "round \(round): after SIGTERM the server \(stopped); stderr: \(restarted.stderrText)")
            await restarted.process.waitForOutputEnd(timeout: .seconds(5))
            #expect(restarted.stdoutText.contains("settee: stopped"), "round \(round): stdout: \(restarted.stdoutText)")

            let counts = ledger.counts
            print("KillRecoveryTests round \(round): killed at \(delay) or \(target) documents past the first acknowledgement; "
                + "\(counts.acknowledgedThisRound) documents acknowledged this round, \(counts.acknowledged) in all, "
                + "\(counts.attempted) attempted, \(stored) stored; \(ContinuousClock.now - start)")
            ledger.nextRound()
        }
    }

    // MARK: - Load

    /// Runs the clients until the server is killed: `delay` after the first acknowledged batch, or
    /// once `target` documents are acknowledged if that is sooner.
    static func loadAndKill(_ server: ServeProcess, port: Int, round: Int, delay: Duration, target: Int, ledger: Ledger) async throws {
        let control = LoadControl(clients: clients)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0 ..< clients {
                group.addTask {
                    defer { control.running.subtract(1, ordering: .sequentiallyConsistent) }
                    await runClient(port: port, round: round, client: client, control: control, ledger: ledger)
                }
            }
            // The kill must land among acknowledged writes, or the round proves nothing.
            let deadline = ContinuousClock.now + .seconds(240)
            while ledger.counts.acknowledgedThisRound == 0 {
                guard control.running.load(ordering: .sequentiallyConsistent) > 0, ContinuousClock.now < deadline else {
                    Issue.record("round \(round): no _bulk_docs was acknowledged; stderr: \(server.stderrText)")
                    control.killing.store(true, ordering: .sequentiallyConsistent)
                    server.signal(SIGKILL)
                    try await group.waitForAll()
                    return
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            let killAt = ContinuousClock.now + delay
            while ContinuousClock.now < killAt, ledger.counts.acknowledgedThisRound < target,
                  control.running.load(ordering: .sequentiallyConsistent) > 0 {
                try await Task.sleep(for: .milliseconds(2))
            }
            // Set before the signal: a request failing from here on is the kill's doing.
            control.killing.store(true, ordering: .sequentiallyConsistent)
            server.signal(SIGKILL)
            try await group.waitForAll()
        }
    }

    /// One client: a connection of its own, batches of new documents until the connection dies.
    static func runClient(port: Int, round: Int, client: Int, control: LoadControl, ledger: Ledger) async {
        // A bound for a hang: the debug server beside the whole suite on two cores can be slow.
        let http = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(240)))
        http.connect()
        var batch = 0
        while !control.killing.load(ordering: .sequentiallyConsistent) {
            let docs = (0 ..< batchSize).map { TestDocument(round: round, client: client, batch: batch, index: $0) }
            ledger.attempt(docs)
            let body: String
            do {
                body = try JSONValue.object(["docs": .array(docs.map(\.json))]).jsonText()
            } catch {
                Issue.record("cannot encode a batch: \(error)")
                break
            }
            let response: TestClient.Response
            do {
                response = try await http.execute(TestClient.Request(
                    "/db/_bulk_docs", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)))
            } catch {
                // A request the kill cut short is expected; one failing before it is not.
                if !control.killing.load(ordering: .sequentiallyConsistent) {
                    Issue.record("round \(round) client \(client): _bulk_docs failed before the kill: \(error)")
                }
                break
            }
            // A whole 201 response arrived: every document in it is acknowledged, kill or no kill.
            let text = response.body.map { String(buffer: $0) } ?? ""
            guard response.status == .created, let results = (try? JSONValue(parsing: text))?.arrayValue, results.count == docs.count else {
                Issue.record("round \(round) client \(client): _bulk_docs answered \(response.status): \(text.prefix(500))")
                break
            }
            var acknowledged: [(String, String)] = []
            for (doc, result) in zip(docs, results) {
                let r = result.objectValue
                guard r?["ok"] == true, r?["id"]?.stringValue == doc.id, let rev = r?["rev"]?.stringValue, rev.hasPrefix("1-") else {
                    Issue.record("round \(round): _bulk_docs result for \(doc.id) is \(result)")
                    continue
                }
                acknowledged.append((doc.id, rev))
            }
            ledger.acknowledge(acknowledged)
            batch += 1
        }
        try? await http.shutdown()
    }

    // MARK: - Verification

    /// Everything acknowledged so far is there with its body and revision; what is there beyond
    /// it (a batch the kill interrupted) is intact; the recovered database takes writes. Returns
    /// how many documents of the load are stored.
    static func verify(port: Int, round: Int, ledger: Ledger) async throws -> Int {
        try await TestClient.withClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(20))) { http in
            let (acknowledged, attempted) = ledger.snapshot

            let info = try await http.execute(TestClient.Request("/db", method: .get))
            let infoText = info.body.map { String(buffer: $0) } ?? ""
            #expect(info.status == .ok, "round \(round): GET /db answered \(info.status): \(infoText)")
            let docCount = (try? JSONValue(parsing: infoText))?.objectValue?["doc_count"]?.intValue ?? -1
            #expect(docCount >= acknowledged.count, "round \(round): doc_count \(docCount) < \(acknowledged.count) acknowledged")

            // Every acknowledged document, by key.
            var missing: [String] = []
            var wrong: [String] = []
            let ids = acknowledged.keys.sorted()
            for start in stride(from: 0, to: ids.count, by: 500) {
                let chunk = Array(ids[start ..< min(start + 500, ids.count)])
                let body = try JSONValue.object(["keys": .array(chunk.map { .string($0) })]).jsonText()
                let response = try await http.execute(TestClient.Request(
                    "/db/_all_docs?include_docs=true", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: body)))
                let text = response.body.map { String(buffer: $0) } ?? ""
                let rows = try #require((try? JSONValue(parsing: text))?.objectValue?["rows"]?.arrayValue,
                                        "round \(round): _all_docs answered \(response.status): \(text.prefix(500))")
                try #require(rows.count == chunk.count, "round \(round): \(rows.count) rows for \(chunk.count) keys")
                for (id, row) in zip(chunk, rows) {
                    let r = row.objectValue
                    guard r?["error"] == nil, let doc = r?["doc"]?.objectValue else {
                        missing.append(id)
                        continue
                    }
                    let rev = acknowledged[id]
                    if r?["value"]?.objectValue?["rev"]?.stringValue != rev || doc["_rev"]?.stringValue != rev
                        || doc["_id"]?.stringValue != id || Self.properties(doc) != attempted[id] {
                        wrong.append("\(id): \(row)")
                    }
                }
            }
            #expect(missing.isEmpty, "round \(round): \(missing.count) of \(ids.count) acknowledged documents missing, e.g. \(missing.prefix(10))")
            #expect(wrong.isEmpty, "round \(round): \(wrong.count) acknowledged documents wrong, e.g. \(wrong.prefix(3))")

            // A few through the document endpoint as well.
            for id in ids.shuffled().prefix(20) {
                let response = try await http.execute(TestClient.Request("/db/\(id)", method: .get))
                let text = response.body.map { String(buffer: $0) } ?? ""
                let doc = (try? JSONValue(parsing: text))?.objectValue
                #expect(response.status == .ok && doc?["_rev"]?.stringValue == acknowledged[id]
                        && doc.map(Self.properties) == attempted[id], "round \(round): GET /db/\(id) answered \(response.status): \(text)")
            }

            // Whatever else is stored (documents of an interrupted batch) is whole, not torn.
            let all = try await http.execute(TestClient.Request("/db/_all_docs?include_docs=true", method: .get))
            let allText = all.body.map { String(buffer: $0) } ?? ""
            let rows = try #require((try? JSONValue(parsing: allText))?.objectValue?["rows"]?.arrayValue,
                                    "round \(round): _all_docs answered \(all.status): \(allText.prefix(500))")
            var stray: [String] = []
            for row in rows {
                guard let id = row.objectValue?["id"]?.stringValue, let doc = row.objectValue?["doc"]?.objectValue else {
                    stray.append("\(row)")
                    continue
                }
                if id.hasPrefix("probe-") { continue }
                if attempted[id] == nil || Self.properties(doc) != attempted[id] || doc["_rev"]?.stringValue?.hasPrefix("1-") != true {
                    stray.append("\(id): \(row)")
                }
            }
            #expect(stray.isEmpty, "round \(round): \(stray.count) stored documents were never sent or are damaged, e.g. \(stray.prefix(3))")
            #expect(rows.count >= acknowledged.count)

            // The recovered database accepts a write.
            let probe = try await http.execute(TestClient.Request(
                "/db/probe-\(round)", method: .put, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"round":\#(round)}"#)))
            #expect(probe.status == .created, "round \(round): PUT after recovery answered \(probe.status)")
            return rows.count { $0.objectValue?["id"]?.stringValue?.hasPrefix("probe-") == false }
        }
    }

    /// A document's own properties: without `_id` and `_rev`.
    static func properties(_ doc: [String: JSONValue]) -> JSONValue {
        .object(doc.filter { !$0.key.hasPrefix("_") })
    }

    // MARK: - The executable

    /// `settee` in the build products directory, where the test bundle is (or beside it).
    static func setteeExecutable() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["SETTEE_EXECUTABLE"] {
            guard FileManager.default.isExecutableFile(atPath: path) else { throw Failure("SETTEE_EXECUTABLE=\(path) is not an executable") }
            return URL(fileURLWithPath: path)
        }
        var places = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent(),
                      Bundle.main.bundleURL]
        if let executable = Bundle.main.executableURL { places.append(executable.deletingLastPathComponent()) }
        var tried: [String] = []
        for place in places {
            for directory in [place, place.deletingLastPathComponent()] {
                let candidate = directory.appendingPathComponent("settee")
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate.path) {
                    return candidate
                }
                tried.append(candidate.path)
            }
        }
        throw Failure("no settee executable beside the tests (build it: swift build --build-tests); looked at \(tried)")
    }

    /// A document the load sends: its ID says who sent it when; its body is a function of the ID.
    struct TestDocument {
        let id: String
        let properties: JSONValue

        init(round: Int, client: Int, batch: Int, index: Int) {
            id = "r\(round)-c\(client)-b\(batch)-\(index)"
            let n = ((round * 31 + client) * 1009 + batch) * 97 + index
            // Bodies of different sizes, so documents straddle pages differently.
            let fill = String(repeating: String(UnicodeScalar(UInt8(97 + n % 26))), count: 16 + n % 400)
            properties = ["round": .int(Int64(round)), "client": .int(Int64(client)), "batch": .int(Int64(batch)),
                          "index": .int(Int64(index)), "n": .int(Int64(n)), "fill": .string(fill)]
        }

        var json: JSONValue {
            guard case .object(var o) = properties else { return properties }
            o["_id"] = .string(id)
            return .object(o)
        }
    }

    /// Shared by a round's clients and the task that kills the server.
    final class LoadControl: Sendable {
        /// Set just before the SIGKILL.
        let killing = Atomic<Bool>(false)
        /// Clients still sending.
        let running: Atomic<Int>
        init(clients: Int) { running = Atomic(clients) }
    }

    /// What the clients sent and what the server acknowledged, across rounds.
    final class Ledger: Sendable {
        private struct State {
            var attempted: [String: JSONValue] = [:]
            var acknowledged: [String: String] = [:]
            var acknowledgedThisRound = 0
        }
        private let state = Mutex(State())

        func attempt(_ docs: [TestDocument]) {
            state.withLock { s in for d in docs { s.attempted[d.id] = d.properties } }
        }

        func acknowledge(_ revs: [(String, String)]) {
            state.withLock { s in
                for (id, rev) in revs { s.acknowledged[id] = rev }
                s.acknowledgedThisRound += revs.count
            }
        }

        func nextRound() { state.withLock { $0.acknowledgedThisRound = 0 } }

        var counts: (acknowledged: Int, acknowledgedThisRound: Int, attempted: Int) {
            state.withLock { ($0.acknowledged.count, $0.acknowledgedThisRound, $0.attempted.count) }
        }

        var snapshot: (acknowledged: [String: String], attempted: [String: JSONValue]) {
            state.withLock { ($0.acknowledged, $0.attempted) }
        }
    }

    /// A `settee serve --config FILE` child process.
    final class ServeProcess: Sendable {
        let process: Subprocess

        private init(process: Subprocess) { self.process = process }

        static func launch(_ executable: URL, config: URL, in directory: URL) throws -> ServeProcess {
            // Both outputs drained all along, so a chatty server never blocks on a full pipe.
            ServeProcess(process: try Subprocess(executable.path, ["serve", "--config", config.path], directory: directory.path))
        }

        var pid: pid_t { process.pid }
        var stdoutText: String { process.output }
        var stderrText: String { process.errorOutput }

        /// The public port from the line `settee serve` prints once it listens.
        func publicPort(timeout: Duration = .seconds(60)) async throws -> Int {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                let text = stdoutText
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("settee: serving ") }),
                   let range = line.range(of: " on port ") {
                    let digits = line[range.upperBound...].prefix { $0.isNumber }
                    if let port = Int(digits) { return port }
                }
                if let ended = process.termination {
                    throw Failure("settee serve \(ended) before listening; stdout: \(text); stderr: \(stderrText)")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            throw Failure("settee serve printed no port within \(timeout); stdout: \(stdoutText); stderr: \(stderrText)")
        }

        func signal(_ signal: Int32) { process.signal(signal) }

        /// Waits for the process to end without holding a thread.
        func waitForExit(timeout: Duration = .seconds(30)) async throws -> Subprocess.Termination {
            guard let ended = await process.exit(within: timeout) else {
                throw Failure("settee serve (pid \(pid)) still running after \(timeout); stderr: \(stderrText)")
            }
            return ended
        }

        /// For `defer`: no server outlives the test, whatever failed.
        func forceKill() {
            guard process.isRunning else { return }
            process.signal(SIGKILL)
            // SIGKILL cannot be ignored: the wait is short even though it holds the thread.
            _ = process.waitUntilExit()
        }
    }

    /// A failure that says what went wrong (and, for the server, what it printed).
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// A seeded generator, so a failing run's kill delays can be repeated.
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}
