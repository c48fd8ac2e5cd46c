import Foundation
import Testing
@testable import Settee

/// The prefilter that decides a scan's `WHERE` from a stored body's bytes: it may only reject a
/// document whose clause the evaluator finds not TRUE, without throwing, on the parsed document.
@Suite struct BodyPrefilterTests {
    private func prefilter(_ clause: String, _ parameters: [String: JSONValue] = [:]) throws -> BodyPrefilter? {
        BodyPrefilter(try SQLParser.parseExpression(clause), parameters: parameters)
    }

    private func admits(_ clause: String, _ body: String, _ parameters: [String: JSONValue] = [:]) throws -> Bool {
        let filter = try #require(try prefilter(clause, parameters))
        return try Array(body.utf8).withUnsafeBytes { try filter.admits($0) }
    }

    @Test func comparesWhatTheBodyHolds() throws {
        #expect(try !admits("priority = 3", #"{"a":"x","priority":4,"z":[1,2]}"#))
        #expect(try admits("priority = 3", #"{"a":"x","priority":3,"z":[1,2]}"#))
        #expect(try admits("priority = 3", #"{"priority":3.0}"#))
        #expect(try !admits("priority = 3", #"{"other":3}"#))              // MISSING = 3 is MISSING
        #expect(try !admits("priority = 3", #"{"priority":null}"#))
        #expect(try !admits("priority = 3", #"{"priority":[3]}"#))         // an array is not a number
        #expect(try !admits("list.id = 'a'", #"{"list":{"id":"b","n":1}}"#))
        #expect(try admits("list.id = 'a'", #"{"list":{"id":"a","n":1}}"#))
        #expect(try !admits("list.id = 'a'", #"{"list":"a"}"#))
        #expect(try admits("type = $t AND n BETWEEN 1 AND 5", #"{"n":2,"type":"task"}"#, ["t": "task"]))
        #expect(try !admits("type = $t AND n BETWEEN 1 AND 5", #"{"n":9,"type":"task"}"#, ["t": "task"]))
        #expect(try !admits("n IN [1, 2]", #"{"n":3}"#))
        #expect(try admits("n IN [1, 2] OR s IS NULL", #"{"n":3,"s":null}"#))
        #expect(try !admits("NOT (done = false)", #"{"done":false}"#))
        // Strings equal as text, not as bytes: "é" precomposed and decomposed.
        #expect(try admits("s = 'é'", #"{"s":"e\u0301"}"#))
        // A key that may be the one looked for under another spelling: left to the evaluator.
        #expect(try admits("K = 1", #"{"\u212A":2}"#))
        // What it cannot decide it admits: functions, two strings ordered by the collator.
        #expect(try prefilter("lower(s) = 'x'") == nil)
        #expect(try admits("lower(s) = 'x' AND n = 1", #"{"n":2,"s":"y"}"#))
        #expect(try admits("s < 'b'", #"{"s":"c"}"#))
        // Nothing to probe: no prefilter at all.
        #expect(try prefilter("1 = 1") == nil)
    }

