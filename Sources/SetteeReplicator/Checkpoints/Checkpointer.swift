import Foundation
@_spi(Replication) import Settee

/// The replication ID of one direction of a replicator (`Formats/replication.md`): the SHA-1, in
/// hex, of the canonical JSON of everything that decides what the replication copies — source and
/// target identity and every filter option. Whether it is continuous is left out, as CouchDB
/// leaves it out of the checkpoint's ID, so a one-shot run resumes where a continuous one stopped.
struct ReplicationID {
    static let version: Int64 = 1

    static func make(source: String, target: String, config: ReplicatorConfiguration, push: Bool) -> String {
        var fields: [String: JSONValue] = [
            "version": .int(version),
            "source": .string(source),
            "target": .string(target),
        ]
        if let ids = config.documentIDs { fields["doc_ids"] = .array(ids.sorted().map(JSONValue.string)) }
        if let channels = config.channels { fields["channels"] = .array(channels.sorted().map(JSONValue.string)) }
        if push {
            // A closure cannot be hashed; its presence is. Changing what a filter lets through
            // calls for start(reset: true).
            if config.pushFilter != nil { fields["push_filter"] = true }
        } else {
            if let name = config.filterName { fields["filter"] = .string(name) }
            if !config.filterParameters.isEmpty { fields["query_params"] = .object(config.filterParameters) }
            if config.pullFilter != nil { fields["pull_filter"] = true }
        }
        let bytes = (try? JSONValue.object(fields).jsonBytes()) ?? Array("\(fields)".utf8)
        return SHA1.hex(SHA1.hash(bytes))
    }
}

/// Statistics of one session, recorded in each checkpoint's history entry (CouchDB's fields).
struct SessionStats: Sendable {
    var missingChecked: Int64 = 0
    var missingFound: Int64 = 0
    var docsRead: Int64 = 0
    var docsWritten: Int64 = 0
    var docWriteFailures: Int64 = 0
}

/// Reads and writes the checkpoint documents `_local/<replication ID>` on both peers, as the
/// CouchDB replication protocol describes: the same `session_id` on both sides means
/// `source_last_seq` is good; otherwise the two `history` arrays are searched for the newest
/// session both sides recorded, and its `recorded_seq` is where the replication resumes.
struct Checkpointer: Sendable {
    static let historyLimit = 50

    let replicationID: String
    let source: any ReplicationPeer
    let target: any ReplicationPeer
    var documentID: String { "_local/" + replicationID }

    private(set) var sourceDocument: [String: JSONValue]?
    private(set) var targetDocument: [String: JSONValue]?
    let startTime = Self.timestamp()
    private(set) var startSequence: ReplicationSequence = .zero
    private(set) var lastSaved: ReplicationSequence?

    init(replicationID: String, source: any ReplicationPeer, target: any ReplicationPeer) {
        self.replicationID = replicationID
        self.source = source
        self.target = target
    }

    /// Reads both documents and returns where to start; `reset` ignores them (`start(reset:)`),
    /// though they are still read so the histories carry on.
    mutating func load(reset: Bool) async throws -> ReplicationSequence {
        async let s = source.localDocument(withID: documentID)
        async let t = target.localDocument(withID: documentID)
        sourceDocument = try await s
        targetDocument = try await t
        startSequence = reset ? .zero : Self.compare(source: sourceDocument, target: targetDocument)
        lastSaved = startSequence
        return startSequence
    }

    /// The resume point of two checkpoint documents (either may be missing: start from zero).
    static func compare(source: [String: JSONValue]?, target: [String: JSONValue]?) -> ReplicationSequence {
        guard let source, let target else { return .zero }
        if let a = source["session_id"]?.stringValue, a == target["session_id"]?.stringValue {
            return source["source_last_seq"].flatMap(ReplicationSequence.init(json:)) ?? .zero
        }
        let targetSessions = Set((target["history"]?.arrayValue ?? []).compactMap { $0.objectValue?["session_id"]?.stringValue })
        for entry in source["history"]?.arrayValue ?? [] {
            guard let o = entry.objectValue, let id = o["session_id"]?.stringValue, targetSessions.contains(id) else { continue }
            return o["recorded_seq"].flatMap(ReplicationSequence.init(json:)) ?? .zero
        }
        return .zero
    }

    /// Records `sequence` on both sides under a new session ID (target first: if writing the
    /// source's then fails, the sessions differ and the histories still agree on the previous one).
    mutating func save(_ sequence: ReplicationSequence, stats: SessionStats) async throws {
        guard sequence != lastSaved else { return }
        let session = UUID().uuidString.lowercased()
        let entry: JSONValue = .object([
            "session_id": .string(session),
            "start_time": .string(startTime),
            "end_time": .string(Self.timestamp()),
            "start_last_seq": startSequence.json,
            "end_last_seq": sequence.json,
            "recorded_seq": sequence.json,
            "missing_checked": .int(stats.missingChecked),
            "missing_found": .int(stats.missingFound),
            "docs_read": .int(stats.docsRead),
            "docs_written": .int(stats.docsWritten),
            "doc_write_failures": .int(stats.docWriteFailures),
        ])
        func next(_ old: [String: JSONValue]?) -> [String: JSONValue] {
            let history = [entry] + (old?["history"]?.arrayValue ?? []).prefix(Self.historyLimit - 1)
            return [
                "session_id": .string(session),
                "source_last_seq": sequence.json,
                "replication_id_version": .int(ReplicationID.version),
                "history": .array(Array(history)),
            ]
        }
        let t = next(targetDocument), s = next(sourceDocument)
        try await target.saveLocalDocument(t, withID: documentID)
        targetDocument = t
        try await source.saveLocalDocument(s, withID: documentID)
        sourceDocument = s
        lastSaved = sequence
    }

    static func timestamp() -> String {
        // RFC 1123, as CouchDB writes start_time and end_time.
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.string(from: Date())
    }
}
