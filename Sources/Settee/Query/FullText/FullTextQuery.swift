/// A parsed full-text match query: the text a user passes to Couchbase Lite's
/// `FullTextFunction.match(index:query:)`, as a tree of terms, prefixes, phrases and the
/// operators between them.
///
/// ```swift
/// let analyzer = FullTextAnalyzer(language: "english")
/// let query = try FullTextQuery("running (shoes OR boots) NOT red", analyzer: analyzer)
/// print(query)   // (AND run (NOT (OR shoe boot) red)): NOT binds tighter than AND
/// ```
///
/// ## Syntax (SQLite FTS's enhanced query syntax, as Couchbase Lite users write it)
///
/// - Words separated by spaces must all be present (an implicit AND): `red shoes`.
/// - `AND`, `OR` and `NOT` in capitals are operators; in lowercase they are words (which, in
///   English, are stop words). `NOT` is binary, "the left side but not the right":
///   `shoes NOT red`. A query cannot start with `NOT`: there is no "every document" to take
///   from.
/// - Precedence: NOT binds tighter than AND, AND tighter than OR:
///   `a OR b c NOT d` is `a OR (b AND (c NOT d))`. Parentheses group: `(a OR b) c`.
/// - `data*` matches every term that starts with "data": the prefix is folded (case, accents)
///   but neither stemmed nor checked against stop words, because it is not a whole word.
///   Since the index stores stems, `running*` does not find "running" (stored as "run");
///   `run*` does.
/// - `"exact phrase"` matches the words in that order, next to each other; stop words in a
///   phrase stand for one word each ("state of the art" needs "art" three words after
///   "state"). A word of a phrase may be a prefix: `"data bas*"`. Typographic quotes “ ” work
///   as well as ".
/// - A word the tokenizer splits ("e-mail", "O2/O3", "東京") is the phrase of its parts.
/// - Terms go through the index's ``FullTextAnalyzer``: case and accent folding, stop words,
///   stemming. A stop word (or a word longer than the tokenizer's limit) is left out of the
///   query as if it were not written: `the cat` is `cat`; `cat OR the` is `cat`;
///   `cat NOT the` is `cat`; `the NOT cat` has nothing left to take from and matches
///   nothing. A query made only of such words has no term and matches no document (``root``
///   is nil); it is not an error.
/// - Not supported, and read as words and separators instead: `NEAR`, column filters
///   (`title:shoe` is the phrase "title shoe"), `-word` and `+word` (the sign is a separator).
///
/// ## Errors and limits
///
/// ``SetteeError/Code/invalidParameter``, with the position (counted in Unicode scalars
/// from 0) where the problem is: an empty query, unbalanced parentheses, empty parentheses,
/// an operator without an operand on either side, an unterminated or empty phrase, a prefix
/// without letters (`*`), a query longer than ``maximumLength`` characters, parentheses
/// nested deeper than ``maximumDepth``, a phrase spanning more than ``maximumPhraseSpan``
/// words. The limits bound the parser's stack and the evaluator's work whatever the input.
///
/// - Note: A value type; safe to share between threads.
struct FullTextQuery: Sendable, Hashable, CustomStringConvertible {
    /// The longest query, in Unicode scalars.
    ///
    /// ```swift
    /// print(FullTextQuery.maximumLength)   // 10000
    /// ```
    static let maximumLength = 10_000
    /// The deepest nesting of parentheses.
    ///
    /// ```swift
    /// print(FullTextQuery.maximumDepth)   // 64
    /// ```
    static let maximumDepth = 64
    /// The most words (positions, stop words included) a phrase may span, first to last; it
    /// must stay below ``FullTextAnalyzer/fieldPositionGap`` so no phrase spans two fields.
    ///
    /// ```swift
    /// print(FullTextQuery.maximumPhraseSpan)   // 64
    /// ```
    static let maximumPhraseSpan = 64

