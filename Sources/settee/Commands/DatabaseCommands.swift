import ArgumentParser
import Foundation
@_spi(Replication) import Settee
import SetteeHTTP
import SetteeReplicator

// MARK: - compact, check

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite a database without what is no longer needed.",
        discussion: "Example: settee compact todo.settee\nCtrl-C stops it and leaves the database as it was.")

    @Argument(help: "A database directory NAME.settee.") var database: String
    @OptionGroup var output: OutputOptions

    func run() throws {
        let arg = try DatabaseArgument(database)
        let db = try arg.open()
        defer { try? db.close() }
        Interrupt.install()
        let progress = ProgressReport("compact", unit: "bytes")
        let report: CompactionReport
        do {
            report = try db.compact { p in
                progress.update(p.bytesDone, of: p.bytesTotal)
                return !Interrupt.isRequested
            }
        } catch let e as SetteeError where e.code == .cancelled {
            progress.finish()
            throw CLIError(.interrupted, "compaction stopped: \(arg) is as it was")
        } catch let e as SetteeError {
            progress.finish()
            throw CLIError(e, context: "compacting \(arg)")
        }
        progress.finish()
        if output.json {
            try Terminal.json(["size_before": .int(Int64(report.sizeBefore)), "size_after": .int(Int64(report.sizeAfter)),
                               "documents": .int(Int64(report.documents))])
        } else {
            Terminal.out("\(Terminal.bytes(report.sizeBefore)) → \(Terminal.bytes(report.sizeAfter)), \(Terminal.count(UInt64(report.documents))) documents")
        }
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a database: its storage, then its documents (exit 4 on damage).",
        discussion: "Example: settee check todo.settee\n         settee check todo.settee --repair")

    @Argument(help: "A database directory NAME.settee.") var database: String
    @Flag(help: "Rewrite the documents whose problems can be repaired.") var repair = false
    @OptionGroup var output: OutputOptions

    func run() throws {
        let arg = try DatabaseArgument(database)
        let db: Database
        do {
            db = try arg.open()
        } catch let e as CLIError where e.status == .damaged {
            throw CLIError(.damaged, "\(arg) cannot be opened: \(e.message)")
        }
        defer { try? db.close() }
        let storage: String
        do {
            storage = try db.checkStorage()
        } catch let e as SetteeError where e.code == .corrupted {
            if output.json { try Terminal.json(["ok": false, "storage": .string(e.message), "problems": []]) }
            throw CLIError(.damaged, "\(arg): storage damaged: \(e.message)")
        }
        let report = try db.check(repair: repair)
        let remaining = repair ? report.problems.filter { !$0.isRepairable || !report.repaired.contains($0.documentID ?? "") } : report.problems
        if output.json {
            try Terminal.json(["ok": .bool(remaining.isEmpty), "storage": .string(storage),
                               "documents": .int(Int64(report.documents)), "revisions": .int(Int64(report.revisions)),
                               "problems": .array(report.problems.map { p in
                                   ["document": p.documentID.map(JSONValue.string) ?? .null, "message": .string(p.message),
                                    "repairable": .bool(p.isRepairable)]
                               }),
                               "repaired": .array(report.repaired.map(JSONValue.string))])
        } else {
            Terminal.out("storage: \(storage)")
            Terminal.out("documents: \(Terminal.count(UInt64(report.documents))) documents, \(Terminal.count(UInt64(report.revisions))) revisions")
            for p in report.problems {
                Terminal.out(Terminal.red("damage: ") + p.description + (p.isRepairable ? " (repairable: settee check --repair)" : ""))
            }
            for id in report.repaired { Terminal.out(Terminal.green("repaired: ") + id) }
            if report.problems.isEmpty { Terminal.out(Terminal.green("ok")) }
        }
        if !remaining.isEmpty { throw CLIError(.damaged, "\(arg): \(remaining.count) problem\(remaining.count == 1 ? "" : "s") found") }
    }
}

// MARK: - export, import

