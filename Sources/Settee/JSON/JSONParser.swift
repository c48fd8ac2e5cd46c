import Foundation

/// Strict RFC 8259 parsing of UTF-8 bytes into ``JSONValue``.
///
/// Stored bodies and replicated documents pass through here, so it must reject anything that is
/// not JSON and never misbehave on hostile input: it works on the raw buffer with explicit bounds
/// checks, keeps its own stack instead of recursing (deep nesting cannot overflow the thread's
/// stack), and its errors name a byte offset, never the input.
enum JSONParser {
    /// Deepest nesting of arrays and objects accepted by default; ``JSONWriter`` refuses to write
    /// deeper values, so whatever is written can be read back.
    static let defaultMaxDepth = 256

    /// Parses one JSON value filling the whole buffer (surrounding whitespace allowed).
    /// With `lastKeyWins`, a key repeated in an object is not an error: its last value is kept.
    static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth, lastKeyWins: Bool = false) throws(SetteeError) -> JSONValue {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw SetteeError(.invalidJSON, "unexpected end of input at byte 0")
        }
        var reader = Reader(base: base.assumingMemoryBound(to: UInt8.self), end: bytes.count, maxDepth: maxDepth)
        reader.lastKeyWins = lastKeyWins
        return try reader.parseDocument()
    }

    /// What ``scanBody(_:checkReserved:)`` learned about a document body without building it.
    struct BodyScan {
        /// The object has no members (`{}`).
        var isEmpty: Bool
        /// The digests of the blobs the body references, as ``JSONWriter/body(_:blobDigests:)``
        /// finds them (every object with `"@type": "blob"` and a string `digest`), in text order.
        var blobDigests: [String]
    }

    /// Checks that `bytes` are a JSON object ``parse(_:maxDepth:)`` accepts, by the same grammar
    /// and limits, without building its values: a replicated body arrives as JSON and is stored
    /// as it came, so checking it costs a pass over the bytes instead of a parse and a rewrite.
    /// With `checkReserved`, a top-level key starting with `_` is refused as it is in a save.
    static func scanBody(_ bytes: UnsafeRawBufferPointer, checkReserved: Bool = true) throws(SetteeError) -> BodyScan {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw SetteeError(.invalidJSON, "unexpected end of input at byte 0")
        }
        var reader = Reader(base: base.assumingMemoryBound(to: UInt8.self), end: bytes.count, maxDepth: defaultMaxDepth)
        return try reader.scanBody(checkReserved: checkReserved)
    }

    /// Parses one JSON value filling the whole array.
    static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth, lastKeyWins: Bool = false) throws(SetteeError) -> JSONValue {
        let result = bytes.withUnsafeBytes { buffer in
            Swift.Result { () throws(SetteeError) in try parse(buffer, maxDepth: maxDepth, lastKeyWins: lastKeyWins) }
        }
        return try result.get()
    }

    /// Parses one JSON value filling the whole string.
    static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(SetteeError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { buffer in
            Swift.Result { () throws(SetteeError) in try parse(UnsafeRawBufferPointer(buffer), maxDepth: maxDepth) }
        }
        return try result.get()
    }
}

// ASCII bytes the grammar mentions.
private let quote = UInt8(ascii: "\"")
private let backslash = UInt8(ascii: "\\")
private let slash = UInt8(ascii: "/")
private let comma = UInt8(ascii: ",")
private let colon = UInt8(ascii: ":")
private let openBrace = UInt8(ascii: "{")
private let closeBrace = UInt8(ascii: "}")
private let openBracket = UInt8(ascii: "[")
private let closeBracket = UInt8(ascii: "]")
private let minus = UInt8(ascii: "-")
private let plus = UInt8(ascii: "+")
private let dot = UInt8(ascii: ".")
private let zero = UInt8(ascii: "0")
private let nine = UInt8(ascii: "9")

/// 10^0 through 10^22, the powers of ten that are exact doubles.
private let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

/// An object key waiting for its value, and where it starts (for the duplicate-key error). A
/// struct rather than a tuple: tuple arrays go through generic metadata at runtime.
private struct PendingKey {
    var key: String
    var at: Int
}

/// One open array or object: where its elements (and, for objects, keys) start on the shared
/// stacks.
private struct Frame {
    var isObject: Bool
    var firstValue: Int
    var firstKey: Int
}

/// One open container of a body scan; an object notes whether it is a blob reference.
private struct ScanFrame {
    var isObject: Bool
    var firstKey: Int
    var isBlob = false
    var digest: String? = nil
}

/// An object key met by a body scan. A plain key (ASCII, no escapes: nearly every key) stays
/// where it is in the input and is compared by its bytes; any other key is decoded to a `String`,
/// kept aside, which compares by canonical equivalence as the parser's dictionary does. Plain
/// data, so the scan's key stack costs no reference counting.
private struct ScanKey {
    /// The key's first byte after its opening quote, and its length (plain keys).
    var start: Int
    var count: Int
    /// Length and outer bytes of a plain key: keys that differ here differ, so most pairs are
    /// told apart without reading them again.
    var fingerprint: UInt64
    /// The decoded key's index among the scan's texts, or -1 for a plain key.
    var text: Int
    /// The opening quote, for the duplicate-key error.
    var at: Int

    var isPlain: Bool { text < 0 }
}

/// A plain key's bytes as a hashable value, for objects with many keys.
private struct PlainKey: Hashable {
    let bytes: UnsafeRawBufferPointer

    static func == (a: PlainKey, b: PlainKey) -> Bool {
        a.bytes.count == b.bytes.count && (a.bytes.count == 0 || memcmp(a.bytes.baseAddress!, b.bytes.baseAddress!, a.bytes.count) == 0)
    }

