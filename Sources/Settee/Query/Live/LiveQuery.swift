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
    /// Commits are checked on the database's notification queue (one pass over its live
    /// queries per commit) and the query is run on a serial queue of its own, never on the
    /// writer's thread.
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
        var registered = false
        var last: [Result]?
        var lastValues: [[JSONValue?]]?
        var matched = Set<String>()
        /// A run is scheduled and has not started: it will read every commit made so far.
        var pending = false
        /// A join's observers of the collections it joins (the first source's is the registry's).
        var joinObservers: [ListenerToken] = []
        /// A run is reading: a commit checked meanwhile may be newer than its snapshot.
        var running = false
    }

    private let state = Mutex(State())
    /// Where the query is run, in commit order.
    let queue = DispatchQueue(label: "settee.live-query")

    func add(query: Query, queue: DispatchQueue, _ listener: @escaping @Sendable (QueryChange) -> Void) -> ListenerToken {
        let (id, first) = state.withLock { s -> (UInt64, Bool) in
            s.next += 1
            s.listeners[s.next] = (queue, listener)
            return (s.next, s.listeners.count == 1)
        }
        if first, let database = query.database {
            // The registry holds the query alive while it has listeners; removing the last one
            // lets it go. A query without a database reports its error at the first run.
            database.core.liveQueries.register(query, self, hub: database.core.hub)
            // A join is run again after a commit to any collection it joins.
            var observers: [ListenerToken] = []
            if case .success(let statement) = query.plan {
                for j in statement.joins {
                    guard let target = try? database.queryTarget(j.source), target.core !== database.core else { continue }
                    observers.append(target.core.hub.add { [weak self] change in self?.changed(query, change) })
                }
            }
            state.withLock { $0.registered = true; $0.joinObservers += observers }
        }
        self.queue.async { [self] in
            // A new listener starts with the current results, whatever the others have seen.
            let change = state.withLock { s in s.last.map { QueryChange(query: query, rows: $0, error: nil) } }
            if let change { queue.async { listener(change) } } else { run(query, always: true) }
        }
        return ListenerToken { [weak self, weak database = query.database] in
            guard let self, self.remove(id) else { return }
            database?.core.liveQueries.unregister(self)
        }
    }

    /// Removes a listener; true when it was the last.
    private func remove(_ id: UInt64) -> Bool {
        let (last, observers) = state.withLock { s -> (Bool, [ListenerToken]) in
            s.listeners.removeValue(forKey: id)
            guard s.listeners.isEmpty, s.registered else { return (false, []) }
            defer { s.joinObservers = [] }
            s.registered = false
            s.last = nil
            s.lastValues = nil
            s.matched = []
            return (true, s.joinObservers)
        }
        for o in observers { o.remove() }
        return last
    }

    /// Runs the query again after its parameters changed, when it is live.
    func parametersChanged(_ query: Query) {
        guard state.withLock({ !$0.listeners.isEmpty }) else { return }
        query.database?.core.liveQueries.reroute(query, self)
        schedule(query)
    }

    /// Runs the query soon, unless a run that has not started yet is already waiting (it will
    /// see the same commits).
    private func schedule(_ query: Query) {
        let needed = state.withLock { s -> Bool in
            if s.pending { return false }
            s.pending = true
            return true
        }
        if needed { queue.async { [self] in run(query, always: false) } }
    }

    /// Whether a commit can change the results, checked on the database's notification queue
    /// for every live query in turn; if so, schedules a run.
    func changed(_ query: Query, _ change: DatabaseChange) {
        let (live, matched, pending, running) = state.withLock { ($0.registered, $0.matched, $0.pending, $0.running) }
        guard live, !pending else { return }
        // A run reading now may have taken its snapshot before this commit.
        if running { return schedule(query) }
        guard let (database, statement) = try? query.compiled() else { return }
        // Whether a join's rows changed cannot be told from one document: it runs again.
        if !statement.joins.isEmpty { return schedule(query) }
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
                                                                   parameters: query.parameterValues) {
                        row.fullTextScore = 0
                    }
                    guard try w.evaluate(row, parameters: query.parameterValues).isTrue else { continue }
                    affected = true
                    break
                }
            } catch {
                affected = true
                break
            }
        }
        if affected { schedule(query) }
    }

    /// Runs the query; tells the listeners when the results differ from the last (or always).
    private func run(_ query: Query, always: Bool) {
        state.withLock { s in
            if !always { s.pending = false }
            s.running = true
        }
        let registry = query.database?.core.liveQueries
        registry?.began(self)
        var found: Set<String> = []
        defer { registry?.finished(self, matched: found) }
        let change: QueryChange
        do {
            let (database, statement) = try query.compiled()
            let executor = query.executor(database, statement)
            let (rows, matched) = try executor.runCollecting()
            let values = rows.map(\.values)
            let results = rows.map { Result(columns: query.columns, values: $0.values) }
            found = Set(matched)
            let changed = state.withLock { s -> Bool in
                s.running = false
                s.matched = found
                guard always || s.lastValues != values else { return false }
                s.last = results
                s.lastValues = values
                return true
            }
            guard changed else { return }
            change = QueryChange(query: query, rows: results, error: nil)
        } catch {
            state.withLock { $0.running = false }
            change = QueryChange(query: query, rows: nil, error: error)
        }
        for l in state.withLock({ Array($0.listeners.values) }) { l.queue.async { l.call(change) } }
    }
}

