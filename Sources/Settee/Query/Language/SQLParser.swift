/// Parses SQL++ for Mobile query text into a ``SelectStatement``.
///
/// Errors name the position (in characters, from 0) where the text stops making sense.
///
/// ```swift
/// do { _ = try SQLParser.parse(text) } catch let e as SetteeError { print(e.message) }
/// ```
enum SQLParser {
    /// The longest query text accepted, in characters, and the deepest nesting of expressions:
    /// bounds for hostile input (a recursive parser must not overflow its stack).
    static let maxLength = 100_000
    static let maxDepth = 256
    /// The most operands (constants, names, parameters, calls) a statement may hold: a bound on
    /// its width, so that the work a statement asks of the planner and of every row it reads
    /// stays proportional to something small, whatever its length.
    static let maxTerms = 10_000

    /// Parses a whole `SELECT` statement.
    static func parse(_ text: String) throws(SetteeError) -> SelectStatement {
        var p = try Parser(text)
        let s = try p.select()
        try p.expectEnd()
        return s
    }

    /// Parses one expression (an index's, or a test's).
    static func parseExpression(_ text: String) throws(SetteeError) -> QueryExpression {
        var p = try Parser(text)
        let e = try p.expression()
        try p.expectEnd()
        return e
    }
}

// MARK: - Tokens

private enum Token: Equatable {
    case word(String)          // keyword or identifier, as written
    case quoted(String)        // `identifier`
    case string(String)        // 'text' or "text"
    case number(JSONValue)
    case parameter(String)     // $name
    case symbol(String)        // punctuation and operators
    case end
}

private struct Lexer {
    let chars: [Character]
    var i = 0

    init(_ text: String) { chars = Array(text) }

    func fail(_ what: String, at position: Int) -> SetteeError {
        SetteeError(.invalidParameter, "query: \(what) at position \(position)")
    }

    mutating func tokens() throws(SetteeError) -> [(Token, Int)] {
        var out: [(Token, Int)] = []
        while true {
            skipSpace()
            let start = i
            let t = try next()
            out.append((t, start))
            if t == .end { return out }
        }
    }

    mutating func skipSpace() {
        while i < chars.count {
            if chars[i].isWhitespace { i += 1; continue }
            // -- comments to the end of the line, /* block comments */
            if chars[i] == "-", i + 1 < chars.count, chars[i + 1] == "-" {
                while i < chars.count, chars[i] != "\n" { i += 1 }
                continue
            }
            if chars[i] == "/", i + 1 < chars.count, chars[i + 1] == "*" {
                i += 2
                while i + 1 < chars.count, !(chars[i] == "*" && chars[i + 1] == "/") { i += 1 }
                i = min(i + 2, chars.count)
                continue
            }
            return
        }
    }

    mutating func next() throws(SetteeError) -> Token {
        guard i < chars.count else { return .end }
        let c = chars[i]
        if c.isLetter || c == "_" {
            let start = i
            while i < chars.count, chars[i].isLetter || chars[i].isNumber || chars[i] == "_" { i += 1 }
            return .word(String(chars[start ..< i]))
        }
        if c.isNumber || (c == "." && i + 1 < chars.count && chars[i + 1].isNumber) {
            return try number()
        }
        switch c {
        case "'", "\"":
            return .string(try quoted(c))
        case "`":
            return .quoted(try quoted(c))
        case "$":
            i += 1
            let start = i
            while i < chars.count, chars[i].isLetter || chars[i].isNumber || chars[i] == "_" { i += 1 }
            guard i > start else { throw fail("a parameter without a name", at: start - 1) }
            return .parameter(String(chars[start ..< i]))
        default:
            for op in ["<=", ">=", "!=", "<>", "==", "||"] where i + 1 < chars.count && String(chars[i ... i + 1]) == op {
                i += 2
                return .symbol(op)
            }
            guard "()[],.*+-/%=<>".contains(c) else { throw fail("unexpected character \"\(c)\"", at: i) }
            i += 1
            return .symbol(String(c))
        }
    }

