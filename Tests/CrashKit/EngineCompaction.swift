import SetteeStorage

/// A compaction of a workload's store run one step at a time, so that commits can run between
/// its steps: the snapshot it began with copied in batches (one target transaction each), then
/// catch-ups, then the finish, which swaps the new log in. Values are copied by `put`, as any
/// caller of the engine would.
package final class SteppedCompaction {
    package enum Phase: Equatable {
        case copying
        case catchingUp(left: Int)
        case finished
    }

    package let compaction: StoreCompaction
    package private(set) var phase = Phase.copying
    private var copier: SnapshotCopier
    private let batch: Int

    /// Begins a compaction of `store`: `batch` entries per copy step, then `catchUps` catch-ups.
    package init(_ store: Store, batch: Int, catchUps: Int) throws {
        compaction = try store.beginCompaction()
        copier = SnapshotCopier(compaction)
        self.batch = max(1, batch)
        self.catchUps = catchUps
    }

    private let catchUps: Int

    /// Runs the next step; `willFinish` is called just before the finish. Returns true once the
    /// new log is swapped in. When a step throws, the compaction is cancelled (the store goes on
    /// with its old log) and the error rethrown.
    package func step(willFinish: () -> Void = {}) throws -> Bool {
        do {
            switch phase {
            case .copying:
                if try !copier.step(compaction, batch: batch) { phase = catchUps > 0 ? .catchingUp(left: catchUps) : .catchingUp(left: 0) }
            case .catchingUp(let left):
                if left == 0 {
                    willFinish()
                    try compaction.finish { source, changes, out in try Self.apply(changes, from: source, into: out) }
                    phase = .finished
                    return true
                }
                try compaction.catchUp { source, changes in
                    try compaction.target.write { out in try Self.apply(changes, from: source, into: out) }
                }
                phase = .catchingUp(left: left - 1)
            case .finished:
                return true
            }
            return false
        } catch {
            compaction.cancel()
            throw error
        }
    }

    /// Runs every step.
    package func run(willFinish: () -> Void = {}) throws {
        while try !step(willFinish: willFinish) {}
    }

    /// Brings the keys in `changes` up to date in `out` from `source`.
    package static func apply(_ changes: [ChangedKey], from source: ReadTransaction, into out: WriteTransaction) throws {
        for change in changes {
            guard let tree = out.tree(named: change.tree.name) else {
                throw StorageError(code: .noSuchTree, reason: "the compaction target lacks \(change.tree.name)")
            }
            if let value = try source.value(forKey: change.key, in: change.tree) {
                try out.put(change.key, value, in: tree)
            } else {
                _ = try out.delete(change.key, in: tree)
            }
        }
    }
}

/// The snapshot a compaction began with, copied into its target a batch of entries per target
/// transaction (values by `put`), so that writes to the source can run between batches.
package struct SnapshotCopier {
    private let names: [String]
    private var index = 0
    private var after: [UInt8]?
    /// Entries copied so far.
    package private(set) var copied = 0

    package init(_ c: StoreCompaction) { names = c.readStart { $0.treeNames } }

    /// Copies up to `batch` entries; returns false once everything is copied.
    package mutating func step(_ c: StoreCompaction, batch: Int) throws -> Bool {
        guard index < names.count else { return false }
        let name = names[index]
        let start = after
        var last: [UInt8]?
        var n = 0
        try c.readStart { source in
            guard let from = source.tree(named: name) else { return }
            try c.target.write { out in
                guard let to = out.tree(named: name) else {
                    throw StorageError(code: .noSuchTree, reason: "the compaction target lacks \(name)")
                }
                try source.forEach(in: from, from: start) { k, v in
                    if let start, k.elementsEqual(start) { return true }
                    try out.put(k, v, in: to)
                    n += 1
                    if n == batch {
                        last = Array(k)
                        return false
                    }
                    return true
                }
            }
        }
        copied += n
        if let last { after = last } else { index += 1; after = nil }
        return index < names.count
    }

    /// Copies everything left.
    package mutating func all(_ c: StoreCompaction) throws {
        while try step(c, batch: 500) {}
    }
}
