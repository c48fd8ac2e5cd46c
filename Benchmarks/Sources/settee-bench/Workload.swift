/// The workloads, in the order they run. `durable-commit` changes the data, so it comes after the reads;
/// `rev-insert` and `compaction` write databases of their own, and so does `expiry` (settee-doc only), which
/// measures two figures in one run: `expiry` and `expiry-stall`.
enum Workload: String, CaseIterable, Comparable {
    case bulkLoad = "bulk-load"
    case fileSize = "file-size"
    case pointGet = "point-get"
    case changesScan = "changes-scan"
    case durableCommit = "durable-commit"
    case revInsert = "rev-insert"
    /// Documents expiring in the same second: the time from that second until all are purged.
    case expiry = "expiry"
    /// The same run: the longest single-document save of a concurrent writer while they are purged.
    case expiryStall = "expiry-stall"
    /// A row group: several figures (`Measurement.figure`), each with its own unit.
    case compaction
    /// settee-doc only: a one-shot push of min(N, 100,000) documents between two databases (`SetteeReplicator`).
    case replicateLocal = "replicate-local"
    /// The same run: a push-and-pull with nothing new between two databases of N documents in step.
    case replicateNoop = "replicate-noop"
    /// A row group (`QueryBench`): value indexes and SQL++ queries on settee-doc against SQLite with JSON
    /// bodies and expression indexes, on databases of its own.
    case query
    /// A row group (`CollectionsBench`): 100 collections against one of as many documents, and a join
    /// against SQLite's, on databases of its own.
    case collections

    var unit: String {
        switch self {
        case .bulkLoad, .changesScan, .revInsert: "docs/s"
        case .fileSize: "bytes"
        case .pointGet: "ns/op"
        case .durableCommit: "commits/s"
        case .expiry, .expiryStall, .replicateNoop: "ms"
        case .replicateLocal: "docs/s"
        case .compaction: "MB/s"
        case .query: "queries/s"
        case .collections: "ms"
        }
    }

    /// Whether it needs the bulk-loaded database (every workload but `rev-insert`, `compaction` and `expiry`,
    /// which start empty).
    var needsLoad: Bool { self != .revInsert && self != .compaction && self != .query && self != .collections && !isExpiry && !isReplication }

    /// `replicate-local` and `replicate-noop` are measured by one run, and both reported when either is selected.
    var isReplication: Bool { self == .replicateLocal || self == .replicateNoop }

    /// `expiry` and `expiry-stall` are measured by one run.
    var isExpiry: Bool { self == .expiry || self == .expiryStall }

    static func < (lhs: Workload, rhs: Workload) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