    /// One node of a query tree. ``and(_:)`` and ``or(_:)`` have at least two children and no
    /// child of their own kind (they are flattened); a ``phrase(_:)`` has at least two
    /// elements, the first at offset 0.
    ///
    /// ```swift
    /// let node: FullTextQuery.Node = .and([.term("run"), .prefix("shoe")])
    /// ```
    indirect enum Node: Sendable, Hashable, CustomStringConvertible {
        /// Documents with this (analyzed) term.
        case term(String)
        /// Documents with a term starting with this (folded, unstemmed) text.
        case prefix(String)
        /// Documents where the elements occur at their offsets from one another.
        case phrase([PhraseElement])
        /// Documents every child matches.
        case and([Node])
        /// Documents at least one child matches.
        case or([Node])
        /// Documents the first node matches and the second does not.
        case not(Node, excluding: Node)

        /// An S-expression, for tests and debugging: `(AND run (OR shoe boot))`, a phrase as
        /// `"state _ _ art"` with one `_` per skipped position.
        ///
        /// ```swift
        /// print(FullTextQuery.Node.prefix("data"))   // data*
        /// ```
        var description: String {
            switch self {
            case .term(let term): return term
            case .prefix(let prefix): return prefix + "*"
            case .phrase(let elements):
                var parts: [String] = []
                var expected = 0
                for element in elements {
                    while expected < element.offset { parts.append("_"); expected += 1 }
                    parts.append(element.isPrefix ? element.term + "*" : element.term)
                    expected = element.offset + 1
                }
                return "\"" + parts.joined(separator: " ") + "\""
            case .and(let children): return "(AND " + children.map(\.description).joined(separator: " ") + ")"
            case .or(let children): return "(OR " + children.map(\.description).joined(separator: " ") + ")"
            case .not(let positive, let negative): return "(NOT \(positive) \(negative))"
            }
        }
    }

    /// One word of a phrase: a term (or a prefix) and its position relative to the first.
    ///
    /// ```swift
    /// let art = FullTextQuery.PhraseElement(term: "art", isPrefix: false, offset: 3)
    /// ```
    struct PhraseElement: Sendable, Hashable {
        /// The analyzed term, or the folded prefix.
        var term: String
        /// Whether ``term`` is a prefix.
        var isPrefix: Bool
        /// Positions after the phrase's first word.
        var offset: Int
    }

    /// The query tree; nil when the query has no term (only stop words) and matches nothing.
    ///
    /// ```swift
    /// try FullTextQuery("the of", analyzer: analyzer).root   // nil
    /// ```
    let root: Node?

    /// A query built from a tree (the parser's output, or one made by code).
    ///
    /// ```swift
    /// let query = FullTextQuery(root: .or([.term("cat"), .term("dog")]))
    /// ```
    init(root: Node?) {
        self.root = root
    }

    /// Parses `text`, analyzing its words with the index's analyzer.
    ///
    /// ```swift
    /// let query = try FullTextQuery("\"new york\" OR nyc", analyzer: FullTextAnalyzer(language: "en"))
    /// ```
    ///
    /// - throws: ``SetteeError`` with ``SetteeError/Code/invalidParameter`` for a malformed
    ///   query, naming the position.
    /// - Complexity: O(n) in the length of `text`.
    init(_ text: String, analyzer: FullTextAnalyzer) throws {
        // Reject a huge string before reading it scalar by scalar.
        if text.utf8.count > Self.maximumLength * 4 { throw Self.tooLong() }
        var parser = FullTextQueryParser(lexemes: try Self.lex(text), analyzer: analyzer)
        self.root = try parser.parseQuery()
    }

    /// The tree, or `(NOTHING)` for a query without terms.
    ///
    /// ```swift
    /// print(try FullTextQuery("a OR b*", analyzer: FullTextAnalyzer(language: nil)))   // (OR a b*)
    /// ```
    var description: String { root?.description ?? "(NOTHING)" }

    // MARK: - Lexing

    /// A piece of query text.
    ///
    /// ```swift
    /// // `data* OR "a b"` → .word("data", isPrefix: true), .or, .phrase("a b")
    /// ```
    fileprivate enum LexemeKind: Equatable {
        /// A bare word, its trailing `*`s removed when it is a prefix.
        case word(Substring, isPrefix: Bool)
        /// The text between quotes.
        case phrase(Substring)
        /// The operators and parentheses.
        case and, or, not, open, close
    }

    /// A lexeme and where it starts.
    ///
    /// ```swift
    /// Lexeme(kind: .open, position: 0)
    /// ```
    fileprivate struct Lexeme {
        var kind: LexemeKind
        /// Unicode scalars before it (the position error messages give).
        var position: Int
    }

    /// " and the typographic quotes “ ”, which phones type by default.
    ///
    /// ```swift
    /// FullTextQuery.isQuote("“")   // true
    /// ```
    fileprivate static func isQuote(_ s: Unicode.Scalar) -> Bool {
        s == "\"" || s == "\u{201C}" || s == "\u{201D}"
    }

