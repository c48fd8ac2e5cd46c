import Foundation
import Synchronization

/// A child process of a test, started with `posix_spawn`.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1, before swift-corelibs-foundation's
/// PR #5472) copies 256 bytes of every `/proc/self/fd` entry's name, reading past glibc's
/// directory buffer; when the page after it is unmapped, the test process dies. This type spawns
/// without that walk. The child gets its arguments, the tests' environment with `environment`
/// over it, a working directory, its three standard streams, and none of the parent's other
/// descriptors (so a child that outlives a crashed test process holds none of its pipes open),
/// with every signal unblocked and `SIGPIPE` at its default.
///
/// ```swift
/// let run = try await Subprocess.run("/usr/bin/openssl", ["version"])
/// #expect(run.termination == .exited(0) && run.output.hasPrefix("OpenSSL"))
/// ```
///
/// Standard output and error, when piped, are read to their end on threads of their own, so a
/// chatty child never blocks on a full pipe and no waiting holds a cooperative thread. A child
/// still running when its `Subprocess` is released is killed (`SIGKILL`) and reaped.
///
/// Thread safety: every member may be used from any thread.
package final class Subprocess: Sendable {
    /// Where a standard stream of the child goes.
    package enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// A pipe to this process: written with ``write(_:)`` (input) or collected (output).
        case pipe
    }

    /// How a child ended.
    package enum Termination: Equatable, Sendable, CustomStringConvertible {
        case exited(Int32)
        case signaled(Int32)

        /// The shell's number for it: the exit status, or 128 plus the signal.
        package var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signaled(let signal): 128 + signal
            }
        }

        package var description: String {
            switch self {
            case .exited(let code): "exited with status \(code)"
            case .signaled(let signal): "died of signal \(signal)"
            }
        }
    }

    /// What a finished child wrote, and how it ended.
    package struct Result: Sendable, CustomStringConvertible {
        package var termination: Termination
        package var output: String
        package var error: String
        package var description: String { "\(termination); stdout: \(output); stderr: \(error)" }
    }

    /// Why a child could not be started or written to.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The child's process ID.
    package let pid: pid_t
    private let input: Mutex<Int32>
    private let stdout: Drain?
    private let stderr: Drain?
    private let ended = Mutex<Termination?>(nil)

    /// Starts `executable` (a path) with `arguments`, in `directory` if one is given.
    package init(_ executable: String, _ arguments: [String], directory: String? = nil,
                 environment: [String: String] = [:], input: Stream = .null, output: Stream = .pipe,
                 error: Stream = .pipe) throws {
        _ = Self.parentIgnoresSIGPIPE
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { throw Failure(description: "posix_spawn_file_actions_init failed") }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else { throw Failure(description: "posix_spawnattr_init failed") }
        defer { posix_spawnattr_destroy(&attributes) }
        // The spawning thread may block signals (the parent ignores SIGPIPE): the child starts clean.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &pipeSignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        // The parent's ends of the pipes, and the child's (closed here once it has them).
        var parentEnds: [Int32] = [-1, -1, -1]
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        func fail(_ message: String) -> Failure {
            for fd in parentEnds where fd >= 0 { close(fd) }
            return Failure(description: message)
        }
        for (target, stream) in [(Int32(0), input), (1, output), (2, error)] {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .pipe:
                var fds: [Int32] = [-1, -1]
                guard Self.closeOnExecPipe(&fds) else { throw fail("pipe failed: errno \(errno)") }
                let (childEnd, parentEnd) = target == 0 ? (fds[0], fds[1]) : (fds[1], fds[0])
                childEnds.append(childEnd)
                parentEnds[Int(target)] = parentEnd
                posix_spawn_file_actions_adddup2(&actions, childEnd, target)
            }
        }
        if let directory {
            guard let addChdir = Self.addChdir else { throw fail("this C library cannot spawn in a directory") }
            let rc = addChdir(&actions, directory)
            guard rc == 0 else { throw fail("posix_spawn_file_actions_addchdir_np failed: \(rc)") }
        }
        if let addCloseFrom = Self.addCloseFrom { _ = addCloseFrom(&actions, 3) }

        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw fail("posix_spawn \(executable) failed: \(String(cString: strerror(rc)))") }
        pid = child
        self.input = Mutex(parentEnds[0])
        stdout = parentEnds[1] >= 0 ? Drain(parentEnds[1], name: "stdout of \(child)") : nil
        stderr = parentEnds[2] >= 0 ? Drain(parentEnds[2], name: "stderr of \(child)") : nil
    }

    deinit {
        closeInput()
        if termination == nil {
            _ = sendSignal(pid, SIGKILL)
            _ = waitUntilExit()
        }
    }

    /// Starts a child, gives it `input` (its standard input then closed) and waits until it has
    /// ended and its output has ended.
    package static func run(_ executable: String, _ arguments: [String], directory: String? = nil,
                            environment: [String: String] = [:], input: String? = nil) async throws -> Result {
        let child = try started(executable, arguments, directory: directory, environment: environment, input: input)
        return await child.finished()
    }

    /// The same as ``run(_:_:directory:environment:input:)``, holding the calling thread.
    package static func runBlocking(_ executable: String, _ arguments: [String], directory: String? = nil,
                                    environment: [String: String] = [:], input: String? = nil) throws -> Result {
        let child = try started(executable, arguments, directory: directory, environment: environment, input: input)
        let termination = child.waitUntilExit()
        child.stdout?.waitForEnd()
        child.stderr?.waitForEnd()
        return Result(termination: termination, output: child.output, error: child.errorOutput)
    }

    /// A child given `input` on its standard input, then closed (nothing for nil).
    private static func started(_ executable: String, _ arguments: [String], directory: String?,
                                environment: [String: String], input: String?) throws -> Subprocess {
        let child = try Subprocess(executable, arguments, directory: directory, environment: environment,
                                   input: input == nil ? .null : .pipe)
        if let input { try child.write(input) }
        child.closeInput()
        return child
    }

    /// Writes `text` to the child's standard input (a pipe).
    package func write(_ text: String) throws {
        try input.withLock { fd in
            guard fd >= 0 else { throw Failure(description: "the child's standard input is not an open pipe") }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBytes { writeBytes(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw Failure(description: "writing to the child failed: errno \(errno)") }
                bytes = bytes.dropFirst(n)
            }
        }
    }

    /// Closes the child's standard input, so that it reads its end.
    package func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// What the child has written to standard output so far (a pipe).
    package var output: String { stdout?.text ?? "" }
    /// What the child has written to standard error so far (a pipe).
    package var errorOutput: String { stderr?.text ?? "" }

    /// Sends `signal` to the child unless it has been reaped (its ID may be another's by then).
    package func signal(_ signal: Int32) {
        ended.withLock { if $0 == nil { _ = sendSignal(pid, signal) } }
    }

    /// How the child ended, or `nil` while it runs. Reaps it.
    package var termination: Termination? {
        ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, WNOHANG) } while reaped < 0 && errno == EINTR
            guard reaped == pid else { return nil }
            // The wait status's layout, as the C library's macros read it.
            let signal = status & 0x7f
            ended = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
            return ended
        }
    }

    /// Whether the child is still running.
    package var isRunning: Bool { termination == nil }

    /// Waits for the child to end, holding the calling thread.
    package func waitUntilExit() -> Termination {
        while true {
            if let termination { return termination }
            usleep(2_000)
        }
    }

    /// Waits for the child to end without holding a thread; `nil` if `timeout` passes first.
    package func exit(within timeout: Duration = .seconds(60)) async -> Termination? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let termination { return termination }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return termination
    }

    /// Waits until the child has ended and its output has ended, without holding a thread.
    package func finished() async -> Result {
        var termination: Termination?
        while termination == nil { termination = await exit(within: .seconds(3600)) }
        await waitForOutputEnd(timeout: .seconds(3600))
        return Result(termination: termination!, output: output, error: errorOutput)
    }

    /// Waits until standard output and error have ended (their last writer is gone), or `timeout`.
    package func waitForOutputEnd(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !(stdout?.ended ?? true && stderr?.ended ?? true) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until the child's standard output contains `text`: false if it ends without, or
    /// `timeout` passes.
    package func waitForOutput(containing text: String, timeout: Duration = .seconds(60)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let stdout else { return false }
            let ended = stdout.ended
            if stdout.text.contains(text) { return true }
            if ended { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    // MARK: - The C library

    /// Writes to a pipe whose reader has gone fail with `EPIPE` instead of killing the tests.
    private static let parentIgnoresSIGPIPE: Void = ignoreSIGPIPE()

    /// A pipe whose ends close on exec, so that no other child spawned meanwhile inherits it:
    /// made so at once where the C library can (`pipe2`), else right after.
    private static func closeOnExecPipe(_ fds: inout [Int32]) -> Bool {
        if let pipe2 {
            return fds.withUnsafeMutableBufferPointer { pipe2($0.baseAddress!, O_CLOEXEC) } == 0
        }
        guard pipe(&fds) == 0 else { return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }

    private static let pipe2 = symbol("pipe2", as: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)

    private typealias FileActions = UnsafeMutablePointer<posix_spawn_file_actions_t>
    /// glibc 2.29's and 2.34's spawn actions, which Swift's C library module does not declare.
    private static let addChdir = symbol("posix_spawn_file_actions_addchdir_np",
                                         as: (@convention(c) (FileActions, UnsafePointer<CChar>) -> Int32).self)
    private static let addCloseFrom = symbol("posix_spawn_file_actions_addclosefrom_np",
                                             as: (@convention(c) (FileActions, Int32) -> Int32).self)

    private static func symbol<F>(_ name: String, as type: F.Type) -> F? {
        guard let handle = dlopen(nil, RTLD_NOW), let address = dlsym(handle, name) else { return nil }
        return unsafeBitCast(address, to: type)
    }
}

/// A pipe read to its end on a thread of its own.
private final class Drain: Sendable {
    private let state = Mutex<(bytes: [UInt8], ended: Bool)>(([], false))
    private let done = DispatchSemaphore(value: 0)

    init(_ fd: Int32, name: String) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                state.withLock { $0.bytes.append(contentsOf: buffer[..<n]) }
            }
            close(fd)
            state.withLock { $0.ended = true }
            done.signal()
        }
        thread.name = name
        thread.start()
    }

    var text: String { state.withLock { String(decoding: $0.bytes, as: UTF8.self) } }
    var ended: Bool { state.withLock { $0.ended } }

    func waitForEnd() {
        done.wait()
        done.signal()
    }
}

// The C library's calls under names no method of `Subprocess` shadows.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }
private func writeBytes(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { write(fd, bytes, count) }
private func ignoreSIGPIPE() { _ = signal(SIGPIPE, SIG_IGN) }
