import Foundation
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

/// A small deterministic generator (SplitMix64), so a failing randomized test replays from its seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

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
