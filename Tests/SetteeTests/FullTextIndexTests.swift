import Foundation
import Testing
import Synchronization
import SetteeCrashKit
@_spi(Replication) @testable import Settee

/// Full-text indexes: created like value indexes, kept in the same commit as every write,
/// searched with MATCH and ordered by RANK from SQL++ and QueryBuilder, and checked against
/// the in-memory index of the same documents.
@Suite struct FullTextIndexTests {
    private func task(_ id: String, title: String, notes: String? = nil, type: String = "task") -> MutableDocument {
        var data: [String: JSONValue] = ["type": .string(type), "title": .string(title)]
        if let notes { data["notes"] = .string(notes) }
        return MutableDocument(id: id, data: data)
    }

    private func ids(_ db: Database, _ sql: String, _ parameters: Parameters = Parameters()) throws -> [String] {
        let q = try db.createQuery(sql)
        q.parameters = parameters
        return try q.execute().allResults().map { $0.string(at: 0) ?? "?" }
    }

    /// What the in-memory index of the database's live documents answers: IDs and scores,
    /// in ID order.
    private func reference(_ db: Database, fields: [String], language: String?, ignoreAccents: Bool = false,
                           search: String) throws -> [(String, Double)] {
        let analyzer = FullTextAnalyzer(language: language, ignoreAccents: ignoreAccents)
        var postings = InMemoryFullTextPostings(analyzer: analyzer)
        var names: [FullTextDocumentID: String] = [:]
        var n: FullTextDocumentID = 0
        for id in try ids(db, "SELECT META().id FROM _") {
            guard let doc = try db.document(withID: id) else { continue }
            let texts = fields.map { doc.string(forKey: $0) }
            guard texts.contains(where: { $0 != nil }) else { continue }
            n += 1
            names[n] = id
            postings.index(n, fields: texts.map { $0 ?? "" })
        }
        let query = try FullTextQuery(search, analyzer: analyzer)
        return try FullTextEvaluator(query: query, postings: postings).allMatches()
            .map { (names[$0.document] ?? "?", $0.score) }.sorted { $0.0 < $1.0 }
    }

    private func stored(_ db: Database, index: String, search: String) throws -> [(String, Double)] {
        let q = try db.createQuery("SELECT META().id, RANK(\(index)) FROM _ WHERE MATCH(\(index), $q)")
        q.parameters = Parameters().setString(search, forName: "q")
        return try q.execute().allResults().map { ($0.string(at: 0) ?? "?", $0.double(at: 1)) }.sorted { $0.0 < $1.0 }
    }

    private func agree(_ a: [(String, Double)], _ b: [(String, Double)]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && abs($0.1 - $1.1) <= 1e-9 * max(1, abs($0.1)) }
    }

    @Test func searchesWithStemmingStopWordsOperatorsAndRank() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.saveDocument(task("t1", title: "Buy milk", notes: "Whole milk, not skimmed milk"))
        try db.saveDocument(task("t2", title: "Go running", notes: "The runner runs in the park"))
        try db.saveDocument(task("t3", title: "Buy eggs and bread", notes: "Free-range eggs"))
        try db.saveDocument(task("t4", title: "Call the milkman"))
        try db.saveDocument(task("t5", title: "Café au lait", notes: "with fresh milk"))
        try db.saveDocument(MutableDocument(id: "n1", data: ["type": "note", "title": 42]))
        try db.createIndex(FullTextIndexConfiguration(["title", "notes"], language: "english"), name: "text")
        #expect(try db.indexes == ["text"])
        #expect(try db.check().isHealthy)

        func search(_ q: String) throws -> [String] {
            try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, '\(q.replacingOccurrences(of: "'", with: "''"))') ORDER BY META().id")
        }
        #expect(try search("milk") == ["t1", "t5"])
        #expect(try search("run") == ["t2"])                      // running, runs: stemmed
        #expect(try search("milk*") == ["t1", "t4", "t5"])        // a prefix
        #expect(try search("buy milk") == ["t1"])                 // every word
        #expect(try search("eggs OR milkman") == ["t3", "t4"])
        #expect(try search("buy NOT milk") == ["t3"])
        #expect(try search("\"skimmed milk\"") == ["t1"])         // a phrase
        #expect(try search("\"milk skimmed\"") == [])
        #expect(try search("the") == [])                          // a stop word
        #expect(try search("cafe") == [])                         // accents kept
        // Rank: the document that says "milk" three times in few words comes first.
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'milk') ORDER BY RANK(text) DESC") == ["t1", "t5"])
        // With other conditions, parameters, aliases and a limit.
        #expect(try ids(db, "SELECT META().id FROM _ AS t WHERE t.type = 'task' AND MATCH(t.text, $q) ORDER BY RANK(t.text) DESC LIMIT 1",
                        Parameters().setString("milk OR skimmed", forName: "q")) == ["t1"])
        #expect(try ids(db, "SELECT count(*) FROM _ WHERE MATCH(text, 'buy')").isEmpty == false)
        let count = try db.createQuery("SELECT count(*) AS n FROM _ WHERE MATCH(text, 'buy')").execute().allResults().first?.int(forKey: "n")
        #expect(count == 2)
        // The same through QueryBuilder.
        let built = QueryBuilder.select(SelectResult.expression(Meta.id))
            .from(DataSource.database(db))
            .where(Expression.property("type").equalTo(Expression.string("task"))
                .and(FullTextFunction.match(index: "text", query: "milk")))
            .orderBy(Ordering.expression(FullTextFunction.rank(index: "text")).descending())
        #expect(try built.execute().allResults().map { $0.string(at: 0) } == ["t1", "t5"])
        let parameterized = QueryBuilder.select(SelectResult.expression(Meta.id), SelectResult.expression(FullTextFunction.rank(index: "text")))
            .from(DataSource.database(db))
            .where(FullTextFunction.match(index: "text", query: Expression.parameter("q")))
        parameterized.parameters = Parameters().setString("eggs", forName: "q")
        let rows = try parameterized.execute().allResults()
        #expect(rows.map { $0.string(at: 0) } == ["t3"] && rows[0].double(at: 1) > 0)
        // explain says what is read.
        let plan = try db.createQuery("SELECT title FROM _ WHERE MATCH(text, 'milk') AND type = 'task'").explain()
        #expect(plan.contains("SEARCH FULL-TEXT INDEX text (title, notes)") && plan.contains("FOR 'milk'") && plan.contains("FILTER"))
        // Scores are BM25's over the index's statistics: the in-memory index of the same
        // documents gives the same.
        for q in ["milk", "buy milk", "milk* OR run", "\"fresh milk\""] {
            #expect(agree(try stored(db, index: "text", search: q), try reference(db, fields: ["title", "notes"], language: "english", search: q)), "\(q)")
        }
    }

    @Test func accentsLanguagesAndPartialIndexes() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.saveDocument(task("a", title: "Crème brûlée"))
        try db.saveDocument(task("b", title: "creme fraiche", type: "note"))
        try db.saveDocument(task("c", title: "running shoes"))
        try db.createIndex(FullTextIndexConfiguration(["title"], ignoreAccents: true), name: "plain")
        try db.createIndex(FullTextIndexConfiguration(["title"], where: "type = 'task'", language: "fr"), name: "tasks")
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(plain, 'creme') ORDER BY META().id") == ["a", "b"])
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(plain, 'run')") == [])        // no language: no stemming
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(tasks, 'crème')") == ["a"])   // partial: notes are not in it
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(tasks, 'brulee')") == [])     // accents kept
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(tasks, 'brûlées')") == ["a"]) // French stems
        // The same name with another definition replaces the index; the same one does nothing.
        try db.createIndex(FullTextIndexConfiguration(["title"], ignoreAccents: true), name: "plain")
        try db.createIndex(FullTextIndexConfiguration(["title"], language: "english"), name: "plain")
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(plain, 'run')") == ["c"])
        #expect(try db.check().isHealthy)
        try db.deleteIndex(forName: "plain")
        #expect(try db.indexes == ["tasks"])
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT META().id FROM _ WHERE MATCH(plain, 'run')").execute() }
    }

    @Test func misplacedOrMalformedSearchesAreRefused() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.saveDocument(task("a", title: "milk"))
        try db.createIndex(FullTextIndexConfiguration(["title"]), name: "text")
        try db.createIndex(ValueIndexConfiguration(["title"]), name: "titles")
        func refused(_ sql: String, _ words: String) {
            do {
                _ = try db.createQuery(sql).execute()
                Issue.record("accepted: \(sql)")
            } catch let e as SetteeError {
                #expect(e.code == .invalidParameter && e.message.contains(words), "\(sql): \(e.message)")
            } catch {
                Issue.record("\(sql): \(error)")
            }
        }
        refused("SELECT META().id FROM _ WHERE MATCH(text, 'milk') OR type = 'x'", "top level")
        refused("SELECT META().id FROM _ WHERE NOT MATCH(text, 'milk')", "top level")
        refused("SELECT MATCH(text, 'milk') FROM _", "top level")
        refused("SELECT META().id FROM _ WHERE MATCH(text, 'a') AND MATCH(text, 'b')", "one MATCH")
        refused("SELECT RANK(text) FROM _", "RANK(text) needs MATCH")
        refused("SELECT RANK(other) FROM _ WHERE MATCH(text, 'milk')", "RANK(other) needs MATCH")
        refused("SELECT META().id FROM _ WHERE MATCH(text, title)", "a string or a parameter")
        refused("SELECT META().id FROM _ WHERE MATCH(nothing, 'milk')", "no full-text index named nothing")
        refused("SELECT META().id FROM _ WHERE MATCH(titles, 'milk')", "is a value index")
        refused("SELECT META().id FROM _ WHERE MATCH(text, 42)", "must be a string")
        refused("SELECT META().id FROM _ WHERE MATCH(text, 'milk AND')", "full-text query: operator AND at position 5")
        refused("SELECT META().id FROM _ WHERE MATCH(text, '\"unclosed')", "no closing quote")
        #expect(throws: SetteeError.self) { try db.createQuery("SELECT META().id FROM _ WHERE MATCH(text)") }
        // QueryBuilder's misplaced match surfaces at execute().
        let q = QueryBuilder.select(SelectResult.expression(Meta.id)).from(DataSource.database(db))
            .where(Expression.not(FullTextFunction.match(index: "text", query: "milk")))
        #expect(throws: SetteeError.self) { try q.execute() }
        for (config, name) in [(FullTextIndexConfiguration([]), "x"), (FullTextIndexConfiguration(["title"], language: ""), "x"),
                               (FullTextIndexConfiguration(["count(*)"]), "x"), (FullTextIndexConfiguration(["title"], where: "("), "x")] {
            #expect(throws: SetteeError.self) { try db.createIndex(config, name: name) }
        }
        #expect(try db.indexes == ["text", "titles"])
    }

    @Test func everyWriteKeepsTheIndexInTheSameCommitAndReopens() throws {
        let dir = try TemporaryDirectory()
        var db = try openDatabase(dir)
        defer { try? db.close() }
        try db.createIndex(FullTextIndexConfiguration(["title", "notes"], language: "english"), name: "text")
        func healthy(_ step: String) throws {
            let report = try db.check()
            #expect(report.isHealthy, "\(step): \(report.problems)")
            for q in ["milk", "egg* OR bread", "buy NOT milk", "\"fresh milk\""] {
                #expect(agree(try stored(db, index: "text", search: q), try reference(db, fields: ["title", "notes"], language: "english", search: q)),
                        "\(step): \(q)")
            }
        }
        for i in 0 ..< 20 { try db.saveDocument(task("d\(i)", title: i % 2 == 0 ? "buy milk \(i)" : "bake bread", notes: i % 3 == 0 ? "fresh milk" : nil)) }
        try healthy("saves")
        let d0 = try #require(try db.document(withID: "d0")).toMutable()
        d0["title"] = "buy eggs"
        try db.saveDocument(d0)
        let d2 = try #require(try db.document(withID: "d2")).toMutable()
        d2["title"] = nil
        d2["notes"] = nil
        try db.saveDocument(d2)
        try healthy("updates")
        try db.deleteDocument(try #require(try db.document(withID: "d4")))
        try db.purgeDocument(withID: "d6")
        try? db.inBatch {
            try db.saveDocument(task("gone", title: "milk milk milk"))
            throw SetteeError(.conflict, "roll back")
        }
        try db.inBatch {
            try db.saveDocument(task("b1", title: "milk and bread"))
            try db.deleteDocument(try #require(try db.document(withID: "d8")))
        }
        try healthy("deletes, purges, batches")
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'milk milk')").contains("gone") == false)
        let rev1 = try #require(try db.document(withID: "d10")).revisionID ?? ""
        _ = try db.insertRevisions([ReplicatedRevision(documentID: "d10", revisionID: "2-aaaa", history: ["2-aaaa", rev1], isDeleted: false,
                                                   properties: ["title": "fresh eggs"])])
        _ = try db.insertRevisions([ReplicatedRevision(documentID: "d10", revisionID: "3-bbbb", history: ["3-bbbb", "2-bbbb", rev1], isDeleted: false,
                                                   properties: ["title": "stale bread"])])
        try healthy("replicated branches")
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'stale')") == ["d10"])
        try db.resolveConflict(withID: "d10", winningRevisionID: "2-aaaa")
        try healthy("conflict resolution")
        #expect(try ids(db, "SELECT META().id FROM _ WHERE MATCH(text, 'stale')") == [])
        try db.setDocumentExpiration(withID: "d12", expiration: Date(timeIntervalSinceNow: -10))
        _ = try db.purgeExpiredDocuments(asOf: Date())
        try healthy("expiry")
        try db.close()
        db = try openDatabase(dir)
        try healthy("reopened")
        #expect(try db.indexes == ["text"])
    }

    /// Random documents and random edits, checked after each round against the in-memory
    /// index of the same documents: matches and scores.
    @Test func storedAndInMemoryIndexesAgree() throws {
        let seed = ProcessInfo.processInfo.environment["SETTEE_FULLTEXT_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1 ... .max)
        print("FullTextIndexTests.storedAndInMemoryIndexesAgree seed \(seed) (SETTEE_FULLTEXT_SEED=\(seed) repeats it)")
        var rng = SplitMix(seed: seed)
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        let words = ["milk", "Milk", "milky", "milkman", "bread", "breads", "running", "runs", "ran", "the", "and", "café",
                     "CAFE", "naïve", "東京", "données", "x", "2026", "eggs", "egg", "fresh", "freshly"]
        func text() -> JSONValue {
            switch rng.next() % 8 {
            case 0: return .int(Int64(rng.next() % 100))
            case 1: return .null
            default:
                let n = Int(rng.next() % 9)
                return .string((0 ..< n).map { _ in words[Int(rng.next() % UInt64(words.count))] }.joined(separator: rng.next() % 3 == 0 ? ", " : " "))
            }
        }
        let languages: [String?] = [nil, "english"]
        let language = languages[Int(rng.next() % 2)]
        let ignoreAccents = rng.next() % 2 == 0
        func save(_ i: UInt64) throws {
            var data: [String: JSONValue] = [:]
            if rng.next() % 5 != 0 { data["title"] = text() }
            if rng.next() % 2 == 0 { data["notes"] = text() }
            try db.saveDocument(MutableDocument(id: "d\(i)", data: data))
        }
        for i in 0 ..< 60 { try save(UInt64(i)) }
        // Created over existing documents, then kept by writes.
        try db.createIndex(FullTextIndexConfiguration(["title", "notes"], ignoreAccents: ignoreAccents, language: language), name: "text")
        for round in 0 ..< 8 {
            for _ in 0 ..< 25 {
                let id = rng.next() % 80
                switch rng.next() % 6 {
                case 0: if let d = try db.document(withID: "d\(id)") { try db.deleteDocument(d) }
                case 1: if try db.document(withID: "d\(id)") != nil { try db.purgeDocument(withID: "d\(id)") }
                default: try save(id)
                }
            }
            #expect(try db.check().isHealthy, "round \(round), seed \(seed)")
            for _ in 0 ..< 12 {
                let a = words[Int(rng.next() % UInt64(words.count))], b = words[Int(rng.next() % UInt64(words.count))]
                let forms = ["\(a)", "\(a) \(b)", "\(a) OR \(b)", "\(a) NOT \(b)", "\(a.prefix(3))*", "\"\(a) \(b)\"", "(\(a) OR \(b)) \(a.prefix(2))*"]
                let q = forms[Int(rng.next() % UInt64(forms.count))]
                let want = try reference(db, fields: ["title", "notes"], language: language, ignoreAccents: ignoreAccents, search: q)
                let got = try stored(db, index: "text", search: q)
                #expect(agree(got, want), "round \(round), query \(q), seed \(seed): \(got) vs \(want)")
            }
        }
    }

    @Test func aDriftedIndexIsReportedAndRebuiltAndANewAnalyzerRebuildsAtOpen() throws {
        let dir = try TemporaryDirectory()
        var db = try openDatabase(dir)
        defer { try? db.close() }
        for i in 0 ..< 30 { try db.saveDocument(task("d\(i)", title: "buy milk \(i)")) }
        try db.createIndex(FullTextIndexConfiguration(["title"]), name: "text")
        let index = try #require(db.core.parts.queries.indexSet.withLock { $0.indexes.first })
        // Damage behind the library's back: a document's posting of "milk" goes.
        var removed = false
        try db.core.write { c in
            var key: [UInt8]?
            try c.tx.forEach(in: index.tree, from: FullTextIndexStore.postingKey(Array("milk".utf8), 0), reverse: false) { k, _ in
                key = Array(k)
                return false
            }
            if let key { removed = try c.tx.delete(key, in: index.tree) }
        }
        #expect(removed)
        let report = try db.check()
        let problem = try #require(report.problems.first { $0.message.hasPrefix("index text") })
        #expect(problem.isRepairable)
        _ = try db.check(repair: true)
        #expect(try db.check().isHealthy)
        #expect(try ids(db, "SELECT count(*) FROM _ WHERE MATCH(text, 'milk')").isEmpty == false)
        #expect(try db.createQuery("SELECT count(*) AS n FROM _ WHERE MATCH(text, 'milk')").execute().allResults().first?.int(forKey: "n") == 30)

        // An index made by another version of the analyzer is rebuilt when the database opens.
        try db.core.changingIndexes { c in
            var d = index.definition
            d.text?.analyzerVersion = 0
            try c.tx.put(Array("text".utf8), d.encoded(), in: c.trees.indexCatalog)
            try c.clearTree(index.tree)
        }
        try db.close()
        db = try openDatabase(dir)
        let reopened = try #require(db.core.parts.queries.indexSet.withLock { $0.indexes.first })
        #expect(reopened.isReady && reopened.definition.text?.analyzerVersion == FullTextAnalyzer.version)
        #expect(try db.check().isHealthy)
        #expect(try db.createQuery("SELECT count(*) AS n FROM _ WHERE MATCH(text, 'milk')").execute().allResults().first?.int(forKey: "n") == 30)
    }

    @Test func buildsWhileWritesGoOnAndCanBeCancelled() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.inBatch {
            for i in 0 ..< 10_000 { try db.saveDocument(task(String(format: "d%05d", i), title: "task number \(i % 97) of list \(i % 10)")) }
        }
        let stop = Atomic<Bool>(false)
        let writer = Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                let id = String(format: "d%05d", (i * 7919) % 10_000)
                if i % 5 == 0 {
                    try? db.purgeDocument(withID: id)
                } else {
                    try? db.saveDocument(self.task(id, title: "moved task \(i)"))
                }
                i += 1
            }
        }
        writer.start()
        var reports: [IndexBuildProgress] = []
        try db.createIndex(FullTextIndexConfiguration(["title"], language: "english"), name: "text") { p in
            reports.append(p)
            return true
        }
        stop.store(true, ordering: .relaxed)
        while writer.isExecuting { Thread.sleep(forTimeInterval: 0.01) }
        #expect(reports.count >= 2)
        #expect(try db.check().isHealthy)
        for q in ["moved", "task list", "number NOT moved"] {
            #expect(agree(try stored(db, index: "text", search: q), try reference(db, fields: ["title"], language: "english", search: q)), "\(q)")
        }
        #expect {
            try db.createIndex(FullTextIndexConfiguration(["type"]), name: "types") { _ in false }
        } throws: { ($0 as? SetteeError)?.code == .cancelled }
        #expect(try db.indexes == ["text"])
    }

    @Test func liveSearchesHearMatchingCommitsOnly() throws {
        let dir = try TemporaryDirectory()
        let db = try openDatabase(dir)
        defer { try? db.close() }
        try db.createIndex(FullTextIndexConfiguration(["title"], language: "english"), name: "text")
        try db.saveDocument(task("a", title: "buy milk"))
        let query = try db.createQuery("SELECT META().id FROM _ WHERE MATCH(text, 'milk') ORDER BY META().id")
        let heard = Mutex<[[String]]>([])
        let token = query.addChangeListener { change in
            heard.withLock { $0.append(change.results?.allResults().compactMap { $0.string(at: 0) } ?? ["error: \(String(describing: change.error))"]) }
        }
        defer { token.remove() }
        func wait(_ n: Int) -> [[String]] {
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, heard.withLock({ $0.count }) < n { Thread.sleep(forTimeInterval: 0.005) }
            return heard.withLock { $0 }
        }
        #expect(wait(1) == [["a"]])
        try db.saveDocument(task("b", title: "bread"))           // does not match: not heard
        try db.saveDocument(task("c", title: "Milk, fresh"))     // matches: heard
        #expect(wait(2) == [["a"], ["a", "c"]])
        let a = try #require(try db.document(withID: "a")).toMutable()
        a["title"] = "buy bread"                                  // leaves the results
        try db.saveDocument(a)
        #expect(wait(3).last == ["c"])
        Thread.sleep(forTimeInterval: 0.2)
        #expect(heard.withLock { $0.count } == 3)
    }
}
