import Foundation
import Testing
@_spi(Server) @testable import Settee

/// Expressions of queries and indexes on one document: SQL++'s MISSING and NULL rules, the
/// collation for ordering, checked arithmetic, LIKE, functions.
@Suite struct QueryExpressionTests {
    let row = QueryRow(id: "task-1", revisionID: "2-abc", sequence: 42, isDeleted: false,
                       expiration: Date(timeIntervalSince1970: 1_700_000_000),
                       properties: ["type": "task", "title": "Buy Milk", "done": false, "n": 7, "x": 2.5, "nothing": .null,
                                    "list": ["id": "list-7"], "tags": ["a", "b"], "empty": "", "big": .int(.max)])

    private func eval(_ e: QueryExpression, _ parameters: [String: JSONValue] = [:]) throws -> JSONValue? {
        try e.evaluate(row, parameters: parameters)
    }
    private func p(_ path: String) throws -> QueryExpression { .property(try PropertyPath(path)) }
    private let missing = QueryExpression.missing
    private let null = QueryExpression.literal(.null)
    private let yes = QueryExpression.literal(true)
    private let no = QueryExpression.literal(false)

    @Test func propertiesParametersAndMeta() throws {
        #expect(try eval(p("list.id")) == "list-7")
        #expect(try eval(p("nope")) == nil)
        #expect(try eval(p("nothing")) == .some(.null))
        #expect(try eval(.parameter("list"), ["list": "list-7"]) == "list-7")
        #expect(throws: SetteeError.self) { try eval(.parameter("list")) }
        #expect(try eval(.meta(.id)) == "task-1")
        #expect(try eval(.meta(.sequence)) == 42)
        #expect(try eval(.meta(.deleted)) == false)
        #expect(try eval(.meta(.revisionID)) == "2-abc")
        #expect(try eval(.meta(.expiration)) == .double(1_700_000_000_000))
    }

    /// The truth tables of SQL++ (FALSE beats MISSING beats NULL in AND; TRUE beats NULL beats
    /// MISSING in OR).
    @Test func andOrNotWithMissingAndNull() throws {
        let cases: [(QueryExpression, QueryExpression, JSONValue?, JSONValue?)] = [
            // a, b, a AND b, a OR b
            (yes, yes, true, true), (yes, no, false, true), (no, no, false, false),
            (yes, null, .null, true), (no, null, false, .null), (null, null, .null, .null),
            (yes, missing, nil, true), (no, missing, false, nil), (missing, missing, nil, nil),
            (null, missing, nil, .null),
        ]
        for (a, b, and, or) in cases {
            #expect(try eval(.and(a, b)) == and, "\(a) AND \(b)")
            #expect(try eval(.and(b, a)) == and, "\(b) AND \(a)")
            #expect(try eval(.or(a, b)) == or, "\(a) OR \(b)")
            #expect(try eval(.or(b, a)) == or, "\(b) OR \(a)")
        }
        #expect(try eval(.not(yes)) == false)
        #expect(try eval(.not(null)) == .some(.null))
        #expect(try eval(.not(missing)) == nil)
        // Truthiness of other values.
        #expect(try eval(.not(p("empty"))) == true)
        #expect(try eval(.not(p("n"))) == false)
        #expect(Optional(JSONValue.array([])).isTrue == false && Optional(JSONValue.int(3)).isTrue)
        #expect(!(nil as JSONValue?).isTrue && !Optional(JSONValue.null).isTrue)
    }

