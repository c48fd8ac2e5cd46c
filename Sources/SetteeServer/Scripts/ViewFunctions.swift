import CJavaScriptCore
import Foundation
import Settee

/// The JavaScript of CouchDB views: `map` functions that call `emit(key, value)`, and
/// `reduce` functions `function (keys, values, rereduce)`. Both see CouchDB's helpers `sum`,
/// `log` (to the server's log) and `isArray`.
enum ViewFunctions {
    /// Defines the helpers and returns the runner: `run(fn, "map", doc)` returns the rows the
    /// call emitted as `[[key, value], …]`; `run(fn, "reduce", keys, values, rereduce)` returns
    /// what the function returned.
    static let prelude = #"""
    (function (global) {
        "use strict";
        var rows = null;
        function emit(key, value) {
            if (rows === null) return;
            rows[rows.length] = [key === undefined ? null : key, value === undefined ? null : value];
        }
        function sum(values) {
            var total = 0;
            for (var i = 0; i < values.length; i++) total += values[i];
            return total;
        }
        function log() {}
        var helpers = { emit: emit, sum: sum, log: log, isArray: Array.isArray };
        for (var name in helpers) {
            Object.defineProperty(global, name, { value: helpers[name], writable: false, enumerable: false, configurable: false });
        }
        return function run(fn, mode, a, b, c) {
            if (mode === "maps") {
                // Many documents in one call: each document's rows, or {error} when it threw.
                var all = [];
                for (var i = 0; i < a.length; i++) {
                    var mine = [];
                    rows = mine;
                    try {
                        fn(a[i]);
                        all[all.length] = mine;
                    } catch (e) {
                        all[all.length] = { error: String(e && e.message !== undefined ? e.message : e) };
                    } finally {
                        rows = null;
                    }
                }
                return all;
            }
            if (mode !== "map") return fn(a, b, c);
            var out = [];
            rows = out;
            try {
                fn(a);
            } finally {
                rows = null;
            }
            return out;
        };
    })(this)
    """#
}

/// A view's `map` function.
///
/// Immutable; safe to share between threads (each run takes a VM of its own).
struct ViewMapFunction: Sendable {
    fileprivate let script: ScriptSource

    var source: String { script.source }

    /// Compiles `source`; a syntax error is thrown now.
    init(name: String, source: String, engine: ScriptEngine) throws(ScriptError) {
        script = try ScriptSource(name: name, source: source, kind: .view, engine: engine)
    }

    /// The rows the function emits for `doc` (JSON, with `_id` and `_rev`).
    func run(doc: String) throws(ScriptError) -> [MapIndexEmission] {
        let text = try script.call(json: ["\"map\"", doc], labels: ["mode", "doc"]) { vm, realm, result throws(ScriptError) in
            try vm.jsonText(of: result, in: realm, name: script.name)
        }
        guard case .array(let rows) = try? JSONValue(parsing: text) else {
            throw ScriptError(.badResult("emitted rows are not JSON"), "\(script.name): the emitted rows are not JSON")
        }
        return rows.map { row in
            guard case .array(let pair) = row, pair.count == 2 else { return MapIndexEmission(key: nil, value: nil) }
            return MapIndexEmission(key: pair[0], value: pair[1])
        }
    }
}

extension ViewMapFunction {
    /// The rows the function emits for each of `docs` (a JSON array of documents), in one call:
    /// per document its rows, or the message of what it threw.
    func run(docs: String, count: Int) throws(ScriptError) -> [Swift.Result<[MapIndexEmission], ScriptError>] {
        let text = try script.call(json: ["\"maps\"", docs], labels: ["mode", "docs"]) { vm, realm, result throws(ScriptError) in
            try vm.jsonText(of: result, in: realm, name: script.name)
        }
        guard case .array(let all) = try? JSONValue(parsing: text), all.count == count else {
            throw ScriptError(.badResult("emitted rows are not JSON"), "\(script.name): the emitted rows are not JSON")
        }
        return all.map { item in
            guard case .array(let rows) = item else {
                let message = item["error"]?.stringValue ?? "the function threw"
                return .failure(ScriptError(.exception(message), "\(script.name): \(message)"))
            }
            return .success(rows.map { row in
                guard case .array(let pair) = row, pair.count == 2 else { return MapIndexEmission(key: nil, value: nil) }
                return MapIndexEmission(key: pair[0], value: pair[1])
            })
        }
    }
}

/// A view's JavaScript `reduce` function.
///
/// Immutable; safe to share between threads (each run takes a VM of its own).
struct ViewReduceFunction: Sendable {
    private let script: ScriptSource

    /// Compiles `source`; a syntax error is thrown now.
    init(name: String, source: String, engine: ScriptEngine) throws(ScriptError) {
        script = try ScriptSource(name: name, source: source, kind: .view, engine: engine)
    }

    /// `reduce(keys, values, rereduce)`: keys are `[[key, id], …]` (null on a rereduce).
    func run(keys: JSONValue, values: [JSONValue], rereduce: Bool) throws -> JSONValue {
        let text = try script.call(json: ["\"reduce\"", try keys.jsonText(), try JSONValue.array(values).jsonText(), rereduce ? "true" : "false"],
                                   labels: ["mode", "keys", "values", "rereduce"]) { vm, realm, result throws(ScriptError) in
            // `undefined` (no return) has no JSON text: it is null, as in CouchDB.
            JSValueIsUndefined(realm.context, result) ? "null" : try vm.jsonText(of: result, in: realm, name: script.name)
        }
        return try JSONValue(parsing: text)
    }
}
