import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
@_spi(Replication) @_spi(Server) import Settee

/// The admin page (`/_admin/…` on the admin port): the databases, their documents, a document's
/// revision tree drawn as SVG, users and channels, and a preview of the sync function.
///
/// Pages are rendered here, whole, and read without JavaScript; `admin.js` only keeps the
/// document list live (an `EventSource` on the database's changes feed) and nothing is loaded
/// from outside the server (a Content-Security-Policy says so to the browser). The one action
/// that changes data, resolving a conflict, and the sync-function preview are POSTed forms that
/// carry the server's form token and are refused from another site.
///
/// A value type; safe to share between threads.
struct AdminPages {
    let server: SetteeServer

    /// Documents per page of a list.
    static let pageSize = 50
    static let usersPageSize = 200
    /// Documents a filtered list reads at most per request (only deleted ones, say, among a
    /// million live ones): the page ends there with a link to go on.
    static let scanLimit = 5000

    func respond(_ call: inout CouchAPI.Call) async throws -> Response {
        let rest = Array(call.path.dropFirst())
        let method = call.request.method
        let reading = method == .get || method == .head
        /// A page read with GET or HEAD.
        func page(_ render: () async throws -> Response) async throws -> Response {
            guard reading else { throw CouchError.methodNotAllowed("GET,HEAD") }
            return try await render()
        }
        if rest.isEmpty { return try await page { try index() } }
        switch rest[0] {
        case "assets" where rest.count == 2:
            return try await page { try asset(rest[1]) }
        case "db" where rest.count >= 2:
            let sub = Array(rest.dropFirst(2))
            let resolving = sub.count == 3 && sub[0] == "doc" && sub[2] == "resolve"
            let previewing = sub == ["sync"] || sub == ["query"]
            if resolving && method != .post { throw CouchError.methodNotAllowed("POST") }
            if previewing && !reading && method != .post { throw CouchError.methodNotAllowed("GET,HEAD,POST") }
            guard let db = served(rest[1]) else { return notFound("No database \(rest[1]).") }
            switch (sub.first, sub.count) {
            case (nil, _): return try await page { try documentList(call, db) }
            case ("doc", 2): return try await page { try await documentPage(call, db, id: sub[1]) }
            case ("doc", 3) where resolving: return try await resolve(&call, db, id: sub[1])
            case ("row", 2): return try await page { try await documentRow(db, id: sub[1]) }
            case ("users", 1): return try await page { try usersPage(call, db) }
            case ("channels", 2): return try await page { try channelPage(call, db, channel: sub[1]) }
            case ("sync", 1): return try await syncPage(&call, db)
            case ("query", 1): return try await queryPage(&call, db)
            default: break
            }
        default: break
        }
        return try await page { notFound("No such admin page.") }
    }

    /// A database by name, or one of its named collections by its keyspace (`db.scope.collection`):
    /// a collection's pages are a database's.
    private func served(_ name: String) -> ServedDatabase? {
        guard let keyspace = (try? CouchAPI.keyspace(name)) ?? nil else { return server.database(named: name) }
        return server.database(named: keyspace.database)?.collection(scope: keyspace.scope, name: keyspace.collection)
    }

    /// A database and its named collections, by keyspace.
    private func withCollections(_ db: ServedDatabase) -> [ServedDatabase] {
        [db] + db.collections.withLock { $0 }.sorted { $0.key < $1.key }.map(\.value)
    }

    // MARK: - Pages

    /// `/_admin/`: every database with its counts.
    private func index() throws -> Response {
        var h = HTML()
        h.raw("<h1>Databases</h1><table id=\"databases\"><thead><tr><th>Database</th><th>Documents</th><th>Deleted</th><th>In conflict</th><th>Size</th><th>Last sequence</th><th>Open feeds</th></tr></thead><tbody>")
        for served in server.databaseNames.compactMap({ server.database(named: $0) }).flatMap(withCollections) {
            let (db, name) = (served, served.name)
            let s = try db.database.statistics
            let feeds = db.openFeeds.withLock { $0.signals.count }
            h.raw("<tr data-db=\"\(HTML.escape(name))\"><td class=\"name\">")
            h.link(HTML.path("_admin", "db", name), name)
            h.raw("</td><td class=\"docs num\">\(s.documentCount)</td><td class=\"deleted num\">\(s.deletedDocumentCount)</td>")
            h.raw("<td class=\"conflicts num\">")
            if s.conflictedDocumentCount > 0 {
                h.link(HTML.path("_admin", "db", name) + "?conflicts=1", "\(s.conflictedDocumentCount)")
            } else {
                h.raw("0")
            }
            h.raw("</td><td class=\"size num\">\(HTML.bytes(s.fileSize))</td><td class=\"seq num\">\(s.lastSequence)</td><td class=\"feeds num\">\(feeds)</td></tr>")
        }
        h.raw("</tbody></table>")
        return page(title: "Settee", crumbs: [], body: h.output)
    }

