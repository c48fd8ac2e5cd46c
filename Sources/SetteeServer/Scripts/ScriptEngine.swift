import CJavaScriptCore
import CScriptOptions
import Foundation
import Synchronization

/// Runs the server's JavaScript (the sync function, design documents' filters and
/// `validate_doc_update`) in JavaScriptCore.
///
/// A pool of VMs, each a JavaScriptCore context group with its own heap, lock and execution time
/// limit, so several threads run functions at once and a function that loops forever is stopped
/// (``ScriptError/Kind/timeout``). A caller takes a free VM for one call and gives it back; when
/// every VM is busy it waits. Each function is compiled once per VM, when first run there, in a
/// global context of its own (so one database's function cannot change another's globals), and kept
/// until the function is released.
///
/// The functions see the ECMAScript built-ins and what the server adds (the sync function's
/// helpers), nothing else: JavaScriptCore's C API gives a script no file, network, timer or module
/// access of its own, and the contexts are not inspectable.
///
/// Thread-safe: called from the database's writer thread and from HTTP handlers. No lock is held
/// while JavaScript runs; a call blocks its thread (JavaScriptCore is synchronous).
final class ScriptEngine: @unchecked Sendable {
    // @unchecked: the pool's state is guarded by `condition`; a VM is used by the one thread that
    // took it out of the pool.

    /// One VM per active processor (more cannot run at once), and at least two, so a slow function
    /// does not hold up every other caller.
    static var defaultContextCount: Int { max(2, ProcessInfo.processInfo.activeProcessorCount) }

    /// Seconds a function may run per call. JavaScriptCore counts the thread's CPU time, which is
    /// the wall time of a script (it cannot wait for anything) unless its thread is kept off the CPU.
    static let defaultTimeLimit: Double = 1

    /// Bytes the server's memory may grow by during one call before the function is stopped and
    /// its write refused (the server's resident size is checked every few milliseconds of the
    /// function's CPU time; one single allocation, such as a 1 GiB string, cannot be stopped
    /// half-way, but the next check stops the function and its garbage is collected).
    static let defaultMemoryLimit = 256 << 20

    let contextCount: Int
    let timeLimit: Double
    let memoryLimit: Int

    private let condition = NSCondition()
    private var idle: [ScriptVM] = []
    private var created = 0
    /// Indexes below `created` whose VM could not be made again (JavaScriptCore out of memory):
    /// taken first by the next VM made.
    private var vacant: [Int] = []
    /// Per VM (by index): functions released since the VM was last taken, whose compiled code it
    /// drops when next taken (only the thread holding a VM may touch its contexts).
    private var released: [[UInt64]]
    private let nextScriptID = Atomic<UInt64>(1)
    /// How many VMs were replaced by fresh ones (a stopped script's, or one whose calls grew the
    /// server past ``ScriptVM/recycleAfterGrowth``).
    let replacedCount = Atomic<Int>(0)

    /// - Parameters:
    ///   - contexts: how many functions can run at once (VMs are created as needed, up to this).
    ///   - timeLimit: seconds a function may run per call before it is stopped.
    ///   - memoryLimit: bytes the server may grow by during one call before it is stopped.
    init(contexts: Int = ScriptEngine.defaultContextCount, timeLimit: Double = ScriptEngine.defaultTimeLimit,
         memoryLimit: Int = ScriptEngine.defaultMemoryLimit) {
        precondition(contexts > 0 && timeLimit > 0 && memoryLimit > 0)
        // JavaScriptCore's time limit stops a loop already running as compiled code only with
        // polling traps (its default, signal-based traps sometimes never land: the loop spun on
        // while the watchdog kept signalling). The loader set them (CScriptOptions): setting the
        // environment here would race with threads reading it.
        precondition(settee_script_options_set() == 1, "JavaScriptCore's options were not set at load")
        self.contextCount = contexts
        self.timeLimit = timeLimit
        self.memoryLimit = memoryLimit
        self.released = Array(repeating: [], count: contexts)
    }

    func makeScriptID() -> UInt64 { nextScriptID.add(1, ordering: .relaxed).oldValue }

