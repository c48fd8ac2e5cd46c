import Foundation
import Logging
import HTTPTypes
@_spi(Replication) @_spi(Server) import Settee
import SetteeReplicator
import Synchronization

/// CouchDB's `_replicator` database: a database of the server's own (admin port only) whose
/// documents are replications, each `_replicate`'s body (`source`, `target`, `continuous`,
/// `create_target`). A document written starts its replication; an update of what it asks for
/// restarts it; its deletion stops it. The server keeps the document's state in it:
/// `_replication_state` (`triggered` when started, `completed` when a one-shot replication
/// ended, `failed` with `_replication_state_reason` when it could not run or stopped on an
/// error), `_replication_state_time`, `_replication_id` and, once completed,
/// `_replication_stats`. A client cannot write those members (they are dropped from its writes,
/// so that an edit of a finished document runs it again).
///
/// At every start the documents are read again: those neither `completed` nor `failed` start.
///
/// ```swift
/// let documents = ReplicatorDocuments()
/// documents.start(server)   // once the server listens
/// ```
///
/// - Note: Thread-safe: its state is behind a lock, and documents are considered one at a time,
///   in the order their changes commit.
final class ReplicatorDocuments: Sendable {
    static let databaseName = "_replicator"
    static let stateMembers: Set<String> = ["_replication_state", "_replication_state_time", "_replication_state_reason",
                                            "_replication_id", "_replication_stats"]

    private struct Running {
        var spec: [String: JSONValue]
        var generation: UInt64
    }
    private struct State {
        var running: [String: Running] = [:]
        var generation: UInt64 = 0
        var token: ListenerToken?
        var ids: AsyncStream<String>.Continuation?
        var started = false
        /// Each document's state, for the revision it was recorded at.
        var states: [String: (revision: String, members: [String: JSONValue])] = [:]
    }
    private let state = Mutex(State())
    private let logger = Mutex<Logger?>(nil)

    /// A client's document for `db` without the members only the server writes (any other
    /// database's documents are as sent).
    static func clientMembers(_ body: [String: JSONValue], of db: ServedDatabase) -> [String: JSONValue] {
        guard db.name == databaseName else { return body }
        return body.filter { !stateMembers.contains($0.key) }
    }

    static func jobKey(_ id: String) -> String { databaseName + "/" + id }

    /// Starts every document's replication that should run, then follows the database's changes.
    func start(_ server: SetteeServer) {
        guard let db = server.database(named: Self.databaseName) else { return }
        // Once per run, however often the listeners report that they run.
        guard state.withLock({ s in defer { s.started = true }; return !s.started }) else { return }
        logger.withLock { $0 = server.logger }
        // The states kept at the last run: finished documents stay finished.
        if let kept = try? db.database.localDocument(withID: Self.statesID) {
            var states: [String: (revision: String, members: [String: JSONValue])] = [:]
            for (id, v) in kept {
                guard case .string(let rev)? = v.objectValue?["rev"], case .object(let members)? = v.objectValue?["members"] else { continue }
                states[id] = (rev, members.filter { Self.stateMembers.contains($0.key) })
            }
            state.withLock { $0.states = states }
        }
        let (ids, continuation) = AsyncStream<String>.makeStream()
        let token = db.database.addChangeListener { change in
            for id in change.documentIDs { continuation.yield(id) }
        }
        state.withLock { s in
            s.token = token
            s.ids = continuation
        }
        Task { [self] in
            // Every document once, then each changed one: one at a time, in order.
            var all: [String] = []
            do {
                try db.database.forEachDocument(AllDocumentsOptions()) { all.append($0.id); return true }
            } catch {
                server.log(.error, "_replicator: cannot read its documents: \(error)")
            }
            for id in all { await consider(id, server, db, atStart: true) }
            for await id in ids { await consider(id, server, db, atStart: false) }
        }
    }

    /// Stops following the database (the server is stopping; its jobs stop with the server's).
    func stop() {
        let (token, ids) = state.withLock { s in
            defer { s.token = nil; s.ids = nil }
            return (s.token, s.ids)
        }
        token?.remove()
        ids?.finish()
    }

