/// The workloads, in the order they run. `durable-commit` changes the data, so it comes after the reads;
/// `rev-insert` and `compaction` write databases of their own.
enum Workload: String, CaseIterable, Comparable {
    case bulkLoad = "bulk-load"
    case fileSize = "file-size"
    case pointGet = "point-get"
    case changesScan = "changes-scan"
    case durableCommit = "durable-commit"
    case revInsert = "rev-insert"
    /// A row group: several figures (`Measurement.figure`), each with its own unit.
    case compaction

    var unit: String {
        switch self {
        case .bulkLoad, .changesScan, .revInsert: "docs/s"
        case .fileSize: "bytes"
        case .pointGet: "ns/op"
        case .durableCommit: "commits/s"
        case .compaction: "MB/s"
        }
    }

    /// Whether it needs the bulk-loaded database (every workload but `rev-insert` and `compaction`, which
    /// start empty).
    var needsLoad: Bool { self != .revInsert && self != .compaction }

    static func < (lhs: Workload, rhs: Workload) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