    mutating func number() throws(SetteeError) -> Token {
        let start = i
        var isDouble = false
        while i < chars.count, chars[i].isASCII, chars[i].isNumber { i += 1 }
        if i < chars.count, chars[i] == "." { isDouble = true; i += 1; while i < chars.count, chars[i].isASCII, chars[i].isNumber { i += 1 } }
        if i < chars.count, chars[i] == "e" || chars[i] == "E" {
            isDouble = true
            i += 1
            if i < chars.count, chars[i] == "+" || chars[i] == "-" { i += 1 }
            let digits = i
            while i < chars.count, chars[i].isASCII, chars[i].isNumber { i += 1 }
            guard i > digits else { throw fail("a number without its exponent", at: start) }
        }
        let text = String(chars[start ..< i])
        if !isDouble, let n = Int64(text) { return .number(.int(n)) }
        guard let d = Double(text), d.isFinite else { throw fail("a number out of range", at: start) }
        return .number(.double(d))
    }

    /// Text between `quote`s; a doubled quote stands for one, as in SQL.
    mutating func quoted(_ quote: Character) throws(SetteeError) -> String {
        let start = i
        i += 1
        var out = ""
        while true {
            guard i < chars.count else { throw fail("an unclosed \(quote)", at: start) }
            if chars[i] == quote {
                if i + 1 < chars.count, chars[i + 1] == quote { out.append(quote); i += 2; continue }
                i += 1
                return out
            }
            out.append(chars[i])
            i += 1
        }
    }
}

// MARK: - Parser

private struct Parser {
    var tokens: [(Token, Int)]
    var at = 0
    var depth = 0
    /// Operands read so far (``SQLParser/maxTerms``).
    var terms = 0
    let length: Int
    /// The variables of the enclosing `ANY`/`EVERY … SATISFIES`, innermost last: inside one, a
    /// path that starts with a variable's name reads the variable, not the document.
    var variables: [String] = []

    init(_ text: String) throws(SetteeError) {
        guard text.count <= SQLParser.maxLength else {
            throw SetteeError(.invalidParameter, "query: longer than \(SQLParser.maxLength) characters")
        }
        var lexer = Lexer(text)
        tokens = try lexer.tokens()
        length = text.count
    }

    var token: Token { tokens[at].0 }
    var position: Int { tokens[at].1 }

    func fail(_ what: String) -> SetteeError {
        let near: String
        switch token {
        case .end: near = "at the end"
        default: near = "at position \(position)"
        }
        return SetteeError(.invalidParameter, "query: \(what) \(near)")
    }

    mutating func advance() { if at < tokens.count - 1 { at += 1 } }

    /// Whether the current token is the keyword `k` (case-insensitive); consumes it if so.
    mutating func keyword(_ k: String) -> Bool {
        if case .word(let w) = token, w.uppercased() == k { advance(); return true }
        return false
    }

    func isKeyword(_ k: String, ahead: Int = 0) -> Bool {
        guard at + ahead < tokens.count, case .word(let w) = tokens[at + ahead].0 else { return false }
        return w.uppercased() == k
    }

    mutating func expectKeyword(_ k: String) throws(SetteeError) {
        guard keyword(k) else { throw fail("expected \(k)") }
    }

    mutating func symbol(_ s: String) -> Bool {
        if token == .symbol(s) { advance(); return true }
        return false
    }

    mutating func expectSymbol(_ s: String) throws(SetteeError) {
        guard symbol(s) else { throw fail("expected \"\(s)\"") }
    }

    mutating func expectEnd() throws(SetteeError) {
        guard token == .end else { throw fail("unexpected text") }
    }

