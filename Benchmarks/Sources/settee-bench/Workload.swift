/// The workloads, in the order they run. `durable-commit` is last because it changes the data.
enum Workload: String, CaseIterable, Comparable {
    case bulkLoad = "bulk-load"
    case fileSize = "file-size"
    case pointGet = "point-get"
    case changesScan = "changes-scan"
    case durableCommit = "durable-commit"

    var unit: String {
        switch self {
        case .bulkLoad, .changesScan: "docs/s"
        case .fileSize: "bytes"
        case .pointGet: "ns/op"
        case .durableCommit: "commits/s"
        }
    }

    static func < (lhs: Workload, rhs: Workload) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
