/// One committed state of the database: the trees' roots and the end of the log they live in.
/// Immutable once published; readers share it without locks.
final class Snapshot: @unchecked Sendable {
    let trees: [TreeState]
    let names: [String: UInt32]
    /// Everything this snapshot refers to lies below this offset.
    let end: UInt64
    let commitID: UInt64
    /// The log file this snapshot lives in.
    let backing: LogBacking

    /// `previous` lends its name index when no tree was created since (the usual commit).
    init(trees: [TreeState], end: UInt64, commitID: UInt64, backing: LogBacking, previous: Snapshot? = nil) {
        self.trees = trees
        self.backing = backing
        if let previous, previous.trees.count == trees.count {
            names = previous.names
        } else {
            var names: [String: UInt32] = [:]
            for t in trees { names[t.name] = t.id }
            self.names = names
        }
        self.end = end
        self.commitID = commitID
    }

    @inline(__always) func state(_ id: UInt32) -> TreeState? {
        let i = Int(id) - 1
        return i >= 0 && i < trees.count ? trees[i] : nil
    }
}
