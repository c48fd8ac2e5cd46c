import Foundation
@_spi(Replication) @_spi(Server) import Settee
import Synchronization

/// Who a write is made for, as the sync function and `validate_doc_update` see it; nil in
/// ``RoutingState/writer`` is the admin port or the app itself (every `require…` passes).
struct Writer: Sendable {
    var name: String
    var channels: Set<String>
    var roles: Set<String>
}

/// The JavaScript of one database: its sync function, and its design documents' `filters` and
/// `validate_doc_update`, compiled once; plus who the write in progress is made for.
///
/// Thread-safe: the mutable parts are behind locks; the writer is set and read only by the
/// database's writer (writes are serialized).
final class RoutingState: Sendable {
    let engine: ScriptEngine
    /// nil: the default, `channel(doc.channels)`, run natively.
    let sync: SyncFunction?
    /// Set for the duration of a server write (``ServedDatabase/write(as:_:)``).
    let writer = Mutex<Writer?>(nil)
    /// Expiries the sync function's `expiry()` asked for, applied after the write.
    let expiries = Mutex<[String: ExpiryRequest]>([:])
    /// Design documents' functions, by design document ID.
    let design = Mutex<[String: DesignFunctions]>([:])
    private let listener = Mutex<ListenerToken?>(nil)
    /// Sync-function runs (the default function's too) and the time they took, for `/_metrics`.
    let calls = Atomic<UInt64>(0)
    let nanoseconds = Atomic<UInt64>(0)

    /// The functions of one design document.
    struct DesignFunctions: Sendable {
        var revisionID: String
        var validate: ValidateFunction?
        var filters: [String: FilterFunction]
    }

    /// Compiles the configured sync function: a syntax error stops the start, naming the
    /// function and the line.
    convenience init(config: ServerConfiguration.DatabaseConfig, engine: ScriptEngine, database name: String) throws {
        try self.init(sync: config.sync, engine: engine, path: "databases.\(name).sync")
    }

    /// `path`: where the configuration gives the function, for the error.
    init(sync source: String?, engine: ScriptEngine, path: String) throws {
        self.engine = engine
        if let source, source.trimmingCharacters(in: .whitespacesAndNewlines) != SyncFunction.defaultSource {
            do {
                sync = try SyncFunction(source: source, engine: engine)
            } catch {
                throw ConfigurationError(path: path, message: "\(error)")
            }
        } else {
            sync = nil
        }
    }

    /// Whether writes need to say who makes them (a custom sync function, or a design document
    /// with `validate_doc_update`).
    var needsWriter: Bool { sync != nil || design.withLock { $0.values.contains { $0.validate != nil } } }

    func stop() {
        listener.withLock { $0?.remove(); $0 = nil }
    }
}

extension ServedDatabase {
    /// Sets the database's router, reads its design documents, and keeps them current.
    func startRouting() throws {
        let routing = self.routing
        let name = self.name
        database.setRouter { input in try routing.route(input, database: name) }
        let token = database.addChangeListener { [weak self] change in
            guard let self else { return }
            let designs = change.documentIDs.filter { $0.hasPrefix("_design/") }
            for id in designs { self.reloadDesign(id) }
            if !designs.isEmpty { self.designDocumentsChanged() }
            // Mango indexes follow their design documents however those were written
            // (`_index`, a PUT, replication); building one may take a while, so not here.
            if !designs.isEmpty { Task.detached { [weak self] in try? await self?.syncMangoIndexes() } }
        }
        routing.listenerSet(token)
        var options = AllDocumentsOptions()
        options.prefix = "_design/"
        let cursor = try database.allDocuments(options)
        while let doc = try cursor.next() { reloadDesign(doc.id) }
        // Before any write, so that writes keep the views whole rather than mark them stale.
        attachViews()
        // Library indexes persist; this mends any drift from design documents changed while
        // the database was not served.
        Task.detached { [weak self] in try? await self?.syncMangoIndexes() }
    }

