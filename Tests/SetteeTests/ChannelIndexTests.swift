import Foundation
import Testing
import SetteeCrashKit
@_spi(Replication) @testable import Settee

/// Value indexes kept by channel and queries restricted to channels: the rows are those of the
/// unrestricted query whose documents are currently routed to one of the channels, whatever
/// the plan, through saves, deletions, purges, rerouting, a reopen and a build over existing
/// documents; the check finds the index whole.
@Suite struct ChannelIndexTests {
    static let channelNames = ["a", "b", "c", "d", "e", "f"]

    /// `channel(doc.channels)`, or with `alt` set `channel(doc.alt)` (a changed sync function).
    static func router(alt: Bool) -> Router {
        { input in
            if input.revision.isDeleted { return input.parentRouting ?? RevisionRouting() }
            let list = input.revision.array(forKey: alt ? "alt" : "channels")?.compactMap(\.stringValue) ?? []
            return RevisionRouting(channels: Set(list))
        }
    }

    /// The rows of `sql` with `channels`, against the rows without, kept when the document's
    /// current routing meets the channels.
    func compare(_ db: Database, _ sql: String, channels: Set<String>, _ what: String) throws {
        let restricted = try db.createQuery(sql)
        restricted.channels = channels
        let got = try restricted.execute().allResults().map { $0.toJSON() }
        // The reference: every match in order, filtered by each document's routing, cut after.
        let all = try db.createQuery(sql.replacingOccurrences(of: " LIMIT 7", with: "")).execute().allResults()
        var want: [String] = []
        for r in all {
            guard let id = r.string(forKey: "id") else { continue }
            let routed = try db.routing(ofDocumentWithID: id)?.current.channels ?? []
            if !routed.isDisjoint(with: channels) { want.append(r.toJSON()) }
        }
        if sql.contains(" LIMIT 7") { want = Array(want.prefix(7)) }
        #expect(got == want, "\(what): \(sql) in \(channels.sorted())")
    }

    func compareCount(_ db: Database, lower: Int, channels: Set<String>, _ what: String) throws {
        let q = try db.createQuery("SELECT count(*) AS n FROM _ WHERE n >= \(lower)")
        q.channels = channels
        let got = try q.execute().allResults().first?.int(forKey: "n")
        var want = 0
        for r in try db.createQuery("SELECT META().id AS id FROM _ WHERE n >= \(lower)").execute().allResults() {
            let routed = try db.routing(ofDocumentWithID: r.string(forKey: "id") ?? "")?.current.channels ?? []
            if !routed.isDisjoint(with: channels) { want += 1 }
        }
        #expect(got == want, "\(what): count from \(lower) in \(channels.sorted())")
    }