    /// Runs `body` with a VM of its own, waiting for one when all are busy.
    func withVM<R>(_ body: (ScriptVM) throws(ScriptError) -> R) throws(ScriptError) -> R {
        guard let vm = checkOut() else {
            throw ScriptError(.unavailable, "JavaScriptCore could not create a virtual machine to run the function in")
        }
        defer { checkIn(vm) }
        return try body(vm)
    }

    /// A function's source is gone: every VM drops its compiled code (when next taken).
    func release(scriptID: UInt64) {
        condition.lock()
        for i in 0 ..< created { released[i].append(scriptID) }
        condition.unlock()
    }

    /// The number of functions compiled in the VMs now idle (for the tests).
    var compiledCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return idle.reduce(0) { $0 + $1.compiledCount }
    }

    /// nil when a VM had to be made and JavaScriptCore could not make one.
    private func checkOut() -> ScriptVM? {
        condition.lock()
        while true {
            // Last in, first out: one caller at a time keeps using the same VM, whose functions
            // are already compiled.
            if let vm = idle.popLast() {
                let drop = released[vm.index]
                released[vm.index] = []
                condition.unlock()
                vm.drop(drop)
                return vm
            }
            if !vacant.isEmpty || created < contextCount {
                let index: Int
                if let v = vacant.popLast() {
                    index = v
                } else {
                    index = created
                    created += 1
                }
                released[index] = []
                condition.unlock()
                if let vm = ScriptVM(index: index, timeLimit: timeLimit, memoryLimit: memoryLimit) { return vm }
                // Not made: the slot is free again for a later try, and a waiter may take it.
                condition.lock()
                vacant.append(index)
                condition.signal()
                condition.unlock()
                return nil
            }
            condition.wait()
        }
    }

    private func checkIn(_ vm: ScriptVM) {
        guard !vm.isUsable else {
            condition.lock()
            idle.append(vm)
            condition.signal()
            condition.unlock()
            return
        }
        // A VM that did not survive a termination is not reused: a new one takes its place (its
        // functions are compiled again as they are run); if none can be made now, its slot is
        // freed and the next check-out tries again.
        let index = vm.index
        replacedCount.add(1, ordering: .relaxed)
        let fresh = ScriptVM(index: index, timeLimit: timeLimit, memoryLimit: memoryLimit)
        condition.lock()
        released[index] = []
        if let fresh { idle.append(fresh) } else { vacant.append(index) }
        condition.signal()
        condition.unlock()
    }
}

/// A function's source and how to compile it, shared by the VMs that run it; when the last
/// reference goes, the engine forgets its compiled code.
///
/// Immutable; safe to share between threads.
final class ScriptSource: Sendable {
    enum Kind: Sendable {
        /// A sync function: compiled after ``SyncFunction/prelude``, which defines its helpers.
        case sync
        /// A plain function of JSON arguments (filters, `validate_doc_update`).
        case plain
        /// A view's `map` or `reduce`: compiled after ``ViewFunctions/prelude`` (`emit`, `sum`,
        /// `log`), called through its runner.
        case view
        /// A design document's `shows`, `lists` or `updates` entry: compiled after
        /// ``RenderFunctions/prelude`` (`provides`, `send`, `start`, `getRow`…), called through
        /// its runner.
        case render
    }

    let id: UInt64
    /// How errors name the function ("sync function", "_design/app validate_doc_update").
    let name: String
    let source: String
    let kind: Kind
    let engine: ScriptEngine

    /// Compiles the function in one VM, so that a syntax error is reported now.
    init(name: String, source: String, kind: Kind, engine: ScriptEngine) throws(ScriptError) {
        self.id = engine.makeScriptID()
        self.name = name
        self.source = source
        self.kind = kind
        self.engine = engine
        try engine.withVM { vm throws(ScriptError) in _ = try vm.realm(for: self) }
    }

    deinit { engine.release(scriptID: id) }
}

