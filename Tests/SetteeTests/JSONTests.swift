import Foundation
import Testing
@_spi(Replication) @testable import Settee

/// The JSON parser and canonical writer, SHA-1, the Codable bridge and ISO-8601 dates.
@Suite struct JSONTests {
    @Test func prettyTextIsIndentedSortedAndParsesBack() throws {
        let value: JSONValue = ["name": "a \"quoted\" <b>", "items": [1, 2.5, [:], []], "nested": ["z": .null, "a": true]]
        let text = try value.prettyJSONText()
        #expect(text == """
            {
              "items": [
                1,
                2.5,
                {},
                []
              ],
              "name": "a \\"quoted\\" <b>",
              "nested": {
                "a": true,
                "z": null
              }
            }
            """)
        #expect(try JSONValue(parsing: Array(text.utf8)) == value)
        #expect(throws: SetteeError.self) { try JSONValue.double(.nan).prettyJSONText() }
    }

    // MARK: Parsing and writing

    @Test func scalarsParseToTheRightCases() throws {
        #expect(try JSONParser.parse("null") == .null)
        #expect(try JSONParser.parse("true") == .bool(true))
        #expect(try JSONParser.parse(" false ") == .bool(false))
        #expect(try JSONParser.parse("0") == .int(0))
        #expect(try JSONParser.parse("-0") == .int(0))
        #expect(try JSONParser.parse("42") == .int(42))
        #expect(try JSONParser.parse("-17") == .int(-17))
        #expect(try JSONParser.parse("9223372036854775807") == .int(.max))
        #expect(try JSONParser.parse("-9223372036854775808") == .int(.min))
        #expect(try JSONParser.parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try JSONParser.parse("-9223372036854775809") == .double(-9.223372036854775808e18))
        #expect(try JSONParser.parse("123456789012345678901234567890") == .double(1.2345678901234568e29))
        #expect(try JSONParser.parse("1.5") == .double(1.5))
        #expect(try JSONParser.parse("2.0") == .double(2))
        #expect(try JSONParser.parse("1E5") == .double(100_000))
        #expect(try JSONParser.parse("1e-5") == .double(0.00001))
        #expect(try JSONParser.parse("-1.5E+3") == .double(-1500))
        #expect(try JSONParser.parse("1e300") == .double(1e300))
        #expect(try JSONParser.parse("0.1") == .double(0.1))
        #expect(try JSONParser.parse("1e-400") == .double(0))
        #expect(try JSONParser.parse("\"\"") == .string(""))
        let negativeZero = try JSONParser.parse("-0.0")
        #expect(negativeZero.doubleValue?.sign == .minus)
    }

    @Test func escapesAndUnicodeDecode() throws {
        let text = #""\"\\\/\b\f\n\r\t\u0041\u00e9\u00E9\ud83d\ude00\u0000 é😀""#
        #expect(try JSONParser.parse(text) == .string("\"\\/\u{8}\u{c}\n\r\tAéé😀\u{0} é😀"))
        #expect(try JSONParser.parse(#""\u20AC""#) == .string("€"))
        #expect(try JSONParser.parse(#""\uDBFF\uDFFF""#) == .string("\u{10FFFF}"))
        // Raw UTF-8 of every length, and an escape after it (the slow path keeps the prefix).
        #expect(try JSONParser.parse("\"aé€😀\\n\"") == .string("aé€😀\n"))
        #expect(try JSONParser.parse(Array("\"\u{7F}\"".utf8)) == .string("\u{7F}"))
    }

    @Test func nestedStructuresAndWhitespace() throws {
        let text = " \t\n\r{ \"a\" : [ 1 , 2.5 , { } , [ ] , \"x\" ] ,\n\"b\":{\"c\":null,\"d\":[[[true]]]}}\r\n "
        let expected: JSONValue = ["a": [1, 2.5, [:], [], "x"], "b": ["c": nil, "d": [[[true]]]]]
        #expect(try JSONParser.parse(text) == expected)
        #expect(try JSONParser.parse(Array(text.utf8)) == expected)
        #expect(try JSONValue(parsing: text) == expected)
        #expect(try JSONValue(parsing: Data(text.utf8)) == expected)
        #expect(try JSONValue(parsing: Array(text.utf8)[...]) == expected)
    }

    @Test func canonicalOutputHasSortedKeysAndNoWhitespace() throws {
        let doc: JSONValue = [
            "b": 1, "a": [true, false, nil], "é": "x", "Z": 1.5, "": -0.0,
            "aa": ["y": "\u{1}\n\"\\/", "x": [:], "w": []],
            "n": .int(.min), "big": 1e300,
        ]
        let expected = #"{"":-0.0,"Z":1.5,"a":[true,false,null],"aa":{"w":[],"x":{},"y":"\u0001\n\"\\/"},"b":1,"big":1e+300,"n":-9223372036854775808,"é":"x"}"#
        #expect(try doc.jsonText() == expected)
        #expect(try doc.jsonBytes() == Array(expected.utf8))
        #expect(try JSONWriter.bytes(doc) == Array(expected.utf8))
        #expect(doc.description == expected)
        #expect(try JSONParser.parse(expected) == doc)

        // Keys go in UTF-8 byte order, not `String`'s canonical order: decomposed "é" starts
        // with "e" and sorts before "f"; U+FF61 sorts before U+1F600 (UTF-16 order would not).
        let tricky: JSONValue = ["f": 1, "e\u{301}": 2, "😀": 3, "\u{FF61}": 4, "\u{7F}": 5, "~": 6]
        #expect(try tricky.jsonBytes() == Array("{\"e\u{301}\":2,\"f\":1,\"~\":6,\"\u{7F}\":5,\"\u{FF61}\":4,\"😀\":3}".utf8))

        var out: [UInt8] = Array("x".utf8)
        try JSONWriter.writeObject(["b": 2, "a": 1], into: &out)
        #expect(out == Array(#"x{"a":1,"b":2}"#.utf8))
    }

    @Test func stringsEscapeOnlyWhatJSONRequires() throws {
        var all = ""
        for scalar in 0..<0x20 { all.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        let expected = #""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f""#
        #expect(try JSONValue.string(all).jsonText() == expected)
        #expect(try JSONParser.parse(expected) == .string(all))
        #expect(try JSONValue.string("a/b\"c\\d\u{7F}é€😀").jsonText() == "\"a/b\\\"c\\\\d\u{7F}é€😀\"")
    }

    /// The writer skips runs of plain bytes a word at a time; a byte that needs escaping is found
    /// at every position of a word, next to multi-byte characters too, and keys sort by their
    /// bytes whether they differ in the first eight or only later.
    @Test func escapingAndKeyOrderHoldAtEveryPosition() throws {
        func reference(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\u{01}": out += "\\u0001"
                case "\u{1F}": out += "\\u001f"
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        for special in ["\"", "\\", "\n", "\u{01}", "\u{1F}"] {
            // Short strings, whose bytes are all a padded last word, at every length up to 9.
            for length in 1 ... 9 {
                for at in 0 ..< length {
                    let text = String(repeating: "a", count: at) + special + String(repeating: "b", count: length - 1 - at)
                    #expect(try JSONValue.string(text).jsonText() == reference(text), "\(length) \(at)")
                }
            }
            for at in 0 ..< 26 {
                for tail in ["", "é", "xyz€"] {
                    let text = String(repeating: "a", count: at) + special + String(repeating: "b", count: 25 - at) + tail
                    #expect(try JSONValue.string(text).jsonText() == reference(text), "\(at) \(tail)")
                    #expect(try JSONParser.parse(JSONValue.string(text).jsonText()) == .string(text))
                }
            }
        }
        let keys = ["abcdefgh2", "abcdefgh1", "abcdefgh", "abcdefg", "b", "", "a\u{01}", "a", "é", "e", "abcdefgi", "Z"]
        var object: [String: JSONValue] = [:]
        for (n, key) in keys.enumerated() { object[key] = .int(Int64(n)) }
        let sorted = keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let expected = "{" + sorted.map { "\(reference($0)):\(object[$0]!.intValue!)" }.joined(separator: ",") + "}"
        #expect(try JSONValue.object(object).jsonText() == expected)

        // Objects of more than 16 members take the general sort: the same order, at every size
        // around that bound and for many keys sharing their first eight bytes.
        for size in [15, 16, 17, 40, 600] {
            var big = object
            for n in 0 ..< size { big["abcdefgh-\(n * 7919 % 1000)"] = .int(Int64(n)) }
            let order = big.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let text = "{" + order.map { "\(reference($0)):\(big[$0]!.intValue!)" }.joined(separator: ",") + "}"
            #expect(try JSONValue.object(big).jsonText() == text, "\(size)")
        }
    }

    @Test func doublesAreShortestAndReadBackExactly() throws {
        let cases: [(Double, String)] = [
            (1.5, "1.5"), (0.00001, "1e-05"), (2.0, "2.0"), (-0.0, "-0.0"), (0.0, "0.0"), (0.1, "0.1"),
            (1e300, "1e+300"), (1e16, "1e+16"), (123_456_789, "123456789.0"), (-2.5e-8, "-2.5e-08"),
            (.leastNonzeroMagnitude, "5e-324"), (.greatestFiniteMagnitude, "1.7976931348623157e+308"),
            (9_007_199_254_740_992, "9007199254740992.0"),
        ]
        for (number, text) in cases {
            #expect(try JSONValue.double(number).jsonText() == text)
            let back = try JSONParser.parse(text)
            #expect(back.doubleValue?.bitPattern == number.bitPattern, "\(text)")
            guard case .double = back else { Issue.record("\(text) read back as \(back)"); continue }
        }

        // Random bit patterns: every finite double survives write → parse bit for bit.
        var random = SeededGenerator(seed: 0x5EED)
        for _ in 0..<20_000 {
            let number = Double(bitPattern: random.next())
            guard number.isFinite else { continue }
            let bytes = try JSONWriter.bytes(.double(number))
            #expect(!bytes.contains(where: { $0 == UInt8(ascii: "i") || $0 == UInt8(ascii: "n") }))
            let back = try JSONParser.parse(bytes)
            guard case .double(let parsed) = back, parsed.bitPattern == number.bitPattern else {
                Issue.record("\(number) did not round-trip: \(back)")
                return
            }
        }
    }

    @Test func decimalTextConvertsLikeTheStandardLibrary() throws {
        // Short decimals take an exact fast path; every one must equal the correctly rounded
        // conversion, bit for bit.
        var random = SeededGenerator(seed: 1979)
        func digits(_ count: Int) -> String { String((0..<count).map { _ in Character(String(random.below(10))) }) }
        for _ in 0..<50_000 {
            var text = random.below(3) == 0 ? "-" : ""
            text += random.below(4) == 0 ? "0" : String(random.below(9) + 1) + digits(random.below(12))
            if random.below(4) != 0 { text += "." + digits(random.below(14) + 1) }
            if random.below(2) == 0 {
                text += ["e", "E", "e+", "e-", "E-"][random.below(5)] + String(random.below(30))
            }
            let parsed = try JSONParser.parse(text)
            let expected = Double(text)!
            switch parsed {
            case .int(let integer):
                #expect(!text.contains(".") && !text.contains("e") && !text.contains("E") && Double(integer) == expected, "\(text)")
            case .double(let number):
                #expect(number.bitPattern == expected.bitPattern, "\(text)")
                if number.bitPattern != expected.bitPattern { return }
            default:
                Issue.record("\(text) parsed as \(parsed)")
            }
        }
        for text in ["9007199254740993.0", "9007199254740992.5", "0.1e23", "1e22", "1e23", "123456789012345678e-5",
                     "4.9406564584124654e-324", "2.2250738585072011e-308", "1.7976931348623158e308", "0.00000000000000000000001"] {
            #expect(try JSONParser.parse(text).doubleValue?.bitPattern == Double(text)!.bitPattern, "\(text)")
        }
    }

    @Test func nonFiniteNumbersAreNotWritten() {
        for bad in [Double.nan, .infinity, -.infinity, .signalingNaN] {
            let error = #expect(throws: SetteeError.self) { try JSONValue.double(bad).jsonBytes() }
            #expect(error?.code == .invalidJSON)
            #expect(error?.message.contains("not a finite number") == true)
            let nested: JSONValue = ["a": [1, ["b": .double(bad)]]]
            #expect(throws: SetteeError.self) { try nested.jsonText() }
        }
        let shown: JSONValue = ["x": .double(.nan), "y": .double(-.infinity)]
        #expect(shown.description == #"{"x":NaN,"y":-Infinity}"#)
    }

    @Test func rejectsWhatIsNotJSON() {
        let cases: [(String, String)] = [
            ("", "unexpected end of input at byte 0"),
            ("   ", "unexpected end of input at byte 3"),
            ("[1,]", "unexpected character at byte 3"),
            ("{\"a\":1,}", "expected a string key at byte 7"),
            ("[1 2]", "expected ',' or ']' at byte 3"),
            ("{\"a\" 1}", "expected ':' at byte 5"),
            ("{\"a\":1 \"b\":2}", "expected ',' or '}' at byte 7"),
            ("{1:2}", "expected a string key at byte 1"),
            ("01", "leading zero in number at byte 0"),
            ("-01", "leading zero in number at byte 0"),
            ("[00]", "leading zero in number at byte 1"),
            ("+1", "unexpected character at byte 0"),
            ("-", "expected a digit at byte 1"),
            ("1.", "expected a digit after the decimal point at byte 2"),
            (".5", "unexpected character at byte 0"),
            ("1e", "expected a digit in the exponent at byte 2"),
            ("1e+", "expected a digit in the exponent at byte 3"),
            ("0x10", "unexpected character after the value at byte 1"),
            ("NaN", "unexpected character at byte 0"),
            ("Infinity", "unexpected character at byte 0"),
            ("-Infinity", "expected a digit at byte 1"),
            ("1e999", "number out of range at byte 0"),
            ("[-1.5e400]", "number out of range at byte 1"),
            ("tru", "invalid literal at byte 0"),
            ("nul", "invalid literal at byte 0"),
            ("True", "unexpected character at byte 0"),
            ("{} x", "unexpected character after the value at byte 3"),
            ("1 2", "unexpected character after the value at byte 2"),
            ("[1]]", "unexpected character after the value at byte 3"),
            ("// c\n1", "unexpected character at byte 0"),
            ("[1", "unexpected end of input at byte 2"),
            ("{\"a\":", "unexpected end of input at byte 5"),
            ("{\"a\"", "unexpected end of input at byte 4"),
            ("{", "unexpected end of input at byte 1"),
            ("\"abc", "unterminated string at byte 0"),
            ("[\"ab\\", "unterminated string at byte 1"),
            ("\"a\\q\"", "invalid escape at byte 2"),
            ("\"\\u12G4\"", "invalid \\u escape at byte 1"),
            ("\"\\u12\"", "invalid \\u escape at byte 1"),
            ("\"\\uD800\"", "unpaired surrogate in \\u escape at byte 1"),
            ("\"\\uDC00\"", "unpaired surrogate in \\u escape at byte 1"),
            ("\"x\\uD800\\u0041\"", "unpaired surrogate in \\u escape at byte 2"),
            ("\"\\uD800x\"", "unpaired surrogate in \\u escape at byte 1"),
            ("\"\\uDBFF\\uDBFF\"", "unpaired surrogate in \\u escape at byte 1"),
            ("\"a\u{1}b\"", "control character in string at byte 2"),
            ("\"a\tb\"", "control character in string at byte 2"),
            ("\"a\\n\nb\"", "control character in string at byte 4"),
            ("{\"a\":1,\"a\":2}", "duplicate key at byte 7"),
            ("[{\"k\":1,\"b\":{\"k\":2},\"k\":3}]", "duplicate key at byte 20"),
            ("\u{FEFF}{}", "unexpected character at byte 0"),
        ]
        for (text, message) in cases {
            let error = #expect(throws: SetteeError.self, "\(text.debugDescription)") { try JSONParser.parse(text) }
            #expect(error?.code == .invalidJSON)
            #expect(error?.message == message, "\(text.debugDescription)")
        }
    }

    @Test func rejectsInvalidUTF8() {
        let cases: [[UInt8]] = [
            [0x22, 0xFF, 0x22],                    // never valid
            [0x22, 0xC0, 0x80, 0x22],              // overlong NUL
            [0x22, 0xC1, 0xBF, 0x22],              // overlong
            [0x22, 0xE0, 0x80, 0x80, 0x22],        // overlong three-byte
            [0x22, 0xED, 0xA0, 0x80, 0x22],        // encoded surrogate
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // beyond U+10FFFF
            [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22],
            [0x22, 0xE2, 0x82, 0x22],              // truncated before the quote
            [0x22, 0xE2, 0x82],                    // truncated at the end of input
            [0x22, 0x80, 0x22],                    // lone continuation byte
            [0x22, 0x5C, 0x6E, 0xC3, 0x22],        // after an escape (slow path)
            [0x22, 0xC3, 0xA9, 0xC3, 0x28, 0x22],
        ]
        for bytes in cases {
            let error = #expect(throws: SetteeError.self, "\(bytes)") { try JSONParser.parse(bytes) }
            #expect(error?.message.hasPrefix("invalid UTF-8 at byte") == true, "\(bytes): \(error?.message ?? "")")
        }
        #expect(throws: SetteeError.self) { try JSONParser.parse([0xC3, 0xA9]) }
        #expect(throws: SetteeError.self) { try JSONParser.parse([0x5B, 0x31, 0x5D, 0x00]) }
    }

    @Test func deepNestingThrowsInsteadOfCrashing() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let error = #expect(throws: SetteeError.self) { try JSONParser.parse(deep) }
        #expect(error?.message == "nesting deeper than 256 levels at byte 256")
        let objects = String(repeating: "{\"a\":", count: 100_000)
        #expect(throws: SetteeError.self) { try JSONParser.parse(objects) }
        #expect(throws: SetteeError.self) { try JSONParser.parse([UInt8](repeating: 0x5B, count: 1_000_000)) }
        // Any nesting the caller allows is fine: the parser keeps its own stack.
        let parsed = try JSONParser.parse(deep, maxDepth: 10_000)
        var depth = 0
        var value = parsed
        while case .array(let elements) = value, let first = elements.first { depth += 1; value = first }
        #expect(depth == 9_999)

        let limit = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        let atLimit = try JSONParser.parse(limit)
        #expect(try JSONWriter.bytes(atLimit) == Array(limit.utf8))
        // Whatever is too deep to read back is not written either.
        let tooDeep = JSONValue.array([atLimit])
        #expect(throws: SetteeError.self) { try tooDeep.jsonBytes() }
        #expect(throws: SetteeError.self) { try JSONValue.object(["a": tooDeep]).jsonBytes() }
        var objectAtLimit: JSONValue = [:]
        for _ in 1..<256 { objectAtLimit = ["a": objectAtLimit] }
        #expect(try JSONParser.parse(objectAtLimit.jsonBytes()) == objectAtLimit)
        #expect(throws: SetteeError.self) { try JSONValue.object(["a": objectAtLimit]).jsonBytes() }
        #expect(throws: SetteeError.self) { try JSONParser.parse("[1]", maxDepth: 0) }
        #expect(try JSONParser.parse("1", maxDepth: 0) == .int(1))
    }

    @Test func errorsNeverQuoteTheInput() {
        let secret = "s3cr3t-p4ssw0rd"
        for text in ["{\"\(secret)\":1,\"\(secret)\":2}", "[\"\(secret)\u{1}\"]", "{\"\(secret)\" 1}", "\"\(secret)\\x\""] {
            let error = #expect(throws: SetteeError.self) { try JSONParser.parse(text) }
            #expect(error?.message.contains(secret) == false)
            #expect(error?.description.contains(secret) == false)
        }
    }

    @Test func randomValuesRoundTrip() throws {
        for seed in [UInt64(20_261_121), UInt64.random(in: 1...UInt64.max)] {
            print("seed \(seed) (JSONTests.randomValuesRoundTrip)")
            var random = SeededGenerator(seed: seed)
            for round in 0..<300 {
                let value = random.value(depth: 0)
                let bytes = try JSONWriter.bytes(value)
                let parsed = try JSONParser.parse(bytes)
                #expect(parsed == value, "seed \(seed), round \(round)")
                // Canonical: writing the parsed value gives the same bytes.
                #expect(try JSONWriter.bytes(parsed) == bytes, "seed \(seed), round \(round)")
                // Whitespace between tokens changes nothing.
                #expect(try JSONParser.parse(addingWhitespace(bytes)) == value, "seed \(seed), round \(round)")
                if round % 50 == 0 {
                    // Every truncation is an error, never a crash.
                    for cut in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 40)) {
                        _ = try? JSONParser.parse(Array(bytes[..<cut]))
                    }
                }
            }
        }
    }

    // MARK: The body scan (replicated JSON stored as it came)

    /// Whether the scan accepts `bytes`, and whether the parser reads them as an object; with the
    /// writer's digests when it does. The two must agree on every input.
    private func expectScanAgrees(_ bytes: [UInt8], _ context: String) {
        let scan = bytes.withUnsafeBytes { b in Swift.Result { () throws(SetteeError) in try JSONParser.scanBody(b, checkReserved: false) } }
        let parsing = Swift.Result { () throws(SetteeError) in try JSONParser.parse(bytes) }
        guard case .success(.object(let o)) = parsing else {
            #expect(throws: SetteeError.self, "accepted what the parser refuses: \(context)") { try scan.get() }
            if case .failure(let e) = scan { #expect(e.code == .invalidJSON, "\(context)") }
            // An object the parser refuses is refused for the same reason at the same byte.
            if case .failure(let parser) = parsing, case .failure(let scanner) = scan,
               bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == 0x7B {
                #expect(scanner.message == parser.message, "\(context)")
            }
            return
        }
        guard case .success(let found) = scan else {
            Issue.record("refused an object the parser reads: \(context)")
            return
        }
        var digests: [String] = []
        _ = try? JSONWriter.body(o, blobDigests: &digests)
        #expect(found.isEmpty == o.isEmpty, "\(context)")
        #expect(found.blobDigests.sorted() == digests.sorted(), "\(context)")
    }

    @Test func bodyScanAcceptsExactlyTheObjectsTheParserReads() {
        // Every refusal of the parser, as a body and as a member's value.
        let broken = ["[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "-", "1.", "1e+", "1e999", "tru", "\"abc", "\"a\\q\"",
                      "\"\\u12G4\"", "\"\\uD800\"", "\"\\uDC00\"", "\"x\\uD800\\u0041\"", "\"a\u{1}b\"",
                      "{\"a\":1,\"a\":2}", "[{\"k\":1,\"b\":{\"k\":2},\"k\":3}]", "\u{FEFF}{}", "{} x", "{", "{\"a\""]
        for text in broken {
            expectScanAgrees(Array(text.utf8), text)
            expectScanAgrees(Array("{\"v\":\(text)}".utf8), "member \(text)")
        }
        for bytes: [UInt8] in [[0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x7D], []] {
            expectScanAgrees(bytes, "\(bytes)")
        }
        // Bodies that are JSON but not objects.
        for text in ["[]", "1", "\"s\"", "null", " true "] { expectScanAgrees(Array(text.utf8), text) }
        // Keys equal as Strings collide however they are spelled: escaped, or canonically equivalent.
        for text in ["{\"ab\":1,\"a\\u0062\":2}", "{\"\u{E9}\":1,\"e\u{301}\":2}", "{\"x\":{\"\u{E9}\":1,\"e\\u0301\":2}}"] {
            expectScanAgrees(Array(text.utf8), text)
            #expect(throws: SetteeError.self, "\(text)") { try JSONParser.parse(text) }
        }
        // A non-ASCII key can equal an ASCII one (KELVIN SIGN is canonically K), and the duplicate
        // refused is the first key equal to an earlier one, as the parser's dictionary finds it.
        for text in ["{\"K\":1,\"\u{212A}\":2}", "{\"x\":1,\"y\":2,\"y\":3,\"x\":4}", "{\"a\":1,\"\":2,\"\":3}"] {
            expectScanAgrees(Array(text.utf8), text)
            #expect(throws: SetteeError.self, "\(text)") { try JSONParser.parse(text) }
        }
        // Past 16 keys the duplicate check takes other paths: plain keys by their bytes, any
        // escaped or non-ASCII key as Strings.
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        expectScanAgrees(Array("{\(many)}".utf8), "40 keys")
        expectScanAgrees(Array("{\(many),\"k\\u00337\":0}".utf8), "40 keys and a duplicate of k37")
        expectScanAgrees(Array("{\(many),\"k5\":0,\"k7\":0}".utf8), "40 plain keys and two duplicates")
        expectScanAgrees(Array("{\(many),\"\u{E9}\":0,\"e\u{301}\":0}".utf8), "40 keys and canonically equal ones")
        // Nesting: the parser's limit exactly.
        let atLimit = "{\"a\":" + String(repeating: "[", count: 255) + String(repeating: "]", count: 255) + "}"
        let tooDeep = "{\"a\":" + String(repeating: "[", count: 256) + String(repeating: "]", count: 256) + "}"
        expectScanAgrees(Array(atLimit.utf8), "at the nesting limit")
        expectScanAgrees(Array(tooDeep.utf8), "past the nesting limit")
        #expect((try? JSONParser.parse(atLimit)) != nil)
    }

    @Test func bodyScanFindsBlobsAndReservedKeys() throws {
        let body = """
         {"a":{"@type":"blob","digest":"sha1-AAAA","length":3},"list":[{"digest":"sha1-BBBB","\\u0040type":"bl\\u006fb"},
          {"@type":"blob"},{"@type":"other","digest":"sha1-CCCC"},{"@type":"blob","digest":7}],
          "deep":{"x":{"@type":"blob","digest":"sha1-DDDD","inner":{"@type":"blob","digest":"sha1-EEEE"}}}}
        """
        let scan = try Array(body.utf8).withUnsafeBytes { try JSONParser.scanBody($0) }
        #expect(scan.blobDigests.sorted() == ["sha1-AAAA", "sha1-BBBB", "sha1-DDDD", "sha1-EEEE"])
        #expect(!scan.isEmpty)
        expectScanAgrees(Array(body.utf8), "blob references")
        #expect(try Array(" { } ".utf8).withUnsafeBytes { try JSONParser.scanBody($0) }.isEmpty)

        for reserved in ["{\"_id\":1}", "{\"a\":1,\"_rev\":2}", "{\"\\u005fdeleted\":true}"] {
            let bytes = Array(reserved.utf8)
            let error = #expect(throws: SetteeError.self, "\(reserved)") {
                try bytes.withUnsafeBytes { b in try Swift.Result { () throws(SetteeError) in try JSONParser.scanBody(b) }.get() }
            }
            #expect(error?.code == .invalidParameter, "\(reserved)")
        }
        // Below the top level, `_` keys are ordinary properties.
        let nested = Array("{\"a\":{\"_id\":1},\"b\":[{\"_x\":2}]}".utf8)
        #expect(try nested.withUnsafeBytes { b in try Swift.Result { () throws(SetteeError) in try JSONParser.scanBody(b) }.get() }.isEmpty == false)
    }

    /// Reading some members of an object gives exactly those members of the full parse, for
    /// random objects (with whitespace, escapes and nesting) and random sets of keys; damaged
    /// bytes throw or read something, never crash.
    @Test func parsingSomeMembersAgreesWithTheFullParse() throws {
        for seed in [UInt64(20_261_127), UInt64.random(in: 1...UInt64.max)] {
            print("seed \(seed) (JSONTests.parsingSomeMembersAgreesWithTheFullParse)")
            var random = SeededGenerator(seed: seed)
            for round in 0..<400 {
                var members: [String: JSONValue] = [:]
                for _ in 0..<random.below(8) { members[random.string()] = random.value(depth: 1) }
                var bytes = try JSONWriter.bytes(.object(members))
                if random.below(2) == 0 { bytes = addingWhitespace(bytes) }
                var keys = Set(members.keys.filter { _ in random.below(2) == 0 })
                keys.insert(random.string())   // perhaps a key the object lacks
                let some = try bytes.withUnsafeBytes { b throws(SetteeError) in try JSONParser.parseMembers(b, keys: keys) }
                #expect(some == members.filter { keys.contains($0.key) }, "seed \(seed), round \(round)")
                for _ in 0..<4 where !bytes.isEmpty {
                    var damaged = bytes
                    let at = random.below(damaged.count)
                    switch random.below(3) {
                    case 0: damaged[at] = [0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A][random.below(8)]
                    case 1: damaged.remove(at: at)
                    default: damaged = Array(damaged[..<at])
                    }
                    _ = damaged.withUnsafeBytes { b in try? JSONParser.parseMembers(b, keys: keys) }
                }
            }
        }
        #expect(throws: SetteeError.self) { try Array("[1]".utf8).withUnsafeBytes { b throws(SetteeError) in try JSONParser.parseMembers(b, keys: []) } }
        #expect(throws: SetteeError.self) { try Array("{\"a\": [1, {]}".utf8).withUnsafeBytes { b throws(SetteeError) in try JSONParser.parseMembers(b, keys: ["a"]) } }
        #expect(throws: SetteeError.self) { try Array("{\"a\": \"x".utf8).withUnsafeBytes { b throws(SetteeError) in try JSONParser.parseMembers(b, keys: []) } }
        let deep = "{\"a\": " + String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000) + "}"
        #expect(throws: SetteeError.self) { try Array(deep.utf8).withUnsafeBytes { b throws(SetteeError) in try JSONParser.parseMembers(b, keys: []) } }
    }

    @Test func bodyScanAgreesWithTheParserOnRandomAndDamagedBodies() throws {
        for seed in [UInt64(20_261_122), UInt64.random(in: 1...UInt64.max)] {
            print("seed \(seed) (JSONTests.bodyScanAgreesWithTheParserOnRandomAndDamagedBodies)")
            var random = SeededGenerator(seed: seed)
            for round in 0..<400 {
                var members: [String: JSONValue] = [:]
                for _ in 0..<random.below(5) { members[random.string()] = random.value(depth: 1) }
                if random.below(3) == 0 {
                    members["photo"] = ["@type": "blob", "digest": .string("sha1-\(random.below(1000))"), "length": 1]
                }
                var bytes = try JSONWriter.bytes(.object(members))
                if random.below(2) == 0 { bytes = addingWhitespace(bytes) }
                expectScanAgrees(bytes, "seed \(seed), round \(round)")
                // Damaged copies: a byte changed, inserted or removed, or the text cut short.
                for _ in 0..<8 where !bytes.isEmpty {
                    var damaged = bytes
                    let at = random.below(damaged.count)
                    let interesting: [UInt8] = [0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A, 0x30, 0x2D, 0x65, 0x75, 0x5F, 0x40, 0x00, 0x80, 0xC3, 0xFF, 0x20]
                    switch random.below(4) {
                    case 0: damaged[at] = interesting[random.below(interesting.count)]
                    case 1: damaged.insert(interesting[random.below(interesting.count)], at: at)
                    case 2: damaged.remove(at: at)
                    default: damaged = Array(damaged[..<at])
                    }
                    expectScanAgrees(damaged, "seed \(seed), round \(round), damaged at \(at)")
                }
            }
        }
    }

    @Test func literalsAndAccessors() throws {
        let value: JSONValue = ["s": "text \(1 + 1)", "i": 7, "d": 2.0, "h": 2.5, "b": true, "n": nil, "a": [1, "x"], "o": ["k": "v"]]
        #expect(value["s"]?.stringValue == "text 2")
        #expect(value["i"]?.intValue == 7)
        #expect(value["i"]?.int64Value == 7)
        #expect(value["i"]?.doubleValue == 7)
        #expect(value["d"]?.intValue == 2)
        #expect(value["h"]?.intValue == nil)
        #expect(value["h"]?.doubleValue == 2.5)
        #expect(JSONValue.double(1e30).intValue == nil)
        #expect(JSONValue.double(.nan).int64Value == nil)
        #expect(value["b"]?.boolValue == true)
        #expect(value["n"]?.isNull == true)
        #expect(value["s"]?.isNull == false)
        #expect(value["a"]?[1]?.stringValue == "x")
        #expect(value["a"]?[2] == nil)
        #expect(value["a"]?[-1] == nil)
        #expect(value["o"]?["k"] == "v")
        #expect(value["missing"] == nil)
        #expect(value["a"]?["k"] == nil)
        #expect(value["o"]?[0] == nil)
        #expect(value["a"]?.arrayValue?.count == 2)
        #expect(value["o"]?.objectValue == ["k": .string("v")])
        #expect(value["i"]?.stringValue == nil)
        #expect(JSONValue("x") == .string("x"))
        #expect(JSONValue(3) == .int(3))
        #expect(JSONValue(0.5) == .double(0.5))
        #expect(JSONValue(false) == .bool(false))
        #expect(JSONValue(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        let repeated = JSONValue(dictionaryLiteral: ("k", 1), ("k", 2))
        #expect(repeated == ["k": 2])
    }

    // MARK: SHA-1

    /// The CPU's SHA instructions (where present) and the Swift rounds give the same digests,
    /// over every length around the block and padding boundaries and in random pieces.
    @Test func sha1HardwareAndPortablePathsAgree() {
        var random = SeededGenerator(seed: 0x5A1)
        let data = (0 ..< 4096).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for length in Array(0 ... 300) + [1000, 4095, 4096] {
            let slice = Array(data[0 ..< length])
            var fast = SHA1(), slow = SHA1(portable: true)
            var offset = 0
            slice.withUnsafeBytes { buffer in
                while offset < length {
                    let size = min(length - offset, Int(random.next() % 150))
                    let piece = UnsafeRawBufferPointer(rebasing: buffer[offset ..< offset + size])
                    fast.update(piece)
                    slow.update(piece)
                    offset += size
                }
            }
            let expected = slow.finalize()
            #expect(fast.finalize() == expected, "length \(length)")
            #expect(SHA1.hash(slice) == expected, "length \(length)")
        }
    }

    @Test func sha1MatchesTheFIPS180Vectors() {
        #expect(SHA1.hex(SHA1.hash(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SHA1.hex(SHA1.hash([UInt8]())) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SHA1.hex(SHA1.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
            == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        #expect(SHA1.hex(SHA1.hash(Array("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu".utf8)))
            == "a49b2446a02c645bf419f995b67091253a04a259")
        #expect(SHA1.hex(SHA1.hash(Array("The quick brown fox jumps over the lazy dog".utf8)))
            == "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12")
        #expect(SHA1.base64(SHA1.hash(Array("abc".utf8))) == "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=")

        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        let oneShot = SHA1.hash(million)
        #expect(SHA1.hex(oneShot) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        var hasher = SHA1()
        var offset = 0
        var random = SeededGenerator(seed: 180)
        million.withUnsafeBytes { buffer in
            while offset < buffer.count {
                let size = min(buffer.count - offset, Int(random.next() % 200))
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + size)]))
                offset += size
            }
        }
        #expect(hasher.finalize() == oneShot)
        // The hasher starts over after finalize.
        hasher.update(Array("abc".utf8))
        #expect(SHA1.hex(hasher.finalize()) == "a9993e364706816aba3e25717850c26c9cd0d89d")

        // Padding boundaries: every length around one and two blocks, fed whole and bytewise.
        for length in 50...130 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            var bytewise = SHA1()
            for byte in bytes { bytewise.update([byte]) }
            #expect(bytewise.finalize() == SHA1.hash(bytes), "length \(length)")
        }
        #expect(SHA1.hex(SHA1.hash(Array(String(repeating: "a", count: 55).utf8))) == "c1c8bbdc22796e28c0e15163d20899b65621d65a")
        #expect(SHA1.hex(SHA1.hash(Array(String(repeating: "a", count: 64).utf8))) == "0098ba824b5c16427bd7a1122a5a442a25ec644d")
    }

    // MARK: Codable

    struct Inner: Codable, Equatable {
        var label: String
        var weights: [Double]
    }

    struct Sample: Codable, Equatable {
        var name: String
        var count: Int
        var ratio: Double
        var flag: Bool
        var when: Date
        var blob: Data?
        var tags: [String]
        var inner: Inner
        var note: String?
        var whole: Double
    }

    @Test func codableRoundTrip() throws {
        let sample = Sample(
            name: "Zoë \"quoted\" 😀", count: -42, ratio: 0.1, flag: true,
            when: Date(timeIntervalSince1970: 1_795_256_130.123),
            blob: Data([0, 1, 2, 250, 255]), tags: ["a", "b/c", ""],
            inner: Inner(label: "in", weights: [1.5, -0.25, 1e300]), note: nil, whole: 3
        )
        let value = try JSONCoding.encode(sample)
        #expect(value["name"] == "Zoë \"quoted\" 😀")
        #expect(value["count"] == -42)
        #expect(value["when"] == "2026-11-21T10:15:30.123Z")
        #expect(value["blob"] == .string(Data([0, 1, 2, 250, 255]).base64EncodedString()))
        #expect(value["tags"] == ["a", "b/c", ""])
        #expect(value["note"] == nil)
        #expect(value["whole"]?.doubleValue == 3)
        #expect(try JSONCoding.decode(Sample.self, from: value) == sample)

        // Doubles held as `.double` decode into Int properties when integral; nil optionals too.
        var edited = value.objectValue!
        edited["count"] = .double(7)
        edited["blob"] = nil
        edited["when"] = "2026-11-21T12:15:30+02:00"
        let decoded = try JSONCoding.decode(Sample.self, from: .object(edited))
        #expect(decoded.count == 7)
        #expect(decoded.blob == nil)
        #expect(decoded.when == Date(timeIntervalSince1970: 1_795_256_130))

        // JSONValue itself through Foundation's coders: the plain JSON, both ways.
        let tree: JSONValue = ["a": [1, 2.5, "x", nil, true, ["b": [:]]], "c": .int(.min)]
        let data = try JSONEncoder().encode(tree)
        #expect(try JSONValue(parsing: data) == tree)
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == tree)
        #expect(try JSONCoding.decode(JSONValue.self, from: tree) == tree)
        #expect(try JSONCoding.encode(tree) == tree)
        #expect(try JSONCoding.encode("plain") == "plain")
        #expect(try JSONCoding.decode([Int].self, from: [1, 2]) == [1, 2])
    }

    @Test func codableErrorsAreInvalidParameterWithoutValues() {
        var broken = (try? JSONCoding.encode(Inner(label: "hidden-label-value", weights: [1]))) ?? .null
        if case .object(var members) = broken { members["weights"] = ["not-a-number-secret"]; broken = .object(members) }
        let error = #expect(throws: SetteeError.self) { try JSONCoding.decode(Inner.self, from: broken) }
        #expect(error?.code == .invalidParameter)
        #expect(error?.message.hasPrefix("cannot decode Inner: expected Double at weights[0]") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("secret") == false)
        #expect(error?.message.contains("hidden") == false)

        let missing = #expect(throws: SetteeError.self) { try JSONCoding.decode(Inner.self, from: ["label": "x"]) }
        #expect(missing?.message == "cannot decode Inner: missing key 'weights'")

        let sample = Sample(
            name: "n", count: 1, ratio: 1, flag: false, when: Date(), blob: nil, tags: [],
            inner: Inner(label: "l", weights: []), note: nil, whole: 0
        )
        var encoded = (try? JSONCoding.encode(sample))?.objectValue ?? [:]
        encoded["when"] = "yesterday-secret"
        let badDate = #expect(throws: SetteeError.self) { try JSONCoding.decode(Sample.self, from: .object(encoded)) }
        #expect(badDate?.message == "cannot decode Sample: invalid data at when")
        #expect(badDate?.code == .invalidParameter)
        #expect(badDate?.message.contains("secret") == false)

        let nan = #expect(throws: SetteeError.self) { try JSONCoding.encode(Inner(label: "x", weights: [.nan])) }
        #expect(nan?.code == .invalidParameter)
        #expect(nan?.message.hasPrefix("cannot encode Inner") == true)
    }

    // MARK: Dates

    @Test func isoDatesFormatAndParse() {
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: -0.001)) == "1969-12-31T23:59:59.999Z")
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: 1_795_256_130.123)) == "2026-11-21T10:15:30.123Z")
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: 1_795_256_130.9996)) == "2026-11-21T10:15:31.000Z")
        #expect(JSONDate.string(from: .distantPast) == "0001-01-01T00:00:00.000Z")
        #expect(JSONDate.string(from: .distantFuture) == "4001-01-01T00:00:00.000Z")
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: 1e20)) == "9999-12-31T23:59:59.999Z")
        #expect(JSONDate.string(from: Date(timeIntervalSince1970: -1e20)) == "0001-01-01T00:00:00.000Z")

        let reference = Date(timeIntervalSince1970: 1_795_256_130.123)
        #expect(JSONDate.date(from: "2026-11-21T10:15:30.123Z") == reference)
        #expect(JSONDate.date(from: "2026-11-21T12:15:30.123+02:00") == reference)
        #expect(JSONDate.date(from: "2026-11-21T04:45:30.123-05:30") == reference)
        #expect(JSONDate.date(from: "2026-11-21T10:15:30.123000Z") == reference)
        #expect(JSONDate.date(from: "2026-11-21T10:15:30Z") == Date(timeIntervalSince1970: 1_795_256_130))
        #expect(JSONDate.date(from: "2026-11-21t10:15:30z") == Date(timeIntervalSince1970: 1_795_256_130))
        #expect(JSONDate.date(from: "2026-11-21T10:15:30.5Z") == Date(timeIntervalSince1970: 1_795_256_130.5))
        let nanos = JSONDate.date(from: "2026-11-21T10:15:30.123456789Z")?.timeIntervalSince1970 ?? 0
        #expect(abs(nanos - 1_795_256_130.123456789) < 1e-6)
        #expect(JSONDate.date(from: "2024-02-29T00:00:00Z") != nil)
        for bad in [
            "2023-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-04-31T00:00:00Z",
            "2026-11-21T24:00:00Z", "2026-11-21T10:60:00Z", "2026-11-21T10:15:61Z", "2026-11-21",
            "2026-11-21T10:15:30", "2026-11-21T10:15:30.Z", "2026-11-21T10:15:30+2:00", "2026-11-21T10:15:30Z ",
            "26-11-21T10:15:30Z", "2026-11-21T10:15Z", "", "yesterday", "2026-11-21T10:15:30+24:00",
        ] {
            #expect(JSONDate.date(from: bad) == nil, "\(bad)")
        }

        // Random instants: formatting then parsing gives the same millisecond, and Foundation's
        // own ISO-8601 parser agrees with the text.
        var random = SeededGenerator(seed: 8601)
        let foundation = ISO8601DateFormatter()
        foundation.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for _ in 0..<2_000 {
            let millis = Int64(random.next() % 9_000_000_000_000) - 2_000_000_000_000
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let text = JSONDate.string(from: date)
            #expect(JSONDate.date(from: text) == date, "\(text)")
            let theirs = foundation.date(from: text)?.timeIntervalSince1970 ?? .nan
            #expect(abs(theirs - date.timeIntervalSince1970) < 0.0005, "\(text)")
        }
    }
}

// MARK: - Support

/// JSON text with a newline and a space after every structural character outside strings.
private func addingWhitespace(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x20]
    var inString = false
    var escaped = false
    for c in bytes {
        out.append(c)
        if inString {
            if escaped { escaped = false } else if c == UInt8(ascii: "\\") { escaped = true } else if c == UInt8(ascii: "\"") { inString = false }
        } else if c == UInt8(ascii: "\"") {
            inString = true
        } else if "[]{},:".utf8.contains(c) {
            out.append(contentsOf: [0x0A, 0x20, 0x09, 0x0D])
        }
    }
    return out
}

/// Random JSON values from the suite's seeded generator, so a printed seed reproduces a failure.
extension SeededGenerator {

    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    mutating func value(depth: Int) -> JSONValue {
        switch below(depth > 4 ? 6 : 9) {
        case 0: return .null
        case 1: return .bool(below(2) == 0)
        case 2:
            let special: [Int64] = [0, 1, -1, .max, .min, 9_007_199_254_740_993]
            return .int(below(4) == 0 ? special[below(special.count)] : Int64(bitPattern: next()) >> Int64(below(64)))
        case 3:
            var number = Double(bitPattern: next())
            if !number.isFinite || below(2) == 0 {
                let special: [Double] = [0, -0.0, 0.1, 1e300, -1e-300, .leastNonzeroMagnitude, 2, 1e16, .greatestFiniteMagnitude]
                number = below(2) == 0 ? special[below(special.count)] : Double(Int64(bitPattern: next()) >> 20) / 1024
            }
            return .double(number)
        case 4, 5: return .string(string())
        case 6, 7:
            return .array((0..<below(6)).map { _ in value(depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<below(6) { members[string()] = value(depth: depth + 1) }
            return .object(members)
        }
    }

    mutating func string() -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<below(12) {
            let scalar: UInt32
            switch below(8) {
            case 0: scalar = UInt32(below(0x20))
            case 1: scalar = [0x22, 0x5C, 0x2F, 0x7F][below(4)]
            case 2: scalar = 0x80 + UInt32(below(0x780))
            case 3: scalar = 0x800 + UInt32(below(0xD000))
            case 4: scalar = 0x10000 + UInt32(below(0x100000))
            default: scalar = 0x20 + UInt32(below(0x5F))
            }
            if let valid = Unicode.Scalar(scalar) { scalars.append(valid) }
        }
        return String(scalars)
    }
}
