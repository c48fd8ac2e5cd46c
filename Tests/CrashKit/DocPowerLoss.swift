import Foundation
@_spi(Replication) import Settee
import SetteeStorage

/// Figures from a round of simulated power losses under the document layer.
package struct DocPowerLossReport: CustomStringConvertible {
    package var crashPoints = 0
    package var stepsVerified = 0
    package var operationsVerified = 0
    package var abortedBatchesVerified = 0
    package var inFlightPresent = 0
    package var inFlightAbsent = 0
    package var syncFailures = 0
    package var writeFailures = 0
    /// Compactions begun, finished, cancelled from their progress callback; power failures inside
    /// one; power failures between the swap's rename and its directory sync, by how the rename
    /// came out (the database opened in its new or its old form).
    package var compactionsBegun = 0
    package var compactionsFinished = 0
    package var compactionsCancelled = 0
    package var crashesInCompaction = 0
    package var swapRenameKept = 0
    package var swapRenameLost = 0
    package var lost = 0
    package var corruptOpens = 0
    package var failures: [String] = []

    package var description: String {
        "crash points: \(crashPoints), acknowledged transactions verified: \(stepsVerified) (\(operationsVerified) document operations), aborted batches verified absent: \(abortedBatchesVerified), in flight kept/dropped: \(inFlightPresent)/\(inFlightAbsent), injected sync failures: \(syncFailures), write failures: \(writeFailures), lost: \(lost), corrupt opens: \(corruptOpens)"
    }

    package var compactionDetails: String {
        "compactions begun: \(compactionsBegun), finished: \(compactionsFinished), cancelled: \(compactionsCancelled), power failures inside one: \(crashesInCompaction), between the swap's rename and its directory sync: \(swapRenameKept + swapRenameLost) (rename on disk: \(swapRenameKept), not: \(swapRenameLost))"
    }
}

