import Foundation
import SetteeStorage

/// Figures from a round of SIGKILLs.
package struct KillReport: CustomStringConvertible {
    package var cycles = 0
    package var commitsVerified = 0
    package var killedBeforeOpen = 0
    /// Cycles whose child compacted (inline or in the background), compactions it finished,
    /// kills inside a compaction, kills inside a compaction's finish (the swap among it), and
    /// kills that left a `log.compact` behind (deleted by the reopening).
    package var compactingCycles = 0
    package var compactionsFinished = 0
    package var killedInCompaction = 0
    package var killedInFinish = 0
    package var leftoverNewLogs = 0
    package var inFlightPresent = 0
    package var inFlightAbsent = 0
    package var lost = 0
    package var corruptOpens = 0
    package var failures: [String] = []

    package var description: String {
        "cycles: \(cycles), acknowledged commits verified: \(commitsVerified), lost: \(lost), corrupt opens: \(corruptOpens)"
    }

    package var compactionDetails: String {
        "cycles compacting: \(compactingCycles), compactions finished: \(compactionsFinished), killed inside a compaction: \(killedInCompaction) (inside its finish: \(killedInFinish)), log.compact left by the kill and deleted on reopening: \(leftoverNewLogs)"
    }
}

/// When the child compacts its store: never, `inline` (between its commits, one step of the
/// compaction after each commit, a new compaction every 40 steps from step `after` on), or
/// `background` (compactions one after another on a second thread, from the start, while the
/// main thread commits). `batch` entries are copied per step.
package struct KillCompaction: Equatable {
    package enum Mode: String { case none, inline, background }
    package var mode: Mode
    package var after: Int
    package var batch: Int

    package init(mode: Mode = .none, after: Int = 0, batch: Int = 100) {
        self.mode = mode
        self.after = after
        self.batch = batch
    }

    var arguments: [String] { ["--compact", mode.rawValue, "--compact-after", String(after), "--compact-batch", String(batch)] }
}

/// The child's side: runs the workload from `start`, telling the parent on standard output
/// "B <step>" before each commit and "A <step>" once it is acknowledged (durable), until killed.
/// A compaction says "C" once begun, "F" just before its finish (the swap) and "D" once done.
package enum KillChild {
    package static func run(directory: String, seed: UInt64, start: Int, configuration: StoreConfiguration,
                            compaction: KillCompaction = KillCompaction()) throws {
        let store = try Store(directory: directory, configuration: configuration)
        say("R")
        if compaction.mode == .background {
            let thread = Thread {
                do {
                    while true {
                        let c = try SteppedCompaction(store, batch: compaction.batch, catchUps: 2)
                        say("C")
                        try c.run(willFinish: { say("F") })
                        say("D")
                    }
                } catch {
                    FileHandle.standardError.write(Data("crash-harness child: compaction: \(error)\n".utf8))
                    exit(3)
                }
            }
            thread.start()
        }
        let workload = Workload(seed: seed)
        var running: SteppedCompaction?
        for (n, i) in (start..<start + 1_000_000).enumerated() {
            let s = workload.step(i)
            if !s.aborts { say("B \(i)") }
            if try workload.run(s, on: store) { say("A \(i)") }
            if s.checkpoint { try store.checkpoint() }
            if compaction.mode == .inline {
                if running == nil, n >= compaction.after, (n - compaction.after) % 40 == 0 {
                    running = try SteppedCompaction(store, batch: compaction.batch, catchUps: 1)
                    say("C")
                }
                if let c = running, try c.step(willFinish: { say("F") }) {
                    say("D")
                    running = nil
                }
            }
        }
    }

    private static func say(_ line: String) {
        // One write per message: a message is in the pipe whole, or not at all.
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }
}

