import Foundation
@_spi(Replication) import Settee
import SetteeStorage

/// A database the document rounds crash, and its reference: a database in another directory
/// that has run exactly the steps the crashed one holds, without crashing.
final class DocRunState {
    static let name = "docs"
    let realDirectory: String
    let referenceDirectory: String
    var workload = DocWorkload(seed: 0)
    var maxDepth = 20
    var reference: Database?
    /// The first step the next run of the workload makes.
    var nextStep = 0
    /// Every blob a save that returned carried since the last reset, digest to length: each
    /// must be on disk whole after any crash.
    var acknowledgedBlobs: [String: UInt64] = [:]
    /// What the database's indexes may be (``DocIndexes``): the changes made since the last
    /// verification, which settled it.
    var indexes = IndexExpectation()

    init(directory: String) {
        realDirectory = directory + "/docs"
        referenceDirectory = directory + "/reference"
    }

    var realPath: String { realDirectory + "/\(Self.name).settee" }

    /// Starts over: both databases deleted, a new workload seed and revision-tree depth (3 and
    /// 5 prune on almost every save).
    func reset(_ r: inout SplitMix) throws {
        try reference?.close()
        reference = nil
        try? FileManager.default.removeItem(atPath: realDirectory)
        try? FileManager.default.removeItem(atPath: referenceDirectory)
        workload = DocWorkload(seed: r.next())
        maxDepth = [3, 5, 20, 100][Int(r.next(below: 4))]
        nextStep = 0
        acknowledgedBlobs = [:]
        indexes = IndexExpectation()
        var config = DatabaseConfiguration(directory: referenceDirectory)
        config.maxRevTreeDepth = maxDepth
        config.fullSync = false
        // The reference keeps every body; comparisons leave out what compaction drops.
        config.autoCompaction = false
        reference = try Database(name: Self.name, config: config)
    }

    func close() {
        try? reference?.close()
        reference = nil
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// What the checks of a recovered database found.
    struct Verified {
        /// How many of the candidate steps the database holds.
        var applied: Int
        /// The outcomes of the steps it holds, in order.
        var outcomes: [DocStepOutcome]
        var snapshot: DocSnapshot
        /// What the checks of its indexes covered.
        var indexes: DocIndexes.Checked
    }

    /// Checks the recovered database: the engine's `check()` as the crash left it, the
    /// database reopened, read in full (``DocSnapshot``) and checked (`Database.check()`),
    /// consistent on its own, no unfinished
    /// compaction's log left, its indexes as ``indexes`` allows, each whole and serving queries
    /// as a full scan answers them (``DocIndexes/verify(_:snapshot:expected:seed:)``, queries
    /// drawn with `querySeed`), and equal (``DocSnapshot/comparable``) to
    /// the reference with the first `j` of `candidates` run, for the smallest `j >= acknowledged`
    /// (the candidates are the steps the crashed run attempted since `nextStep`, in order, with
    /// whether each committed there, nil for the one in flight). The reference is left holding
    /// those `j` steps. Throws ``Failure`` describing what is wrong.
    func verify(candidates: [(step: Int, committed: Bool?)], acknowledged: Int, fullSync: Bool = true, querySeed: UInt64,
                corruptOpens: inout Int, lost: inout Int) throws -> Verified {
        guard let reference else { throw Failure(description: "no reference database") }
        if let why = Self.checkStore(realPath) {
            corruptOpens += 1
            throw Failure(description: "as the crash left it: " + why)
        }
        var config = DatabaseConfiguration(directory: realDirectory)
        config.maxRevTreeDepth = maxDepth
        config.fullSync = fullSync
        let db: Database
        do {
            db = try Database(name: Self.name, config: config)
        } catch {
            corruptOpens += 1
            throw Failure(description: "reopening the database failed: \(error)")
        }
        let found: DocSnapshot
        let report: DatabaseCheckReport
        // The indexes are checked while the database is open; a problem is reported once the
        // documents are known to be right (a lost document would show in the indexes too).
        var indexProblem: String?
        var indexes = DocIndexes.Checked()
        do {
            found = try DocSnapshot(db)
            report = try db.check()
            if report.isHealthy {
                do {
                    indexes = try DocIndexes.verify(db, snapshot: found, expected: &self.indexes, seed: querySeed)
                } catch let v as DocIndexes.Violation {
                    indexProblem = v.description
                }
            }
            try db.close()
        } catch {
            try? db.close()
            corruptOpens += 1
            throw Failure(description: "reading the reopened database failed: \(error)")
        }
        let indexProblems = report.problems.filter { $0.documentID == nil && $0.message.hasPrefix("index ") }
        guard indexProblems.isEmpty else {
            throw Failure(description: "the document layer's check finds the indexes drifted: "
                          + indexProblems.prefix(5).map(\.description).joined(separator: "; "))
        }
        guard report.isHealthy else {
            corruptOpens += 1
            throw Failure(description: "the document layer's check: " + report.problems.prefix(5).map(\.description).joined(separator: "; "))
        }
        if let why = Self.checkStore(realPath) {
            corruptOpens += 1
            throw Failure(description: "after the database was reopened and closed: " + why)
        }
        for name in ["log.compact", "log.compact.new"] where FileManager.default.fileExists(atPath: realPath + "/" + name) {
            throw Failure(description: "after reopening, \(name) is still there")
        }
        let problems = found.problems()
        guard problems.isEmpty else {
            lost += 1
            throw Failure(description: "the reopened database is inconsistent: " + problems.prefix(5).joined(separator: "; "))
        }
        var outcomes: [DocStepOutcome] = []
        var atAcknowledged: DocSnapshot?
        for j in 0...candidates.count {
            if j > 0 {
                let c = candidates[j - 1]
                let outcome = try workload.run(c.step, on: reference)
                if let committed = c.committed, committed != outcome.committed {
                    throw Failure(description: "step \(c.step) \(committed ? "committed" : "aborted") in the crashed run but not in the reference: the workload is not deterministic")
                }
                outcomes.append(outcome)
            }
            guard j >= acknowledged else { continue }
            let expected = try DocSnapshot(reference).comparable
            if expected == found.comparable {
                if let indexProblem { throw Failure(description: indexProblem) }
                return Verified(applied: j, outcomes: outcomes, snapshot: found, indexes: indexes)
            }
            if j == acknowledged { atAcknowledged = expected }
        }
        lost += 1
        let first = candidates.first.map { "step \($0.step)" } ?? "none"
        throw Failure(description: "the reopened database is not the reference with the \(acknowledged) acknowledged steps (from \(first)) nor with any of the \(candidates.count - acknowledged) after them: \(found.comparable.difference(from: atAcknowledged!))")
    }

    /// Opens the database's engine store on its own and runs `check()`; nil when it passes or
    /// there is no log yet (a crash while the database was first created).
    static func checkStore(_ path: String) -> String? {
        guard FileManager.default.fileExists(atPath: path + "/log") else { return nil }
        let store: Store
        do {
            store = try Store(directory: path)
        } catch {
            return "opening the store failed: \(error)"
        }
        defer { store.abandon() }
        do {
            _ = try store.check()
        } catch {
            return "check() failed: \(error)"
        }
        return nil
    }
}
