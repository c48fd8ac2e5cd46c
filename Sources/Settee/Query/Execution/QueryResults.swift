import Foundation
import Synchronization

extension Query {
    /// The results as an asynchronous sequence that streams them: rows are read on a thread of
    /// their own and handed over a few at a time as the iteration asks for them, so a large
    /// result is never all in memory when the query needs no sort, grouping or DISTINCT after
    /// its scan (``explain()`` says "no sort" or shows no `SORT`). Iteration throws what
    /// ``execute()`` would; ending it early stops the reading.
    ///
    /// ```swift
    /// for try await result in query.results() {
    ///     export(result.toJSON())
    /// }
    /// ```
    public func results() -> QueryResults { QueryResults(query: self) }
}

/// The rows of a query as an `AsyncSequence` (``Query/results()``): one snapshot of the
/// database, read as the iteration proceeds.
///
/// ```swift
/// var n = 0
/// for try await _ in query.results() { n += 1 }
/// ```
///
/// - Note: Safe to share between threads; each iterator runs the query once and is used by one
///   task.
public struct QueryResults: AsyncSequence, Sendable {
    public typealias Element = Result
    let query: Query

    /// Starts a run of the query for this iteration.
    ///
    /// ```swift
    /// var it = query.results().makeAsyncIterator()
    /// let first = try await it.next()
    /// ```
    public func makeAsyncIterator() -> Iterator { Iterator(channel: RowChannel(query: query)) }

    /// Hands over the rows of one run.
    ///
    /// ```swift
    /// while let r = try await it.next() { print(r.toJSON()) }
    /// ```
    ///
    /// - Note: Use from one task at a time.
    public struct Iterator: AsyncIteratorProtocol {
        let channel: RowChannel

        /// The next row; nil at the end; throws the query's error.
        ///
        /// ```swift
        /// let row = try await iterator.next()
        /// ```
        public mutating func next() async throws -> Result? { try await channel.next() }
    }
}

/// What an iterator holds: when it goes (an iteration ended early), the reading thread is told
/// to stop.
final class RowChannel: Sendable {
    private let buffer: RowBuffer
    init(query: Query) { buffer = RowBuffer(query: query) }
    deinit { buffer.cancel() }
    func next() async throws -> Result? { try await buffer.next() }
}

/// A bounded buffer between the thread reading a query's rows and the task iterating them: the
/// reader waits while the buffer is full, so memory stays at a few hundred rows.
final class RowBuffer: Sendable {
    private struct State {
        var buffer: [Result] = []
        var finished: (any Error)?? = nil   // .some(nil): done; .some(error): failed
        var waiting: CheckedContinuation<Void, Never>?
        var started = false
        var cancelled = false
    }

    private static let capacity = 256
    private let state = Mutex(State())
    private let space = NSCondition()
    private let query: Query

    init(query: Query) { self.query = query }

    func cancel() {
        state.withLock { $0.cancelled = true }
        wakeReader()
    }

    /// Tells the reading thread there is room (taken under the condition's lock, so a reader
    /// about to wait cannot miss it).
    private func wakeReader() {
        space.lock()
        space.broadcast()
        space.unlock()
    }

    private func start() {
        let thread = Thread { [self] in produce() }
        thread.name = "settee.query-results"
        thread.start()
    }

    private func produce() {
        do {
            let (database, statement) = try query.compiled()
            let columns = query.columns
            let executor = query.executor(database, statement)
            try executor.stream { [self] row in
                space.lock()
                while state.withLock({ $0.buffer.count >= Self.capacity && !$0.cancelled }) { space.wait() }
                space.unlock()
                let (go, resume) = state.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
                    if s.cancelled { return (false, nil) }
                    s.buffer.append(Result(columns: columns, values: row.values, storedJSON: row.body))
                    defer { s.waiting = nil }
                    return (true, s.waiting)
                }
                resume?.resume()
                return go
            }
            finish(nil)
        } catch {
            finish(error)
        }
    }

    private func finish(_ error: (any Error)?) {
        let resume = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.finished = .some(error)
            defer { s.waiting = nil }
            return s.waiting
        }
        resume?.resume()
    }

    func next() async throws -> Result? {
        let first = state.withLock { s -> Bool in defer { s.started = true }; return !s.started }
        if first { start() }
        while true {
            enum Step { case row(Result), end, failed(any Error), wait }
            let step = state.withLock { s -> Step in
                if !s.buffer.isEmpty { return .row(s.buffer.removeFirst()) }
                if let f = s.finished { return f.map(Step.failed) ?? .end }
                return .wait
            }
            switch step {
            case .row(let r):
                wakeReader()
                return r
            case .end: return nil
            case .failed(let e):
                state.withLock { $0.finished = .some(nil) }   // thrown once, then the end
                throw e
            case .wait:
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { s -> Bool in
                        if !s.buffer.isEmpty || s.finished != nil { return true }
                        s.waiting = c
                        return false
                    }
                    if ready { c.resume() }
                }
            }
        }
    }
}
