import Foundation
@_spi(Replication) import Settee

/// The value indexes the document rounds keep on the database they crash, how they change
/// them (each change a `createIndex` or a `deleteIndex`), and how they check them after a
/// recovery.
///
/// Three indexes are made when a database is new (and again whenever one is missing when the
/// workload starts): `by-n` (`n`, a plain one), `kind-rank` (`kind`, `rank`) and `active-rank`
/// (`rank` where `active = TRUE`, a partial one). A fourth, `extra`, has two definitions that
/// replace each other (`nested.a`, `step`; or `step` where `nested.c = TRUE`). Mid-run changes
/// delete an index, delete and create it again (a new tree), create a missing one, or create one
/// under its name again (nothing to do when the definition is the same; a replacement, built
/// again in its tree, when it differs). A build's progress callback runs more workload steps
/// (writes while it is under way) and may cancel it; while it is under way no query may use the
/// index, and once `createIndex` returns its probe query must.
///
/// Each definition has a query that only it can serve (``Definition/membership``): its rows are
/// the index's entries. After a recovery every index must be there or not as the changes that
/// returned say (``IndexExpectation``), be ready, hold exactly the entries the documents make
/// (the entries computed here from the snapshot's bodies, which the round has already compared
/// with the reference), and give for a few generated queries (``queriesPerRecovery``, on indexes
/// drawn at random) what the same query gives when its condition is wrapped as
/// `(condition) OR FALSE`, which no index can serve.
package enum DocIndexes {
    /// One definition an index name may have.
    struct Definition: Sendable {
        let config: any IndexConfiguration
        /// What `explain()` prints after SCAN INDEX (or SEARCH FULL-TEXT INDEX) and the name.
        var explained: String {
            if let text = config as? FullTextIndexConfiguration {
                return "(" + text.expressions.joined(separator: ", ") + ")" + (text.language.map { " LANGUAGE \($0)" } ?? "")
                    + (text.ignoreAccents ? " IGNORING ACCENTS" : "")
            }
            return "(" + ((config as? ValueIndexConfiguration)?.expressions ?? []).joined(separator: ", ") + ")"
        }
        /// A query only this definition serves, whose rows are each indexed document's ID and
        /// values: the index's entries.
        let membership: String
        /// The values a live document's body gives the index, or nil when it is not in it.
        let entry: @Sendable ([String: JSONValue]) -> [JSONValue?]?
        /// Queries it serves, with constants from the documents.
        let queries: @Sendable (inout SplitMix, ValuePool) -> [GeneratedQuery]
    }

    /// The names the rounds use and their definitions (a change names one by its position).
    static let catalog: [(name: String, definitions: [Definition])] = [
        ("by-n", [Definition(
            config: ValueIndexConfiguration(["n"]),
            membership: "SELECT META().id, n FROM _ WHERE n IS NOT MISSING",
            entry: { b in b["n"].map { [$0] } },
            queries: { r, pool in [
                GeneratedQuery(select: "META().id, n", where: "n >= $lo AND n <= $hi",
                               parameters: pool.range("n", &r)),
                GeneratedQuery(select: "META().id, step", where: "n < $v",
                               tail: "ORDER BY n DESC, META().id DESC LIMIT \(1 + r.next(below: 12))",
                               parameters: ["v": pool.value("n", &r)]),
                GeneratedQuery(select: "META().id", where: "n BETWEEN $lo AND $hi", tail: "ORDER BY n, META().id",
                               parameters: pool.range("n", &r)),
            ] }
        )]),
        ("kind-rank", [Definition(
            config: ValueIndexConfiguration(["kind", "rank"]),
            membership: "SELECT META().id, kind, rank FROM _ WHERE kind IS NOT MISSING",
            entry: { b in b["kind"].map { [$0, b["rank"]] } },
            queries: { r, pool in [
                GeneratedQuery(select: "META().id, rank", where: "kind = $k", parameters: ["k": pool.value("kind", &r)]),
                GeneratedQuery(select: "META().id, step", where: "kind IN [$k1, $k2] AND rank >= $r",
                               parameters: ["k1": pool.value("kind", &r), "k2": pool.value("kind", &r), "r": pool.value("rank", &r)]),
                GeneratedQuery(select: "META().id, rank", where: "kind = $k",
                               tail: "ORDER BY rank DESC, META().id DESC LIMIT \(1 + r.next(below: 8))",
                               parameters: ["k": pool.value("kind", &r)]),
                GeneratedQuery(select: "META().id, kind", where: "kind = $k AND rank = $r",
                               parameters: ["k": pool.value("kind", &r), "r": pool.value("rank", &r)]),
                GeneratedQuery(select: "kind, rank, META().id", where: "kind > $k",
                               tail: "ORDER BY kind, rank, META().id LIMIT \(1 + r.next(below: 30))",
                               parameters: ["k": pool.value("kind", &r)]),
            ] }
        )]),
        ("active-rank", [Definition(
            config: ValueIndexConfiguration(["rank"], where: "active = TRUE"),
            membership: "SELECT META().id, rank FROM _ WHERE active = TRUE AND rank IS NOT MISSING",
            entry: { b in b["active"] == .bool(true) ? b["rank"].map { [$0] } : nil },
            queries: { r, pool in [
                GeneratedQuery(select: "META().id, kind", where: "active = TRUE AND rank BETWEEN $lo AND $hi",
                               parameters: pool.range("rank", &r)),
                GeneratedQuery(select: "META().id", where: "active = TRUE AND rank = $r", tail: "ORDER BY META().id",
                               parameters: ["r": pool.value("rank", &r)]),
                GeneratedQuery(select: "META().id, rank", where: "rank > $r AND active = TRUE",
                               tail: "ORDER BY rank DESC, META().id DESC LIMIT \(1 + r.next(below: 8))",
                               parameters: ["r": pool.value("rank", &r)]),
            ] }
        )]),
        // A full-text index over `kind`, in two definitions that replace each other. Every
        // string `kind` holds one of the searched words ("long …" for the long ones), so the
        // search lists exactly the documents in the index. Its queries cannot be compared
        // with `(condition) OR FALSE` (a search must be at the top of WHERE): the membership
        // search and `check()` cover it.
        ("words", [
            Definition(
                config: FullTextIndexConfiguration(["kind"]),
                membership: "SELECT META().id, kind FROM _ WHERE MATCH(words, 'task OR note OR event OR tâsk OR long')",
                entry: { b in if case .string? = b["kind"] { [b["kind"]] } else { nil } },
                queries: { _, _ in [] }
            ),
            Definition(
                config: FullTextIndexConfiguration(["kind"], ignoreAccents: true, language: "english"),
                membership: "SELECT META().id, kind FROM _ WHERE MATCH(words, 'task OR note OR event OR long')",
                entry: { b in if case .string? = b["kind"] { [b["kind"]] } else { nil } },
                queries: { _, _ in [] }
            ),
        ]),
        ("extra", [
            Definition(
                config: ValueIndexConfiguration(["nested.a", "step"]),
                membership: "SELECT META().id, nested.a, step FROM _ WHERE nested.a IS NOT MISSING",
                entry: { b in b["nested"]?.objectValue?["a"].map { [$0, b["step"]] } },
                queries: { r, pool in [
                    GeneratedQuery(select: "META().id, nested.a", where: "nested.a > $lo AND nested.a <= $hi",
                                   tail: "ORDER BY nested.a, step, META().id LIMIT \(1 + r.next(below: 10))",
                                   parameters: pool.range("nested.a", &r)),
                    GeneratedQuery(select: "META().id, length(text) AS length", where: "nested.a = $a",
                                   parameters: ["a": pool.value("nested.a", &r)]),
                ] }
            ),
            Definition(
                config: ValueIndexConfiguration(["step"], where: "nested.c = TRUE"),
                membership: "SELECT META().id, step FROM _ WHERE nested.c = TRUE AND step IS NOT MISSING",
                entry: { b in b["nested"]?.objectValue?["c"] == .bool(true) ? b["step"].map { [$0] } : nil },
                queries: { r, pool in [
                    GeneratedQuery(select: "META().id, step", where: "nested.c = TRUE AND step >= $s",
                                   tail: "ORDER BY step DESC, META().id DESC LIMIT \(1 + r.next(below: 10))",
                                   parameters: ["s": pool.value("step", &r)]),
                    GeneratedQuery(select: "META().id", where: "nested.c = TRUE AND step IN [$s1, $s2]",
                                   parameters: ["s1": pool.value("step", &r), "s2": pool.value("step", &r)]),
                ] }
            ),
        ]),
    ]

    /// The indexes a new database gets.
    static let base = ["by-n", "kind-rank", "active-rank", "words"]

    static func definitions(_ name: String) -> [Definition] {
        catalog.first { $0.name == name }?.definitions ?? []
    }

    /// What the round found wrong with an index (as opposed to a failure the crash explains).
    struct Violation: Error, CustomStringConvertible { var description: String }

    // MARK: - Changes

    /// One change of the catalog: `createIndex` with one of the name's definitions, or
    /// `deleteIndex` (no definition).
    package struct Change: Equatable, CustomStringConvertible {
        package var name: String
        /// The definition created (its position among the name's), nil for a deletion.
        package var definition: Int?
        /// Whether the build's progress callback cancels it (the index is then removed).
        package var cancels = false

        package var description: String {
            definition.map { "create \(name) #\($0)\(cancels ? " (cancelled)" : "")" } ?? "delete \(name)"
        }

        /// The line the SIGKILL child says before making it.
        var message: String { "I \(name) \(definition.map(String.init) ?? "-") \(cancels ? 1 : 0)" }

        init(name: String, definition: Int?, cancels: Bool = false) {
            self.name = name
            self.definition = definition
            self.cancels = cancels
        }

        init?(message: String) {
            let parts = message.split(separator: " ")
            guard parts.count == 4, parts[0] == "I" else { return nil }
            self.init(name: String(parts[1]), definition: Int(parts[2]), cancels: parts[3] == "1")
        }
    }

    /// How a change ended.
    package enum Outcome: Equatable {
        /// `createIndex` or `deleteIndex` returned.
        case done
        /// The build was cancelled from its progress callback: the index is gone.
        case cancelled
    }

    /// Creations of the base indexes that `present` lacks.
    static func missingBase(present: [String]) -> [Change] {
        base.filter { !present.contains($0) }.map { Change(name: $0, definition: 0) }
    }

    /// A random change or two of one index, given the names present.
    static func midRun(present: [String], _ r: inout SplitMix) -> [Change] {
        let (name, definitions) = catalog[Int(r.next(below: UInt64(catalog.count)))]
        let create = Change(name: name, definition: Int(r.next(below: UInt64(definitions.count))), cancels: r.chance(10))
        guard present.contains(name) else { return [create] }
        switch r.next(below: 100) {
        case 0..<30: return [Change(name: name, definition: nil)]
        case 30..<70: return [Change(name: name, definition: nil), create]
        default: return [create]
        }
    }

    /// Makes `change`. A build calls `between` after each of its steps (more of the workload:
    /// writes while it is under way; false stops the build, which is then cancelled) and first
    /// checks that no query uses the index yet. Once a creation returns, the index must serve
    /// its membership query; once a deletion returns, no query may name it. Throws what the
    /// database throws (cancellation included, when `between` stopped it), ``Violation`` for a
    /// check that fails.
    static func apply(_ change: Change, on db: Database, between: () throws -> Bool) throws -> Outcome {
        let all = definitions(change.name)
        guard let n = change.definition else {
            try db.deleteIndex(forName: change.name)
            for d in all where try servedBy(db, d.membership, name: change.name) != nil {
                throw Violation(description: "index \(change.name) still serves queries after deleteIndex returned")
            }
            return .done
        }
        let definition = all[n]
        var failure: (any Error)?
        var cancelled = false
        do {
            try db.createIndex(definition.config, name: change.name) { _ in
                do {
                    if let used = try servedBy(db, definition.membership, name: change.name) {
                        failure = Violation(description: "index \(change.name) \(used) serves a query before its build finished")
                        return false
                    }
                    guard try between() else { return false }
                } catch {
                    failure = error
                    return false
                }
                cancelled = change.cancels
                return !cancelled
            }
        } catch {
            if let failure { throw failure }
            guard cancelled, let e = error as? SetteeError, e.code == .cancelled else { throw error }
            // Cancelled: the index is gone.
            if try db.indexes.contains(change.name) || servedBy(db, definition.membership, name: change.name) != nil {
                throw Violation(description: "index \(change.name) is still there after its build was cancelled")
            }
            return .cancelled
        }
        if let failure { throw failure }
        let used = try servedBy(db, definition.membership, name: change.name)
        guard used == definition.explained else {
            throw Violation(description: "index \(change.name) \(definition.explained): after createIndex returned, its query "
                            + (used.map { "is served by \($0)" } ?? "reads every document"))
        }
        return .done
    }

    /// What `explain()` says of `sql`: the expressions of index `name` when it is scanned, nil
    /// when it is not.
    static func servedBy(_ db: Database, _ sql: String, name: String) throws -> String? {
        let plan: String
        do {
            plan = try db.createQuery(sql).explain()
        } catch let e as SetteeError where e.code == .invalidParameter && sql.contains("MATCH(") {
            return nil   // a search has no plan without its ready full-text index
        }
        guard let first = plan.split(separator: "\n").first else { return nil }
        let search = "SEARCH FULL-TEXT INDEX \(name) "
        if first.hasPrefix(search + "(") { return String(first.dropFirst(search.count)) }
        guard first.hasPrefix("SCAN INDEX \(name) (") else { return nil }
        var rest = first.dropFirst("SCAN INDEX \(name) ".count)
        if rest.hasSuffix(" BACKWARDS") { rest = rest.dropLast(" BACKWARDS".count) }
        return String(rest)
    }

    // MARK: - Checks after a recovery

    /// What the checks of recovered databases' indexes covered.
    package struct Checked: CustomStringConvertible {
        package var indexes = 0
        package var entries = 0
        package var queries = 0

        mutating func add(_ other: Checked) {
            indexes += other.indexes
            entries += other.entries
            queries += other.queries
        }

        package var description: String {
            "indexes checked after recovery: \(indexes) (entries: \(entries)), queries read from an index and compared with a full scan: \(queries)"
        }
    }

    /// Checks the indexes of the reopened database `db`, whose documents `snapshot` read;
    /// `expected` says what each name may be and is left saying what was found. Throws
    /// ``Violation``.
    static func verify(_ db: Database, snapshot: DocSnapshot, expected: inout IndexExpectation, seed: UInt64) throws -> Checked {
        var checked = Checked()
        let names = try db.indexes
        for name in names where !catalog.contains(where: { $0.name == name }) {
            throw Violation(description: "after reopening, the database lists an index \(name) nobody created")
        }
        let pool = ValuePool(snapshot)
        var r = SplitMix(seed: seed)
        var present: [(name: String, definition: Definition, query: GeneratedQuery)] = []
        for (name, definitions) in catalog {
            // Which definition the index has, if any: the one whose query it serves.
            var found: Int?
            if names.contains(name) {
                var served: [String] = []
                for (i, d) in definitions.enumerated() {
                    guard let used = try servedBy(db, d.membership, name: name) else { continue }
                    served.append(used)
                    if used == d.explained { found = i }
                }
                guard found != nil else {
                    throw Violation(description: "after reopening, index \(name) is listed but "
                                    + (served.isEmpty ? "serves no query (never made ready)" : "is \(served[0]), which no change made"))
                }
            }
            let possible = expected.possible(name)
            guard possible.contains(found) else {
                func show(_ d: Int?) -> String { d.map { "\(name) #\($0)" } ?? "none" }
                throw Violation(description: "after reopening, index \(name): found \(show(found)), expected "
                                + possible.map(show).sorted().joined(separator: " or ") + " (the changes that returned say so)")
            }
            expected.settle(name, found)
            guard let found else { continue }
            let definition = definitions[found]
            checked.indexes += 1
            // Every entry the documents make, with its values, and no other.
            var want: [String: [JSONValue?]] = [:]
            for (id, d) in snapshot.documents where !d.isDeleted {
                if let body = d.body, let values = definition.entry(body) { want[id] = values }
            }
            var got: [String: [JSONValue?]] = [:]
            for row in try db.createQuery(definition.membership).execute() {
                guard let id = row.string(at: 0) else { throw Violation(description: "index \(name): a row without an ID") }
                let values = (1 ..< row.count).map { row.value(at: $0) }
                if got.updateValue(values, forKey: id) != nil {
                    throw Violation(description: "index \(name) \(definition.explained): \(DocSnapshot.short(id)) is in it twice")
                }
            }
            if got != want {
                let id = Set(got.keys).union(want.keys).sorted().first { got[$0] != want[$0] }!
                throw Violation(description: "index \(name) \(definition.explained): \(got.count) entries, the documents make \(want.count); "
                                + "\(DocSnapshot.short(id)): found \(show(got[id])), expected \(show(want[id]))")
            }
            checked.entries += got.count
            let queries = definition.queries(&r, pool)
            if !queries.isEmpty { present.append((name, definition, queries[Int(r.next(below: UInt64(queries.count)))])) }
        }
        // A few generated queries (on indexes drawn at random) against a full scan: each full
        // scan reads every document, the round's most expensive check.
        r.shuffle(&present)
        for (name, definition, q) in present.prefix(queriesPerRecovery) {
            try compare(q, on: db, name: name, definition: definition)
            checked.queries += 1
        }
        return checked
    }

    /// How many generated queries each recovery compares with a full scan.
    static let queriesPerRecovery = 2

    private static func show(_ values: [JSONValue?]?) -> String {
        guard let values else { return "no entry" }
        let text = "[" + values.map { $0.map { "\($0)" } ?? "MISSING" }.joined(separator: ", ") + "]"
        return text.count > 80 ? text.prefix(76) + "…]" : text
    }

    /// Runs `q` (which index `name` must serve) and its reference (which must read every
    /// document) and compares their rows: in order when the query orders them completely, as
    /// multisets otherwise.
    static func compare(_ q: GeneratedQuery, on db: Database, name: String, definition: Definition) throws {
        let indexed = try db.createQuery(q.indexed)
        let reference = try db.createQuery(q.reference)
        let parameters = Parameters(q.parameters)
        indexed.parameters = parameters
        reference.parameters = parameters
        guard try servedBy(db, q.indexed, name: name) != nil else {
            throw Violation(description: "index \(name) \(definition.explained) does not serve \(q.indexed): \(try indexed.explain())")
        }
        guard try reference.explain().hasPrefix("SCAN ALL DOCUMENTS") else {
            throw Violation(description: "the reference query \(q.reference) reads an index: \(try reference.explain())")
        }
        func rows(_ query: Query) throws -> [[JSONValue?]] {
            try query.execute().allResults().map { r in (0 ..< r.count).map { r.value(at: $0) } }
        }
        var a = try rows(indexed), b = try rows(reference)
        if !q.ordered {
            let key: ([JSONValue?]) -> String = { $0.map { $0.map { "\($0)" } ?? "MISSING" }.joined(separator: "\u{1}") }
            a.sort { key($0) < key($1) }
            b.sort { key($0) < key($1) }
        }
        guard a == b else {
            let i = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
            throw Violation(description: "index \(name) \(definition.explained): \(q.indexed) with \(q.parameters.sorted { $0.key < $1.key }.map { "$\($0.key) = \(show([$0.value]))" }.joined(separator: ", ")) "
                            + "gives \(a.count) rows, the full scan \(b.count); row \(i): \(i < a.count ? show(a[i]) : "none") vs \(i < b.count ? show(b[i]) : "none")")
        }
    }
}

