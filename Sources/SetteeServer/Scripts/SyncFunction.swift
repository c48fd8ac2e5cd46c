import CJavaScriptCore
import Foundation
import Settee

/// The user a sync function runs for: the one writing the document.
///
/// A value type; safe to share between threads.
struct ScriptUser: Sendable, Equatable {
    var name: String
    /// The channels the user can read, as `requireAccess` sees them: exactly these (include `"!"`
    /// to count the public channel); a `"*"` here does not pass for other channels.
    var channels: Set<String>
    /// Plain role names (no `role:` prefix).
    var roles: Set<String>

    init(name: String, channels: Set<String> = [], roles: Set<String> = []) {
        self.name = name
        self.channels = channels
        self.roles = roles
    }
}

/// What `expiry(value)` asked for.
///
/// A value type; safe to share between threads.
enum ExpiryRequest: Sendable, Equatable {
    /// The document expires at this time.
    case at(Date)
    /// `expiry(0)`: Couchbase Server's "no expiry", so any expiry the document had is cleared.
    case never
}

/// What a sync function decided for one revision.
///
/// A value type; safe to share between threads.
struct SyncOutcome: Sendable, Equatable {
    /// The channels the revision is in.
    var channels: Set<String> = []
    /// Grants to users: user name → the channels it may read.
    var access: [String: Set<String>] = [:]
    /// Grants to roles (`access("role:<name>", …)`): role name → the channels its users may read.
    var roleAccess: [String: Set<String>] = [:]
    /// Roles given: user name → plain role names.
    var roles: [String: Set<String>] = [:]
    /// The last `expiry()` call's value, resolved; nil when the function did not call it.
    var expiry: ExpiryRequest?
}

/// A Sync Gateway sync function, `function (doc, oldDoc) {…}`, compiled once per VM of an engine.
///
/// The function calls helpers to route the document and to check the writer: `channel(...)`,
/// `access(users, channels)`, `role(users, roles)`, `expiry(value)`, `requireUser(names)`,
/// `requireRole(roles)`, `requireAccess(channels)`, `requireAdmin()`; it rejects a write by
/// throwing `{forbidden: message}` or `{unauthorized: message}`.
///
/// Immutable; safe to share between threads (each run takes a VM of its own).
struct SyncFunction: Sendable {
    /// Sync Gateway's default: a document's channels are its `channels` property.
    static let defaultSource = "function(doc, oldDoc) { channel(doc.channels); }"

    /// Expiry values up to this many seconds (30 days) are relative to now; larger ones are Unix
    /// times (Couchbase Server's rule, which Sync Gateway's `expiry()` follows).
    static let relativeExpiryLimit: Int64 = 30 * 24 * 3600

    private let script: ScriptSource

    var source: String { script.source }

    /// Whether this is Sync Gateway's default function (callers route by `doc.channels` natively
    /// rather than running it).
    var isDefault: Bool { source.trimmingCharacters(in: .whitespacesAndNewlines) == Self.defaultSource }

    /// Compiles `source`; a syntax error is thrown now, as ``ScriptError/Kind/syntax``.
    init(source: String, engine: ScriptEngine) throws(ScriptError) {
        script = try ScriptSource(name: "sync function", source: source, kind: .sync, engine: engine)
    }

    /// Runs the function for a new revision.
    ///
    /// - Parameters:
    ///   - doc: the revision's body, JSON (with `_id`, `_rev`, `_deleted` as the function should see them).
    ///   - oldDoc: the parent revision's body, JSON; nil when there is none (`oldDoc` is `null`).
    ///   - user: who is writing; nil for an administrator, for whom every `require…` passes.
    ///   - now: the time relative expiry values count from.
    /// - Throws: ``ScriptError``: `.forbidden`/`.unauthorized` when the function rejects the write.
    func run(doc: String, oldDoc: String?, user: ScriptUser?, now: Date = Date()) throws(ScriptError) -> SyncOutcome {
        var userJSON: String?
        if let user { userJSON = try Self.json(user) }
        let text = try script.call(json: [doc, oldDoc, userJSON], labels: ["doc", "oldDoc", "user"]) { vm, realm, result throws(ScriptError) in
            try vm.jsonText(of: result, in: realm, name: script.name)
        }
        return try Self.outcome(from: text, now: now)
    }

    /// `{"name":…,"channels":[…],"roles":[…]}`, as the helpers read it.
    static func json(_ user: ScriptUser) throws(ScriptError) -> String {
        let value: JSONValue = ["name": .string(user.name), "channels": .array(user.channels.map(JSONValue.string)),
                                "roles": .array(user.roles.map(JSONValue.string))]
        do {
            return try value.jsonText()
        } catch {
            let message = "the user \(user.name) cannot be handed to the function: \(error.message)"
            throw ScriptError(.badResult(message), message)
        }
    }

