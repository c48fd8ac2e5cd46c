/// Writes ``JSONValue``s as canonical JSON.
///
/// The bytes are hashed into revision IDs, so one value must give the same bytes on every run and
/// machine: object keys sorted by their UTF-8 bytes, no whitespace, only the escapes JSON
/// requires, integers in plain decimal, doubles in Swift's shortest round-trip form.
enum JSONWriter {
    /// Appends the canonical JSON of `value`.
    ///
    /// Throws ``SetteeError/Code/invalidJSON`` for NaN or infinite doubles and for nesting deeper
    /// than `maxDepth` (by default what ``JSONParser`` accepts, so the output can be read back).
    static func write(_ value: JSONValue, into out: inout [UInt8], maxDepth: Int = JSONParser.defaultMaxDepth) throws(SetteeError) {
        var digests: [String] = []
        var buffer = ByteBuffer()
        defer { buffer.release() }
        try writeValue(value, into: &buffer, depth: 0, maxDepth: maxDepth, lenient: false, blobDigests: &digests)
        buffer.append(to: &out)
    }

    /// The canonical JSON of a document body, and the digests of the blobs it references (each
    /// object with `"@type": "blob"` and a string `digest`, at any depth), found in the same pass.
    static func body(_ properties: [String: JSONValue], blobDigests: inout [String]) throws(SetteeError) -> [UInt8] {
        var buffer = ByteBuffer()
        defer { buffer.release() }
        try writeMembers(properties, into: &buffer, depth: 1, maxDepth: JSONParser.defaultMaxDepth, lenient: false, blobDigests: &blobDigests)
        return buffer.array
    }

    /// The canonical JSON of `value`.
    static func bytes(_ value: JSONValue, maxDepth: Int = JSONParser.defaultMaxDepth) throws(SetteeError) -> [UInt8] {
        var digests: [String] = []
        var buffer = ByteBuffer()
        defer { buffer.release() }
        try writeValue(value, into: &buffer, depth: 0, maxDepth: maxDepth, lenient: false, blobDigests: &digests)
        return buffer.array
    }

    /// Appends the canonical JSON of an object (a document body) without wrapping it in a value.
    static func writeObject(_ object: [String: JSONValue], into out: inout [UInt8], maxDepth: Int = JSONParser.defaultMaxDepth) throws(SetteeError) {
        var digests: [String] = []
        var buffer = ByteBuffer()
        defer { buffer.release() }
        try writeMembers(object, into: &buffer, depth: 1, maxDepth: maxDepth, lenient: false, blobDigests: &digests)
        buffer.append(to: &out)
    }

    /// For `description`: never throws; non-finite numbers show as `NaN`, `Infinity`, `-Infinity`
    /// and nesting is not limited.
    static func writeForDescription(_ value: JSONValue, into out: inout [UInt8]) {
        var digests: [String] = []
        var buffer = ByteBuffer()
        defer { buffer.release() }
        try? writeValue(value, into: &buffer, depth: 0, maxDepth: .max, lenient: true, blobDigests: &digests)
        buffer.append(to: &out)
    }

    // MARK: Values

    private static func writeValue(_ value: JSONValue, into out: inout ByteBuffer, depth: Int, maxDepth: Int, lenient: Bool,
                                   blobDigests: inout [String]) throws(SetteeError) {
        switch value {
        case .null:
            out.append("null")
        case .bool(true):
            out.append("true")
        case .bool(false):
            out.append("false")
        case .int(let number):
            writeInt(number, into: &out)
        case .double(let number):
            try writeDouble(number, into: &out, lenient: lenient)
        case .string(let text):
            writeString(text, into: &out)
        case .array(let elements):
            guard depth < maxDepth else { throw tooDeep(maxDepth) }
            out.append(UInt8(ascii: "["))
            for (n, element) in elements.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                try writeValue(element, into: &out, depth: depth + 1, maxDepth: maxDepth, lenient: lenient, blobDigests: &blobDigests)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            try writeMembers(members, into: &out, depth: depth + 1, maxDepth: maxDepth, lenient: lenient, blobDigests: &blobDigests)
        }
    }

