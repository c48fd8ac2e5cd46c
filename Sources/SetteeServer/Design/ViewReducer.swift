import Foundation
import Settee

/// A view's reduce: one of CouchDB's built-ins, computed natively as rows come, or a
/// JavaScript function, called on blocks of rows and then, when there were several, on
/// their results (`rereduce`).
struct ViewReducer {
    enum Kind { case count, sum, stats, distinct, javascript(ViewReduceFunction) }
    let kind: Kind

    /// Rows per call of a JavaScript reduce; the results of several calls are rereduced.
    static let block = 256

    init(_ source: String, view: ViewDefinition, db: ServedDatabase) throws {
        switch source.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "_count": kind = .count
        case "_sum": kind = .sum
        case "_stats": kind = .stats
        case "_approx_count_distinct": kind = .distinct
        case let s where s.hasPrefix("_"):
            throw CouchError(.badRequest, "query_parse_error", "Unknown built-in reduce \(s)")
        default:
            let cached = db.viewReduces.withLock { $0[source] }
            if let cached {
                kind = .javascript(cached)
            } else {
                do {
                    let f = try ViewReduceFunction(name: "\(view.ddoc) view \(view.name) reduce", source: source, engine: db.routing.engine)
                    db.viewReduces.withLock { $0[source] = f }
                    kind = .javascript(f)
                } catch {
                    throw CouchError(.badRequest, "compilation_error", "\(error)")
                }
            }
        }
    }

    func accumulator() -> Accumulator { Accumulator(kind) }

    /// For a built-in reduce that reads rows' values alone, whether it reads them (`_sum`,
    /// `_stats`) or only counts rows (`_count`); nil for one that reads keys or IDs too.
    var readsValues: Bool? {
        switch kind {
        case .count: false
        case .sum, .stats: true
        case .distinct, .javascript: nil
        }
    }

    final class Accumulator {
        let kind: Kind
        var count: Int64 = 0
        var total: JSONValue?
        var distinct = Set<JSONValue>()
        var keys: [JSONValue] = []
        var values: [JSONValue] = []
        var partials: [JSONValue] = []

        init(_ kind: Kind) { self.kind = kind }

        func add(key: JSONValue, id: String, value: JSONValue) throws {
            switch kind {
            case .count, .sum, .stats: try add(value: value)
            case .distinct:
                count += 1
                distinct.insert(Self.normalized(key))
            case .javascript(let f):
                count += 1
                keys.append([key, .string(id)])
                values.append(value)
                if values.count >= ViewReducer.block { try flush(f) }
            }
        }

        /// One row for a reduce that reads values alone (``ViewReducer/readsValues``).
        func add(value: JSONValue) throws {
            count += 1
            switch kind {
            case .sum: total = try total.map { try Self.sum($0, value) } ?? Self.checkedSummand(value)
            case .stats:
                let s = try Self.stats(of: value)
                total = try total.map { try Self.combineStats($0, s) } ?? s
            default: break
            }
        }

        /// `n` rows for `_count`, read without their values.
        func add(rows n: Int) { count += Int64(n) }

        private func flush(_ f: ViewReduceFunction) throws {
            partials.append(try f.run(keys: .array(keys), values: values, rereduce: false))
            keys.removeAll(keepingCapacity: true)
            values.removeAll(keepingCapacity: true)
            if partials.count >= ViewReducer.block { partials = [try f.run(keys: .null, values: partials, rereduce: true)] }
        }

        func finish() throws -> JSONValue {
            switch kind {
            case .count: return .int(count)
            case .sum: return total ?? 0
            case .stats: return total ?? ["sum": 0, "count": 0, "min": 0, "max": 0, "sumsqr": 0]
            case .distinct: return .int(Int64(distinct.count))
            case .javascript(let f):
                if !values.isEmpty || partials.isEmpty { try flush(f) }
                return partials.count == 1 ? partials[0] : try f.run(keys: .null, values: partials, rereduce: true)
            }
        }

        static func reduceError(_ what: String) -> CouchError {
            CouchError(.badRequest, "builtin_reduce_error", what)
        }

        /// Numbers compare and hash as numbers (`1` and `1.0` are one key).
        static func normalized(_ v: JSONValue) -> JSONValue {
            switch v {
            case .int(let i): return .double(Double(i))
            case .array(let a): return .array(a.map(normalized))
            case .object(let o): return .object(o.mapValues(normalized))
            default: return v
            }
        }

        static func checkedSummand(_ v: JSONValue) throws -> JSONValue {
            switch v {
            case .int, .double: return v
            case .array(let a): return .array(try a.map(checkedSummand))
            case .object(let o): return .object(try o.mapValues(checkedSummand))
            default: throw reduceError("The _sum function requires that map values be numbers, arrays of numbers, or objects. Got: \(v)")
            }
        }

        static func sum(_ a: JSONValue, _ b: JSONValue) throws -> JSONValue {
            switch (a, b) {
            case (.int(let x), .int(let y)):
                let (s, overflow) = x.addingReportingOverflow(y)
                return overflow ? .double(Double(x) + Double(y)) : .int(s)
            case (.int, .double), (.double, .int), (.double, .double):
                return .double((a.doubleValue ?? 0) + (b.doubleValue ?? 0))
            case (.array(let x), .array(let y)):
                var out: [JSONValue] = []
                for i in 0 ..< max(x.count, y.count) {
                    if i < x.count && i < y.count { out.append(try sum(x[i], y[i])) } else { out.append(try checkedSummand(i < x.count ? x[i] : y[i])) }
                }
                return .array(out)
            case (.object(var x), .object(let y)):
                for (k, v) in y { x[k] = try x[k].map { try sum($0, v) } ?? checkedSummand(v) }
                return .object(x)
            default:
                throw reduceError("The _sum function requires that map values be numbers, arrays of numbers, or objects; values of different kinds cannot be summed")
            }
        }

        static func stats(of v: JSONValue) throws -> JSONValue {
            switch v {
            case .int(let i):
                let (square, overflow) = i.multipliedReportingOverflow(by: i)
                return ["sum": v, "count": 1, "min": v, "max": v, "sumsqr": overflow ? .double(Double(i) * Double(i)) : .int(square)]
            case .double(let d):
                return ["sum": v, "count": 1, "min": v, "max": v, "sumsqr": .double(d * d)]
            case .object(let o) where o["sum"] != nil && o["count"] != nil:
                return v
            case .array(let a):
                return .array(try a.map(stats(of:)))
            default:
                throw reduceError("The _stats function requires that map values be numbers or arrays of numbers, not \(v)")
            }
        }

        static func combineStats(_ a: JSONValue, _ b: JSONValue) throws -> JSONValue {
            switch (a, b) {
            case (.array(let x), .array(let y)) where x.count == y.count:
                return .array(try zip(x, y).map { try combineStats($0, $1) })
            case (.object(let x), .object(let y)):
                func n(_ o: [String: JSONValue], _ k: String) -> JSONValue { o[k] ?? 0 }
                func lesser(_ p: JSONValue, _ q: JSONValue) -> JSONValue { (p.doubleValue ?? 0) <= (q.doubleValue ?? 0) ? p : q }
                func greater(_ p: JSONValue, _ q: JSONValue) -> JSONValue { (p.doubleValue ?? 0) >= (q.doubleValue ?? 0) ? p : q }
                return ["sum": try sum(n(x, "sum"), n(y, "sum")), "count": try sum(n(x, "count"), n(y, "count")),
                        "min": lesser(n(x, "min"), n(y, "min")), "max": greater(n(x, "max"), n(y, "max")),
                        "sumsqr": try sum(n(x, "sumsqr"), n(y, "sumsqr"))]
            default:
                throw reduceError("The _stats function requires that map values be all numbers or all arrays of numbers of one length")
            }
        }
    }
}