    // MARK: The runner's result

    /// Reads what the runner returned: `{"channels": […], "access": {principal: […]}, "roles":
    /// {user: […]}, "expiry"?: number or string, "bad"?: message}`.
    static func outcome(from text: String, now: Date) throws(ScriptError) -> SyncOutcome {
        func bad(_ what: String) -> ScriptError { ScriptError(.badResult(what), "sync function: \(what)") }
        guard case .object(let o)? = try? JSONValue(parsing: text) else { throw bad("the helpers' result is not an object") }
        if case .string(let message)? = o["bad"] { throw bad(message) }
        func strings(_ v: JSONValue?) throws(ScriptError) -> Set<String> {
            guard case .array(let items)? = v else { throw bad("the helpers' result is malformed") }
            var set = Set<String>()
            for item in items {
                guard case .string(let s) = item, !s.isEmpty else { throw bad("the helpers' result is malformed") }
                set.insert(s)
            }
            return set
        }
        func map(_ v: JSONValue?) throws(ScriptError) -> [String: Set<String>] {
            guard case .object(let entries)? = v else { throw bad("the helpers' result is malformed") }
            var m: [String: Set<String>] = [:]
            for (key, value) in entries { m[key] = try strings(value) }
            return m
        }
        var outcome = SyncOutcome(channels: try strings(o["channels"]), roles: try map(o["roles"]))
        // `role:` names a role (a user name never holds a colon): its grant is the role's.
        for (principal, channels) in try map(o["access"]) {
            if principal.hasPrefix("role:") {
                outcome.roleAccess[String(principal.dropFirst(5)), default: []].formUnion(channels)
            } else {
                outcome.access[principal, default: []].formUnion(channels)
            }
        }
        if let e = o["expiry"] {
            guard let expiry = resolveExpiry(e, now: now) else {
                throw bad("expiry(): \(describe(e)) is not a time (seconds ≤ 30 days, a Unix time, or an ISO-8601 date)")
            }
            outcome.expiry = expiry
        }
        return outcome
    }

    private static func describe(_ v: JSONValue) -> String {
        (try? v.jsonText()) ?? "the value"
    }