    /// `/_admin/db/{db}`: documents by ID, a page at a time, with a prefix search and filters.
    private func documentList(_ call: CouchAPI.Call, _ db: ServedDatabase) throws -> Response {
        let q = call.query
        let prefix = q["prefix"].flatMap { $0.isEmpty ? nil : $0 }
        let onlyConflicts = q["conflicts"] == "1"
        let onlyDeleted = q["deleted"] == "1"
        let after = q["after"].flatMap { $0.isEmpty ? nil : $0 }
        let database = db.database
        var options = AllDocumentsOptions()
        options.prefix = prefix
        options.startKey = after
        options.onlyConflicts = onlyConflicts
        options.includeDeleted = onlyDeleted
        let cursor = try database.allDocuments(options)
        var docs: [Document] = []
        var scanned = 0
        // The last document this page accounts for (shown, or read and filtered out): the next
        // page starts after it.
        var lastConsidered: String?
        var more = false
        while let doc = try cursor.next() {
            if doc.id == after { continue }
            if docs.count == Self.pageSize || scanned == Self.scanLimit { more = true; break }
            scanned += 1
            lastConsidered = doc.id
            if onlyDeleted && !doc.isDeleted { continue }
            docs.append(doc)
        }
        let base = HTML.path("_admin", "db", db.name)
        var h = HTML()
        h.raw("<h1>")
        h.text(db.name)
        h.raw("</h1><nav class=\"tabs\">")
        h.link(base, "Documents", class: "current")
        h.link(base + "/users", "Users and roles")
        h.link(base + "/sync", "Sync function")
        h.link(base + "/query", "Queries")
        h.raw("</nav>")
        // A database's named collections, and a collection's database: each browsed as a database.
        let collections = withCollections(db.parent ?? db)
        if collections.count > 1 {
            h.raw("<p id=\"collections\" class=\"collections\">Collections: ")
            for (i, c) in collections.enumerated() {
                if i > 0 { h.raw(" · ") }
                let label = c.parent == nil ? "_default._default" : String(c.name.dropFirst(c.parent!.name.count + 1))
                h.link(HTML.path("_admin", "db", c.name), label, class: c === db ? "current" : nil)
            }
            h.raw("</p>")
        }
        h.raw("<form id=\"filter\" method=\"get\" action=\"\(HTML.escape(base))\"><label>ID prefix <input type=\"search\" name=\"prefix\" value=\"")
        h.text(prefix ?? "")
        h.raw("\"></label> <label><input type=\"checkbox\" name=\"conflicts\" value=\"1\"\(onlyConflicts ? " checked" : "")> only conflicts</label>")
        h.raw(" <label><input type=\"checkbox\" name=\"deleted\" value=\"1\"\(onlyDeleted ? " checked" : "")> only deleted</label> <button type=\"submit\">Show</button></form>")
        // The live list: admin.js opens the feed named here and asks for each changed row.
        let live = after == nil && !onlyConflicts && !onlyDeleted
        let since = try database.lastSequence
        h.raw("<p id=\"live-status\" class=\"status\">\(live ? "live updates: connecting…" : "live updates: on the first unfiltered page")</p>")
        h.raw("<table id=\"documents\" class=\"documents\"")
        if live {
            let events = HTML.path(db.name, "_changes") + "?feed=eventsource&heartbeat=10000&since=\(since)"
            h.raw(" data-events=\"\(HTML.escape(events))\" data-rows=\"\(HTML.escape(base + "/row/"))\"")
            if let prefix { h.raw(" data-prefix=\"\(HTML.escape(prefix))\"") }
        }
        h.raw("><thead><tr><th>ID</th><th>Revision</th><th>Deleted</th><th>Conflicts</th><th>Channels</th><th>Size</th><th>Sequence</th></tr></thead><tbody>")
        for doc in docs { try row(&h, db, doc) }
        h.raw("</tbody></table>")
        if docs.isEmpty { h.raw("<p class=\"empty\">No documents\(scanned > 0 ? " in the \(scanned) read" : "").</p>") }
        if more, let lastConsidered {
            let next = base + HTML.query([("prefix", prefix), ("conflicts", onlyConflicts ? "1" : nil),
                                          ("deleted", onlyDeleted ? "1" : nil), ("after", lastConsidered)])
            h.raw("<p class=\"paging\">")
            h.link(next, docs.count == Self.pageSize ? "Next page →" : "Read on →", class: "next")
            h.raw("</p>")
        }
        if after != nil { h.raw("<p class=\"paging\">"); h.link(base + HTML.query([("prefix", prefix)]), "← First page"); h.raw("</p>") }
        return page(title: db.name, crumbs: [(db.name, nil)], body: h.output)
    }