    /// Spaces between query words (Unicode White_Space).
    ///
    /// ```swift
    /// FullTextQuery.isWhitespace("\u{3000}")   // true: the ideographic space
    /// ```
    fileprivate static func isWhitespace(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x80 ? (s == " " || (s.value >= 0x09 && s.value <= 0x0D)) : s.properties.isWhitespace
    }

    /// Splits the query into words, phrases, operators and parentheses, counting scalars (and
    /// stopping at ``maximumLength``).
    ///
    /// ```swift
    /// try FullTextQuery.lex("a OR \"b c\"")   // word a, OR, phrase "b c"
    /// ```
    fileprivate static func lex(_ text: String) throws -> [Lexeme] {
        let scalars = text.unicodeScalars
        var lexemes: [Lexeme] = []
        var index = scalars.startIndex
        var position = 0
        /// One scalar on; throws once the query is too long.
        ///
        /// ```swift
        /// try advance()   // past a "("
        /// ```
        func advance() throws {
            index = scalars.index(after: index)
            position += 1
            if position > maximumLength { throw tooLong() }
        }
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let start = position
            if isWhitespace(scalar) {
                try advance()
            } else if scalar == "(" {
                lexemes.append(Lexeme(kind: .open, position: start))
                try advance()
            } else if scalar == ")" {
                lexemes.append(Lexeme(kind: .close, position: start))
                try advance()
            } else if isQuote(scalar) {
                try advance()
                let contentStart = index
                while index < scalars.endIndex && !isQuote(scalars[index]) { try advance() }
                guard index < scalars.endIndex else {
                    throw SetteeError(.invalidParameter, "full-text query: the phrase at position \(start) has no closing quote")
                }
                let content = Substring(scalars[contentStart..<index])
                try advance()
                lexemes.append(Lexeme(kind: .phrase(content), position: start))
            } else {
                let wordStart = index
                while index < scalars.endIndex {
                    let s = scalars[index]
                    if isWhitespace(s) || s == "(" || s == ")" || isQuote(s) { break }
                    try advance()
                }
                let word = Substring(scalars[wordStart..<index])
                let kind: LexemeKind
                switch word {
                case "AND": kind = .and
                case "OR": kind = .or
                case "NOT": kind = .not
                default:
                    var stem = word
                    while stem.unicodeScalars.last == "*" { stem = Substring(stem.unicodeScalars.dropLast()) }
                    kind = .word(stem, isPrefix: stem.unicodeScalars.count < word.unicodeScalars.count)
                }
                lexemes.append(Lexeme(kind: kind, position: start))
            }
        }
        return lexemes
    }

    /// The error of a query over ``maximumLength``.
    ///
    /// ```swift
    /// throw FullTextQuery.tooLong()
    /// ```
    fileprivate static func tooLong() -> SetteeError {
        SetteeError(.invalidParameter, "full-text query longer than \(maximumLength) characters")
    }
}

// MARK: - Parsing

/// Recursive descent over the lexemes: one function per precedence level, recursion only
/// into parentheses (bounded by ``FullTextQuery/maximumDepth``), loops for chains of
/// operators, so the stack is bounded whatever the query.
///
/// ```swift
/// var parser = FullTextQueryParser(lexemes: try FullTextQuery.lex(text), analyzer: analyzer)
/// let root = try parser.parseQuery()
/// ```
///
/// - Note: A value type used by one parse.
private struct FullTextQueryParser {
    /// The tree the parser builds.
    typealias Node = FullTextQuery.Node
    /// The query's lexemes.
    let lexemes: [FullTextQuery.Lexeme]
    /// Turns words into terms.
    let analyzer: FullTextAnalyzer
    /// The next lexeme.
    var index = 0

    /// A parser at the first lexeme.
    ///
    /// ```swift
    /// var parser = FullTextQueryParser(lexemes: lexemes, analyzer: analyzer)
    /// ```
    init(lexemes: [FullTextQuery.Lexeme], analyzer: FullTextAnalyzer) {
        self.lexemes = lexemes
        self.analyzer = analyzer
    }

    /// The next lexeme, not consumed; nil at the end.
    var peek: FullTextQuery.Lexeme? { index < lexemes.count ? lexemes[index] : nil }