/// A query an index serves, and the same query for a full scan.
struct GeneratedQuery {
    var select: String
    var `where`: String
    var tail = ""
    var parameters: [String: JSONValue]

    /// Whether its ORDER BY orders the rows completely (it ends with the document ID).
    var ordered: Bool { tail.contains("META().id") }
    var indexed: String { "SELECT \(select) FROM _ WHERE \(`where`) \(tail)" }
    /// `(condition) OR FALSE`: the same rows, and no conjunct an index could serve.
    var reference: String { "SELECT \(select) FROM _ WHERE (\(`where`)) OR FALSE \(tail)" }
}

/// Values of the properties the indexes read, from the live documents, to make query
/// constants of: mostly values documents hold, sometimes others.
struct ValuePool {
    var values: [String: [JSONValue]] = [:]

    init(_ snapshot: DocSnapshot) {
        for (_, d) in snapshot.documents.sorted(by: { $0.key < $1.key }) where !d.isDeleted {
            guard let body = d.body else { continue }
            for key in ["n", "kind", "rank", "step"] { if let v = body[key] { values[key, default: []].append(v) } }
            if let a = body["nested"]?.objectValue?["a"] { values["nested.a", default: []].append(a) }
        }
    }

    func value(_ property: String, _ r: inout SplitMix) -> JSONValue {
        let known = values[property] ?? []
        switch r.next(below: 100) {
        case 0..<80 where !known.isEmpty: return known[Int(r.next(below: UInt64(known.count)))]
        case 0..<85: return .int(Int64(r.next(below: 12)))
        case 85..<90: return .string(["note", "t", "zzz", ""][Int(r.next(below: 4))])
        case 90..<95: return .null
        default: return .double(Double(Int64(bitPattern: r.next())) / 3)
        }
    }

