import Foundation
@_spi(Replication) import Settee
import SetteeStorage

/// Figures from a round of SIGKILLs of a document-layer writer.
package struct DocKillReport: CustomStringConvertible {
    package var cycles = 0
    /// Acknowledged steps (transactions) verified, and the document operations in them.
    package var stepsVerified = 0
    package var operationsVerified = 0
    package var operations: [DocOperation: Int] = [:]
    /// Aborted batches among the finished steps, verified to have left nothing.
    package var abortedBatchesVerified = 0
    package var killedBeforeOpen = 0
    /// Cycles whose child compacted, compactions it finished, kills inside one (after its last
    /// progress report: near or in its swap), kills that left a `log.compact` behind.
    package var compactingCycles = 0
    package var compactionsFinished = 0
    package var killedInCompaction = 0
    package var killedNearSwap = 0
    package var leftoverNewLogs = 0
    package var inFlightPresent = 0
    package var inFlightAbsent = 0
    /// Documents in conflict at the verifications, summed over cycles.
    package var conflictedVerified = 0
    package var documentsVerified = 0
    package var lost = 0
    package var corruptOpens = 0
    /// Index changes the children began (``DocIndexes``), those that returned, builds
    /// cancelled from their progress callback; kills inside a change, inside a creation, and
    /// creations killed in flight whose index the reopened database had (built at the open);
    /// indexes, entries and generated queries checked after the recoveries.
    package var indexChanges = 0
    package var indexChangesReturned = 0
    package var indexBuildsCancelled = 0
    package var killedInIndexChange = 0
    package var killedInIndexCreation = 0
    package var interruptedCreationsFound = 0
    package var indexes = DocIndexes.Checked()
    package var failures: [String] = []

    package var description: String {
        "cycles: \(cycles), acknowledged transactions verified: \(stepsVerified) (\(operationsVerified) document operations), lost: \(lost), corrupt opens: \(corruptOpens)"
    }

    package var details: String {
        let kinds = DocOperation.allCases.compactMap { k in operations[k].map { "\(k.rawValue) \($0)" } }.joined(separator: ", ")
        return """
        operations acknowledged: \(kinds); aborted batches verified absent: \(abortedBatchesVerified)
        in flight at the kill, kept/dropped: \(inFlightPresent)/\(inFlightAbsent); killed before the database was open: \(killedBeforeOpen)
        documents verified: \(documentsVerified) (\(conflictedVerified) in conflict)
        cycles compacting: \(compactingCycles), compactions finished: \(compactionsFinished), killed inside a compaction: \(killedInCompaction) (after its last progress report: \(killedNearSwap)), log.compact left by the kill and deleted on reopening: \(leftoverNewLogs)
        index changes begun: \(indexChanges), returned: \(indexChangesReturned) (builds cancelled: \(indexBuildsCancelled)); killed inside one: \(killedInIndexChange) (inside a creation: \(killedInIndexCreation), its index there after reopening: \(interruptedCreationsFound))
        \(indexes)
        """
    }
}

/// How the document child compacts: never; `inline`, calling `compact()` on its own thread every
/// `every` steps, its progress callback running the next workload steps while the copy is under
/// way; or `background`, `compact()` again and again on a second thread while the main thread
/// runs the workload. `auto` makes automatic compaction start early (from 256 KiB of file and a
/// fifth of it dead).
package struct DocKillCompaction: Equatable {
    package enum Mode: String { case none, inline, background }
    package var mode: Mode
    package var every: Int
    package var auto: Bool

    package init(mode: Mode = .none, every: Int = 10, auto: Bool = false) {
        self.mode = mode
        self.every = max(1, every)
        self.auto = auto
    }

    var arguments: [String] { ["--compact", mode.rawValue, "--compact-every", String(every), "--auto-compact", auto ? "1" : "0"] }
}

