import Foundation
import Synchronization
import Testing
@testable import SetteeServer

/// The server's JavaScript: the sync function's helpers, design documents' filters and
/// validate_doc_update, and the engine under them (time limit, isolation, threads).
@Suite struct ScriptTests {
    /// Shared by the tests that do not care about the engine's settings (they run in parallel, so
    /// this also exercises the pool).
    static let engine = ScriptEngine(contexts: 3, timeLimit: 2)

    func sync(_ source: String, doc: String = "{}", oldDoc: String? = nil, user: ScriptUser? = nil,
              now: Date = Date()) throws(ScriptError) -> SyncOutcome {
        try SyncFunction(source: source, engine: Self.engine).run(doc: doc, oldDoc: oldDoc, user: user, now: now)
    }

    /// The error `body` threw, nil if it returned.
    func failure<T>(_ body: () throws -> T) -> ScriptError? {
        do {
            _ = try body()
            return nil
        } catch let error as ScriptError {
            return error
        } catch {
            Issue.record("not a ScriptError: \(error)")
            return nil
        }
    }

    static let alice = ScriptUser(name: "alice", channels: ["news", "!"], roles: ["editor"])

    // MARK: Helpers

    @Test func channelTakesStringsArraysAndSkipsNull() throws {
        let out = try sync("""
            function(doc, oldDoc) {
              channel("a");
              channel(["b", "c"], "d");
              channel(null);
              channel(undefined);
              channel(["e", null, undefined], null, "a");
              channel(doc.channels);
            }
            """, doc: #"{"channels": ["f", "g"]}"#)
        #expect(out.channels == ["a", "b", "c", "d", "e", "f", "g"])
        #expect(out.access.isEmpty && out.roles.isEmpty && out.expiry == nil)
        // The default function, run as JavaScript, reads doc.channels (a string or an array).
        let def = try SyncFunction(source: SyncFunction.defaultSource, engine: Self.engine)
        #expect(try def.run(doc: #"{"channels": "solo"}"#, oldDoc: nil, user: nil).channels == ["solo"])
        #expect(try def.run(doc: #"{"channels": ["x", "y"]}"#, oldDoc: nil, user: nil).channels == ["x", "y"])
        #expect(try def.run(doc: #"{"title": "none"}"#, oldDoc: nil, user: nil).channels == [])
    }

    @Test(arguments: [
        #"channel(5)"#, #"channel("")"#, #"channel(["ok", ""])"#, #"channel([["nested"]])"#,
        #"channel({name: "x"})"#, #"channel(true)"#,
        #"access("bob", 7)"#, #"access(["bob", 3], "ch")"#, #"access("role:", "ch")"#,
        #"role("bob", "role:")"#, #"role("role:x", "editor")"#, #"role("bob", [1])"#,
        // A function's own try cannot hide a bad name: it is recorded, not thrown.
        #"try { channel(42); } catch (e) {}"#,
    ])
    func invalidNamesAreBadResults(call: String) {
        let error = failure { try sync("function(doc) { channel(\"fine\"); \(call); }") }
        guard case .badResult(let message)? = error?.kind else {
            Issue.record("\(call): expected a bad result, got \(String(describing: error))")
            return
        }
        #expect(message.contains("must be") || message.contains("role"))
    }

    @Test func accessGrantsToUsersAndRoles() throws {
        let out = try sync("""
            function(doc) {
              access("alice", "ch1");
              access(["bob", "role:editors"], ["ch2", "ch3"]);
              access("alice", doc.more);
              access(null, "ignored");
              access("carol", null);
              access(doc.owner, "private-" + doc.owner);
            }
            """, doc: #"{"more": ["ch4"], "owner": "dave"}"#)
        #expect(out.access == [
            "alice": ["ch1", "ch4"],
            "bob": ["ch2", "ch3"],
            "dave": ["private-dave"],
        ])
        // A role's grant is the role's, apart from users' (no user can be named "role:…").
        #expect(out.roleAccess == ["editors": ["ch2", "ch3"]])
        #expect(out.channels.isEmpty)
    }