    /// `$lo` and `$hi` (most often in that order).
    func range(_ property: String, _ r: inout SplitMix) -> [String: JSONValue] {
        var (lo, hi) = (value(property, &r), value(property, &r))
        if r.chance(85), (try? lo.isGreater(than: hi)) == true { swap(&lo, &hi) }
        return ["lo": lo, "hi": hi]
    }
}

extension JSONValue {
    /// Whether `self` sorts after `other` in a query's order (numbers by value, else by type).
    func isGreater(than other: JSONValue) throws -> Bool {
        switch (self, other) {
        case (.int(let a), .int(let b)): return a > b
        case (.int(let a), .double(let b)): return Double(a) > b
        case (.double(let a), .int(let b)): return a > Double(b)
        case (.double(let a), .double(let b)): return a > b
        case (.string(let a), .string(let b)): return a > b
        default: return false
        }
    }
}

/// What the indexes of a crashed database may be after its recovery: per name, the definitions
/// it may have (nil: none), from the changes made since the last verification, those that
/// returned (durably) fixing it, one in flight or failed leaving it open.
package struct IndexExpectation {
    private var possibilities: [String: Set<Int?>] = [:]
    /// Changes that returned but may not be durable yet (the power-loss round without full
    /// sync), with the definition they left.
    private var pending: [(name: String, result: Int?)] = []
    private var inFlight: DocIndexes.Change?

    package init() {}

    /// What `name` may be.
    func possible(_ name: String) -> Set<Int?> { possibilities[name] ?? [nil] }

    private mutating func widen(_ name: String, _ d: Int?) {
        possibilities[name, default: [nil]].insert(d)
    }

    /// A change begins: the index may be as it was, or as the change leaves it.
    mutating func begin(_ c: DocIndexes.Change) {
        inFlight = c
        widen(c.name, c.definition)
        if c.cancels { widen(c.name, nil) }
    }

    /// A change returned (durably, or not yet).
    mutating func returned(_ c: DocIndexes.Change, _ outcome: DocIndexes.Outcome, durable: Bool = true) {
        inFlight = nil
        let result = outcome == .done ? c.definition : nil
        if durable && pending.isEmpty {
            possibilities[c.name] = [result]
        } else {
            widen(c.name, result)
            pending.append((c.name, result))
        }
    }

    /// A change failed (an injected fault, the power): it may have happened or not, or been
    /// undone.
    mutating func failed(_ c: DocIndexes.Change) {
        inFlight = nil
        widen(c.name, c.definition)
        widen(c.name, nil)
    }

    /// Everything written so far is durable.
    mutating func durable() {
        for p in pending { possibilities[p.name] = [p.result] }
        pending = []
        if let c = inFlight { begin(c) }
    }

    /// After a verification: what was found.
    mutating func settle(_ name: String, _ found: Int?) {
        possibilities[name] = [found]
        pending.removeAll { $0.name == name }
        inFlight = nil
    }
}
