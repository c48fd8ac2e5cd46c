import Foundation
import SetteeStorage

/// Figures from a round of simulated power losses.
package struct PowerLossReport: CustomStringConvertible {
    package var crashPoints = 0
    package var commitsVerified = 0
    package var inFlightPresent = 0
    package var inFlightAbsent = 0
    package var syncFailures = 0
    package var writeFailures = 0
    /// Compactions begun and finished (swapped in), crash points whose power failed inside one,
    /// and power failures between the swap's rename and its directory sync, by how the rename
    /// came out (on disk or not: the database opened in its new or its old form).
    package var compactionsBegun = 0
    package var compactionsFinished = 0
    package var crashesInCompaction = 0
    package var swapRenameKept = 0
    package var swapRenameLost = 0
    package var lost = 0
    package var corruptOpens = 0
    package var failures: [String] = []

    package var description: String {
        "crash points: \(crashPoints), acknowledged commits verified: \(commitsVerified), in flight kept/dropped: \(inFlightPresent)/\(inFlightAbsent), injected sync failures: \(syncFailures), write failures: \(writeFailures), lost: \(lost), corrupt opens: \(corruptOpens)"
    }

    package var compactionDetails: String {
        "compactions begun: \(compactionsBegun), finished: \(compactionsFinished), power failures inside one: \(crashesInCompaction), between the swap's rename and its directory sync: \(swapRenameKept + swapRenameLost) (rename on disk: \(swapRenameKept), not: \(swapRenameLost))"
    }
}