extension ScriptSource {
    /// Calls the function with JSON arguments (nil: `null`), through the runner for a sync function,
    /// and lets `read` turn what it returned into a Swift value while the VM is still held.
    func call<R>(json arguments: [String?], labels: [String],
                 read: (ScriptVM, ScriptRealm, JSValueRef) throws(ScriptError) -> R) throws(ScriptError) -> R {
        try engine.withVM { vm throws(ScriptError) -> R in
            let realm = try vm.realm(for: self)
            let context = realm.context
            guard let function = realm.function else { throw ScriptError(.exception("not compiled"), "\(name): not compiled") }
            var values: [JSValueRef?] = []
            var protected: [JSValueRef] = []
            defer { for value in protected { JSValueUnprotect(context, value) } }
            for (text, label) in zip(arguments, labels) {
                guard let text else {
                    values.append(JSValueMakeNull(context))
                    continue
                }
                // Parsed by JavaScriptCore from the JSON text: document data never becomes source.
                // Protected: the collector does not scan the array's memory, and parsing the next
                // argument may collect.
                guard let value = vm.protectedJSON(text, in: context) else {
                    throw ScriptError(.badResult("\(label) is not JSON"), "\(name): \(label) is not JSON")
                }
                protected.append(value)
                values.append(value)
            }
            // Whatever the call left in the global object goes with it; a realm whose call was
            // stopped half-way (time, memory), or whose globals cannot be put back, is compiled
            // afresh for the next call. (A function that throws, a rejection, ends normally.)
            var stopped = false
            defer { if stopped || !vm.restore(realm) { vm.drop([id]) } }
            do throws(ScriptError) {
                let result: JSValueRef
                if let runner = realm.runner {
                    result = try vm.call(runner, [function] + values, in: realm, name: name)
                } else {
                    result = try vm.call(function, values, in: realm, name: name)
                }
                return try read(vm, realm, result)
            } catch {
                stopped = error.kind == .timeout || error.kind == .memory
                throw error
            }
        }
    }
}

/// One JavaScriptCore VM (a context group: its own heap, lock and time limit) and the functions
/// compiled in it, each in a global context of its own (a ``ScriptRealm``).
///
/// Not thread-safe: used by the one thread that took it from the engine's pool.
final class ScriptVM {
    let index: Int
    private let group: JSContextGroupRef
    /// What the watchdog checks, and why it stopped a script: how a timeout is told from an
    /// exception. Written on the thread running the script (JavaScriptCore calls the callback
    /// there), read by the same thread after the call.
    private let watchdog: UnsafeMutablePointer<Watchdog>
    private var realms: [UInt64: ScriptRealm] = [:]
    /// False once a script was stopped and the VM then failed a trivial evaluation, or once the
    /// server grew by ``recycleAfterGrowth`` while the VM's scripts ran.
    private(set) var isUsable = true
    /// How much the server's resident memory grew during this VM's calls, in all.
    private var grown = 0
    /// JavaScriptCore keeps a heap's pages once they held garbage (its collector frees objects,
    /// not the pages): only releasing the context group gives them back to the system. A VM
    /// during whose calls the server grew this much is replaced by a fresh one when given back,
    /// its functions compiled again as they are run.
    static let recycleAfterGrowth = 64 << 20

    /// nil when JavaScriptCore cannot create a context group (out of memory).
    init?(index: Int, timeLimit: Double, memoryLimit: Int) {
        guard let group = JSContextGroupCreate() else { return nil }
        self.index = index
        self.group = group
        watchdog = .allocate(capacity: 1)
        watchdog.initialize(to: Watchdog(group: group, timeLimit: timeLimit, memoryLimit: memoryLimit))
        // Before any script runs: code compiled earlier would lack the limit's checks.
        Watchdog.arm(watchdog)
    }

    deinit {
        realms.removeAll()
        JSContextGroupRelease(group)
        watchdog.deinitialize(count: 1)
        watchdog.deallocate()
    }

    var compiledCount: Int { realms.count }

    /// Has the engine replace this VM when it is given back, as it replaces one that did not
    /// survive a termination (for the tests: JavaScriptCore's VMs do survive).
    func discard() { isUsable = false }

    func drop(_ ids: [UInt64]) {
        for id in ids { realms[id] = nil }
    }