    func hash(into hasher: inout Hasher) { hasher.combine(bytes: bytes) }
}

/// The top bit of each byte of `x` that is `"`, `\` or a control character (below 0x20), and
/// perhaps of a byte next to one: a word without any is copied or skipped whole by the parser
/// and the writer. (The borrow of a subtraction can mark a neighbour; it never hides a byte.)
@inline(__always)
func escapedBytes(in x: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    return quoteOrBackslash(in: x) | ((x &- ones &* 0x20) & ~x & 0x8080_8080_8080_8080)
}

/// The top bit of the first byte of `x` (in memory order, `x` read little-endian) that is `"` or
/// `\`, perhaps with bits of later bytes: the lowest bit set is always a real one (a borrow
/// only marks bytes above the one that caused it).
@inline(__always)
func quoteOrBackslash(in x: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let quotes = x ^ (ones &* 0x22)
    let backslashes = x ^ (ones &* 0x5C)
    return (((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)) & 0x8080_8080_8080_8080
}

/// The one top-level key starting with `_` a document may hold: CouchDB's attachments, a
/// dictionary of blobs by name (as Couchbase Lite keeps the attachments Sync Gateway sends).
let attachmentsKey = "_attachments"

/// The error a save gives for a top-level key starting with `_` (other than `_attachments`).
func reservedKey(_ key: String) -> SetteeError {
    SetteeError(.invalidParameter, "property '\(key)' is reserved: top-level keys starting with '_' belong to the database")
}

private struct Reader {
    let p: UnsafePointer<UInt8>
    let end: Int
    let maxDepth: Int
    /// Whether a repeated key replaces the earlier one's value rather than being an error.
    var lastKeyWins = false
    var i = 0
    /// Reused for strings with escapes, so only the final `String` allocates.
    var scratch: [UInt8] = []

    init(base: UnsafePointer<UInt8>, end: Int, maxDepth: Int) {
        self.p = base
        self.end = end
        self.maxDepth = maxDepth
    }

    func fail(_ what: String, at offset: Int) -> SetteeError {
        SetteeError(.invalidJSON, "\(what) at byte \(offset)")
    }

    func fail(_ what: String) -> SetteeError {
        fail(what, at: i)
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while i < end {
            let c = p[i]
            guard c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { return }
            i += 1
        }
    }

    @inline(__always)
    func isDigit(at j: Int) -> Bool {
        j < end && p[j] >= zero && p[j] <= nine
    }

    // MARK: Structure

    /// The value loop: containers push a frame and go on to their first element; a finished
    /// value is pushed for the innermost open container, which then either wants another
    /// element or closes, finishing a value itself.
    ///
    /// Elements and keys wait on two stacks shared by all containers, so a document needs a few
    /// allocations for them, not a few per container; a closing container moves its elements
    /// off the stacks and builds its dictionary at its final size.
    mutating func parseDocument() throws(SetteeError) -> JSONValue {
        var values: [JSONValue] = []
        var keys: [PendingKey] = []
        var frames: [Frame] = []

        nextValue: while true {
            skipWhitespace()
            guard i < end else { throw fail("unexpected end of input") }
            var value: JSONValue
            let c = p[i]
            switch c {
            case openBrace, openBracket:
                // Checked before descending, whatever the nesting, so the stacks stay bounded.
                guard frames.count < maxDepth else { throw fail("nesting deeper than \(maxDepth) levels") }
                let isObject = c == openBrace
                i += 1
                skipWhitespace()
                if i < end && p[i] == (isObject ? closeBrace : closeBracket) {
                    i += 1
                    value = isObject ? .object([:]) : .array([])
                } else {
                    frames.append(Frame(isObject: isObject, firstValue: values.count, firstKey: keys.count))
                    if isObject { try readKey(into: &keys) }
                    continue nextValue
                }
            default:
                guard let scalar = try readScalar() else { throw fail("unexpected character") }
                value = scalar
            }

            while let frame = frames.last {
                values.append(value)
                skipWhitespace()
                guard i < end else { throw fail("unexpected end of input") }
                if p[i] == comma {
                    i += 1
                    if frame.isObject { try readKey(into: &keys) }
                    continue nextValue
                }
                guard p[i] == (frame.isObject ? closeBrace : closeBracket) else {
                    throw fail(frame.isObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
                i += 1
                value = frame.isObject
                    ? .object(try makeObject(values: &values, keys: &keys, frame: frame))
                    : .array(makeArray(values: &values, frame: frame))
                frames.removeLast()
            }

            skipWhitespace()
            guard i == end else { throw fail("unexpected character after the value") }
            return value
        }
    }

    /// Reads `"key" :` and leaves `i` at the value.
    mutating func readKey(into keys: inout [PendingKey]) throws(SetteeError) {
        skipWhitespace()
        guard i < end, p[i] == quote else { throw fail(i < end ? "expected a string key" : "unexpected end of input") }
        let at = i
        i += 1
        let key = try readString()
        skipWhitespace()
        guard i < end, p[i] == colon else { throw fail(i < end ? "expected ':'" : "unexpected end of input") }
        i += 1
        keys.append(PendingKey(key: key, at: at))
    }

    /// ``parseDocument()``'s loop, step for step, with nothing built: strings are checked but only
    /// kept when they are keys (for the duplicate-key rule) or may mark a blob, numbers are read
    /// and dropped. Whatever one accepts the other accepts; the fuzzer holds them to it.
    mutating func scanBody(checkReserved: Bool) throws(SetteeError) -> JSONParser.BodyScan {
        // One allocation each for a typical body, not one per doubling.
        var keys: [ScanKey] = []
        keys.reserveCapacity(32)
        var texts: [String] = []
        var frames: [ScanFrame] = []
        frames.reserveCapacity(8)
        var digests: [String] = []
        var topLevelMembers = 0

        skipWhitespace()
        guard i < end, p[i] == openBrace else {
            throw fail(i < end ? "a document body must be a JSON object" : "unexpected end of input")
        }
        nextValue: while true {
            skipWhitespace()
            guard i < end else { throw fail("unexpected end of input") }
            let c = p[i]
            switch c {
            case openBrace, openBracket:
                guard frames.count < maxDepth else { throw fail("nesting deeper than \(maxDepth) levels") }
                let isObject = c == openBrace
                i += 1
                skipWhitespace()
                if i < end && p[i] == (isObject ? closeBrace : closeBracket) {
                    i += 1
                } else {
                    frames.append(ScanFrame(isObject: isObject, firstKey: keys.count))
                    if isObject { try readScannedKey(into: &keys, texts: &texts, topLevel: frames.count == 1 && checkReserved) }
                    continue nextValue
                }
            case quote:
                i += 1
                // The innermost open container is an object whose current key is the last one
                // pushed: a string under `@type` or `digest` may mark a blob, so it is kept.
                if let frame = frames.last, frame.isObject, let key = keys.last,
                   case let marks = blobMarks(key, texts), marks != .none {
                    let text = try readString()
                    if marks == .type {
                        if text == "blob" { frames[frames.count - 1].isBlob = true }
                    } else {
                        frames[frames.count - 1].digest = text
                    }
                } else {
                    _ = try readString(keep: false)
                }
            case UInt8(ascii: "t"):
                try readLiteral("true")
            case UInt8(ascii: "f"):
                try readLiteral("false")
            case UInt8(ascii: "n"):
                try readLiteral("null")
            case minus, zero...nine:
                _ = try readNumber()
            default:
                throw fail("unexpected character")
            }

            while let frame = frames.last {
                skipWhitespace()
                guard i < end else { throw fail("unexpected end of input") }
                if p[i] == comma {
                    i += 1
                    if frame.isObject { try readScannedKey(into: &keys, texts: &texts, topLevel: frames.count == 1 && checkReserved) }
                    continue nextValue
                }
                guard p[i] == (frame.isObject ? closeBrace : closeBracket) else {
                    throw fail(frame.isObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
                i += 1
                if frame.isObject {
                    try checkDistinct(keys, from: frame.firstKey, texts)
                    if frames.count == 1 { topLevelMembers = keys.count - frame.firstKey }
                    if frame.isBlob, let digest = frame.digest { digests.append(digest) }
                    keys.removeSubrange(frame.firstKey...)
                }
                frames.removeLast()
            }

            skipWhitespace()
            guard i == end else { throw fail("unexpected character after the value") }
            return JSONParser.BodyScan(isEmpty: topLevelMembers == 0, blobDigests: digests)
        }
    }

    /// ``readKey(into:)`` for a body scan, refusing a reserved top-level key as ``PreparedBody``
    /// does. A plain key is only located; anything else (an escape, a non-ASCII byte, an error)
    /// goes through ``readString()``, so errors are the parser's own.
    mutating func readScannedKey(into keys: inout [ScanKey], texts: inout [String], topLevel: Bool) throws(SetteeError) {
        skipWhitespace()
        guard i < end, p[i] == quote else { throw fail(i < end ? "expected a string key" : "unexpected end of input") }
        let at = i
        i += 1
        let start = i
        while i < end, case let c = p[i], c != quote, c != backslash, c >= 0x20, c < 0x80 { i += 1 }
        var key: ScanKey
        if i < end, p[i] == quote {
            let n = i - start
            var fingerprint = UInt64(n) << 48
            if n > 0 {
                fingerprint |= UInt64(p[start]) << 40 | UInt64(p[start + n / 2]) << 32 | UInt64(p[start + n - 1]) << 24
            }
            key = ScanKey(start: start, count: n, fingerprint: fingerprint, text: -1, at: at)
            i += 1
        } else {
            i = start
            texts.append(try readString())
            key = ScanKey(start: start, count: 0, fingerprint: 0, text: texts.count - 1, at: at)
        }
        skipWhitespace()
        guard i < end, p[i] == colon else { throw fail(i < end ? "expected ':'" : "unexpected end of input") }
        i += 1
        if topLevel {
            let first = key.isPlain ? (key.count > 0 ? p[key.start] : nil) : texts[key.text].utf8.first
            if first == UInt8(ascii: "_"), case let name = text(of: key, texts), name != attachmentsKey { throw reservedKey(name) }
        }
        keys.append(key)
    }

    /// A scanned key as a `String`.
    func text(of key: ScanKey, _ texts: [String]) -> String {
        key.isPlain ? String(decoding: UnsafeBufferPointer(start: p + key.start, count: key.count), as: UTF8.self) : texts[key.text]
    }

    /// Whether two scanned keys are the same key to the parser: equal bytes for plain keys (an
    /// ASCII string is canonically equivalent only to itself), equal `String`s otherwise.
    @inline(__always)
    func sameKey(_ a: ScanKey, _ b: ScanKey, _ texts: [String]) -> Bool {
        if a.isPlain, b.isPlain {
            return a.fingerprint == b.fingerprint && (a.count == 0 || memcmp(p + a.start, p + b.start, a.count) == 0)
        }
        return text(of: a, texts) == text(of: b, texts)
    }

    enum BlobMark { case none, type, digest }

    /// Whether a member's key is `@type` or `digest`, the two a blob reference is made of.
    func blobMarks(_ key: ScanKey, _ texts: [String]) -> BlobMark {
        if !key.isPlain {
            let text = texts[key.text]
            return text == "@type" ? .type : text == "digest" ? .digest : .none
        }
        let k = p + key.start
        if key.count == 5, k[0] == UInt8(ascii: "@"), memcmp(k, "@type", 5) == 0 { return .type }
        if key.count == 6, k[0] == UInt8(ascii: "d"), memcmp(k, "digest", 6) == 0 { return .digest }
        return .none
    }

    /// The duplicate-key rule of ``makeObject(values:keys:frame:)``: the first key equal to an
    /// earlier one of its object is refused, where keys are equal as `String`s (so canonically
    /// equivalent spellings collide, as they do in a dictionary).
    func checkDistinct(_ keys: [ScanKey], from first: Int, _ texts: [String]) throws(SetteeError) {
        let n = keys.count - first
        guard n > 1 else { return }
        if n <= 16 {
            for b in (first + 1)..<keys.count {
                for a in first..<b where sameKey(keys[a], keys[b], texts) {
                    throw fail("duplicate key", at: keys[b].at)
                }
            }
            return
        }
        if keys[first...].allSatisfy(\.isPlain) {
            var seen = Set<PlainKey>(minimumCapacity: n)
            for k in first..<keys.count {
                let bytes = UnsafeRawBufferPointer(start: p + keys[k].start, count: keys[k].count)
                if !seen.insert(PlainKey(bytes: bytes)).inserted { throw fail("duplicate key", at: keys[k].at) }
            }
            return
        }
        var seen = Set<String>(minimumCapacity: n)
        for k in first..<keys.count where !seen.insert(text(of: keys[k], texts)).inserted {
            throw fail("duplicate key", at: keys[k].at)
        }
    }

    // Elements leave the stacks by `swap` with a placeholder, a move: copying them out and then
    // removing them would retain and release every element once more.

    func makeArray(values: inout [JSONValue], frame: Frame) -> [JSONValue] {
        var elements: [JSONValue] = []
        elements.reserveCapacity(values.count - frame.firstValue)
        for j in frame.firstValue..<values.count {
            var element = JSONValue.null
            swap(&element, &values[j])
            elements.append(element)
        }
        values.removeSubrange(frame.firstValue...)
        return elements
    }

    func makeObject(values: inout [JSONValue], keys: inout [PendingKey], frame: Frame) throws(SetteeError) -> [String: JSONValue] {
        var object = [String: JSONValue](minimumCapacity: values.count - frame.firstValue)
        var k = frame.firstKey
        for j in frame.firstValue..<values.count {
            var member = JSONValue.null
            swap(&member, &values[j])
            var key = ""
            swap(&key, &keys[k].key)
            if object.updateValue(member, forKey: key) != nil, !lastKeyWins { throw fail("duplicate key", at: keys[k].at) }
            k += 1
        }
        values.removeSubrange(frame.firstValue...)
        keys.removeSubrange(frame.firstKey...)
        return object
    }

    mutating func readLiteral(_ literal: StaticString) throws(SetteeError) {
        let n = literal.utf8CodeUnitCount
        guard end - i >= n else { throw fail("invalid literal") }
        let text = literal.utf8Start
        for k in 0..<n where p[i + k] != text[k] {
            throw fail("invalid literal")
        }
        i += n
    }

    // MARK: Numbers

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`; integers that fit are exact.
    mutating func readNumber() throws(SetteeError) -> JSONValue {
        let start = i
        let negative = p[i] == minus
        if negative { i += 1 }
        guard isDigit(at: i) else { throw fail("expected a digit") }

        // The digits as an integer (while it fits: `exact`), and the power of ten that scales it.
        var mantissa: UInt64 = 0
        var exact = true
        var scale = 0
        if p[i] == zero {
            i += 1
            if isDigit(at: i) { throw fail("leading zero in number", at: start) }
        } else {
            while isDigit(at: i) {
                accumulate(p[i], into: &mantissa, exact: &exact)
                i += 1
            }
        }

        var isInteger = true
        if i < end && p[i] == dot {
            isInteger = false
            i += 1
            guard isDigit(at: i) else { throw fail("expected a digit after the decimal point") }
            while isDigit(at: i) {
                accumulate(p[i], into: &mantissa, exact: &exact)
                if exact { scale -= 1 }
                i += 1
            }
        }
        if i < end && (p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E")) {
            isInteger = false
            i += 1
            var exponentNegative = false
            if i < end && (p[i] == plus || p[i] == minus) {
                exponentNegative = p[i] == minus
                i += 1
            }
            guard isDigit(at: i) else { throw fail("expected a digit in the exponent") }
            var exponent = 0
            while isDigit(at: i) {
                // Saturates: past this the fast path is out anyway.
                if exponent < 100_000 { exponent = exponent * 10 + Int(p[i] &- zero) }
                i += 1
            }
            scale += exponentNegative ? -exponent : exponent
        }

        if isInteger && exact {
            if !negative, mantissa <= UInt64(Int64.max) { return .int(Int64(mantissa)) }
            if negative, mantissa <= Int64.min.magnitude {
                return .int(mantissa == Int64.min.magnitude ? Int64.min : -Int64(mantissa))
            }
        }
        // Clinger's fast path: a mantissa below 2^53 and a power of ten up to 10^22 are both
        // exact doubles, so one IEEE multiplication or division rounds correctly.
        if exact, mantissa <= 1 << 53, scale >= -22, scale <= 22 {
            let magnitude = scale < 0 ? Double(mantissa) / powersOfTen[-scale] : Double(mantissa) * powersOfTen[scale]
            return .double(negative ? -magnitude : magnitude)
        }
        // Otherwise the standard library's correctly rounded conversion. The text matched the
        // grammar above, so only plain decimal syntax reaches it (no hex, "nan" or "inf").
        let text = String(decoding: UnsafeBufferPointer(start: p + start, count: i - start), as: UTF8.self)
        guard let number = Double(text), number.isFinite else { throw fail("number out of range", at: start) }
        return .double(number)
    }

    @inline(__always)
    func accumulate(_ digit: UInt8, into mantissa: inout UInt64, exact: inout Bool) {
        guard exact else { return }
        let (times10, o1) = mantissa.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times10.addingReportingOverflow(UInt64(digit &- zero))
        if o1 || o2 { exact = false } else { mantissa = sum }
    }

    // MARK: Strings

    /// Reads a string whose opening quote is just behind `i`, through its closing quote.
    mutating func readString() throws(SetteeError) -> String {
        try readString(keep: true) ?? ""
    }

    /// Reads a string through its closing quote, checking it as ``readString()`` does; builds the
    /// `String` only when `keep` is set (a body scan checks most strings without keeping them).
    @inline(__always)
    mutating func readString(keep: Bool) throws(SetteeError) -> String? {
        let start = i
        while i < end {
            skipPlainStringBytes()
            guard i < end else { break }
            let c = p[i]
            if c == quote {
                // No escapes: the bytes are the string (already validated as UTF-8).
                let text = keep ? String(decoding: UnsafeBufferPointer(start: p + start, count: i - start), as: UTF8.self) : nil
                i += 1
                return text
            }
            if c == backslash { return try readEscapedString(from: start, keep: keep) }
            if c < 0x20 { throw fail("control character in string") }
            if c < 0x80 { i += 1 } else { try skipUTF8Sequence() }
        }
        throw fail("unterminated string", at: start - 1)
    }

    /// Moves `i` past whole words of string bytes that need no attention: printable ASCII other
    /// than `"` and `\`. Stops at the word holding anything else, which the byte loop handles.
    /// (Each test may also fire on a harmless byte next to a real one; it never misses one.)
    @inline(__always)
    mutating func skipPlainStringBytes() {
        while i + 8 <= end {
            let x = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
            // Non-ASCII bytes stop it too: the byte loop validates their UTF-8.
            if (escapedBytes(in: x) | x) & 0x8080_8080_8080_8080 != 0 { return }
            i += 8
        }
    }

    /// The slow path, from the first backslash on: decoded bytes go to `scratch`.
    mutating func readEscapedString(from start: Int, keep: Bool) throws(SetteeError) -> String? {
        scratch.removeAll(keepingCapacity: true)
        var run = start
        while i < end {
            let c = p[i]
            if c == quote {
                i += 1
                guard keep else { return nil }
                scratch.append(contentsOf: UnsafeBufferPointer(start: p + run, count: i - 1 - run))
                return String(decoding: scratch, as: UTF8.self)
            }
            if c == backslash {
                // When not keeping, the scratch is left empty: only the checks below matter.
                if keep { scratch.append(contentsOf: UnsafeBufferPointer(start: p + run, count: i - run)) }
                guard i + 1 < end else { break }
                let decoded: UInt8
                switch p[i + 1] {
                case quote: decoded = quote
                case backslash: decoded = backslash
                case slash: decoded = slash
                case UInt8(ascii: "b"): decoded = 0x08
                case UInt8(ascii: "f"): decoded = 0x0C
                case UInt8(ascii: "n"): decoded = 0x0A
                case UInt8(ascii: "r"): decoded = 0x0D
                case UInt8(ascii: "t"): decoded = 0x09
                case UInt8(ascii: "u"):
                    let scalar = try readUnicodeEscape()
                    if keep { appendUTF8(scalar) }
                    run = i
                    continue
                default:
                    throw fail("invalid escape")
                }
                if keep { scratch.append(decoded) }
                i += 2
                run = i
            } else if c < 0x20 {
                throw fail("control character in string")
            } else if c < 0x80 {
                i += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw fail("unterminated string", at: start - 1)
    }

    /// Reads `\uXXXX` (and the low half of a surrogate pair) at `i`; returns the scalar.
    mutating func readUnicodeEscape() throws(SetteeError) -> UInt32 {
        let at = i
        guard let high = hex4(at: i + 2) else { throw fail("invalid \\u escape") }
        i += 6
        switch high {
        case 0xD800...0xDBFF:
            guard i + 1 < end, p[i] == backslash, p[i + 1] == UInt8(ascii: "u"),
                  let low = hex4(at: i + 2), (0xDC00...0xDFFF).contains(low)
            else { throw fail("unpaired surrogate in \\u escape", at: at) }
            i += 6
            return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        case 0xDC00...0xDFFF:
            throw fail("unpaired surrogate in \\u escape", at: at)
        default:
            return high
        }
    }

    func hex4(at j: Int) -> UInt32? {
        guard j >= 0, end - j >= 4 else { return nil }
        var result: UInt32 = 0
        for k in j..<(j + 4) {
            let c = p[k]
            let digit: UInt8
            switch c {
            case zero...nine: digit = c - zero
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            result = result << 4 | UInt32(digit)
        }
        return result
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Steps over one well-formed multi-byte UTF-8 sequence at `i` (Unicode table 3-7: no
    /// overlong forms, no surrogates, nothing past U+10FFFF).
    mutating func skipUTF8Sequence() throws(SetteeError) {
        let lead = p[i]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw fail("invalid UTF-8")
        }
        guard end - i >= length, p[i + 1] >= low, p[i + 1] <= high else { throw fail("invalid UTF-8") }
        for k in 2..<length where p[i + k] < 0x80 || p[i + k] > 0xBF {
            throw fail("invalid UTF-8")
        }
        i += length
    }
}

// MARK: - Public entry points

extension JSONValue {
    /// Parses JSON text (strict RFC 8259: one value, no comments, no trailing commas, no
    /// duplicate keys, at most 256 levels of nesting).
    ///
    /// Numbers without fraction or exponent that fit in 64 bits become ``int(_:)``, all others
    /// ``double(_:)``. Errors have code ``SetteeError/Code/invalidJSON`` and give the byte offset
    /// of the problem.
    ///
    /// ```swift
    /// let value = try JSONValue(parsing: #"{"title": "Groceries", "count": 2}"#)
    /// print(value["count"]?.intValue ?? 0)   // 2
    /// ```
    public init(parsing text: String) throws(SetteeError) {
        self = try JSONParser.parse(text)
    }

    /// Parses UTF-8 encoded JSON (the same rules as parsing a `String`); invalid UTF-8
    /// is an error.
    ///
    /// ```swift
    /// let bytes: [UInt8] = Array(#"[1, 2.5, "three"]"#.utf8)
    /// let value = try JSONValue(parsing: bytes)   // .array([.int(1), .double(2.5), .string("three")])
    /// ```
    public init(parsing bytes: [UInt8]) throws(SetteeError) {
        self = try JSONParser.parse(bytes)
    }

    /// Parses UTF-8 encoded JSON as ``init(parsing:)-([UInt8])`` does, except that a key
    /// repeated in an object keeps its last value instead of being an error: how CouchDB reads
    /// a Mango query.
    ///
    /// ```swift
    /// let selector = try JSONValue(parsing: Array(#"{"x": 1, "x": 2}"#.utf8), lastKeyWins: true)
    /// print(selector["x"]?.intValue ?? 0)   // 2
    /// ```
    @_spi(Server) public init(parsing bytes: [UInt8], lastKeyWins: Bool) throws(SetteeError) {
        self = try JSONParser.parse(bytes, lastKeyWins: lastKeyWins)
    }

    /// Parses UTF-8 encoded JSON from any byte collection, such as `Data` or an `ArraySlice`
    /// (the same rules as parsing a `String`).
    ///
    /// ```swift
    /// let data = try Data(contentsOf: url)
    /// let value = try JSONValue(parsing: data)
    /// ```
    public init<Bytes: Swift.Collection>(parsing bytes: Bytes) throws(SetteeError) where Bytes.Element == UInt8 {
        let contiguous = bytes.withContiguousStorageIfAvailable { buffer in
            Swift.Result { () throws(SetteeError) in try JSONParser.parse(UnsafeRawBufferPointer(buffer)) }
        }
        if let contiguous {
            self = try contiguous.get()
        } else {
            self = try JSONParser.parse(Array(bytes))
        }
    }
}

extension JSONParser {
    /// The members of a JSON object whose keys are in `keys`, each parsed as ``parse(_:maxDepth:)``
    /// parses; the values of the others are skipped without being built. A query reads a stored
    /// body this way when it needs a few properties of a large document.
    ///
    /// ```swift
    /// let some = try JSONParser.parseMembers(body, keys: ["type", "list"])   // ["type": "task", "list": …]
    /// ```
    ///
    /// A skipped value is only followed to its end (strings to their closing quote, containers
    /// to their matching bracket, depth bounded), not validated, and the reading stops once every
    /// wanted key is found: the bodies read this way were validated when they were stored (so
    /// they have no duplicate keys). What is returned is parsed in full.
    ///
    /// - Throws: ``SetteeError/Code/invalidJSON`` when the bytes are not an object or a value
    ///   is malformed.
    static func parseMembers(_ bytes: UnsafeRawBufferPointer, keys: Set<String>) throws(SetteeError) -> [String: JSONValue] {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw SetteeError(.invalidJSON, "unexpected end of input at byte 0")
        }
        var reader = Reader(base: base.assumingMemoryBound(to: UInt8.self), end: bytes.count, maxDepth: defaultMaxDepth)
        return try reader.parseMembers(keys: keys)
    }
}

extension Reader {
    mutating func parseMembers(keys: Set<String>) throws(SetteeError) -> [String: JSONValue] {
        skipWhitespace()
        guard i < end, p[i] == openBrace else { throw fail(i < end ? "expected an object" : "unexpected end of input") }
        i += 1
        // Made at its size at once (reserving on an empty one would allocate twice).
        var out = [String: JSONValue](minimumCapacity: keys.count)
        // A few wanted keys are matched by their bytes: a skipped member's key is never built
        // into a String nor hashed.
        let byBytes = keys.count <= 16
        var missing = keys.count
        skipWhitespace()
        if i < end, p[i] == closeBrace {
            i += 1
        } else {
            while true {
                skipWhitespace()
                guard i < end, p[i] == quote else { throw fail(i < end ? "expected a string key" : "unexpected end of input") }
                i += 1
                let keyStart = i
                _ = try readString(keep: false)
                let key = try wantedKey(at: keyStart, count: i - 1 - keyStart, keys: keys, byBytes: byBytes)
                skipWhitespace()
                guard i < end, p[i] == colon else { throw fail(i < end ? "expected ':'" : "unexpected end of input") }
                i += 1
                skipWhitespace()
                if let key {
                    out[key] = try memberValue()
                    // Stored bodies have no duplicate keys (the parser refuses them): once every
                    // wanted key is found, the rest need not be read.
                    missing -= 1
                    if missing == 0 { return out }
                } else {
                    try skipValue()
                }
                skipWhitespace()
                guard i < end else { throw fail("unexpected end of input") }
                if p[i] == comma {
                    i += 1
                    continue
                }
                guard p[i] == closeBrace else { throw fail("expected ',' or '}'") }
                i += 1
                break
            }
        }
        skipWhitespace()
        guard i == end else { throw fail("unexpected character after the value") }
        return out
    }

    /// One member's value, parsed in full: a scalar directly, a container by a reader of its
    /// own bytes (``parseDocument()``, which checks it whole).
    private mutating func memberValue() throws(SetteeError) -> JSONValue {
        guard i < end else { throw fail("unexpected end of input") }
        if let scalar = try readScalar() { return scalar }
        let start = i
        try skipValue()
        var value = Reader(base: p + start, end: i - start, maxDepth: maxDepth)
        return try value.parseDocument()
    }

    /// The string, literal or number at `i` (which is before the end), read through its last
    /// byte; nil, with `i` unmoved, for anything else (a container, or no value).
    @inline(__always)
    mutating func readScalar() throws(SetteeError) -> JSONValue? {
        switch p[i] {
        case quote:
            i += 1
            return .string(try readString())
        case UInt8(ascii: "t"):
            try readLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try readLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try readLiteral("null")
            return .null
        case minus, zero ... nine:
            return try readNumber()
        default:
            return nil
        }
    }

    /// The wanted key the raw (checked, quote-less) key bytes spell, or nil. Keys with escapes
    /// are decoded first.
    private func wantedKey(at start: Int, count: Int, keys: Set<String>, byBytes: Bool) throws(SetteeError) -> String? {
        let raw = UnsafeBufferPointer(start: p + start, count: count)
        if byBytes, !raw.contains(backslash) {
            for key in keys where key.utf8.count == count && key.utf8.elementsEqual(raw) {
                return key
            }
            return nil
        }
        // The key again, this time built: from its first byte through its closing quote.
        var again = Reader(base: p + start, end: count + 1, maxDepth: maxDepth)
        let key = try again.readString()
        return keys.contains(key) ? key : nil
    }

    /// Moves `i` past the rest of a string whose opening quote is behind it, without
    /// validating it: eight bytes at a time up to a quote or a backslash.
    @inline(__always)
    mutating func skipStringRest() throws(SetteeError) {
        while true {
            while i + 8 <= end {
                let m = quoteOrBackslash(in: UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)))
                if m != 0 {
                    i += m.trailingZeroBitCount >> 3
                    break
                }
                i += 8
            }
            while i < end && p[i] != quote && p[i] != backslash { i += 1 }
            guard i < end else { throw fail("unterminated string") }
            if p[i] == quote {
                i += 1
                return
            }
            i += 2
        }
    }

    /// Moves `i` past one value without building or validating it.
    mutating func skipValue() throws(SetteeError) {
        guard i < end else { throw fail("unexpected end of input") }
        let first = p[i]
        if first != quote && first != openBrace && first != openBracket {
            // A number or a literal: up to the next delimiter.
            while i < end {
                let c = p[i]
                if c == comma || c == closeBrace || c == closeBracket || c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { break }
                i += 1
            }
            return
        }
        var depth = 0
        repeat {
            guard i < end else { throw fail("unexpected end of input") }
            switch p[i] {
            case quote:
                i += 1
                try skipStringRest()
            case openBrace, openBracket:
                guard depth < maxDepth else { throw fail("nesting deeper than \(maxDepth) levels") }
                depth += 1
                i += 1
            case closeBrace, closeBracket:
                guard depth > 0 else { throw fail("unexpected character") }
                depth -= 1
                i += 1
            default:
                i += 1
            }
        } while depth > 0
    }
}

extension JSONParser {
    /// What a probe found at one path of an object.
    enum Probed: Equatable {
        /// The path leads nowhere (MISSING).
        case missing
        /// A scalar, parsed as ``parse(_:maxDepth:)`` parses it.
        case scalar(JSONValue)
        /// An array or an object, not built.
        case array, object
        /// A key on the way is spelled otherwise but equal as a `String` (canonical
        /// equivalence): the probe does not say which member a parse would find.
        case ambiguous
    }

    /// The member names a probe looks for in one object, made once from the paths probed: for
    /// each name, the paths (their slots in the probe's output) that end at it, and the names
    /// to look for inside it.
    ///
    /// ```swift
    /// let level = JSONParser.ProbeLevel(paths: [["priority"], ["list", "id"]])
    /// ```
    final class ProbeLevel: Sendable {
        let names: [[UInt8]]
        let strings: [String]
        let ending: [[Int]]
        let deeper: [ProbeLevel?]
        /// How many slots a probe with this level at the top fills.
        let slots: Int

        /// The level for `paths` (member names, outermost first; none empty).
        convenience init(paths: [[String]]) {
            self.init(paths: paths.enumerated().map { ($0.offset, $0.element[...]) })
        }

        private init(paths: [(slot: Int, names: ArraySlice<String>)]) {
            var strings: [String] = [], ending: [[Int]] = [], rest: [[(slot: Int, names: ArraySlice<String>)]] = []
            for (slot, names) in paths {
                guard let first = names.first else { continue }
                let i = strings.firstIndex(of: first) ?? {
                    strings.append(first)
                    ending.append([])
                    rest.append([])
                    return strings.count - 1
                }()
                if names.count == 1 { ending[i].append(slot) } else { rest[i].append((slot, names.dropFirst())) }
            }
            self.strings = strings
            self.names = strings.map { Array($0.utf8) }
            self.ending = ending
            self.deeper = rest.map { $0.isEmpty ? nil : ProbeLevel(paths: $0) }
            self.slots = paths.count
        }
    }

    /// The values at the paths of `level` in the JSON object `bytes`, into `found` (one slot per
    /// path, reset here), in one pass that builds nothing but the scalars found: skipped values
    /// are followed to their end, not validated (stored bodies were validated when written, and
    /// have no duplicate keys), and the reading stops once every top-level name is read. A query
    /// decides most of a scan's documents this way without parsing them into a row.
    ///
    /// ```swift
    /// try JSONParser.probe(body, level: level, into: &found)   // found[0]: .scalar(3)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidJSON`` when the bytes are not an object or a value
    ///   read is malformed.
    static func probe(_ bytes: UnsafeRawBufferPointer, level: ProbeLevel, into found: inout [Probed]) throws(SetteeError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw SetteeError(.invalidJSON, "unexpected end of input at byte 0")
        }
        if found.count != level.slots { found = [Probed](repeating: .missing, count: level.slots) } else {
            for i in found.indices { found[i] = .missing }
        }
        var reader = Reader(base: base.assumingMemoryBound(to: UInt8.self), end: bytes.count, maxDepth: defaultMaxDepth)
        reader.skipWhitespace()
        try reader.probeObject(level, depth: 0, into: &found, stopWhenDone: true)
    }
}

extension Reader {
    /// Reads the object at `i` (through its closing brace, unless `stopWhenDone` and every name
    /// of `level` was read), recording in `found` what the paths through it lead to.
    mutating func probeObject(_ level: JSONParser.ProbeLevel, depth: Int, into found: inout [JSONParser.Probed],
                              stopWhenDone: Bool) throws(SetteeError) {
        guard depth < maxDepth else { throw fail("nesting deeper than \(maxDepth) levels") }
        guard i < end, p[i] == openBrace else { throw fail(i < end ? "expected an object" : "unexpected end of input") }
        i += 1
        var unread = level.names.count
        skipWhitespace()
        if i < end, p[i] == closeBrace {
            i += 1
            return
        }
        while true {
            skipWhitespace()
            guard i < end, p[i] == quote else { throw fail(i < end ? "expected a string key" : "unexpected end of input") }
            i += 1
            let keyStart = i
            // Keys were checked when the body was stored: only their end is looked for.
            try skipStringRest()
            let keyCount = i - 1 - keyStart
            skipWhitespace()
            guard i < end, p[i] == colon else { throw fail(i < end ? "expected ':'" : "unexpected end of input") }
            i += 1
            skipWhitespace()
            var matched = -1
            for (n, name) in level.names.enumerated() where name.count == keyCount {
                if name.withUnsafeBytes({ memcmp($0.baseAddress!, p + keyStart, keyCount) }) == 0 {
                    matched = n
                    break
                }
            }
            if matched < 0 {
                try markAmbiguous(level, keyStart: keyStart, keyCount: keyCount, in: &found)
                try skipValue()
            } else {
                unread -= 1
                guard i < end else { throw fail("unexpected end of input") }
                let ending = level.ending[matched]
                switch p[i] {
                case openBrace:
                    for slot in ending where found[slot] != .ambiguous { found[slot] = .object }
                    if let deeper = level.deeper[matched] {
                        try probeObject(deeper, depth: depth + 1, into: &found, stopWhenDone: false)
                    } else {
                        try skipValue()
                    }
                case openBracket:
                    for slot in ending where found[slot] != .ambiguous { found[slot] = .array }
                    try skipValue()
                default:
                    guard let value = try readScalar() else { throw fail("unexpected character") }
                    for slot in ending where found[slot] != .ambiguous { found[slot] = .scalar(value) }
                }
                // Stored bodies have no duplicate keys: once each name is read, the rest need
                // not be.
                if stopWhenDone && unread == 0 { return }
            }
            skipWhitespace()
            guard i < end else { throw fail("unexpected end of input") }
            if p[i] == comma {
                i += 1
                continue
            }
            guard p[i] == closeBrace else { throw fail("expected ',' or '}'") }
            i += 1
            return
        }
    }

    /// A key spelled otherwise than every name but, having escapes or non-ASCII bytes, perhaps
    /// equal to one as a `String` (canonical equivalence, as a dictionary compares keys): what
    /// a parse finds at the paths through that name is not certain, so they are ambiguous.
    private func markAmbiguous(_ level: JSONParser.ProbeLevel, keyStart: Int, keyCount: Int,
                               in found: inout [JSONParser.Probed]) throws(SetteeError) {
        var plain = true
        for k in keyStart ..< keyStart + keyCount where p[k] >= 0x80 || p[k] == backslash {
            plain = false
            break
        }
        if plain { return }
        var again = Reader(base: p + keyStart, end: keyCount + 1, maxDepth: maxDepth)
        let key = try again.readString()
        for (n, name) in level.strings.enumerated() where name == key {
            markAll(level, n, in: &found)
        }
    }

    private func markAll(_ level: JSONParser.ProbeLevel, _ n: Int, in found: inout [JSONParser.Probed]) {
        for slot in level.ending[n] { found[slot] = .ambiguous }
        if let deeper = level.deeper[n] {
            for m in deeper.names.indices { markAll(deeper, m, in: &found) }
        }
    }
}
