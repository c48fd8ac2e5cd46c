@_spi(Replication) import Settee

/// Settee's document API (`Settee`), the layer applications use, over the same storage engine as `settee`:
/// `Database(name:config:)` with `fullSync = true` (every commit durable before the call returns),
/// documents saved through `MutableDocument` + `saveDocument`, read with `document(withID:)`, the changes
/// feed through `changes(since:limit:)`, replicated revisions through `insertRevisions`.
///
/// The library computes revision IDs, serializes properties to canonical JSON, and keeps a revision tree,
/// a by-ID and a by-sequence entry per document. It takes document IDs as `String`s and properties as
/// `JSONValue`s, so the runner (`DocumentRunner`) converts the dataset's bytes before any clock starts:
/// IDs once, bodies with `JSONValue(parsing:)` per batch. Only the calls below are timed.
///
/// Sendable (it holds only the `Database`, which is): `compaction` calls it from a writer, a reader and the
/// compacting thread at once.
final class SetteeDocEngine: Sendable {
    static let name = EngineName.setteeDoc
    /// The database is `<directory>/bench.settee/`.
    static let databaseName = "bench"

    let database: Database

    /// `autoCompaction`: false for `compaction`, so only the compactions it measures run.
    init(directory: String, autoCompaction: Bool = true) throws {
        var configuration = DatabaseConfiguration(directory: directory)
        configuration.fullSync = true
        configuration.autoCompaction = autoCompaction
        database = try Database(name: Self.databaseName, config: configuration)
    }

    deinit {
        try? close()
    }

    /// A document as the API takes it, made from the dataset's bytes before the clock starts.
    struct NewDocument {
        let id: String
        let properties: [String: JSONValue]
    }

    /// The properties of a JSON object body (untimed).
    static func properties(of body: UnsafeRawBufferPointer) throws -> [String: JSONValue] {
        guard case .object(let properties) = try JSONValue(parsing: body) else {
            throw EngineError("settee-doc: a body is not a JSON object")
        }
        return properties
    }

    // MARK: - Workloads

    /// bulk-load: one `inBatch` (one durable commit) of `MutableDocument` saves.
    func insert(_ documents: [NewDocument]) throws {
        let database = database
        try database.inBatch {
            for document in documents {
                try database.saveDocument(MutableDocument(id: document.id, data: document.properties))
            }
        }
    }

    /// bulk-load's `save-documents` figure: one `saveDocuments` call (one durable commit) per batch.
    func insertPrepared(_ documents: [NewDocument]) throws {
        try database.saveDocuments(documents.map { MutableDocument(id: $0.id, data: $0.properties) })
    }

    /// bulk-load's `async-pipelined` figure: the same through the `async` API (prepared on the calling task,
    /// committed on the database's worker thread).
    func insertPreparedAsync(_ documents: [NewDocument]) async throws {
        try await database.saveDocuments(documents.map { MutableDocument(id: $0.id, data: $0.properties) })
    }

    /// point-get: the current revision with its body (read in full, parsed when first used: not here).
    @inline(__always)
    func get(_ id: String) throws -> Settee.Document? {
        try database.document(withID: id)
    }

    /// point-get through the `async` API.
    func getAsync(_ id: String) async throws -> Settee.Document? {
        try await database.document(withID: id)
    }

    /// durable-commit through the `async` API (the save runs on the database's worker thread).
    func updateAsync(_ document: NewDocument) async throws {
        try await database.saveDocument(MutableDocument(id: document.id, data: document.properties))
    }

    /// changes-scan: every change from sequence 0, `pageSize` entries per call; returns how many.
    func scanChanges(pageSize: Int) throws -> Int {
        var since: UInt64 = 0
        var count = 0
        while true {
            let page = try database.changes(since: since, limit: pageSize)
            count += page.count
            guard page.count == pageSize, let last = page.last else { return count }
            since = last.sequence
        }
    }

    /// The changes after `since`, up to `limit` (untimed: the check after `changes-scan`).
    func changes(since: UInt64, limit: Int) throws -> [ChangeEntry] {
        try database.changes(since: since, limit: limit)
    }

    /// durable-commit: one save in a transaction of its own. A new `MutableDocument` over an existing ID
    /// saves on top of the current revision (last write wins), as an update that did not read first.
    func update(_ document: NewDocument) throws {
        try database.saveDocument(MutableDocument(id: document.id, data: document.properties))
    }

    /// rev-insert: one `insertRevisions` call, one durable commit.
    func insertReplicated(_ revisions: [ReplicatedRevision]) throws -> [RevisionInsertOutcome] {
        try database.insertRevisions(revisions)
    }

    /// A revision with its history and body (untimed: the check after `rev-insert`).
    func revision(of id: String, revisionID: String) throws -> ReplicatedRevision? {
        try database.revision(withID: id, revisionID: revisionID)
    }

    /// compaction: `db.compact()`, on the calling thread.
    func compact() throws -> CompactionReport {
        try database.compact()
    }

    /// The number of live documents and the last sequence (untimed checks).
    var counts: (documents: UInt64, lastSequence: UInt64) { get throws { (try database.count, try database.lastSequence) } }

    func close() throws {
        try database.close()
    }

    static func footprint(of directory: String) throws -> Int {
        try Files.totalSize(of: directory)
    }

    static func note(for workload: Workload) -> String {
        switch workload {
        case .bulkLoad: "fullSync: fdatasync per inBatch of 1000 saveDocument"
        case .fileSize: "every file in the directory after close"
        case .pointGet: "document(withID:): snapshot, body read, not parsed"
        case .changesScan: "changes(since:limit: 10000) pages: seq, ID, rev ID, leaves; no body"
        case .durableCommit: "fullSync: fdatasync per saveDocument"
        case .revInsert: "fullSync: fdatasync per insertRevisions of 1000"
        case .expiry: "ms from the due second until the last purge is heard; sweeper batches of 1000"
        case .expiryStall: "longest saveDocument (fullSync) of a concurrent writer during the purge"
        case .compaction: "db.compact(), autoCompaction off"
        case .query: "value indexes and SQL++ queries (QueryBench)"
        case .collections: "named collections and a hash join (CollectionsBench)"
        case .replicateLocal: "Replicator push, one-shot, DatabaseEndpoint; both fullSync; min(N, 100000) docs"
        case .replicateNoop: "push-and-pull one-shot, nothing new, N docs in step; median of 11 runs"
        }
    }

    static func note(for figure: Figure) -> String {
        switch figure {
        case .input: "size-before ÷ seconds; files in the page cache"
        case .seconds: "db.compact(), alone"
        case .sizeBefore: "5 revisions per doc, old bodies kept; every file after close"
        case .sizeAfter: "every file after close"
        case .freshSize: "the 5th revisions saved once each, 1000 per inBatch"
        case .afterVsFresh: "size-after ÷ fresh-size (target ≤ 1.1)"
        case .commitsNormal: "saveDocument, fullSync, reader running; stretches before and after"
        case .getNormal: "document(withID:), writer running; stretches before and after"
        case .commitsKept: "commits-during ÷ commits-normal (target ≥ 0.5)"
        case .getRateKept: "get-normal ÷ get-during: the get rate kept (target ≥ 0.5)"
        default: note(for: .compaction)
        }
    }
}
