/// Why a JavaScript function (the sync function, a design document's filter or
/// `validate_doc_update`) failed to compile or to run.
///
/// ``kind`` is what callers branch on (a `.forbidden` rejection becomes a 403, an `.unauthorized`
/// one a 401, the rest 500s); ``message`` is for people: it names the function and, where
/// JavaScriptCore reported one, the line in the function's own source.
///
/// A value type; safe to share between threads.
struct ScriptError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        /// The source does not parse, or is not a function expression.
        case syntax
        /// The function ran longer than the engine's time limit and was stopped.
        case timeout
        /// The server's memory grew past the engine's limit during the call: the function was
        /// stopped.
        case memory
        /// The function threw something other than a rejection: an `Error`'s text (`"TypeError: …"`)
        /// or the thrown value as a string.
        case exception(String)
        /// The function threw `{forbidden: message}`, or a `require…` helper failed (CouchDB and
        /// Sync Gateway's convention for "this write is not allowed").
        case forbidden(String)
        /// The function threw `{unauthorized: message}` (the caller should authenticate).
        case unauthorized(String)
        /// The function ran, but what it produced cannot be used (a channel name that is not a
        /// non-empty string, an expiry that is not a time), or an argument handed to it was not JSON.
        case badResult(String)
        /// JavaScriptCore could not make a virtual machine to run the function in (out of memory):
        /// the call fails, the server goes on.
        case unavailable
    }

    var kind: Kind
    /// For a rejection the function's own message; otherwise the function's name, the line when
    /// known, and what went wrong: `sync function, line 3: SyntaxError: Unexpected token '}'`.
    var message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    var description: String { message }
}