    @Test func roleStoresPlainRoleNames() throws {
        let out = try sync("""
            function(doc) {
              role("alice", "role:admin");
              role(["bob", "carol"], ["editor", "role:viewer"]);
              role(null, "x");
              role("dave", null);
            }
            """)
        #expect(out.roles == ["alice": ["admin"], "bob": ["editor", "viewer"], "carol": ["editor", "viewer"]])
    }

    @Test func expiryForms() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        func expiry(_ js: String) throws(ScriptError) -> ExpiryRequest? {
            try sync("function(doc) { \(js) }", now: now).expiry
        }
        #expect(try expiry("") == nil)
        #expect(try expiry("expiry(null); expiry(undefined);") == nil)
        #expect(try expiry("expiry(3600)") == .at(now.addingTimeInterval(3600)))
        #expect(try expiry("expiry(2592000)") == .at(now.addingTimeInterval(2_592_000)))
        #expect(try expiry("expiry(2592001)") == .at(Date(timeIntervalSince1970: 2_592_001)))
        #expect(try expiry("expiry(1893456000)") == .at(Date(timeIntervalSince1970: 1_893_456_000)))
        #expect(try expiry("expiry(1e9)") == .at(Date(timeIntervalSince1970: 1_000_000_000)))
        #expect(try expiry(#"expiry("3600")"#) == .at(now.addingTimeInterval(3600)))
        #expect(try expiry(#"expiry("1893456000")"#) == .at(Date(timeIntervalSince1970: 1_893_456_000)))
        #expect(try expiry(#"expiry("2030-01-01T00:00:00Z")"#) == .at(Date(timeIntervalSince1970: 1_893_456_000)))
        #expect(try expiry(#"expiry("2030-01-01T01:00:00+01:00")"#) == .at(Date(timeIntervalSince1970: 1_893_456_000)))
        #expect(try expiry(#"expiry("2030-01-01T00:00:00.500Z")"#) == .at(Date(timeIntervalSince1970: 1_893_456_000.5)))
        #expect(try expiry("expiry(0)") == .never)
        // The last call wins.
        #expect(try expiry("expiry(60); expiry(120);") == .at(now.addingTimeInterval(120)))
        for bad in ["expiry(-1)", "expiry(1.5)", #"expiry("soon")"#, #"expiry("")"#, "expiry({})", "expiry(true)",
                    "expiry(NaN)", "expiry(Infinity)", #"expiry("12abc")"#, #"expiry("2030-13-45T00:00:00Z")"#] {
            guard case .badResult? = failure({ try expiry(bad) })?.kind else {
                Issue.record("\(bad) should be a bad result")
                continue
            }
        }
    }

    @Test func oldDocIsNullOnCreateAndTheParentOtherwise() throws {
        let source = """
            function(doc, oldDoc) {
              if (oldDoc === null) channel("created");
              else channel("was-" + oldDoc.state, "now-" + doc.state);
            }
            """
        #expect(try sync(source, doc: #"{"state": "a"}"#).channels == ["created"])
        #expect(try sync(source, doc: #"{"state": "b"}"#, oldDoc: #"{"state": "a"}"#).channels == ["was-a", "now-b"])
    }

    // MARK: require… and rejections

    static let requireEverything = """
        function(doc) {
          requireUser("alice");
          requireRole("editor");
          requireAccess("news");
          requireAdmin();
          channel("passed");
        }
        """

    @Test func everyRequirePassesForAnAdministrator() throws {
        #expect(try sync(Self.requireEverything, user: nil).channels == ["passed"])
    }

    @Test func requireUser() throws {
        let f = try SyncFunction(source: #"function(doc) { requireUser(doc.writers); channel("ok"); }"#, engine: Self.engine)
        #expect(try f.run(doc: #"{"writers": "alice"}"#, oldDoc: nil, user: Self.alice).channels == ["ok"])
        #expect(try f.run(doc: #"{"writers": ["bob", "alice"]}"#, oldDoc: nil, user: Self.alice).channels == ["ok"])
        let e = failure { try f.run(doc: #"{"writers": ["bob"]}"#, oldDoc: nil, user: Self.alice) }
        #expect(e?.kind == .forbidden("wrong user"))
        #expect(e?.message == "wrong user")
        #expect(failure { try f.run(doc: #"{}"#, oldDoc: nil, user: Self.alice) }?.kind == .forbidden("wrong user"))
        #expect(try f.run(doc: #"{}"#, oldDoc: nil, user: nil).channels == ["ok"])
        // Names that need escaping reach the function intact.
        let odd = ScriptUser(name: "a\"b\\c\u{1}\n é😀", channels: ["x\"y"], roles: ["r\\s"])
        #expect(try f.run(doc: #"{"writers": "a\"b\\c\u0001\n é😀"}"#, oldDoc: nil, user: odd).channels == ["ok"])
        let echo = try SyncFunction(source: #"function(doc) { requireAccess("x\"y"); requireRole("r\\s"); channel(doc.c); }"#, engine: Self.engine)
        #expect(try echo.run(doc: #"{"c": "z"}"#, oldDoc: nil, user: odd).channels == ["z"])
    }

    @Test func requireRole() throws {
        let f = try SyncFunction(source: #"function(doc) { requireRole(doc.roles); channel("ok"); }"#, engine: Self.engine)
        #expect(try f.run(doc: #"{"roles": "editor"}"#, oldDoc: nil, user: Self.alice).channels == ["ok"])
        #expect(try f.run(doc: #"{"roles": ["boss", "role:editor"]}"#, oldDoc: nil, user: Self.alice).channels == ["ok"])
        #expect(failure { try f.run(doc: #"{"roles": ["boss"]}"#, oldDoc: nil, user: Self.alice) }?.kind == .forbidden("missing role"))
    }

    @Test func requireAccessNeedsTheNamedChannelNotStar() throws {
        let f = try SyncFunction(source: #"function(doc) { requireAccess(doc.need); channel("ok"); }"#, engine: Self.engine)
        #expect(try f.run(doc: #"{"need": "news"}"#, oldDoc: nil, user: Self.alice).channels == ["ok"])
        #expect(try f.run(doc: #"{"need": ["sports", "news"]}"#, oldDoc: nil, user: Self.alice).channels == ["ok"])
        #expect(failure { try f.run(doc: #"{"need": "sports"}"#, oldDoc: nil, user: Self.alice) }?.kind == .forbidden("missing channel access"))
        let star = ScriptUser(name: "root", channels: ["*"])
        #expect(failure { try f.run(doc: #"{"need": "news"}"#, oldDoc: nil, user: star) }?.kind == .forbidden("missing channel access"))
    }

    @Test func requireAdminFailsForAnyUser() throws {
        let everything = ScriptUser(name: "alice", channels: ["*", "news"], roles: ["admin", "_admin"])
        #expect(failure { try sync("function(doc) { requireAdmin(); }", user: everything) }?.kind == .forbidden("admin required"))
        // The first require that fails decides.
        let e = failure { try sync(Self.requireEverything, user: ScriptUser(name: "bob", channels: ["news"], roles: ["editor"])) }
        #expect(e?.kind == .forbidden("wrong user"))
        let admin = failure { try sync(Self.requireEverything, user: Self.alice) }
        #expect(admin?.kind == .forbidden("admin required"))
    }

    @Test func thrownRejectionsAndErrors() {
        #expect(failure { try sync(#"function(doc) { throw({forbidden: "read only"}); }"#) }?.kind == .forbidden("read only"))
        #expect(failure { try sync(#"function(doc) { throw({unauthorized: "log in first"}); }"#) }?.kind == .unauthorized("log in first"))
        #expect(failure { try sync(#"function(doc) { throw({forbidden: 42}); }"#) }?.kind == .forbidden("42"))
        let error = failure { try sync("function(doc) {\n  var x = 1;\n  throw new Error(\"boom\");\n}") }
        #expect(error?.kind == .exception("Error: boom"))
        #expect(error?.message == "sync function, line 3: Error: boom")
        #expect(failure { try sync(#"function(doc) { throw "plain"; }"#) }?.kind == .exception("plain"))
        let type = failure { try sync("function(doc) {\n  return doc.missing.field;\n}") }
        guard case .exception(let text)? = type?.kind else {
            Issue.record("expected an exception, got \(String(describing: type))")
            return
        }
        #expect(text.hasPrefix("TypeError"))
        #expect(type?.message.hasPrefix("sync function, line 2: TypeError") == true)
    }

    // MARK: Compiling

    @Test func aSyntaxErrorNamesTheFunctionAndItsLine() throws {
        let error = failure { try SyncFunction(source: "function(doc, oldDoc) {\n  channel(doc.channels);\n  }}\n", engine: Self.engine) }
        #expect(error?.kind == .syntax)
        #expect(error?.message.hasPrefix("sync function, line 3: SyntaxError: Unexpected token '}'") == true, "\(String(describing: error))")
        let line5 = failure { try ValidateFunction(name: "_design/app validate_doc_update", source: "function(a) {\n\n\n\n  var = 1;\n}", engine: Self.engine) }
        #expect(line5?.kind == .syntax)
        #expect(line5?.message.hasPrefix("_design/app validate_doc_update, line 5: SyntaxError") == true, "\(String(describing: line5))")
        // Not a function, and not a single expression.
        #expect(failure { try SyncFunction(source: "42", engine: Self.engine) }?.kind == .syntax)
        #expect(failure { try SyncFunction(source: "function(doc) {}; function(doc) {}", engine: Self.engine) }?.kind == .syntax)
        #expect(failure { try FilterFunction(name: "f", source: "", engine: Self.engine) }?.kind == .syntax)
        // A trailing comment does not swallow the wrapper.
        #expect(try sync("function(doc) { channel(\"c\"); } // done").channels == ["c"])
    }

    @Test func isDefault() throws {
        #expect(try SyncFunction(source: SyncFunction.defaultSource, engine: Self.engine).isDefault)
        #expect(try SyncFunction(source: "\n  " + SyncFunction.defaultSource + "\n", engine: Self.engine).isDefault)
        #expect(try !SyncFunction(source: "function(doc, oldDoc) { channel(doc.channel); }", engine: Self.engine).isDefault)
    }

    @Test func aFunctionIsCompiledOncePerVMAndDroppedWhenReleased() throws {
        let engine = ScriptEngine(contexts: 1)
        do {
            let f = try SyncFunction(source: #"function(doc) { channel("x"); }"#, engine: engine)
            let g = try FilterFunction(name: "g", source: "function(doc) { return true; }", engine: engine)
            try withExtendedLifetime((f, g)) { () throws -> Void in
                for _ in 0 ..< 5 { #expect(try f.run(doc: "{}", oldDoc: nil, user: nil).channels == ["x"]) }
                #expect(try g.run(doc: "{}", req: "{}"))
                #expect(engine.compiledCount == 2)
            }
        }
        // Both released; the VM forgets them when next taken.
        let h = try FilterFunction(name: "h", source: "function(doc) { return false; }", engine: engine)
        #expect(try !h.run(doc: "{}", req: "{}"))
        #expect(engine.compiledCount == 1)
    }

    // MARK: The engine

    @Test func anEndlessLoopIsStoppedAndTheEngineGoesOn() throws {
        // One VM: the call after the timeout runs in the VM that was stopped. Only time may stop
        // these calls (the memory limit is on the whole process, shared with the other tests).
        let engine = ScriptEngine(contexts: 1, timeLimit: 0.2, memoryLimit: 1 << 50)
        let f = try SyncFunction(source: """
            function(doc) {
              if (doc.loop) { while (true) {} }
              channel(doc.name);
            }
            """, engine: engine)
        let start = ContinuousClock.now
        let error = failure { try f.run(doc: #"{"loop": true, "name": "a"}"#, oldDoc: nil, user: nil) }
        let elapsed = ContinuousClock.now - start
        #expect(error?.kind == .timeout)
        #expect(error?.message.hasPrefix("sync function") == true)
        #expect(elapsed >= .milliseconds(150) && elapsed < .seconds(10), "\(elapsed)")
        // The same function, the same VM, still right.
        #expect(try f.run(doc: #"{"name": "b"}"#, oldDoc: nil, user: nil).channels == ["b"])
        // A loop that catches cannot keep running: termination is not an exception it can catch.
        let catching = try FilterFunction(name: "catching", source: """
            function(doc) { try { while (true) {} } catch (e) { return true; } finally { return true; } }
            """, engine: engine)
        #expect(failure { try catching.run(doc: "{}", req: "{}") }?.kind == .timeout)
        #expect(try f.run(doc: #"{"name": "c"}"#, oldDoc: nil, user: nil).channels == ["c"])
        // Time is per call: many short calls add up to more than the limit without being stopped.
        let busy = try FilterFunction(name: "busy", source: "function(doc) { var s = 0; for (var i = 0; i < 1e5; i++) s += i; return s > 0; }", engine: engine)
        for _ in 0 ..< 50 { #expect(try busy.run(doc: "{}", req: "{}")) }
    }

    @Test func aDiscardedVMIsReplacedAndItsFunctionsCompiledAgain() throws {
        let engine = ScriptEngine(contexts: 1)
        let f = try SyncFunction(source: "function(doc) { channel(doc.c); }", engine: engine)
        #expect(try f.run(doc: #"{"c": "one"}"#, oldDoc: nil, user: nil).channels == ["one"])
        #expect(engine.compiledCount == 1)
        try engine.withVM { $0.discard() }
        #expect(engine.compiledCount == 0)
        #expect(try f.run(doc: #"{"c": "two"}"#, oldDoc: nil, user: nil).channels == ["two"])
        #expect(engine.compiledCount == 1)
    }

    @Test func runawayRecursionIsAnException() throws {
        let f = try SyncFunction(source: "function(doc) { function f(n) { return f(n + 1) + 1; } f(0); }", engine: Self.engine)
        guard case .exception(let text)? = failure({ try f.run(doc: "{}", oldDoc: nil, user: nil) })?.kind else {
            Issue.record("expected an exception")
            return
        }
        #expect(text.contains("RangeError"))
        #expect(try sync(#"function(doc) { channel("after"); }"#).channels == ["after"])
    }

    @Test func concurrentCallsFromManyThreadsAreAllCorrect() throws {
        let engine = ScriptEngine(contexts: 3)
        let f = try SyncFunction(source: """
            function(doc, oldDoc) {
              if (doc.n % 7 === 0) throw({forbidden: "multiple of seven: " + doc.n});
              channel("n-" + doc.n, "t-" + doc.thread);
              access("user-" + doc.n, "c-" + (doc.n * 2));
            }
            """, engine: engine)
        let filter = try FilterFunction(name: "odd", source: "function(doc, req) { return doc.n % 2 === 1; }", engine: engine)
        let threads = 8, calls = 150
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0 ..< calls {
                let n = t * 1000 + i
                let doc = #"{"n": \#(n), "thread": \#(t)}"#
                do throws(ScriptError) {
                    let out = try f.run(doc: doc, oldDoc: nil, user: nil)
                    if n % 7 == 0 || out.channels != ["n-\(n)", "t-\(t)"] || out.access != ["user-\(n)": ["c-\(n * 2)"]] {
                        wrong.add(1, ordering: .relaxed)
                    }
                } catch {
                    if n % 7 != 0 || error.kind != .forbidden("multiple of seven: \(n)") { wrong.add(1, ordering: .relaxed) }
                }
                if (try? filter.run(doc: doc, req: "{}")) != (n % 2 == 1) { wrong.add(1, ordering: .relaxed) }
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0)
        // Never more VMs than asked for, and each compiled the functions it ran once at most.
        #expect(engine.compiledCount <= 3 * 2)
    }

    @Test func documentDataNeverBecomesSource() throws {
        let tricky = #"\"); throw {forbidden: \"injected\"}; (\""#
        let out = try sync("function(doc) { channel(doc.name); }", doc: #"{"name": "\#(tricky)"}"#)
        #expect(out.channels == [#""); throw {forbidden: "injected"}; (""#])
        // A NUL in a string is data too.
        #expect(try sync("function(doc) { channel(doc.name); }", doc: #"{"name": "a\u0000b"}"#).channels == ["a\u{0}b"])
        #expect(failure { try sync("function(doc) {}", doc: "{not json") }?.kind == .badResult("doc is not JSON"))
        #expect(failure { try sync("function(doc) {}", doc: "{\"a\": 1}\u{0}") }?.kind == .badResult("doc is not JSON"))
    }

    @Test func noHostFunctionsAndNoSharedGlobals() throws {
        // Nothing beyond ECMAScript and our helpers: no file, network, timers, modules or shells.
        let probe = try FilterFunction(name: "probe", source: """
            function(doc) {
              var names = ["require", "process", "print", "load", "loadString", "readFile", "read", "run",
                "quit", "fetch", "XMLHttpRequest", "WebSocket", "setTimeout", "setInterval", "importScripts",
                "$vm", "$262", "Deno", "Bun", "window", "document", "navigator", "Worker", "localStorage"];
              for (var i = 0; i < names.length; i++) if (typeof globalThis[names[i]] !== "undefined") return false;
              return typeof channel === "undefined" && typeof JSON.parse === "function";
            }
            """, engine: Self.engine)
        #expect(try probe.run(doc: "{}", req: "{}"))
        // Dynamic import has no loader to reach the file system.
        let importer = try SyncFunction(source: """
            function(doc) {
              import("/etc/hostname").then(function () { channel("loaded"); }, function () { channel("rejected"); });
              channel("ran");
            }
            """, engine: Self.engine)
        #expect(try importer.run(doc: "{}", oldDoc: nil, user: nil).channels == ["ran"])
        // Each function has globals of its own: what one sets, another does not see.
        let setter = try SyncFunction(source: #"function(doc) { globalThis.leak = "x"; Array.prototype.push = null; channel("set"); }"#, engine: Self.engine)
        let reader = try SyncFunction(source: #"function(doc) { var a = []; a.push("p"); channel(typeof leak, a); }"#, engine: Self.engine)
        for _ in 0 ..< 3 {
            #expect(try setter.run(doc: "{}", oldDoc: nil, user: nil).channels == ["set"])
            #expect(try reader.run(doc: "{}", oldDoc: nil, user: nil).channels == ["undefined", "p"])
        }
        // The helpers cannot be replaced by the function.
        #expect(try sync(#"function(doc) { channel = function() {}; channel("kept"); }"#).channels == ["kept"])
    }

    /// Nothing one call leaves behind reaches the next: not a global it assigned (implicitly, on
    /// `this`, or made permanent), not a built-in it changed, not the last match of a regular
    /// expression over another document.
    @Test func noStateSurvivesFromOneCallToTheNext() throws {
        let remember = try SyncFunction(source: """
            function remember(doc) {
              if (typeof last !== "undefined") channel("saw:" + last);
              if (typeof this.mark !== "undefined") channel("this:" + this.mark);
              if (typeof perm !== "undefined") channel("perm:" + perm);
              if (typeof hidden !== "undefined") channel("hidden");
              if (typeof implicit !== "undefined") channel("implicit");
              if (remember.count !== undefined) channel("count:" + remember.count);
              if (RegExp.$1 !== "") channel("match:" + RegExp.$1);
              if (({}).polluted !== undefined) channel("polluted");
              if (JSON.stringify([1]) !== "[1]") channel("stringify changed");
              if ([].map !== Array.prototype.map || typeof [].map !== "function") channel("map changed");
              last = doc._id;
              this.mark = doc._id;
              try { Object.defineProperty(globalThis, "perm", { value: doc._id, configurable: false }); } catch (e) {}
              try { Reflect.defineProperty(globalThis, "perm", { value: doc._id, configurable: false }); } catch (e) {}
              try { (0, eval)("let hidden = 1"); } catch (e) {}
              try { Function("implicit = 1")(); } catch (e) {}
              try { remember.count = (remember.count || 0) + 1; } catch (e) {}
              /([0-9]+)/.exec(doc.pin);
              try { Object.prototype.polluted = 1; } catch (e) {}
              try { JSON.stringify = function () { return "x"; }; } catch (e) {}
              try { Array.prototype.map = null; } catch (e) {}
              channel("ran");
            }
            """, engine: Self.engine)
        for id in ["first", "second", "third"] {
            let out = try remember.run(doc: #"{"_id": "\#(id)", "pin": "PIN 4711"}"#, oldDoc: nil, user: nil)
            #expect(out.channels == ["ran"], "\(id): \(out.channels)")
        }
        // Strict code meets the frozen built-ins as errors, and still leaves nothing.
        let strict = try SyncFunction(source: #"function(doc) { "use strict"; try { Math.max = null; } catch (e) { channel("refused"); } channel(typeof Math.max); }"#, engine: Self.engine)
        #expect(try strict.run(doc: "{}", oldDoc: nil, user: nil).channels == ["refused", "function"])
    }

    /// A call that allocates without bound is stopped and reported; the engine goes on.
    @Test func aCallThatAllocatesWithoutBoundIsStopped() throws {
        let engine = ScriptEngine(contexts: 1, timeLimit: 30, memoryLimit: 64 << 20)
        let hog = try SyncFunction(source: """
            function(doc) { var a = []; while (true) { a.push(new Array(1000).fill(a.length)); } }
            """, engine: engine)
        let error = failure { try hog.run(doc: "{}", oldDoc: nil, user: nil) }
        #expect(error?.kind == .memory, "\(String(describing: error))")
        #expect(error?.message.contains("64 MiB") == true, "\(String(describing: error))")
        let fine = try SyncFunction(source: #"function(doc) { channel("ok"); }"#, engine: engine)
        #expect(try fine.run(doc: "{}", oldDoc: nil, user: nil).channels == ["ok"])
        // The time limit still stops a loop that allocates nothing. (Its memory limit is out of
        // reach: the limit is on the whole process's growth, and the tests beside this one may
        // grow it by hundreds of MiB while the loop spins.)
        let quick = ScriptEngine(contexts: 1, timeLimit: 0.3, memoryLimit: 1 << 50)
        let spin = try SyncFunction(source: "function(doc) { while (true) {} }", engine: quick)
        #expect(failure { try spin.run(doc: "{}", oldDoc: nil, user: nil) }?.kind == .timeout)
    }

    /// JavaScriptCore keeps the pages of a heap that held garbage: a VM during whose calls the
    /// server grew by more than ``ScriptVM/recycleAfterGrowth`` is replaced when given back
    /// (releasing it returns its heap to the system), and its functions run on in the new one.
    /// What the server's resident size did is printed (it is the whole process's, shared with
    /// every test running beside this one).
    @Test func aVMWhoseCallsGrewTheServerIsReplaced() throws {
        let engine = ScriptEngine(contexts: 1, timeLimit: 30)
        let big = try FilterFunction(name: "big", source: """
            function(doc) { var a = []; for (var i = 0; i < 150000; i++) a.push('x'.repeat(1000) + i); return a.length > 0; }
            """, engine: engine)
        let small = try FilterFunction(name: "small", source: "function(doc) { return doc.ok === true; }", engine: engine)
        #expect(try small.run(doc: #"{"ok": true}"#, req: "{}"))
        #expect(engine.replacedCount.load(ordering: .relaxed) == 0)
        let before = Watchdog.residentBytes() ?? 0
        for _ in 0 ..< 3 { #expect(try big.run(doc: "{}", req: "{}")) }
        let grown = Watchdog.residentBytes() ?? 0
        #expect(engine.replacedCount.load(ordering: .relaxed) >= 1)
        // The functions run on in the VM that took its place.
        #expect(try small.run(doc: #"{"ok": true}"#, req: "{}"))
        Thread.sleep(forTimeInterval: 3)
        let after = Watchdog.residentBytes() ?? 0
        print("ScriptTests: resident \(before >> 20) MiB before, \(grown >> 20) MiB after the calls, \(after >> 20) MiB 3 s after the VM was replaced")
    }

    // MARK: Design documents

    @Test func filterReadsTheRequestQuery() throws {
        let f = try FilterFunction(name: "filter app/by_type", source: """
            function(doc, req) {
              return doc.type === req.query.type && !doc._deleted;
            }
            """, engine: Self.engine)
        let req = #"{"query": {"type": "note"}}"#
        #expect(try f.run(doc: #"{"_id": "a", "type": "note"}"#, req: req))
        #expect(try !f.run(doc: #"{"_id": "b", "type": "task"}"#, req: req))
        #expect(try !f.run(doc: #"{"_id": "c", "type": "note", "_deleted": true}"#, req: req))
        // Truthiness, as CouchDB reads it.
        let truthy = try FilterFunction(name: "t", source: "function(doc) { return doc.v; }", engine: Self.engine)
        #expect(try truthy.run(doc: #"{"v": 1}"#, req: "{}"))
        #expect(try truthy.run(doc: #"{"v": "yes"}"#, req: "{}"))
        #expect(try !truthy.run(doc: #"{"v": 0}"#, req: "{}"))
        #expect(try !truthy.run(doc: #"{"v": ""}"#, req: "{}"))
        #expect(try !truthy.run(doc: #"{}"#, req: "{}"))
        let throwing = try FilterFunction(name: "filter app/bad", source: "function(doc) { return doc.a.b; }", engine: Self.engine)
        guard case .exception? = failure({ try throwing.run(doc: "{}", req: "{}") })?.kind else {
            Issue.record("expected an exception")
            return
        }
    }

    @Test func validateDocUpdateSeesTheUserContext() throws {
        let v = try ValidateFunction(name: "_design/app validate_doc_update", source: """
            function(newDoc, oldDoc, userCtx, secObj) {
              var isAdmin = userCtx.roles.indexOf("_admin") !== -1;
              if (!userCtx.name && !isAdmin) throw({unauthorized: "please log in"});
              if (secObj.members.names.indexOf(userCtx.name) === -1 && !isAdmin) throw({forbidden: "not a member"});
              if (oldDoc && oldDoc.author !== userCtx.name && !isAdmin) throw({forbidden: "only " + oldDoc.author + " may edit"});
              if (!newDoc.title) throw({forbidden: "a title is required"});
            }
            """, engine: Self.engine)
        let sec = #"{"admins": {"names": [], "roles": []}, "members": {"names": ["alice", "bob"], "roles": []}}"#
        let alice = #"{"db": "db", "name": "alice", "roles": []}"#
        let bob = #"{"db": "db", "name": "bob", "roles": ["writer"]}"#
        let admin = #"{"db": "db", "name": null, "roles": ["_admin"]}"#
        try v.run(newDoc: #"{"_id": "d", "title": "t", "author": "alice"}"#, oldDoc: nil, userCtx: alice, secObj: sec)
        try v.run(newDoc: #"{"_id": "d", "title": "t2"}"#, oldDoc: #"{"_id": "d", "title": "t", "author": "alice"}"#, userCtx: alice, secObj: sec)
        #expect(failure { try v.run(newDoc: #"{"title": "t2"}"#, oldDoc: #"{"author": "alice"}"#, userCtx: bob, secObj: sec) }?.kind
                == .forbidden("only alice may edit"))
        try v.run(newDoc: #"{"title": "t2"}"#, oldDoc: #"{"author": "alice"}"#, userCtx: admin, secObj: sec)
        #expect(failure { try v.run(newDoc: #"{}"#, oldDoc: nil, userCtx: alice, secObj: sec) }?.kind == .forbidden("a title is required"))
        #expect(failure { try v.run(newDoc: #"{"title": "t"}"#, oldDoc: nil, userCtx: #"{"db": "db", "name": null, "roles": []}"#, secObj: sec) }?.kind
                == .unauthorized("please log in"))
        #expect(failure { try v.run(newDoc: #"{"title": "t"}"#, oldDoc: nil, userCtx: #"{"db": "db", "name": "eve", "roles": []}"#, secObj: sec) }?.kind
                == .forbidden("not a member"))
    }
}
