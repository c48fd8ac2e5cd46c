import Foundation
import SetteeStorage
import Synchronization

/// Figures from a round of random corruptions.
package struct CorruptionReport: CustomStringConvertible {
    package var corruptions = 0
    package var detectedAtOpen = 0
    package var detectedOnRead = 0
    package var detectedByCheck = 0
    /// Damage in space nothing refers to any more: every value read back correctly.
    package var harmless = 0
    /// Damage confined to the last records of a log that was not closed (every record from the
    /// first damaged one to the end is damaged): indistinguishable from a torn write, so the log
    /// ends before them (see Formats/storage.md, "What recovery cannot tell").
    package var tailDropped = 0
    package var failures: [String] = []

    package var description: String {
        "corruptions: \(corruptions), reported corrupted: \(detectedAtOpen) at open, \(detectedOnRead) on read, \(detectedByCheck) by check(); read back intact: \(harmless); unclosed log's damaged last records dropped as torn: \(tailDropped); wrong data or crashes: \(failures.count)"
    }
}

/// Random bit flips, overwritten bytes and lost sectors in committed regions of two databases
/// (one closed cleanly, one left as a crash leaves it). Each damaged copy is opened, read in full
/// and checked: the engine must report `corrupted` with an offset, or return exactly the committed
/// data. The one allowed exception: when every record from the first damaged one to the end of the
/// unclosed log is damaged, the log may end before them, as a torn write would end it.
package struct CorruptionRun {
    package var seed: UInt64
    package var corruptions: Int
    package var directory: String
    package var log: (String) -> Void = { print($0) }
    /// Runs only this corruption, describing it (to replay a failure).
    package var only: Int?

    package init(seed: UInt64, corruptions: Int, directory: String) {
        self.seed = seed
        self.corruptions = corruptions
        self.directory = directory
    }

    struct Base {
        var image: [UInt8]
        var contents: Contents
        var closed: Bool
        /// The commits after the last checkpoint (unclosed log only): where each one's records
        /// start and end, and the contents before it.
        var tail: [(start: Int, end: Int, before: Contents)]
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    package func run() -> CorruptionReport {
        var report = CorruptionReport()
        let bases: [Base]
        do {
            bases = [try makeBase(closed: true), try makeBase(closed: false)]
        } catch {
            report.failures.append("building the databases to damage failed: \(error)")
            return report
        }
        let db = directory + "/corrupt.settee"
        let watchdog = Watchdog(limitSeconds: 30) { [seed] trial in
            "HUNG: seed \(seed), corruption \(trial) has run for 30 s"
        }
        defer { watchdog.stop() }
        for trial in only.map({ $0...$0 }) ?? 0...(corruptions - 1) where corruptions > 0 {
            watchdog.begin(trial)
            do {
                try damageAndVerify(trial, bases: bases, db: db, report: &report)
            } catch {
                let message = "seed \(seed), corruption \(trial): \(error)"
                report.failures.append(message)
                log("FAILED: " + message)
                if report.failures.count >= 10 { break }
            }
            report.corruptions += 1
        }
        return report
    }

    private func makeBase(closed: Bool) throws -> Base {
        let path = directory + "/corrupt-base-\(closed ? "closed" : "open").settee"
        try? FileManager.default.removeItem(atPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Checkpoints only where asked (after commit 30, and at close), so the unclosed log always
        // has a replayed tail of 30 commits whatever the seed.
        var config = StoreConfiguration()
        config.checkpointInterval = 1 << 24
        config.maxDirtyNodes = 1 << 16
        let workload = Workload(seed: SplitMix.mix(seed, closed ? 1 : 2), maxValue: 24 << 10)
        var contents: Contents = [:]
        var tail: [(start: Int, end: Int, before: Contents)] = []
        let store = try Store(directory: path, configuration: config)
        var i = 0
        var committed = 0
        while committed < 60 {
            let s = workload.step(i)
            let start = Int(store.logEnd)
            let checkpointsBefore = store.lastCheckpoint
            let before = contents
            if try workload.run(s, on: store) {
                workload.apply(i, to: &contents)
                committed += 1
                if committed == 30 { try store.checkpoint() }
                if store.lastCheckpoint != checkpointsBefore {
                    tail = []
                } else if Int(store.logEnd) > start {
                    // A transaction that changed nothing writes no record and is no part of the tail.
                    tail.append((start, Int(store.logEnd), normalized(before)))
                }
            }
            i += 1
        }
        let end = Int(store.logEnd)
        if closed { try store.close() } else { store.abandon() }
        var image = try Array(Data(contentsOf: URL(fileURLWithPath: path + "/log")))
        if !closed { image = Array(image.prefix(end)) }
        return Base(image: image, contents: normalized(contents), closed: closed, tail: closed ? [] : tail)
    }

    private func damageAndVerify(_ trial: Int, bases: [Base], db: String, report: inout CorruptionReport) throws {
        var r = SplitMix(seed: SplitMix.mix(seed, UInt64(trial)))
        let base = bases[Int(r.next(below: UInt64(bases.count)))]
        var image = base.image
        let at = Int(r.next(below: UInt64(image.count)))
        var range = at..<at + 1
        switch r.next(below: 4) {
        case 0:
            image[at] ^= UInt8(1) << r.next(below: 8)
        case 1:
            let end = min(image.count, at + 64)
            for _ in 0..<(2 + r.next(below: 7)) {
                image[at + Int(r.next(below: UInt64(end - at)))] ^= UInt8(1) << r.next(below: 8)
            }
            range = at..<end
        case 2:
            let end = min(image.count, at + 1 + Int(r.next(below: 64)))
            for i in at..<end { image[i] = UInt8(truncatingIfNeeded: r.next()) }
            range = at..<end
        default:
            let start = at / 512 * 512
            let end = min(image.count, start + 512)
            for i in start..<end { image[i] = 0 }
            range = start..<end
        }
        if only != nil {
            log("damage at \(range) of the \(base.closed ? "closed" : "unclosed") log (\(image.count) bytes; commits after the last checkpoint at \(base.tail.map(\.start)))")
        }
        guard image != base.image else {
            report.harmless += 1
            return
        }
        try? FileManager.default.removeItem(atPath: db)
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        try Data(image).write(to: URL(fileURLWithPath: db + "/log"))

        let opened = Swift.Result { () throws(StorageError) -> Store in try Store(directory: db) }
        guard case .success(let store) = opened else {
            if case .failure(let e) = opened, e.code == .corrupted {
                guard e.offset != nil else { throw Failure(description: "corrupted without an offset: \(e)") }
                report.detectedAtOpen += 1
                return
            }
            throw Failure(description: "open failed: \(opened)")
        }
        defer { store.abandon() }
        let found: Contents
        do {
            found = normalized(try readContents(store))
        } catch let e as StorageError where e.code == .corrupted {
            guard e.offset != nil else { throw Failure(description: "corrupted without an offset: \(e)") }
            report.detectedOnRead += 1
            return
        }
        if found != base.contents {
            if let t = base.tail.lastIndex(where: { $0.before == found }),
               base.tail[t...].allSatisfy({ $0.start < range.upperBound && range.lowerBound < $0.end }) {
                report.tailDropped += 1
            } else {
                throw Failure(description: "damage at \(range) returned wrong data: \(difference(found, base.contents))")
            }
        }
        do {
            _ = try store.check()
        } catch let e as StorageError where e.code == .corrupted {
            guard e.offset != nil else { throw Failure(description: "corrupted without an offset: \(e)") }
            report.detectedByCheck += 1
            return
        }
        if found == base.contents { report.harmless += 1 }
    }
}

/// Ends the process, naming the trial, when one trial runs longer than the limit: a hang is a
/// finding, and an in-process loop cannot be interrupted any other way.
package final class Watchdog: Sendable {
    private let state = Mutex<(trial: Int, started: Double, running: Bool)>((0, Date().timeIntervalSince1970, true))

    package init(limitSeconds: Double, message: @escaping @Sendable (Int) -> String) {
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: 0.5)
                let (trial, started, running) = self.state.withLock { ($0.trial, $0.started, $0.running) }
                if !running { return }
                if Date().timeIntervalSince1970 - started > limitSeconds {
                    FileHandle.standardError.write(Data((message(trial) + "\n").utf8))
                    exit(3)
                }
            }
        }
        thread.start()
    }

    package func begin(_ trial: Int) {
        let now = Date().timeIntervalSince1970
        state.withLock { $0.trial = trial; $0.started = now }
    }

    package func stop() { state.withLock { $0.running = false } }
}
