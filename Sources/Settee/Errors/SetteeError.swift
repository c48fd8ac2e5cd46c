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
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as ``description`` prints it.
        ///
        /// ```swift
        /// print(error.code.rawValue)   // "notFound"
        /// ```
        public let rawValue: String

        /// A code by name; the named constants below are the ones this version throws.
        ///
        /// ```swift
        /// let code = SetteeError.Code(rawValue: "notFound")
        /// ```
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The name.
        ///
        /// ```swift
        /// print(error.code)   // notFound
        /// ```
        public var description: String { rawValue }

        /// No document (or revision, blob, local document) with that identifier.
        ///
        /// ```swift
        /// if error.code == .notFound { … }
        /// ```
        public static let notFound = Code(rawValue: "notFound")
        /// The document changed since it was read and the operation refuses to overwrite it.
        ///
        /// ```swift
        /// if error.code == .conflict { … }
        /// ```
        public static let conflict = Code(rawValue: "conflict")
        /// A validation function rejected the revision; ``SetteeError/message`` is its message.
        ///
        /// ```swift
        /// if error.code == .forbidden { … }
        /// ```
        public static let forbidden = Code(rawValue: "forbidden")
        /// A ``Router`` rejected the revision because the writer is not known well enough
        /// (Sync Gateway's and CouchDB's `{unauthorized: …}`: log in first).
        ///
        /// ```swift
        /// if error.code == .unauthorized { askForCredentials() }
        /// ```
        public static let unauthorized = Code(rawValue: "unauthorized")
        /// An argument is malformed: a document or revision ID, a reserved `_` key, an option.
        ///
        /// ```swift
        /// if error.code == .invalidParameter { … }
        /// ```
        public static let invalidParameter = Code(rawValue: "invalidParameter")
        /// Text that should be JSON is not, or a JSON value cannot be represented.
        ///
        /// ```swift
        /// if error.code == .invalidJSON { … }
        /// ```
        public static let invalidJSON = Code(rawValue: "invalidJSON")
        /// A document body or blob exceeds a size limit.
        ///
        /// ```swift
        /// if error.code == .tooLarge { … }
        /// ```
        public static let tooLarge = Code(rawValue: "tooLarge")
        /// The database files are damaged.
        ///
        /// ```swift
        /// if error.code == .corrupted { … }
        /// ```
        public static let corrupted = Code(rawValue: "corrupted")
        /// The database is in use: opened by another process, or deleted while open.
        ///
        /// ```swift
        /// if error.code == .busy { … }
        /// ```
        public static let busy = Code(rawValue: "busy")
        /// The database was closed.
        ///
        /// ```swift
        /// if error.code == .notOpen { … }
        /// ```
        public static let notOpen = Code(rawValue: "notOpen")
        /// A file operation failed.
        ///
        /// ```swift
        /// if error.code == .io { … }
        /// ```
        public static let io = Code(rawValue: "io")
        /// The files were written by a format version this build cannot read.
        ///
        /// ```swift
        /// if error.code == .versionMismatch { … }
        /// ```
        public static let versionMismatch = Code(rawValue: "versionMismatch")
        /// The operation was cancelled (a compaction whose progress handler returned false, or
        /// one stopped because the database closed).
        ///
        /// ```swift
        /// if error.code == .cancelled { … }
        /// ```
        public static let cancelled = Code(rawValue: "cancelled")
        /// Something the database needs from the system failed: ICU, which orders strings in
        /// indexes and queries, could not open its collator or ran out of memory.
        ///
        /// ```swift
        /// if error.code == .unavailable { … }
        /// ```
        public static let unavailable = Code(rawValue: "unavailable")
        /// The disk (or the user's quota) is full: the write was not made, and nothing of it
        /// was kept. The database stays open and readable, and takes writes again by itself once
        /// space is freed: retry later (or free space, compact).
        ///
        /// ```swift
        /// do { try db.saveDocument(doc) } catch let e as SetteeError where e.code == .diskFull { retryLater() }
        /// ```
        public static let diskFull = Code(rawValue: "diskFull")

        /// Every code this version throws (a later version may add more: match with `default`).
        ///
        /// ```swift
        /// for code in SetteeError.Code.allCases { print(code) }
        /// ```
        public static let allCases: [Code] = [.notFound, .conflict, .forbidden, .unauthorized, .invalidParameter, .invalidJSON, .tooLarge, .corrupted, .busy, .notOpen, .io, .versionMismatch, .cancelled, .unavailable, .diskFull]
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
