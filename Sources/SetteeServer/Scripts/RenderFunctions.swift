import CJavaScriptCore
import Foundation
@_spi(Replication) @_spi(Server) import Settee

/// The JavaScript of CouchDB's rendering design functions, which CouchDB 3.4 still serves
/// (deprecated, not removed): `shows` (`function (doc, req)` returning a response), `lists`
/// (`function (head, req)` reading a view's rows with `getRow()` and writing with `send()`)
/// and `updates` (`function (doc, req)` returning `[doc, response]`). They see CouchDB's
/// helpers: `provides(key, fn)` and `registerType(key, mime…)` (answers by the format asked
/// for), `start(response)`, `send(chunk)`, `getRow()`, `toJSON`, `sum`, `isArray`, `log`; and
/// `this` is their design document.
enum RenderFunctions {
    /// Defines the helpers and returns the runner `run(fn, mode, a, b, rows, ddoc)`: it calls
    /// `fn.call(ddoc, a, b)` and returns `{result, chunks, start, type}`: what the function
    /// returned (for `provides`, what the chosen format's function returned), what it sent,
    /// what it started with, and the chosen format's media type.
    static let prelude = #"""
    (function (global) {
        "use strict";
        var mimes = {};
        function registerType(key) {
            var list = [];
            for (var i = 1; i < arguments.length; i++) list[list.length] = String(arguments[i]);
            mimes[String(key)] = list;
        }
        registerType("all", "*/*");
        registerType("text", "text/plain; charset=utf-8", "txt");
        registerType("html", "text/html; charset=utf-8");
        registerType("xhtml", "application/xhtml+xml", "xhtml");
        registerType("xml", "application/xml", "text/xml", "application/x-xml");
        registerType("js", "text/javascript", "application/javascript", "application/x-javascript");
        registerType("css", "text/css");
        registerType("ics", "text/calendar");
        registerType("csv", "text/csv");
        registerType("rss", "application/rss+xml");
        registerType("atom", "application/atom+xml");
        registerType("yaml", "application/x-yaml", "text/yaml");
        registerType("multipart_form", "multipart/form-data");
        registerType("url_encoded_form", "application/x-www-form-urlencoded");
        registerType("json", "application/json", "text/x-json");
        var offered = [], chunks = [], started = null, rows = [], next = 0;
        function provides(key, fn) { offered[offered.length] = [String(key), fn]; }
        function send(chunk) { chunks[chunks.length] = String(chunk); }
        function start(response) { started = response || {}; }
        function getRow() { return next < rows.length ? rows[next++] : null; }
        function toJSON(value) { return JSON.stringify(value); }
        function sum(values) {
            var total = 0;
            for (var i = 0; i < values.length; i++) total += values[i];
            return total;
        }
        function log() {}
        var helpers = { registerType: registerType, provides: provides, send: send, start: start, getRow: getRow,
                        toJSON: toJSON, sum: sum, log: log, isArray: Array.isArray };
        for (var name in helpers) {
            Object.defineProperty(global, name, { value: helpers[name], writable: false, enumerable: false, configurable: false });
        }
        // The offered format to answer with: `?format=` names one; else the first whose media
        // types the Accept header names; else, when it takes every type (*/*) or there is no
        // Accept, the first offered.
        function choose(req, ddoc) {
            var query = (req && req.query) || {}, headers = (req && req.headers) || {};
            var accept = String(headers.Accept || headers.accept || "").toLowerCase();
            var pick = null, i, j;
            if (query.format !== undefined) {
                for (i = 0; i < offered.length && !pick; i++) if (offered[i][0] === String(query.format)) pick = offered[i];
                if (!pick) return { refused: "Content-Type " + query.format + " not supported" };
            } else if (accept) {
                for (i = 0; i < offered.length && !pick; i++) {
                    var types = mimes[offered[i][0]] || [];
                    for (j = 0; j < types.length && !pick; j++) {
                        if (accept.indexOf(types[j].split(";")[0].toLowerCase()) >= 0) pick = offered[i];
                    }
                }
                // `*/*` takes the first offered when none is named.
                if (!pick && accept.indexOf("*/*") < 0) return { refused: "Content-Type " + accept + " not supported" };
            }
            if (!pick) pick = offered[0];
            return { value: pick[1].call(ddoc), type: (mimes[pick[0]] || [null])[0] };
        }
        function refused(reason) { return { result: null, chunks: [], start: null, type: null, notAcceptable: reason }; }
        return function run(fn, mode, a, b, c, ddoc) {
            offered = []; chunks = []; started = null; rows = c || []; next = 0;
            var result = fn.call(ddoc, a, b);
            var type = null;
            if (mode !== "update" && offered.length > 0) {
                var chosen = choose(b, ddoc);
                if (chosen.refused !== undefined) return refused(chosen.refused);
                type = chosen.type;
                if (mode === "show") {
                    result = { base: result === undefined ? null : result, provided: chosen.value === undefined ? null : chosen.value };
                } else {
                    result = chosen.value;
                }
            }
            return { result: result === undefined ? null : result, chunks: chunks, start: started, type: type };
        };
    })(this)
    """#
}

/// One `shows`, `lists` or `updates` function of a design document.
///
/// ```swift
/// let show = try RenderFunction(name: "_design/app show summary", source: source, engine: engine)
/// let output = try show.run(mode: .show, doc: docJSON, req: reqJSON, rows: nil, ddoc: ddocJSON)
/// ```
///
/// Immutable; safe to share between threads (each run takes a VM of its own).
struct RenderFunction: Sendable {
    private let script: ScriptSource

    /// Which kind of function, and so how its result is read.
    enum Mode: String, Sendable {
        case show, list, update
    }

    /// What a run gave: the function's result (for `provides`, `{base, provided}` for a show,
    /// the chosen format's for a list), what it sent, its `start`, the chosen media type.
    struct Output {
        var result: JSONValue
        var chunks: [String]
        var start: JSONValue?
        var type: String?
        /// Why no format `provides` offered was acceptable (406), when none was.
        var notAcceptable: String?
    }

    /// Compiles `source`; a syntax error is thrown now.
    init(name: String, source: String, engine: ScriptEngine) throws(ScriptError) {
        script = try ScriptSource(name: name, source: source, kind: .render, engine: engine)
    }

    var name: String { script.name }

    /// Runs the function: `doc` (a show's or update's document, null when there is none) or a
    /// list's `head`, the request object, a list's rows; all JSON texts.
    func run(mode: Mode, doc: String?, req: String, rows: String?, ddoc: String) throws(ScriptError) -> Output {
        let text = try script.call(json: ["\"\(mode.rawValue)\"", doc, req, rows, ddoc], labels: ["mode", "doc", "req", "rows", "ddoc"]) {
            vm, realm, result throws(ScriptError) in try vm.jsonText(of: result, in: realm, name: script.name)
        }
        guard case .object(let o) = try? JSONValue(parsing: text) else {
            throw ScriptError(.badResult("the function's output is not JSON"), "\(script.name): the output is not JSON")
        }
        let chunks = (o["chunks"]?.arrayValue ?? []).compactMap(\.stringValue)
        return Output(result: o["result"] ?? .null, chunks: chunks, start: o["start"].flatMap { $0 == .null ? nil : $0 },
                      type: o["type"]?.stringValue, notAcceptable: o["notAcceptable"]?.stringValue)
    }
}
