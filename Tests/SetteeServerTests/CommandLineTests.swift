import Foundation
import Synchronization
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer
import SetteeTestSupport

/// `settee`'s subcommands, each run as a process: output, `--json` parsed, exit codes, errors.
@Suite(.serialized) struct CommandLineTests {
    struct Run {
        var status: Int32
        var out: String
        var err: String
        /// Whether a signal ended the process (its handler not yet installed), not an exit.
        var signaled = false
        var lines: [String] { out.split(separator: "\n").map(String.init) }
        /// Each output line as JSON.
        var json: [JSONValue] {
            get throws { try lines.map { try JSONValue(parsing: Array($0.utf8)) } }
        }
    }

    /// Runs `settee` with `arguments` in `directory`, `input` on its standard input. Nothing
    /// waits holding a cooperative thread: a test blocking the concurrency pool's few threads
    /// would starve every other test (and the servers they run) on a two-core machine.
    static func settee(_ arguments: [String], in directory: String, input: String? = nil,
                       environment: [String: String] = [:]) async throws -> Run {
        let p = try start(arguments, in: directory, environment: environment)
        if let input { try p.write(input) }
        p.closeInput()
        return await finish(p)
    }

    /// Reads what a started process writes until it exits.
    static func finish(_ p: Subprocess) async -> Run {
        let ended = await p.finished()
        var signaled = false
        if case .signaled = ended.termination { signaled = true }
        return Run(status: ended.termination.status, out: ended.output, err: ended.error, signaled: signaled)
    }

    /// `settee` started with `arguments` in `directory`, its standard streams on pipes.
    static func start(_ arguments: [String], in directory: String, environment: [String: String] = [:]) throws -> Subprocess {
        try Subprocess(KillRecoveryTests.setteeExecutable().path, arguments, directory: directory,
                       environment: environment, input: .pipe)
    }

    /// A server in this process on a real loopback port, serving `todo` (walrus) to molly
    /// (password `secret`, every channel); the task running it (cancel it to stop) and its port.
    static func serveTodo() async throws -> (Task<Void, any Error>, Int) {
        var config = ServerConfiguration()
        config.interface = "127.0.0.1:0"
        config.adminInterface = nil
        config.log = []
        var db = ServerConfiguration.DatabaseConfig(server: "walrus:")
        db.users["GUEST"] = .init(disabled: true)
        db.users["molly"] = .init(password: "secret", adminChannels: ["*"])
        config.databases["todo"] = db
        let server = try SetteeServer(configuration: config)
        let ports = AsyncStream.makeStream(of: ListeningPorts.self)
        let running = Task { try await server.run { ports.continuation.yield($0) } }
        var iterator = ports.stream.makeAsyncIterator()
        guard let port = await iterator.next()?.publicPort else {
            running.cancel()
            throw CLIServerNotStarted()
        }
        return (running, port)
    }

    struct CLIServerNotStarted: Error {}

