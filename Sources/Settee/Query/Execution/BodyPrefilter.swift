/// A `WHERE` clause decided from a stored body's bytes, before the body is parsed into a row.
///
/// A scan that reads every document (or every document of some channels) probes each body for
/// the properties the clause compares with constants (``JSONParser/probe(_:paths:)``: scalars
/// only, nothing else built) and evaluates what it can of the clause on them with the
/// evaluator's own operators. A document whose clause is certainly not TRUE is rejected there:
/// no dictionary, no row. Everything else goes on to the full evaluation, which alone decides
/// what is kept, so this only ever saves work:
/// - a part it cannot decide (a function, arithmetic, an array's contents, two strings ordered
///   by ICU) leaves the answer unknown;
/// - it rejects a document only when the evaluation would give the same answer without
///   throwing: an `AND` stops at its first part that might throw (an unknown function, a
///   missing parameter) unless an earlier part was already FALSE, as the evaluator stops there.
///
/// ```swift
/// let prefilter = BodyPrefilter(statement.whereClause, parameters: parameters)
/// if let prefilter, try !prefilter.admits(body) { return }   // WHERE is not TRUE here
/// ```
///
/// Thread safety: not thread-safe; one scan uses it at a time (it keeps what it probed last).
final class BodyPrefilter {
    private indirect enum Node {
        /// A literal, MISSING (nil) or a parameter given for this execution.
        case constant(JSONValue?)
        /// A property of the document: an index into ``paths``.
        case path(Int)
        case compare(QueryExpression.Comparison, Node, Node)
        case test(QueryExpression.Test, Node)
        case between(Node, Node, Node)
        case inList(Node, [Node])
        case and([Node])
        case or([Node])
        case not(Node)
        /// Anything else: evaluated only by the query, and it may throw.
        case opaque
    }

    /// What evaluating a node gives: a value (nil is MISSING), or unknown here.
    private enum Outcome {
        case value(JSONValue?)
        /// `mayThrow`: the evaluation might throw instead of answering.
        case unknown(mayThrow: Bool)

        var mayThrow: Bool {
            if case .unknown(let m) = self { return m }
            return false
        }
    }

    /// The properties probed in each body.
    private let level: JSONParser.ProbeLevel
    private let root: Node
    /// What the last body probed holds at each path (reused: a scan probes millions).
    private var found: [JSONParser.Probed] = []

    /// A prefilter for `clause` with this execution's `parameters`; nil when it would decide
    /// nothing (no clause, or no property compared in a way it can evaluate).
    init?(_ clause: QueryExpression?, parameters: [String: JSONValue]) {
        guard let clause else { return nil }
        var paths: [[String]] = []
        var indexes: [[String]: Int] = [:]
        func compile(_ e: QueryExpression, depth: Int) -> Node {
            // A clause nested deeper than this is left to the evaluator.
            guard depth < 64 else { return .opaque }
            switch e {
            case .literal(let v): return .constant(v)
            case .missing: return .constant(nil)
            case .parameter(let name): return parameters[name].map { .constant($0) } ?? .opaque
            case .property(let path):
                guard let names = path.probedNames else { return .opaque }
                if let i = indexes[names] { return .path(i) }
                indexes[names] = paths.count
                paths.append(names)
                return .path(paths.count - 1)
            case .compare(let op, let a, let b): return .compare(op, compile(a, depth: depth + 1), compile(b, depth: depth + 1))
            case .test(let t, let a): return .test(t, compile(a, depth: depth + 1))
            case .between(let a, let low, let high):
                return .between(compile(a, depth: depth + 1), compile(low, depth: depth + 1), compile(high, depth: depth + 1))
            case .in(let a, let list): return .inList(compile(a, depth: depth + 1), list.map { compile($0, depth: depth + 1) })
            case .and(let terms): return .and(terms.map { compile($0, depth: depth + 1) })
            case .or(let terms): return .or(terms.map { compile($0, depth: depth + 1) })
            case .not(let a): return .not(compile(a, depth: depth + 1))
            default: return .opaque
            }
        }
        let root = compile(clause, depth: 0)
        guard !paths.isEmpty else { return nil }
        if case .opaque = root { return nil }
        self.level = JSONParser.ProbeLevel(paths: paths)
        self.root = root
    }