/// The two file layouts of export and import.
enum ExportFormat: String, ExpressibleByArgument, CaseIterable {
    /// One document per line.
    case ndjson
    /// CouchDB's `GET /{db}/_all_docs?include_docs=true` answer.
    case couchdb
}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every document as JSON (NDJSON, or CouchDB's _all_docs).",
        discussion: """
            Example: settee export todo.settee todo.ndjson
                     settee export todo.settee --format couchdb > all_docs.json
                     settee export todo.settee backup.ndjson --revisions
            Each document comes with the contents of the blobs it references (_blobs, base64 by \
            digest). With --revisions every leaf (conflicts and tombstones too) is written with \
            its revision ID and history (_rev, _revisions), so that settee import --revisions \
            rebuilds the same revision trees.
            """)

    @Argument(help: "A database directory NAME.settee.") var database: String
    @Argument(help: "The file to write (standard output without it).") var file: String?
    @Option(help: "ndjson or couchdb.") var format: ExportFormat = .ndjson
    @Flag(help: "Keep revision IDs and histories (every leaf).") var revisions = false

    func run() throws {
        let arg = try DatabaseArgument(database)
        let db = try arg.open()
        defer { try? db.close() }
        Interrupt.install()
        // Written to a file beside the target and renamed when complete: an interrupted export
        // leaves no half file.
        let temporary = file.map { $0 + ".settee-export-\(getpid())" }
        let handle: FileHandle
        if let temporary {
            guard FileManager.default.createFile(atPath: temporary, contents: nil) else {
                throw CLIError(.failed, "cannot write \(temporary)")
            }
            handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        } else {
            handle = FileHandle.standardOutput
        }
        var buffer: [UInt8] = []
        func flush() { handle.write(Data(buffer)); buffer.removeAll(keepingCapacity: true) }
        let total = try db.statistics
        let progress = ProgressReport("export", unit: "documents")
        var options = AllDocumentsOptions()
        options.includeDeleted = revisions
        let cursor = try db.allDocuments(options)
        var written: UInt64 = 0
        var first = true
        if format == .couchdb { buffer += Array("{\"total_rows\":\(total.documentCount),\"offset\":0,\"rows\":[\n".utf8) }
        do {
            while let doc = try cursor.next() {
                if Interrupt.isRequested { throw CLIError(.interrupted, "export stopped; nothing was written") }
                for entry in try entries(db, doc) {
                    if format == .couchdb {
                        let row: JSONValue = ["id": .string(doc.id), "key": .string(doc.id),
                                              "value": ["rev": entry["_rev"] ?? .null], "doc": entry]
                        buffer += Array((first ? "" : ",\n").utf8) + (try row.jsonBytes())
                    } else {
                        buffer += try entry.jsonBytes() + [0x0A]
                    }
                    first = false
                }
                written += 1
                if buffer.count > 1 << 20 { flush() }
                progress.update(written, of: revisions ? total.documentCount + total.deletedDocumentCount : total.documentCount)
            }
            if format == .couchdb { buffer += Array("\n]}\n".utf8) }
            flush()
            progress.finish()
            if let temporary, let file {
                try handle.close()
                if FileManager.default.fileExists(atPath: file) { try FileManager.default.removeItem(atPath: file) }
                try FileManager.default.moveItem(atPath: temporary, toPath: file)
            }
        } catch {
            progress.finish()
            if let temporary { try? handle.close(); try? FileManager.default.removeItem(atPath: temporary) }
            throw error
        }
        if file != nil { Terminal.err("export: \(Terminal.count(written)) documents") }
    }

    /// The JSON written for a document: its current body with `_id` and `_rev`, or with
    /// `--revisions` one entry per leaf with its history and blobs.
    private func entries(_ db: Database, _ doc: Document) throws -> [JSONValue] {
        guard revisions else {
            var o = doc.toDictionary()
            o["_id"] = .string(doc.id)
            if let r = doc.revisionID { o["_rev"] = .string(r) }
            var blobs: [String: JSONValue] = [:]
            try collectBlobs(.object(o), into: &blobs, db: db)
            if !blobs.isEmpty { o["_blobs"] = .object(blobs) }
            return [.object(o)]
        }
        return try db.leafRevisions(withID: doc.id).map { r in
            var o = try r.properties
            o["_id"] = .string(r.documentID)
            o["_rev"] = .string(r.revisionID)
            if r.isDeleted { o["_deleted"] = true }
            let ids = r.history.map { h in h.split(separator: "-", maxSplits: 1).last.map(String.init) ?? h }
            let start = r.revisionID.split(separator: "-").first.flatMap { Int64($0) } ?? 1
            o["_revisions"] = ["start": .int(start), "ids": .array(ids.map(JSONValue.string))]
            var blobs: [String: JSONValue] = [:]
            try collectBlobs(.object(o), into: &blobs, db: db)
            if !blobs.isEmpty { o["_blobs"] = .object(blobs) }
            return .object(o)
        }
    }

    /// Every blob a body references, its content in base64 by digest. A blob the database does
    /// not hold is said on standard error (the document is exported; importing it will be refused).
    private func collectBlobs(_ value: JSONValue, into blobs: inout [String: JSONValue], db: Database) throws {
        switch value {
        case .object(let o):
            if case .string(let digest)? = o["digest"], blobs[digest] == nil {
                if let data = try db.blob(withDigest: digest)?.content {
                    blobs[digest] = .string(data.base64EncodedString())
                } else {
                    Terminal.err("export: the content of blob \(digest) is missing from the database")
                }
            }
            for v in o.values { try collectBlobs(v, into: &blobs, db: db) }
        case .array(let a):
            for v in a { try collectBlobs(v, into: &blobs, db: db) }
        default: break
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read documents from NDJSON or CouchDB's _all_docs JSON (the database is created if needed).",
        discussion: """
            Example: settee import todo.settee todo.ndjson
                     settee import copy.settee backup.ndjson --revisions
            Without --revisions each document is saved as a new revision of its ID; with it, the \
            revisions keep their IDs and histories (as a replication brings them). Documents are \
            saved 1,000 at a time, each batch whole or not at all: Ctrl-C stops between batches.
            """)

    @Argument(help: "A database directory NAME.settee.") var database: String
    @Argument(help: "The file to read (- for standard input).") var file: String
    @Flag(help: "Keep revision IDs and histories (_rev, _revisions).") var revisions = false

    func run() throws {
        let arg = try DatabaseArgument(database)
        let data: Data
        do {
            data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw CLIError(.notFound, "cannot read \(file): \(error.localizedDescription)")
        }
        let docs = try Self.documents(in: Array(data), file: file)
        let db = try arg.open(create: true)
        defer { try? db.close() }
        Interrupt.install()
        let progress = ProgressReport("import", unit: "documents")
        var done: UInt64 = 0
        var rejected: [String] = []
        for start in stride(from: 0, to: docs.count, by: 1000) {
            if Interrupt.isRequested {
                progress.finish()
                throw CLIError(.interrupted, "import stopped after \(done) documents (whole batches; nothing half-written)")
            }
            let batch = Array(docs[start ..< min(start + 1000, docs.count)])
            do {
                // Blob contents first: the documents that reference them are refused without.
                for d in batch {
                    guard case .object(let blobs)? = d["_blobs"] else { continue }
                    for (_, v) in blobs {
                        guard let b64 = v.stringValue, let content = Base64.decode(b64) else {
                            throw CLIError(.usage, "a blob of \(d["_id"]?.stringValue ?? "?") is not base64")
                        }
                        try db.saveBlob(Blob(contentType: "application/octet-stream", data: content))
                    }
                }
                if revisions {
                    var revs: [ReplicatedRevision] = []
                    for d in batch { revs.append(try Self.revision(d)) }
                    for (r, outcome) in zip(revs, try db.insertRevisions(revs)) {
                        if case .rejected(let e) = outcome { rejected.append("\(r.documentID) \(r.revisionID): \(e.message)") }
                    }
                } else {
                    let mutable = try batch.map { d -> MutableDocument in
                        guard case .object(var o) = d, let id = o["_id"]?.stringValue else {
                            throw CLIError(.usage, "a document in \(file) has no _id")
                        }
                        for k in ["_id", "_rev", "_revisions", "_blobs", "_deleted"] { o[k] = nil }
                        let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
                        m.setData(o)
                        return m
                    }
                    try db.inBatch { for m in mutable { try db.saveDocument(m) } }
                }
            } catch let e as SetteeError {
                progress.finish()
                throw CLIError(e, context: "importing \(file)")
            }
            done += UInt64(batch.count)
            progress.update(done, of: UInt64(docs.count))
        }
        progress.finish()
        for r in rejected { Terminal.err("import: rejected \(r)") }
        Terminal.err("import: \(Terminal.count(done - UInt64(rejected.count))) documents into \(arg)")
        if !rejected.isEmpty { throw CLIError(.failed, "\(rejected.count) revisions were rejected") }
    }

    /// The documents of an NDJSON file or of CouchDB's `_all_docs` answer (its rows' `doc`).
    static func documents(in bytes: [UInt8], file: String) throws -> [JSONValue] {
        let firstByte = bytes.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        guard firstByte != nil else { return [] }
        // CouchDB's answer is one object with "rows"; NDJSON is one object per line.
        if let whole = try? JSONValue(parsing: bytes), case .array(let rows)? = whole["rows"] {
            return try rows.map { row in
                guard let doc = row["doc"], case .object = doc else {
                    throw CLIError(.usage, "\(file): a row has no doc (export with include_docs=true)")
                }
                return doc
            }
        }
        var docs: [JSONValue] = []
        var line = 1
        for chunk in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            defer { line += 1 }
            if chunk.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x09 }) { continue }
            do {
                let v = try JSONValue(parsing: Array(chunk))
                guard case .object = v else { throw CLIError(.usage, "\(file), line \(line): not a JSON object") }
                docs.append(v)
            } catch let e as SetteeError {
                throw CLIError(.usage, "\(file), line \(line): \(e.message)")
            }
        }
        return docs
    }

    /// A revision with its history, from an exported entry.
    static func revision(_ d: JSONValue) throws -> ReplicatedRevision {
        guard case .object(var o) = d, let id = o["_id"]?.stringValue, let rev = o["_rev"]?.stringValue else {
            throw CLIError(.usage, "a document has no _id or _rev: --revisions needs them")
        }
        var history = [rev]
        if let revs = o["_revisions"], let start = revs["start"]?.int64Value, let ids = revs["ids"]?.arrayValue {
            history = ids.enumerated().map { i, v in "\(start - Int64(i))-\(v.stringValue ?? "")" }
        }
        let deleted = o["_deleted"]?.boolValue ?? false
        for k in ["_id", "_rev", "_revisions", "_blobs", "_deleted"] { o[k] = nil }
        return ReplicatedRevision(documentID: id, revisionID: rev, history: history, isDeleted: deleted, properties: o)
    }
}

