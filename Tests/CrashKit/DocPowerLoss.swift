import Foundation
import Settee
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
    package var lost = 0
    package var corruptOpens = 0
    package var failures: [String] = []

    package var description: String {
        "crash points: \(crashPoints), acknowledged transactions verified: \(stepsVerified) (\(operationsVerified) document operations), aborted batches verified absent: \(abortedBatchesVerified), in flight kept/dropped: \(inFlightPresent)/\(inFlightAbsent), injected sync failures: \(syncFailures), write failures: \(writeFailures), lost: \(lost), corrupt opens: \(corruptOpens)"
    }
}

/// Simulated power loss under a ``Database``, in process: each crash point opens the database
/// with its log on a ``FaultInjectingFile`` (through the `package` initializer that takes the
/// file opener), runs ``DocWorkload`` until the power fails at a random I/O operation (sometimes
/// after an injected `fdatasync` or write failure, after which every write must fail until the
/// database is reopened), puts what the disk could hold in place, and checks it as the SIGKILL
/// round does: `check()`, every acknowledged step exactly, nothing partly visible. Blob files are
/// written to the real disk (synced before the transaction that references them).
package struct DocPowerLossRun {
    package var seed: UInt64
    package var crashPoints: Int
    package var directory: String
    package var crashPointsPerDatabase = 25
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
        let crashAt = 1 + Int(r.next(below: fullSync ? 80 : 120))
        plan.crashAt = crashAt
        if r.chance(12) { plan.failSyncAt = 1 + Int(r.next(below: UInt64(crashAt))) }
        if r.chance(6) { plan.failWriteAt = 1 + Int(r.next(below: UInt64(crashAt))) }
        let logPath = state.realPath + "/log"
        let fileSeed = r.next()
        var config = DatabaseConfiguration(directory: state.realDirectory)
        config.maxRevTreeDepth = state.maxDepth
        config.fullSync = fullSync

        var log: FaultInjectingFile?
        var returned: [(step: Int, committed: Bool?)] = []
        var durableCount = 0
        var inFlight: Int?
        var step = state.nextStep
        plan.onDurable = { durableCount = returned.count }

        // The log on disk is what the last verification left (or nothing): taken as durable.
        let faulty = try? Database(name: DocRunState.name, config: config, openFile: { (path) throws(StorageError) in
            let file = try FaultInjectingFile(path: path, plan: plan, seed: fileSeed)
            if path == logPath { log = file }
            return file
        })
        if let db = faulty {
            // After a failure the store is poisoned and closing it touches nothing; otherwise
            // closing checkpoints, and the power may fail in the middle of that too.
            defer { try? db.close() }
            while !plan.crashed && step < state.nextStep + 40 {
                if plan.injectedFailure {
                    try expectPoisoned(db)
                    break
                }
                do {
                    let outcome = try state.workload.run(step, on: db)
                    returned.append((step, outcome.committed))
                } catch {
                    inFlight = step
                    step += 1
                    guard plan.crashed || plan.injectedFailure else {
                        throw DocRunState.Failure(description: "step \(step - 1) failed without an injected fault: \(error)")
                    }
                    if !plan.crashed { try expectPoisoned(db) }
                    break
                }
                step += 1
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

        // The power fails: the disk holds the durable image and some of the rest. A crash while
        // the database was first created may leave no log (it is renamed into place once durable).
        if let log {
            var tear = SplitMix(seed: r.next())
            try writeImage(log.imageAfterPowerLoss(random: &tear), to: logPath)
            log.close()
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