/// A database's live queries: one listener on its changes finds, for each commit, the live
/// queries it may concern and checks those alone, on the notification queue, scheduling runs
/// only where the results may change. (A listener and a dispatch per query per commit made a
/// thousand idle live queries cost a third of the commit rate on two cores.)
///
/// How it finds them without looking at every query: a query whose `WHERE` requires a property
/// to equal a string (`list.id = $list`, `type = 'task'`) is routed by that property and string;
/// a commit's document reaches it only when its property holds that string now, or when it
/// matched the query at its last run (``finished(_:matched:)``), or while the query runs (its
/// snapshot may predate the commit). Other queries are checked against every commit.
///
/// - Note: Thread-safe: its table is behind a mutex.
final class LiveQueryRegistry: Sendable {
    /// A property and the string a query requires it to equal.
    struct Route: Hashable {
        var path: PropertyPath
        var value: String
    }

    private struct Entry {
        var query: Query
        var state: LiveQueryState
        var route: Route?
        var matched: Set<String> = []
    }

    private struct Table {
        var entries: [ObjectIdentifier: Entry] = [:]
        var routes: [Route: Set<ObjectIdentifier>] = [:]
        /// How many routes use each path: the paths a changed document is read at.
        var paths: [PropertyPath: Int] = [:]
        var unrouted = Set<ObjectIdentifier>()
        var matchedBy: [String: Set<ObjectIdentifier>] = [:]
        /// Queries whose run is reading.
        var active = Set<ObjectIdentifier>()
        var observer: ListenerToken?

        mutating func removeRoute(_ id: ObjectIdentifier) {
            guard let entry = entries[id] else { return }
            if let route = entry.route {
                routes[route]?.remove(id)
                if routes[route]?.isEmpty == true { routes[route] = nil }
                paths[route.path, default: 1] -= 1
                if paths[route.path] == 0 { paths[route.path] = nil }
            } else {
                unrouted.remove(id)
            }
            entries[id]?.route = nil
        }

        mutating func addRoute(_ id: ObjectIdentifier, _ route: Route?) {
            entries[id]?.route = route
            if let route {
                routes[route, default: []].insert(id)
                paths[route.path, default: 0] += 1
            } else {
                unrouted.insert(id)
            }
        }

        mutating func setMatched(_ id: ObjectIdentifier, _ matched: Set<String>) {
            guard let old = entries[id]?.matched else { return }
            for d in old.subtracting(matched) {
                matchedBy[d]?.remove(id)
                if matchedBy[d]?.isEmpty == true { matchedBy[d] = nil }
            }
            for d in matched.subtracting(old) { matchedBy[d, default: []].insert(id) }
            entries[id]?.matched = matched
        }
    }

    private let table = Mutex(Table())

    /// The route of a query with its current parameters, if its `WHERE` has one.
    static func route(of query: Query) -> Route? {
        // A join's rows change with any of its sources: it is never routed.
        guard case .success(let statement) = query.plan, statement.joins.isEmpty, let w = statement.whereClause else { return nil }
        let parameters = query.parameterValues
        var best: Route?
        for c in QueryPlanner.conjuncts(w) {
            guard case .compare(.equal, let a, let b) = c else { continue }
            let (path, constant): (PropertyPath, QueryExpression)
            if case .property(let p) = a, QueryPlanner.isConstant(b) { (path, constant) = (p, b) }
            else if case .property(let p) = b, QueryPlanner.isConstant(a) { (path, constant) = (p, a) }
            else { continue }
            let empty = QueryRow.empty
            guard case .string(let value)? = try? constant.evaluate(empty, parameters: parameters) else { continue }
            // A parameter usually tells one query from the others (`list.id = $list`).
            let route = Route(path: path, value: value)
            if best == nil || constant.contains(where: { if case .parameter = $0 { true } else { false } }) { best = route }
        }
        return best
    }