    @Test func comparisons() throws {
        #expect(try eval(.compare(.equal, p("type"), .literal("task"))) == true)
        #expect(try eval(.compare(.equal, p("n"), .literal(7.0))) == true)
        #expect(try eval(.compare(.equal, p("n"), .literal("7"))) == false)
        #expect(try eval(.compare(.notEqual, p("n"), .literal("7"))) == true)
        #expect(try eval(.compare(.equal, p("nope"), .literal(1))) == nil)
        #expect(try eval(.compare(.equal, p("nothing"), .literal(1))) == .some(.null))
        #expect(try eval(.compare(.equal, p("nothing"), null)) == .some(.null))
        // Ordering follows the collation: across types by type, strings by ICU.
        #expect(try eval(.compare(.less, p("n"), .literal("a"))) == true)
        #expect(try eval(.compare(.less, .literal("a"), .literal("B"))) == true)
        #expect(try eval(.compare(.greaterOrEqual, p("x"), .literal(2.5))) == true)
        #expect(try eval(.compare(.lessOrEqual, p("tags"), .literal(["a", "b"]))) == true)
        #expect(try eval(.between(p("n"), .literal(1), .literal(7))) == true)
        #expect(try eval(.between(p("n"), .literal(8), .literal(9))) == false)
        #expect(try eval(.between(p("nope"), .literal(8), .literal(9))) == nil)
        #expect(try eval(.in(p("type"), [.literal("note"), .literal("task")])) == true)
        #expect(try eval(.in(p("type"), [.literal("note")])) == false)
        #expect(try eval(.in(p("type"), [.literal("note"), null])) == .some(.null))
        #expect(try eval(.in(p("nope"), [.literal("note")])) == nil)
    }

    @Test func isTests() throws {
        let table: [(QueryExpression.Test, JSONValue?, JSONValue?, JSONValue?)] = [
            // test, on a value, on NULL, on MISSING
            (.isNull, false, true, nil), (.isNotNull, true, false, nil),
            (.isMissing, false, false, true), (.isNotMissing, true, true, false),
            (.isValued, true, false, false), (.isNotValued, false, true, true),
        ]
        for (t, value, onNull, onMissing) in table {
            #expect(try eval(.test(t, p("n"))) == value, "\(t.rawValue) on a value")
            #expect(try eval(.test(t, p("nothing"))) == onNull, "\(t.rawValue) on NULL")
            #expect(try eval(.test(t, p("nope"))) == onMissing, "\(t.rawValue) on MISSING")
        }
    }

    @Test func arithmeticIsCheckedAndTyped() throws {
        #expect(try eval(.arithmetic(.add, p("n"), .literal(1))) == 8)
        #expect(try eval(.arithmetic(.add, p("n"), p("x"))) == 9.5)
        #expect(try eval(.arithmetic(.divide, p("n"), .literal(2))) == 3.5)
        #expect(try eval(.arithmetic(.divide, .literal(8), .literal(2))) == 4)
        #expect(try eval(.arithmetic(.divide, p("n"), .literal(0))) == .some(.null))
        #expect(try eval(.arithmetic(.modulo, p("n"), .literal(4))) == 3)
        #expect(try eval(.arithmetic(.modulo, .literal(.int(.min)), .literal(-1))) == 0)
        #expect(try eval(.arithmetic(.divide, .literal(.int(.min)), .literal(-1))) == .double(9.223372036854775808e18))
        // An overflow becomes a double instead of trapping.
        #expect(try eval(.arithmetic(.add, p("big"), .literal(1))) == .double(Double(Int64.max) + 1))
        #expect(try eval(.arithmetic(.multiply, p("big"), p("big"))) == .double(Double(Int64.max) * Double(Int64.max)))
        #expect(try eval(.arithmetic(.multiply, .literal(1e300), .literal(1e300))) == .some(.null))
        #expect(try eval(.negate(p("n"))) == -7)
        #expect(try eval(.negate(.literal(.int(.min)))) == .double(9.223372036854775808e18))
        #expect(try eval(.arithmetic(.add, p("type"), .literal(1))) == .some(.null))
        #expect(try eval(.arithmetic(.add, p("nope"), .literal(1))) == nil)
        #expect(try eval(.arithmetic(.add, null, missing)) == nil)
    }

