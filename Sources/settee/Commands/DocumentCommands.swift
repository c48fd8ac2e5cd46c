import ArgumentParser
import Foundation
@_spi(Replication) import Settee

/// Options every inspecting command takes.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON (one value per line) for scripts instead of columns for people.")
    var json = false
}

// MARK: - info

struct Info: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Counts, size and format of a database.",
        discussion: "Example: settee info todo.settee\n         settee info --json http://admin:secret@127.0.0.1:4985/todo")

    @Argument(help: "A database: a directory NAME.settee, or a URL.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        var fields: [(String, JSONValue, String)] = []
        switch arg {
        case .remote(let url):
            let info = try await RemoteDatabase(url: url).expect(.GET, "", what: "\(arg)")
            let docs = info["doc_count"]?.int64Value ?? 0
            fields.append(("database", .string(arg.description), arg.description))
            fields.append(("documents", .int(docs), Terminal.count(UInt64(max(docs, 0)))))
            if let d = info["doc_del_count"]?.int64Value { fields.append(("deleted", .int(d), Terminal.count(UInt64(max(d, 0))))) }
            if let f = info["sizes"]?["file"]?.int64Value { fields.append(("size", .int(f), Terminal.bytes(UInt64(max(f, 0))))) }
            let seq = info["update_seq"] ?? .null
            fields.append(("last_sequence", seq, (try? seq.jsonText()) ?? ""))
        case .local:
            let db = try arg.open()
            defer { try? db.close() }
            let s = try db.statistics
            fields = [
                ("database", .string(arg.description), arg.description),
                ("documents", .int(Int64(s.documentCount)), Terminal.count(s.documentCount)),
                ("deleted", .int(Int64(s.deletedDocumentCount)), Terminal.count(s.deletedDocumentCount)),
                ("conflicts", .int(Int64(s.conflictedDocumentCount)), Terminal.count(s.conflictedDocumentCount)),
                ("size", .int(Int64(s.fileSize)), Terminal.bytes(s.fileSize)),
                ("reclaimable", .int(Int64(s.reclaimableBytes)), "about " + Terminal.bytes(s.reclaimableBytes) + " (settee compact)"),
                ("last_sequence", .int(Int64(s.lastSequence)), Terminal.count(s.lastSequence)),
                ("format", .int(Int64(s.formatVersion)), "document format \(s.formatVersion)"),
            ]
        }
        if output.json {
            try Terminal.json(.object(Dictionary(fields.map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a })))
        } else {
            Terminal.table(nil, fields.map { [$0.0.replacingOccurrences(of: "_", with: " "), $0.2] })
        }
    }
}

// MARK: - ls

struct Ls: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List document IDs.",
        discussion: "Example: settee ls todo.settee --prefix list- --long\n         settee ls todo.settee --conflicts\n         settee ls todo.settee --collections\n         settee ls --collection store.tasks http://alice:pw@127.0.0.1:4984/db")

    @Argument(help: "A database: a directory NAME.settee, or a URL.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Option(help: "Only IDs starting with this.") var prefix: String?
    @Option(help: "At most this many.") var limit: Int?
    @Option(help: "Skip this many first.") var offset: Int = 0
    @Flag(help: "Only documents in conflict (local databases).") var conflicts = false
    @Flag(help: "Include deleted documents (tombstones).") var deleted = false
    @Flag(name: .shortAndLong, help: "Also the current revision, size, sequence and flags.") var long = false
    @Flag(help: "List the database's collections (scope.name) instead of documents (local databases).") var collections = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        if offset < 0 { throw ValidationError("--offset must be 0 or more") }
    }

    func run() async throws {
        if collections { return try listCollections() }
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        var rows: [(id: String, rev: String, size: Int?, seq: UInt64?, flags: [String])] = []
        switch arg {
        case .remote(let url):
            if conflicts { throw CLIError(.usage, "--conflicts lists a local database only") }
            var query: [(String, String)] = [("skip", String(offset))]
            if let limit { query.append(("limit", String(limit))) }
            if let prefix {
                query.append(("startkey", try JSONValue.string(prefix).jsonText()))
                query.append(("endkey", try JSONValue.string(prefix + "\u{10FFFF}").jsonText()))
            }
            let answer = try await RemoteDatabase(url: url).expect(.GET, "_all_docs", query: query, what: "\(arg)")
            for r in answer["rows"]?.arrayValue ?? [] {
                guard let id = r["id"]?.stringValue else { continue }
                rows.append((id, r["value"]?["rev"]?.stringValue ?? "", nil, nil, []))
            }
        case .local:
            let db = try arg.open()
            defer { try? db.close() }
            var options = AllDocumentsOptions()
            options.prefix = prefix
            options.limit = limit
            options.skip = offset
            options.onlyConflicts = conflicts
            options.includeDeleted = deleted
            let cursor = try db.allDocuments(options)
            while let doc = try cursor.next() {
                var flags: [String] = []
                if doc.isDeleted { flags.append("deleted") }
                var size: Int?
                if long {
                    if try sync({ try db.revisionTree(withID: doc.id)?.isConflicted }) == true { flags.append("conflict") }
                    if doc.value(forKey: "_attachments") != nil { flags.append("attachments") }
                    size = try doc.storedJSON.count
                }
                rows.append((doc.id, doc.revisionID ?? "", size, doc.sequence, flags))
            }
        }
        if output.json {
            for r in rows {
                var o: [String: JSONValue] = ["id": .string(r.id)]
                if long || arg.isRemote { o["rev"] = .string(r.rev) }
                if long, !arg.isRemote {
                    if let size = r.size { o["size"] = .int(Int64(size)) }
                    if let seq = r.seq { o["sequence"] = .int(Int64(seq)) }
                    o["flags"] = .array(r.flags.map(JSONValue.string))
                }
                try Terminal.json(.object(o))
            }
        } else if long {
            Terminal.table(["ID", "REVISION", "SIZE", "SEQ", "FLAGS"],
                           rows.map { [$0.id, $0.rev, $0.size.map { Terminal.bytes(UInt64($0)) } ?? "", $0.seq.map(String.init) ?? "", $0.flags.joined(separator: ",")] })
        } else {
            for r in rows { Terminal.out(r.id) }
        }
    }
}

