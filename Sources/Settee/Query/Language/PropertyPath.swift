/// A path to a value inside a document, as Couchbase Lite's queries and indexes name one:
/// property names separated by dots, array elements by `[index]` (`list.id`, `tags[0]`,
/// `contacts[1].phones[0]`). A name holding `.`, `[`, `]` or `\` escapes it with a backslash
/// (`"a\\.b"` is the one property `a.b`).
///
/// A path that leads nowhere (a name an object lacks, an index past an array's end, a step into
/// a string or a number) gives MISSING (`nil`), which is not `null`: a document whose `title` is
/// `null` has a title; one without the property has none.
///
/// ```swift
/// let path = try PropertyPath("list.id")
/// let id = path.value(in: document.properties)   // nil when the document has no list.id
/// ```
///
/// - Note: A value type; safe to share between threads.
struct PropertyPath: Sendable, Hashable, CustomStringConvertible {
    /// One step of a path.
    enum Component: Sendable, Hashable {
        /// A property of an object.
        case name(String)
        /// An element of an array, counted from 0; a negative index counts from the end (`-1`
        /// is the last element).
        case index(Int)
        /// A property of an object, or the element at `index` (from 0) of an array: a Mango
        /// field's part that is a number (`favorites.3`), as CouchDB reads one.
        case nameOrIndex(String, index: Int)
    }

    /// The steps, outermost first.
    let components: [Component]

    /// For a covering query's reference to an index entry's value (``init(slot:)``), which
    /// value: rows read it from ``QueryRow/slots`` by position, not by name.
    let slot: Int?

    /// A path of the given steps (a slot's, with `slot`).
    init(components: [Component], slot: Int? = nil) {
        self.components = components
        self.slot = slot
    }

    /// The longest path accepted, in steps (a bound for hostile query text).
    static let maxComponents = 64

    /// The longest path a probe of stored bytes follows (``JSONParser/probe(_:level:into:)``).
    static let maxProbedNames = 16

    /// The member names of a path of names alone, which a probe of a body's bytes can follow;
    /// nil for a slot, the empty path, an array element or a path longer than
    /// ``maxProbedNames``.
    var probedNames: [String]? {
        guard slot == nil, !components.isEmpty, components.count <= Self.maxProbedNames else { return nil }
        var names: [String] = []
        names.reserveCapacity(components.count)
        for c in components {
            guard case .name(let n) = c else { return nil }
            names.append(n)
        }
        return names
    }

    /// Parses `text`.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` naming the position (in characters, from
    ///   0) of an empty name, an unclosed or non-numeric `[…]`, a dangling `\`, or a path of
    ///   more than ``maxComponents`` steps.
    init(_ text: String) throws(SetteeError) {
        var components: [Component] = []
        var name = ""
        var hasName = false
        let chars = Array(text)
        var i = 0
        func fail(_ what: String, at position: Int) -> SetteeError {
            SetteeError(.invalidParameter, "property path \"\(text)\": \(what) at position \(position)")
        }
        // NUL begins the names of index slots (``init(slot:)``), which no document path names.
        if let nul = text.firstIndex(of: "\u{0}") { throw fail("a NUL character", at: text.distance(from: text.startIndex, to: nul)) }
        func endName(at position: Int) throws(SetteeError) {
            guard hasName, !name.isEmpty else { throw fail("an empty property name", at: position) }
            components.append(.name(name))
            name = ""
            hasName = false
        }
        // After an index ("a[0].b", "a[0][1]") a name may not follow without a dot.
        var afterIndex = false
        while i < chars.count {
            let c = chars[i]
            switch c {
            case "\\":
                guard i + 1 < chars.count else { throw fail("a dangling escape", at: i) }
                guard !afterIndex else { throw fail("a name right after an index", at: i) }
                name.append(chars[i + 1])
                hasName = true
                i += 2
                continue
            case ".":
                if afterIndex {
                    afterIndex = false
                } else {
                    try endName(at: i)
                }
                // A path does not end with a dot: a name must follow.
                guard i + 1 < chars.count else { throw fail("an empty property name", at: i + 1) }
                hasName = true
            case "[":
                if !afterIndex {
                    // "[0]" alone indexes the document itself, which is an object: refused.
                    try endName(at: i)
                }
                guard let close = chars[(i + 1)...].firstIndex(of: "]") else { throw fail("an unclosed [", at: i) }
                let digits = String(chars[(i + 1) ..< close])
                guard !digits.isEmpty, digits.count <= 10, let n = Int(digits) else {
                    throw fail("an array index that is not an integer", at: i + 1)
                }
                components.append(.index(n))
                afterIndex = true
                i = close
            case "]":
                throw fail("a ] without [", at: i)
            default:
                guard !afterIndex else { throw fail("a name right after an index", at: i) }
                name.append(c)
                hasName = true
            }
            i += 1
            guard components.count <= Self.maxComponents else {
                throw fail("more than \(Self.maxComponents) steps", at: i)
            }
        }
        if !afterIndex { try endName(at: chars.count) }
        guard components.count <= Self.maxComponents else {
            throw fail("more than \(Self.maxComponents) steps", at: chars.count)
        }
        self.components = components
        slot = nil
    }


    /// The value the path leads to in a document's properties; nil (MISSING) when it leads
    /// nowhere.
    func value(in properties: [String: JSONValue]) -> JSONValue? {
        let first: String
        switch components.first {
        case .name(let n)?, .nameOrIndex(let n, _)?: first = n
        default: return nil
        }
        guard let start = properties[first] else { return nil }
        return Self.follow(components.dropFirst(), from: start)
    }

    /// The value the path leads to inside `value`; nil (MISSING) when it leads nowhere.
    func value(in value: JSONValue) -> JSONValue? {
        Self.follow(components[...], from: value)
    }

    private static func follow(_ steps: ArraySlice<Component>, from start: JSONValue) -> JSONValue? {
        var current = start
        for step in steps {
            switch (step, current) {
            case (.name(let n), .object(let o)), (.nameOrIndex(let n, _), .object(let o)):
                guard let next = o[n] else { return nil }
                current = next
            case (.nameOrIndex(_, let i), .array(let a)):
                guard i >= 0, i < a.count else { return nil }
                current = a[i]
            case (.index(let i), .array(let a)):
                let at = i < 0 ? a.count + i : i
                guard at >= 0, at < a.count else { return nil }
                current = a[at]
            default:
                return nil
            }
        }
        return current
    }

    /// The path as text, escaped so that parsing it gives this path again.
    var description: String {
        var out = ""
        for (i, c) in components.enumerated() {
            switch c {
            case .name(let n), .nameOrIndex(let n, _):
                // A Mango field's number reads back as a name: only Mango makes this step.
                if i > 0 { out.append(".") }
                for ch in n {
                    if ch == "." || ch == "[" || ch == "]" || ch == "\\" { out.append("\\") }
                    out.append(ch)
                }
            case .index(let n):
                out.append("[\(n)]")
            }
        }
        return out
    }
}
