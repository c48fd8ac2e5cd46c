import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing
@_spi(Replication) @_spi(Server) import Settee
@testable import SetteeServer

/// The admin page's HTML as the server sends it: escaping, the form token, errors, headers.
/// (`scripts/browser-test` drives the same pages in Chromium.)
@Suite struct AdminPageTests {
    static let hostileID = #"<script>alert("id")</script>"#
    static let hostileBody = #"{"note":"</pre><script>alert(1)</script>","channels":["<b>c</b>"]}"#

    /// The form token a page carries.
    static func token(in html: String) throws -> String {
        let marker = #"name="token" value=""#
        let start = try #require(html.range(of: marker)).upperBound
        let end = try #require(html[start...].firstIndex(of: "\""))
        return String(html[start ..< end])
    }

    static func form(_ pairs: [(String, String)]) -> String {
        pairs.map { "\($0)=\(HTML.segment($1))" }.joined(separator: "&")
    }

    @Test func databaseIDsAndBodiesAreEscapedEverywhere() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            let id = HTML.segment(Self.hostileID)
            #expect(try await a.send(.put, "/db/\(id)", json: Self.hostileBody).status == .created)
            for path in ["/_admin/", "/_admin/db/db", "/_admin/db/db/doc/\(id)", "/_admin/db/db/row/\(id)",
                         "/_admin/db/db/channels/\(HTML.segment("<b>c</b>"))"] {
                let r = try await a.send(.get, path)
                #expect(r.status == .ok, "\(path): \(r.status)")
                #expect(!r.text.contains("<script>alert") && !r.text.contains("<b>c</b>"), "\(path) holds unescaped text: \(r.text)")
                #expect(r.headers[.contentType] == "text/html; charset=utf-8")
            }
            let doc = try await a.send(.get, "/_admin/db/db/doc/\(id)")
            #expect(doc.text.contains("&lt;script&gt;alert(&quot;id&quot;)&lt;/script&gt;"))
            #expect(doc.text.contains("&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;"))
            let csp = try #require(doc.headers[HTTPField.Name("Content-Security-Policy")!])
            #expect(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"))
        }
    }

    @Test func resolvingTakesTheFormTokenAndKeepsTheChosenLeaf() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            let docs = #"""
            {"new_edits": false, "docs": [
              {"_id": "c", "_rev": "1-aa", "v": 0, "_revisions": {"start": 1, "ids": ["aa"]}},
              {"_id": "c", "_rev": "2-bb", "v": 1, "_revisions": {"start": 2, "ids": ["bb", "aa"]}},
              {"_id": "c", "_rev": "2-cc", "v": 2, "_revisions": {"start": 2, "ids": ["cc", "aa"]}}]}
            """#
            #expect(try await a.send(.post, "/db/_bulk_docs", json: docs).status == .created)
            let page = try await a.send(.get, "/_admin/db/db/doc/c")
            #expect(page.text.contains(#"class="rev winner leaf kept" data-rev="2-cc""#))
            #expect(page.text.contains(#"class="rev leaf conflict kept" data-rev="2-bb""#))
            let token = try Self.token(in: page.text)
            let formType: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            let crossSite: HTTPFields = [.contentType: "application/x-www-form-urlencoded", HTTPField.Name("Sec-Fetch-Site")!: "cross-site"]
            // No token, a wrong one, or a form another site sent: refused, nothing written.
            for (body, headers) in [(Self.form([("winner", "2-bb")]), formType),
                                    (Self.form([("token", token + "0"), ("winner", "2-bb")]), formType),
                                    (Self.form([("token", token), ("winner", "2-bb")]),
                                     crossSite)] {
                let r = try await a.execute(uri: "/_admin/db/db/doc/c/resolve", method: .post, headers: headers, body: ByteBuffer(string: body))
                #expect(r.status == .forbidden, "\(body): \(r.status)")
            }
            #expect(try await a.send(.get, "/db/c")["_rev"] == "2-cc")
            // A leaf that is not there: 404.
            let missing = try await a.execute(uri: "/_admin/db/db/doc/c/resolve", method: .post, headers: formType,
                                              body: ByteBuffer(string: Self.form([("token", token), ("winner", "2-zz")])))
            #expect(missing.status == .notFound)
            let ok = try await a.execute(uri: "/_admin/db/db/doc/c/resolve", method: .post,
                                         headers: [.contentType: "application/x-www-form-urlencoded", HTTPField.Name("Sec-Fetch-Site")!: "same-origin"],
                                         body: ByteBuffer(string: Self.form([("token", token), ("winner", "2-bb")])))
            #expect(ok.status == .seeOther && ok.headers[.location] == "/_admin/db/db/doc/c")
            let after = try await a.send(.get, "/db/c?conflicts=true")
            #expect(after["v"] == 1 && after["_conflicts"] == nil && after["_rev"]?.stringValue?.hasPrefix("3-") == true)
            // GET on the action is not allowed.
            #expect(try await a.send(.get, "/_admin/db/db/doc/c/resolve").status == .methodNotAllowed)
        }
    }

    /// The Queries tab lists the Mango indexes and runs a query with its plan; hostile text
    /// stays text; the form needs its token.
    @Test func theQueriesTabListsIndexesAndRunsAMangoQuery() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            let id = HTML.segment(Self.hostileID)
            #expect(try await a.send(.put, "/db/\(id)", json: #"{"kind": "<i>x</i>", "n": 1}"#).status == .created)
            #expect(try await a.send(.put, "/db/plain", json: #"{"kind": "plain", "n": 2}"#).status == .created)
            let made = try await a.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "<b>d", "name": "by-n"}"#)
            #expect(made.status == .ok, "\(made.text)")
            let page = try await a.send(.get, "/_admin/db/db/query")
            #expect(page.status == .ok && page.text.contains("by-n") && page.text.contains("_design/&lt;b&gt;d"), "\(page.text)")
            #expect(!page.text.contains("<b>d"))
            let token = try Self.token(in: page.text)
            let formType: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            let query = #"{"selector": {"n": {"$gte": 1}}, "sort": ["n"]}"#
            let refused = try await a.execute(uri: "/_admin/db/db/query", method: .post, headers: formType,
                                              body: ByteBuffer(string: Self.form([("query", query)])))
            #expect(refused.status == .forbidden)
            let ran = try await a.execute(uri: "/_admin/db/db/query", method: .post, headers: formType,
                                          body: ByteBuffer(string: Self.form([("token", token), ("query", query)])))
            #expect(ran.status == .ok)
            let text = String(buffer: ran.body)
            #expect(text.contains("SCAN INDEX _design/&lt;b&gt;d/by-n"), "\(text)")
            #expect(text.contains("&lt;i&gt;x&lt;/i&gt;") && !text.contains("<i>x</i>") && !text.contains("<script>alert"))
            let hostile = text.range(of: "&lt;script&gt;")!.lowerBound, plain = text.range(of: ">plain<")!.lowerBound
            #expect(hostile < plain, "sorted by n")
            let bad = try await a.execute(uri: "/_admin/db/db/query", method: .post, headers: formType,
                                          body: ByteBuffer(string: Self.form([("token", token), ("query", #"{"selector": {"n": {"$bogus": 1}}}"#)])))
            #expect(bad.status == .ok && String(buffer: bad.body).contains("Invalid operator: $bogus"))
        }
    }

    /// The Queries tab gives each Mango index and each view its size and state, from the
    /// library indexes behind them; a view's name stays text.
    @Test func theQueriesTabListsIndexesAndViewsWithTheirSize() async throws {
        let server = try channelServer(#"{"databases": {"db": {"server": "walrus:"}}}"#)
        defer { try? server.close() }
        try await withPorts(server) { _, admin in
            let made = try await admin.send(.post, "/db/_index", json: #"{"index": {"fields": ["n"]}, "ddoc": "mango", "name": "by-n"}"#)
            #expect(made.status == .ok, "\(made.text)")
            try await put(admin, "_design/app", #"""
                {"views": {
                  "by_type": {"map": "function (doc) { if (doc.type) emit(doc.type, 1); }", "reduce": "_count"},
                  "<b>x</b>": {"map": "function (doc) { if (doc.n !== undefined) emit(doc.n, null); }"}
                }}
                """#)
            for i in 0 ..< 3 { try await put(admin, "n\(i)", #"{"type": "task", "n": \#(i)}"#) }
            try await put(admin, "plain", #"{"type": "note"}"#)
            // A view's index is built after its design document is written: a query waits for it.
            for name in ["by_type", "<b>x</b>"] {
                let r = try await admin.send(.get, "/db/_design/app/_view/" + HTML.segment(name))
                #expect(r.status == .ok, "\(name): \(r.text)")
            }
            let page = try await admin.send(.get, "/_admin/db/db/query")
            #expect(page.status == .ok)
            let html = page.text
            func table(_ id: String) throws -> String {
                let start = try #require(html.range(of: #"<table id="\#(id)">"#)).upperBound
                return String(html[start ..< (try #require(html[start...].range(of: "</table>"))).lowerBound])
            }
            // Three documents have `n`.
            let indexes = try table("indexes")
            #expect(indexes.contains(#"<td>_design/mango</td><td>by-n</td><td>n</td><td></td><td class="entries num">3</td><td class="state">ready</td>"#), "\(indexes)")
            let views = try table("views")
            #expect(views.contains(#"<td>_design/app</td><td>by_type</td><td class="reduce">_count</td><td class="rows num">4</td><td class="state">ready</td><td class="errors num">0</td>"#), "\(views)")
            #expect(views.contains(#"<td>_design/app</td><td>&lt;b&gt;x&lt;/b&gt;</td><td class="reduce">—</td><td class="rows num">3</td><td class="state">ready</td><td class="errors num">0</td>"#), "\(views)")
            #expect(!html.contains("<b>x</b>"))
        }
    }

    @Test func unknownPagesAndThePublicPort() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            for path in ["/_admin/db/nope", "/_admin/db/db/doc/missing", "/_admin/nothing", "/_admin/assets/x.js", "/_admin/db/db/row/missing"] {
                #expect(try await a.send(.get, path).status == .notFound, "\(path)")
            }
            #expect(try await a.send(.get, "/_admin/db/db/channels/x?after=abc").status == .badRequest)
            #expect(try await a.send(.post, "/_admin/db/db").status == .methodNotAllowed)
            let head = try await a.send(.head, "/_admin/db/db")
            #expect(head.status == .ok && head.body.readableBytes == 0)
            let css = try await a.send(.get, "/_admin/assets/admin.css")
            #expect(css.status == .ok && css.headers[.contentType] == "text/css; charset=utf-8")
        }
        try await server.withClient { p async throws in
            #expect(try await p.send(.get, "/_admin/").status == .forbidden)
        }
    }

    @Test func theDocumentListPagesByIDWithFilters() async throws {
        let server = try makeServer()
        defer { try? server.close() }
        try await server.withClient(admin: true) { a async throws in
            let docs = (0 ..< 120).map { #"{"_id": "d\#(String(format: "%03d", $0))"}"# }.joined(separator: ",")
            #expect(try await a.send(.post, "/db/_bulk_docs", json: #"{"docs": [\#(docs)]}"#).status == .created)
            func rows(_ html: String) -> [String] {
                html.components(separatedBy: #"<tr data-id=""#).dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
            }
            let first = try await a.send(.get, "/_admin/db/db")
            #expect(rows(first.text) == (0 ..< 50).map { String(format: "d%03d", $0) })
            #expect(first.text.contains("?after=d049"))
            let second = try await a.send(.get, "/_admin/db/db?after=d049")
            #expect(rows(second.text).first == "d050" && rows(second.text).count == 50)
            let prefixed = try await a.send(.get, "/_admin/db/db?prefix=d11")
            #expect(rows(prefixed.text) == (110 ..< 120).map { String(format: "d%03d", $0) })
            #expect(rows(try await a.send(.get, "/_admin/db/db?deleted=1").text).isEmpty)
            let index = try await a.send(.get, "/_admin/")
            #expect(index.text.contains(#"<td class="docs num">120</td>"#))
            // A deletion: counted apart (here and in the database's info), and listed when asked.
            let rev = try #require(try await a.send(.get, "/db/d007")["_rev"]?.stringValue)
            #expect(try await a.send(.delete, "/db/d007?rev=\(rev)").status == .ok)
            #expect(rows(try await a.send(.get, "/_admin/db/db?deleted=1").text) == ["d007"])
            #expect(!rows(try await a.send(.get, "/_admin/db/db").text).contains("d007"))
            let after = try await a.send(.get, "/_admin/")
            #expect(after.text.contains(#"<td class="docs num">119</td><td class="deleted num">1</td>"#))
            let info = try await a.send(.get, "/db")
            #expect(info["doc_count"] == 119 && info["doc_del_count"] == 1)
            #expect((info["sizes"]?.objectValue?["file"]?.int64Value ?? 0) > 0)
        }
    }
}
