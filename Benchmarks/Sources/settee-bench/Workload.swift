/// The workloads, in the order they run. `durable-commit` changes the data, so it comes after the reads;
/// `rev-insert` writes a database of its own.
enum Workload: String, CaseIterable, Comparable {
    case bulkLoad = "bulk-load"
    case fileSize = "file-size"
    case pointGet = "point-get"
    case changesScan = "changes-scan"
    case durableCommit = "durable-commit"
    case revInsert = "rev-insert"

    var unit: String {
        switch self {
        case .bulkLoad, .changesScan, .revInsert: "docs/s"
        case .fileSize: "bytes"
        case .pointGet: "ns/op"
        case .durableCommit: "commits/s"
        }
    }

    /// Whether it needs the bulk-loaded database (every workload but `rev-insert`, which starts empty).
    var needsLoad: Bool { self != .revInsert }

    static func < (lhs: Workload, rhs: Workload) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