    /// `depth` counts this object itself.
    private static func writeMembers(_ members: [String: JSONValue], into out: inout ByteBuffer, depth: Int, maxDepth: Int, lenient: Bool,
                                     blobDigests: inout [String]) throws(SetteeError) {
        guard depth <= maxDepth else { throw tooDeep(maxDepth) }
        out.append(UInt8(ascii: "{"))
        let n = members.count
        // One pass over the dictionary moves each key and value into a stack buffer (one
        // retain each; reading them through the dictionary's indices retained them again for
        // every use), then a permutation is sorted, and the members are written borrowed from
        // the buffer. Byte order, not `String.<` (which compares canonically equivalent forms
        // as equal and is not plain code point order); each member carries its key's first
        // eight bytes as a number, so most comparisons are one integer comparison.
        let result: Swift.Result<Void, SetteeError> = withUnsafeTemporaryAllocation(of: Member.self, capacity: max(n, 1)) { buffer in
            var count = 0
            for (key, value) in members {
                buffer.initializeElement(at: count, to: Member(prefix: sortPrefix(key), key: key, value: value))
                count += 1
            }
            defer { _ = buffer.prefix(count).deinitialize() }
            return withUnsafeTemporaryAllocation(of: Int.self, capacity: max(count, 1)) { order in
                if count <= 16 {
                    // Insertion sort: most objects have few members.
                    for i in 0..<count {
                        var j = i
                        while j > 0, precedes(buffer, i, order[j - 1]) {
                            order[j] = order[j - 1]
                            j -= 1
                        }
                        order[j] = i
                    }
                } else {
                    var all = order
                    for i in 0..<count { all[i] = i }
                    all.sort { precedes(buffer, $0, $1) }
                }
                return Swift.Result { () throws(SetteeError) in
                    var isBlob = false
                    for k in 0..<count {
                        if k > 0 { out.append(UInt8(ascii: ",")) }
                        let m = order[k]
                        writeString(buffer[m].key, into: &out)
                        out.append(UInt8(ascii: ":"))
                        if buffer[m].prefix == typePrefix, buffer[m].key == "@type", case .string("blob") = buffer[m].value { isBlob = true }
                        try writeValue(buffer[m].value, into: &out, depth: depth, maxDepth: maxDepth, lenient: lenient,
                                       blobDigests: &blobDigests)
                    }
                    if isBlob, case .string(let digest)? = members["digest"] { blobDigests.append(digest) }
                }
            }
        }
        try result.get()
        out.append(UInt8(ascii: "}"))
    }

    /// Whether member `a` sorts before member `b` (their keys' UTF-8 bytes in order).
    @inline(__always)
    private static func precedes(_ members: UnsafeMutableBufferPointer<Member>, _ a: Int, _ b: Int) -> Bool {
        let pa = members[a].prefix, pb = members[b].prefix
        return pa != pb ? pa < pb : utf8Precedes(members[a].key, members[b].key)
    }

    /// A member moved out of its dictionary, with the sort key of ``sortPrefix(_:)``.
    private struct Member {
        var prefix: UInt64
        var key: String
        var value: JSONValue
    }

    /// `sortPrefix("@type")`: only keys with this prefix need comparing to `@type`.
    private static let typePrefix = sortPrefix("@type")

    /// A key's first eight UTF-8 bytes as a big-endian number, zero-padded: keys whose numbers
    /// differ are in the order of their numbers; equal numbers need the bytes compared.
    @inline(__always)
    private static func sortPrefix(_ key: String) -> UInt64 {
        var value: UInt64 = 0
        var shift = 56
        for byte in key.utf8 {
            value |= UInt64(byte) << UInt64(shift)
            shift -= 8
            if shift < 0 { break }
        }
        return value
    }

    private static func tooDeep(_ maxDepth: Int) -> SetteeError {
        SetteeError(.invalidJSON, "nesting deeper than \(maxDepth) levels")
    }

    // MARK: Scalars