    /// The function compiled in this VM, compiling it on first use.
    func realm(for script: ScriptSource) throws(ScriptError) -> ScriptRealm {
        if let realm = realms[script.id] { return realm }
        let realm = try compile(script)
        realms[script.id] = realm
        return realm
    }

    private func compile(_ script: ScriptSource) throws(ScriptError) -> ScriptRealm {
        guard let context = JSGlobalContextCreateInGroup(group, nil) else {
            throw ScriptError(.exception("JavaScriptCore could not create a global context"),
                              "\(script.name): JavaScriptCore could not create a global context")
        }
        // No debugger may attach: WebKitGTK's remote inspector (WEBKIT_INSPECTOR_SERVER), Safari's
        // Web Inspector on Apple's systems.
        JSGlobalContextSetInspectable(context, false)
        // Owns the context from here on: an error below releases it.
        let realm = ScriptRealm(context: context)
        if script.kind != .plain {
            // Our own code: an exception here is a bug, reported like any other.
            let prelude: (source: String, name: String) = switch script.kind {
            case .sync: (SyncFunction.prelude, "sync function helpers")
            case .view: (ViewFunctions.prelude, "view helpers")
            case .render, .plain: (RenderFunctions.prelude, "render helpers")
            }
            let runner = try evaluate(prelude.source, name: prelude.name, in: realm.context)
            guard let runner = JSValueToObject(context, runner, nil), JSObjectIsFunction(context, runner) else {
                throw ScriptError(.exception("the sync function helpers did not load"), "sync function helpers: did not load")
            }
            JSValueProtect(context, runner)
            realm.runner = runner
        }
        // An expression, so that `function (doc) {…}` (which is not a statement) compiles; the
        // parenthesis shares the first line and the closing one follows the last, so line numbers
        // are the source's own.
        let value = try evaluate("(" + script.source + "\n)", name: script.name, checkSyntax: true, in: context)
        guard let function = JSValueToObject(context, value, nil), JSObjectIsFunction(context, function) else {
            throw ScriptError(.syntax, "\(script.name): the source is not a function")
        }
        JSValueProtect(context, function)
        realm.function = function
        // Our own code again: the built-ins and the function are frozen, the globals made
        // read-only, and what a call adds is taken away after it (``restore(_:)``).
        let setup = try evaluate(Self.seal, name: "function isolation", in: context)
        var exception: JSValueRef?
        let cleaner = JSValueToObject(context, setup, nil).flatMap { setup -> JSValueRef? in
            var argument: [JSValueRef?] = [function]
            return JSObjectCallAsFunction(context, setup, nil, 1, &argument, &exception)
        }
        guard exception == nil, let cleaner, let cleaner = JSValueToObject(context, cleaner, nil), JSObjectIsFunction(context, cleaner) else {
            throw ScriptError(.exception("the isolation did not load"), "\(script.name): the isolation did not load")
        }
        JSValueProtect(context, cleaner)
        realm.cleaner = cleaner
        return realm
    }

    /// Puts `realm`'s global object back as it was before the call: removes every global the
    /// call added and forgets the last regular expression match (RegExp's legacy `$1`…, which a
    /// later call could read). False when that could not be done (a global made permanent): the
    /// caller drops the realm.
    func restore(_ realm: ScriptRealm) -> Bool {
        guard let cleaner = realm.cleaner else { return false }
        var exception: JSValueRef?
        watchdog.pointee.start()
        let done = JSObjectCallAsFunction(realm.context, cleaner, nil, 0, nil, &exception)
        guard exception == nil, let done else { return false }
        return JSValueToBoolean(realm.context, done)
    }

