import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import SetteeHTTP
@_spi(Replication) @_spi(Server) import Settee

/// CouchDB's rendering design functions, which CouchDB 3.4 still serves (deprecated, not
/// removed) and its client libraries test: `_show`, `_list` and `_update` under a design
/// document, run in JavaScriptCore with the limits of every design function (time, memory, a
/// realm of their own). A user reaches them as it reaches views: a show sees a document only
/// when the user may read it, a list the view rows the user may read, and an update's document
/// is saved as that user's write (the sync function and `validate_doc_update` run). What they
/// answer is never active content on the server's origin (`Content-Security-Policy: sandbox`).
extension CouchAPI {
    /// `…/_show/{func}[/{docid}]`, `…/_list/{func}[/{ddoc}]/{view}`, `…/_update/{func}[/{docid}]`:
    /// `rest` is what follows the design document's ID.
    func render(_ call: inout Call, _ db: ServedDatabase, ddoc: String, rest: [String]) async throws -> Response {
        let kind = rest[0]
        guard rest.count >= 2 else { throw CouchError.notFound("missing function name") }
        let function = rest[1]
        let method = call.request.method
        switch kind {
        case "_show":
            try allow(method, [.get, .head, .post])
            let docID = rest.count > 2 ? rest.dropFirst(2).joined(separator: "/") : nil
            return try await show(&call, db, ddoc: ddoc, function: function, docID: docID)
        case "_list":
            try allow(method, [.get, .head, .post])
            guard rest.count == 3 || rest.count == 4 else { throw CouchError.notFound("missing view name") }
            let viewDDoc = rest.count == 4 ? Self.designID(rest[2]) : ddoc
            return try await list(&call, db, ddoc: ddoc, function: function, viewDDoc: viewDDoc, view: rest[rest.count - 1])
        default:
            guard method == .post || method == .put else {
                // CouchDB's words, with the `Allow` header every 405 here carries.
                var e = CouchError.methodNotAllowed("POST,PUT")
                e.reason = "Update functions do not allow \(method.rawValue)"
                throw e
            }
            let docID = rest.count > 2 ? rest.dropFirst(2).joined(separator: "/") : nil
            return try await update(&call, db, ddoc: ddoc, function: function, docID: docID)
        }
    }

    /// The design document and its function `function` of `member` (`shows`, `lists`,
    /// `updates`), compiled (once per source).
    private func renderFunction(_ db: ServedDatabase, ddoc: String, member: String, function: String) async throws -> (RenderFunction, JSONValue) {
        guard let design = try await db.database.document(withID: ddoc), !design.isDeleted, let rev = design.revisionID else {
            throw CouchError.notFound("missing")
        }
        var props = design.toDictionary()
        guard case .string(let source)? = props[member]?.objectValue?[function] else {
            throw CouchError.notFound("missing function \(function) in \(member) of \(ddoc)")
        }
        let key = member + "\u{0}" + source
        if let known = db.renderFunctions.withLock({ $0[key] }) {
            props["_id"] = .string(ddoc)
            props["_rev"] = .string(rev)
            return (known, .object(props))
        }
        let compiled: RenderFunction
        do {
            compiled = try RenderFunction(name: "\(ddoc) \(member) \(function)", source: source, engine: server.scripts)
        } catch {
            throw CouchError(.internalServerError, "compilation_error", error.message)
        }
        // A bounded cache: design documents rewritten again and again leave no trail.
        db.renderFunctions.withLock { cache in
            if cache.count >= Self.maxCachedRenderFunctions { cache.removeAll() }
            cache[key] = compiled
        }
        props["_id"] = .string(ddoc)
        props["_rev"] = .string(rev)
        return (compiled, .object(props))
    }

    static let updateNewRev = HTTPField.Name("X-Couch-Update-NewRev")!
    static let couchID = HTTPField.Name("X-Couch-Id")!

    /// Compiled rendering functions kept per database.
    static let maxCachedRenderFunctions = 256