    static let reserved: Set<String> = [
        "SELECT", "DISTINCT", "ALL", "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "OFFSET", "AS",
        "AND", "OR", "NOT", "IS", "NULL", "MISSING", "VALUED", "TRUE", "FALSE", "IN", "LIKE", "BETWEEN", "ASC", "DESC",
        "META", "JOIN", "ON", "ANY", "EVERY", "SATISFIES", "END", "CASE", "WHEN", "THEN", "ELSE", "COLLATE",
    ]

    // MARK: Statement

    mutating func select() throws(SetteeError) -> SelectStatement {
        var s = SelectStatement()
        try expectKeyword("SELECT")
        if keyword("DISTINCT") { s.distinct = true } else { _ = keyword("ALL") }
        repeat {
            s.items.append(try selectItem(index: s.items.count))
        } while symbol(",")
        try expectKeyword("FROM")
        s.source = try identifier("a data source")
        s.alias = s.source
        // `scope.collection` (Couchbase Lite 3's keyspace): named by its collection.
        if symbol(".") {
            let collection = try identifier("a collection")
            s.source += "." + collection
            s.alias = collection
        }
        if let alias = try sourceAlias() { s.alias = alias }
        while let kind = try joinKind() {
            var source = try identifier("a data source")
            var alias = source
            if symbol(".") {
                let collection = try identifier("a collection")
                source += "." + collection
                alias = collection
            }
            if let given = try sourceAlias() { alias = given }
            var on: QueryExpression?
            if kind != .cross {
                try expectKeyword("ON")
                on = try expression()
            }
            s.joins.append(.init(kind: kind, source: source, alias: alias, on: on))
        }
        if keyword("WHERE") { s.whereClause = try expression() }
        if keyword("GROUP") {
            try expectKeyword("BY")
            repeat { s.groupBy.append(try expression()) } while symbol(",")
            if keyword("HAVING") { s.having = try expression() }
        }
        if keyword("ORDER") {
            try expectKeyword("BY")
            repeat {
                let e = try expression()
                var descending = false
                if keyword("DESC") { descending = true } else { _ = keyword("ASC") }
                s.orderBy.append(.init(expression: e, descending: descending))
            } while symbol(",")
        }
        if keyword("LIMIT") { s.limit = try expression() }
        if keyword("OFFSET") { s.offset = try expression() }
        // Either order, as SQL++ for Mobile accepts.
        if s.limit == nil, keyword("LIMIT") { s.limit = try expression() }
        if !s.joins.isEmpty { return try s.qualifyingForJoin() }
        let resolved = s.resolvingAlias()
        try resolved.checkFullText()
        return resolved
    }

    /// A source's alias: `AS name`, or a name that is no keyword (a join's among them).
    mutating func sourceAlias() throws(SetteeError) -> String? {
        if keyword("AS") { return try identifier("an alias") }
        if case .word(let w) = token, !Self.reserved.contains(w.uppercased()), !Self.joinWords.contains(w.uppercased()) {
            advance()
            return w
        }
        if case .quoted(let w) = token {
            advance()
            return w
        }
        return nil
    }

    /// Words that start a join, which a source's alias cannot be (they stay usable as
    /// property names).
    static let joinWords: Set<String> = ["LEFT", "INNER", "CROSS", "OUTER"]

    /// `JOIN`, `INNER JOIN`, `LEFT JOIN`, `LEFT OUTER JOIN` or `CROSS JOIN`; nil when none follows.
    mutating func joinKind() throws(SetteeError) -> SelectStatement.Join.Kind? {
        if keyword("JOIN") { return .inner }
        if keyword("INNER") {
            try expectKeyword("JOIN")
            return .inner
        }
        if keyword("LEFT") {
            _ = keyword("OUTER")
            try expectKeyword("JOIN")
            return .leftOuter
        }
        if keyword("CROSS") {
            try expectKeyword("JOIN")
            return .cross
        }
        return nil
    }