    /// Compiles (again) the functions of one design document; a function that does not compile
    /// is left out (a design document replicated in with a broken function keeps the rest).
    func reloadDesign(_ id: String) {
        guard let doc = try? database.document(withID: id), let rev = doc.revisionID else {
            _ = routing.design.withLock { $0.removeValue(forKey: id) }
            return
        }
        if routing.design.withLock({ $0[id]?.revisionID == rev }) { return }
        let compiled = try? RoutingState.compileDesign(doc.toDictionary(), id: id, engine: routing.engine, strict: false)
        routing.design.withLock { $0[id] = compiled.map { RoutingState.DesignFunctions(revisionID: rev, validate: $0.validate, filters: $0.filters) } }
    }

    /// Runs `body` (writes on `database`, on the writer's thread) for `principal`: the sync
    /// function's `require…` calls and `validate_doc_update`'s `userCtx` see it.
    func write<R: Sendable>(as principal: Principal, _ body: @escaping @Sendable (Database) throws -> R) async throws -> R {
        let writer: Writer?
        switch principal {
        case .admin: writer = nil
        case .user(let name):
            let access = try self.access(for: name)
            writer = Writer(name: name, channels: Set(access.channels.keys), roles: Set(access.roles.keys))
        }
        let routing = self.routing
        let result = Mutex<R?>(nil)
        try await database.inBatch { db in
            routing.writer.withLock { $0 = writer }
            defer { routing.writer.withLock { $0 = nil } }
            let r = try body(db)
            result.withLock { $0 = r }
        }
        try await applyExpiries()
        guard let r = result.withLock({ $0 }) else { throw SetteeError(.io, "the write ended without a result") }
        return r
    }

    /// Sets the expirations the sync function asked for (`expiry()`).
    func applyExpiries() async throws {
        let pending = routing.expiries.withLock { e in
            defer { e.removeAll() }
            return e
        }
        for (id, request) in pending {
            switch request {
            case .at(let date): try await database.setDocumentExpiration(withID: id, expiration: date)
            case .never: try await database.setDocumentExpiration(withID: id, expiration: nil)
            }
        }
    }
}

extension RoutingState {
    func listenerSet(_ token: ListenerToken) { listener.withLock { $0 = token } }

    /// Compiles a design document's `validate_doc_update` and `filters`; with `strict`, a function
    /// that is not a string or does not compile is an error (CouchDB's `compilation_error`).
    static func compileDesign(_ properties: [String: JSONValue], id: String, engine: ScriptEngine, strict: Bool) throws
        -> (validate: ValidateFunction?, filters: [String: FilterFunction]) {
        var validate: ValidateFunction?
        var filters: [String: FilterFunction] = [:]
        // Views are compiled where they run (the library's map indexes); a write only checks them.
        if strict { try ViewDefinition.check(properties, id: id, engine: engine) }
        if let v = properties["validate_doc_update"] {
            if case .string(let source) = v {
                do {
                    validate = try ValidateFunction(name: "\(id) validate_doc_update", source: source, engine: engine)
                } catch {
                    if strict { throw error }
                }
            } else if strict {
                throw CouchError(.badRequest, "compilation_error", "validate_doc_update of \(id) must be a string")
            }
        }
        if case .object(let fs)? = properties["filters"] {
            for (name, v) in fs {
                guard case .string(let source) = v else {
                    if strict { throw CouchError(.badRequest, "compilation_error", "filter \(name) of \(id) must be a string") }
                    continue
                }
                do {
                    filters[name] = try FilterFunction(name: "\(id) filter \(name)", source: source, engine: engine)
                } catch {
                    if strict { throw error }
                }
            }
        }
        return (validate, filters)
    }

