import Foundation

/// Credentials a replicator presents to a remote peer (Couchbase Lite's authenticators), set on
/// ``ReplicatorConfiguration/authenticator``. A peer in this process ignores them.
///
/// ```swift
/// config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
/// ```
///
/// - Note: Conforming types are values, safe to share between threads.
public protocol Authenticator: Sendable {
    /// The HTTP header fields that carry the credentials, by name.
    ///
    /// ```swift
    /// let fields = BasicAuthenticator(username: "a", password: "b").httpHeaders   // ["Authorization": "Basic YTpi"]
    /// ```
    var httpHeaders: [String: String] { get }
}

/// HTTP Basic authentication: a user name and password, sent with every request (use HTTPS).
///
/// ```swift
/// config.authenticator = BasicAuthenticator(username: "molly", password: "secret")
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct BasicAuthenticator: Authenticator, Equatable {
    /// The user name.
    ///
    /// ```swift
    /// print(auth.username)
    /// ```
    public var username: String
    /// The password.
    ///
    /// ```swift
    /// auth.password = newPassword
    /// ```
    public var password: String

    /// Credentials for HTTP Basic authentication.
    ///
    /// ```swift
    /// let auth = BasicAuthenticator(username: "molly", password: "secret")
    /// ```
    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    /// `Authorization: Basic <base64 of user:password>`.
    ///
    /// ```swift
    /// print(auth.httpHeaders["Authorization"]!)
    /// ```
    public var httpHeaders: [String: String] {
        ["Authorization": "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()]
    }
}

/// A session the server made already (Sync Gateway's `POST /{db}/_session` on its admin port, or
/// a login the app did itself), presented as its cookie.
///
/// ```swift
/// config.authenticator = SessionAuthenticator(sessionID: "3f1c…")   // SyncGatewaySession
/// config.authenticator = SessionAuthenticator(sessionID: token, cookieName: "AuthSession")   // CouchDB
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct SessionAuthenticator: Authenticator, Equatable {
    /// The session's ID: the cookie's value.
    ///
    /// ```swift
    /// print(auth.sessionID)
    /// ```
    public var sessionID: String
    /// The cookie's name (Sync Gateway's `SyncGatewaySession` unless given).
    ///
    /// ```swift
    /// print(auth.cookieName)
    /// ```
    public var cookieName: String

    /// A session cookie.
    ///
    /// ```swift
    /// let auth = SessionAuthenticator(sessionID: id, cookieName: "SyncGatewaySession")
    /// ```
    public init(sessionID: String, cookieName: String = "SyncGatewaySession") {
        self.sessionID = sessionID
        self.cookieName = cookieName
    }

    /// `Cookie: <name>=<id>`.
    ///
    /// ```swift
    /// print(auth.httpHeaders["Cookie"]!)
    /// ```
    public var httpHeaders: [String: String] { ["Cookie": "\(cookieName)=\(sessionID)"] }
}