extension Ls {
    /// `--collections`: each collection as `scope.name`, by scope then name.
    func listCollections() throws {
        let arg = try DatabaseArgument(database)
        if arg.isRemote { throw CLIError(.usage, "--collections lists a local database's collections") }
        let db = try arg.open()
        defer { try? db.close() }
        for scope in try db.scopes() {
            for collection in try scope.collections() {
                if output.json {
                    try Terminal.json(["scope": .string(scope.name), "collection": .string(collection.name)])
                } else {
                    Terminal.out(collection.fullName)
                }
            }
        }
    }
}

// MARK: - cat

struct Cat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print documents' current bodies.",
        discussion: "Example: settee cat todo.settee list1 list2\n         settee cat todo.settee list1 --rev 2-5f0e… --raw")

    @Argument(help: "A database: a directory NAME.settee, or a URL.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "Document IDs.") var ids: [String]
    @Option(help: "A revision of the document instead of the current one.") var rev: String?
    @Flag(help: "With _id, _rev, _deleted and _attachments, as the database holds them.") var raw = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if ids.isEmpty { throw ValidationError("name at least one document ID") }
        if rev != nil && ids.count > 1 { throw ValidationError("--rev takes one document ID") }
    }

    func run() async throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        let db = arg.isRemote ? nil : try arg.open()
        defer { try? db?.close() }
        for id in ids {
            var body: [String: JSONValue]
            switch arg {
            case .remote(let url):
                let answer = try await RemoteDatabase(url: url).expect(.GET, RemoteDatabase.segment(id), query: rev.map { [("rev", $0)] } ?? [],
                                                                       what: "\(id) in \(arg)")
                body = answer.objectValue ?? [:]
                if !raw { for k in ["_id", "_rev", "_deleted", "_attachments", "_revisions"] { body[k] = nil } }
            case .local:
                guard let db else { continue }
                let found = try sync { try rev.map { try db.document(withID: id, revisionID: $0) } ?? db.document(withID: id) }
                guard let doc = found else {
                    throw CLIError(.notFound, "no \(rev.map { "revision \($0) of " } ?? "document ")\(id) in \(arg)")
                }
                body = doc.toDictionary()
                if raw {
                    body["_id"] = .string(doc.id)
                    if let r = doc.revisionID { body["_rev"] = .string(r) }
                    if doc.isDeleted { body["_deleted"] = true }
                } else {
                    body["_attachments"] = nil
                }
            }
            if output.json {
                try Terminal.json(.object(body))
            } else {
                Terminal.out(try JSONValue.object(body).prettyJSONText())
            }
        }
    }
}

// MARK: - revs