    /// Sync Gateway's reading of an expiry: a whole number of seconds, up to 30 days from `now`,
    /// beyond that a Unix time, 0 for none; the same as a string of digits; or an ISO-8601 (RFC 3339)
    /// date and time.
    static func resolveExpiry(_ value: JSONValue, now: Date) -> ExpiryRequest? {
        func seconds(_ n: Int64) -> ExpiryRequest? {
            if n < 0 { return nil }
            if n == 0 { return .never }
            if n <= relativeExpiryLimit { return .at(now.addingTimeInterval(TimeInterval(n))) }
            return .at(Date(timeIntervalSince1970: TimeInterval(n)))
        }
        switch value {
        case .int(let n):
            return seconds(n)
        case .double(let d):
            // JSON numbers like 1e9 arrive as doubles; only whole ones are times.
            guard d.rounded() == d, let n = Int64(exactly: d) else { return nil }
            return seconds(n)
        case .string(let s):
            if !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                return Int64(s).flatMap(seconds)
            }
            return parseISO8601(s).map(ExpiryRequest.at)
        default:
            return nil
        }
    }

    /// `2030-01-02T03:04:05Z`, `…+01:00`, with or without fractional seconds.
    static func parseISO8601(_ s: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let d = plain.date(from: s) { return d }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: s)
    }

    // MARK: The helpers

    /// Evaluated in each sync function's global context before the function: defines the helpers
    /// as globals and returns the runner, `run(fn, doc, oldDoc, user)`, which calls the function and
    /// returns what the helpers recorded.
    ///
    /// Everything it needs from the built-ins is taken before the function's source is evaluated,
    /// and the run in progress is a closure variable no other code can reach. A helper called
    /// outside a run (from a promise settled after it) does nothing. Invalid names are recorded,
    /// not thrown, so a function's own `try` cannot hide them: the first one fails the run.
    static let prelude = #"""
    (function (global) {
        "use strict";
        var isArray = Array.isArray;
        var createMap = Object.create;
        var defineProperty = Object.defineProperty;
        var current = null;

        function reject(message) {
            throw { forbidden: message };
        }

        function noteBad(message) {
            if (current.bad === null) current.bad = message;
        }

        function kind(value) {
            if (value === "") return "an empty string";
            if (isArray(value)) return "a nested array";
            if (typeof value === "object") return "an object";
            return "a " + typeof value;
        }

        // Calls each(name) for every name in value: a string, or an array of strings; null and
        // undefined (alone or as elements) are nothing. Anything else is noted as bad.
        function eachName(value, helper, what, each) {
            if (value === null || value === undefined) return;
            if (isArray(value)) {
                for (var i = 0; i < value.length; i++) {
                    var item = value[i];
                    if (item === null || item === undefined) continue;
                    if (typeof item === "string" && item !== "") each(item);
                    else noteBad(helper + ": " + what + " must be a non-empty string, not " + kind(item));
                }
            } else if (typeof value === "string" && value !== "") {
                each(value);
            } else {
                noteBad(helper + ": " + what + " must be a non-empty string or an array of them, not " + kind(value));
            }
        }

        // The strings in value (a string or an array), for the require… checks.
        function listed(value) {
            var out = [];
            if (typeof value === "string") out[0] = value;
            else if (isArray(value)) {
                for (var i = 0; i < value.length; i++) if (typeof value[i] === "string") out[out.length] = value[i];
            }
            return out;
        }

        function contains(list, item) {
            for (var i = 0; i < list.length; i++) if (list[i] === item) return true;
            return false;
        }

        function withoutRolePrefix(name) {
            return name.length > 5 && name.slice(0, 5) === "role:" ? name.slice(5) : name;
        }

        function add(map, key, values) {
            var list = map[key];
            if (list === undefined) list = map[key] = [];
            for (var i = 0; i < values.length; i++) list[list.length] = values[i];
        }

        function channel() {
            if (current === null) return;
            var channels = current.channels;
            for (var i = 0; i < arguments.length; i++) {
                eachName(arguments[i], "channel()", "a channel name", function (name) {
                    channels[channels.length] = name;
                });
            }
        }

        function access(users, channels) {
            if (current === null) return;
            var granted = [];
            eachName(channels, "access()", "a channel name", function (name) { granted[granted.length] = name; });
            eachName(users, "access()", "a user or role name", function (name) {
                if (name === "role:") noteBad("access(): \"role:\" names no role");
                else if (granted.length > 0) add(current.access, name, granted);
            });
        }

        function role(users, roles) {
            if (current === null) return;
            var given = [];
            eachName(roles, "role()", "a role name", function (name) {
                var plain = name.slice(0, 5) === "role:" ? name.slice(5) : name;
                if (plain === "") noteBad("role(): \"role:\" names no role");
                else given[given.length] = plain;
            });
            eachName(users, "role()", "a user name", function (name) {
                if (name.slice(0, 5) === "role:") noteBad("role(): roles are given to users, not to " + name);
                else if (given.length > 0) add(current.roles, name, given);
            });
        }

        function expiry(value) {
            if (current === null || value === null || value === undefined) return;
            if ((typeof value === "number" && value === value && value !== 1 / 0 && value !== -1 / 0) || typeof value === "string") {
                current.expiry = value;
                current.hasExpiry = true;
            } else {
                noteBad("expiry(): the value must be a number or a string, not " + kind(value));
            }
        }

        function requireUser(names) {
            if (current === null || current.user === null) return;
            if (!contains(listed(names), current.user.name)) reject("wrong user");
        }

        function requireRole(roles) {
            if (current === null || current.user === null) return;
            var wanted = listed(roles);
            for (var i = 0; i < wanted.length; i++) {
                if (contains(current.user.roles, withoutRolePrefix(wanted[i]))) return;
            }
            reject("missing role");
        }

        function requireAccess(channels) {
            if (current === null || current.user === null) return;
            var wanted = listed(channels);
            // Exact names only: a user holding "*" reads everything, but that is not access to
            // a named channel here (Sync Gateway's rule).
            for (var i = 0; i < wanted.length; i++) {
                if (contains(current.user.channels, wanted[i])) return;
            }
            reject("missing channel access");
        }

        function requireAdmin() {
            if (current === null || current.user === null) return;
            reject("admin required");
        }

        var helpers = {
            channel: channel, access: access, role: role, expiry: expiry,
            requireUser: requireUser, requireRole: requireRole,
            requireAccess: requireAccess, requireAdmin: requireAdmin
        };
        for (var name in helpers) {
            defineProperty(global, name, { value: helpers[name], writable: false, enumerable: false, configurable: false });
        }

        return function run(fn, doc, oldDoc, user) {
            var call = {
                user: user, channels: [], access: createMap(null), roles: createMap(null),
                expiry: undefined, hasExpiry: false, bad: null
            };
            current = call;
            try {
                fn(doc, oldDoc);
            } finally {
                current = null;
            }
            var result = { channels: call.channels, access: call.access, roles: call.roles };
            if (call.hasExpiry) result.expiry = call.expiry;
            if (call.bad !== null) result.bad = call.bad;
            return result;
        };
    })(this)
    """#
}
