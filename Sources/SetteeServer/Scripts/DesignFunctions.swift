import CJavaScriptCore

/// A design document's `validate_doc_update`, CouchDB's
/// `function (newDoc, oldDoc, userCtx, secObj) {…}`: it allows a write by returning and rejects it
/// by throwing `{forbidden: message}` (403) or `{unauthorized: message}` (401).
///
/// Immutable; safe to share between threads (each run takes a VM of its own).
struct ValidateFunction: Sendable {
    private let script: ScriptSource

    var name: String { script.name }

    /// Compiles `source`; a syntax error is thrown now. `name` is how errors refer to the function
    /// (for example `_design/app validate_doc_update`).
    init(name: String, source: String, engine: ScriptEngine) throws(ScriptError) {
        script = try ScriptSource(name: name, source: source, kind: .plain, engine: engine)
    }

    /// Returns when the function allows the write.
    ///
    /// - Parameters: JSON texts: the new revision (with `_id`, `_rev`, `_deleted`), the current one
    ///   (nil: `null`), CouchDB's user context (`{"db", "name", "roles"}`) and the database's
    ///   security object.
    func run(newDoc: String, oldDoc: String?, userCtx: String, secObj: String) throws(ScriptError) {
        try script.call(json: [newDoc, oldDoc, userCtx, secObj], labels: ["newDoc", "oldDoc", "userCtx", "secObj"]) { _, _, _ in }
    }
}

/// A design document's replication filter, CouchDB's `filters` entry `function (doc, req) {…}`:
/// a document passes when the function returns a truthy value.
///
/// Immutable; safe to share between threads (each run takes a VM of its own).
struct FilterFunction: Sendable {
    private let script: ScriptSource

    var name: String { script.name }

    /// Compiles `source`; a syntax error is thrown now. `name` is how errors refer to the function
    /// (for example `filter app/by_type`).
    init(name: String, source: String, engine: ScriptEngine) throws(ScriptError) {
        script = try ScriptSource(name: name, source: source, kind: .plain, engine: engine)
    }

    /// Whether `doc` (JSON) passes, given the request `req` (JSON, CouchDB's request object, whose
    /// `query` holds the replication's query parameters).
    func run(doc: String, req: String) throws(ScriptError) -> Bool {
        try script.call(json: [doc, req], labels: ["doc", "req"]) { _, realm, result in
            JSValueToBoolean(realm.context, result)
        }
    }
}