    /// What the prefilter says of one document.
    enum Admission {
        /// The clause is not TRUE for it, and evaluating it would not throw.
        case rejected
        /// The clause is TRUE for it, and evaluating it would not throw: the row needs no
        /// evaluation, nor the properties only the clause reads.
        case matches
        /// Only the evaluator can tell.
        case undecided
    }

    /// What the clause is for the document whose stored body is `body`.
    ///
    /// - Throws: ``SetteeError/Code/invalidJSON`` when the body is not a JSON object or a value
    ///   probed is malformed (a parse of it would fail too).
    func admission(_ body: UnsafeRawBufferPointer) throws(SetteeError) -> Admission {
        try JSONParser.probe(body, level: level, into: &found)
        switch try evaluate(root, found) {
        case .value(let v): return v.isTrue ? .matches : .rejected
        case .unknown: return .undecided
        }
    }

    /// Whether the clause may be TRUE for the document whose stored body is `body`
    /// (``admission(_:)`` is not ``Admission/rejected``).
    func admits(_ body: UnsafeRawBufferPointer) throws(SetteeError) -> Bool {
        try admission(body) != .rejected
    }

    private func evaluate(_ node: Node, _ found: [JSONParser.Probed]) throws(SetteeError) -> Outcome {
        switch node {
        case .constant(let v):
            return .value(v)
        case .path(let i):
            switch found[i] {
            case .missing: return .value(nil)
            case .scalar(let v): return .value(v)
            // A container's truth depends on what it holds, which was not read.
            case .array, .object, .ambiguous: return .unknown(mayThrow: false)
            }
        case .opaque:
            return .unknown(mayThrow: true)
        case .compare(let op, let a, let b):
            let x = operand(a, found), y = operand(b, found)
            guard case .known(let u, let uHolds) = x, case .known(let v, let vHolds) = y else {
                return .unknown(mayThrow: x.mayThrow || y.mayThrow)
            }
            return try compare(op, u, uHolds, v, vHolds)
        case .test(let t, let a):
            let x = operand(a, found)
            guard case .known(let v, _) = x else { return .unknown(mayThrow: x.mayThrow) }
            switch t {
            case .isNull: return .value(v.map { .bool($0 == .null) })
            case .isNotNull: return .value(v.map { .bool($0 != .null) })
            case .isMissing: return .value(.bool(v == nil))
            case .isNotMissing: return .value(.bool(v != nil))
            case .isValued: return .value(.bool(v != nil && v != .null))
            case .isNotValued: return .value(.bool(v == nil || v == .null))
            }
        case .between(let a, let low, let high):
            let x = operand(a, found), l = operand(low, found), h = operand(high, found)
            guard case .known(let v, let vHolds) = x, case .known(let lv, let lHolds) = l, case .known(let hv, let hHolds) = h else {
                return .unknown(mayThrow: x.mayThrow || l.mayThrow || h.mayThrow)
            }
            let above = try compare(.greaterOrEqual, v, vHolds, lv, lHolds)
            let below = try compare(.lessOrEqual, v, vHolds, hv, hHolds)
            guard case .value(let p) = above, case .value(let q) = below else {
                return .unknown(mayThrow: above.mayThrow || below.mayThrow)
            }
            return .value(QueryExpression.and(p, q))
        case .inList(let a, let list):
            let x = operand(a, found)
            // Unknown here, the value may be one the evaluator goes on to compare with the
            // items, evaluating them: any of them that may throw may throw then.
            guard case .known(let v, let vHolds) = x else {
                return .unknown(mayThrow: x.mayThrow || list.contains { operand($0, found).mayThrow })
            }
            guard let v else { return .value(nil) }
            if v == .null { return .value(.null) }
            var sawNull = false
            var unknown = false
            for item in list {
                let y = operand(item, found)
                guard case .known(let w, let wHolds) = y else {
                    // The evaluator evaluates the items in order until one is equal.
                    if y.mayThrow { return .unknown(mayThrow: true) }
                    unknown = true
                    continue
                }
                switch try compare(.equal, v, vHolds, w, wHolds) {
                case .value(.bool(true)?): return .value(.bool(true))
                case .value(.null?): sawNull = true
                case .value: break
                case .unknown(let mayThrow):
                    if mayThrow { return .unknown(mayThrow: true) }
                    unknown = true
                }
            }
            if unknown { return .unknown(mayThrow: false) }
            return .value(sawNull ? .null : .bool(false))
        case .and(let terms):
            return try evaluate(terms, found, from: .bool(true), until: .bool(false), QueryExpression.and)
        case .or(let terms):
            return try evaluate(terms, found, from: .bool(false), until: .bool(true), QueryExpression.or)
        case .not(let a):
            let inner = try evaluate(a, found)
            guard case .value(let v) = inner else { return inner }
            guard let v else { return .value(nil) }
            guard let t = QueryExpression.truthiness(v) else { return .value(.null) }
            return .value(.bool(!t))
        }
    }