// MARK: - cp

struct Cp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replicate between two databases (paths or URLs).",
        discussion: """
            Example: settee cp todo.settee http://molly:secret@127.0.0.1:4984/todo
                     settee cp http://127.0.0.1:4984/todo copy.settee --channels lists,tasks --user molly
                     settee cp a.settee b.settee --push --pull --continuous
                     settee cp app.settee http://127.0.0.1:4984/todo --collection store.lists --collection store.tasks
            By default changes go from SOURCE to DESTINATION (--push); --pull brings DESTINATION's \
            to SOURCE; both together go both ways. One side at least is a local database. Each \
            document that fails is reported; Ctrl-C stops cleanly.
            """)

    @Argument(help: "The source: a database directory NAME.settee or a URL.") var source: String
    @Argument(help: "The destination (created when local and missing).") var destination: String
    @Flag(help: "Copy SOURCE's changes to DESTINATION (the default).") var push = false
    @Flag(help: "Copy DESTINATION's changes to SOURCE.") var pull = false
    @Flag(help: "Keep running and copy changes as they happen.") var continuous = false
    @Option(help: "A user name for the server (its password from SETTEE_PASSWORD, or the URL's).") var user: String?
    @Option(help: "Only these channels, comma-separated (from a Sync Gateway-style server).") var channels: String?
    @Option(help: "A server-side filter, ddoc/name.") var filter: String?
    @Option(name: .customLong("param"), help: "A filter parameter, key=value (repeatable).") var parameters: [String] = []
    @Option(name: .customLong("collection"),
            help: "Copy this collection, scope.name or name (repeatable); each with its namesake on the other side (a server's keyspace). Default: the default collection.")
    var collections: [String] = []
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let src = try DatabaseArgument(source), dst = try DatabaseArgument(destination)
        let keyspaces = try collections.map(CollectionOption.keyspace)
        // The replicator runs on a local database: SOURCE if it is one, else DESTINATION.
        let localIsSource: Bool
        switch (src, dst) {
        case (.local, _): localIsSource = true
        case (.remote, .local): localIsSource = false
        case (.remote, .remote): throw CLIError(.usage, "one side must be a local database (NAME.settee)")
        }
        let forward = push || !pull, backward = pull
        let local = try (localIsSource ? src : dst).open(create: !localIsSource)
        defer { try? local.close() }
        let otherArgument = localIsSource ? dst : src
        let other: Database?
        let peer: any ReplicationPeer
        switch otherArgument {
        case .local:
            let db = try otherArgument.open(create: localIsSource)
            other = db
            peer = DatabaseEndpoint(database: db)
        case .remote(let url):
            other = nil
            peer = URLEndpoint(url: url)
        }
        defer { try? other?.close() }
        var config = ReplicatorConfiguration(database: local, target: peer)
        // Forward is SOURCE → DESTINATION: a push when the local database is SOURCE.
        let pushes = localIsSource ? forward : backward, pulls = localIsSource ? backward : forward
        config.replicatorType = pushes && pulls ? .pushAndPull : pushes ? .push : .pull
        config.continuous = continuous
        if let user {
            config.authenticator = BasicAuthenticator(username: user, password: ProcessInfo.processInfo.environment["SETTEE_PASSWORD"] ?? "")
        }
        if !keyspaces.isEmpty {
            // Each collection replicates with its namesake: the source must have it; a local
            // destination gets it, empty, when it has none.
            var configs: [CollectionConfiguration] = []
            for (scope, name) in keyspaces {
                let collection: Collection
                if localIsSource {
                    guard let c = try local.collection(name: name, scope: scope) else {
                        throw CLIError(.notFound, "\(src) has no collection \(scope).\(name)")
                    }
                    collection = c
                    if let other { _ = try other.createCollection(name: name, scope: scope) }
                } else {
                    collection = try local.createCollection(name: name, scope: scope)
                }
                var c = CollectionConfiguration(collection: collection)
                if let channels { c.channels = channels.split(separator: ",").map(String.init) }
                configs.append(c)
            }
            do {
                let pushes = config.replicatorType
                config = try ReplicatorConfiguration(collections: configs, target: peer)
                config.replicatorType = pushes
            } catch let e as ReplicatorError {
                throw CLIError(.usage, "--collection: \(e.message)")
            }
            config.continuous = continuous
            if let user {
                config.authenticator = BasicAuthenticator(username: user, password: ProcessInfo.processInfo.environment["SETTEE_PASSWORD"] ?? "")
            }
        }
        if let channels { config.channels = channels.split(separator: ",").map(String.init) }
        if let filter { config.filterName = filter }
        for p in parameters {
            guard let eq = p.firstIndex(of: "=") else { throw CLIError(.usage, "--param \(p): write key=value") }
            config.filterParameters[String(p[..<eq])] = .string(String(p[p.index(after: eq)...]))
        }
        Interrupt.install()
        let replicator = Replicator(config: config)
        let failures = FailureLog()
        let progress = ProgressReport("cp", unit: "changes")
        let docToken = replicator.addDocumentReplicationListener { event in
            for d in event.documents {
                if let e = d.error { failures.add("\(event.isPush ? "push" : "pull") \(d.id): \(e.message)") }
            }
        }
        let statusToken = replicator.addChangeListener { s in progress.update(s.progress.completed, of: s.progress.total > 0 ? s.progress.total : nil) }
        replicator.start()
        let watcher = Task {
            while !Task.isCancelled {
                if Interrupt.isRequested { replicator.stop(); return }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        let final = await replicator.waitUntilStopped()
        watcher.cancel()
        docToken.remove()
        statusToken.remove()
        progress.finish()
        for f in failures.lines { Terminal.err("cp: " + f) }
        if output.json {
            try Terminal.json(["completed": .int(Int64(final.progress.completed)), "errors": .array(failures.lines.map(JSONValue.string)),
                               "error": final.error.map { .string($0.message) } ?? .null])
        } else if final.error == nil {
            Terminal.err("cp: \(Terminal.count(final.progress.completed)) changes, \(failures.lines.count) document errors")
        }
        if let e = final.error { throw CLIError(.failed, "replication stopped: \(e.message)") }
        if Interrupt.isRequested && !continuous { throw CLIError(.interrupted, "cp stopped before it finished") }
        if !failures.lines.isEmpty { throw CLIError(.failed, "\(failures.lines.count) documents failed") }
    }
}

/// Per-document errors a replication reports, from its listener's thread.
final class FailureLog: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [String] = []
    func add(_ line: String) { lock.lock(); all.append(line); lock.unlock() }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return all }
}