/// Simulated power loss under a ``Database``, in process: each crash point opens the database
/// in a ``SimulatedDirectory`` (its files ``FaultInjectingFile``s, through the `package`
/// initializer that takes the file opener; its renames and directory syncs simulated), runs
/// ``DocWorkload`` until the power fails at a random I/O operation (sometimes after an injected
/// `fdatasync`, write or rename failure, after which every write must fail until the database is
/// reopened, unless it hit a compaction's new log), with `compact()` at some crash points (more
/// steps run from its progress callback; some cancelled there), puts what the disk could hold in
/// place, and checks it as the SIGKILL round does: `check()`, every acknowledged step exactly,
/// nothing partly visible, no `log.compact` left. Blob files are written to the real disk (synced
/// before the transaction that references them).
package struct DocPowerLossRun {
    package var seed: UInt64
    package var crashPoints: Int
    package var directory: String
    package var crashPointsPerDatabase = 25
    /// The share of crash points (percent) that run a compaction.
    package var compactionShare: UInt64 = 30
    package var log: (String) -> Void = { print($0) }

    package init(seed: UInt64, crashPoints: Int, directory: String) {
        self.seed = seed
        self.crashPoints = crashPoints
        self.directory = directory
    }

    package func run() -> DocPowerLossReport {
        var report = DocPowerLossReport()
        let state = DocRunState(directory: directory)
        defer { state.close() }
        for point in 0..<crashPoints {
            do {
                if point % crashPointsPerDatabase == 0 {
                    var r = SplitMix(seed: SplitMix.mix(seed, 0x4_0000_0000 + UInt64(point)))
                    try state.reset(&r)
                }
                try crashPoint(point, state, report: &report)
            } catch {
                let message = "seed \(seed), crash point \(point): \(error) (replay: crash-harness docs-power-loss --seed \(seed) --crash-points \(point + 1))"
                report.failures.append(message)
                log("FAILED: " + message)
                return report
            }
            report.crashPoints += 1
        }
        return report
    }

    private func crashPoint(_ point: Int, _ state: DocRunState, report: inout DocPowerLossReport) throws {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(point)))
        let fullSync = r.chance(80)
        let plan = FaultPlan()
        // A compaction after step `compactAt`, its progress callback running more steps; a few
        // are cancelled from there. Its I/O counts among the operations the power may fail at.
        let compactAt: Int? = r.chance(compactionShare) ? Int(r.next(below: 8)) : nil
        let stepsPerReport = Int(r.next(below: 3))
        let cancels = r.chance(10)
        var crashAt = 1 + Int(r.next(below: (fullSync ? 80 : 120) + (compactAt == nil ? 0 : 150)))
        // Now and then the power fails right at the swap's rename or the directory sync after it.
        let crashAtSwap: Int? = compactAt != nil && !cancels && r.chance(30) ? Int(r.next(below: 2)) : nil
        if crashAtSwap != nil { crashAt = Int.max }
        plan.crashAt = crashAt
        if r.chance(12) { plan.failSyncAt = 1 + Int(r.next(below: UInt64(min(crashAt, 250)))) }
        if r.chance(6) { plan.failWriteAt = 1 + Int(r.next(below: UInt64(min(crashAt, 250)))) }
        let fileSeed = r.next()
        var config = DatabaseConfiguration(directory: state.realDirectory)
        config.maxRevTreeDepth = state.maxDepth
        config.fullSync = fullSync
        // Compaction runs when the round says so, not by itself in the background.
        config.autoCompaction = false

        var returned: [(step: Int, committed: Bool?)] = []
        var durableCount = 0
        var inFlight: Int?
        var step = state.nextStep
        plan.onDurable = { durableCount = returned.count }

        // The files on disk are what the last verification left (or nothing): taken as durable.
        try FileManager.default.createDirectory(atPath: state.realPath, withIntermediateDirectories: true)
        let directory = try SimulatedDirectory(path: state.realPath, plan: plan, seed: fileSeed)
        defer { directory.detach() }
        directory.crashAtSwap = crashAtSwap
        let faulty = try? Database(name: DocRunState.name, config: config, openFile: { (path) throws(StorageError) in
            try directory.open(path)
        })
        if let db = faulty {
            // After a failure the store is poisoned and closing it touches nothing; otherwise
            // closing checkpoints, and the power may fail in the middle of that too.
            defer { try? db.close() }
            /// Runs the next step; false when it failed and the round must stop.
            func attempt() throws -> Bool {
                do {
                    let outcome = try state.workload.run(step, on: db)
                    returned.append((step, outcome.committed))
                    step += 1
                    return true
                } catch {
                    inFlight = step
                    step += 1
                    guard plan.crashed || plan.injectedFailure else {
                        throw DocRunState.Failure(description: "step \(step - 1) failed without an injected fault: \(error)")
                    }
                    if !plan.crashed { try expectPoisoned(db) }
                    return false
                }
            }
            var n = 0
            while !plan.crashed && step < state.nextStep + 40 {
                if plan.injectedFailure {
                    try expectPoisoned(db)
                    break
                }
                guard try attempt() else { break }
                n += 1
                guard n - 1 == compactAt, !plan.crashed, !plan.injectedFailure else { continue }
                report.compactionsBegun += 1
                var stepFailure: (any Error)?
                var stepStopped = false
                do {
                    try db.compact { _ in
                        for _ in 0..<stepsPerReport where !stepStopped {
                            do { stepStopped = try !attempt() } catch {
                                stepFailure = error
                                stepStopped = true
                            }
                        }
                        return !cancels && !stepStopped
                    }
                    report.compactionsFinished += 1
                } catch {
                    if let stepFailure { throw stepFailure }
                    if stepStopped || plan.crashed {
                        if plan.crashed { report.crashesInCompaction += 1 }
                        break
                    }
                    if cancels, let e = error as? SetteeError, e.code == .cancelled {
                        report.compactionsCancelled += 1
                        if FileManager.default.fileExists(atPath: state.realPath + "/log.compact") {
                            throw DocRunState.Failure(description: "a cancelled compaction left log.compact behind")
                        }
                        continue
                    }
                    guard plan.injectedFailure else {
                        throw DocRunState.Failure(description: "compaction failed without an injected fault: \(error)")
                    }
                    // A failure before the swap abandons the compaction (its new log deleted) and
                    // leaves the database as it was; one after the rename poisons it.
                    if FileManager.default.fileExists(atPath: state.realPath + "/log.compact") {
                        throw DocRunState.Failure(description: "a compaction abandoned after \(error) left log.compact behind")
                    }
                    break
                }
                if stepStopped { break }
            }
        } else if !(plan.crashed || plan.injectedFailure) {
            throw DocRunState.Failure(description: "opening the database failed without an injected fault")
        }
        guard plan.operationsAfterCrash == 0 else {
            throw DocRunState.Failure(description: "the database used the file \(plan.operationsAfterCrash) times after the power failed")
        }
        report.syncFailures += plan.syncFailures
        report.writeFailures += plan.writeFailures
        let acknowledged = fullSync ? returned.count : durableCount

        // The power fails: the disk holds the durable image and some of the rest, under the names
        // the directory kept. A crash while the database was first created may leave no log (it is
        // renamed into place once durable).
        var tear = SplitMix(seed: r.next())
        let swapPending = directory.logRenamePending
        let newLog = directory.current["log"]
        let kept = try directory.powerLoss(random: &tear)
        // From here on the real engine opens what the disk holds, with the kernel's renames.
        directory.detach()
        if swapPending, kept != nil {
            if kept === newLog { report.swapRenameKept += 1 } else { report.swapRenameLost += 1 }
        }
        let candidates = returned + (inFlight.map { [($0, nil)] } ?? [])
        let verified = try state.verify(candidates: candidates, acknowledged: acknowledged, fullSync: fullSync,
                                        corruptOpens: &report.corruptOpens, lost: &report.lost)
        for outcome in verified.outcomes.prefix(acknowledged) {
            guard outcome.committed else {
                report.abortedBatchesVerified += 1
                continue
            }
            report.stepsVerified += 1
            report.operationsVerified += outcome.count
        }
        if inFlight != nil, fullSync {
            if verified.applied > returned.count { report.inFlightPresent += 1 } else { report.inFlightAbsent += 1 }
        }
        state.nextStep = step
    }

    /// After a failed write or sync, every write must fail (`io`) until the database is reopened.
    private func expectPoisoned(_ db: Database) throws {
        do {
            try db.saveLocalDocument(["after": "failure"], withID: "after-failure")
        } catch let e as SetteeError where e.code == .io {
            return
        } catch {
            throw DocRunState.Failure(description: "a write after a failed sync threw \(error) instead of an I/O error")
        }
        throw DocRunState.Failure(description: "a write after a failed sync or write was accepted")
    }
}