    mutating func selectItem(index: Int) throws(SetteeError) -> SelectStatement.Item {
        if symbol("*") { return .all }
        // alias.*
        if case .word = token, tokens[at + 1].0 == .symbol("."), at + 2 < tokens.count, tokens[at + 2].0 == .symbol("*") {
            advance(); advance(); advance()
            return .all
        }
        let e = try expression()
        if keyword("AS") { return .expression(e, name: try identifier("a column name")) }
        if case .word(let w) = token, !Self.reserved.contains(w.uppercased()) {
            advance()
            return .expression(e, name: w)
        }
        return .expression(e, name: SelectStatement.defaultColumnName(e, index: index))
    }

    mutating func identifier(_ what: String) throws(SetteeError) -> String {
        switch token {
        case .word(let w) where !Self.reserved.contains(w.uppercased()):
            advance()
            return w
        case .quoted(let w):
            advance()
            return w
        default:
            throw fail("expected \(what)")
        }
    }

    // MARK: Expressions, loosest first

    mutating func expression() throws(SetteeError) -> QueryExpression {
        try deeper()
        defer { depth -= 1 }
        return try or()
    }

    /// One more level of the tree being built: a chain `a + b + c` nests as deep as it is long
    /// (AND and OR are flat), and evaluating (or freeing) a tree recurses through every level.
    mutating func deeper() throws(SetteeError) {
        depth += 1
        guard depth <= SQLParser.maxDepth else { throw fail("expressions nested more than \(SQLParser.maxDepth) deep") }
    }

    /// A chain `a OR b OR c` is one flat OR of its terms (one level however long).
    mutating func or() throws(SetteeError) -> QueryExpression {
        var terms = [try and()]
        while keyword("OR") { terms.append(try and()) }
        return .any(terms)
    }

    mutating func and() throws(SetteeError) -> QueryExpression {
        var terms = [try not()]
        while keyword("AND") { terms.append(try not()) }
        return .all(terms)
    }

    mutating func not() throws(SetteeError) -> QueryExpression {
        if keyword("NOT") {
            try deeper()
            defer { depth -= 1 }
            return .not(try not())
        }
        return try comparison()
    }

    mutating func comparison() throws(SetteeError) -> QueryExpression {
        let e = try additive()
        switch token {
        case .symbol("="), .symbol("=="): advance(); return .compare(.equal, e, try additive())
        case .symbol("!="), .symbol("<>"): advance(); return .compare(.notEqual, e, try additive())
        case .symbol("<"): advance(); return .compare(.less, e, try additive())
        case .symbol("<="): advance(); return .compare(.lessOrEqual, e, try additive())
        case .symbol(">"): advance(); return .compare(.greater, e, try additive())
        case .symbol(">="): advance(); return .compare(.greaterOrEqual, e, try additive())
        default: break
        }
        if keyword("IS") {
            let negated = keyword("NOT")
            if keyword("NULL") { return .test(negated ? .isNotNull : .isNull, e) }
            if keyword("MISSING") { return .test(negated ? .isNotMissing : .isMissing, e) }
            if keyword("VALUED") { return .test(negated ? .isNotValued : .isValued, e) }
            // `a IS b` is `a = b`; `a IS NOT b` is `a != b`.
            return .compare(negated ? .notEqual : .equal, e, try additive())
        }
        let negated = isKeyword("NOT") && (isKeyword("BETWEEN", ahead: 1) || isKeyword("IN", ahead: 1) || isKeyword("LIKE", ahead: 1))
        if negated { advance() }
        let result: QueryExpression
        if keyword("BETWEEN") {
            let low = try additive()
            try expectKeyword("AND")
            result = .between(e, low, try additive())
        } else if keyword("IN") {
            try expectSymbol(isSymbol("[") ? "[" : "(")
            let close = tokens[at - 1].0 == .symbol("[") ? "]" : ")"
            var list: [QueryExpression] = []
            if !symbol(close) {
                repeat { list.append(try expression()) } while symbol(",")
                try expectSymbol(close)
            }
            result = .in(e, list)
        } else if keyword("LIKE") {
            result = .like(e, try additive())
        } else {
            return e
        }
        return negated ? .not(result) : result
    }