    @Test func randomizedAgainstTheRouting() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["SETTEE_CHANNEL_INDEX_SEED"] ?? "") ?? UInt64.random(in: 0 ... UInt64(UInt32.max))
        print("ChannelIndexTests.randomizedAgainstTheRouting seed \(seed) (SETTEE_CHANNEL_INDEX_SEED)")
        var rng = SplitMix(seed: seed)
        func below(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        func channels() -> [JSONValue] { (0 ..< below(4)).map { _ in .string(Self.channelNames[below(Self.channelNames.count)]) } }
        let dir = try TemporaryDirectory()
        var db = try openDatabase(dir)
        defer { try? db.close() }
        db.setRouter(Self.router(alt: false))
        // Half the documents exist before the index (its build reads their routing).
        func body() -> [String: JSONValue] {
            // A few values too long for a key: the index lists those documents by ID.
            let n: JSONValue = below(25) == 0 ? .string(String(repeating: "w", count: 1100) + "\(below(5))") : .int(Int64(below(60)))
            return ["n": n, "channels": .array(channels()), "alt": .array(channels())]
        }
        func save(_ i: Int) throws {
            let m = try db.document(withID: "d\(i)")?.toMutable() ?? MutableDocument(id: "d\(i)")
            m.setData(body())
            try db.saveDocument(m)
        }
        for i in 0 ..< 120 { try save(i) }
        try db.createIndex(ValueIndexConfiguration(["n"], byChannel: true), name: "n")
        for i in 120 ..< 240 { try save(i) }
        let queries = ["SELECT META().id AS id, n FROM _ WHERE n >= $lo ORDER BY n LIMIT 7",
                       "SELECT META().id AS id, n FROM _ WHERE n >= $lo ORDER BY n DESC LIMIT 7",
                       "SELECT META().id AS id FROM _ WHERE n BETWEEN $lo AND $hi ORDER BY n",
                       "SELECT META().id AS id, n FROM _ WHERE n IN [$lo, $hi] ORDER BY n"]
        func round(_ what: String, indexed: Bool = true) throws {
            let report = try db.check()
            #expect(report.isHealthy, "\(what): \(report.problems)")
            for _ in 0 ..< 6 {
                var set = Set<String>()
                for _ in 0 ..< 1 + below(3) { set.insert(Self.channelNames[below(Self.channelNames.count)]) }
                if below(8) == 0 { set.insert("none-such") }
                let lo = below(60), hi = lo + below(20)
                for sql in queries {
                    let text = sql.replacingOccurrences(of: "$lo", with: "\(lo)").replacingOccurrences(of: "$hi", with: "\(hi)")
                    try compare(db, text, channels: set, what)
                }
                try compareCount(db, lower: lo, channels: set, what)
            }
            let q = try db.createQuery("SELECT META().id FROM _ WHERE n >= 3 ORDER BY n LIMIT 7")
            q.channels = ["a"]
            #expect(try q.explain().contains(indexed ? "BY CHANNEL" : "CHANNELS: the current documents of 'a'"), "\(what)")
            let empty = try db.createQuery("SELECT META().id FROM _ WHERE n >= 0")
            empty.channels = []
            #expect(try empty.execute().allResults().isEmpty)
        }
        try round("built and saved")
        // Edits (moving channels), deletions and purges.
        for _ in 0 ..< 150 {
            let i = below(260)
            switch below(10) {
            case 0:
                if let d = try db.document(withID: "d\(i)") { try db.deleteDocument(d) }
            case 1:
                if try db.document(withID: "d\(i)") != nil { try db.purgeDocument(withID: "d\(i)") }
            default:
                try save(i)
            }
        }
        try round("edited")
        // Another router: every document's channels change without a new revision.
        db.setRouter(Self.router(alt: true))
        _ = try db.reroute()
        try round("rerouted")
        try db.close()
        db = try openDatabase(dir)
        db.setRouter(Self.router(alt: true))
        try round("reopened")
        // Without the index the same queries read the channels' documents.
        try db.deleteIndex(forName: "n")
        try round("no index", indexed: false)
    }

    /// A definition kept by channel is another index than the same one without: creating it
    /// replaces the plain one (the server's Mango indexes moved to it so).
    @Test func byChannelIsPartOfTheDefinition() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        db.setRouter(Self.router(alt: false))
        for i in 0 ..< 20 {
            try db.saveDocument(MutableDocument(id: "d\(i)", data: ["n": .int(Int64(i)), "channels": [.string(i % 2 == 0 ? "even" : "odd")]]))
        }
        try db.createIndex(ValueIndexConfiguration(["n"]), name: "n")
        let plain = try #require(try db.indexInfo(forName: "n"))
        #expect(plain.entryCount == 20)
        try db.createIndex(ValueIndexConfiguration(["n"], byChannel: true), name: "n")
        // Each document's entry, and once more under its one channel.
        #expect(try db.indexInfo(forName: "n")?.entryCount == 40)
        let q = try db.createQuery("SELECT META().id FROM _ WHERE n >= 5 ORDER BY n LIMIT 3")
        q.channels = ["even"]
        #expect(try q.execute().allResults().map { $0.string(at: 0) } == ["d6", "d8", "d10"])
        #expect(try q.explain().contains("BY CHANNEL: the index's entries of 'even' only"))
        try db.createIndex(ValueIndexConfiguration(["n"]), name: "n")
        #expect(try db.indexInfo(forName: "n")?.entryCount == 20)
        #expect(try q.execute().allResults().map { $0.string(at: 0) } == ["d6", "d8", "d10"])
        // A plain index is not read for a query limited to channels: their documents are.
        #expect(try q.explain().contains("SCAN THE CHANNELS' DOCUMENTS"))
        #expect(try q.explain().contains("CHANNELS: the current documents of 'even'"))
        #expect(try db.check().isHealthy)
    }

    /// A query limited to channels never evaluates its WHERE on another document: a regular
    /// expression that fails on a document outside them (it backtracks past the budget there)
    /// answers as if that document did not exist, with no index, with a plain index (which the
    /// query then does not read) and with one kept by channel; the same query unlimited fails.
    @Test func whereNeverRunsOutsideTheChannels() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        db.setRouter(Self.router(alt: false))
        let evil = String(repeating: "a", count: 40) + "!"
        for i in 0 ..< 30 {
            try db.saveDocument(MutableDocument(id: "r\(i)", data: ["s": .string(i % 2 == 0 ? "aaa" : "bbb"), "n": .int(Int64(i)), "channels": ["red"]]))
        }
        try db.saveDocument(MutableDocument(id: "hidden", data: ["s": .string(evil), "n": 5, "channels": ["blue"]]))
        try db.saveDocument(MutableDocument(id: "unrouted", data: ["s": .string(evil), "n": 6]))
        let sql = "SELECT META().id AS id FROM _ WHERE REGEXP_LIKE(s, '^(a+)+$') AND n >= 0 ORDER BY n"
        func run(_ what: String) throws {
            let limited = try db.createQuery(sql)
            limited.channels = ["red"]
            let ids = try limited.execute().allResults().compactMap { $0.string(forKey: "id") }
            #expect(ids == stride(from: 0, to: 30, by: 2).map { "r\($0)" }, "\(what)")
            let count = try db.createQuery("SELECT count(*) AS c FROM _ WHERE REGEXP_LIKE(s, '^(a+)+$') AND n >= 0")
            count.channels = ["red", "green"]
            #expect(try count.execute().allResults().first?.int(forKey: "c") == 15, "\(what)")
            #expect(throws: SetteeError.self, "\(what): unlimited") { try db.createQuery(sql).execute().allResults() }
        }
        try run("no index")
        try db.createIndex(ValueIndexConfiguration(["n"]), name: "n")
        try run("a plain index")
        let limited = try db.createQuery(sql)
        limited.channels = ["red"]
        #expect(try limited.indexUsed() == nil)
        #expect(try db.createQuery(sql).indexUsed() == "n")
        try db.createIndex(ValueIndexConfiguration(["n"], byChannel: true), name: "n")
        try run("an index kept by channel")
        #expect(try limited.indexUsed() == "n")
        // A full-text search ranks by every document's words: it cannot be limited.
        try db.createIndex(FullTextIndexConfiguration(["s"]), name: "text")
        let search = try db.createQuery("SELECT META().id FROM _ WHERE MATCH(text, 'aaa')")
        search.channels = ["red"]
        #expect(throws: SetteeError.self) { try search.execute() }
        #expect(throws: SetteeError.self) { try search.explain() }
    }
}