    private func consider(_ id: String, _ server: SetteeServer, _ db: ServedDatabase, atStart: Bool) async {
        guard !id.hasPrefix("_design/") else { return }
        let doc = try? await db.database.document(withID: id)
        let spec = doc.flatMap { $0.isDeleted ? nil : $0.toDictionary() }
        let (previous, recorded) = state.withLock { ($0.running[id], $0.states[id]) }
        // The server's own state update, or a write that changes nothing it runs.
        if let spec, previous?.spec == spec { return }
        if previous != nil {
            state.withLock { _ = $0.running.removeValue(forKey: id) }
            if let job = server.replications.cancel(Self.jobKey(id)) {
                job.stop()
                await job.waitUntilDone()
            }
        }
        guard let spec, let doc, let rev = doc.revisionID else {
            state.withLock { _ = $0.states.removeValue(forKey: id) }
            return
        }
        // A finished document stays finished across restarts (CouchDB does not run it again).
        if atStart, let recorded, recorded.revision == rev, case .string(let s)? = recorded.members["_replication_state"],
           s == "completed" || s == "failed" {
            state.withLock { $0.running[id] = Running(spec: spec, generation: 0) }
            return
        }
        let generation = state.withLock { s -> UInt64 in
            s.generation += 1
            s.running[id] = Running(spec: spec, generation: s.generation)
            return s.generation
        }
        let api = server.adminResponder()
        Task { [self] in
            do {
                await record(id, generation, db, ["_replication_state": "triggered"])
                let run = try await api.replicate(spec, jobKey: Self.jobKey(id))
                let replicationID = run.answer.objectValue?["_local_id"] ?? run.answer.objectValue?["session_id"] ?? .null
                guard let job = run.job else {
                    var stats: [String: JSONValue] = [:]
                    for key in ["docs_read", "docs_written", "doc_write_failures"] { stats[key] = run.answer.objectValue?[key] }
                    await record(id, generation, db, ["_replication_state": "completed", "_replication_id": replicationID,
                                                      "_replication_stats": .object(stats)])
                    return
                }
                await record(id, generation, db, ["_replication_state": "triggered", "_replication_id": replicationID])
                await job.waitUntilDone()
                if let failure = job.failure {
                    await record(id, generation, db, ["_replication_state": "failed",
                                                      "_replication_state_reason": .string(failure.message)])
                }
            } catch {
                let reason = (error as? CouchError).map { "\($0.error): \($0.reason)" } ?? String(describing: error)
                await record(id, generation, db, ["_replication_state": "failed", "_replication_state_reason": .string(reason)])
            }
        }
    }

    /// Records `members` (and the time) as the state of the document's current revision, if it
    /// still asks for the replication of `generation`, and keeps the states with the database.
    private func record(_ id: String, _ generation: UInt64, _ db: ServedDatabase, _ members: [String: JSONValue]) async {
        guard state.withLock({ $0.running[id]?.generation == generation }),
              let doc = try? await db.database.document(withID: id), !doc.isDeleted, let rev = doc.revisionID else { return }
        var all = members
        all["_replication_state_time"] = .string(ISO8601DateFormatter().string(from: Date()))
        let kept = state.withLock { s -> Bool in
            guard s.running[id]?.generation == generation else { return false }
            // The replication's ID outlives the state that named it.
            if all["_replication_id"] == nil, let old = s.states[id], old.revision == rev { all["_replication_id"] = old.members["_replication_id"] }
            s.states[id] = (rev, all)
            return true
        }
        guard kept else { return }
        do {
            // The states are read in the write's turn, so the last write holds the latest.
            try await db.database.inBatch { [self] database in
                try database.saveLocalDocument(Self.statesJSON(state.withLock { $0.states }), withID: Self.statesID)
            }
        } catch {
            logger.withLock { $0 }?.error("\("_replicator: cannot keep the state of \(id): \(error)".escapedForLog)")
        }
    }

    /// Where the states are kept: a local document of `_replicator` (not served as one).
    static let statesID = PrincipalRecords.prefix + "replication-states"

    private static func statesJSON(_ states: [String: (revision: String, members: [String: JSONValue])]) -> [String: JSONValue] {
        states.mapValues { ["rev": .string($0.revision), "members": .object($0.members)] }
    }

    /// The state members of revision `revision` of document `id`, shown with it.
    func members(of id: String, revision: String) -> [String: JSONValue] {
        state.withLock { s in
            guard let st = s.states[id], st.revision == revision else { return [:] }
            return st.members
        }
    }
}
