import Foundation
import Settee
import Synchronization

/// How `settee` ends: the exit codes its `--help` lists.
enum ExitStatus: Int32 {
    case ok = 0
    /// Bad arguments, a bad JSON argument, an invalid ID.
    case usage = 1
    /// No such database, document or revision.
    case notFound = 2
    /// The document changed since the revision given (`--rev`).
    case conflict = 3
    /// `check` found damage, or the database could not be read as it is.
    case damaged = 4
    /// The database is open in another process (`settee serve`, an app).
    case locked = 5
    /// Anything else: I/O, a refusal (validation), a failed replication.
    case failed = 6
    /// Stopped by Ctrl-C before it finished (nothing half-written).
    case interrupted = 130

    static let help = """
        Exit codes: 0 ok, 1 usage (bad arguments or JSON), 2 not found, 3 conflict, 4 damaged, \
        5 locked by another process, 6 failed (I/O, refused, replication), 130 interrupted.
        """
}

/// A failure `settee` reports in one line and exits with.
struct CLIError: Error, CustomStringConvertible {
    var status: ExitStatus
    var message: String
    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }
    var description: String { message }

    /// The exit status and line for a library error.
    init(_ error: SetteeError, context: String? = nil) {
        let status: ExitStatus
        switch error.code {
        case .notFound: status = .notFound
        case .conflict: status = .conflict
        case .corrupted, .versionMismatch: status = .damaged
        case .busy: status = .locked
        case .invalidParameter, .invalidJSON, .tooLarge: status = .usage
        case .cancelled: status = .interrupted
        default: status = .failed
        }
        self.init(status, (context.map { $0 + ": " } ?? "") + error.message)
    }
}

/// Where output goes and how it looks: aligned columns for people, colour only on a terminal
/// (and never with `NO_COLOR`), progress on standard error.
enum Terminal {
    static let stdoutIsTTY = isatty(STDOUT_FILENO) != 0
    static let stderrIsTTY = isatty(STDERR_FILENO) != 0
    static let colour = stdoutIsTTY && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
        && ProcessInfo.processInfo.environment["TERM"] != "dumb"

    static func bold(_ s: String) -> String { colour ? "\u{1B}[1m\(s)\u{1B}[0m" : s }
    static func dim(_ s: String) -> String { colour ? "\u{1B}[2m\(s)\u{1B}[0m" : s }
    static func green(_ s: String) -> String { colour ? "\u{1B}[32m\(s)\u{1B}[0m" : s }
    static func yellow(_ s: String) -> String { colour ? "\u{1B}[33m\(s)\u{1B}[0m" : s }
    static func red(_ s: String) -> String { colour ? "\u{1B}[31m\(s)\u{1B}[0m" : s }

    /// Writes to standard output at once (a script reading a pipe sees each line as it comes).
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func err(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Rows in columns as wide as their widest cell (the last column is not padded).
    static func table(_ header: [String]?, _ rows: [[String]]) {
        let all = (header.map { [$0] } ?? []) + rows
        guard let columns = all.map(\.count).max(), columns > 0 else { return }
        var widths = Array(repeating: 0, count: columns)
        for r in all { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        func line(_ r: [String]) -> String {
            r.enumerated().map { i, c in i == r.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }
        if let header { out(bold(line(header))) }
        for r in rows { out(line(r)) }
    }

    /// One JSON value, compact, on its own line.
    static func json(_ value: JSONValue) throws {
        out(try value.jsonText())
    }

    static func count(_ n: UInt64) -> String {
        let s = String(n)
        var out = ""
        for (i, c) in s.reversed().enumerated() {
            if i > 0 && i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    static func bytes(_ n: UInt64) -> String {
        if n < 1024 { return "\(n) B" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var v = Double(n) / 1024
        var i = 0
        while v >= 1024 && i < units.count - 1 {
            v /= 1024
            i += 1
        }
        return String(format: "%.1f", v) + " " + units[i]
    }
}

/// Runs `body` as synchronous code: a `Database` method called in it is the synchronous one
/// (in an `async` function Swift would pick its `async` overload).
func sync<R>(_ body: () throws -> R) rethrows -> R { try body() }

/// Ctrl-C: long work checks ``isRequested`` and stops at a clean point.
enum Interrupt {
    private static let requested = Atomic<Bool>(false)
    private static let source = Mutex<DispatchSourceSignal?>(nil)

    /// From now on SIGINT asks the work to stop instead of killing the process.
    static func install() {
        source.withLock { s in
            guard s == nil else { return }
            signal(SIGINT, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
            src.setEventHandler {
                if requested.exchange(true, ordering: .relaxed) {
                    // A second Ctrl-C while the first is being honoured: say so.
                    Terminal.err("settee: stopping…")
                }
            }
            src.resume()
            s = src
        }
    }

    static var isRequested: Bool { requested.load(ordering: .relaxed) }
}

/// A progress report on standard error: a bar with rate and time left on a terminal, a plain
/// line at most once a second otherwise.
final class ProgressReport: @unchecked Sendable {
    private let label: String
    private let unit: String
    private let started = Date()
    private var lastDrawn = Date.distantPast
    private var drewBar = false
    private let lock = NSLock()

    init(_ label: String, unit: String) {
        self.label = label
        self.unit = unit
    }

    /// `done` of `total` (nil: unknown).
    func update(_ done: UInt64, of total: UInt64?) {
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        guard now.timeIntervalSince(lastDrawn) >= (Terminal.stderrIsTTY ? 0.1 : 1) else { return }
        lastDrawn = now
        let elapsed = max(now.timeIntervalSince(started), 0.001)
        let rate = Double(done) / elapsed
        var text = "\(label): \(Terminal.count(done))"
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            text += " of \(Terminal.count(total)) \(unit)"
            let left = rate > 0 ? Double(total - min(done, total)) / rate : 0
            text += String(format: ", %.0f ", rate) + unit + "/s, " + Self.time(left) + " left"
            if Terminal.stderrIsTTY {
                let width = 24
                let filled = Int(fraction * Double(width))
                text = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
                    + String(format: "%3.0f%% ", fraction * 100) + text
            }
        } else {
            text += " " + unit + String(format: ", %.0f/s", rate)
        }
        if Terminal.stderrIsTTY {
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
            drewBar = true
        } else {
            Terminal.err(text)
        }
    }

    /// Ends the bar's line.
    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if drewBar { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    static func time(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