    /// `AND` (`OR`) of `terms` as the evaluator reads them: in order, joined by `join`, stopping
    /// at the first that makes the result `decisive` (FALSE for AND); a term that might throw is
    /// reached unless one before it was decisive.
    private func evaluate(_ terms: [Node], _ found: [JSONParser.Probed], from start: JSONValue, until decisive: JSONValue,
                          _ join: (JSONValue?, JSONValue?) -> JSONValue?) throws(SetteeError) -> Outcome {
        var result: JSONValue? = start
        var unknown = false
        for t in terms {
            switch try evaluate(t, found) {
            case .value(let v):
                result = join(result, v)
                if result == decisive { return .value(result) }
            case .unknown(let mayThrow):
                if mayThrow { return .unknown(mayThrow: true) }
                unknown = true
            }
        }
        return unknown ? .unknown(mayThrow: false) : .value(result)
    }

    /// An operand of a comparison: a constant, or what the body holds at a path, where an array
    /// or an object stands as an empty one of its kind (`holdsContainer`): its type alone
    /// decides a comparison with a scalar.
    private enum Operand {
        case known(JSONValue?, holdsContainer: Bool)
        case unknown(mayThrow: Bool)

        var mayThrow: Bool {
            if case .unknown(let m) = self { return m }
            return false
        }
    }

    private func operand(_ node: Node, _ found: [JSONParser.Probed]) -> Operand {
        switch node {
        case .constant(let v): return .known(v, holdsContainer: false)
        case .path(let i):
            switch found[i] {
            case .missing: return .known(nil, holdsContainer: false)
            case .scalar(let v): return .known(v, holdsContainer: false)
            case .array: return .known(.array([]), holdsContainer: true)
            case .object: return .known(.object([:]), holdsContainer: true)
            case .ambiguous: return .unknown(mayThrow: false)
            }
        case .opaque: return .unknown(mayThrow: true)
        // An operator as an operand (`(a = 1) = true`) is left to the evaluator.
        default: return .unknown(mayThrow: false)
        }
    }

    /// The evaluator's comparison where its answer does not depend on what was not read, and
    /// cannot throw: not two containers (one stands for contents unread), not two strings
    /// ordered (ICU's collator, which can fail).
    private func compare(_ op: QueryExpression.Comparison, _ x: JSONValue?, _ xHolds: Bool,
                         _ y: JSONValue?, _ yHolds: Bool) throws(SetteeError) -> Outcome {
        let xContainer = xHolds || x?.isContainer == true, yContainer = yHolds || y?.isContainer == true
        if (xHolds || yHolds) && xContainer && yContainer { return .unknown(mayThrow: false) }
        if op != .equal && op != .notEqual, case .string? = x, case .string? = y { return .unknown(mayThrow: true) }
        if op != .equal && op != .notEqual && xContainer && yContainer { return .unknown(mayThrow: true) }
        return .value(try QueryExpression.compare(op, x, y))
    }
}

extension JSONValue {
    fileprivate var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }
}