    /// A revision as the functions see it: its properties with `_id`, `_rev` and `_deleted`.
    static func json(_ doc: Document) throws -> String {
        var head = "{\"_id\":" + (try JSONValue.string(doc.id).jsonText())
        if let rev = doc.revisionID { head += ",\"_rev\":" + (try JSONValue.string(rev).jsonText()) }
        if doc.isDeleted { head += ",\"_deleted\":true" }
        let body = try doc.storedJSON
        if body.count > 2 { return head + "," + String(decoding: body.dropFirst(), as: UTF8.self) }
        return head + "}"
    }

    /// The router: design documents go to no channel and skip the sync function; every other
    /// revision gets the sync function's channels and grants (a tombstone it gives no channel
    /// stays in its parent's, so that the deletion reaches whoever read the document); then every
    /// design document's `validate_doc_update` sees it.
    func route(_ input: RoutingInput, database name: String) throws -> RevisionRouting {
        let doc = input.revision
        let writer = self.writer.withLock { $0 }
        var routing = RevisionRouting()
        if !doc.id.hasPrefix("_design/") {
            let started = DispatchTime.now().uptimeNanoseconds
            defer {
                calls.add(1, ordering: .relaxed)
                nanoseconds.add(DispatchTime.now().uptimeNanoseconds &- started, ordering: .relaxed)
            }
            if let sync {
                let docJSON = try Self.json(doc)
                let oldJSON = try input.parent.map(Self.json)
                let user = writer.map { ScriptUser(name: $0.name, channels: $0.channels, roles: $0.roles) }
                let outcome: SyncOutcome
                do {
                    outcome = try sync.run(doc: docJSON, oldDoc: oldJSON, user: user)
                } catch {
                    throw error.setteeError(function: "sync function")
                }
                routing = RevisionRouting(channels: outcome.channels, access: outcome.access, roles: outcome.roles,
                                          roleAccess: outcome.roleAccess)
                if let expiry = outcome.expiry { expiries.withLock { $0[doc.id] = expiry } }
            } else if !doc.isDeleted {
                routing.channels = Self.defaultChannels(doc)
            }
            if doc.isDeleted && routing.channels.isEmpty { routing.channels = input.parentRouting?.channels ?? [] }
        }
        let validators = design.withLock { $0.values.compactMap(\.validate) }
        if !validators.isEmpty {
            let newDoc = try Self.json(doc)
            let oldDoc = try input.parent.map(Self.json)
            let userCtx = try Self.userContext(writer, database: name).jsonText()
            for v in validators {
                do {
                    try v.run(newDoc: newDoc, oldDoc: oldDoc, userCtx: userCtx, secObj: "{}")
                } catch {
                    throw error.setteeError(function: "validate_doc_update")
                }
            }
        }
        return routing
    }

    /// `channel(doc.channels)` without JavaScript: a string or an array of strings.
    static func defaultChannels(_ doc: Document) -> Set<String> {
        switch doc.value(forKey: "channels") {
        case .string(let s)?: return s.isEmpty ? [] : [s]
        case .array(let a)?: return Set(a.compactMap { if case .string(let s) = $0, !s.isEmpty { s } else { nil } })
        default: return []
        }
    }

    /// CouchDB's `userCtx`: the writer's name and roles (`_admin` for the admin port).
    static func userContext(_ writer: Writer?, database: String) -> JSONValue {
        guard let writer else { return ["db": .string(database), "name": .null, "roles": ["_admin"]] }
        return ["db": .string(database), "name": .string(writer.name), "roles": .array(writer.roles.sorted().map(JSONValue.string)),
                "channels": .array(writer.channels.sorted().map(JSONValue.string))]
    }
}

extension ScriptError {
    /// What the write's caller sees: `forbidden` (403), `unauthorized` (401), or for a function
    /// that failed or ran out of time, `forbidden` with what happened.
    func setteeError(function: String) -> SetteeError {
        switch kind {
        case .forbidden(let m): return SetteeError(.forbidden, m)
        case .unauthorized(let m): return SetteeError(.unauthorized, m)
        default: return SetteeError(.forbidden, "\(function): \(self)")
        }
    }
}