struct Revs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Draw a document's revision tree.",
        discussion: """
            Example: settee revs todo.settee list1
            Each revision under its parent; * marks the winner (the current revision), "conflict" \
            the other undeleted leaves, "deleted" tombstones, "no body" revisions whose body is not kept.
            """)

    @Argument(help: "A database directory NAME.settee.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "A document ID.") var id: String
    @OptionGroup var output: OutputOptions

    func run() throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        let db = try arg.open()
        defer { try? db.close() }
        guard let tree = try db.revisionTree(withID: id) else { throw CLIError(.notFound, "no document \(id) in \(arg)") }
        let known = Set(tree.revisions.map(\.revisionID))
        var children: [String: [RevisionInfo]] = [:]
        var roots: [RevisionInfo] = []
        for r in tree.revisions {
            if let p = r.parentRevisionID, known.contains(p) { children[p, default: []].append(r) } else { roots.append(r) }
        }
        func marks(_ r: RevisionInfo) -> [String] {
            var m: [String] = []
            if r.revisionID == tree.currentRevisionID { m.append("winner") }
            if r.isLeaf && !r.isDeleted && r.revisionID != tree.currentRevisionID { m.append("conflict") }
            if r.isDeleted { m.append("deleted") }
            if !r.hasBody { m.append("no body") }
            return m
        }
        if output.json {
            for r in tree.revisions {
                try Terminal.json(["rev": .string(r.revisionID), "parent": r.parentRevisionID.map(JSONValue.string) ?? .null,
                                   "leaf": .bool(r.isLeaf), "deleted": .bool(r.isDeleted), "body": .bool(r.hasBody),
                                   "winner": .bool(r.revisionID == tree.currentRevisionID)])
            }
            return
        }
        // Depth first, iteratively (a history may be a thousand revisions long). A revision with
        // one child continues straight down; a fork draws its branches with ├─ and └─.
        var stack: [(rev: RevisionInfo, line: String, marker: String, below: String)] =
            roots.sorted { $0.revisionID > $1.revisionID }.map { ($0, "", "", "") }
        while let (r, line, marker, below) = stack.popLast() {
            let m = marks(r)
            var label = r.revisionID
            if r.revisionID == tree.currentRevisionID { label = Terminal.green("* " + label) }
            else if m.contains("conflict") { label = Terminal.yellow(label) }
            else if r.isDeleted { label = Terminal.dim(label) }
            let rest = m.filter { $0 != "winner" }
            Terminal.out(line + marker + label + (rest.isEmpty ? "" : "  (" + rest.joined(separator: ", ") + ")"))
            let kids = (children[r.revisionID] ?? []).sorted { $0.revisionID < $1.revisionID }
            if kids.count == 1 {
                stack.append((kids[0], below, "", below))
            } else {
                for (i, k) in kids.enumerated().reversed() {
                    let last = i == kids.count - 1
                    stack.append((k, below, last ? "└─ " : "├─ ", below + (last ? "   " : "│  ")))
                }
            }
        }
    }
}

// MARK: - put, rm, purge, expire

struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save a document (created if it is not there; the database too).",
        discussion: """
            Example: settee put todo.settee list1 '{"name": "Groceries"}'
                     echo '{"done": true}' | settee put todo.settee task7 - --rev 1-1a2b…
            """)

    @Argument(help: "A database: a directory NAME.settee, or a URL.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "The document ID.") var id: String
    @Argument(help: "The body, a JSON object; - or nothing reads it from standard input.") var body: String?
    @Option(help: "Fail with a conflict (exit 3) unless this is the current revision.") var rev: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        var properties = try readJSONObject(body, what: body == nil || body == "-" ? "standard input" : "the body")
        let newRev: String
        switch arg {
        case .remote(let url):
            let remote = RemoteDatabase(url: url)
            var current = rev
            if current == nil {
                let (status, json) = try await remote.request(.GET, RemoteDatabase.segment(id))
                if status == 200 { current = json?["_rev"]?.stringValue }
            }
            if let current { properties["_rev"] = .string(current) }
            let answer = try await remote.expect(.PUT, RemoteDatabase.segment(id), body: try JSONValue.object(properties).jsonBytes(),
                                                 what: "saving \(id) in \(arg)")
            newRev = answer["rev"]?.stringValue ?? ""
        case .local:
            let db = try arg.open(create: true)
            defer { try? db.close() }
            let existing = try sync { try db.document(withID: id) }
            if let rev, existing?.revisionID != rev {
                throw CLIError(.conflict, "\(id) is at \(existing?.revisionID ?? "no revision"), not \(rev): it changed since")
            }
            let doc = existing?.toMutable() ?? MutableDocument(id: id)
            doc.setData(properties)
            do {
                try sync { try db.saveDocument(doc) }
            } catch let e as SetteeError {
                throw CLIError(e, context: "saving \(id)")
            }
            newRev = try sync { try db.document(withID: id)?.revisionID } ?? ""
        }
        if output.json { try Terminal.json(["id": .string(id), "rev": .string(newRev)]) } else { Terminal.out(newRev) }
    }
}

