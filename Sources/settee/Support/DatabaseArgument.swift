import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ArgumentParser
@_spi(Server) import Settee
import SetteeHTTP

/// A database named on the command line: a directory `NAME.settee`, or the URL of a database on
/// a CouchDB-compatible server (`http://user:password@host:4984/db`).
enum DatabaseArgument: CustomStringConvertible {
    /// `keyspace`: a named collection (`scope.name`) of the database, which commands then read and write.
    case local(directory: String, name: String, keyspace: (scope: String, name: String)? = nil)
    case remote(URL)

    init(_ text: String) throws {
        if text.hasPrefix("http://") || text.hasPrefix("https://") {
            guard let url = URL(string: text), url.host != nil, url.path.count > 1 else {
                throw CLIError(.usage, "\(text) is not a database URL (http://host:port/db)")
            }
            // A port is 16 bits: a larger number must not reach the HTTP client (which traps on it),
            // and one too large for an integer (which Foundation reads as no port) is refused too.
            let authority = text.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first ?? ""
            let hostPort = authority.split(separator: "@").last ?? ""
            if let colon = hostPort.lastIndex(of: ":"), !hostPort[colon...].contains("]") {
                let port = hostPort[hostPort.index(after: colon)...]
                guard let n = Int(port), (1 ... 65535).contains(n) else {
                    throw CLIError(.usage, "\(DatabaseArgument.remote(url)) names port \(port), outside 1–65535")
                }
            }
            self = .remote(url)
            return
        }
        var path = text
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        guard path.hasSuffix(".settee") else {
            throw CLIError(.usage, "\(text) is not a database: a database is a directory NAME.settee, or a URL")
        }
        let url = URL(fileURLWithPath: path)
        let name = String(url.lastPathComponent.dropLast(".settee".count))
        guard !name.isEmpty else { throw CLIError(.usage, "\(text) names no database") }
        self = .local(directory: url.deletingLastPathComponent().path, name: name)
    }

    var description: String {
        switch self {
        case .local(let d, let n, let k):
            return (d as NSString).appendingPathComponent(n + ".settee") + (k.map { " (collection \($0.scope).\($0.name))" } ?? "")
        case .remote(let url):
            // Never print a password.
            guard var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.absoluteString }
            if c.password != nil { c.password = "***" }
            return c.string ?? url.absoluteString
        }
    }

    var isRemote: Bool { if case .remote = self { true } else { false } }

    /// Opens a local database; `create` makes it when it is not there.
    func open(create: Bool = false) throws -> Database {
        guard case .local(let directory, let name, let keyspace) = self else {
            throw CLIError(.usage, "this command takes a local database (NAME.settee), not a URL")
        }
        if !create && !Database.exists(withName: name, inDirectory: directory) {
            throw CLIError(.notFound, "no database at \(self)")
        }
        do {
            let db = try Database(name: name, config: DatabaseConfiguration(directory: directory))
            guard let keyspace else { return db }
            guard let collection = try db.collection(name: keyspace.name, scope: keyspace.scope) else {
                try? db.close()
                throw CLIError(.notFound, "\((directory as NSString).appendingPathComponent(name + ".settee")) has no collection \(keyspace.scope).\(keyspace.name)")
            }
            // The collection's documents, as a database object (closing it leaves the file to
            // the end of the process).
            return collection.documents
        } catch let e as SetteeError where e.code == .busy {
            throw CLIError(.locked, "\(self) is open in another process (settee serve, an app): \(e.message)")
        } catch let e as SetteeError {
            throw CLIError(e, context: description)
        }
    }
}

/// A database on a CouchDB-compatible server, for the commands that take a URL.
struct RemoteDatabase {
    let url: URL
    let client = HTTPClient.shared

