import Foundation
import HTTPTypes
import Hummingbird
import Settee
import SetteeHTTP

/// An error answered as CouchDB answers it: a status and `{"error": name, "reason": text}`.
struct CouchError: Error, Sendable {
    var status: HTTPResponse.Status
    var error: String
    var reason: String
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ error: String, _ reason: String) {
        self.status = status
        self.error = error
        self.reason = reason
    }

    static func badRequest(_ reason: String) -> CouchError { CouchError(.badRequest, "bad_request", reason) }
    static func notFound(_ reason: String = "missing") -> CouchError { CouchError(.notFound, "not_found", reason) }
    /// A member a request body may not have, as CouchDB's Mango says it.
    static func invalidKey(_ key: String) -> CouchError { CouchError(.badRequest, "invalid_key", "Invalid key \(key) for this request.") }
    static let conflict = CouchError(.conflict, "conflict", "Document update conflict.")
    static func forbidden(_ reason: String) -> CouchError { CouchError(.forbidden, "forbidden", reason) }
    /// CouchDB's answer to a database name it would not create.
    static func illegalDatabaseName(_ name: String) -> CouchError {
        CouchError(.badRequest, "illegal_database_name", "Name: '\(name)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
    }

    static func methodNotAllowed(_ allowed: String) -> CouchError {
        var e = CouchError(.methodNotAllowed, "method_not_allowed", "Only \(allowed) allowed")
        e.headers[.allow] = allowed
        return e
    }
    static func unauthorized(realm: String) -> CouchError {
        var e = CouchError(.unauthorized, "unauthorized", "Login required")
        e.headers[.wwwAuthenticate] = "Basic realm=\"\(realm)\""
        return e
    }
    static func tooLarge(_ reason: String) -> CouchError { CouchError(.contentTooLarge, "too_large", reason) }
    static func unsupportedMediaType(_ reason: String) -> CouchError {
        CouchError(.unsupportedMediaType, "bad_content_type", reason)
    }

    /// The answer for a library error: its code decides the status, as CouchDB's would.
    init(_ error: SetteeError) {
        switch error.code {
        case .notFound: self.init(.notFound, "not_found", error.message.isEmpty ? "missing" : error.message)
        case .conflict: self.init(.conflict, "conflict", "Document update conflict.")
        case .forbidden: self.init(.forbidden, "forbidden", error.message)
        case .unauthorized: self.init(.unauthorized, "unauthorized", error.message)
        case .invalidParameter: self.init(.badRequest, "bad_request", error.message)
        case .invalidJSON: self.init(.badRequest, "bad_request", "invalid UTF-8 JSON: \(error.message)")
        case .tooLarge: self.init(.contentTooLarge, "too_large", error.message)
        case .notOpen: self.init(.serviceUnavailable, "service_unavailable", "the database is closed")
        case .busy: self.init(.serviceUnavailable, "service_unavailable", error.message)
        case .cancelled: self.init(.serviceUnavailable, "service_unavailable", "cancelled")
        case .diskFull:
            // Reads go on; writes are taken again by themselves once space is freed.
            self.init(HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"), "insufficient_storage", "The server's disk is full: nothing was written. Try again later.")
            headers[.retryAfter] = "60"
        case .io:
            // What failed and why is the server's log's business, not the client's.
            self.init(.internalServerError, "internal_server_error", "The server could not read or write its files.")
        default: self.init(.internalServerError, "internal_server_error", "\(error.code): \(error.message)")
        }
    }

    /// The answer for any error a handler meets where one item of a response fails alone: a
    /// `CouchError` as it is, a library or wire error by its code; anything else is a 500.
    init(answering error: any Error) {
        switch error {
        case let e as CouchError: self = e
        case let e as SetteeError: self.init(e)
        case let e as WireError: self.init(HTTPResponse.Status(code: e.status), e.error, e.reason)
        default: self.init(.internalServerError, "internal_server_error", "\(type(of: error))")
        }
    }

    var response: Response {
        var fields = headers
        fields[.contentType] = "application/json"
        // Two strings always write as JSON; the fallback only keeps the type checker honest.
        let body = (try? JSONValue.object(["error": .string(error), "reason": .string(reason)]).jsonBytes())
            ?? Array(#"{"error":"internal_server_error","reason":"unwritable error"}"#.utf8)
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body + [0x0A])))
    }
}

/// A JSON response; a value JSON cannot hold (never built by the server) is an error, answered 500.
func jsonResponse(_ value: JSONValue, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) throws -> Response {
    var fields = headers
    fields[.contentType] = "application/json"
    return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try value.responseBytes() + [0x0A])))
}

extension JSONValue {
    /// This value as JSON in a response: with room, above the deepest document a database can
    /// hold, for the levels a response wraps around documents (`results`, a row, `doc`), so that
    /// a document stored at the parser's limit never fails a whole answer.
    func responseBytes() throws(SetteeError) -> [UInt8] { try jsonBytes(maxDepth: JSONValue.maxParsedDepth + 8) }
}
