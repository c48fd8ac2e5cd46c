import Foundation
import SetteeCrashKit
@testable import SetteeStorage

/// A fresh directory under the system temporary directory, removed by `cleanup()`.
struct TemporaryDirectory {
    let path: String

    init(_ label: String = "store") {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/settee-tests-\(label)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func sub(_ name: String) -> String { path + "/" + name }

    func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}

/// The crash kit's SplitMix64, so a failing randomized test replays from its seed.
typealias SeededGenerator = SplitMix

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

func paddedKey(_ prefix: String, _ i: Int, width: Int = 8) -> [UInt8] {
    var digits = String(i)
    while digits.count < width { digits = "0" + digits }
    return bytes(prefix + digits)
}

/// A configuration with small checkpoints so tests cross the memory/disk boundary often.
func smallConfiguration(checkpointInterval: Int = 1 << 16, durability: StoreConfiguration.Durability = .none) -> StoreConfiguration {
    var c = StoreConfiguration()
    c.checkpointInterval = checkpointInterval
    c.durability = durability
    return c
}

extension ReadTransaction {
    /// Every entry of `tree`, in order, copied.
    func all(_ tree: Tree, reverse: Bool = false) throws -> [([UInt8], [UInt8])] {
        var out: [([UInt8], [UInt8])] = []
        try forEach(in: tree, reverse: reverse) { k, v in
            out.append(([UInt8](k), [UInt8](v)))
            return true
        }
        return out
    }
}

func copyFile(_ from: String, _ to: String, length: Int? = nil) throws {
    let data = try Data(contentsOf: URL(fileURLWithPath: from))
    try (length.map { data.prefix($0) } ?? data).write(to: URL(fileURLWithPath: to))
}
