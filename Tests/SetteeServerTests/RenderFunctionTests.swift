import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// CouchDB's `_show`, `_list` and `_update` (deprecated in CouchDB 3, still served, and tested
/// by its client libraries), on live servers on loopback: what they answer, how they see the
/// request, and that a user reaches through them only what it may read and write.
@Suite struct RenderFunctionTests {
    static let config = redChannelConfig
    static let alice = basic("alice", "pw")

    static let design = #"""
        {"shows": {
           "hello": "function(doc, req) { return 'Hello ' + (doc ? doc.name : 'nobody') + ' ' + req.query.x; }",
           "json": "function(doc, req) { return {code: 202, json: {id: doc._id, n: doc.n, user: req.userCtx.name, auth: req.headers.Authorization || null}, headers: {'X-Mine': 'yes'}}; }",
           "fmt": "function(doc, req) { provides('html', function() { return '<p>' + doc.name + '</p>'; }); provides('json', function() { return toJSON({name: doc.name, design: this._id}); }); }",
           "bad": "function(doc, req) { return doc.name.length + undefinedName; }",
           "missing": "function(doc, req) { return doc.nothing; }",
           "number": "function(doc, req) { return 42; }",
           "forbid": "function(doc, req) { throw {forbidden: 'not for you'}; }",
           "inject": "function(doc, req) { return {body: 'x', headers: {'X-Bad': 'a\r\nSet-Cookie: s=1'}}; }",
           "csp": "function(doc, req) { return {body: '<script>1</script>', headers: {'Content-Security-Policy': 'script-src *'}}; }"
         },
         "lists": {
           "names": "function(head, req) { start({code: 200, headers: {'Content-Type': 'text/plain'}}); var row; while ((row = getRow())) { send(row.key + '=' + row.value + ';'); } return 'total ' + head.total_rows; }"
         },
         "views": {"by_name": {"map": "function(doc) { if (doc.name) emit(doc.name, doc.n); }"}},
         "updates": {
           "bump": "function(doc, req) { if (!doc) { return [{_id: req.id, n: 1, color: 'red'}, 'made']; } doc.n = (doc.n || 0) + 1; return [doc, {json: {n: doc.n}}]; }",
           "echo": "function(doc, req) { return [null, {code: 200, body: req.body + '|' + (req.form.a || '') + '|' + req.method}]; }"
         }}
        """#

    func seed(_ admin: any TestClientProtocol) async throws {
        try await put(admin, "_design/r", Self.design)
        try await put(admin, "ann", #"{"name": "Ann", "n": 1, "color": "red"}"#)
        try await put(admin, "bob", #"{"name": "Bob", "n": 2, "color": "blue"}"#)
    }

    @Test func showsAnswerAsCouchDBs() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let hello = try await admin.send(.get, "/db/_design/r/_show/hello/ann?x=1")
            #expect(hello.status == .ok && hello.text == "Hello Ann 1", "\(hello.text)")
            #expect(hello.headers[.contentType] == "text/html; charset=utf-8")
            #expect(hello.headers[HTTPField.Name("Content-Security-Policy")!] == "sandbox; default-src 'none'")
            #expect(try await admin.send(.get, "/db/_design/r/_show/hello?x=2").text == "Hello nobody 2")
            #expect(try await admin.send(.post, "/db/_design/r/_show/hello/ann?x=3", json: "{}").text == "Hello Ann 3")
            // A response object: code, headers, json; the request object without credentials.
            let json = try await pub.send(.get, "/db/_design/r/_show/json/ann", headers: Self.alice)
            #expect(json.status == .accepted && json.headers[.contentType] == "application/json", "\(json.text)")
            #expect(json["id"] == "ann" && json["n"] == 1 && json["user"] == "alice" && json["auth"] == .null, "\(json.text)")
            #expect(json.headers[HTTPField.Name("X-Mine")!] == "yes")
            // provides: ?format=, then Accept, then the first offered; `this` is the design document.
            let asJSON = try await admin.send(.get, "/db/_design/r/_show/fmt/ann?format=json")
            #expect(asJSON.headers[.contentType] == "application/json" && asJSON["name"] == "Ann" && asJSON["design"] == "_design/r", "\(asJSON.text)")
            let asHTML = try await admin.send(.get, "/db/_design/r/_show/fmt/ann", headers: [.accept: "text/html"])
            #expect(asHTML.text == "<p>Ann</p>" && asHTML.headers[.contentType] == "text/html; charset=utf-8", "\(asHTML.text)")
            #expect(try await admin.send(.get, "/db/_design/r/_show/fmt/ann").text == "<p>Ann</p>")
            // A browser's Accept names HTML before */*: HTML; a client of JSON with */* after: JSON.
            #expect(try await admin.send(.get, "/db/_design/r/_show/fmt/ann", headers: [.accept: "text/html,application/xhtml+xml,*/*;q=0.8"]).text == "<p>Ann</p>")
            #expect(try await admin.send(.get, "/db/_design/r/_show/fmt/ann", headers: [.accept: "application/json, */*"]).headers[.contentType] == "application/json")
            #expect(try await admin.send(.get, "/db/_design/r/_show/fmt/ann", headers: [.accept: "image/png"]).status == .notAcceptable)
            // Failures: a thrown error 500, a rejection 403, a missing document whose function fails 404.
            let bad = try await admin.send(.get, "/db/_design/r/_show/bad/ann")
            #expect(bad.status == .internalServerError && bad["error"] == "render_error", "\(bad.text)")
            #expect(try await admin.send(.get, "/db/_design/r/_show/bad/nothing").status == .notFound)
            #expect(try await admin.send(.get, "/db/_design/r/_show/forbid/ann").status == .forbidden)
            // A show that gives nothing answers an empty 200, as CouchDB's (its `|| {}`); one that
            // gives a number is not a response.
            let nothing = try await admin.send(.get, "/db/_design/r/_show/missing/ann")
            #expect(nothing.status == .ok && nothing.text.isEmpty, "\(nothing.text)")
            #expect(try await admin.send(.get, "/db/_design/r/_show/number/ann").status == .internalServerError)
            #expect(try await admin.send(.get, "/db/_design/r/_show/none/ann").status == .notFound)
            #expect(try await admin.send(.delete, "/db/_design/r/_show/hello/ann").status == .methodNotAllowed)
            // A header that would split the response, and a weaker CSP: neither gets through.
            #expect(try await admin.send(.get, "/db/_design/r/_show/inject/ann").status == .internalServerError)
            let csp = try await admin.send(.get, "/db/_design/r/_show/csp/ann")
            #expect(csp.headers[HTTPField.Name("Content-Security-Policy")!] == "sandbox; default-src 'none'", "\(csp.headers)")
        }
    }

    /// A user's show sees a document it may not read as none; its list, only its rows.
    @Test func aUserRendersOnlyWhatItMayRead() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            #expect(try await pub.send(.get, "/db/_design/r/_show/hello/bob?x=0", headers: Self.alice).text == "Hello nobody 0")
            #expect(try await pub.send(.get, "/db/_design/r/_show/hello/ann?x=0", headers: Self.alice).text == "Hello Ann 0")
            let all = try await admin.send(.get, "/db/_design/r/_list/names/by_name")
            #expect(all.status == .ok && all.text == "Ann=1;Bob=2;total 2" && all.headers[.contentType] == "text/plain", "\(all.text)")
            let hers = try await pub.send(.get, "/db/_design/r/_list/names/by_name", headers: Self.alice)
            #expect(hers.text == "Ann=1;total 1", "\(hers.text)")
            // View options apply; the view may be another design document's.
            #expect(try await admin.send(.get, "/db/_design/r/_list/names/by_name?descending=true&limit=1").text == "Bob=2;total 2")
            #expect(try await admin.send(.get, "/db/_design/r/_list/names/r/by_name?key=%22Bob%22").text == "Bob=2;total 2")
            #expect(try await admin.send(.get, "/db/_design/r/_list/names/nothing").status == .notFound)
            #expect(try await pub.send(.get, "/db/_design/r/_show/hello/ann").status == .unauthorized)
        }
    }

    /// Updates save what the function returns as the caller's own write, with CouchDB's headers.
    @Test func updatesSaveAsTheCaller() async throws {
        let server = try channelServer(Self.config)
        defer { try? server.close() }
        try await withPorts(server) { pub, admin in
            try await seed(admin)
            let made = try await admin.send(.put, "/db/_design/r/_update/bump/u1")
            #expect(made.status == .created && made.text == "made", "\(made.text)")
            let rev = try #require(made.headers[HTTPField.Name("X-Couch-Update-NewRev")!])
            #expect(made.headers[HTTPField.Name("X-Couch-Id")!] == "u1")
            #expect(try await admin.send(.get, "/db/u1")["_rev"]?.stringValue == rev)
            let bumped = try await pub.send(.post, "/db/_design/r/_update/bump/u1", headers: Self.alice)
            #expect(bumped.status == .created && bumped["n"] == 2, "\(bumped.text)")
            #expect(try await admin.send(.get, "/db/u1")["n"] == 2)
            // Bob's document is not alice's to read: the function sees none, and its write of
            // a new document under that ID is a conflict, not an overwrite.
            let bob = try await pub.send(.post, "/db/_design/r/_update/bump/bob", headers: Self.alice)
            #expect(bob.status == .conflict, "\(bob.text)")
            #expect(try await admin.send(.get, "/db/bob")["n"] == 2)
            // The body, the form and the method; nothing saved.
            let echo = try await admin.send(.post, "/db/_design/r/_update/echo", headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(echo.status == .ok && echo.text == "|" + "|POST", "\(echo.text)")
            let form = try await admin.execute(uri: "/db/_design/r/_update/echo", method: .post,
                                               headers: [.contentType: "application/x-www-form-urlencoded"], body: ByteBuffer(string: "a=5"))
            #expect(form.text == "a=5|5|POST", "\(form.text)")
            #expect(try await admin.send(.get, "/db/_design/r/_update/echo").status == .methodNotAllowed)
        }
    }
}