    /// An ``SetteeError/Code/invalidParameter`` error about the query.
    ///
    /// ```swift
    /// throw FullTextQueryParser.error("unexpected ')' at position 3")
    /// ```
    static func error(_ message: String) -> SetteeError {
        SetteeError(.invalidParameter, "full-text query: " + message)
    }

    /// An operator's name as written.
    ///
    /// ```swift
    /// FullTextQueryParser.name(.and)   // "AND"
    /// ```
    static func name(_ kind: FullTextQuery.LexemeKind) -> String {
        switch kind {
        case .and: "AND"
        case .or: "OR"
        case .not: "NOT"
        default: ""
        }
    }

    /// Whether `lexeme` can start an operand (and so continue an implicit AND): a word, a
    /// phrase or '('.
    ///
    /// ```swift
    /// FullTextQueryParser.startsOperand(nil)   // false: the query ended
    /// ```
    static func startsOperand(_ lexeme: FullTextQuery.Lexeme?) -> Bool {
        switch lexeme?.kind {
        case .word, .phrase, .open: true
        default: false
        }
    }

    /// The whole query: an OR expression and nothing after it.
    ///
    /// ```swift
    /// let root = try parser.parseQuery()   // nil for a query of stop words
    /// ```
    mutating func parseQuery() throws -> Node? {
        guard !lexemes.isEmpty else { throw Self.error("the query is empty") }
        let root = try parseOr(depth: 0)
        if let extra = peek {
            // Only a ')' can stop the top level early: anything else continues an implicit AND.
            throw Self.error("unexpected ')' at position \(extra.position)")
        }
        return root
    }

    /// Consumes an operator and checks that an operand follows it.
    ///
    /// ```swift
    /// try consumeOperator()   // "a AND" throws: no right operand
    /// ```
    mutating func consumeOperator() throws {
        let op = lexemes[index]
        index += 1
        guard Self.startsOperand(peek) else {
            throw Self.error("operator \(Self.name(op.kind)) at position \(op.position) has no right operand")
        }
    }

    /// `and (OR and)*`: the loosest level.
    ///
    /// ```swift
    /// // "a OR b c" → (OR a (AND b c))
    /// ```
    mutating func parseOr(depth: Int) throws -> Node? {
        var children = [try parseAnd(depth: depth)]
        while peek?.kind == .or {
            try consumeOperator()
            children.append(try parseAnd(depth: depth))
        }
        return Self.combine(children, or: true)
    }

    /// `not ((AND)? not)*`: explicit or implicit AND.
    ///
    /// ```swift
    /// // "a b AND c" → (AND a b c)
    /// ```
    mutating func parseAnd(depth: Int) throws -> Node? {
        var children = [try parseNot(depth: depth)]
        while true {
            if peek?.kind == .and {
                try consumeOperator()
            } else if !Self.startsOperand(peek) {
                break
            }
            children.append(try parseNot(depth: depth))
        }
        return Self.combine(children, or: false)
    }

    /// `primary (NOT primary)*`: the tightest operator, chains flattened.
    ///
    /// ```swift
    /// // "a NOT b NOT c" → (NOT a (OR b c))
    /// ```
    mutating func parseNot(depth: Int) throws -> Node? {
        var node = try parsePrimary(depth: depth)
        while peek?.kind == .not {
            try consumeOperator()
            let excluded = try parsePrimary(depth: depth)
            node = Self.exclude(excluded, from: node)
        }
        return node
    }

    /// A word, a phrase or a parenthesised query.
    ///
    /// ```swift
    /// // "(a OR b)" → (OR a b); "()" throws
    /// ```
    mutating func parsePrimary(depth: Int) throws -> Node? {
        guard let lexeme = peek else {
            // Callers check for an operand first; an empty query is caught before.
            throw Self.error("the query ends where a word was expected")
        }
        switch lexeme.kind {
        case .word(let text, let isPrefix):
            index += 1
            return try analyze([(text, isPrefix)], at: lexeme.position, isPhrase: false)
        case .phrase(let text):
            index += 1
            let chunks = text.split(whereSeparator: { $0.unicodeScalars.allSatisfy(FullTextQuery.isWhitespace) })
                .map { chunk -> (text: Substring, isPrefix: Bool) in
                    var stem = chunk
                    while stem.unicodeScalars.last == "*" { stem = Substring(stem.unicodeScalars.dropLast()) }
                    return (stem, stem.unicodeScalars.count < chunk.unicodeScalars.count)
                }
            guard !chunks.isEmpty else { throw Self.error("the phrase at position \(lexeme.position) is empty") }
            return try analyze(chunks, at: lexeme.position, isPhrase: true)
        case .open:
            guard depth < FullTextQuery.maximumDepth else {
                throw Self.error("parentheses nested deeper than \(FullTextQuery.maximumDepth) at position \(lexeme.position)")
            }
            index += 1
            if peek?.kind == .close {
                throw Self.error("empty parentheses at position \(lexeme.position)")
            }
            guard peek != nil else {
                throw Self.error("the '(' at position \(lexeme.position) is never closed")
            }
            let inner = try parseOr(depth: depth + 1)
            guard peek?.kind == .close else {
                throw Self.error("the '(' at position \(lexeme.position) is never closed")
            }
            index += 1
            return inner
        case .close:
            throw Self.error("unexpected ')' at position \(lexeme.position)")
        case .and, .or, .not:
            throw Self.error("operator \(Self.name(lexeme.kind)) at position \(lexeme.position) has no left operand")
        }
    }