    /// Evaluated once in every function's global context, after the function: a setup that
    /// freezes every built-in reachable from the global object (and the function itself, so that
    /// it keeps nothing in its own properties), makes the globals there read-only and permanent,
    /// lets no global be added but by assignment (`Object.defineProperty` and
    /// `Reflect.defineProperty` refuse the global object, and `eval`, which could declare a
    /// global binding no property shows, is not there), and returns the cleaner ``restore(_:)``
    /// calls after each call: it deletes the globals the call assigned (an undeclared variable in
    /// sloppy mode, `this.x = …`) and resets RegExp's last-match statics. So no call sees what
    /// another left: not a global, not a changed built-in, not a match from another document.
    /// (What the function's own source keeps in a closure of its own is its own.) The cleaner
    /// costs a `for…in` over the global object's enumerable properties, which are none.
    static let seal = #"""
    (function (global) {
        "use strict";
        var names = Object.getOwnPropertyNames, symbols = Object.getOwnPropertySymbols,
            describe = Object.getOwnPropertyDescriptor, define = Object.defineProperty,
            defineMany = Object.defineProperties, reflectDefine = Reflect.defineProperty,
            freeze = Object.freeze, prototypeOf = Object.getPrototypeOf, remove = Reflect.deleteProperty,
            frozen = new WeakSet();
        function refuse() {
            throw new TypeError("the global object takes no properties this way: server functions keep nothing between calls");
        }
        define(Object, "defineProperty", { value: function defineProperty(o, key, d) {
            if (o === global) refuse();
            return define(o, key, d);
        } });
        define(Object, "defineProperties", { value: function defineProperties(o, ds) {
            if (o === global) refuse();
            return defineMany(o, ds);
        } });
        define(Reflect, "defineProperty", { value: function defineProperty(o, key, d) {
            return o === global ? false : reflectDefine(o, key, d);
        } });
        define(global, "eval", { value: function noEval() {
            throw new EvalError("eval is not available to server functions");
        } });
        function deepFreeze(root) {
            var pending = [root];
            while (pending.length > 0) {
                var o = pending.pop();
                if ((typeof o !== "object" && typeof o !== "function") || o === null || frozen.has(o)) continue;
                frozen.add(o);
                var keys = names(o).concat(symbols(o));
                for (var i = 0; i < keys.length; i++) {
                    var d = describe(o, keys[i]);
                    if (d === undefined) continue;
                    if ("value" in d) pending.push(d.value); else { pending.push(d.get); pending.push(d.set); }
                }
                pending.push(prototypeOf(o));
                freeze(o);
            }
        }
        return function setup(fn) {
            var own = names(global);
            for (var i = 0; i < own.length; i++) {
                var d = describe(global, own[i]);
                if (d === undefined) continue;
                if ("value" in d) {
                    deepFreeze(d.value);
                    if (d.configurable) define(global, own[i], { value: d.value, writable: false, enumerable: d.enumerable, configurable: false });
                } else {
                    deepFreeze(d.get);
                    deepFreeze(d.set);
                    if (d.configurable) define(global, own[i], { get: d.get, set: d.set, enumerable: d.enumerable, configurable: false });
                }
            }
            var chain = prototypeOf(global);
            deepFreeze(chain);
            deepFreeze(fn);
            var known = Object.create(null);
            for (var k in global) known[k] = true;
            var empty = /(?:)/;
            return function restore() {
                empty.exec("");
                var clean = prototypeOf(global) === chain;
                for (var k in global) if (known[k] !== true && !remove(global, k)) clean = false;
                return clean;
            };
        };
    })(this)
    """#

    private func evaluate(_ source: String, name: String, checkSyntax: Bool = false, in context: JSGlobalContextRef) throws(ScriptError) -> JSValueRef {
        let script = JS.makeString(source)
        let url = JS.makeString(name)
        defer {
            JSStringRelease(script)
            JSStringRelease(url)
        }
        var exception: JSValueRef?
        if checkSyntax && !JSCheckScriptSyntax(context, script, url, 1, &exception) {
            let thrown = exception.map { describe($0, in: context) }
            throw ScriptError(.syntax, "\(name)\(thrown?.lineSuffix ?? ""): \(thrown?.text ?? "syntax error")")
        }
        watchdog.pointee.start()
        let value = JSEvaluateScript(context, script, nil, url, 1, &exception)
        if let exception { throw error(from: exception, in: context, name: name) }
        guard let value else { throw ScriptError(.exception("no value"), "\(name): evaluation produced no value") }
        return value
    }

    // MARK: Calls

    /// Calls `function` with `arguments` (values of `realm`'s context, kept alive by the caller)
    /// and returns what it returned, or the error it ended in.
    func call(_ function: JSObjectRef, _ arguments: [JSValueRef?], in realm: ScriptRealm, name: String) throws(ScriptError) -> JSValueRef {
        let context = realm.context
        var exception: JSValueRef?
        watchdog.pointee.start()
        let result = arguments.withUnsafeBufferPointer { args in
            JSObjectCallAsFunction(context, function, nil, args.count, args.baseAddress, &exception)
        }
        noteGrowth()
        if let exception { throw error(from: exception, in: context, name: name) }
        guard let result else { throw ScriptError(.exception("no value"), "\(name): the call produced no value") }
        return result
    }

    /// Adds what the server grew by during the call just made; past ``recycleAfterGrowth`` the
    /// VM is replaced when given back, which returns its heap to the system.
    private func noteGrowth() {
        grown += max(0, watchdog.pointee.growthSinceStart)
        if grown > Self.recycleAfterGrowth { isUsable = false }
    }

    /// A JSON text parsed into a value of `context`, protected from the collector (the caller
    /// unprotects it); nil for text that is not JSON.
    func protectedJSON(_ text: String, in context: JSGlobalContextRef) -> JSValueRef? {
        let string = JS.makeString(text)
        defer { JSStringRelease(string) }
        guard let value = JSValueMakeFromJSONString(context, string) else { return nil }
        JSValueProtect(context, value)
        return value
    }

    /// `value` as JSON text (JSON.stringify's rules).
    func jsonText(of value: JSValueRef, in realm: ScriptRealm, name: String) throws(ScriptError) -> String {
        var exception: JSValueRef?
        watchdog.pointee.start()
        let json = JSValueCreateJSONString(realm.context, value, 0, &exception)
        if let exception { throw error(from: exception, in: realm.context, name: name) }
        guard let json else { throw ScriptError(.badResult("the result is not JSON"), "\(name): the result is not JSON") }
        defer { JSStringRelease(json) }
        return JS.utf8Text(json)
    }

    // MARK: Errors

    private struct Thrown {
        var text: String
        var line: Int?
        var forbidden: String?
        var unauthorized: String?
        var lineSuffix: String { line.map { ", line \($0)" } ?? "" }
    }

    /// What an exception that ended a call means: a timeout (the time limit stopped the script),
    /// a rejection (`{forbidden: msg}`, `{unauthorized: msg}`) or an error.
    private func error(from exception: JSValueRef, in context: JSGlobalContextRef, name: String) -> ScriptError {
        switch watchdog.pointee.stopped {
        case .time?:
            watchdog.pointee.stopped = nil
            checkUsable(context)
            return ScriptError(.timeout, "\(name): stopped after running longer than the time limit")
        case .memory?:
            watchdog.pointee.stopped = nil
            // Its garbage is given back now, not at the next collection.
            JSGarbageCollect(context)
            checkUsable(context)
            return ScriptError(.memory, "\(name): stopped after the server grew by more than \(watchdog.pointee.memoryLimit >> 20) MiB during the call")
        case nil:
            break
        }
        let thrown = describe(exception, in: context)
        if let message = thrown.forbidden { return ScriptError(.forbidden(message), message) }
        if let message = thrown.unauthorized { return ScriptError(.unauthorized(message), message) }
        return ScriptError(.exception(thrown.text), "\(name)\(thrown.lineSuffix): \(thrown.text)")
    }

    private func describe(_ exception: JSValueRef, in context: JSGlobalContextRef) -> Thrown {
        var thrown = Thrown(text: JS.text(of: exception, in: context) ?? "an exception that cannot be shown")
        if let object = JSValueToObject(context, exception, nil), !JSObjectIsFunction(context, object) {
            // CouchDB and Sync Gateway's rejection objects; the message as a string, whatever it is.
            if let v = JS.property(object, "forbidden", in: context) {
                thrown.forbidden = JS.text(of: v, in: context) ?? "forbidden"
            } else if let v = JS.property(object, "unauthorized", in: context) {
                thrown.unauthorized = JS.text(of: v, in: context) ?? "unauthorized"
            }
            // Error objects carry the line JavaScriptCore reports, in the source as evaluated.
            if let v = JS.property(object, "line", in: context), JSValueIsNumber(context, v) {
                let line = JSValueToNumber(context, v, nil)
                if line >= 1 && line < Double(Int32.max) { thrown.line = Int(line) }
            }
        }
        return thrown
    }

    /// After a termination: whether the VM still evaluates a trivial script correctly. (The
    /// JavaScriptCore of WebKitGTK 2.50 does; a VM that did not would be replaced.)
    private func checkUsable(_ context: JSGlobalContextRef) {
        let probe = JS.makeString("6 * 7")
        defer { JSStringRelease(probe) }
        var exception: JSValueRef?
        watchdog.pointee.start()
        let value = JSEvaluateScript(context, probe, nil, nil, 1, &exception)
        watchdog.pointee.stopped = nil
        guard exception == nil, let value, JSValueIsNumber(context, value), JSValueToNumber(context, value, nil) == 42 else {
            isUsable = false
            return
        }
    }
}

/// A global context of its own for one function in one VM: the compiled function, and for a sync
/// function the runner that calls it and collects what its helpers recorded.
///
/// Not thread-safe: belongs to its ``ScriptVM``.
final class ScriptRealm {
    let context: JSGlobalContextRef
    /// Protected from the collector while the realm lives.
    fileprivate(set) var function: JSObjectRef?
    fileprivate(set) var runner: JSObjectRef?
    /// Puts the global object back after a call (``ScriptVM/restore(_:)``).
    fileprivate(set) var cleaner: JSObjectRef?

    fileprivate init(context: JSGlobalContextRef) { self.context = context }

    deinit {
        if let function { JSValueUnprotect(context, function) }
        if let runner { JSValueUnprotect(context, runner) }
        if let cleaner { JSValueUnprotect(context, cleaner) }
        JSGlobalContextRelease(context)
    }
}

/// Conversions between Swift and JavaScriptCore's strings and values.
///
/// Stateless; a call that takes a context must be made by the thread holding that context's VM.
enum JS {
    /// A new JavaScriptCore string (release it with JSStringRelease).
    static func makeString(_ s: String) -> JSStringRef {
        let utf8Count = s.utf8.count
        // The UTF-8 entry point stops at a NUL; text with one goes through UTF-16.
        if let fast = s.withCString({ p in strlen(p) == utf8Count ? JSStringCreateWithUTF8CString(p) : nil }) {
            return fast
        }
        let units = Array(s.utf16)
        return JSStringCreateWithCharacters(units, units.count)
    }

    static func text(_ s: JSStringRef) -> String {
        let count = JSStringGetLength(s)
        guard count > 0, let units = JSStringGetCharactersPtr(s) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: units, count: count), as: UTF16.self)
    }

    /// Like ``text(_:)``, by way of UTF-8, which is faster for the mostly 8-bit text of JSON; for
    /// strings with no unpaired surrogates (JSON.stringify escapes them).
    static func utf8Text(_ s: JSStringRef) -> String {
        let capacity = JSStringGetMaximumUTF8CStringSize(s)
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
            // The count includes the terminating NUL; a NUL inside the string is converted too.
            let written = JSStringGetUTF8CString(s, buffer.baseAddress, capacity)
            guard written > 1, let base = buffer.baseAddress else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: base, count: written - 1), as: UTF8.self)
        }
    }

    /// JavaScript's `String(value)`; nil when that throws.
    static func text(of value: JSValueRef, in context: JSContextRef) -> String? {
        var exception: JSValueRef?
        guard let s = JSValueToStringCopy(context, value, &exception), exception == nil else { return nil }
        defer { JSStringRelease(s) }
        return text(s)
    }

    /// The property `name` of `object` when it has one (own or inherited), and reading it did not throw.
    static func property(_ object: JSObjectRef, _ name: String, in context: JSContextRef) -> JSValueRef? {
        let key = makeString(name)
        defer { JSStringRelease(key) }
        guard JSObjectHasProperty(context, object, key) else { return nil }
        var exception: JSValueRef?
        let value = JSObjectGetProperty(context, object, key, &exception)
        return exception == nil ? value : nil
    }
}