/// The parent's side: starts a child writer, kills it with SIGKILL at a random moment (before it
/// opens the database, between commits, mid-commit, mid-`fdatasync`, mid-checkpoint, inside a
/// compaction: its copy, catch-ups or swap), reopens the database, runs `check()`, and verifies
/// that every acknowledged commit is there with exactly its values, that the one in flight is
/// wholly there or wholly absent, and that no unfinished compaction's log is left.
package struct KillHarness {
    package var seed: UInt64
    package var cycles: Int
    package var directory: String
    package var cyclesPerDatabase = 100
    /// The share of cycles (percent) whose child compacts.
    package var compactionShare: UInt64 = 50
    package var log: (String) -> Void = { print($0) }

    package init(seed: UInt64, cycles: Int, directory: String) {
        self.seed = seed
        self.cycles = cycles
        self.directory = directory
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    package func run() -> KillReport {
        var report = KillReport()
        let db = directory + "/kill.settee"
        var workloadSeed: UInt64 = 0
        var base: Contents = [:]
        var nextStep = 0
        for cycle in 0..<cycles {
            if cycle % cyclesPerDatabase == 0 {
                try? FileManager.default.removeItem(atPath: db)
                workloadSeed = SplitMix.mix(seed, 0x2_0000_0000 + UInt64(cycle))
                base = [:]
                nextStep = 0
            }
            do {
                (base, nextStep) = try runCycle(cycle, db: db, workloadSeed: workloadSeed, base: base, nextStep: nextStep, report: &report)
            } catch {
                let message = "seed \(seed), cycle \(cycle): \(error) (replay: crash-harness --seed \(seed) --cycles \(cycle + 1))"
                report.failures.append(message)
                log("FAILED: " + message)
                return report
            }
            report.cycles += 1
        }
        return report
    }

    private func runCycle(_ cycle: Int, db: String, workloadSeed: UInt64, base: Contents, nextStep: Int, report: inout KillReport) throws -> (Contents, Int) {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(cycle)))
        var config = StoreConfiguration()
        config.checkpointInterval = (1 << 16) << Int(r.next(below: 3))
        config.maxDirtyNodes = 64 << Int(r.next(below: 4))
        var compaction = KillCompaction()
        if compactionShare > 0 && r.chance(compactionShare) {
            compaction.mode = r.chance(50) ? .inline : .background
            compaction.after = Int(r.next(below: 12))
            // Inline, a step per commit: batches big enough that a compaction ends in a cycle.
            compaction.batch = compaction.mode == .inline ? [50, 500, 5000][Int(r.next(below: 3))]
                : [1, 20, 200, 2000][Int(r.next(below: 4))]
            report.compactingCycles += 1
        }
        let child = try ChildProcess(arguments: [
            "child", "--dir", db, "--seed", String(workloadSeed), "--start", String(nextStep),
            "--checkpoint-interval", String(config.checkpointInterval), "--max-dirty-nodes", String(config.maxDirtyNodes),
        ] + compaction.arguments)
        var lines: [String] = []
        if compaction.mode != .none && r.chance(40) {
            // Inside a compaction's finish: copying the last changes, syncing the new log,
            // renaming it over the old one, syncing the directory, opening it.
            let target = 1 + Int(r.next(below: 2))
            var finishing = 0
            try child.readLines(until: { if $0 == "F" { finishing += 1 }; return finishing >= target }, into: &lines, timeoutMs: 20_000)
            let spin = r.next(below: 4000)
            let start = DispatchTime.now().uptimeNanoseconds
            while DispatchTime.now().uptimeNanoseconds - start < spin * 1000 {}
        } else {
        switch r.next(below: 10) {
        case 0:
            // Anywhere in start-up and recovery.
            usleep(UInt32(r.next(below: 30_000)))
        case 1..<5:
            // A random moment of the workload.
            try child.readLines(until: { $0 == "R" }, into: &lines, timeoutMs: 20_000)
            usleep(UInt32(r.next(below: 25_000)))
        default:
            // Just after a commit began: inside its write, its fdatasync, or a checkpoint.
            let target = 1 + Int(r.next(below: 40))
            var begun = 0
            try child.readLines(until: { if $0.hasPrefix("B ") { begun += 1 }; return begun >= target }, into: &lines, timeoutMs: 20_000)
            let spin = r.next(below: 400)
            let start = DispatchTime.now().uptimeNanoseconds
            while DispatchTime.now().uptimeNanoseconds - start < spin * 1000 {}
        }
        }
        let status = child.kill()
        child.drain(into: &lines)
        guard status == .killed else { throw Failure(description: "the child writer \(status) before it was killed") }

        var acknowledged: [Int] = []
        var begun: [Int] = []
        var ready = false
        var (begunCompactions, finishing, done) = (0, 0, 0)
        for line in lines {
            if line == "R" { ready = true }
            else if line == "C" { begunCompactions += 1 }
            else if line == "F" { finishing += 1 }
            else if line == "D" { done += 1 }
            else if line.hasPrefix("A "), let i = Int(line.dropFirst(2)) { acknowledged.append(i) }
            else if line.hasPrefix("B "), let i = Int(line.dropFirst(2)) { begun.append(i) }
        }
        if !ready { report.killedBeforeOpen += 1 }
        report.compactionsFinished += done
        if begunCompactions > done { report.killedInCompaction += 1 }
        if finishing > done { report.killedInFinish += 1 }
        if FileManager.default.fileExists(atPath: db + "/log.compact") { report.leftoverNewLogs += 1 }
        let inFlight = begun.last.flatMap { acknowledged.last != $0 ? $0 : nil }
        let candidates = acknowledged + (inFlight.map { [$0] } ?? [])
        let workload = Workload(seed: workloadSeed)

        let j: Int
        let state: Contents
        switch verifyRecovered(directory: db, configuration: config, base: base, candidates: candidates, acknowledged: acknowledged.count, workload: workload) {
        case .recovered(let applied, let recovered):
            (j, state) = (applied, recovered)
        case .corruptOpen(let why):
            report.corruptOpens += 1
            throw Failure(description: "after SIGKILL: " + why)
        case .lost(let why):
            report.lost += 1
            throw Failure(description: "after SIGKILL (in flight: \(inFlight.map(String.init) ?? "none")): " + why)
        }
        // The reopening deleted what an unfinished compaction left.
        for name in ["log.compact", "log.compact.new"] where FileManager.default.fileExists(atPath: db + "/" + name) {
            throw Failure(description: "after SIGKILL and reopening, \(name) is still there")
        }
        report.commitsVerified += acknowledged.count
        if inFlight != nil { if j > acknowledged.count { report.inFlightPresent += 1 } else { report.inFlightAbsent += 1 } }
        let last = max(begun.last ?? -1, acknowledged.last ?? -1)
        return (state, last >= 0 ? last + 1 : nextStep)
    }
}

