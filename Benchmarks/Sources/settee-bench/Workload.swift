/// The workloads, in the order they run. `durable-commit` changes the data, so it comes after the reads;
/// `rev-insert` writes a database of its own, and so does `expiry` (settee-doc only), which measures two
/// figures in one run: `expiry` and `expiry-stall`.
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

    var unit: String {
        switch self {
        case .bulkLoad, .changesScan, .revInsert: "docs/s"
        case .fileSize: "bytes"
        case .pointGet: "ns/op"
        case .durableCommit: "commits/s"
        case .expiry, .expiryStall: "ms"
        }
    }

    /// Whether it needs the bulk-loaded database (not `rev-insert` and `expiry`, which start empty).
    var needsLoad: Bool {
        switch self {
        case .revInsert, .expiry, .expiryStall: false
        default: true
        }
    }

    /// `expiry` and `expiry-stall` are measured by one run.
    var isExpiry: Bool { self == .expiry || self == .expiryStall }

    static func < (lhs: Workload, rhs: Workload) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