    /// `path` under the database (`""`, `_all_docs`, a percent-encoded ID), with a query.
    func request(_ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: [UInt8]? = nil) async throws -> (status: Int, json: JSONValue?) {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false) ?? URLComponents()
        let user = c.user, password = c.password
        c.user = nil
        c.password = nil
        var base = c.percentEncodedPath
        if !base.hasSuffix("/") { base += "/" }
        c.percentEncodedPath = base + path
        if !query.isEmpty { c.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        guard let target = c.string else { throw CLIError(.usage, "cannot make a URL for \(path)") }
        var req = HTTPClientRequest(url: target)
        req.method = method
        req.headers.add(name: "Accept", value: "application/json")
        if let user {
            let credentials = Data("\(user.removingPercentEncoding ?? user):\(password?.removingPercentEncoding ?? "")".utf8).base64EncodedString()
            req.headers.add(name: "Authorization", value: "Basic " + credentials)
        }
        if let body {
            req.headers.add(name: "Content-Type", value: "application/json")
            req.body = .bytes(ByteBuffer(bytes: body))
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(req, timeout: .seconds(60))
        } catch {
            throw CLIError(.failed, "cannot reach \(DatabaseArgument.remote(url)): \(error)")
        }
        let bytes = try await response.body.collect(upTo: 256 << 20)
        let json = try? JSONValue(parsing: Array(bytes.readableBytesView))
        return (Int(response.status.code), json)
    }

    /// The JSON of a 2xx answer; the server's error as a ``CLIError`` otherwise.
    func expect(_ method: HTTPMethod, _ path: String, query: [(String, String)] = [], body: [UInt8]? = nil,
                what: String) async throws -> JSONValue {
        let (status, json) = try await request(method, path, query: query, body: body)
        guard (200 ..< 300).contains(status) else {
            let reason = json?["reason"]?.stringValue ?? json?["error"]?.stringValue ?? "HTTP \(status)"
            let code: ExitStatus = switch status {
            case 404: .notFound
            case 409: .conflict
            case 400: .usage
            default: .failed
            }
            throw CLIError(code, "\(what): \(reason) (HTTP \(status))")
        }
        return json ?? .null
    }

    static func segment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? id
    }
}

extension JSONValue {
    subscript(key: String) -> JSONValue? { objectValue?[key] }
}

/// Reads a JSON object from an argument or standard input, naming where it is malformed.
func readJSONObject(_ text: String?, what: String) throws -> [String: JSONValue] {
    let bytes: [UInt8]
    if let text, text != "-" {
        bytes = Array(text.utf8)
    } else {
        bytes = Array(FileHandle.standardInput.readDataToEndOfFile())
    }
    let value: JSONValue
    do {
        value = try JSONValue(parsing: bytes)
    } catch {
        throw CLIError(.usage, "\(what) is not valid JSON: \(error.message)")
    }
    guard case .object(let o) = value else { throw CLIError(.usage, "\(what) must be a JSON object ({...})") }
    return o
}

/// `--collection`: which collection of the database a document command reads or writes,
/// `scope.name` or `name` (in scope `_default`); `_default._default` when not given.
struct CollectionOption: ParsableArguments {
    @Option(name: .long, help: "A collection: scope.name, or name in scope _default (default _default._default).")
    var collection: String?

    /// The scope and collection named, their names checked as Couchbase Lite checks them.
    func keyspace() throws -> (scope: String, name: String) { try Self.keyspace(collection) }

    /// `spec` (`scope.name` or `name`) read as a scope and a collection; nil: the default.
    static func keyspace(_ spec: String?) throws -> (scope: String, name: String) {
        guard let collection = spec else { return (Scope.defaultScopeName, Collection.defaultCollectionName) }
        let parts = collection.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 1 || parts.count == 2 else {
            throw CLIError(.usage, "--collection \(collection): expected scope.name or name")
        }
        let scope = parts.count == 2 ? parts[0] : Scope.defaultScopeName
        let name = parts[parts.count - 1]
        do {
            try Database.checkKeyspaceName(scope, of: "scope")
            try Database.checkKeyspaceName(name, of: "collection")
        } catch {
            throw CLIError(.usage, "--collection \(collection): \(error.message)")
        }
        return (scope, name)
    }

    /// `argument` as the command is to use it: the database itself for its default collection;
    /// for another, a remote database's keyspace URL (`…/db.scope.name`, which the server
    /// answers), and for a local one an error unless the database has that collection.
    func resolve(_ argument: DatabaseArgument) throws -> DatabaseArgument {
        let (scope, name) = try keyspace()
        if scope == Scope.defaultScopeName && name == Collection.defaultCollectionName { return argument }
        switch argument {
        case .remote(let url):
            return .remote(try URLEndpoint.keyspaceURL(database: url, scope: scope, collection: name))
        case .local(let directory, let database, _):
            let resolved = DatabaseArgument.local(directory: directory, name: database, keyspace: (scope, name))
            // A missing database or collection is told now.
            _ = try resolved.open()
            return resolved
        }
    }
}