    /// One row of the document list (also what the live list fetches for a changed document).
    private func row(_ h: inout HTML, _ db: ServedDatabase, _ doc: Document) throws {
        let database = db.database
        let base = HTML.path("_admin", "db", db.name)
        let conflicts = try doc.isDeleted ? 0 : conflictCount(database, id: doc.id)
        let channels = try database.routing(ofDocumentWithID: doc.id, grants: false)?.current.channels.sorted() ?? []
        h.raw("<tr data-id=\"\(HTML.escape(doc.id))\"\(doc.isDeleted ? " class=\"deleted\"" : "")><td class=\"id\">")
        h.link(base + "/doc/" + HTML.segment(doc.id), doc.id)
        h.raw("</td><td class=\"rev\">")
        h.text(doc.revisionID ?? "")
        h.raw("</td><td class=\"deleted\">\(doc.isDeleted ? "deleted" : "")</td><td class=\"conflicts num\">\(conflicts)</td><td class=\"channels\">")
        channelLinks(&h, db, channels)
        h.raw("</td><td class=\"size num\">\(HTML.bytes(UInt64(try doc.storedJSON.count)))</td><td class=\"seq num\">\(doc.sequence)</td></tr>")
    }

    /// Undeleted leaves besides the current revision.
    private func conflictCount(_ database: Database, id: String) throws -> Int {
        guard let tree = try database.revisionTree(withID: id), tree.isConflicted else { return 0 }
        return tree.revisions.filter { $0.isLeaf && !$0.isDeleted && $0.revisionID != tree.currentRevisionID }.count
    }

    private func channelLinks(_ h: inout HTML, _ db: ServedDatabase, _ channels: [String]) {
        for (i, c) in channels.enumerated() {
            if i > 0 { h.raw(" ") }
            h.link(HTML.path("_admin", "db", db.name, "channels", c), c, class: "channel")
        }
    }

    /// A table of what a revision grants: channels by principal, roles by user ("No grants." when
    /// it grants nothing).
    /// A routing's grants: channels to users and to roles (shown as `role:` and the role's
    /// name, as the sync function names one), roles to users.
    private func grantsTable(_ h: inout HTML, attributes: String, access: [String: Set<String>], roleAccess: [String: Set<String>],
                             roles: [String: Set<String>]) {
        h.raw("<table \(attributes)><thead><tr><th>Grants</th><th>To</th><th>Channels or roles</th></tr></thead><tbody>")
        if access.isEmpty && roleAccess.isEmpty && roles.isEmpty {
            h.raw("<tr class=\"none\"><td colspan=\"3\" class=\"empty\">No grants.</td></tr>")
        }
        for (kind, grants, prefix) in [("channels", access, ""), ("channels", roleAccess, "role:"), ("roles", roles, "")] {
            for principal in grants.keys.sorted() {
                h.raw("<tr><td>\(kind)</td><td>")
                h.text(prefix + principal)
                h.raw("</td><td>")
                h.text((grants[principal] ?? []).sorted().joined(separator: ", "))
                h.raw("</td></tr>")
            }
        }
        h.raw("</tbody></table>")
    }

    /// `/_admin/db/{db}/row/{id}`: the list row of one document, for the live list.
    private func documentRow(_ db: ServedDatabase, id: String) async throws -> Response {
        var options = AllDocumentsOptions()
        options.startKey = id
        options.endKey = id
        options.includeDeleted = true
        guard let doc = try db.database.allDocuments(options).next(), doc.id == id else {
            return htmlResponse("", status: .notFound)
        }
        var h = HTML()
        try row(&h, db, doc)
        return htmlResponse(h.output)
    }

    /// `/_admin/db/{db}/doc/{id}`: the body, the revision tree, routing, attachments and the
    /// resolution of a conflict.
    private func documentPage(_ call: CouchAPI.Call, _ db: ServedDatabase, id: String) async throws -> Response {
        let database = db.database
        guard let tree = try await database.revisionTree(withID: id),
              let current = try await database.document(withID: id, revisionID: tree.currentRevisionID)
        else { return notFound("No document \(id) in \(db.name).") }
        let base = HTML.path("_admin", "db", db.name)
        let docPath = base + "/doc/" + HTML.segment(id)
        let selected = call.query["rev"].flatMap { r in tree.revisions.contains { $0.revisionID == r } ? r : nil }
        let drawing = RevisionTreeDrawing(tree: tree)
        let leaves = tree.revisions.filter { $0.isLeaf && !$0.isDeleted }
        var h = HTML()
        h.raw("<h1 class=\"doc-id\">")
        h.text(id)
        h.raw("</h1><dl class=\"facts\"><dt>Current revision</dt><dd id=\"current-rev\">")
        h.text(tree.currentRevisionID)
        h.raw("</dd><dt>Sequence</dt><dd>\(current.sequence)</dd><dt>State</dt><dd id=\"state\">")
        h.text(current.isDeleted ? "deleted" : tree.isConflicted ? "in conflict: \(leaves.count) undeleted leaves" : "live")
        h.raw("</dd></dl>")

        h.raw("<section id=\"tree\"><h2>Revision tree</h2><div class=\"tree-scroll\">")
        h.raw(drawing.svg(selected: selected) { rev in docPath + HTML.query([("rev", rev)]) + "#revision" })
        h.raw("</div>")
        h.raw(RevisionTreeDrawing.legend)
        h.raw("</section>")

        if let selected, let info = tree.revisions.first(where: { $0.revisionID == selected }) {
            h.raw("<section id=\"revision\"><h2>Revision ")
            h.text(selected)
            h.raw("</h2>")
            if let node = drawing.nodes.first(where: { $0.info.revisionID == selected }) {
                h.raw("<p class=\"what\">")
                h.text(String(RevisionTreeDrawing.describe(node).dropFirst(2).dropLast()))
                h.raw("</p>")
            }
            if info.hasBody, let doc = try await database.document(withID: id, revisionID: selected) {
                h.raw("<pre id=\"rev-body\" class=\"json\">")
                h.text(try (doc.isDeleted && doc.toDictionary().isEmpty ? ["_deleted": true] : JSONValue.object(doc.toDictionary())).prettyJSONText())
                h.raw("</pre>")
            } else {
                h.raw("<p id=\"rev-body\" class=\"empty\">Its body is not kept: only the revision's place in the history remains.</p>")
            }
            h.raw("</section>")
        }

        if tree.isConflicted {
            h.raw("<section id=\"resolve\"><h2>Resolve the conflict</h2><p>Choose the leaf to keep. The others get a tombstone, written as revisions (they replicate like any change).</p><ul class=\"leaves\">")
            for leaf in leaves {
                h.raw("<li><form class=\"resolve\" method=\"post\" action=\"\(HTML.escape(docPath + "/resolve"))\">")
                h.raw("<input type=\"hidden\" name=\"token\" value=\"\(HTML.escape(server.adminFormToken))\">")
                h.raw("<input type=\"hidden\" name=\"winner\" value=\"\(HTML.escape(leaf.revisionID))\">")
                h.raw("<code>")
                h.text(leaf.revisionID)
                h.raw("</code> ")
                if leaf.revisionID == tree.currentRevisionID { h.raw("<span class=\"badge\">current winner</span> ") }
                h.raw("<button type=\"submit\" data-rev=\"\(HTML.escape(leaf.revisionID))\">Keep this one</button> ")
                h.link(docPath + HTML.query([("rev", leaf.revisionID)]) + "#revision", "view")
                h.raw("</form></li>")
            }
            h.raw("</ul></section>")
        }

        h.raw("<section id=\"body\"><h2>Current body</h2><pre id=\"current-body\" class=\"json\">")
        h.text(try JSONValue.object(current.toDictionary()).prettyJSONText())
        h.raw("</pre></section>")

        let routing = try database.routing(ofDocumentWithID: id)
        h.raw("<section id=\"routing\"><h2>Channels and access</h2><p id=\"channels\">Channels: ")
        let channels = routing?.current.channels.sorted() ?? []
        if channels.isEmpty { h.raw("<span class=\"empty\">none</span>") } else { channelLinks(&h, db, channels) }
        h.raw("</p>")
        grantsTable(&h, attributes: #"id="access""#, access: routing?.current.access ?? [:], roleAccess: routing?.current.roleAccess ?? [:],
                    roles: routing?.current.roles ?? [:])
        h.raw("</section>")

        h.raw("<section id=\"attachments-section\"><h2>Attachments</h2>")
        if case .object(let attachments)? = current.value(forKey: "_attachments"), !attachments.isEmpty {
            h.raw("<table id=\"attachments\"><thead><tr><th>Name</th><th>Type</th><th>Size</th><th></th></tr></thead><tbody>")
            for name in attachments.keys.sorted() {
                let meta = attachments[name]?.objectValue ?? [:]
                h.raw("<tr><td class=\"name\">")
                h.text(name)
                h.raw("</td><td class=\"type\">")
                h.text(meta["content_type"]?.stringValue ?? "application/octet-stream")
                h.raw("</td><td class=\"size num\">")
                h.text(meta["length"]?.int64Value.map { HTML.bytes(UInt64(max($0, 0))) } ?? "")
                h.raw("</td><td>")
                h.link(HTML.path(db.name, id, name), "download")
                h.raw("</td></tr>")
            }
            h.raw("</tbody></table>")
        } else {
            h.raw("<p class=\"empty\">None.</p>")
        }
        h.raw("</section>")
        return page(title: id, crumbs: [(db.name, base), (id, nil)], body: h.output)
    }

    /// POST `/_admin/db/{db}/doc/{id}/resolve`: keeps the chosen leaf (the library's resolution:
    /// a tombstone on every other undeleted leaf), then back to the document.
    private func resolve(_ call: inout CouchAPI.Call, _ db: ServedDatabase, id: String) async throws -> Response {
        let form = try await checkedForm(&call)
        guard let winner = form["winner"], !winner.isEmpty else { throw CouchError.badRequest("choose the leaf to keep") }
        _ = try await db.write(as: .admin) { database in
            try database.resolveConflict(withID: id, winningRevisionID: winner)
        }
        let location = HTML.path("_admin", "db", db.name, "doc", id)
        return Response(status: .seeOther, headers: [.location: location, .contentLength: "0"])
    }

    /// `/_admin/db/{db}/users`: users and roles with the channels they read, a page of
    /// ``usersPageSize`` users (after `?after=NAME`) at a time: a database may have 100,000.
    private func usersPage(_ call: CouchAPI.Call, _ db: ServedDatabase) throws -> Response {
        let after = call.query["after"]
        let base = HTML.path("_admin", "db", db.name)
        var h = HTML()
        h.raw("<h1>Users and roles</h1><nav class=\"tabs\">")
        h.link(base, "Documents")
        h.link(base + "/users", "Users and roles", class: "current")
        h.link(base + "/sync", "Sync function")
        h.link(base + "/query", "Queries")
        h.raw("</nav><h2>Users</h2><table id=\"users\"><thead><tr><th>User</th><th>State</th><th>Admin channels</th><th>Roles</th><th>Reads (computed)</th></tr></thead><tbody>")
        let names = try db.principals.userNames()
        let start = after.map { a in names.firstIndex { $0 > a } ?? names.endIndex } ?? names.startIndex
        let shown = names[start...].prefix(Self.usersPageSize)
        for name in shown {
            guard let user = try db.principals.user(named: name) else { continue }
            let access = try db.access(for: name)
            h.raw("<tr data-user=\"\(HTML.escape(name))\"><td class=\"name\">")
            h.text(name)
            h.raw("</td><td>\(user.disabled ? "disabled" : "enabled")</td><td class=\"admin-channels\">")
            channelLinks(&h, db, user.adminChannels.sorted())
            h.raw("</td><td class=\"roles\">")
            h.text(access.roles.keys.sorted().joined(separator: ", "))
            h.raw("</td><td class=\"channels\">")
            channelLinks(&h, db, access.channelNames)
            h.raw("</td></tr>")
        }
        h.raw("</tbody></table>")
        h.raw("<p class=\"paging\">Users \(names.isEmpty ? 0 : start + 1)–\(start + shown.count) of \(names.count)")
        if let last = shown.last, start + shown.count < names.count {
            h.raw(" ")
            h.link(base + "/users" + HTML.query([("after", last)]), "Next page →", class: "next")
        }
        if after != nil { h.raw(" "); h.link(base + "/users", "← First page") }
        h.raw("</p><h2>Roles</h2><table id=\"roles\"><thead><tr><th>Role</th><th>Admin channels</th></tr></thead><tbody>")
        for name in try db.principals.roleNames().prefix(Self.usersPageSize) {
            guard let role = try db.principals.role(named: name) else { continue }
            h.raw("<tr data-role=\"\(HTML.escape(name))\"><td class=\"name\">")
            h.text(name)
            h.raw("</td><td class=\"channels\">")
            channelLinks(&h, db, role.adminChannels.sorted())
            h.raw("</td></tr>")
        }
        h.raw("</tbody></table>")
        return page(title: "Users — \(db.name)", crumbs: [(db.name, base), ("users", nil)], body: h.output)
    }

    /// `/_admin/db/{db}/channels/{name}`: the channel's log, oldest first, a page at a time.
    private func channelPage(_ call: CouchAPI.Call, _ db: ServedDatabase, channel: String) throws -> Response {
        let after = try call.query["after"].map { s -> UInt64 in
            guard let v = UInt64(s) else { throw CouchError.badRequest("after must be a sequence") }
            return v
        } ?? 0
        let base = HTML.path("_admin", "db", db.name)
        let entries = try db.database.channelChanges([ChannelQuery(channel: channel, after: after, limit: Self.pageSize + 1)])[0]
        var h = HTML()
        h.raw("<h1>Channel <span class=\"channel-name\">")
        h.text(channel)
        h.raw("</span></h1><table id=\"channel-docs\"><thead><tr><th>Sequence</th><th>ID</th><th>Revision</th><th>State</th></tr></thead><tbody>")
        for e in entries.prefix(Self.pageSize) {
            h.raw("<tr data-id=\"\(HTML.escape(e.documentID))\"><td class=\"seq num\">\(e.sequence)</td><td class=\"id\">")
            h.link(base + "/doc/" + HTML.segment(e.documentID), e.documentID)
            h.raw("</td><td class=\"rev\">")
            h.text(e.revisionID)
            h.raw("</td><td>\(e.isRemoved ? "left the channel" : e.isDeleted ? "deleted" : "")</td></tr>")
        }
        h.raw("</tbody></table>")
        if entries.isEmpty { h.raw("<p class=\"empty\">No documents.</p>") }
        if entries.count > Self.pageSize, let last = entries.prefix(Self.pageSize).last {
            h.raw("<p class=\"paging\">")
            h.link(base + "/channels/" + HTML.segment(channel) + "?after=\(last.sequence)", "Next page →")
            h.raw("</p>")
        }
        return page(title: "Channel \(channel)", crumbs: [(db.name, base), ("channel " + channel, nil)], body: h.output)
    }

    /// `/_admin/db/{db}/sync`: the configured sync function, and what a function (that one, or
    /// one edited here) gives a chosen document, without saving anything.
    private func syncPage(_ call: inout CouchAPI.Call, _ db: ServedDatabase) async throws -> Response {
        let configured = db.config.sync ?? SyncFunction.defaultSource
        var source = configured
        var docID = ""
        var result: HTML?
        if call.request.method == .post {
            let form = try await checkedForm(&call)
            source = form["source"] ?? configured
            docID = form["doc"] ?? ""
            result = try await preview(db, source: source, documentID: docID)
        }
        let base = HTML.path("_admin", "db", db.name)
        var h = HTML()
        h.raw("<h1>Sync function</h1><nav class=\"tabs\">")
        h.link(base, "Documents")
        h.link(base + "/users", "Users and roles")
        h.link(base + "/sync", "Sync function", class: "current")
        h.link(base + "/query", "Queries")
        h.raw("</nav><h2>Configured</h2><pre id=\"sync-source\" class=\"code\">")
        h.text(configured)
        h.raw("</pre><h2>Preview</h2><p>Runs the function below on a document's current revision (as an admin writes it; the parent revision as <code>oldDoc</code> when its body is kept). Nothing is saved.</p>")
        h.raw("<form id=\"preview\" method=\"post\" action=\"\(HTML.escape(base + "/sync"))\">")
        h.raw("<input type=\"hidden\" name=\"token\" value=\"\(HTML.escape(server.adminFormToken))\">")
        h.raw("<label>Document ID <input type=\"text\" name=\"doc\" required value=\"")
        h.text(docID)
        h.raw("\"></label><label class=\"block\">Function<textarea name=\"source\" rows=\"12\" spellcheck=\"false\">")
        h.text(source)
        h.raw("</textarea></label><button type=\"submit\">Preview</button></form>")
        if let result { h.raw(result.output) }
        return page(title: "Sync function — \(db.name)", crumbs: [(db.name, base), ("sync function", nil)], body: h.output)
    }

    /// The database's Mango indexes and views with their size and state, and a Mango query run
    /// with its `_explain`: what `_find` would answer the admin port.
    private func queryPage(_ call: inout CouchAPI.Call, _ db: ServedDatabase) async throws -> Response {
        var text = #"{"selector": {}, "limit": 20}"#
        var result: HTML?
        if call.request.method == .post {
            let form = try await checkedForm(&call)
            text = form["query"] ?? text
            result = try await runQuery(db, text)
        }
        let base = HTML.path("_admin", "db", db.name)
        var h = HTML()
        h.raw("<h1>Queries</h1><nav class=\"tabs\">")
        h.link(base, "Documents")
        h.link(base + "/users", "Users and roles")
        h.link(base + "/sync", "Sync function")
        h.link(base + "/query", "Queries", class: "current")
        h.raw("</nav><h2>Indexes</h2><table id=\"indexes\"><thead><tr><th>Design document</th><th>Name</th><th>Fields</th><th>Partial selector</th><th class=\"num\">Entries</th><th>State</th></tr></thead><tbody>")
        let indexes = try db.mangoIndexes()
        for index in indexes {
            h.raw("<tr><td>")
            h.text(index.ddoc)
            h.raw("</td><td>")
            h.text(index.name)
            h.raw("</td><td>")
            h.text(index.fields.map { $0.field + ($0.descending ? " desc" : "") }.joined(separator: ", "))
            h.raw("</td><td>")
            h.text((try? index.partial?.jsonText()) ?? "")
            // The library index behind it: absent until the design document's sync has made it.
            if let info = try db.database.indexInfo(forName: index.libraryName) {
                h.raw("</td><td class=\"entries num\">\(info.entryCount)</td><td class=\"state\">\(info.isReady ? "ready" : "building")</td></tr>")
            } else {
                h.raw("</td><td class=\"entries num\">—</td><td class=\"state\">not built</td></tr>")
            }
        }
        if indexes.isEmpty { h.raw("<tr><td colspan=\"6\" class=\"empty\">No Mango index: <code>POST /{db}/_index</code> makes one.</td></tr>") }
        h.raw("</tbody></table>")
        try viewTable(&h, db)
        h.raw("<h2>Mango query</h2>")
        h.raw("<form id=\"query\" method=\"post\" action=\"\(HTML.escape(base + "/query"))\">")
        h.raw("<input type=\"hidden\" name=\"token\" value=\"\(HTML.escape(server.adminFormToken))\">")
        h.raw("<label class=\"block\">What <code>_find</code> takes<textarea name=\"query\" rows=\"8\" spellcheck=\"false\">")
        h.text(text)
        h.raw("</textarea></label><button type=\"submit\">Run</button></form>")
        if let result { h.raw(result.output) }
        return page(title: "Queries — \(db.name)", crumbs: [(db.name, base), ("queries", nil)], body: h.output)
    }

    /// The views of every design document, with the rows, state and map errors of each one's
    /// library index: what `_design/{ddoc}/_info` tells, for all design documents at once.
    private func viewTable(_ h: inout HTML, _ db: ServedDatabase) throws {
        h.raw("<h2>Views</h2><table id=\"views\"><thead><tr><th>Design document</th><th>View</th><th>Reduce</th><th class=\"num\">Rows</th><th>State</th><th class=\"num\">Map errors</th></tr></thead><tbody>")
        let views = try db.viewDefinitions()
        for view in views {
            let info = try db.database.mapIndexInfo(forName: view.libraryName)
            // Rows made by an older map function are not the view's: it is being rebuilt.
            let ready = info.map { $0.version == view.version && $0.isReady } ?? false
            let errors = db.viewErrors.withLock { $0[view.libraryName] ?? 0 }
            h.raw("<tr><td>")
            h.text(view.ddoc)
            h.raw("</td><td>")
            h.text(view.name)
            h.raw("</td><td class=\"reduce\">")
            h.text(Self.reduceLabel(view.reduce))
            h.raw("</td><td class=\"rows num\">\(info?.rowCount ?? 0)</td><td class=\"state\">\(ready ? "ready" : "building")</td>")
            h.raw("<td class=\"errors num\">\(errors)</td></tr>")
        }
        if views.isEmpty { h.raw("<tr><td colspan=\"6\" class=\"empty\">No view: a design document's <code>views</code> define them.</td></tr>") }
        h.raw("</tbody></table>")
    }

    /// A view's reduce in a table cell: a built-in by its name, a JavaScript function (often
    /// long) by its language only.
    private static func reduceLabel(_ reduce: String?) -> String {
        guard let reduce else { return "—" }
        let trimmed = reduce.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.hasPrefix("_") ? trimmed : "JavaScript"
    }

    /// Runs a Mango query as the admin port's `_find` and `_explain` would.
    private func runQuery(_ db: ServedDatabase, _ text: String) async throws -> HTML {
        var h = HTML()
        h.raw("<section id=\"query-result\">")
        defer { h.raw("</section>") }
        let api = CouchAPI(server: server, isAdmin: true)
        do {
            guard case .object(let body) = try JSONValue(parsing: text) else { throw CouchError.badRequest("a Mango query is a JSON object") }
            let request = try CouchAPI.FindRequest(body)
            let query = try api.libraryQuery(db, request, choice: try api.indexChoice(db, request), readsAll: true)
            h.raw("<h3>Plan</h3><pre id=\"query-plan\" class=\"code\">")
            h.text(try query.explain())
            h.raw("</pre><h3>Documents</h3><table id=\"query-docs\"><thead><tr><th>ID</th><th>Document</th></tr></thead><tbody>")
            var count = 0
            for result in try query.execute() {
                guard let id = result.string(forKey: "_id") else { continue }
                count += 1
                h.raw("<tr><td>")
                h.link(HTML.path("_admin", "db", db.name, "doc", id), id)
                h.raw("</td><td><code>")
                var doc = result.dictionary(forKey: "_") ?? [:]
                if let fields = request.fields { doc = CouchAPI.project(.object(doc), fields).objectValue ?? [:] }
                h.text((try? JSONValue.object(doc).jsonText()) ?? "")
                h.raw("</code></td></tr>")
            }
            if count == 0 { h.raw("<tr><td colspan=\"2\" class=\"empty\">No match.</td></tr>") }
            h.raw("</tbody></table>")
        } catch {
            let e = CouchError(answering: error)
            h.raw("<p class=\"error\" id=\"query-error\">")
            h.text(e.reason)
            h.raw("</p>")
        }
        return h
    }

    /// Runs `source` on a document, as the sync function would, and shows what it gave.
    private func preview(_ db: ServedDatabase, source: String, documentID: String) async throws -> HTML {
        var h = HTML()
        h.raw("<section id=\"preview-result\">")
        defer { h.raw("</section>") }
        let database = db.database
        guard let tree = try await database.revisionTree(withID: documentID),
              let doc = try await database.document(withID: documentID, revisionID: tree.currentRevisionID)
        else {
            h.raw("<p class=\"error\">No document ")
            h.text(documentID)
            h.raw(".</p>")
            return h
        }
        var oldDoc: String?
        if let parent = tree.revisions.first(where: { $0.revisionID == tree.currentRevisionID })?.parentRevisionID,
           tree.revisions.first(where: { $0.revisionID == parent })?.hasBody == true,
           let p = try await database.document(withID: documentID, revisionID: parent) {
            oldDoc = try RoutingState.json(p)
        }
        let outcome: SyncOutcome
        do {
            let function = try SyncFunction(source: source, engine: server.scripts)
            outcome = try function.run(doc: try RoutingState.json(doc), oldDoc: oldDoc, user: nil)
        } catch {
            h.raw("<p class=\"error\" id=\"preview-error\">")
            h.text((error as? ScriptError)?.message ?? "\(error)")
            h.raw("</p>")
            return h
        }
        h.raw("<h3>Channels</h3><ul class=\"channels\">")
        for c in outcome.channels.sorted() { h.element("li", c) }
        if outcome.channels.isEmpty { h.raw("<li class=\"empty\">none</li>") }
        h.raw("</ul><h3>Grants</h3>")
        grantsTable(&h, attributes: #"class="grants""#, access: outcome.access, roleAccess: outcome.roleAccess, roles: outcome.roles)
        if let expiry = outcome.expiry { h.raw("<p class=\"expiry\">Expiry: "); h.text("\(expiry)"); h.raw("</p>") }
        return h
    }

    // MARK: - Forms

    /// The fields of a POSTed form, after checking that it came from the admin page itself: the
    /// server's form token (the admin port refused any request another site made before this).
    private func checkedForm(_ call: inout CouchAPI.Call) async throws -> [String: String] {
        let body = try await call.collectBody(upTo: 1 << 20)
        let text = String(decoding: body.readableBytesView, as: UTF8.self)
        let form = try CouchAPI.queryParameters(text)
        guard let token = form["token"], Self.sameBytes(token, server.adminFormToken) else {
            throw CouchError(.forbidden, "forbidden", "the form's token is missing or wrong: reload the page")
        }
        return form
    }

    /// Compares without stopping at the first difference.
    private static func sameBytes(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var d: UInt8 = 0
        for i in x.indices { d |= x[i] ^ y[i] }
        return d == 0
    }

    // MARK: - Responses

    private func asset(_ name: String) throws -> Response {
        let (type, text): (String, String)
        switch name {
        case "admin.css": (type, text) = ("text/css; charset=utf-8", AdminAssets.css)
        case "admin.js": (type, text) = ("text/javascript; charset=utf-8", AdminAssets.javaScript)
        case "icon.svg": (type, text) = ("image/svg+xml", AdminAssets.icon)
        default: return notFound("No such asset.")
        }
        return Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache", .xContentTypeOptions: "nosniff"],
                         body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    private func notFound(_ message: String) -> Response {
        var h = HTML()
        h.raw("<h1>Not found</h1><p class=\"error\">")
        h.text(message)
        h.raw("</p>")
        var r = page(title: "Not found", crumbs: [], body: h.output)
        r.status = .notFound
        return r
    }

    /// A whole page: the header with its breadcrumbs, then `body` (already escaped markup).
    private func page(title: String, crumbs: [(String, String?)], body: String) -> Response {
        var h = HTML()
        h.raw("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>")
        h.text(title)
        h.raw(" — Settee admin</title><link rel=\"icon\" href=\"/_admin/assets/icon.svg\"><link rel=\"stylesheet\" href=\"/_admin/assets/admin.css\"><script src=\"/_admin/assets/admin.js\" defer></script></head><body><header><a class=\"home\" href=\"/_admin/\">Settee admin</a>")
        for (text, href) in crumbs {
            h.raw(" <span class=\"sep\">/</span> ")
            if let href { h.link(href, text) } else { h.element("span", text, class: "here") }
        }
        h.raw("</header><main>")
        h.raw(body)
        h.raw("</main></body></html>")
        return htmlResponse(h.output)
    }

    private func htmlResponse(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: Self.headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// Nothing but the server's own files may load or run; the page is never framed or cached.
    /// The referrer goes to the page's own origin only (`no-referrer` would make the browser send
    /// `Origin: null` with the page's own forms, which the admin port refuses as it refuses
    /// another site's).
    static let headers: HTTPFields = [
        .contentType: "text/html; charset=utf-8",
        .cacheControl: "no-store",
        HTTPField.Name("Content-Security-Policy")!: "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        .xContentTypeOptions: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "same-origin",
    ]
}
