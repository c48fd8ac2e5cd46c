/// One storage engine under test, driven with keys, versions and bodies as bytes (`settee`, `sqlite`,
/// `lmdb`). The runner drives every engine through these calls with the same documents in the same order;
/// each implementation keeps to the engine's own C or Swift API, with no wrapper in the timed path.
///
/// `settee-doc`, Settee's document API, takes document IDs and properties rather than bytes and has a
/// runner of its own (`DocumentRunner`), with the same workloads, data and timing rules.
protocol Engine: AnyObject {
    static var name: EngineName { get }

    /// Opens the database in `directory` (which exists), creating it when empty. `documentCount` lets
    /// an engine size what must be sized up front (LMDB's map).
    init(directory: String, documentCount: Int) throws

    /// Writes new documents in one durable commit (bulk-load).
    func insert(_ batch: DocumentBatch) throws

    /// Looks `key` up in one read transaction and copies its body into `sink`; false when absent.
    func get(_ key: UnsafeRawBufferPointer, into sink: ReadSink) throws -> Bool

    /// Reads every document in sequence order in one read transaction, copying key, version and body into
    /// `sink`.
    func scanChanges(into sink: ReadSink) throws

    /// Switches to the settings of `durable-commit`, when they differ from the load's.
    func prepareForDurableCommits() throws

    /// Replaces an existing document in one durable commit: new version, body and sequence, the old
    /// sequence's entry removed.
    func update(_ document: Document) throws

    /// Whether the engine takes part in `rev-insert` (the raw Settee engine has no revision trees).
    static var storesRevisionTrees: Bool { get }

    /// Writes replicated documents in one durable commit (rev-insert), the way the engine's document store
    /// would: for each, read its record (absent here), build and serialize its revision tree, write the
    /// record with the current body.
    func insertReplicated(_ batch: ReplicatedBatch) throws

    /// The history (newest first) and body a document written by `insertReplicated` has; nil when absent.
    /// Untimed: the check after `rev-insert`.
    func replicatedDocument(_ key: UnsafeRawBufferPointer) throws -> (history: [[UInt8]], body: [UInt8])?

    /// Whether the engine takes part in `compaction` (SQLite, with LiteCore's record layout).
    static var compactsHistory: Bool { get }

    /// Writes one generation of `compaction`'s history in one commit (untimed): generation 1 inserts every
    /// document; each later one saves a new revision on top of the current one, the old current revision's
    /// body kept in the revision tree until compaction.
    func saveHistory(_ batch: HistoryBatch) throws

    /// `compaction`, first part (timed): drops the body of every revision that is not current.
    func pruneOldBodies() throws

    /// `compaction`, second part (timed): rebuilds the file without the space freed.
    func vacuum() throws

    /// A document `saveHistory` wrote: its revisions in stored order (current first; ASCII IDs, the bodies
    /// kept in the tree) and its current body; nil when absent. Untimed: the checks of `compaction`.
    func historyDocument(_ key: UnsafeRawBufferPointer) throws
        -> (revisions: [(revisionID: [UInt8], body: [UInt8]?)], body: [UInt8])?

    /// Flushes and closes; the object is not used afterwards.
    func close() throws

    /// The bytes the closed database in `directory` takes.
    static func footprint(of directory: String) throws -> Int

    /// How durable `workload`'s writes are, or how it reads and measures, in a few words.
    static func note(for workload: Workload) -> String

    /// The same for one figure of the `compaction` group.
    static func note(for figure: Figure) -> String
}

/// The engines `--engines` accepts, in the default order.
enum EngineName: String, CaseIterable {
    /// The storage engine (`SetteeStorage`) used directly.
    case settee
    /// The document API (`Settee`: `Database`, `MutableDocument`, ...) over the same storage engine.
    case setteeDoc = "settee-doc"
    case sqlite
    case lmdb
}

extension Engine {
    static var storesRevisionTrees: Bool { false }

    func insertReplicated(_ batch: ReplicatedBatch) throws {
        throw EngineError("\(Self.name.rawValue) does not store revision trees")
    }

    func replicatedDocument(_ key: UnsafeRawBufferPointer) throws -> (history: [[UInt8]], body: [UInt8])? {
        nil
    }

    static var compactsHistory: Bool { false }

    static func note(for figure: Figure) -> String { note(for: .compaction) }

    func saveHistory(_ batch: HistoryBatch) throws {
        throw EngineError("\(Self.name.rawValue) does not run compaction")
    }

    func pruneOldBodies() throws {
        throw EngineError("\(Self.name.rawValue) does not run compaction")
    }

    func vacuum() throws {
        throw EngineError("\(Self.name.rawValue) does not run compaction")
    }

    func historyDocument(_ key: UnsafeRawBufferPointer) throws
        -> (revisions: [(revisionID: [UInt8], body: [UInt8]?)], body: [UInt8])? {
        nil
    }
}

/// An engine failed: what it was doing and what it said.
struct EngineError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