/// A copy of this executable started with `arguments`, its standard output on a pipe.
final class ChildProcess {
    enum Status: Equatable, CustomStringConvertible {
        case killed
        case exited(Int32)
        case signaled(Int32)
        var description: String {
            switch self {
            case .killed: "was killed"
            case .exited(let code): "exited with status \(code)"
            case .signaled(let signal): "died of signal \(signal)"
            }
        }
    }

    let pid: pid_t
    let output: Int32
    private var buffer: [UInt8] = []

    init(arguments: [String]) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw KillHarness.Failure(description: "pipe failed: errno \(errno)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        let exe = "/proc/self/exe"
        let argv = ([exe] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, exe, &actions, nil, argv, environ)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw KillHarness.Failure(description: "posix_spawn failed: \(rc)")
        }
        pid = child
        output = fds[0]
    }

    /// Reads lines until `stop` accepts one, the child's output ends, or the timeout passes.
    func readLines(until stop: (String) -> Bool, into lines: inout [String], timeoutMs: Int32) throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeoutMs) * 1_000_000
        while true {
            while let line = nextLine() {
                lines.append(line)
                if stop(line) { return }
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { throw KillHarness.Failure(description: "the child writer made no progress for \(timeoutMs) ms") }
            var p = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1)
            if !fill() { return }
        }
    }

    /// Kills the child and reaps it.
    func kill() -> Status {
        _ = sendSignal(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        if signal == 0 { return .exited((status >> 8) & 0xff) }
        return signal == SIGKILL ? .killed : .signaled(signal)
    }

    /// Reads what is left in the pipe (the child is gone, so it ends).
    func drain(into lines: inout [String]) {
        while fill() {}
        while let line = nextLine() { lines.append(line) }
        close(output)
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { return true }
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    private func nextLine() -> String? {
        guard let nl = buffer.firstIndex(of: 10) else { return nil }
        let line = String(decoding: buffer[..<nl], as: UTF8.self)
        buffer.removeSubrange(...nl)
        return line
    }
}

/// `kill(2)`, under a name no method shadows.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }
