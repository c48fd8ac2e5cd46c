import Foundation
import Testing
import Synchronization
import SetteeCrashKit
@_spi(Server) @testable import Settee

/// Map indexes: rows made by an application function, kept in the commit of every write,
/// read by key ranges in collation order; detached and re-attached across opens.
@Suite struct MapIndexTests {
    /// Emits `[type, n]` → title, and a second row keyed by each tag.
    static let byType = MapIndexConfiguration(version: "1") { doc in
        guard case .string(let type)? = doc.properties["type"] else { return [] }
        var rows = [MapIndexEmission(key: [.string(type), doc.properties["n"] ?? nil], value: doc.properties["title"] ?? nil)]
        if case .array(let tags)? = doc.properties["tags"] {
            for t in tags { rows.append(MapIndexEmission(key: t, value: 1)) }
        }
        return rows
    }

    private func doc(_ id: String, _ type: String, _ n: Int, tags: [String] = []) -> MutableDocument {
        MutableDocument(id: id, data: ["type": .string(type), "n": .int(Int64(n)), "title": .string("t-\(id)"),
                                       "tags": .array(tags.map(JSONValue.string))])
    }

    private func rows(_ db: Database, _ name: String = "by-type", _ ranges: [MapIndexRange] = [MapIndexRange()],
                      descending: Bool = false) throws -> [MapIndexRow] {
        var out: [MapIndexRow] = []
        try db.mapIndexRows(name, ranges: ranges, descending: descending) { out.append($0); return true }
        return out
    }

    @Test func rowsFollowEveryWrite() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.saveDocument(doc("a", "task", 2, tags: ["x", "y"]))
        try db.saveDocument(doc("b", "task", 1))
        try db.saveDocument(doc("c", "list", 5, tags: ["x"]))
        try db.createIndex(Self.byType, name: "by-type")
        #expect(try db.indexes == ["by-type"])
        // Strings sort before arrays; equal keys by document ID.
        #expect(try rows(db).map { "\($0.key)|\($0.documentID)" }
                == ["\"x\"|a", "\"x\"|c", "\"y\"|a", "[\"list\",5]|c", "[\"task\",1]|b", "[\"task\",2]|a"])
        #expect(try db.mapIndexInfo(forName: "by-type") == MapIndexInfo(version: "1", isReady: true, isAttached: true, rowCount: 6))
        #expect(try rows(db, "by-type", [.key("x")]).map(\.documentID) == ["a", "c"])
        #expect(try rows(db, "by-type", [.key("x")], descending: true).map(\.documentID) == ["c", "a"])
        #expect(try rows(db, "by-type", [.key(["task", 1])]).map(\.value) == ["t-b"])

        // An update moves its rows, a delete and a purge remove them, a batch does both.
        let a = try #require(try db.document(withID: "a")).toMutable()
        a["tags"] = ["z"]
        try db.saveDocument(a)
        #expect(try rows(db, "by-type", [.key("x")]).map(\.documentID) == ["c"])
        #expect(try rows(db, "by-type", [.key("z")]).map(\.documentID) == ["a"])
        try db.deleteDocument(try #require(try db.document(withID: "c")))
        try db.purgeDocument(withID: "b")
        #expect(try rows(db).map(\.documentID) == ["a", "a"])
        try db.inBatch {
            try db.saveDocument(doc("d", "task", 0))
            try db.saveDocument(doc("e", "note", 0))
        }
        #expect(try rows(db).map(\.documentID) == ["a", "e", "d", "a"])
        #expect(try db.mapIndexInfo(forName: "by-type")?.rowCount == 4)

        // Ranges: start/end with document IDs, exclusive ends, descending.
        var r = MapIndexRange()
        r.startKey = ["task"]
        r.endKey = ["task", [:]]
        #expect(try rows(db, "by-type", [r]).map(\.documentID) == ["d", "a"])
        #expect(try rows(db, "by-type", [MapIndexRange.key("nothing")]).isEmpty)
        var desc = MapIndexRange()
        desc.startKey = ["task", [:]]
        desc.endKey = ["task", 0]
        desc.inclusiveEnd = false
        #expect(try rows(db, "by-type", [desc], descending: true).map(\.documentID) == ["a"])

        // Misuse.
        #expect { try rows(db, "nothing") } throws: { ($0 as? SetteeError)?.code == .notFound }
        try db.createIndex(ValueIndexConfiguration(["type"]), name: "values")
        #expect(try db.indexInfo(forName: "values") == IndexInfo(name: "values", kind: .value, isReady: true, entryCount: 3))
        #expect(try db.indexInfo(forName: "by-type") == IndexInfo(name: "by-type", kind: .map, isReady: true, entryCount: 4))
        #expect(try db.indexInfo(forName: "none") == nil)
        #expect { try db.mapIndexInfo(forName: "values") } throws: { ($0 as? SetteeError)?.code == .invalidParameter }
        #expect { try db.createIndex(MapIndexConfiguration(version: "", map: { _ in [] }), name: "m") } throws: { _ in true }
        // The same version again keeps the rows; deleting removes them.
        try db.createIndex(Self.byType, name: "by-type")
        #expect(try rows(db).count == 4)
        try db.deleteIndex(forName: "by-type")
        #expect(try db.mapIndexInfo(forName: "by-type") == nil)
    }

    @Test func aDocumentWhoseFunctionThrowsHasNoRows() throws {
        struct Refused: Error {}
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.createIndex(MapIndexConfiguration(version: "1") { doc in
            if doc.id.hasPrefix("bad") { throw Refused() }
            return [MapIndexEmission(key: .string(doc.id), value: nil),
                    MapIndexEmission(key: .string(String(repeating: "k", count: 10_000)), value: nil)]
        }, name: "m")
        try db.saveDocument(MutableDocument(id: "bad1"))
        try db.saveDocument(MutableDocument(id: "good"))
        // The over-long key is left out, the write goes on.
        #expect(try rows(db, "m").map(\.documentID) == ["good"])
        #expect(try db.document(withID: "bad1") != nil)
    }

    /// A function that takes many documents is called once per 256 of a commit or a build
    /// step; when a call throws, each document is given to it alone.
    @Test func aBatchFunctionIsCalledPerBlockOfDocuments() throws {
        struct Refused: Error {}
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 300 { try db.saveDocument(MutableDocument(id: String(format: "b%03d", i), data: ["n": .int(Int64(i))])) }
        let calls = Atomic<Int>(0)
        let config = MapIndexConfiguration(version: "1", mapBatch: { docs in
            calls.add(1, ordering: .relaxed)
            if docs.contains(where: { $0.id == "bad" }) { throw Refused() }
            return docs.map { [MapIndexEmission(key: $0.properties["n"] ?? nil, value: nil)] }
        })
        try db.createIndex(config, name: "b")
        // The build: 300 documents, one step, two calls.
        #expect(calls.load(ordering: .relaxed) == 2)
        #expect(try rows(db, "b").count == 300)
        calls.store(0, ordering: .relaxed)
        try db.inBatch {
            for i in 300 ..< 600 { try db.saveDocument(MutableDocument(id: "c\(i)", data: ["n": .int(Int64(i))])) }
            try db.saveDocument(MutableDocument(id: "bad", data: ["n": 1]))
        }
        // 301 documents in one commit: two calls; the one with "bad" throws, and its
        // documents are mapped alone (all but "bad" get their rows).
        let made = calls.load(ordering: .relaxed)
        #expect(made >= 3 && made <= 2 + 256, "\(made) calls")
        #expect(try rows(db, "b").count == 600)
        #expect(try rows(db, "b").allSatisfy { $0.documentID != "bad" })
    }

    @Test func aDetachedIndexIsRebuiltWhenItsFunctionComesBack() throws {
        let dir = try TemporaryDirectory()
        do {
            let db = try openDatabase(dir)
            for i in 0 ..< 50 { try db.saveDocument(doc("d\(i)", "task", i)) }
            try db.createIndex(Self.byType, name: "by-type")
            try db.close()
        }
        do {
            // Given again before any write: the rows are kept and stay whole.
            let db = try openDatabase(dir)
            #expect(try db.mapIndexInfo(forName: "by-type")?.isAttached == false)
            #expect(try rows(db).count == 50)
            try db.createIndex(Self.byType, name: "by-type")
            try db.saveDocument(doc("new", "task", 100))
            #expect(try rows(db).count == 51)
            try db.close()
        }
        do {
            // Written to first: the index leaves the queries until its function is given.
            let db = try openDatabase(dir)
            try db.saveDocument(doc("later", "task", 200))
            #expect(try db.mapIndexInfo(forName: "by-type")?.isReady == false)
            #expect { try rows(db) } throws: { ($0 as? SetteeError)?.code == .busy }
            try db.createIndex(Self.byType, name: "by-type")
            #expect(try rows(db).count == 52)
            // Another version rebuilds it with the new function.
            try db.createIndex(MapIndexConfiguration(version: "2") { d in [MapIndexEmission(key: .string(d.id), value: 2)] }, name: "by-type")
            #expect(try rows(db).count == 52)
            #expect(try rows(db).allSatisfy { $0.value == 2 && $0.key == .string($0.documentID) })
            try db.close()
        }
    }

    @Test func randomizedAgainstAReference() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["SETTEE_MAP_SEED"] ?? "") ?? UInt64.random(in: 0 ... UInt64(UInt32.max))
        print("MapIndexTests.randomizedAgainstAReference seed \(seed) (SETTEE_MAP_SEED)")
        var rng = SplitMix(seed: seed)
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        let keys: [JSONValue] = [nil, false, true, 0, 1, 1.5, -3, "a", "B", "b", "é", ["a"], ["a", 1], ["a", 2], ["b"], [:], ["k": 1]]
        func pick() -> JSONValue { keys[Int(rng.next() % UInt64(keys.count))] }
        let config = MapIndexConfiguration(version: "r") { d in
            guard case .array(let ks)? = d.properties["ks"] else { return [] }
            return ks.map { MapIndexEmission(key: $0, value: .string(d.id)) }
        }
        // Half the documents before the build, half after.
        var model: [String: [JSONValue]] = [:]
        func write(_ i: Int) throws {
            let id = "d\(rng.next() % 40)"
            if rng.next() % 5 == 0, let d = try db.document(withID: id), !d.isDeleted {
                try db.deleteDocument(d)
                model[id] = nil
                return
            }
            let ks = (0 ..< Int(rng.next() % 3)).map { _ in pick() }
            let m = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
            m["ks"] = .array(ks)
            try db.saveDocument(m)
            model[id] = ks
        }
        for i in 0 ..< 100 { try write(i) }
        try db.createIndex(config, name: "r")
        for i in 0 ..< 100 { try write(i) }
        var expected: [(key: JSONValue, id: String)] = []
        for (id, ks) in model { for k in ks { expected.append((k, id)) } }
        expected.sort { a, b in
            let c = (try? JSONValue.collationOrder(a.key, b.key)) ?? .orderedSame
            return c != .orderedSame ? c == .orderedAscending : Array(a.id.utf8).lexicographicallyPrecedes(Array(b.id.utf8))
        }
        let all = try rows(db, "r")
        #expect(all.map(\.documentID) == expected.map(\.id), "seed \(seed)")
        for _ in 0 ..< 60 {
            let (lo, hi) = (pick(), pick())
            let descending = rng.next() % 2 == 0
            let inclusive = rng.next() % 2 == 0
            var range = MapIndexRange()
            range.startKey = lo
            range.endKey = hi
            range.inclusiveEnd = inclusive
            let got = try rows(db, "r", [range], descending: descending).map(\.documentID)
            let ordered = descending ? Array(expected.reversed()) : expected
            let want = ordered.filter { e in
                let s = (try? JSONValue.collationOrder(e.key, lo)) ?? .orderedSame
                let t = (try? JSONValue.collationOrder(e.key, hi)) ?? .orderedSame
                let afterStart = descending ? s != .orderedDescending : s != .orderedAscending
                let beforeEnd = descending ? (inclusive ? t != .orderedAscending : t == .orderedDescending)
                                           : (inclusive ? t != .orderedDescending : t == .orderedAscending)
                return afterStart && beforeEnd
            }.map(\.id)
            #expect(got == want, "seed \(seed): \(lo) … \(hi) descending \(descending) inclusive \(inclusive)")
        }
    }

    /// A view query is a statement of the one tree, planned by the one planner: rows are read one
    /// by one, counts from the index's counts wherever they answer (one range, no values, a
    /// level the index keeps), and other groups by walking the rows.
    @Test func viewQueriesArePlannedByTheOnePlanner() throws {
        func plan(_ ranges: [MapIndexRange], _ grouping: MapIndexGrouping?, values: Bool = false, descending: Bool = false) throws -> (QueryPlan.MapReading?, String) {
            let source = SelectStatement.MapSource(index: "v", ranges: ranges, descending: descending, grouping: grouping, readingValues: values)
            let statement = source.statement
            #expect(statement.mapSource == source && statement.orderBy.first?.descending == descending)
            let plan = try QueryPlanner.plan(statement, indexes: [])
            return (plan.mapScan?.reading, plan.explanation(statement))
        }
        var range = MapIndexRange()
        range.startKey = ["a"]
        range.endKey = ["a", [:] as JSONValue]
        range.inclusiveEnd = false
        let all = MapIndexRange()
        #expect(try plan([all], nil).0 == .rows)
        #expect(try plan([all], .all).0 == .rowCount)
        #expect(try plan([range], .all).0 == .groupCounts(level: 1))
        #expect(try plan([range], .level(1)).0 == .groupCounts(level: 1))
        #expect(try plan([range], .level(2)).0 == .groupCounts(level: 2))
        #expect(try plan([range], .level(3)).0 == .groupedRows)
        #expect(try plan([range], .exact).0 == .groupedRows)
        #expect(try plan([range], .level(1), values: true).0 == .groupedRows)
        #expect(try plan([range, all], .level(1)).0 == .groupedRows)
        let (_, text) = try plan([range], .level(2), descending: true)
        #expect(text.contains("SCAN MAP INDEX v BACKWARDS"), "\(text)")
        #expect(text.contains(#"RANGE ["a"] TO ["a",{}], without the end"#), "\(text)")
        #expect(text.contains("counted from the index's counts of its level-2 groups"), "\(text)")
        #expect(try plan([all], .all).1.contains("COUNT every row: the index's count, no row read"))
    }

    /// Groups read from the stored collation keys are the rows grouped by their JSON keys: the
    /// same groups, in the same order, with their rows' counts and values, for every grouping,
    /// range and direction (keys of several lengths; `1` and `1.0` one key, `"b"` and `"B"` two).
    @Test func groupsAreTheRowsGroupedByTheirKeys() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["SETTEE_MAP_SEED"] ?? "") ?? UInt64.random(in: 0 ... UInt64(UInt32.max))
        print("MapIndexTests.groupsAreTheRowsGroupedByTheirKeys seed \(seed) (SETTEE_MAP_SEED)")
        var rng = SplitMix(seed: seed)
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        let parts: [JSONValue] = [nil, true, 1, 1.0, 2, "a", "B", "b", "é", ["x"], ["k": 1]]
        func part() -> JSONValue { parts[Int(rng.next() % UInt64(parts.count))] }
        func key() -> JSONValue {
            switch rng.next() % 6 {
            case 0: return part()
            default: return .array((0 ..< Int(rng.next() % 4)).map { _ in part() })
            }
        }
        try db.createIndex(MapIndexConfiguration(version: "g") { d in
            guard case .array(let ks)? = d.properties["ks"] else { return [] }
            return ks.enumerated().map { MapIndexEmission(key: $1, value: .int(Int64($0 + 1))) }
        }, name: "g")
        for i in 0 ..< 150 {
            try db.saveDocument(MutableDocument(id: "d\(i)", data: ["ks": .array((0 ..< Int(rng.next() % 3)).map { _ in key() })]))
        }
        func reference(_ rows: [MapIndexRow], _ grouping: MapIndexGrouping) throws -> [(JSONValue, Int, [JSONValue])] {
            var out: [(JSONValue, Int, [JSONValue])] = []
            for row in rows {
                let k = MapIndexStore.groupKey(row.key, grouping)
                if let last = out.last, try JSONValue.collationOrder(last.0, k) == .orderedSame {
                    out[out.count - 1].1 += 1
                    out[out.count - 1].2.append(row.value)
                } else {
                    out.append((k, 1, [row.value]))
                }
            }
            return out
        }
        let groupings: [MapIndexGrouping] = [.all, .exact, .level(1), .level(2), .level(3)]
        for round in 0 ..< 120 {
            // Documents change between rounds: the group counts the index keeps follow.
            if round % 10 == 9 {
                for _ in 0 ..< 12 {
                    let id = "d\(rng.next() % 170)"
                    if rng.next() % 4 == 0, let doc = try db.document(withID: id) {
                        try db.deleteDocument(doc)
                    } else {
                        let doc = try db.document(withID: id)?.toMutable() ?? MutableDocument(id: id)
                        doc["ks"] = .array((0 ..< Int(rng.next() % 3)).map { _ in key() })
                        try db.saveDocument(doc)
                    }
                }
            }
            let grouping = groupings[round % groupings.count]
            let descending = rng.next() % 2 == 0
            var ranges = [MapIndexRange()]
            if round >= groupings.count {
                var (lo, hi) = (key(), key())
                if try JSONValue.collationOrder(lo, hi) == (descending ? .orderedAscending : .orderedDescending) { swap(&lo, &hi) }
                ranges[0].startKey = rng.next() % 5 == 0 ? nil : lo
                ranges[0].endKey = rng.next() % 5 == 0 ? nil : hi
                ranges[0].inclusiveEnd = rng.next() % 2 == 0
                if ranges[0].startKey != nil && rng.next() % 3 == 0 { ranges[0].startDocumentID = "d\(rng.next() % 170)" }
                if ranges[0].endKey != nil && rng.next() % 3 == 0 { ranges[0].endDocumentID = "d\(rng.next() % 170)" }
            }
            let want = try reference(try rows(db, "g", ranges, descending: descending), grouping)
            var got: [(JSONValue, Int, [JSONValue])] = []
            var values: [JSONValue] = []
            try db.mapIndexGroups("g", ranges: ranges, descending: descending, grouping: grouping, readingValues: true,
                                  value: { values.append($0) }, group: { k, n in
                got.append((k, n, values))
                values = []
                return true
            })
            #expect(got.map(\.0) == want.map(\.0), "seed \(seed) round \(round) \(grouping)")
            #expect(got.map(\.1) == want.map(\.1) && got.map(\.2) == want.map(\.2), "seed \(seed) round \(round) \(grouping)")
            // Counting alone reads no value; stopping after one group stops.
            var counts: [Int] = []
            try db.mapIndexGroups("g", ranges: ranges, descending: descending, grouping: grouping, readingValues: false,
                                  value: { _ in Issue.record("a value read while counting") }, group: { _, n in counts.append(n); return true })
            #expect(counts == want.map(\.1), "seed \(seed) round \(round)")
            var first = 0
            try db.mapIndexGroups("g", ranges: ranges, descending: descending, grouping: grouping, readingValues: false,
                                  value: { _ in }, group: { _, _ in first += 1; return false })
            #expect(first == min(1, want.count))
        }
        #expect(throws: SetteeError.self) {
            try db.mapIndexGroups("g", grouping: .level(0), readingValues: false, value: { _ in }, group: { _, _ in true })
        }
        // The counts kept are the rows': the check compares them, and mends one that is not.
        #expect(try db.check().isHealthy, "seed \(seed)")
        let tree = try #require(db.core.parts.queries.indexSet.withLock { $0.indexes.first { $0.name == "g" }?.tree })
        let damaged = try db.core.write { c -> Bool in
            var key: [UInt8]?
            try c.tx.forEach(in: tree, from: [MapIndexStore.summaryTag], reverse: false) { k, _ in
                if k.first == MapIndexStore.summaryTag { key = Array(k) }
                return false
            }
            guard let key else { return false }
            try c.tx.put(key, withUnsafeBytes(of: UInt64(1_000).littleEndian, Array.init), in: tree)
            return true
        }
        #expect(damaged)
        let problem = try #require(try db.check().problems.first { $0.message.hasPrefix("index g") })
        #expect(problem.isRepairable && problem.message.contains("group count"))
        _ = try db.check(repair: true)
        #expect(try db.check().isHealthy)
        let want = try reference(try rows(db, "g", [MapIndexRange()], descending: false), .level(1))
        var counts: [Int] = []
        try db.mapIndexGroups("g", grouping: .level(1), readingValues: false, value: { _ in }, group: { _, n in counts.append(n); return true })
        #expect(counts == want.map(\.1), "seed \(seed)")
    }

    /// A map index built before group counts (definition version 1) is emptied at open and
    /// built again, with its counts, once its function is given.
    @Test func anIndexWithoutGroupCountsIsRebuiltWhenItsFunctionComesBack() throws {
        let dir = try TemporaryDirectory()
        var db = try openDatabase(dir)
        defer { try? db.close() }
        let config = MapIndexConfiguration(version: "1") { d in [MapIndexEmission(key: [d.properties["list"] ?? nil, .string(d.id)], value: nil)] }
        try db.createIndex(config, name: "lists")
        for i in 0 ..< 40 { try db.saveDocument(MutableDocument(id: "d\(i)", data: ["list": .int(Int64(i % 4))])) }
        let index = try #require(db.core.parts.queries.indexSet.withLock { $0.indexes.first })
        try db.core.changingIndexes { c in
            var d = index.definition
            d.olderLayout = true
            try c.tx.put(Array("lists".utf8), d.encoded(), in: c.trees.indexCatalog)
            for k in try MapIndexStore.storedSummaries(c.tx, tree: index.tree).keys { _ = try c.tx.delete(k, in: index.tree) }
        }
        try db.close()
        db = try openDatabase(dir)
        #expect(try db.mapIndexInfo(forName: "lists")?.isReady == false)
        try db.createIndex(config, name: "lists")
        #expect(try db.check().isHealthy)
        var counts: [Int] = []
        try db.mapIndexGroups("lists", grouping: .level(1), readingValues: false, value: { _ in }, group: { _, n in counts.append(n); return true })
        #expect(counts == [10, 10, 10, 10])
        let reopened = try #require(db.core.parts.queries.indexSet.withLock { $0.indexes.first })
        #expect(!reopened.definition.olderLayout)
    }

    /// A commit spends at most `mapTimePerCommit` in map functions: the documents of a batch
    /// whose function is slow are left marked for after the commit (so the write lock is not
    /// held for the function), and a read of the index makes their rows first, so it never sees
    /// a document's old rows beside its new revision; a document changed while it waits gets
    /// its new revision's rows; the marks survive a close.
    @Test func slowMapFunctionsRunAfterTheCommit() throws {
        let dir = try TemporaryDirectory()
        var config = DatabaseConfiguration(directory: dir.path)
        config.mapTimePerCommit = 0.02
        // Calls made on the thread that commits (the test's): those the commit waited for.
        let inCommit = Mutex(0)
        let slow = MapIndexConfiguration(version: "slow") { doc in
            if Thread.current.threadDictionary["committing"] != nil { inCommit.withLock { $0 += 1 } }
            if doc.properties["slow"] == true { Thread.sleep(forTimeInterval: 0.01) }
            return [MapIndexEmission(key: doc.properties["v"] ?? nil, value: .string(doc.id))]
        }
        var db = try Database(name: "db", config: config)
        try db.createIndex(slow, name: "slow")
        func pending(_ db: Database) throws -> [String] {
            let tree = try #require(db.core.parts.queries.indexSet.withLock { $0.indexes.first { $0.name == "slow" }?.tree })
            return try db.core.read { tx in try MapIndexStore.pending(tx, tree: tree, limit: 1000) }
        }
        Thread.current.threadDictionary["committing"] = true
        try db.inBatch { for i in 0 ..< 60 { try db.saveDocument(MutableDocument(id: String(format: "s%02d", i), data: ["v": .int(Int64(i)), "slow": true])) } }
        Thread.current.threadDictionary.removeObject(forKey: "committing")
        // Not every document was mapped in the commit: the rest were left for after it.
        let mapped = inCommit.withLock { $0 }
        #expect(mapped < 60, "\(mapped) of 60 mapped in the commit")
        // Changed while it may still wait: the read shows its new revision's rows only.
        let changed = "s59"
        let edit = try #require(try db.document(withID: changed)).toMutable()
        edit.setValue(.int(1000), forKey: "v")
        edit.setValue(.bool(false), forKey: "slow")
        try db.saveDocument(edit)
        let read = try rows(db, "slow")
        #expect(read.count == 60)
        #expect(read.filter { $0.documentID == changed }.map(\.key) == [.int(1000)])
        #expect(Set(read.map(\.documentID)).count == 60)
        #expect(try pending(db).isEmpty)
        // Marks outlive a close: the reopened database makes those rows before a read.
        try db.inBatch { for i in 0 ..< 60 { try db.saveDocument(MutableDocument(id: String(format: "t%02d", i), data: ["v": .int(Int64(100 + i)), "slow": true])) } }
        try db.close()
        db = try Database(name: "db", config: config)
        defer { try? db.close() }
        try db.createIndex(slow, name: "slow")
        var range = MapIndexRange()
        range.startKey = .int(100)
        range.endKey = .int(159)
        let again = try rows(db, "slow", [range])
        #expect(again.map(\.documentID) == (0 ..< 60).map { String(format: "t%02d", $0) })
        #expect(try pending(db).isEmpty)
        #expect(try db.check().isHealthy)
    }
}
