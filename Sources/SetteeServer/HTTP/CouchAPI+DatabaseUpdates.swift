import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Settee
import Synchronization

extension CouchAPI {
    // MARK: - _db_updates

    /// `GET /_db_updates` (admin port): the databases created, updated and deleted, as CouchDB's
    /// feed types write them (`normal`, `longpoll`, `continuous`, `eventsource`), with `since`
    /// (a sequence of this run, or `now`), `limit`, `descending`, `heartbeat` and `timeout`.
    func databaseUpdates(_ call: Call) async throws -> Response {
        try requireAdmin(call)
        try allow(call.request.method, [.get, .head])
        let updates = server.databaseUpdates
        let asked = call.query["feed"] ?? "normal"
        let feed = asked == "live" ? "continuous" : asked
        guard ["normal", "longpoll", "continuous", "eventsource"].contains(feed) else {
            throw CouchError.badRequest("Supported `feed` types: normal, continuous, longpoll, eventsource")
        }
        let since = updates.position(call.query["since"])
        let limit = try integer(call, "limit")
        let descending = try flag(call, "descending")
        let longest = server.configuration.changesTimeout
        // CouchDB's `heartbeat=false` is no heartbeat.
        let heartbeatText = call.query["heartbeat"].flatMap { $0.lowercased() == "false" ? nil : $0 }
        let heartbeat = try Self.heartbeat(heartbeatText).map { Duration.milliseconds(min(max(1000, $0), longest)) }
        let timeout = Duration.milliseconds(min(try integer(call, "timeout") ?? 60_000, longest))
        let duration = server.configuration.changesDuration.map { Duration.milliseconds($0) }

        if feed == "normal" || descending {
            let (events, last) = updates.events(since: since, limit: limit, descending: descending)
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try Self.updatesBody(events, last: updates.token(last)))))
        }
        let signal = ChangeSignal()
        let body = ResponseBody { writer in
            // Registered before the first read, so an event in between wakes the feed.
            let registration = updates.register(signal)
            defer { updates.unregister(registration) }
            let stopping = Mutex(false)
            var since = since
            var written = 0
            let clock = ContinuousClock()
            var deadline = clock.now + timeout
            // A feed kept open by heartbeats lasts `changesDuration` at most, as `_changes` does.
            let end = duration.map { clock.now + $0 }
            try await withGracefulShutdownHandler {
                if feed == "longpoll" {
                    while true {
                        let (events, last) = updates.events(since: since, limit: limit, descending: false)
                        if !events.isEmpty || stopping.withLock({ $0 }) || clock.now >= deadline {
                            try await writer.write(ByteBuffer(bytes: try Self.updatesBody(events, last: updates.token(last))))
                            break
                        }
                        let wait = min(heartbeat ?? timeout, deadline - clock.now)
                        if !(await signal.wait(for: wait)), heartbeat != nil, clock.now < deadline {
                            try await writer.write(ByteBuffer(string: "\n"))
                        }
                    }
                    return
                }
                while !stopping.withLock({ $0 }) {
                    let (events, last) = updates.events(since: since, limit: limit.map { $0 - written }, descending: false)
                    if !events.isEmpty {
                        var out: [UInt8] = []
                        for e in events {
                            if feed == "eventsource" {
                                out += Array("data: ".utf8) + (try e.json.jsonBytes()) + Array("\nid: ".utf8)
                                out += (try e.seq.jsonBytes()) + Array("\n\n".utf8)
                            } else {
                                out += (try e.json.jsonBytes()) + [0x0A]
                            }
                        }
                        try await writer.write(ByteBuffer(bytes: out))
                        written += events.count
                        deadline = clock.now + timeout
                    }
                    since = last
                    if let limit, written >= limit { break }
                    var wait = heartbeat ?? (deadline - clock.now)
                    if let end { wait = min(wait, end - clock.now) }
                    if wait <= .zero { break }
                    if !(await signal.wait(for: wait)) {
                        // No event within a heartbeat: say so, or end at the timeout.
                        guard heartbeat != nil else { break }
                        try await writer.write(ByteBuffer(string: feed == "eventsource" ? "event: heartbeat\ndata: \n\n" : "\n"))
                    }
                }
                if feed == "continuous" {
                    try await writer.write(ByteBuffer(bytes: try JSONValue.object(["last_seq": updates.token(since)]).jsonBytes() + [0x0A]))
                }
            } onGracefulShutdown: {
                stopping.withLock { $0 = true }
                signal.fire()
            }
            try await writer.finish(nil)
        }
        let type = feed == "eventsource" ? "text/event-stream" : "application/json"
        return Response(status: .ok, headers: [.contentType: type, .cacheControl: "must-revalidate"], body: body)
    }

    /// A `normal` or `longpoll` answer, one event per line as CouchDB writes it.
    static func updatesBody(_ events: [DatabaseUpdates.Event], last: JSONValue) throws -> [UInt8] {
        var out = Array("{\"results\":[\n".utf8)
        for (i, e) in events.enumerated() {
            if i > 0 { out += Array(",\n".utf8) }
            out += try e.json.jsonBytes()
        }
        out += Array("\n],\n\"last_seq\":".utf8) + (try last.jsonBytes()) + Array("}\n".utf8)
        return out
    }
}