    /// CouchDB's request object: what the function sees of the request. Credentials
    /// (`Authorization`, `Cookie`) are left out: a design function has no use for them.
    private func requestObject(_ call: Call, _ db: ServedDatabase, id: String?, body: [UInt8]?) throws -> JSONValue {
        var headers: [String: JSONValue] = [:]
        for field in call.request.headers where field.name != .authorization && field.name != .cookie {
            headers[field.name.rawName] = .string(field.value)
        }
        var form: [String: JSONValue] = [:]
        if let body, (try Self.contentType(call.request.headers) ?? "").lowercased().hasPrefix("application/x-www-form-urlencoded") {
            for (k, v) in try Self.queryParameters(String(decoding: body, as: UTF8.self)) { form[k] = .string(v) }
        }
        let writer: Writer? = try call.principal.name.map { n in
            let a = try db.access(for: n)
            return Writer(name: n, channels: Set(a.channels.keys), roles: Set(a.roles.keys))
        }
        let path = call.path.map(JSONValue.string)
        return [
            "info": ["db_name": .string(db.name), "update_seq": .int(Int64(try db.database.lastSequence))],
            "id": id.map(JSONValue.string) ?? .null,
            "uuid": .string(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")),
            "method": .string(call.request.method.rawValue),
            "requested_path": .array(path), "path": .array(path),
            "raw_path": .string(call.request.uri.description),
            "query": .object(call.query.mapValues(JSONValue.string)),
            "headers": .object(headers),
            "body": body.map { .string(String(decoding: $0, as: UTF8.self)) } ?? "undefined",
            "peer": "127.0.0.1",
            "form": .object(form),
            "cookie": .object([:]),
            "userCtx": RoutingState.userContext(writer, database: db.name),
            "secObj": db.securityObject.json,
        ]
    }

    /// The document a show or an update is given: nil without an ID, and for one that does not
    /// exist, is deleted, or that the user may not read (as one that does not exist).
    private func renderedDocument(_ call: Call, _ db: ServedDatabase, id: String?) async throws -> JSONValue? {
        guard let id else { return nil }
        try checkDocumentID(id, in: db)
        let reader = try Reader(db, call.principal)
        guard try reader.readability(of: id, revision: nil) == .readable,
              let found = try await db.database.document(withID: id), !found.isDeleted else { return nil }
        return try documentJSON(found, db, reader: reader, conflicts: false)
    }

    /// A request's body for a rendering function (none for `GET` and `HEAD`).
    private func renderBody(_ call: inout Call, _ db: ServedDatabase) async throws -> [UInt8]? {
        guard call.request.method != .get && call.request.method != .head else { return nil }
        return Array(try await call.collectBody(upTo: bodyLimit(db)).readableBytesView)
    }

    /// What a function's failure answers: its rejection (403, 401), else 500 `render_error`.
    private static func renderError(_ error: ScriptError) -> CouchError {
        switch error.kind {
        case .forbidden(let m): CouchError.forbidden(m)
        case .unauthorized(let m): CouchError(.unauthorized, "unauthorized", m)
        default: CouchError(.internalServerError, "render_error", error.message)
        }
    }

    /// Runs a show or an update (`shows.{function}`, `updates.{function}`) on the document
    /// `docID` names, with the request's body.
    private func runOnDocument(_ call: inout Call, _ db: ServedDatabase, ddoc: String, mode: RenderFunction.Mode,
                               function: String, docID: String?) async throws -> RenderFunction.Output {
        let (fn, design) = try await renderFunction(db, ddoc: ddoc, member: mode == .show ? "shows" : "updates", function: function)
        let body = try await renderBody(&call, db)
        let doc = try await renderedDocument(call, db, id: docID)
        let req = try requestObject(call, db, id: docID, body: body).jsonText()
        let docText = try doc?.jsonText(), designText = try design.jsonText()
        do {
            return try fn.run(mode: mode, doc: docText, req: req, rows: nil, ddoc: designText)
        } catch {
            // A show that fails on a document that is not there: CouchDB's 404.
            if mode == .show && docID != nil && doc == nil { throw CouchError.notFound("document not found") }
            throw Self.renderError(error)
        }
    }

    // MARK: - _show

    private func show(_ call: inout Call, _ db: ServedDatabase, ddoc: String, function: String, docID: String?) async throws -> Response {
        let output = try await runOnDocument(&call, db, ddoc: ddoc, mode: .show, function: function, docID: docID)
        if let reason = output.notAcceptable { throw CouchError(.notAcceptable, "not_acceptable", reason) }
        var response: JSONValue
        if case .object(let o) = output.result, let base = o["base"], let provided = o["provided"], o.count == 2 {
            // `provides`: the function's own response with the chosen format's body after it.
            var merged = Self.wrapped(base) ?? [:]
            let extra = Self.wrapped(provided)?["body"]?.stringValue ?? ""
            merged["body"] = .string((merged["body"]?.stringValue ?? "") + output.chunks.joined() + extra)
            response = .object(merged)
        } else {
            // As CouchDB: a show that gives nothing (undefined, null, false, 0, "") answers an
            // empty response, not an error.
            let falsy: Bool = switch output.result {
            case .null, .bool(false), .string(""): true
            case .int(let n): n == 0
            case .double(let d): d == 0
            default: false
            }
            guard var merged = falsy ? [:] : Self.wrapped(output.result) else {
                throw CouchError(.internalServerError, "render_error", "undefined response from show function")
            }
            if !output.chunks.isEmpty {
                // `send()` from a show: what it sent comes before the body.
                merged["body"] = .string(output.chunks.joined() + (merged["body"]?.stringValue ?? ""))
            }
            response = .object(merged)
        }
        return try Self.renderResponse(response, type: output.type)
    }

    /// A response value as an object: a string is its body.
    private static func wrapped(_ value: JSONValue) -> [String: JSONValue]? {
        switch value {
        case .string(let s): ["body": .string(s)]
        case .object(let o): o
        default: nil
        }
    }

    // MARK: - _list

    private func list(_ call: inout Call, _ db: ServedDatabase, ddoc: String, function: String, viewDDoc: String, view: String) async throws -> Response {
        let (fn, design) = try await renderFunction(db, ddoc: ddoc, member: "lists", function: function)
        // The body, if any, is the view's options (as a view's `POST`); the function sees it too.
        var rowsCall = call
        let result = try await viewResult(&rowsCall, db, ddoc: viewDDoc, name: view)
        let rows = result["rows"] ?? .array([])
        var head = result
        head["rows"] = nil
        let req = try requestObject(call, db, id: nil, body: nil).jsonText()
        let headText = try JSONValue.object(head).jsonText(), rowsText = try rows.jsonText(), designText = try design.jsonText()
        let output: RenderFunction.Output
        do {
            output = try fn.run(mode: .list, doc: headText, req: req, rows: rowsText, ddoc: designText)
        } catch {
            throw Self.renderError(error)
        }
        if let reason = output.notAcceptable { throw CouchError(.notAcceptable, "not_acceptable", reason) }
        var body = output.chunks.joined()
        if case .string(let tail) = output.result { body += tail }
        var response: [String: JSONValue] = ["body": .string(body)]
        if case .object(let start)? = output.start {
            if let code = start["code"] { response["code"] = code }
            if let headers = start["headers"] { response["headers"] = headers }
        }
        return try Self.renderResponse(.object(response), type: output.type)
    }

    // MARK: - _update

    private func update(_ call: inout Call, _ db: ServedDatabase, ddoc: String, function: String, docID: String?) async throws -> Response {
        let output = try await runOnDocument(&call, db, ddoc: ddoc, mode: .update, function: function, docID: docID)
        guard case .array(let pair) = output.result, pair.count == 2, var response = Self.wrapped(pair[1]) else {
            throw CouchError(.internalServerError, "render_error", "undefined response from update function")
        }
        var extra: HTTPFields = [:]
        var status: HTTPResponse.Status = .ok
        if case .object(var newDoc) = pair[0] {
            // Saved as the caller's own write: the sync function and validate_doc_update decide.
            if newDoc["_id"] == nil, let docID { newDoc["_id"] = .string(docID) }
            guard case .string(let id)? = newDoc["_id"] else {
                throw CouchError.badRequest("Document id must be a string")
            }
            let incoming = try IncomingDocument(ReplicatorDocuments.clientMembers(newDoc, of: db))
            let rev = try await save(incoming, to: db, newEdits: true, as: call.principal)
            extra[Self.updateNewRev] = rev
            extra[Self.couchID] = id
            status = .created
        } else if pair[0] != .null {
            throw CouchError(.internalServerError, "render_error", "an update function returns [document or null, response]")
        }
        if response["code"] == nil { response["code"] = .int(Int64(status.code)) }
        return try Self.renderResponse(.object(response), type: nil, extra: extra)
    }

    // MARK: - The response

    /// CouchDB's rendered response: `code` (default 200), `headers`, and one of `json`
    /// (`application/json`), `base64` (decoded bytes, `application/binary`) or `body` (text,
    /// `text/html; charset=utf-8`), or `provides`' media type. Any other member is a 500, as in
    /// CouchDB. Never active content on the server's origin.
    private static func renderResponse(_ value: JSONValue, type: String?, extra: HTTPFields = [:]) throws -> Response {
        guard case .object(let o) = value else {
            throw CouchError(.internalServerError, "render_error", "undefined response from the function")
        }
        var status = HTTPResponse.Status.ok
        var bytes: [UInt8] = []
        var contentType = type ?? "text/html; charset=utf-8"
        var headers: [(String, String)] = []
        for (key, member) in o.sorted(by: { $0.key < $1.key }) {
            switch (key, member) {
            case ("code", .int(let c)):
                guard c >= 100 && c <= 599 else { throw CouchError(.internalServerError, "render_error", "response code \(c) is not an HTTP status") }
                status = HTTPResponse.Status(code: Int(c))
            case ("json", let json):
                bytes = try json.responseBytes()
                contentType = "application/json"
            case ("base64", .string(let b)):
                guard let data = Data(base64Encoded: b) else { throw CouchError(.internalServerError, "render_error", "base64 is not Base64") }
                bytes = Array(data)
                contentType = type ?? "application/binary"
            case ("body", .string(let text)):
                bytes = Array(text.utf8)
            case ("headers", .object(let h)):
                for (name, v) in h.sorted(by: { $0.key < $1.key }) {
                    guard case .string(let text) = v else { throw CouchError(.internalServerError, "render_error", "header \(name) is not a string") }
                    headers.append((name, text))
                }
            case ("stop", _):
                break
            default:
                throw CouchError(.internalServerError, "render_error", "Invalid data from the function: \(key)")
            }
        }
        var fields = extra
        fields[.contentType] = contentType
        // Headers a function may not set: the framing is the server's, and the page is never
        // active content on the server's origin.
        let reserved: Set<String> = ["content-length", "transfer-encoding", "connection", "content-security-policy", "x-content-type-options"]
        for (name, text) in headers where !reserved.contains(name.lowercased()) {
            guard let fieldName = HTTPField.Name(name), !text.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw CouchError(.internalServerError, "render_error", "header \(name) is not a valid HTTP header")
            }
            fields[fieldName] = text
        }
        Self.sandboxed(&fields)
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