    func isSymbol(_ s: String) -> Bool { token == .symbol(s) }

    mutating func additive() throws(SetteeError) -> QueryExpression {
        let base = depth
        defer { depth = base }
        var e = try multiplicative()
        while true {
            if isSymbol("+") || isSymbol("-") { try deeper() }
            if symbol("+") { e = .arithmetic(.add, e, try multiplicative()) } else if symbol("-") {
                e = .arithmetic(.subtract, e, try multiplicative())
            } else { return e }
        }
    }

    mutating func multiplicative() throws(SetteeError) -> QueryExpression {
        let base = depth
        defer { depth = base }
        var e = try unary()
        while true {
            if isSymbol("*") || isSymbol("/") || isSymbol("%") { try deeper() }
            if symbol("*") { e = .arithmetic(.multiply, e, try unary()) } else if symbol("/") {
                e = .arithmetic(.divide, e, try unary())
            } else if symbol("%") { e = .arithmetic(.modulo, e, try unary()) } else { return e }
        }
    }

    mutating func unary() throws(SetteeError) -> QueryExpression {
        if symbol("-") {
            try deeper()
            defer { depth -= 1 }
            if case .number(let n) = token {
                advance()
                switch n {
                case .int(let i) where i != .min: return .literal(.int(-i))
                case .double(let d): return .literal(.double(-d))
                default: return .negate(.literal(n))
                }
            }
            return .negate(try unary())
        }
        _ = symbol("+")
        return try primary()
    }

    mutating func primary() throws(SetteeError) -> QueryExpression {
        terms += 1
        guard terms <= SQLParser.maxTerms else { throw fail("more than \(SQLParser.maxTerms) operands in one statement") }
        switch token {
        case .number(let n):
            advance()
            return .literal(n)
        case .string(let s):
            advance()
            return .literal(.string(s))
        case .parameter(let name):
            advance()
            return .parameter(name)
        case .symbol("("):
            advance()
            let e = try expression()
            try expectSymbol(")")
            return e
        case .symbol("["):
            advance()
            var elements: [JSONValue] = []
            if !symbol("]") {
                repeat {
                    guard case .literal(let v) = try expression() else { throw fail("an array literal holds only constants") }
                    elements.append(v)
                } while symbol(",")
                try expectSymbol("]")
            }
            return .literal(.array(elements))
        case .word(let w):
            switch w.uppercased() {
            case "TRUE": advance(); return .literal(true)
            case "FALSE": advance(); return .literal(false)
            case "NULL": advance(); return .literal(.null)
            case "MISSING": advance(); return .missing
            case "META": return try meta()
            case "ANY", "EVERY": return try quantified()
            default: break
            }
            if tokens[at + 1].0 == .symbol("(") {
                return try call(w)
            }
            guard !Self.reserved.contains(w.uppercased()) else { throw fail("unexpected \(w.uppercased())") }
            return try propertyPath()
        case .quoted:
            return try propertyPath()
        default:
            throw fail("expected an expression")
        }
    }

    /// `ANY v IN array SATISFIES condition END`, `EVERY …`, `ANY AND EVERY …`.
    mutating func quantified() throws(SetteeError) -> QueryExpression {
        try deeper()
        defer { depth -= 1 }
        let q: QueryExpression.Quantifier
        if keyword("EVERY") {
            q = .every
        } else {
            advance()
            if keyword("AND") {
                try expectKeyword("EVERY")
                q = .anyAndEvery
            } else {
                q = .any
            }
        }
        let name = try identifier("a variable name")
        try expectKeyword("IN")
        // The array is read outside the variable's scope (`ANY x IN x.list` reads the
        // document's x).
        let array = try expression()
        try expectKeyword("SATISFIES")
        variables.append(name)
        defer { variables.removeLast() }
        let condition = try expression()
        try expectKeyword("END")
        return .quantified(q, variable: name, in: array, satisfies: condition)
    }