/// The child's side: opens the database and runs the document workload from `start`, telling
/// the parent "R" once open, then "B <step>" before each step and "A <step>" once it returned
/// (committed, durable) or "X <step>" when it aborted, until killed. A compaction says "C" when
/// it starts, "P" at each progress report (the last comes just before its swap) and "D" once done.
/// An index change (``DocIndexes``: the base indexes a database lacks, made first; with
/// `indexEvery`, a change or two after every `indexEvery` steps, wherever those steps run, a
/// compaction's progress callback included) says "I <name> <definition> <cancels>" when it
/// starts, "J" when it returned and "K" when its build was cancelled; its build's progress
/// callback runs the next step. A check of the index that fails says "F <what>" and ends the
/// child.
package enum DocKillChild {
    package static func run(directory: String, name: String, seed: UInt64, start: Int, maxDepth: Int,
                            compaction: DocKillCompaction = DocKillCompaction(), indexEvery: Int = 0) throws {
        var config = DatabaseConfiguration(directory: directory)
        config.maxRevTreeDepth = maxDepth
        if compaction.auto {
            config.autoCompactionMinimumSize = 256 << 10
            config.autoCompactionThreshold = 0.2
        }
        let db = try Database(name: name, config: config)
        say("R")
        let workload = DocWorkload(seed: seed)
        if compaction.mode == .background {
            let thread = Thread {
                var r = SplitMix(seed: seed ^ 0xC0)
                do {
                    while true {
                        usleep(UInt32(r.next(below: 20_000)))
                        say("C")
                        try db.compact { _ in say("P"); return true }
                        say("D")
                    }
                } catch {
                    FileHandle.standardError.write(Data("crash-harness docs-child: compaction: \(error)\n".utf8))
                    exit(3)
                }
            }
            thread.start()
        }
        var i = start
        var changes = SplitMix(seed: SplitMix.mix(seed ^ 0x1DE7, UInt64(start)))
        var changing = false
        func change(_ c: DocIndexes.Change) throws {
            say(c.message)
            changing = true
            defer { changing = false }
            let outcome: DocIndexes.Outcome
            do {
                outcome = try DocIndexes.apply(c, on: db) { try runStep(); return true }
            } catch let v as DocIndexes.Violation {
                say("F \(v.description)")
                throw v
            }
            say(outcome == .done ? "J" : "K")
        }
        func runStep() throws {
            say("B \(i)")
            let outcome = try workload.run(i, on: db)
            say(outcome.committed ? "A \(i)" : "X \(i)")
            i += 1
            if indexEvery > 0, !changing, (i - start) % indexEvery == 0 {
                for c in DocIndexes.midRun(present: try db.indexes, &changes) { try change(c) }
            }
        }
        for c in DocIndexes.missingBase(present: try db.indexes) { try change(c) }
        while i < start + 1_000_000 {
            try runStep()
            if compaction.mode == .inline, (i - start) % compaction.every == 0 {
                // Steps run from the progress callback land between the copy and the swap.
                var failure: (any Error)?
                say("C")
                try db.compact { _ in
                    say("P")
                    do { try runStep() } catch {
                        failure = error
                        return false
                    }
                    return true
                }
                if let failure { throw failure }
                say("D")
            }
        }
    }

    private static func say(_ line: String) {
        // One write per message: a message is in the pipe whole, or not at all.
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }
}