    func register(_ query: Query, _ state: LiveQueryState, hub: ChangeHub) {
        let id = ObjectIdentifier(state)
        let route = Self.route(of: query)
        let needsObserver = table.withLock { t -> Bool in
            t.removeRoute(id)
            if t.entries[id] == nil { t.entries[id] = Entry(query: query, state: state) }
            t.addRoute(id, route)
            return t.observer == nil
        }
        guard needsObserver else { return }
        let observer = hub.add { [weak self] change in self?.changed(change) }
        let extra = table.withLock { t -> ListenerToken? in
            if t.observer == nil, !t.entries.isEmpty {
                t.observer = observer
                return nil
            }
            return observer
        }
        extra?.remove()
    }

    /// Routes a query again after its parameters changed.
    func reroute(_ query: Query, _ state: LiveQueryState) {
        let id = ObjectIdentifier(state)
        let route = Self.route(of: query)
        table.withLock { t in
            guard t.entries[id] != nil else { return }
            t.removeRoute(id)
            t.addRoute(id, route)
        }
    }

    func unregister(_ state: LiveQueryState) {
        let id = ObjectIdentifier(state)
        let observer = table.withLock { t -> ListenerToken? in
            t.removeRoute(id)
            t.setMatched(id, [])
            t.entries[id] = nil
            t.active.remove(id)
            guard t.entries.isEmpty else { return nil }
            defer { t.observer = nil }
            return t.observer
        }
        observer?.remove()
    }

    /// A run of the query begins reading.
    func began(_ state: LiveQueryState) {
        _ = table.withLock { t in t.active.insert(ObjectIdentifier(state)) }
    }

    /// A run ended, having matched `matched` (empty after a failure: the run reported it).
    func finished(_ state: LiveQueryState, matched: Set<String>) {
        let id = ObjectIdentifier(state)
        table.withLock { t in
            t.active.remove(id)
            t.setMatched(id, matched)
        }
    }

    private func changed(_ change: DatabaseChange) {
        let (paths, entries) = table.withLock { t in (Array(t.paths.keys), t.entries) }
        guard let core = entries.values.first?.query.database?.core else { return }
        // Each changed document's value at every routed path, read once: probed from the body's
        // bytes when every path is one of names (no row is made for a document no query is
        // routed to), else from its row.
        var found: [(String, Route)] = []
        var everyQuery = false
        if !paths.isEmpty {
            let names = paths.compactMap(\.probedNames)
            let level = names.count == paths.count ? JSONParser.ProbeLevel(paths: names) : nil
            for c in change.changes where !c.isDeleted && !c.isPurged {
                do {
                    if let level, let probed = try core.probeCurrent(id: c.documentID, level: level),
                       !probed.contains(.ambiguous) {
                        for (path, value) in zip(paths, probed) {
                            if case .scalar(.string(let s)) = value { found.append((c.documentID, Route(path: path, value: s))) }
                        }
                        continue
                    }
                    guard let row = try core.liveRow(id: c.documentID, sequence: c.sequence) else { continue }
                    for path in paths {
                        if case .string(let s)? = path.value(in: row.properties) { found.append((c.documentID, Route(path: path, value: s))) }
                    }
                } catch {
                    everyQuery = true   // a failed read concerns everyone: their runs report it
                }
            }
        }
        let candidates = table.withLock { t -> Set<ObjectIdentifier> in
            if everyQuery { return Set(t.entries.keys) }
            var ids = t.unrouted.union(t.active)
            for c in change.changes { if let m = t.matchedBy[c.documentID] { ids.formUnion(m) } }
            for (_, route) in found { if let r = t.routes[route] { ids.formUnion(r) } }
            return ids
        }
        for id in candidates {
            guard let entry = entries[id] else { continue }
            entry.state.changed(entry.query, change)
        }
    }
}

extension DatabaseCore {
    /// Whether one document matches a full-text search of the index `name`, found by indexing
    /// the document alone in memory with the index's analyzer.
    func fullTextMatches(_ row: QueryRow, index name: String, query: QueryExpression, parameters: [String: JSONValue]) throws -> Bool {
        guard let index = parts.queries.indexSet.withLock({ $0.indexes.first { $0.name == name } }), let analyzer = index.analyzer else {
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
        if let cached = parts.queries.liveRows.withLock({ c in c.sequence == sequence ? c.rows[id] : nil }) { return cached }
        let row = try read { tx -> QueryRow? in
            guard let meta = try self.meta(tx, id: Array(id.utf8)), !meta.flags.contains(.deleted) else { return nil }
            return try queryRow(tx, id: id, meta: meta)
        }
        parts.queries.liveRows.withLock { c in
            if c.sequence != sequence { c = (sequence, [:]) }
            c.rows[id] = .some(row)
        }
        return row
    }
}