    static func scratch() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("settee-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A conflict (1-aa with children 2-bb and 2-cc) as exported revisions.
    static let conflict = """
        {"_id":"c","_rev":"1-aa","v":0,"_revisions":{"start":1,"ids":["aa"]}}
        {"_id":"c","_rev":"2-bb","v":1,"_revisions":{"start":2,"ids":["bb","aa"]}}
        {"_id":"c","_rev":"2-cc","v":2,"_revisions":{"start":2,"ids":["cc","aa"]}}

        """

    @Test func putCatLsInfoAndTheirErrors() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let put = try await Self.settee(["put", "todo.settee", "list1", #"{"name":"Groceries","n":1}"#], in: dir)
        #expect(put.status == 0 && put.out.hasPrefix("1-"), "\(put)")
        let stdin = try await Self.settee(["put", "todo.settee", "task/1", "-", "--json"], in: dir, input: #"{"done":false}"#)
        let written = try #require(try stdin.json.first)
        #expect(written["id"] == "task/1" && written["rev"]?.stringValue?.hasPrefix("1-") == true)
        // Exit codes and one-line errors.
        let conflict = try await Self.settee(["put", "todo.settee", "list1", "{}", "--rev", "1-nope"], in: dir)
        #expect(conflict.status == 3 && conflict.err.contains("changed since"))
        let badJSON = try await Self.settee(["put", "todo.settee", "x", #"{"a": [1,}"#], in: dir)
        #expect(badJSON.status == 1 && badJSON.err.contains("not valid JSON") && badJSON.err.contains("byte"), "\(badJSON.err)")
        let notObject = try await Self.settee(["put", "todo.settee", "x", "[1]"], in: dir)
        #expect(notObject.status == 1 && notObject.err.contains("JSON object"))
        #expect(try await Self.settee(["cat", "todo.settee", "nope"], in: dir).status == 2)
        #expect(try await Self.settee(["ls", "missing.settee"], in: dir).status == 2)
        #expect(try await Self.settee(["ls", "notadatabase"], in: dir).status == 1)
        #expect(try await Self.settee(["frobnicate"], in: dir).status == 1)
        #expect(try await Self.settee(["ls", "todo.settee", "--limit", "-1"], in: dir).status == 1)

        let cat = try await Self.settee(["cat", "todo.settee", "list1"], in: dir)
        #expect(cat.status == 0 && cat.out.contains("\"name\": \"Groceries\"") && !cat.out.contains("_rev"))
        let raw = try #require(try await Self.settee(["cat", "todo.settee", "list1", "--raw", "--json"], in: dir).json.first)
        #expect(raw["_id"] == "list1" && raw["_rev"]?.stringValue?.hasPrefix("1-") == true && raw["n"] == 1)
        #expect(try await Self.settee(["ls", "todo.settee"], in: dir).lines == ["list1", "task/1"])
        let long = try await Self.settee(["ls", "todo.settee", "--long", "--json", "--prefix", "task"], in: dir).json
        #expect(long.count == 1 && long[0]["id"] == "task/1" && long[0]["sequence"] == 2)
        let info = try #require(try await Self.settee(["info", "todo.settee", "--json"], in: dir).json.first)
        #expect(info["documents"] == 2 && info["deleted"] == 0 && info["last_sequence"] == 2 && info["format"] == 11)
        let people = try await Self.settee(["info", "todo.settee"], in: dir)
        #expect(people.lines.contains { $0.hasPrefix("documents") && $0.hasSuffix("2") })

        // rm, purge, expire.
        #expect(try await Self.settee(["rm", "todo.settee", "task/1"], in: dir).status == 0)
        #expect(try await Self.settee(["ls", "todo.settee"], in: dir).lines == ["list1"])
        #expect(try await Self.settee(["ls", "todo.settee", "--deleted"], in: dir).lines == ["list1", "task/1"])
        #expect(try await Self.settee(["purge", "todo.settee", "task/1"], in: dir).status == 0)
        #expect(try await Self.settee(["ls", "todo.settee", "--deleted"], in: dir).lines == ["list1"])
        #expect(try await Self.settee(["purge", "todo.settee", "task/1"], in: dir).status == 2)
        #expect(try await Self.settee(["expire", "todo.settee", "list1", "3600"], in: dir).status == 0)
        #expect(try await Self.settee(["expire", "todo.settee", "list1", "never"], in: dir).status == 0)
        #expect(try await Self.settee(["expire", "todo.settee", "list1", "soon"], in: dir).status == 1)
        // Every subcommand's help shows an example.
        for sub in ["info", "ls", "cat", "revs", "put", "rm", "purge", "expire", "conflicts", "resolve", "compact", "check",
                    "export", "import", "cp", "serve"] {
            let help = try await Self.settee([sub, "--help"], in: dir)
            #expect(help.status == 0 && help.out.contains("Example: settee \(sub)"), "\(sub): \(help.out)")
        }
    }

    @Test func conflictsRevsAndResolve() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.conflict.write(toFile: dir + "/c.ndjson", atomically: true, encoding: .utf8)
        #expect(try await Self.settee(["import", "db.settee", "c.ndjson", "--revisions"], in: dir).status == 0)
        let conflicts = try await Self.settee(["conflicts", "db.settee", "--json"], in: dir).json
        #expect(conflicts == [["id": "c", "winner": "2-cc", "conflicts": ["2-bb"]]])
        let drawn = try await Self.settee(["revs", "db.settee", "c"], in: dir)
        #expect(drawn.lines == ["1-aa", "├─ 2-bb  (conflict)", "└─ * 2-cc"], "\(drawn.out)")
        let resolved = try await Self.settee(["resolve", "db.settee", "c", "--winner", "2-bb", "--json"], in: dir)
        #expect(try resolved.json.first?["resolved"] == true)
        #expect(try await Self.settee(["conflicts", "db.settee", "--json"], in: dir).lines.isEmpty)
        let body = try #require(try await Self.settee(["cat", "db.settee", "c", "--json"], in: dir).json.first)
        #expect(body["v"] == 1)
        let revs = try await Self.settee(["revs", "db.settee", "c", "--json"], in: dir).json
        #expect(revs.filter { $0["leaf"] == true && $0["deleted"] == true }.count == 1)
        #expect(try await Self.settee(["resolve", "db.settee", "missing"], in: dir).status == 2)
    }

    /// The revision trees of every document, as `revs --json` gives them (bodies aside: a
    /// copy keeps only its leaves' bodies).
    static func trees(_ db: String, in dir: String) async throws -> [String: Set<String>] {
        var out: [String: Set<String>] = [:]
        for id in try await settee(["ls", db, "--deleted"], in: dir).lines {
            out[id] = Set(try await settee(["revs", db, id, "--json"], in: dir).json.map { r in
                "\(r["rev"]?.stringValue ?? "") < \(r["parent"]?.stringValue ?? "-") leaf:\(r["leaf"] == true) deleted:\(r["deleted"] == true) winner:\(r["winner"] == true)"
            })
        }
        return out
    }

    /// Conflicts, a tombstone, an edited document and a blob, written by the library.
    static func makeSource(in dir: String) throws {
        let db = try Database(name: "source", config: DatabaseConfiguration(directory: dir))
        for i in 0 ..< 30 { try db.saveDocument(MutableDocument(id: "d\(i)", data: ["i": .int(Int64(i))])) }
        let edited = try #require(try db.document(withID: "d1")).toMutable()
        edited.setString("twice", forKey: "note")
        try db.saveDocument(edited)
        try db.deleteDocument(try #require(try db.document(withID: "d2")))
        let photo = Blob(contentType: "image/png", data: Data([1, 2, 3, 4, 5]))
        let withBlob = MutableDocument(id: "photo")
        withBlob.setBlob(photo, forKey: "image")
        try db.saveDocument(withBlob)
        _ = try db.insertRevisions([
            ReplicatedRevision(documentID: "d3", revisionID: "2-ffff", history: ["2-ffff", try #require(try db.document(withID: "d3")?.revisionID)],
                               isDeleted: false, properties: ["other": true]),
        ])
        try db.close()
    }

    static func blobContent(in dir: String) throws -> Data? {
        let copy = try Database(name: "copy-ndjson", config: DatabaseConfiguration(directory: dir))
        defer { try? copy.close() }
        return try copy.document(withID: "photo")?.blob(forKey: "image")?.content
    }

    @Test func exportThenImportGivesIdenticalRevisionTrees() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.makeSource(in: dir)
        for format in ["ndjson", "couchdb"] {
            let export = try await Self.settee(["export", "source.settee", "all.\(format)", "--revisions", "--format", format], in: dir)
            #expect(export.status == 0, "\(export.err)")
            let imported = try await Self.settee(["import", "copy-\(format).settee", "all.\(format)", "--revisions"], in: dir)
            #expect(imported.status == 0, "\(imported.err)")
            let original = try await Self.trees("source.settee", in: dir), copy = try await Self.trees("copy-\(format).settee", in: dir)
            #expect(original.count == 31 && original == copy, "\(format)")
            let blob = try #require(try await Self.settee(["cat", "copy-\(format).settee", "photo", "--json"], in: dir).json.first)
            #expect(blob["image"]?["digest"] != nil)
        }
        // The blob's content came along.
        #expect(try Self.blobContent(in: dir) == Data([1, 2, 3, 4, 5]))
        // Without --revisions: the current bodies, as new documents.
        #expect(try await Self.settee(["export", "source.settee", "plain.ndjson"], in: dir).status == 0)
        #expect(try await Self.settee(["import", "fresh.settee", "plain.ndjson"], in: dir).status == 0)
        #expect(try await Self.settee(["info", "fresh.settee", "--json"], in: dir).json.first?["documents"] == 30)
        // A malformed line is named.
        try "{\"_id\":\"a\"}\n{oops\n".write(toFile: dir + "/bad.ndjson", atomically: true, encoding: .utf8)
        let bad = try await Self.settee(["import", "fresh.settee", "bad.ndjson"], in: dir)
        #expect(bad.status == 1 && bad.err.contains("line 2"), "\(bad.err)")
    }

    @Test func cpBetweenPathsAndWithAServer() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for i in 0 ..< 20 { #expect(try await Self.settee(["put", "a.settee", "doc\(i)", "{\"i\":\(i)}"], in: dir).status == 0) }
        let cp = try await Self.settee(["cp", "a.settee", "b.settee", "--json"], in: dir)
        let copied = try cp.json.first?["completed"]?.int64Value ?? 0
        #expect(cp.status == 0 && copied >= 20, "\(cp)")
        #expect(try await Self.settee(["ls", "b.settee"], in: dir).lines.count == 20)
        // Both ways: a change in b comes back to a.
        #expect(try await Self.settee(["put", "b.settee", "from-b", "{}"], in: dir).status == 0)
        #expect(try await Self.settee(["cp", "a.settee", "b.settee", "--push", "--pull"], in: dir).status == 0)
        #expect(try await Self.settee(["ls", "a.settee", "--prefix", "from"], in: dir).lines == ["from-b"])

        // A server in this process, on a real loopback port.
        let (running, port) = try await Self.serveTodo()
        defer { running.cancel() }
        let url = "http://molly:secret@127.0.0.1:\(port)/todo"
        let push = try await Self.settee(["cp", "a.settee", url], in: dir)
        #expect(push.status == 0, "\(push.err)")
        let remote = try #require(try await Self.settee(["info", url, "--json"], in: dir).json.first)
        #expect(remote["documents"] == 21)
        // The URL commands: put, cat, ls, rm.
        #expect(try await Self.settee(["put", url, "remote1", #"{"x":1}"#], in: dir).status == 0)
        #expect(try await Self.settee(["cat", url, "remote1", "--json"], in: dir).json.first == ["x": 1])
        #expect(try await Self.settee(["ls", url, "--prefix", "remote"], in: dir).lines == ["remote1"])
        #expect(try await Self.settee(["rm", url, "remote1"], in: dir).status == 0)
        #expect(try await Self.settee(["cat", url, "remote1"], in: dir).status == 2)
        // A pull into a new database, with the user given apart (its password from the environment).
        let plain = "http://127.0.0.1:\(port)/todo"
        let pull = try await Self.settee(["cp", plain, "c.settee", "--user", "molly"], in: dir, environment: ["SETTEE_PASSWORD": "secret"])
        #expect(pull.status == 0, "\(pull.err)")
        #expect(try await Self.settee(["ls", "c.settee"], in: dir).lines.count == 21)
        let refused = try await Self.settee(["cp", plain, "d.settee", "--user", "molly"], in: dir, environment: ["SETTEE_PASSWORD": "wrong"])
        #expect(refused.status == 6 && refused.err.contains("replication stopped"), "\(refused.err)")
        #expect(try await Self.settee(["cp", plain, url], in: dir).status == 1)
    }

    /// `--collection` (default `_default._default`) and `ls --collections`: the default
    /// collection is the database's documents, locally and through a server's keyspace; a
    /// collection a database does not have is exit 2, a name Couchbase Lite refuses exit 1.
    @Test func collectionsLocallyAndThroughAServersKeyspaces() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await Self.settee(["put", "a.settee", "t1", #"{"x":1}"#, "--collection", "_default._default"], in: dir).status == 0)
        #expect(try await Self.settee(["put", "a.settee", "t2", #"{"x":2}"#, "--collection", "_default"], in: dir).status == 0)
        #expect(try await Self.settee(["ls", "a.settee"], in: dir).lines == ["t1", "t2"])
        #expect(try await Self.settee(["cat", "a.settee", "t1", "--json", "--collection", "_default"], in: dir).json.first == ["x": 1])
        #expect(try await Self.settee(["ls", "a.settee", "--collections"], in: dir).lines == ["_default._default"])
        #expect(try await Self.settee(["ls", "a.settee", "--collections", "--json"], in: dir).json == [["scope": "_default", "collection": "_default"]])
        let missing = try await Self.settee(["ls", "a.settee", "--collection", "store.tasks"], in: dir)
        #expect(missing.status == 2 && missing.err.contains("no collection store.tasks"), "\(missing)")
        #expect(try await Self.settee(["put", "a.settee", "t3", "{}", "--collection", "tasks"], in: dir).status == 2)
        #expect(try await Self.settee(["ls", "a.settee"], in: dir).lines == ["t1", "t2"])
        for bad in ["_tasks", "store.%x", "a.b.c", "", "store."] {
            let r = try await Self.settee(["ls", "a.settee", "--collection", bad], in: dir)
            #expect(r.status == 1, "--collection \(bad): \(r)")
        }
        #expect(try await Self.settee(["ls", "nowhere.settee", "--collection", "tasks"], in: dir).err.contains("no database"))

        // A named collection of a local database: read and written apart, copied by cp.
        do {
            let db = try Database(name: "a", config: DatabaseConfiguration(directory: dir))
            try db.createCollection(name: "tasks", scope: "store")
            try db.close()
        }
        #expect(try await Self.settee(["put", "a.settee", "t9", #"{"z":9}"#, "--collection", "store.tasks"], in: dir).status == 0)
        #expect(try await Self.settee(["ls", "a.settee", "--collection", "store.tasks"], in: dir).lines == ["t9"])
        #expect(try await Self.settee(["ls", "a.settee"], in: dir).lines == ["t1", "t2"])
        #expect(try await Self.settee(["cat", "a.settee", "t9", "--json", "--collection", "store.tasks"], in: dir).json.first == ["z": 9])
        #expect(try await Self.settee(["ls", "a.settee", "--collections"], in: dir).lines == ["_default._default", "store.tasks"])
        let copied = try await Self.settee(["cp", "a.settee", "b.settee", "--collection", "store.tasks"], in: dir)
        #expect(copied.status == 0, "\(copied)")
        #expect(try await Self.settee(["ls", "b.settee", "--collection", "store.tasks"], in: dir).lines == ["t9"])
        #expect(try await Self.settee(["ls", "b.settee"], in: dir).lines == [])
        let absent = try await Self.settee(["cp", "a.settee", "c.settee", "--collection", "store.lists"], in: dir)
        #expect(absent.status == 2 && absent.err.contains("no collection store.lists"), "\(absent)")

        let (running, port) = try await Self.serveTodo()
        defer { running.cancel() }
        let url = "http://molly:secret@127.0.0.1:\(port)/todo"
        #expect(try await Self.settee(["put", url, "r1", #"{"y":1}"#, "--collection", "_default._default"], in: dir).status == 0)
        #expect(try await Self.settee(["ls", url], in: dir).lines == ["r1"])
        let tasks = try await Self.settee(["ls", url, "--collection", "store.tasks"], in: dir)
        #expect(tasks.status == 2 && tasks.err.contains("keyspace todo.store.tasks not found"), "\(tasks)")
        #expect(try await Self.settee(["ls", url, "--collections"], in: dir).status == 1)
        // A URL that already names a keyspace has no collection of its own to name.
        let nested = try await Self.settee(["ls", url + ".store.tasks", "--collection", "store.lists"], in: dir)
        #expect(nested.status != 0 && nested.err.contains("names no database"), "\(nested)")
        // A port outside 16 bits is a usage error, not a crash of the tool.
        for command in [["ls", "http://molly:secret@127.0.0.1:99999/todo", "--collection", "store.tasks"], ["cp", "a.settee", "http://127.0.0.1:99999/todo"],
                        ["info", "http://127.0.0.1:18446744073709551616/todo"]] {
            let r = try await Self.settee(command, in: dir)
            #expect(r.status == 1 && r.err.contains("port") && !r.err.contains("secret"), "\(command): \(r)")
        }
    }

    @Test func compactInterruptedBySIGINTLeavesADatabaseCheckPasses() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Enough to compact for a while: 10,000 documents written twice.
        var lines = ""
        for i in 0 ..< 10000 { lines += "{\"_id\":\"d\(i)\",\"text\":\"\(String(repeating: "x", count: 200))\"}\n" }
        try lines.write(toFile: dir + "/docs.ndjson", atomically: true, encoding: .utf8)
        #expect(try await Self.settee(["import", "big.settee", "docs.ndjson"], in: dir).status == 0)
        #expect(try await Self.settee(["import", "big.settee", "docs.ndjson"], in: dir).status == 0)
        var interrupted = false
        for delay in [0.05, 0.15, 0.3, 0.5, 0.8, 1.2] {
            let p = try Self.start(["compact", "big.settee"], in: dir)
            p.closeInput()
            try await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            p.signal(SIGINT)
            let run = await Self.finish(p)
            let err = run.err
            let status = run.status
            #expect(status == 130 || status == 0, "compact after SIGINT: \(status) \(err)")
            // A SIGINT that lands before the tool installs its handler ends it as any process
            // (a loaded machine can take that long to start it): no compaction was interrupted.
            if status == 130 && !run.signaled {
                #expect(err.contains("as it was"))
                interrupted = true
            }
            let check = try await Self.settee(["check", "big.settee", "--json"], in: dir)
            let ok = try check.json.first?["ok"]
            #expect(check.status == 0 && ok == true, "\(check.out) \(check.err)")
            #expect(try await Self.settee(["info", "big.settee", "--json"], in: dir).json.first?["documents"] == 10000)
            if interrupted { break }
        }
        #expect(interrupted, "no SIGINT landed while compact ran")
        let done = try await Self.settee(["compact", "big.settee", "--json"], in: dir)
        #expect(done.status == 0)
    }

    @Test func aDatabaseOpenInAServerIsReportedLocked() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try await Self.settee(["put", "served/db.settee", "a", "{}"], in: dir).status == 0)
        let config = #"{"interface": "127.0.0.1:0", "log": [], "databases": {"db": {"server": "\#(dir)/served"}}}"#
        try config.write(toFile: dir + "/config.json", atomically: true, encoding: .utf8)
        let server = try Self.start(["serve", "--config", "config.json"], in: dir)
        defer {
            server.signal(SIGTERM)
            _ = server.waitUntilExit()
        }
        // Ready once it prints its ports.
        let ready = await server.waitForOutput(containing: "serving")
        try #require(ready, "settee serve ended before it served")
        let locked = try await Self.settee(["info", "served/db.settee"], in: dir)
        #expect(locked.status == 5 && locked.err.contains("open in another process"), "\(locked)")
    }

    @Test func checkReportsDamageWithExitFour() async throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var lines = ""
        for i in 0 ..< 3000 { lines += "{\"_id\":\"d\(i)\",\"text\":\"\(String(repeating: "y", count: 300))\"}\n" }
        try lines.write(toFile: dir + "/docs.ndjson", atomically: true, encoding: .utf8)
        #expect(try await Self.settee(["import", "hurt.settee", "docs.ndjson"], in: dir).status == 0)
        #expect(try await Self.settee(["check", "hurt.settee"], in: dir).status == 0)
        // Garbage over the middle of every file of the database.
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/hurt.settee")
        for name in files {
            let path = dir + "/hurt.settee/" + name
            guard let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, size > 64 << 10 else { continue }
            let h = try #require(FileHandle(forUpdatingAtPath: path))
            try h.seek(toOffset: UInt64(size / 3))
            h.write(Data(repeating: 0xA5, count: size / 3))
            try h.close()
        }
        let check = try await Self.settee(["check", "hurt.settee"], in: dir)
        #expect(check.status == 4, "\(check.status) \(check.out) \(check.err)")
        #expect(!check.err.isEmpty)
    }
}