/// Simulated power loss, in process: each crash point opens the database in a
/// ``SimulatedDirectory`` (its files ``FaultInjectingFile``s, its renames and directory syncs
/// simulated), runs the workload until the power fails at a random I/O operation (sometimes after
/// an injected `fdatasync`, write or rename failure), with a compaction running among its commits
/// at some crash points (a batch of its copy, a catch-up or its finish after each commit), builds
/// what the disk could hold (each name the directory keeps with its file's image), reopens that
/// with the real engine, and checks it: `check()` passes, every acknowledged (durable) commit is
/// there with exactly its values, nothing partly visible, no `log.compact` left. The database
/// carries on from the recovered image, and starts over every `crashPointsPerDatabase`.
package struct PowerLossRun {
    package var seed: UInt64
    package var crashPoints: Int
    package var directory: String
    package var crashPointsPerDatabase = 30
    /// The share of crash points (percent) that run a compaction.
    package var compactionShare: UInt64 = 30
    package var log: (String) -> Void = { print($0) }

    package init(seed: UInt64, crashPoints: Int, directory: String) {
        self.seed = seed
        self.crashPoints = crashPoints
        self.directory = directory
    }

    package func run() -> PowerLossReport {
        var report = PowerLossReport()
        let db = directory + "/power-loss.settee"
        var workload = Workload(seed: seed)
        var image: [UInt8]? = nil
        var base: Contents = [:]
        var nextStep = 0
        for point in 0..<crashPoints {
            if point % crashPointsPerDatabase == 0 {
                try? FileManager.default.removeItem(atPath: db)
                workload = Workload(seed: SplitMix.mix(seed, 0x1_0000_0000 + UInt64(point)), maxValue: 48 << 10)
                image = nil
                base = [:]
                nextStep = 0
            }
            do {
                let outcome = try crashPoint(point, db: db, workload: workload, image: image, base: base, nextStep: nextStep, report: &report)
                (image, base, nextStep) = outcome
            } catch {
                report.failures.append("seed \(seed), crash point \(point): \(error)")
                log("FAILED: seed \(seed), crash point \(point): \(error)")
                return report
            }
            report.crashPoints += 1
        }
        return report
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private func configuration(_ r: inout SplitMix) -> StoreConfiguration {
        var c = StoreConfiguration()
        c.durability = r.chance(80) ? .synchronous : .none
        c.checkpointInterval = (1 << 16) << Int(r.next(below: 3))
        c.maxDirtyNodes = 64 << Int(r.next(below: 4))
        c.compressionThreshold = r.chance(50) ? 256 : 16
        return c
    }

    /// One crash point; returns the recovered image, its contents and the next step to run.
    private func crashPoint(_ point: Int, db: String, workload: Workload, image: [UInt8]?, base: Contents, nextStep: Int, report: inout PowerLossReport) throws -> ([UInt8]?, Contents, Int) {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(point)))
        let config = configuration(&r)
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        let plan = FaultPlan()
        // A compaction begins after commit `compactAt`: its new log's creation, copy batches,
        // catch-ups, checkpoint, rename and directory sync are operations too.
        let compactAt: Int? = r.chance(compactionShare) ? Int(r.next(below: 10)) : nil
        var compactionBatch = [3, 40, 400, 4000][Int(r.next(below: 4))]
        let catchUps = Int(r.next(below: 3))
        var crashAt = 1 + Int(r.next(below: (config.durability == .synchronous ? 60 : 90) + (compactAt == nil ? 0 : 120)))
        // Now and then the power fails right at the swap: at the rename, or at the directory
        // sync after it (the copy in big batches, so the swap comes soon).
        let crashAtSwap: Int? = compactAt != nil && r.chance(30) ? Int(r.next(below: 2)) : nil
        if crashAtSwap != nil {
            compactionBatch = 4000
            crashAt = Int.max
        }
        plan.crashAt = crashAt
        if r.chance(12) { plan.failSyncAt = 1 + Int(r.next(below: UInt64(min(crashAt, 200)))) }
        if r.chance(6) { plan.failWriteAt = 1 + Int(r.next(below: UInt64(min(crashAt, 200)))) }
        let logPath = db + "/log"
        if image == nil {
            try? FileManager.default.removeItem(atPath: logPath)
        } else {
            try writeImage(image!, to: logPath)
        }
        let fileSeed = r.next()
        let directory = try SimulatedDirectory(path: db, plan: plan, seed: fileSeed)
        defer { directory.detach() }
        directory.crashAtSwap = crashAtSwap

        var returned: [Int] = []
        var durableCount = 0
        var inFlight: Int?
        var step = nextStep
        plan.onDurable = { durableCount = returned.count }

        var compaction: SteppedCompaction?
        var commits = 0
        let begunBefore = report.compactionsBegun
        let faulty = try? Store(directory: db, configuration: config, openFile: { (path) throws(StorageError) in
            try directory.open(path)
        })
        if let store = faulty {
            defer {
                // As a crash leaves them: no cancel, no close, nothing written.
                compaction?.compaction.target.abandon()
                store.abandon()
            }
            /// One step of the compaction (begun first if need be); false when it failed and
            /// the round must stop.
            func compactionStep() throws -> Bool {
                do {
                    if compaction == nil {
                        compaction = try SteppedCompaction(store, batch: compactionBatch, catchUps: catchUps)
                        report.compactionsBegun += 1
                    }
                    if try compaction!.step() {
                        compaction = nil
                        report.compactionsFinished += 1
                    }
                    return true
                } catch {
                    if !plan.crashed { compaction = nil } else if compaction == nil { report.crashesInCompaction += 1 }
                    guard plan.crashed || plan.injectedFailure else {
                        throw Failure(description: "compaction failed without an injected fault: \(error)")
                    }
                    // An injected failure before the swap abandons the compaction (or its start),
                    // deleting its new log, and leaves the store as it was; one after the rename
                    // poisons it.
                    if !plan.crashed && FileManager.default.fileExists(atPath: db + "/log.compact") {
                        throw Failure(description: "a compaction abandoned after \(error) left log.compact behind")
                    }
                    return false
                }
            }
            while !plan.crashed && step < nextStep + 400 {
                if plan.injectedFailure, compaction != nil, !plan.failed(in: directory.current["log"]) {
                    // The failure hit the compaction's new log inside one of its commits, whose
                    // own checkpoint's failure the commit does not report: the compaction must fail
                    // at its next step and leave the store as it was.
                    guard try !compactionStep() else {
                        throw Failure(description: "a compaction went on after its new log failed")
                    }
                    break
                }
                if plan.injectedFailure {
                    // After a failed write or sync the store must refuse to write until reopened.
                    try expectPoisoned(store, point: point)
                    break
                }
                let s = workload.step(step)
                do {
                    if try workload.run(s, on: store) { returned.append(step) }
                } catch {
                    if !s.aborts { inFlight = step }
                    step += 1
                    guard plan.crashed || plan.injectedFailure else { throw Failure(description: "commit failed without an injected fault: \(error)") }
                    if !plan.crashed { try expectPoisoned(store, point: point) }
                    break
                }
                step += 1
                if s.checkpoint {
                    do { try store.checkpoint() } catch {
                        guard plan.crashed || plan.injectedFailure else { throw Failure(description: "checkpoint failed without an injected fault: \(error)") }
                        if !plan.crashed { try expectPoisoned(store, point: point) }
                        break
                    }
                }
                commits += 1
                // (A commit's own checkpoint may have failed: the loop's top deals with that.)
                if let at = compactAt, commits > at, !plan.crashed, !plan.injectedFailure,
                   compaction != nil || report.compactionsBegun == begunBefore {
                    guard try compactionStep() else { break }
                }
            }
            if compaction != nil, plan.crashed { report.crashesInCompaction += 1 }
        } else if !(plan.crashed || plan.injectedFailure) {
            throw Failure(description: "open failed without an injected fault")
        }
        // Once an operation has failed, the store must not touch that file again.
        guard plan.operationsAfterCrash == 0 else {
            throw Failure(description: "the store used the file \(plan.operationsAfterCrash) times after the power failed")
        }
        report.syncFailures += plan.syncFailures
        report.writeFailures += plan.writeFailures
        let acknowledged = config.durability == .synchronous ? returned.count : durableCount

        // The power fails; the disk holds the durable image plus some of the rest, under the
        // names the directory kept. A crash while the database was being created leaves no log
        // (it is renamed into place once durable).
        var tear = SplitMix(seed: r.next())
        let swapPending = directory.logRenamePending
        let newLog = directory.current["log"]
        let kept = try directory.powerLoss(random: &tear)
        // From here on the real engine opens what the disk holds, with the kernel's renames.
        directory.detach()
        if swapPending, kept != nil {
            if kept === newLog { report.swapRenameKept += 1 } else { report.swapRenameLost += 1 }
        }
        guard kept != nil else { return (nil, base, step) }
        let candidates = returned + (inFlight.map { [$0] } ?? [])

        let j: Int
        let state: Contents
        switch verifyRecovered(directory: db, configuration: config, base: base, candidates: candidates, acknowledged: acknowledged, workload: workload) {
        case .recovered(let applied, let recovered):
            (j, state) = (applied, recovered)
        case .corruptOpen(let why):
            report.corruptOpens += 1
            throw Failure(description: "after the power loss: " + why)
        case .lost(let why):
            report.lost += 1
            throw Failure(description: "after the power loss: " + why)
        }
        for name in ["log.compact", "log.compact.new"] where FileManager.default.fileExists(atPath: db + "/" + name) {
            throw Failure(description: "after the power loss and reopening, \(name) is still there")
        }
        report.commitsVerified += acknowledged
        if inFlight != nil, config.durability == .synchronous {
            if j > returned.count { report.inFlightPresent += 1 } else { report.inFlightAbsent += 1 }
        }
        let after = try Array(Data(contentsOf: URL(fileURLWithPath: logPath)))
        return (after, state, step)
    }

    private func expectPoisoned(_ store: Store, point: Int) throws {
        do {
            try store.write { tx in _ = try tx.createTree(named: "after-failure") }
        } catch let e as StorageError where e.code == .poisoned {
            return
        } catch {
            throw Failure(description: "a write after a failed sync threw \(error) instead of poisoned")
        }
        throw Failure(description: "a write after a failed sync or write was accepted")
    }
}

/// Puts `image` in place as the file at `path`, as a disk would hold it.
func writeImage(_ image: [UInt8], to path: String) throws {
    let file = try PosixFile(path: path)
    defer { file.close() }
    try file.truncate(to: 0)
    try image.withUnsafeBytes { b in if b.count > 0 { try file.write(b, at: 0) } }
}
