@_spi(Replication) import Settee

/// The one error type of the replicator: a code, a short message free of document content, and
/// the document and underlying database error when there is one.
///
/// ```swift
/// replicator.addDocumentReplicationListener { replication in
///     for doc in replication.documents {
///         if let error = doc.error, error.code == .conflictResolverFailed { print(doc.id, error.message) }
///     }
/// }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct ReplicatorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    ///
    /// ```swift
    /// if error.code == .rejected { showValidationMessage(error.message) }
    /// ```
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as ``description`` prints it.
        ///
        /// ```swift
        /// print(error.code.rawValue)   // "conflictResolverFailed"
        /// ```
        public let rawValue: String

        /// A code by name; the named constants below are the ones this version throws.
        ///
        /// ```swift
        /// let code = ReplicatorError.Code(rawValue: "conflictResolverFailed")
        /// ```
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The name.
        ///
        /// ```swift
        /// print(error.code)   // conflictResolverFailed
        /// ```
        public var description: String { rawValue }

        /// The conflict resolver threw; the conflict stays in the database and is retried when
        /// the replicator starts again.
        ///
        /// ```swift
        /// if error.code == .conflictResolverFailed { … }
        /// ```
        public static let conflictResolverFailed = Code(rawValue: "conflictResolverFailed")
        /// The conflict resolver returned a document read from another database; the conflict
        /// stays, as for a throwing resolver.
        ///
        /// ```swift
        /// if error.code == .resolverReturnedForeignDocument { … }
        /// ```
        public static let resolverReturnedForeignDocument = Code(rawValue: "resolverReturnedForeignDocument")
        /// Writing a resolution failed (the document changed meanwhile, a validation refused it).
        ///
        /// ```swift
        /// if error.code == .resolutionFailed { … }
        /// ```
        public static let resolutionFailed = Code(rawValue: "resolutionFailed")
        /// The receiving database refused a revision (a validation: `SetteeError.Code.forbidden`;
        /// a blob the sender does not have; a malformed revision).
        ///
        /// ```swift
        /// if error.code == .rejected { … }
        /// ```
        public static let rejected = Code(rawValue: "rejected")
        /// A request a peer cannot answer (an unknown filter, a sequence of the wrong kind).
        ///
        /// ```swift
        /// if error.code == .invalidRequest { … }
        /// ```
        public static let invalidRequest = Code(rawValue: "invalidRequest")
        /// A call to a peer or to the local database failed; ``ReplicatorError/underlying`` says how.
        ///
        /// ```swift
        /// if error.code == .peerFailed { … }
        /// ```
        public static let peerFailed = Code(rawValue: "peerFailed")
        /// The operation needs another kind of replicator (for example pending documents of a
        /// pull-only replicator).
        ///
        /// ```swift
        /// if error.code == .unsupported { … }
        /// ```
        public static let unsupported = Code(rawValue: "unsupported")
        /// The peer could not be reached, or answered with a temporary failure (a network error,
        /// a timeout, HTTP 5xx or 429): the replicator goes ``ReplicatorActivity/offline`` and
        /// retries with exponential backoff.
        ///
        /// ```swift
        /// if status.activity == .offline, status.error?.code == .unreachable { showOfflineBadge() }
        /// ```
        public static let unreachable = Code(rawValue: "unreachable")
        /// The peer refused the credentials (HTTP 401 or 403), or its TLS certificate is not
        /// trusted (not the pinned one, or unknown to the system's roots): the replicator stops.
        ///
        /// ```swift
        /// if error.code == .authenticationFailed { askForPassword() }
        /// ```
        public static let authenticationFailed = Code(rawValue: "authenticationFailed")
        /// The peer has no such database (HTTP 404 for it): the replicator stops.
        ///
        /// ```swift
        /// if error.code == .remoteDatabaseNotFound { print("check the URL") }
        /// ```
        public static let remoteDatabaseNotFound = Code(rawValue: "remoteDatabaseNotFound")

        /// Every code this version throws (a later version may add more: match with `default`).
        ///
        /// ```swift
        /// for code in ReplicatorError.Code.allCases { print(code) }
        /// ```
        public static let allCases: [Code] = [.conflictResolverFailed, .resolverReturnedForeignDocument, .resolutionFailed, .rejected,
                                              .invalidRequest, .peerFailed, .unsupported, .unreachable, .authenticationFailed,
                                              .remoteDatabaseNotFound]
    }

    /// What went wrong.
    ///
    /// ```swift
    /// switch error.code { case .rejected: … default: … }
    /// ```
    public var code: Code
    /// A short explanation, free of document content.
    ///
    /// ```swift
    /// print(error.message)
    /// ```
    public var message: String
    /// The document concerned, when there is one.
    ///
    /// ```swift
    /// print(error.documentID ?? "-")
    /// ```
    public var documentID: String?
    /// The database error behind it, when there is one.
    ///
    /// ```swift
    /// if error.underlying?.code == .forbidden { … }
    /// ```
    public var underlying: SetteeError?

    /// Makes an error.
    ///
    /// ```swift
    /// throw ReplicatorError(.invalidRequest, "no filter function named 'x'")
    /// ```
    public init(_ code: Code, _ message: String, documentID: String? = nil, underlying: SetteeError? = nil) {
        self.code = code
        self.message = message
        self.documentID = documentID
        self.underlying = underlying
    }

    /// Wraps any error thrown by a peer or the database.
    static func wrapping(_ error: any Error, documentID: String? = nil) -> ReplicatorError {
        if var e = error as? ReplicatorError {
            if e.documentID == nil { e.documentID = documentID }
            return e
        }
        if let s = error as? SetteeError {
            return ReplicatorError(.peerFailed, s.description, documentID: documentID, underlying: s)
        }
        return ReplicatorError(.peerFailed, String(describing: error), documentID: documentID)
    }

    /// Whether retrying later may succeed (``Code/unreachable``): the replicator then goes offline
    /// and retries instead of stopping.
    ///
    /// ```swift
    /// if error.isTransient { scheduleRetry() }
    /// ```
    public var isTransient: Bool { code == .unreachable }

    /// Code, document and message.
    ///
    /// ```swift
    /// print(error)   // ReplicatorError.rejected (doc-1): invalid date
    /// ```
    public var description: String {
        "ReplicatorError.\(code.rawValue)\(documentID.map { " (\($0))" } ?? ""): \(message)"
    }
}

extension ReplicatorError.Code {
    /// Lets `catch ReplicatorError.Code.unsupported` match.
    ///
    /// ```swift
    /// do { _ = try pullOnly.pendingDocumentIDs() } catch ReplicatorError.Code.unsupported { }
    /// ```
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? ReplicatorError)?.code == code
    }
}
