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
    /// Blobs: saves carrying one that returned; crash points whose faults were aimed at the blob
    /// store's operations; power failures at one of its operations, by operation (the save in
    /// flight then verified absent); injected failures of its operations, by operation, and the
    /// saves they failed (the database going on unpoisoned, the save made again); acknowledged
    /// blobs verified whole after the power failed (each check counted); blob files found on disk
    /// and checked against their names.
    package var blobSaves = 0
    package var crashPointsAimedAtBlobs = 0
    package var crashesAtBlobOperations: [FaultPlan.Kind: Int] = [:]
    package var injectedBlobFailures: [FaultPlan.Kind: Int] = [:]
    package var blobSavesFailed = 0
    package var blobsVerified = 0
    package var blobFilesChecked = 0
    /// Index changes (``DocIndexes``) begun, returned, builds cancelled from their progress
    /// callback, changes the power or an injected fault stopped, those made from a compaction's
    /// progress callback; what the checks after the recoveries covered.
    package var indexChanges = 0
    package var indexChangesReturned = 0
    package var indexBuildsCancelled = 0
    package var indexChangesFailed = 0
    package var indexChangesInCompaction = 0
    package var crashPointsAimedAtIndexes = 0
    package var indexes = DocIndexes.Checked()
    package var lost = 0
    package var corruptOpens = 0
    package var failures: [String] = []

    package var description: String {
        "crash points: \(crashPoints), acknowledged transactions verified: \(stepsVerified) (\(operationsVerified) document operations), aborted batches verified absent: \(abortedBatchesVerified), in flight kept/dropped: \(inFlightPresent)/\(inFlightAbsent), injected sync failures: \(syncFailures), write failures: \(writeFailures), lost: \(lost), corrupt opens: \(corruptOpens)\n"
            + blobDetails + "\n" + indexDetails
    }

    package var indexDetails: String {
        "index changes begun: \(indexChanges), returned: \(indexChangesReturned) (builds cancelled: \(indexBuildsCancelled)), stopped by the power or an injected fault: \(indexChangesFailed), made inside a compaction: \(indexChangesInCompaction), crash points aimed at an index change: \(crashPointsAimedAtIndexes)\n\(indexes)"
    }

    package var blobDetails: String {
        "blobs: saves with a blob returned: \(blobSaves), crash points aimed at blob operations: \(crashPointsAimedAtBlobs), power failures at a blob operation: \(Self.total(crashesAtBlobOperations)) (\(Self.list(crashesAtBlobOperations))), injected blob failures: \(Self.total(injectedBlobFailures)) (\(Self.list(injectedBlobFailures))), saves they failed: \(blobSavesFailed), acknowledged blobs verified whole: \(blobsVerified), blob files checked: \(blobFilesChecked)"
    }

    static func total(_ byKind: [FaultPlan.Kind: Int]) -> Int { byKind.values.reduce(0, +) }

    static func list(_ byKind: [FaultPlan.Kind: Int]) -> String {
        let parts = FaultPlan.Kind.allCases.compactMap { k in byKind[k].map { "\(k.rawValue) \($0)" } }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
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
/// nothing partly visible, no `log.compact` left.
///
/// Indexes (``DocIndexes``): each crash point first makes the base indexes the database lacks;
/// at some crash points a change or two follows a step, or runs from the compaction's progress
/// callback (a tree created while the compaction copies); a build's progress callback runs more
/// steps, and the power may fail anywhere in it. After the recovery each index must be there or
/// not as the changes that returned (durably) say, whole, and answer queries as a full scan does.
///
/// The blob store's files are in the simulated directory too (`blobs/`, `blobs/tmp/`): the power
/// may fail at their writes, syncs, renames, directory syncs, deletions and touches, and injected
/// failures hit them as they hit the log. A save whose blob I/O fails must fail with `io` before it
/// commits, having changed nothing, and the database go on (it is not poisoned: the log was not
/// touched): the step is made again, with the same blob. After the power fails: every blob a
/// returned save carried is on disk whole (its bytes hash to its digest, at its length); every
/// blob file on disk hashes to its name (absent or whole, never torn); no document shows a blob
/// the database cannot read (the snapshot's own checks); and reopening leaves no temporary blob
/// file.
package struct DocPowerLossRun {
    package var seed: UInt64
    package var crashPoints: Int
    package var directory: String
    package var crashPointsPerDatabase = 25
    /// The share of crash points (percent) that run a compaction.
    package var compactionShare: UInt64 = 30
    /// The share of crash points (percent) whose faults are aimed at the blob store's operations.
    package var blobShare: UInt64 = 20
    /// The share of crash points (percent) that change indexes after a step.
    package var indexShare: UInt64 = 35
    /// The share of those (percent) whose faults are aimed at the first index change.
    package var indexAimShare: UInt64 = 40
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
        // One crash point in five aims its faults at the blob store's operations instead (about
        // five per save that carries a new blob, one per save of a stored one): the power fails
        // at one of them, and one of their syncs or writes (renames, deletions, touches) may fail
        // first. Left to chance, few faults would land there.
        let aimsAtBlobs = crashAtSwap == nil && r.chance(blobShare)
        if aimsAtBlobs {
            plan.crashAt = Int.max
            plan.failSyncAt = nil
            plan.failWriteAt = nil
            plan.crashAtAimed = 1 + Int(r.next(below: 24))
            if r.chance(35) { plan.failSyncAtAimed = 1 + Int(r.next(below: 8)) }
            if r.chance(35) { plan.failWriteAtAimed = 1 + Int(r.next(below: 10)) }
        }
        let fileSeed = r.next()
        // Index changes after step `indexAt`, or from the compaction's progress callback.
        let indexAt: Int? = r.chance(indexShare) ? Int(r.next(below: 8)) : nil
        let indexInCompaction = compactAt != nil && r.chance(35)
        let stepsPerIndexReport = Int(r.next(below: 3))
        var changes = SplitMix(seed: r.next())
        // Some of them have the faults aimed at the first index change: the power fails at one
        // of its first operations (its catalog commit, the build's commit, the steps its progress
        // callback runs, the commit that makes it ready), after an injected failure now and then.
        // Left to chance, few faults would land there.
        var aimAtIndexes: (crash: Int, failSync: Int?, failWrite: Int?)?
        if crashAtSwap == nil && !aimsAtBlobs && (indexAt != nil || indexInCompaction) && r.chance(indexAimShare) {
            aimAtIndexes = (1 + Int(r.next(below: 12)), r.chance(15) ? 1 + Int(r.next(below: 6)) : nil,
                            r.chance(10) ? 1 + Int(r.next(below: 6)) : nil)
            plan.crashAt = Int.max
            plan.failSyncAt = nil
            plan.failWriteAt = nil
        }
        var config = DatabaseConfiguration(directory: state.realDirectory)
        config.maxRevTreeDepth = state.maxDepth
        config.fullSync = fullSync
        // Compaction runs when the round says so, not by itself in the background.
        config.autoCompaction = false

        var returned: [(step: Int, committed: Bool?)] = []
        var durableCount = 0
        var inFlight: Int?
        var step = state.nextStep
        plan.onDurable = {
            durableCount = returned.count
            state.indexes.durable()
        }
        var injected: Int { plan.syncFailures + plan.writeFailures }
        // Figures the steps add to (the compaction's progress callback runs steps too, so not the
        // report itself).
        var blobSaves = 0, blobSavesFailed = 0
        var indexChanges = 0, indexReturned = 0, indexCancelled = 0, indexFailed = 0, indexInCompactionMade = 0, aimedAtIndexes = 0

        // The files on disk are what the last verification left (or nothing): taken as durable.
        try FileManager.default.createDirectory(atPath: state.realPath, withIntermediateDirectories: true)
        let directory = try SimulatedDirectory(path: state.realPath, plan: plan, seed: fileSeed)
        defer { directory.detach() }
        directory.crashAtSwap = crashAtSwap
        if aimsAtBlobs {
            plan.aim = { [unowned directory] in directory.isTarget($0, under: "blobs") }
            report.crashPointsAimedAtBlobs += 1
        }
        // A failure injected into the engine's files (the log, a compaction's new log), as
        // opposed to the blob store's.
        var logFailure: Bool { directory.failureInjected(outside: "blobs") }
        let faulty = try? Database(name: DocRunState.name, config: config, openFile: { (path) throws(StorageError) in
            try directory.open(path)
        })
        if let db = faulty {
            // After a failure the store is poisoned and closing it touches nothing; otherwise
            // closing checkpoints, and the power may fail in the middle of that too.
            defer { try? db.close() }
            /// Runs the next step; false when it failed and the round must stop.
            func attempt() throws -> Bool {
                let injectedBefore = injected
                do {
                    let outcome = try state.workload.run(step, on: db)
                    returned.append((step, outcome.committed))
                    if let blobs = outcome.operations[.blob], blobs > 0 {
                        blobSaves += blobs
                        state.acknowledgedBlobs.merge(outcome.blobs) { a, _ in a }
                    }
                    step += 1
                    return true
                } catch {
                    let failed = step
                    step += 1
                    // (A failure injected into the log earlier may surface only now: a commit's
                    // own checkpoint does not report one.)
                    guard plan.crashed || injected > injectedBefore || logFailure else {
                        throw DocRunState.Failure(description: "step \(failed) failed without an injected fault: \(error)")
                    }
                    if plan.crashed {
                        // The blob store writes before the transaction that references the blob:
                        // a power failure at its I/O leaves that transaction uncommitted.
                        if directory.powerFailure(under: "blobs") == nil { inFlight = failed }
                        return false
                    }
                    if !logFailure {
                        // Only the blob store's I/O failed: the save fails with `io` before its
                        // transaction, changing nothing, and the database goes on. The step is
                        // made again, as an application retries a failed save (the same blob:
                        // the store must not take a file it could not vouch for as stored).
                        guard let e = error as? SetteeError, e.code == .io else {
                            throw DocRunState.Failure(description: "step \(failed): a failed blob operation surfaced as \(error) instead of an I/O error")
                        }
                        blobSavesFailed += 1
                        step = failed
                        return true
                    }
                    inFlight = failed
                    try expectPoisoned(db)
                    return false
                }
            }
            /// Makes an index change; false when it failed and the round must stop.
            func change(_ c: DocIndexes.Change) throws -> Bool {
                if let aim = aimAtIndexes {
                    aimAtIndexes = nil
                    plan.crashAt = plan.operations + aim.crash
                    plan.failSyncAt = aim.failSync.map { plan.operations + $0 }
                    plan.failWriteAt = aim.failWrite.map { plan.operations + $0 }
                    aimedAtIndexes += 1
                }
                let injectedBefore = injected
                state.indexes.begin(c)
                indexChanges += 1
                var stepStopped = false
                var stepFailure: (any Error)?
                do {
                    let outcome = try DocIndexes.apply(c, on: db) {
                        for _ in 0..<stepsPerIndexReport where !stepStopped {
                            do { stepStopped = try !attempt() } catch {
                                stepFailure = error
                                stepStopped = true
                            }
                        }
                        return !stepStopped
                    }
                    state.indexes.returned(c, outcome, durable: fullSync)
                    indexReturned += 1
                    if outcome == .cancelled { indexCancelled += 1 }
                    return true
                } catch {
                    if let stepFailure { throw stepFailure }
                    if error is DocIndexes.Violation { throw error }
                    state.indexes.failed(c)
                    indexFailed += 1
                    if stepStopped || plan.crashed { return false }
                    guard injected > injectedBefore || logFailure else {
                        throw DocRunState.Failure(description: "\(c) failed without an injected fault: \(error)")
                    }
                    try expectPoisoned(db)
                    return false
                }
            }
            // (A failure injected while the database opened: the loop expects it poisoned.)
            var stopped = false
            if !plan.crashed && !logFailure {
                for c in DocIndexes.missingBase(present: try db.indexes) where !stopped { stopped = try !change(c) }
            }
            var changedInCompaction = false
            var n = 0
            while !stopped && !plan.crashed && step < state.nextStep + 40 {
                if logFailure {
                    try expectPoisoned(db)
                    break
                }
                guard try attempt() else { break }
                n += 1
                if n - 1 == indexAt, !plan.crashed, !logFailure {
                    for c in DocIndexes.midRun(present: try db.indexes, &changes) where !stopped { stopped = try !change(c) }
                    if stopped { break }
                }
                guard n - 1 == compactAt, !plan.crashed, !logFailure else { continue }
                let injectedBefore = injected
                report.compactionsBegun += 1
                var stepFailure: (any Error)?
                var stepStopped = false
                do {
                    try db.compact { _ in
                        if indexInCompaction && !changedInCompaction && !stepStopped {
                            // A tree created and filled while the compaction copies.
                            changedInCompaction = true
                            do {
                                for c in DocIndexes.midRun(present: try db.indexes, &changes) where !stepStopped {
                                    indexInCompactionMade += 1
                                    stepStopped = try !change(c)
                                }
                            } catch {
                                stepFailure = error
                                stepStopped = true
                            }
                        }
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
                    guard injected > injectedBefore else {
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
        // A failure of the blob store's I/O is never swallowed: some save reported it. (Unless
        // the power failed in that save's clean-up, which then counts as a power failure.)
        if faulty != nil, !plan.crashed, directory.failureInjected(under: "blobs"), blobSavesFailed == 0 {
            throw DocRunState.Failure(description: "an injected failure of a blob operation was not reported by any save")
        }
        report.syncFailures += plan.syncFailures
        report.writeFailures += plan.writeFailures
        report.blobSaves += blobSaves
        report.indexChanges += indexChanges
        report.indexChangesReturned += indexReturned
        report.indexBuildsCancelled += indexCancelled
        report.indexChangesFailed += indexFailed
        report.indexChangesInCompaction += indexInCompactionMade
        report.crashPointsAimedAtIndexes += aimedAtIndexes
        report.blobSavesFailed += blobSavesFailed
        if let kind = directory.powerFailure(under: "blobs") { report.crashesAtBlobOperations[kind, default: 0] += 1 }
        for kind in directory.injectedFailures(under: "blobs") { report.injectedBlobFailures[kind, default: 0] += 1 }
        let acknowledged = fullSync ? returned.count : durableCount

        // The power fails: the disk holds the durable image and some of the rest, under the names
        // the directory kept. A crash while the database was first created may leave no log (it is
        // renamed into place once durable).
        var tear = SplitMix(seed: r.next())
        let querySeed = r.next()
        let swapPending = directory.logRenamePending
        let newLog = directory.current["log"]
        let kept = try directory.powerLoss(random: &tear)
        // From here on the real engine opens what the disk holds, with the kernel's renames.
        directory.detach()
        if swapPending, kept != nil {
            if kept === newLog { report.swapRenameKept += 1 } else { report.swapRenameLost += 1 }
        }
        try state.verifyBlobFiles(report: &report)
        let candidates = returned + (inFlight.map { [($0, nil)] } ?? [])
        let verified = try state.verify(candidates: candidates, acknowledged: acknowledged, fullSync: fullSync, querySeed: querySeed,
                                        corruptOpens: &report.corruptOpens, lost: &report.lost)
        report.indexes.add(verified.indexes)
        // Opening the database deleted the temporary files the power failure left.
        let temporary = state.realPath + "/blobs/tmp"
        if let left = try? FileManager.default.contentsOfDirectory(atPath: temporary), !left.isEmpty {
            throw DocRunState.Failure(description: "after reopening, \(left.count) temporary blob files are still in blobs/tmp")
        }
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

extension DocRunState {
    /// Checks the blob files a power failure left, before anything opens the database: every
    /// acknowledged blob (``acknowledgedBlobs``) is there whole, and every blob file hashes to its
    /// name (whole, never torn: a file is written under a temporary name and synced before it
    /// is renamed into place).
    func verifyBlobFiles(report: inout DocPowerLossReport) throws {
        let directory = realPath + "/blobs"
        func content(_ name: String) -> Data? { FileManager.default.contents(atPath: directory + "/" + name) }
        for (digest, length) in acknowledgedBlobs.sorted(by: { $0.key < $1.key }) {
            guard let raw = Data(base64Encoded: String(digest.dropFirst(5))) else {
                throw Failure(description: "the workload made a malformed digest \(digest)")
            }
            let name = SHA1.hex(Array(raw)) + ".blob"
            guard let bytes = content(name) else {
                report.lost += 1
                throw Failure(description: "the acknowledged blob \(digest) (\(length) bytes) is missing after the power failed")
            }
            guard Blob(contentType: "", data: bytes).digest == digest, UInt64(bytes.count) == length else {
                report.lost += 1
                throw Failure(description: "the acknowledged blob \(digest) holds \(bytes.count) bytes that do not hash to it (\(length) expected)")
            }
            report.blobsVerified += 1
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names.sorted() where name.hasSuffix(".blob") {
            report.blobFilesChecked += 1
            guard let bytes = content(name), SHA1.hex(SHA1.hash(Array(bytes))) + ".blob" == name else {
                report.corruptOpens += 1
                throw Failure(description: "the blob file \(name) is torn: its \(content(name)?.count ?? 0) bytes do not hash to its name")
            }
        }
    }
}