    static func writeInt(_ number: Int64, into out: inout ByteBuffer) {
        if number < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude
        if magnitude == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        // 20 digits hold UInt64.max; fill from the right.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            while magnitude > 0 {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            out.append(UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    static func writeDouble(_ number: Double, into out: inout ByteBuffer, lenient: Bool) throws(SetteeError) {
        guard number.isFinite else {
            guard lenient else { throw SetteeError(.invalidJSON, "not a finite number") }
            out.append(number.isNaN ? "NaN" : number < 0 ? "-Infinity" : "Infinity")
            return
        }
        // Swift's `description` is the shortest text that reads back as the same Double and is
        // always JSON number syntax ("1.5", "1e-05", "-0.0", "1e+300"). Integral values keep
        // their ".0" (or exponent), so they read back as doubles and not as integers.
        var text = number.description
        var isIntegral = true
        for c in text.utf8 where c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
            isIntegral = false
            break
        }
        text.withUTF8 { out.append($0) }
        if isIntegral { out.append(".0") }
    }

    static func writeString(_ text: String, into out: inout ByteBuffer) {
        out.append(UInt8(ascii: "\""))
        if text.utf8.withContiguousStorageIfAvailable({ writeEscaped($0, into: &out) }) == nil {
            var copy = text
            copy.withUTF8 { writeEscaped($0, into: &out) }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Only `"`, `\` and control characters are escaped; all else is copied as UTF-8.
    private static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout ByteBuffer) {
        let hexDigits: StaticString = "0123456789abcdef"
        var run = 0
        var j = 0
        let count = bytes.count
        var tailTried = false
        while j < count {
            // Eight bytes at a time while none needs escaping (a neighbour of one that does may be
            // marked too; the byte test below clears it).
            if let base = bytes.baseAddress {
                if j + 8 <= count {
                    if escapedBytes(in: UnsafeRawPointer(base + j).loadUnaligned(as: UInt64.self)) == 0 {
                        j += 8
                        continue
                    }
                } else if !tailTried {
                    // The last few bytes (most keys and short strings are only these), padded
                    // with a plain byte to a word: when none needs escaping, the rest is copied.
                    tailTried = true
                    var word: UInt64 = 0x4141_4141_4141_4141
                    withUnsafeMutableBytes(of: &word) { $0.baseAddress!.copyMemory(from: base + j, byteCount: count - j) }
                    if escapedBytes(in: word) == 0 { break }
                }
            }
            let c = bytes[j]
            j += 1
            guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
            let at = j - 1
            out.append(UnsafeBufferPointer(rebasing: bytes[run..<at]))
            out.append(UInt8(ascii: "\\"))
            switch c {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            default:
                out.append("u00")
                out.append(hexDigits.utf8Start[Int(c >> 4)])
                out.append(hexDigits.utf8Start[Int(c & 0x0F)])
            }
            run = at + 1
        }
        out.append(UnsafeBufferPointer(rebasing: bytes[run..<bytes.count]))
    }

    /// Lexicographic order of the UTF-8 bytes (the same as code point order).
    static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        let fast = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                let n = min(x.count, y.count)
                for k in 0..<n where x[k] != y[k] {
                    return x[k] < y[k]
                }
                return x.count < y.count
            }
        }
        if let fast, let result = fast { return result }
        return a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

// MARK: - Public entry points

extension JSONValue {
    /// The canonical JSON text of this value: object keys sorted by their UTF-8 bytes, no
    /// whitespace, only `"`, `\` and control characters escaped, integers in decimal and doubles
    /// in their shortest round-trip form. Equal values give identical text on every machine.
    ///
    /// Throws ``SetteeError/Code/invalidJSON`` for NaN or infinite doubles, which JSON cannot
    /// represent, and for nesting deeper than 256 levels.
    ///
    /// ```swift
    /// let value: JSONValue = ["b": [1, 2.5], "a": "x/y"]
    /// print(try value.jsonText())   // {"a":"x/y","b":[1,2.5]}
    /// ```
    public func jsonText() throws(SetteeError) -> String {
        String(decoding: try JSONWriter.bytes(self), as: UTF8.self)
    }

    /// The canonical JSON of this value as UTF-8 bytes (see ``jsonText()``).
    ///
    /// ```swift
    /// let value: JSONValue = ["done": false]
    /// let bytes = try value.jsonBytes()   // Array(#"{"done":false}"#.utf8)
    /// ```
    public func jsonBytes() throws(SetteeError) -> [UInt8] {
        try JSONWriter.bytes(self)
    }

    /// The canonical JSON of this value as UTF-8 bytes, nested at most `maxDepth` levels (an
    /// object or array is one level). For text that wraps stored documents in a few levels of its
    /// own, such as a server's response, where ``jsonBytes()`` would refuse a document stored at
    /// the parser's own limit.
    ///
    /// ```swift
    /// let response: JSONValue = ["results": [["doc": doc]]]
    /// let bytes = try response.jsonBytes(maxDepth: 264)
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidJSON`` for NaN or infinite doubles, and for nesting
    ///   deeper than `maxDepth`.
    public func jsonBytes(maxDepth: Int) throws(SetteeError) -> [UInt8] {
        try JSONWriter.bytes(self, maxDepth: maxDepth)
    }

    /// The deepest nesting JSON text may have to be parsed into a value (and the deepest
    /// ``jsonBytes()`` writes): 256 levels of arrays and objects. Deeper text is
    /// ``SetteeError/Code/invalidJSON``, so no document a database holds is deeper.
    ///
    /// ```swift
    /// let bytes = try response.jsonBytes(maxDepth: JSONValue.maxParsedDepth + 8)
    /// ```
    public static var maxParsedDepth: Int { JSONParser.defaultMaxDepth }

    /// How many levels of arrays and objects this value nests: 0 for a scalar, 1 for `{}` or
    /// `[1]`, 2 for `{"a": [1]}`. Computed without recursion, whatever the depth.
    ///
    /// ```swift
    /// let value: JSONValue = ["list": ["items": [1, 2]]]
    /// print(value.nestingDepth)   // 3
    /// ```
    public var nestingDepth: Int {
        var deepest = 0
        var pending: [(JSONValue, Int)] = [(self, 0)]
        while let (value, depth) = pending.popLast() {
            switch value {
            case .array(let a):
                deepest = max(deepest, depth + 1)
                for v in a where v.isContainer { pending.append((v, depth + 1)) }
            case .object(let o):
                deepest = max(deepest, depth + 1)
                for v in o.values where v.isContainer { pending.append((v, depth + 1)) }
            default:
                break
            }
        }
        return deepest
    }

    private var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    /// JSON laid out for people: one member or element per line, two-space indents, keys sorted
    /// as in ``jsonText()`` (whose text each scalar is).
    ///
    /// ```swift
    /// let value: JSONValue = ["name": "Groceries", "items": [1, 2]]
    /// print(try value.prettyJSONText())
    /// // {
    /// //   "items": [
    /// //     1,
    /// //     2
    /// //   ],
    /// //   "name": "Groceries"
    /// // }
    /// ```
    ///
    /// - Throws: as ``jsonText()``.
    public func prettyJSONText() throws(SetteeError) -> String {
        var out = ""
        try Self.writePretty(self, indent: 0, depth: 0, into: &out)
        return out
    }

    private static func writePretty(_ value: JSONValue, indent: Int, depth: Int, into out: inout String) throws(SetteeError) {
        guard depth <= 256 else { throw SetteeError(.invalidJSON, "JSON nested deeper than 256 levels") }
        let pad = String(repeating: "  ", count: indent + 1), end = String(repeating: "  ", count: indent)
        switch value {
        case .array(let a) where !a.isEmpty:
            out += "[\n"
            for (i, v) in a.enumerated() {
                out += pad
                try writePretty(v, indent: indent + 1, depth: depth + 1, into: &out)
                out += i < a.count - 1 ? ",\n" : "\n"
            }
            out += end + "]"
        case .object(let o) where !o.isEmpty:
            out += "{\n"
            let keys = o.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (i, k) in keys.enumerated() {
                out += pad + (try JSONValue.string(k).jsonText()) + ": "
                try writePretty(o[k] ?? .null, indent: indent + 1, depth: depth + 1, into: &out)
                out += i < keys.count - 1 ? ",\n" : "\n"
            }
            out += end + "}"
        default:
            out += try value.jsonText()
        }
    }
}
