/// One storage engine under test. The runner drives every engine through these calls with the same
/// documents in the same order; each implementation keeps to the engine's own C or Swift API, with no
/// wrapper in the timed path.
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

    /// Flushes and closes; the object is not used afterwards.
    func close() throws

    /// The bytes the closed database in `directory` takes.
    static func footprint(of directory: String) throws -> Int

    /// How durable `workload`'s writes are, or how it reads and measures, in a few words.
    static func note(for workload: Workload) -> String
}

/// The engines `--engines` accepts.
enum EngineName: String, CaseIterable {
    case settee
    case sqlite
    case lmdb

    /// Names of engines that belong to later layers: refused with a clear message until they exist.
    static let notYetAvailable: [String: String] = [
        "settee-doc": "the Settee document layer",
    ]
}

/// An engine failed: what it was doing and what it said.
struct EngineError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
