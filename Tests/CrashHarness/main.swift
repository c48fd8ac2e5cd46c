import Foundation
import SetteeCrashKit
import SetteeStorage

// crash-harness: proves that a crash at any instant loses nothing acknowledged.
//
//   crash-harness [kill] [--cycles N] [--seed S] [--dir PATH]    SIGKILL a child writer (default 1000 cycles)
//   crash-harness power-loss [--crash-points N] [--per-database N] [--compaction-share PCT] [--seed S] [--dir PATH]    simulated power loss, in process
//   crash-harness corrupt [--corruptions N] [--seed S] [--dir PATH]       random damage to committed files
//   crash-harness docs [--cycles N] [--seed S] [--dir PATH]     SIGKILL a child running document operations (default 100 cycles)
//   crash-harness docs-power-loss [--crash-points N] [--compaction-share PCT] [--seed S] [--dir PATH]    simulated power loss under the document layer
//
// The SIGKILL rounds compact in half their cycles; the power-loss rounds run a compaction at
// --compaction-share percent of their crash points (default 30; 0 turns it off). The document
// rounds keep value indexes, create, replace and delete them as they go (builds the crash may
// interrupt), and check after every recovery that each index is what its documents make and
// answers queries as a full scan does.
//
// Every run prints its seed; a failure names the seed and the cycle (crash point, corruption)
// to replay, and the exit status is non-zero.

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("crash-harness: \(message)\nusage: crash-harness [kill|power-loss|corrupt|docs|docs-power-loss] [--cycles N | --crash-points N | --corruptions N] [--seed S] [--dir PATH]\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var mode = "kill"
if let first = arguments.first, !first.hasPrefix("-") {
    mode = first
    arguments.removeFirst()
}
var options: [String: String] = [:]
while !arguments.isEmpty {
    let name = arguments.removeFirst()
    guard name.hasPrefix("--"), !arguments.isEmpty else { usage("expected --option value, found \(name)") }
    options[String(name.dropFirst(2))] = arguments.removeFirst()
}
@MainActor func number(_ name: String, _ fallback: Int) -> Int {
    guard let text = options[name] else { return fallback }
    guard let n = Int(text), n >= 0 else { usage("--\(name) needs a non-negative number") }
    return n
}
let seed: UInt64 = options["seed"].map { UInt64($0) ?? { usage("--seed needs a number") }() } ?? UInt64.random(in: 1...UInt64(UInt32.max))

if mode == "child" {
    guard let dir = options["dir"] else { usage("child needs --dir") }
    var config = StoreConfiguration()
    config.checkpointInterval = number("checkpoint-interval", config.checkpointInterval)
    config.maxDirtyNodes = number("max-dirty-nodes", config.maxDirtyNodes)
    do {
        var compaction = KillCompaction()
        if let m = options["compact"] {
            guard let mode = KillCompaction.Mode(rawValue: m) else { usage("--compact none|inline|background") }
            compaction = KillCompaction(mode: mode, after: number("compact-after", 0), batch: number("compact-batch", 100))
        }
        try KillChild.run(directory: dir, seed: seed, start: number("start", 0), configuration: config, compaction: compaction)
    } catch {
        FileHandle.standardError.write(Data("crash-harness child: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
if mode == "docs-child" {
    guard let dir = options["dir"], let name = options["name"] else { usage("docs-child needs --dir and --name") }
    do {
        var compaction = DocKillCompaction()
        if let m = options["compact"] {
            guard let mode = DocKillCompaction.Mode(rawValue: m) else { usage("--compact none|inline|background") }
            compaction = DocKillCompaction(mode: mode, every: number("compact-every", 10), auto: number("auto-compact", 0) != 0)
        }
        try DocKillChild.run(directory: dir, name: name, seed: seed, start: number("start", 0), maxDepth: number("max-depth", 20),
                             compaction: compaction, indexEvery: number("index-every", 0))
    } catch {
        FileHandle.standardError.write(Data("crash-harness docs-child: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}

// In-process rounds write a lot and sync often; memory-backed storage keeps them fast and the
// simulated disk is the fault-injecting file anyway. The SIGKILL rounds use a real disk.
let scratchBase = mode == "kill" || mode == "docs" || !FileManager.default.isWritableFile(atPath: "/dev/shm") ? NSTemporaryDirectory() : "/dev/shm"
let ownDirectory = options["dir"] == nil
let dir = options["dir"] ?? scratchBase + "/settee-crash-\(mode)-\(getpid())"
try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
defer { if ownDirectory { try? FileManager.default.removeItem(atPath: dir) } }

print("crash-harness \(mode), seed \(seed), directory \(dir), system calls \(StoragePlatform.family)")
let started = Date()
var failed = false
switch mode {
case "kill":
    let report = KillHarness(seed: seed, cycles: number("cycles", 1000), directory: dir).run()
    print(report)
    print("in flight at the kill, kept/dropped: \(report.inFlightPresent)/\(report.inFlightAbsent); killed before the database was open: \(report.killedBeforeOpen)")
    print(report.compactionDetails)
    failed = !report.failures.isEmpty
case "power-loss":
    var run = PowerLossRun(seed: seed, crashPoints: number("crash-points", 2000), directory: dir)
    run.crashPointsPerDatabase = number("per-database", 30)
    run.compactionShare = UInt64(number("compaction-share", 30))
    let report = run.run()
    print(report)
    print(report.compactionDetails)
    failed = !report.failures.isEmpty
case "corrupt":
    var run = CorruptionRun(seed: seed, corruptions: number("corruptions", 10_000), directory: dir)
    run.only = options["only"].map { _ in number("only", 0) }
    let report = run.run()
    print(report)
    for f in report.failures { print("  " + f) }
    failed = !report.failures.isEmpty
case "docs":
    let report = DocKillHarness(seed: seed, cycles: number("cycles", 100), directory: dir).run()
    print(report)
    print(report.details)
    failed = !report.failures.isEmpty
case "docs-power-loss":
    var run = DocPowerLossRun(seed: seed, crashPoints: number("crash-points", 500), directory: dir)
    run.compactionShare = UInt64(number("compaction-share", 30))
    let report = run.run()
    print(report)
    print(report.compactionDetails)
    failed = !report.failures.isEmpty
default:
    usage("unknown mode \(mode)")
}
print(String(format: "%.1f s", Date().timeIntervalSince(started)))
if failed {
    print("FAILED (seed \(seed))")
    if ownDirectory { try? FileManager.default.removeItem(atPath: dir) }
    exit(1)
}
