import Foundation
import Settee
import Synchronization

/// What `/_db_updates` reports: the databases created, updated and deleted while the server
/// runs, each (event, database) pair once at its latest sequence, as CouchDB's
/// `_global_changes` database keeps one document per pair.
///
/// The log is in memory (it starts empty at each start, CouchDB's starts from its database) and
/// bounded: past ``maxEntries`` pairs the oldest is forgotten.
///
/// ```swift
/// let updates = DatabaseUpdates()
/// updates.record("todo", .created)
/// let (events, last) = updates.events(since: 0, limit: nil, descending: false)
/// ```
///
/// - Note: Thread-safe: every access takes its lock.
final class DatabaseUpdates: Sendable {
    enum Kind: String, Sendable { case created, updated, deleted }

    struct Event: Sendable, Equatable {
        var database: String
        var kind: Kind
        var sequence: UInt64
        /// The row as CouchDB writes it, `seq` as the run's token.
        var json: JSONValue { ["db_name": .string(database), "type": .string(kind.rawValue), "seq": seq] }
        var seq: JSONValue
    }

    private struct Key: Hashable { var database: String; var kind: Kind }
    private struct State {
        var sequence: UInt64 = 0
        var latest: [Key: UInt64] = [:]
        var signals: [UInt64: ChangeSignal] = [:]
        var nextSignal: UInt64 = 0
        var listeners: [String: ListenerToken] = [:]
    }
    private let state = Mutex(State())
    static let maxEntries = 10_000

    /// Records an event and wakes the feeds waiting for one.
    func record(_ database: String, _ kind: Kind) {
        let signals = state.withLock { s -> [ChangeSignal] in
            s.sequence += 1
            s.latest[Key(database: database, kind: kind)] = s.sequence
            if s.latest.count > Self.maxEntries, let oldest = s.latest.min(by: { $0.value < $1.value }) {
                s.latest.removeValue(forKey: oldest.key)
            }
            return Array(s.signals.values)
        }
        for signal in signals { signal.fire() }
    }

    /// Reports every commit of `db` as an update of it, until ``stopWatching(_:)``.
    func watch(_ db: ServedDatabase) {
        let name = db.name
        let counters = db.counters
        let token = db.database.addChangeListener { [weak self] change in
            counters.documentsWritten.add(UInt64(change.changes.count), ordering: .relaxed)
            self?.record(name, .updated)
        }
        let old = state.withLock { s in
            defer { s.listeners[name] = token }
            return s.listeners[name]
        }
        old?.remove()
    }

    func stopWatching(_ name: String) {
        state.withLock { $0.listeners.removeValue(forKey: name) }?.remove()
    }

    /// Marks this run's sequences: a server starts its log empty, so a sequence of an earlier run
    /// means nothing here, and is read as the start (CouchDB's rule for a sequence it does not know).
    let run: String = String(UInt32.random(in: 0x1000_0000 ... UInt32.max), radix: 36)

    /// A sequence as clients see it: `<number>-<run>`, opaque as CouchDB's.
    func token(_ sequence: UInt64) -> JSONValue { .string("\(sequence)-\(run)") }

    /// `since` read: "now" is the latest event; this run's token its number; anything else the start.
    func position(_ text: String?) -> UInt64 {
        guard let text else { return 0 }
        if text == "now" { return lastSequence }
        let parts = text.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, parts[1] == run, let n = UInt64(parts[0]) else { return 0 }
        return min(n, lastSequence)
    }

    /// The sequence of the latest event.
    var lastSequence: UInt64 { state.withLock { $0.sequence } }

    /// The events after `since` in sequence order (or from the latest, `descending`), at most
    /// `limit`, and the sequence the answer reaches: the last event's when `limit` cut the list,
    /// else the latest.
    func events(since: UInt64, limit: Int?, descending: Bool) -> (events: [Event], last: UInt64) {
        state.withLock { s in
            var events = s.latest.filter { $0.value > since }
                .map { Event(database: $0.key.database, kind: $0.key.kind, sequence: $0.value, seq: token($0.value)) }
                .sorted { $0.sequence < $1.sequence }
            if descending { events.reverse() }
            if let limit, events.count > limit {
                events = Array(events.prefix(limit))
                return (events, events.last?.sequence ?? s.sequence)
            }
            return (events, s.sequence)
        }
    }

    /// Registers a feed's wake-up.
    func register(_ signal: ChangeSignal) -> UInt64 {
        state.withLock { s in
            s.nextSignal += 1
            s.signals[s.nextSignal] = signal
            return s.nextSignal
        }
    }

    func unregister(_ id: UInt64) { _ = state.withLock { $0.signals.removeValue(forKey: id) } }

    /// Wakes every feed (the server is stopping).
    func wakeAll() {
        for signal in state.withLock({ Array($0.signals.values) }) { signal.fire() }
    }
}