/// The parent's side: starts a child running ``DocWorkload`` on a ``Database`` (compacting it
/// in half the cycles: inline, in the background, automatically; changing its indexes as it goes
/// in half: ``DocIndexes``), SIGKILLs it at a random moment
/// (during start-up, between operations, just after one began: inside its transaction, its
/// `fdatasync`, a blob write; just after a compaction's progress report, near its swap; just
/// after an index change began: inside its build, with steps running from its progress
/// callback), then
/// checks the store (`check()`), reopens the database and compares everything it shows with a
/// reference database that ran the same steps without crashing or compacting: every acknowledged
/// step must be there exactly (revision trees, current revisions and bodies, deletions, leaves,
/// purges, local documents, blobs; which inner revisions keep a body is left to compaction), the
/// step in flight wholly or not at all, the snapshot must hold together
/// (``DocSnapshot/problems()``), no unfinished compaction's log may be left, and the indexes
/// must be as the changes that returned left them (one killed in flight either way; an
/// interrupted build finished by the open), whole (`check()` finds no drift, every live
/// document found through each index with its values) and answer generated queries as a full
/// scan does.
package struct DocKillHarness {
    package var seed: UInt64
    package var cycles: Int
    package var directory: String
    package var cyclesPerDatabase = 50
    /// The share of cycles (percent) whose child compacts.
    package var compactionShare: UInt64 = 50
    /// The share of cycles (percent) whose child changes indexes as it goes.
    package var indexShare: UInt64 = 50
    package var log: (String) -> Void = { print($0) }

    package init(seed: UInt64, cycles: Int, directory: String) {
        self.seed = seed
        self.cycles = cycles
        self.directory = directory
    }

    package func run() -> DocKillReport {
        var report = DocKillReport()
        let state = DocRunState(directory: directory)
        defer { state.close() }
        for cycle in 0..<cycles {
            do {
                if cycle % cyclesPerDatabase == 0 {
                    var r = SplitMix(seed: SplitMix.mix(seed, 0x3_0000_0000 + UInt64(cycle)))
                    try state.reset(&r)
                }
                try runCycle(cycle, state, report: &report)
            } catch {
                let message = "seed \(seed), cycle \(cycle): \(error) (replay: crash-harness docs --seed \(seed) --cycles \(cycle + 1))"
                report.failures.append(message)
                log("FAILED: " + message)
                return report
            }
            report.cycles += 1
        }
        return report
    }

    private func runCycle(_ cycle: Int, _ state: DocRunState, report: inout DocKillReport) throws {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(cycle)))
        var compaction = DocKillCompaction()
        if compactionShare > 0 && r.chance(compactionShare) {
            compaction.mode = [.inline, .background, .none][Int(r.next(below: 3))]
            compaction.every = 2 + Int(r.next(below: 12))
            compaction.auto = compaction.mode == .none || r.chance(30)
            report.compactingCycles += 1
        }
        let indexEvery = r.chance(indexShare) ? 2 + Int(r.next(below: 10)) : 0
        let child = try ChildProcess(arguments: [
            "docs-child", "--dir", state.realDirectory, "--name", DocRunState.name, "--seed", String(state.workload.seed),
            "--start", String(state.nextStep), "--max-depth", String(state.maxDepth), "--index-every", String(indexEvery),
        ] + compaction.arguments)
        var lines: [String] = []
        if indexEvery > 0 && r.chance(35) {
            // Just after an index change began: its creation, its build (steps run from its
            // progress callback), its being made ready, a deletion.
            let target = 1 + Int(r.next(below: 3))
            var begun = 0
            try child.readLines(until: { if $0.hasPrefix("I ") { begun += 1 }; return begun >= target }, into: &lines, timeoutMs: 20_000)
            let spin = r.next(below: 3000)
            let start = DispatchTime.now().uptimeNanoseconds
            while DispatchTime.now().uptimeNanoseconds - start < spin * 1000 {}
        } else if compaction.mode != .none && r.chance(40) {
            // Just after a progress report: the rest of the copy, the catch-up, the swap.
            let target = 1 + Int(r.next(below: 3))
            var reports = 0
            try child.readLines(until: { if $0 == "P" { reports += 1 }; return reports >= target }, into: &lines, timeoutMs: 20_000)
            let spin = r.next(below: 5000)
            let start = DispatchTime.now().uptimeNanoseconds
            while DispatchTime.now().uptimeNanoseconds - start < spin * 1000 {}
        } else {
        switch r.next(below: 10) {
        case 0:
            // Anywhere in start-up, recovery and the database's own opening transaction.
            usleep(UInt32(r.next(below: 20_000)))
        case 1..<5:
            // A random moment of the workload.
            try child.readLines(until: { $0 == "R" }, into: &lines, timeoutMs: 20_000)
            usleep(UInt32(r.next(below: 30_000)))
        default:
            // Just after a step began: inside its transaction, its fdatasync, a blob's write.
            let target = 1 + Int(r.next(below: 25))
            var begun = 0
            try child.readLines(until: { if $0.hasPrefix("B ") { begun += 1 }; return begun >= target }, into: &lines, timeoutMs: 20_000)
            let spin = r.next(below: 1500)
            let start = DispatchTime.now().uptimeNanoseconds
            while DispatchTime.now().uptimeNanoseconds - start < spin * 1000 {}
        }
        }
        let status = child.kill()
        child.drain(into: &lines)
        guard status == .killed else {
            let said = lines.filter { $0.hasPrefix("F ") }.map { ": " + $0.dropFirst(2) }.joined()
            throw DocRunState.Failure(description: "the child writer \(status) before it was killed\(said)")
        }

        var ready = false
        var candidates: [(step: Int, committed: Bool?)] = []
        var (begunCompactions, done, reportedSinceBegin) = (0, 0, false)
        var indexChange: DocIndexes.Change?
        for line in lines {
            if line == "R" { ready = true }
            else if let c = DocIndexes.Change(message: line) {
                state.indexes.begin(c)
                indexChange = c
                report.indexChanges += 1
            } else if line == "J" || line == "K", let c = indexChange {
                state.indexes.returned(c, line == "J" ? .done : .cancelled)
                indexChange = nil
                report.indexChangesReturned += 1
                if line == "K" { report.indexBuildsCancelled += 1 }
            }
            else if line == "C" { begunCompactions += 1; reportedSinceBegin = false }
            else if line == "P" { reportedSinceBegin = true }
            else if line == "D" { done += 1 }
            else if line.hasPrefix("B "), let i = Int(line.dropFirst(2)) { candidates.append((i, nil)) }
            else if line.hasPrefix("A "), let i = Int(line.dropFirst(2)), candidates.last?.step == i { candidates[candidates.count - 1].committed = true }
            else if line.hasPrefix("X "), let i = Int(line.dropFirst(2)), candidates.last?.step == i { candidates[candidates.count - 1].committed = false }
        }
        if !ready { report.killedBeforeOpen += 1 }
        report.compactionsFinished += done
        if begunCompactions > done {
            report.killedInCompaction += 1
            if reportedSinceBegin { report.killedNearSwap += 1 }
        }
        if FileManager.default.fileExists(atPath: state.realPath + "/log.compact") { report.leftoverNewLogs += 1 }
        // Every step that returned must be there; the one in flight (begun, not returned) may be.
        let inFlight = candidates.last.flatMap { $0.committed == nil ? $0.step : nil }
        let acknowledged = inFlight == nil ? candidates.count : candidates.count - 1
        let verified = try state.verify(candidates: candidates, acknowledged: acknowledged,
                                        querySeed: SplitMix.mix(seed, 0x5_0000_0000 + UInt64(cycle)),
                                        corruptOpens: &report.corruptOpens, lost: &report.lost)
        if let c = indexChange {
            report.killedInIndexChange += 1
            if let d = c.definition {
                report.killedInIndexCreation += 1
                if state.indexes.possible(c.name) == [d] { report.interruptedCreationsFound += 1 }
            }
        }
        report.indexes.add(verified.indexes)
        for outcome in verified.outcomes.prefix(acknowledged) {
            guard outcome.committed else {
                report.abortedBatchesVerified += 1
                continue
            }
            report.stepsVerified += 1
            report.operationsVerified += outcome.count
            report.operations.merge(outcome.operations, uniquingKeysWith: +)
        }
        if inFlight != nil { if verified.applied > acknowledged { report.inFlightPresent += 1 } else { report.inFlightAbsent += 1 } }
        report.documentsVerified += verified.snapshot.documents.count
        report.conflictedVerified += verified.snapshot.conflicted
        state.nextStep = (candidates.last?.step ?? state.nextStep - 1) + 1
    }
}
