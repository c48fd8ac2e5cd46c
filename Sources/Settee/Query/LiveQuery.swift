import Foundation
import Synchronization

/// What a live query's listener receives: the query's results after a change that altered
/// them (and once when the listener is added), or the error that running it met.
///
/// ```swift
/// let token = query.addChangeListener { change in
///     if let error = change.error { print(error); return }
///     for result in change.results! { print(result.string(forKey: "title") ?? "") }
/// }
/// ```
///
/// - Note: A value type; safe to share between threads (``results`` makes a new result set,
///   with its own position, at each read).
public struct QueryChange: Sendable {
    /// The query that changed.
    ///
    /// ```swift
    /// print(change.query.columnNames)
    /// ```
    public let query: Query
    let rows: [Result]?
    /// The new results; nil when ``error`` is set.
    ///
    /// ```swift
    /// let titles = change.results?.allResults().compactMap { $0.string(forKey: "title") }
    /// ```
    public var results: ResultSet? { rows.map(ResultSet.init(results:)) }
    /// Why the query could not run (a parameter without a value, a closed database).
    ///
    /// ```swift
    /// if let error = change.error { log(error) }
    /// ```
    public let error: (any Error)?
}

extension Query {
    /// Makes the query live: `listener` is called on `queue` with the current results at once,
    /// then after every commit that changes them, as Couchbase Lite's live queries do.
    ///
    /// ```swift
    /// let query = try db.createQuery("SELECT META().id, title FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt DESC LIMIT 20")
    /// query.parameters = Parameters().setString("list-7", forName: "list")
    /// let token = query.addChangeListener(on: .main) { change in
    ///     render(change.results?.allResults() ?? [])
    /// }
    /// // later
    /// token.remove()
    /// ```
    ///
    /// Unlike Couchbase Lite, which runs a live query again after every change of the database,
    /// a commit is first checked against the query: unless one of its documents matched the
    /// query's `WHERE` at the last run or matches it now, the query is not run. When it is run,
    /// listeners hear of it only if the results differ. Setting ``parameters`` runs it again.
    /// The query is evaluated on a serial queue of its own, never on the writer's thread.
    public func addChangeListener(on queue: DispatchQueue = .global(), _ listener: @escaping @Sendable (QueryChange) -> Void) -> ListenerToken {
        live.add(query: self, queue: queue, listener)
    }

    /// The query's results now and after every change of them, as an asynchronous sequence;
    /// iteration throws what running the query throws. Only the newest results wait for a
    /// slow consumer (older ones are dropped: they are out of date). Ending the iteration
    /// (or cancelling its task) stops the live query.
    ///
    /// ```swift
    /// for try await results in query.changes() {
    ///     print(results.allResults().count, "tasks")
    /// }
    /// ```
    public func changes() -> AsyncThrowingStream<ResultSet, any Error> {
        let (stream, continuation) = AsyncThrowingStream<ResultSet, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = addChangeListener(on: live.queue) { change in
            if let error = change.error {
                continuation.finish(throwing: error)
            } else if let rows = change.rows {
                continuation.yield(ResultSet(results: rows))
            }
        }
        continuation.onTermination = { _ in token.remove() }
        return stream
    }
}

/// The live side of a ``Query``: its listeners, the last results and the IDs of the documents
/// that matched its `WHERE` at the last run, which decide whether a commit concerns it.
///
/// - Note: Thread-safe: state behind a mutex; runs happen on one serial queue.
final class LiveQueryState: Sendable {
    private struct State {
        var next: UInt64 = 0
        var listeners: [UInt64: (queue: DispatchQueue, call: @Sendable (QueryChange) -> Void)] = [:]
        var observer: ListenerToken?
        var last: [Result]?
        var lastValues: [[JSONValue?]]?
        var matched = Set<String>()
    }

    private let state = Mutex(State())
    /// Where the query is checked and run, in commit order.
    let queue = DispatchQueue(label: "settee.live-query")

    func add(query: Query, queue: DispatchQueue, _ listener: @escaping @Sendable (QueryChange) -> Void) -> ListenerToken {
        let (id, first) = state.withLock { s -> (UInt64, Bool) in
            s.next += 1
            s.listeners[s.next] = (queue, listener)
            return (s.next, s.listeners.count == 1)
        }
        if first, let database = query.database {
            // The query holds itself alive through the database's listener while it has
            // listeners; removing the last one breaks the cycle. A query without a database
            // reports its error to the listener at the first run.
            let observer = database.core.hub.add { [self] change in
                self.queue.async { self.changed(query, change) }
            }
            state.withLock { $0.observer = observer }
        }
        self.queue.async { [self] in
            // A new listener starts with the current results, whatever the others have seen.
            let change = state.withLock { s in s.last.map { QueryChange(query: query, rows: $0, error: nil) } }
            if let change { queue.async { listener(change) } } else { run(query, always: true) }
        }
        return ListenerToken { [weak self] in self?.remove(id) }
    }

