/// The one error type of the Settee document API.
///
/// Match on ``code`` (or with the `~=` pattern against a code) and read ``message`` for a short
/// explanation. Descriptions never contain document bodies, only identifiers and reasons.
///
/// ```swift
/// do {
///     try database.saveDocument(doc)
/// } catch SetteeError.Code.forbidden {
///     print("a validation function rejected the revision")
/// } catch let error as SetteeError where error.code == .invalidParameter {
///     print(error.message)
/// }
/// ```
///
/// A value type; safe to share between threads.
public struct SetteeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong.
    ///
    /// ```swift
    /// if error.code == .notFound { showEmptyState() }
    /// ```
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// No document (or revision, blob, local document) with that identifier.
        case notFound
        /// The document changed since it was read and the operation refuses to overwrite it.
        case conflict
        /// A validation function rejected the revision; ``SetteeError/message`` is its message.
        case forbidden
        /// An argument is malformed: a document or revision ID, a reserved `_` key, an option.
        case invalidParameter
        /// Text that should be JSON is not, or a JSON value cannot be represented.
        case invalidJSON
        /// A document body or blob exceeds a size limit.
        case tooLarge
        /// The database files are damaged.
        case corrupted
        /// The database is in use: opened by another process, or deleted while open.
        case busy
        /// The database was closed.
        case notOpen
        /// A file operation failed.
        case io
        /// The files were written by a format version this build cannot read.
        case versionMismatch
        /// The operation was cancelled (a compaction whose progress handler returned false, or
        /// one stopped because the database closed).
        case cancelled
    }

    /// What went wrong.
    ///
    /// ```swift
    /// switch error.code { case .conflict: retry(); default: throw error }
    /// ```
    public var code: Code
    /// A short explanation, free of document content (for ``Code/forbidden``, the validation's
    /// own message).
    ///
    /// ```swift
    /// print(error.message)   // "invalid date"
    /// ```
    public var message: String

    /// Makes an error.
    ///
    /// ```swift
    /// throw SetteeError(.forbidden, "only admins may delete")
    /// ```
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A rejection by a validation function, with its message (the 403 of CouchDB).
    ///
    /// ```swift
    /// throw SetteeError.forbidden("missing owner")
    /// ```
    public static func forbidden(_ message: String) -> SetteeError { SetteeError(.forbidden, message) }

    /// The code and message, never document content.
    ///
    /// ```swift
    /// print(error)   // SetteeError.notFound: no document with that ID
    /// ```
    public var description: String { "SetteeError.\(code.rawValue): \(message)" }
}

extension SetteeError.Code {
    /// Lets `catch SetteeError.Code.notFound` match.
    ///
    /// ```swift
    /// do { try db.purgeDocument(withID: "x") } catch SetteeError.Code.notFound { }
    /// ```
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? SetteeError)?.code == code
    }
}