    /// An `AND` is read as the evaluator reads it: a part that might throw is reached unless an
    /// earlier part was FALSE.
    @Test func aClauseThatWouldThrowIsNotRejected() throws {
        #expect(try !admits("a = 1 AND $nope = 2", #"{"a":2}"#))
        #expect(try admits("$nope = 2 AND a = 1", #"{"a":2}"#))
        #expect(try admits("regexp_like(s, p) AND a = 1", #"{"a":2,"p":"[","s":"x"}"#))
        #expect(try !admits("a = 1 AND regexp_like(s, p)", #"{"a":2,"p":"[","s":"x"}"#))
        // MISSING does not stop an AND: the part after it is evaluated, and might throw.
        #expect(try admits("a = 1 AND regexp_like(s, p)", #"{"p":"[","s":"x"}"#))

        // The same through a query: the missing parameter is an error as soon as a document
        // reaches it, whatever the prefilter saw first.
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 20 { try db.saveDocument(MutableDocument(id: "d\(i)", data: ["a": .int(Int64(i % 5))])) }
        #expect(throws: SetteeError.self) { _ = try db.createQuery("SELECT META().id FROM _ WHERE $nope = 2 AND a = 1").execute().allResults() }
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE a = 9 AND $nope = 2").execute().allResults().isEmpty)
        #expect(try db.createQuery("SELECT META().id FROM _ WHERE a = 3 ORDER BY META().id").execute().allResults().map { $0.string(at: 0) }
                == ["d13", "d18", "d3", "d8"])
    }

    /// Through an index whose range does not imply the whole clause: the documents it names are
    /// decided by the prefilter first, with the same answers as without the index.
    @Test func anIndexScansDocumentsArePrefilteredToo() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 60 {
            try db.saveDocument(MutableDocument(id: String(format: "t%02d", i), data: [
                "type": i % 3 == 0 ? "list" : "task", "priority": .int(Int64(i % 5)), "list": ["id": .string("l\(i % 4)")]]))
        }
        let text = "SELECT META().id FROM _ WHERE type = 'task' AND priority = 3 AND list.id != 'l0' ORDER BY META().id"
        let unindexed = try db.createQuery(text).execute().allResults().map { $0.string(at: 0) }
        try db.createIndex(ValueIndexConfiguration(["type"]), name: "byType")
        let query = try db.createQuery(text)
        #expect(try query.explain().contains("SCAN INDEX byType"))
        let indexed = try query.execute().allResults().map { $0.string(at: 0) }
        #expect(indexed == unindexed && indexed == ["t13", "t23", "t38", "t43", "t53", "t58"], "\(indexed) \(unindexed)")
        // A part that would throw is still reached where the evaluator reaches it.
        #expect(throws: SetteeError.self) {
            _ = try db.createQuery("SELECT META().id FROM _ WHERE type = 'task' AND $nope = 1").execute().allResults()
        }
    }

    /// Random clauses over random bodies: whenever the prefilter decides, the evaluator on the
    /// parsed body does not throw and answers TRUE exactly where it found a match; and it does
    /// decide often.
    @Test func aRejectionIsAlwaysTheEvaluatorsAnswer() throws {
        let seed = ProcessInfo.processInfo.environment["SETTEE_PREFILTER_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0 ... .max)
        print("BodyPrefilterTests seed \(seed)")
        var generator = SeededGenerator(seed: seed)
        func below(_ n: Int) -> Int { Int(generator.next(below: UInt64(n))) }
        func pick<T>(_ options: [T]) -> T { options[below(options.count)] }

        let values = ["null", "true", "false", "0", "1", "2", "-1", "1.0", "1.5", "1e0", #""""#, #""x""#, #""b""#,
                      #""\u00e9""#, #""e\u0301""#, #""K""#, #""\u212A""#, #""a\"b""#, "[]", "[1]", #"["x"]"#, "{}", #"{"a":1}"#]
        let names = ["a", "b", "K", "p"]
        func body() -> String {
            var members: [String] = []
            for name in names where below(4) != 0 { members.append("\"\(name)\":\(pick(values))") }
            if below(3) == 0 { members.append(#""\u212A":\#(pick(values))"#) }
            if below(2) == 0 {
                var inner: [String] = []
                for name in ["a", "b"] where below(3) != 0 { inner.append("\"\(name)\":\(pick(values))") }
                members.append(#""o":{\#(inner.joined(separator: ","))}"#)
            }
            return "{" + members.joined(separator: ",") + "}"
        }
        let operands = ["a", "b", "K", "o.a", "o.b", "o.a.b", "p", "$p", "$absent", "1", "2", "1.0", "'x'", "'b'", "'é'", "null",
                        "MISSING", "true", "[1]", "lower(a)", "a + 1"]
        func clause(_ depth: Int) -> String {
            switch depth > 2 ? below(5) : below(9) {
            case 0, 1, 2: return "\(pick(operands)) \(pick(["=", "!=", "<", "<=", ">", ">="])) \(pick(operands))"
            case 3: return "\(pick(operands)) IS \(pick(["NULL", "NOT NULL", "MISSING", "NOT MISSING", "VALUED", "NOT VALUED"]))"
            case 4: return "\(pick(operands)) BETWEEN \(pick(operands)) AND \(pick(operands))"
            case 5: return "\(pick(operands)) IN [\(pick(operands)), \(pick(operands))]"
            case 6: return "(\(clause(depth + 1)) AND \(clause(depth + 1)))"
            case 7: return "(\(clause(depth + 1)) OR \(clause(depth + 1)))"
            default: return below(2) == 0 ? "NOT (\(clause(depth + 1)))" : "regexp_like(\(pick(operands)), \(pick(["p", "'x'"])))"
            }
        }

        var rejected = 0, matched = 0, checked = 0
        for _ in 0 ..< 3000 {
            let text = clause(0)
            let expression = try SQLParser.parseExpression(text)
            var parameters: [String: JSONValue] = [:]
            if below(4) != 0 { parameters["p"] = try JSONParser.parse(pick(values)) }
            guard let filter = BodyPrefilter(expression, parameters: parameters) else { continue }
            for _ in 0 ..< 8 {
                let json = body()
                // Bodies a save would refuse (a key twice, as text) are not stored bodies.
                guard case .object(let properties)? = try? JSONParser.parse(json) else { continue }
                checked += 1
                let row = QueryRow(id: "d", revisionID: "1-a", sequence: 1, isDeleted: false, expiration: nil, properties: properties)
                let admission = try Array(json.utf8).withUnsafeBytes { try filter.admission($0) }
                if admission == .undecided { continue }
                if admission == .rejected { rejected += 1 } else { matched += 1 }
                do {
                    let answer = try expression.evaluate(row, parameters: parameters)
                    #expect(answer.isTrue == (admission == .matches),
                            "seed \(seed): \(text) on \(json) with \(parameters) is \(String(describing: answer)), \(admission)")
                } catch {
                    Issue.record("seed \(seed): \(text) on \(json) with \(parameters) throws \(error), \(admission)")
                }
            }
        }
        print("BodyPrefilterTests: of \(checked) bodies, \(rejected) rejected, \(matched) found matching")
        #expect(rejected > checked / 10 && matched > checked / 20, "seed \(seed): \(rejected) rejected, \(matched) matching of \(checked)")
    }
}