    // MARK: Words

    /// The node of a bare word or a phrase: its words through the tokenizer, stop words left
    /// out (they keep their positions), the others stemmed, the last word of a chunk ending in
    /// `*` kept as a prefix. Nil when no word remains.
    ///
    /// ```swift
    /// // [("state of the art", false)] → "state _ _ art"; [("the", false)] → nil; [("dat", true)] → dat*
    /// ```
    func analyze(_ chunks: [(text: Substring, isPrefix: Bool)], at position: Int, isPhrase: Bool) throws -> Node? {
        var elements: [FullTextQuery.PhraseElement] = []
        var next = 0
        for chunk in chunks {
            var words: [(word: [UInt8], position: Int)] = []
            next = analyzer.tokenizer.forEachWord(in: String(chunk.text), firstPosition: next) { word, at in
                words.append((word, at))
            }
            if chunk.isPrefix && words.isEmpty {
                let what = isPhrase ? "a prefix in the phrase at position" : "the prefix at position"
                throw Self.error("\(what) \(position) has no letters or digits")
            }
            for (i, entry) in words.enumerated() {
                var word = entry.word
                if chunk.isPrefix && i == words.count - 1 {
                    elements.append(.init(term: String(decoding: word, as: UTF8.self), isPrefix: true, offset: entry.position))
                } else if analyzer.analyze(&word) {
                    elements.append(.init(term: String(decoding: word, as: UTF8.self), isPrefix: false, offset: entry.position))
                }
            }
        }
        guard let first = elements.first else { return nil }
        if elements.count == 1 {
            return first.isPrefix ? .prefix(first.term) : .term(first.term)
        }
        let start = first.offset
        for i in elements.indices { elements[i].offset -= start }
        if let span = elements.last?.offset, span > FullTextQuery.maximumPhraseSpan {
            throw Self.error("the phrase at position \(position) spans more than \(FullTextQuery.maximumPhraseSpan) words")
        }
        return .phrase(elements)
    }

    // MARK: Simplification

    /// AND or OR of the children that have terms, flattened; nil when none has.
    ///
    /// ```swift
    /// FullTextQueryParser.combine([.term("a"), nil, .and([.term("b"), .term("c")])], or: false)   // (AND a b c)
    /// ```
    static func combine(_ children: [Node?], or: Bool) -> Node? {
        var flat: [Node] = []
        for child in children {
            switch child {
            case nil: continue
            case .and(let grandchildren)? where !or: flat.append(contentsOf: grandchildren)
            case .or(let grandchildren)? where or: flat.append(contentsOf: grandchildren)
            case let node?: flat.append(node)
            }
        }
        if flat.count <= 1 { return flat.first }
        return or ? .or(flat) : .and(flat)
    }

    /// `node NOT excluded`: a chain `a NOT b NOT c` becomes `a NOT (b OR c)`, so the tree stays
    /// shallow however long the chain.
    ///
    /// ```swift
    /// FullTextQueryParser.exclude(.term("b"), from: .term("a"))   // (NOT a b)
    /// ```
    static func exclude(_ excluded: Node?, from node: Node?) -> Node? {
        guard let node else { return nil }
        guard let excluded else { return node }
        if case .not(let positive, let negative) = node {
            return .not(positive, excluding: combine([negative, excluded], or: true) ?? excluded)
        }
        return .not(node, excluding: excluded)
    }
}