    @Test func likeMatchesWithoutBacktrackingBlowUp() throws {
        let cases: [(String, String, Bool)] = [
            ("Buy Milk", "Buy%", true), ("Buy Milk", "%Milk", true), ("Buy Milk", "B_y M%k", true),
            ("Buy Milk", "buy%", false), ("Buy Milk", "%", true), ("", "%", true), ("", "_", false),
            ("50%", "50\\%", true), ("500", "50\\%", false), ("a_b", "a\\_b", true), ("axb", "a\\_b", false),
            ("abcabd", "%ab_", true), ("mississippi", "%iss%ppi", true), ("mississippi", "%iss%ppx", false),
        ]
        for (s, pattern, expected) in cases {
            #expect(try eval(.like(.literal(.string(s)), .literal(.string(pattern)))) == .bool(expected), "\(s) LIKE \(pattern)")
        }
        // A pattern built to make a backtracking matcher exponential finishes at once.
        let hostile = String(repeating: "%a", count: 50) + "b"
        #expect(try eval(.like(.literal(.string(String(repeating: "a", count: 5_000))), .literal(.string(hostile)))) == false)
        #expect(try eval(.like(p("n"), .literal("7"))) == .some(.null))
        #expect(try eval(.like(p("nope"), .literal("7"))) == nil)
    }

    @Test func functions() throws {
        #expect(try eval(.function(.lower, [p("title")])) == "buy milk")
        #expect(try eval(.function(.upper, [p("title")])) == "BUY MILK")
        #expect(try eval(.function(.length, [p("title")])) == 8)
        #expect(try eval(.function(.trim, [.literal("  x \n")])) == "x")
        #expect(try eval(.function(.contains, [p("title"), .literal("Milk")])) == true)
        #expect(try eval(.function(.abs, [.literal(-3)])) == 3)
        #expect(try eval(.function(.abs, [.literal(.int(.min))])) == .double(9.223372036854775808e18))
        #expect(try eval(.function(.floor, [p("x")])) == 2)
        #expect(try eval(.function(.ceil, [p("x")])) == 3)
        #expect(try eval(.function(.round, [p("x")])) == 3)
        #expect(try eval(.function(.round, [.literal(1e300)])) == .double(1e300))
        #expect(try eval(.function(.arrayLength, [p("tags")])) == 2)
        #expect(try eval(.function(.arrayContains, [p("tags"), .literal("b")])) == true)
        #expect(try eval(.function(.lower, [p("n")])) == .some(.null))
        #expect(try eval(.function(.lower, [p("nope")])) == nil)
        #expect(throws: SetteeError.self) { try eval(.function(.lower, [])) }
    }

    /// `POSITION` and `SUBSTR` count code points from 0, as N1QL does; out of range is NULL
    /// (never a crash, whatever the numbers).
    @Test func positionAndSubstring() throws {
        func s(_ text: String, _ bounds: JSONValue...) throws -> JSONValue? {
            try eval(.function(.substr, [.literal(.string(text))] + bounds.map(QueryExpression.literal)))
        }
        #expect(try eval(.function(.position, [.literal("sensor:17"), .literal(":")])) == 6)
        #expect(try eval(.function(.position, [.literal("é:x"), .literal(":")])) == 1)
        #expect(try eval(.function(.position, [.literal("nothing"), .literal(":")])) == -1)
        #expect(try s("sensor:17", 0, 6) == "sensor")
        #expect(try s("sensor:17", 7) == "17")
        #expect(try s("sensor:17", -2) == "17")
        #expect(try s("sensor:17", 0, 100) == "sensor:17")
        #expect(try s("abc", 3) == "")
        #expect(try s("abc", 4) == .some(.null))
        #expect(try s("abc", 0, -1) == .some(.null))
        #expect(try s("abc", .int(.min)) == .some(.null))
        #expect(try s("abc", .int(.max), .int(.max)) == .some(.null))
        #expect(try s("abc", 0.5) == .some(.null))
        #expect(try eval(.function(.substr, [p("nope"), .literal(0)])) == nil)
        // A document's partition, as a partitioned index keys it.
        #expect(try eval(.partitionOfID) == .some(.null))
        let partitioned = QueryRow(id: "s1:task", revisionID: "1-a", sequence: 1, isDeleted: false, expiration: nil, properties: [:])
        #expect(try QueryExpression.partitionOfID.evaluate(partitioned, parameters: [:]) == "s1")
        // Its text is what an index is defined by, and parses back to it.
        #expect(try SQLParser.parseExpression(MangoQuery.partitionExpression) == .partitionOfID)
        #expect(throws: SetteeError.self) { try SQLParser.parseExpression("SUBSTR('a')") }
    }
}
