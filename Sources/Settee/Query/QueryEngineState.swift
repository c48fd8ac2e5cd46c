import Synchronization
internal import SetteeStorage

/// The query engine's share of an open database: the indexes writers keep, the map functions
/// the application gave, the map indexes caught up in the background, and the live queries.
final class QueryEngineState: Sendable {
    /// The indexes writers maintain; replaced only with the write lock held, once the catalog
    /// change committed.
    let indexSet = Mutex(IndexSet())
    /// The map functions the application gave (``MapIndexConfiguration``), by index name,
    /// for as long as this process has the database open.
    let mapFunctions = Mutex<[String: MapIndexConfiguration]>([:])
    /// Map indexes whose deferred rows a background thread makes (``DatabaseCore/catchUpLater(_:)``).
    let mapCatchUp = Mutex<(running: Bool, waiting: Set<String>)>((false, []))
    /// The rows live queries last read for a commit's documents, keyed by the commit's
    /// sequence, so a thousand live queries parse a changed document once.
    let liveRows = Mutex<(sequence: UInt64, rows: [String: QueryRow?])>((0, [:]))
    /// The live queries, checked against each commit by one listener.
    let liveQueries = LiveQueryRegistry()

    /// Compiles the indexes of the catalog as the database opens (their map functions come
    /// later, from the application).
    func opened(_ core: DatabaseCore) throws {
        let loaded = try translating { try core.store.read { tx in try DatabaseCore.loadIndexes(tx, catalog: core.trees.indexCatalog, maps: [:]) } }
        indexSet.withLock { $0 = loaded }
    }
}

extension DatabaseCore {
    var liveQueries: LiveQueryRegistry { parts.queries.liveQueries }
}

/// The indexes' part in one write transaction: each index's entries move from a document's
/// old current revision to its new one; map index rows are made together before the commit,
/// and those left for later are caught up after it.
final class IndexCommit: CommitParticipant {
    unowned let core: DatabaseCore
    /// The indexes to maintain, read once per transaction (they change only under the write
    /// lock, outside any transaction).
    lazy var indexes: [CompiledIndex] = core.parts.queries.indexSet.withLock { $0.indexes }
    /// The properties those indexes read (nil: all), for parsing bodies only that far.
    lazy var indexedKeys: Set<String>? = WriteContext.documentKeys(indexes)
    /// Documents whose map-index rows this transaction must make before it commits, by index
    /// (nil: no rows, deleted or purged): made together, so a function that takes many
    /// documents at once is called once per 256.
    var pendingMaps: [String: (index: CompiledIndex, documents: [String: QueryRow?])] = [:]
    /// The map indexes some of whose documents this transaction left to be mapped after it.
    var deferredMaps: Set<String> = []

    init(core: DatabaseCore) {
        self.core = core
    }

    func documentChanged(_ change: inout CommittedDocument, in c: WriteContext) throws {
        try c.updateIndexes(change)
    }

    func willCommit(_ c: WriteContext) throws {
        try c.flushMapIndexes()
    }

    func didCommit(_ c: WriteContext) {
        core.catchUpLater(deferredMaps)
    }
}