    mutating func meta() throws(SetteeError) -> QueryExpression {
        advance()
        try expectSymbol("(")
        var source: String?
        if !symbol(")") {
            source = try identifier("a data source")
            try expectSymbol(")")
        }
        try expectSymbol(".")
        let name = try identifier("a META() property")
        guard let m = QueryExpression.MetaProperty.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else {
            throw SetteeError(.invalidParameter, "query: META() has no property \"\(name)\" (id, sequence, deleted, expiration, revisionID)")
        }
        // Which source's: a join's row has one of each (a single source's reads it as META()).
        return source.map { SelectStatement.metaPath($0, m) } ?? .meta(m)
    }

    mutating func call(_ name: String) throws(SetteeError) -> QueryExpression {
        let start = position
        advance()
        try expectSymbol("(")
        switch name.uppercased() {
        case "MATCH":
            let index = try fullTextIndexName()
            try expectSymbol(",")
            let query = try expression()
            try expectSymbol(")")
            return .match(index: index, query: query)
        case "RANK":
            let index = try fullTextIndexName()
            try expectSymbol(")")
            return .rank(index: index)
        default:
            break
        }
        if let a = QueryExpression.Aggregate(rawValue: name.lowercased()) {
            if a == .count, symbol("*") {
                try expectSymbol(")")
                return .aggregate(.count, nil)
            }
            let e = try expression()
            try expectSymbol(")")
            return .aggregate(a, e)
        }
        var args: [QueryExpression] = []
        if !symbol(")") {
            repeat { args.append(try expression()) } while symbol(",")
            try expectSymbol(")")
        }
        guard let f = QueryExpression.Function(rawValue: name.lowercased()) else {
            throw SetteeError(.invalidParameter, "query: unknown function \(name)() at position \(start)")
        }
        guard f.arity.contains(args.count) else {
            throw SetteeError(.invalidParameter, "query: \(f.rawValue)() takes \(f.arityText), not \(args.count), at position \(start)")
        }
        return .function(f, args)
    }

    /// The index `MATCH` and `RANK` name: an identifier (`text`, `` `my index` ``), after the
    /// data source's alias if one is written (`t.text`), or a string.
    mutating func fullTextIndexName() throws(SetteeError) -> String {
        if case .string(let s) = token {
            advance()
            return s
        }
        var name = try identifier("a full-text index name")
        if symbol(".") { name = try identifier("a full-text index name") }
        return name
    }

    /// `a.b[0].c`, with backtick-quoted names for anything else.
    mutating func propertyPath() throws(SetteeError) -> QueryExpression {
        var components: [PropertyPath.Component] = []
        func name() throws(SetteeError) {
            switch token {
            case .word(let w): components.append(.name(w)); advance()
            case .quoted(let w):
                // NUL begins the names of index slots (``PropertyPath/init(slot:)``).
                guard !w.unicodeScalars.contains("\u{0}") else { throw fail("a property name cannot hold a NUL character") }
                components.append(.name(w)); advance()
            default: throw fail("expected a property name")
            }
        }
        try name()
        while true {
            if symbol(".") {
                try name()
            } else if isSymbol("[") {
                advance()
                var negative = false
                if symbol("-") { negative = true }
                guard case .number(.int(let n)) = token else { throw fail("expected an array index") }
                advance()
                try expectSymbol("]")
                components.append(.index(negative ? -Int(n) : Int(n)))
            } else {
                break
            }
            guard components.count <= PropertyPath.maxComponents else {
                throw fail("a property path longer than \(PropertyPath.maxComponents) steps")
            }
        }
        if case .name(let first)? = components.first, variables.contains(first) {
            return .variable(first, PropertyPath(components: Array(components.dropFirst())))
        }
        return .property(PropertyPath(components: components))
    }
}