struct Rm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete a document (a tombstone that replicates).",
        discussion: "Example: settee rm todo.settee task7")

    @Argument(help: "A database: a directory NAME.settee, or a URL.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "The document ID.") var id: String
    @Option(help: "Fail with a conflict (exit 3) unless this is the current revision.") var rev: String?

    func run() async throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        switch arg {
        case .remote(let url):
            let remote = RemoteDatabase(url: url)
            var current = rev
            if current == nil {
                current = try await remote.expect(.GET, RemoteDatabase.segment(id), what: "\(id) in \(arg)")["_rev"]?.stringValue
            }
            _ = try await remote.expect(.DELETE, RemoteDatabase.segment(id), query: [("rev", current ?? "")], what: "deleting \(id)")
        case .local:
            let db = try arg.open()
            defer { try? db.close() }
            guard let doc = try sync({ try db.document(withID: id) }) else { throw CLIError(.notFound, "no document \(id) in \(arg)") }
            if let rev, doc.revisionID != rev {
                throw CLIError(.conflict, "\(id) is at \(doc.revisionID ?? "no revision"), not \(rev): it changed since")
            }
            try sync { try db.deleteDocument(doc) }
        }
    }
}

struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a document and its whole history (not replicated).",
        discussion: "Example: settee purge todo.settee task7")

    @Argument(help: "A database directory NAME.settee.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "The document ID.") var id: String

    func run() throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        let db = try arg.open()
        defer { try? db.close() }
        guard try db.revisionTree(withID: id) != nil else { throw CLIError(.notFound, "no document \(id) in \(arg)") }
        try db.purgeDocument(withID: id)
    }
}

struct Expire: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Purge a document after some seconds, or never.",
        discussion: "Example: settee expire todo.settee session-42 3600\n         settee expire todo.settee session-42 never")

    @Argument(help: "A database directory NAME.settee.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "The document ID.") var id: String
    @Argument(help: "Seconds from now, or never.") var when: String

    func run() throws {
        let date: Date?
        if when == "never" {
            date = nil
        } else if let s = Double(when), s.isFinite, s >= 0 {
            date = Date().addingTimeInterval(s)
        } else {
            throw CLIError(.usage, "\(when) is neither a number of seconds nor never")
        }
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        let db = try arg.open()
        defer { try? db.close() }
        do {
            try db.setDocumentExpiration(withID: id, expiration: date)
        } catch let e as SetteeError {
            throw CLIError(e, context: id)
        }
    }
}

// MARK: - conflicts, resolve

struct Conflicts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the documents in conflict with their leaves.",
        discussion: "Example: settee conflicts todo.settee")

    @Argument(help: "A database directory NAME.settee.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @OptionGroup var output: OutputOptions

    func run() throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        let db = try arg.open()
        defer { try? db.close() }
        var options = AllDocumentsOptions()
        options.onlyConflicts = true
        let cursor = try db.allDocuments(options)
        var rows: [[String]] = []
        while let doc = try cursor.next() {
            guard let tree = try db.revisionTree(withID: doc.id) else { continue }
            let others = tree.revisions.filter { $0.isLeaf && !$0.isDeleted && $0.revisionID != tree.currentRevisionID }.map(\.revisionID)
            if output.json {
                try Terminal.json(["id": .string(doc.id), "winner": .string(tree.currentRevisionID), "conflicts": .array(others.map(JSONValue.string))])
            } else {
                rows.append([doc.id, tree.currentRevisionID, others.joined(separator: " ")])
            }
        }
        if !output.json && !rows.isEmpty { Terminal.table(["ID", "WINNER", "CONFLICTING LEAVES"], rows) }
    }
}

struct Resolve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve a conflict: keep one leaf, a tombstone on the others.",
        discussion: """
            Example: settee resolve todo.settee list1 --winner 2-9c1f…
            Without --winner the current revision wins (the default rule: the deepest branch, then \
            the highest revision ID).
            """)

    @Argument(help: "A database directory NAME.settee.") var database: String
    @OptionGroup var keyspace: CollectionOption
    @Argument(help: "The document ID.") var id: String
    @Option(help: "The leaf to keep.") var winner: String?
    @OptionGroup var output: OutputOptions

    func run() throws {
        let arg = try keyspace.resolve(try DatabaseArgument(database))
        let db = try arg.open()
        defer { try? db.close() }
        guard let tree = try db.revisionTree(withID: id) else { throw CLIError(.notFound, "no document \(id) in \(arg)") }
        guard tree.isConflicted else {
            if output.json { try Terminal.json(["id": .string(id), "rev": .string(tree.currentRevisionID), "resolved": false]) }
            else { Terminal.out("\(id) is not in conflict (at \(tree.currentRevisionID))") }
            return
        }
        let doc: Document
        do {
            doc = try db.resolveConflict(withID: id, winningRevisionID: winner)
        } catch let e as SetteeError {
            throw CLIError(e, context: id)
        }
        if output.json { try Terminal.json(["id": .string(id), "rev": .string(doc.revisionID ?? ""), "resolved": true]) }
        else { Terminal.out(doc.revisionID ?? "") }
    }
}