    private func remove(_ id: UInt64) {
        let observer = state.withLock { s -> ListenerToken? in
            s.listeners.removeValue(forKey: id)
            guard s.listeners.isEmpty else { return nil }
            defer { s.observer = nil; s.last = nil; s.lastValues = nil; s.matched = [] }
            return s.observer
        }
        observer?.remove()
    }

    /// Runs the query again after its parameters changed, when it is live.
    func parametersChanged(_ query: Query) {
        guard state.withLock({ !$0.listeners.isEmpty }) else { return }
        queue.async { [self] in run(query, always: false) }
    }

    /// Whether a commit can change the results; if so runs the query.
    private func changed(_ query: Query, _ change: DatabaseChange) {
        let (live, matched) = state.withLock { ($0.observer != nil, $0.matched) }
        guard live, let (database, statement) = try? query.compiled() else { return }
        let match = statement.fullTextMatch
        var affected = false
        for c in change.changes {
            if matched.contains(c.documentID) { affected = true; break }
            if c.isDeleted || c.isPurged { continue }
            guard let w = statement.whereClause else { affected = true; break }
            // The document as it is now: a failed read counts as a change (the run reports it).
            do {
                if var row = try database.core.liveRow(id: c.documentID, sequence: c.sequence) {
                    // A search is answered for this document alone (whether it matches does
                    // not depend on the others; only its rank does).
                    if let match, try database.core.fullTextMatches(row, index: match.index, query: match.query,
                                                                   parameters: query.parameters.values) {
                        row.fullTextScore = 0
                    }
                    guard try w.evaluate(row, parameters: query.parameters.values).isTrue else { continue }
                    affected = true
                    break
                }
            } catch {
                affected = true
                break
            }
        }
        if affected { run(query, always: false) }
    }

    /// Runs the query; tells the listeners when the results differ from the last (or always).
    private func run(_ query: Query, always: Bool) {
        let change: QueryChange
        do {
            let (database, statement) = try query.compiled()
            let executor = QueryExecutor(database: database, statement: statement, parameters: query.parameters.values)
            let (rows, matched) = try executor.runCollecting()
            let values = rows.map(\.values)
            let results = rows.map { Result(columns: query.columns, values: $0.values) }
            let changed = state.withLock { s -> Bool in
                s.matched = Set(matched)
                guard always || s.lastValues != values else { return false }
                s.last = results
                s.lastValues = values
                return true
            }
            guard changed else { return }
            change = QueryChange(query: query, rows: results, error: nil)
        } catch {
            change = QueryChange(query: query, rows: nil, error: error)
        }
        for l in state.withLock({ Array($0.listeners.values) }) { l.queue.async { l.call(change) } }
    }
}

extension DatabaseCore {
    /// Whether one document matches a full-text search of the index `name`, found by indexing
    /// the document alone in memory with the index's analyzer.
    func fullTextMatches(_ row: QueryRow, index name: String, query: QueryExpression, parameters: [String: JSONValue]) throws -> Bool {
        guard let index = indexSet.withLock({ $0.indexes.first { $0.name == name } }), let analyzer = index.analyzer else {
            throw SetteeError(.invalidParameter, "query: MATCH(\(name), …): no full-text index named \(name)")
        }
        guard let fields = try index.textFields(for: row) else { return false }
        guard case .string(let text)? = try query.evaluate(row, parameters: parameters) else {
            throw SetteeError(.invalidParameter, "query: the search of MATCH(\(name), …) must be a string")
        }
        var postings = InMemoryFullTextPostings(analyzer: analyzer)
        postings.index(1, fields: fields)
        return try FullTextEvaluator(query: try FullTextQuery(text, analyzer: analyzer), postings: postings).next() != nil
    }

    /// A changed document's current row for live queries' checks, read once per commit
    /// however many live queries ask (nil when it is deleted or gone).
    func liveRow(id: String, sequence: UInt64) throws -> QueryRow? {
        if let cached = liveRows.withLock({ c in c.sequence == sequence ? c.rows[id] : nil }) { return cached }
        let row = try read { tx -> QueryRow? in
            guard let meta = try self.meta(tx, id: Array(id.utf8)), !meta.flags.contains(.deleted) else { return nil }
            return try queryRow(tx, id: id, meta: meta)
        }
        liveRows.withLock { c in
            if c.sequence != sequence { c = (sequence, [:]) }
            c.rows[id] = .some(row)
        }
        return row
    }
}
