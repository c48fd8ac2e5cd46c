/// A value index's entry values read straight from a stored body's bytes: when every indexed
/// and covering expression is a property path of names, one probe of the body
/// (``JSONParser/probe(_:level:into:)``) finds their values without parsing the body into
/// properties or making a row, and the index's condition, if any, is decided from the same
/// bytes by a ``BodyPrefilter``. Anything the probe cannot give exactly as an evaluation of the
/// expressions would (an array or object value, a name spelled otherwise, a condition the
/// prefilter cannot decide) is left to that evaluation, so the entries are the same either way.
///
/// ```swift
/// let probe = IndexValueProbe(index)          // nil: the index needs evaluation
/// switch try probe?.values(body) {
/// case .values(let v)?: entry = try IndexEntry(values: v, keyCount: index.expressions.count, documentIDBytes: id)
/// case .noEntry?: entry = nil
/// default: entry = try index.entry(for: row)
/// }
/// ```
///
/// - Note: Not thread-safe (it keeps what it probed last); one build reader uses one.
final class IndexValueProbe {
    enum Outcome {
        /// The values of the indexed expressions, then the covering ones (nil: MISSING).
        case values([JSONValue?])
        /// The document has no entry: its condition is not TRUE, or its first value is MISSING.
        case noEntry
        /// Only an evaluation of the expressions can tell.
        case undecided
    }

    private let level: JSONParser.ProbeLevel
    /// The probe slot of each value, in entry order.
    private let slots: [Int]
    private let condition: BodyPrefilter?
    private var found: [JSONParser.Probed] = []

    /// A probe for `index`; nil when one of its expressions is not a property path of names, or
    /// it has a condition no prefilter can be made for.
    init?(_ index: CompiledIndex) {
        guard index.definition.kind == .value else { return nil }
        var paths: [[String]] = []
        var slotOf: [[String]: Int] = [:]
        var slots: [Int] = []
        for e in index.expressions + index.coveringExpressions {
            guard case .property(let path) = e, let names = path.probedNames else { return nil }
            if let s = slotOf[names] {
                slots.append(s)
            } else {
                slotOf[names] = paths.count
                slots.append(paths.count)
                paths.append(names)
            }
        }
        if let c = index.condition {
            guard let prefilter = BodyPrefilter(c, parameters: [:]) else { return nil }
            condition = prefilter
        } else {
            condition = nil
        }
        level = JSONParser.ProbeLevel(paths: paths)
        self.slots = slots
    }

    /// The entry values of the document whose stored body is `body`.
    ///
    /// - Throws: ``SetteeError/Code/invalidJSON`` when the body is not a JSON object or a value
    ///   probed is malformed (an evaluation would fail too).
    func values(_ body: UnsafeRawBufferPointer) throws(SetteeError) -> Outcome {
        if let condition {
            switch try condition.admission(body) {
            case .rejected: return .noEntry
            case .undecided: return .undecided
            case .matches: break
            }
        }
        try JSONParser.probe(body, level: level, into: &found)
        var values: [JSONValue?] = []
        values.reserveCapacity(slots.count)
        for s in slots {
            switch found[s] {
            case .missing: values.append(nil)
            case .scalar(let v): values.append(v)
            case .array, .object, .ambiguous: return .undecided
            }
        }
        guard case .some(.some) = values.first else { return .noEntry }
        return .values(values)
    }
}
