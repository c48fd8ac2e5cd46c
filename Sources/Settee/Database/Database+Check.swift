internal import SetteeStorage

/// What `Database.check(repair:)` found: the documents and revisions it walked, and every
/// problem, each naming its document and what is wrong.
///
/// ```swift
/// let report = try db.check()
/// for problem in report.problems { print(problem) }
/// if !report.isHealthy { exit(4) }
/// ```
///
/// - Note: A value type; safe to share between threads.
public struct DatabaseCheckReport: Sendable, Hashable, CustomStringConvertible {
    /// One inconsistency.
    ///
    /// ```swift
    /// for p in report.problems where p.isRepairable { print("repairable:", p.documentID ?? "-", p.message) }
    /// ```
    ///
    /// - Note: A value type; safe to share between threads.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// The document concerned; nil for a problem of the database as a whole (its counters,
        /// an index entry that names no document).
        ///
        /// ```swift
        /// if let id = problem.documentID { print(try db.revisionTree(withID: id) as Any) }
        /// ```
        public var documentID: String?
        /// What is wrong, in a sentence.
        ///
        /// ```swift
        /// print(problem.message)
        /// ```
        public var message: String
        /// Whether `check(repair: true)` rewrites the document to fix it (its revision tree can be
        /// made whole from what it holds). Damaged bytes are never repairable: they are reported
        /// and left as they are.
        ///
        /// ```swift
        /// if report.problems.contains(where: \.isRepairable) { _ = try db.check(repair: true) }
        /// ```
        public var isRepairable: Bool

        /// `doc-1: revision 3-a …`, or the message alone.
        ///
        /// ```swift
        /// print(problem)
        /// ```
        public var description: String { documentID.map { "\($0): \(message)" } ?? message }
    }

    /// Documents walked (tombstones included).
    ///
    /// ```swift
    /// print(report.documents)
    /// ```
    public var documents = 0
    /// Revisions in all the revision trees walked.
    ///
    /// ```swift
    /// print(report.revisions)
    /// ```
    public var revisions = 0
    /// Everything found wrong, in document ID order, database-wide problems last.
    ///
    /// ```swift
    /// report.problems.forEach { print($0) }
    /// ```
    public var problems: [Problem] = []
    /// The IDs of the documents `check(repair: true)` rewrote.
    ///
    /// ```swift
    /// print("repaired", report.repaired.count)
    /// ```
    public var repaired: [String] = []

    /// No problems (after repairs, when they were asked for, a repaired problem is still listed
    /// and its document in ``repaired``).
    ///
    /// ```swift
    /// guard report.isHealthy else { throw CheckFailed() }
    /// ```
    public var isHealthy: Bool { problems.isEmpty }

    /// A one-line summary.
    ///
    /// ```swift
    /// print(report)   // 1200 documents, 3410 revisions, no problems
    /// ```
    public var description: String {
        let found = problems.isEmpty ? "no problems" : "\(problems.count) problem\(problems.count == 1 ? "" : "s")"
        let fixed = repaired.isEmpty ? "" : ", \(repaired.count) document\(repaired.count == 1 ? "" : "s") repaired"
        return "\(documents) documents, \(revisions) revisions, \(found)\(fixed)"
    }
}

extension Database {
    /// Checks the storage under the documents: every node and stored value of the file the
    /// current commit refers to (checksums, structure, key order, counts). Returns what it walked,
    /// in words; ``check(repair:)`` checks the documents on top.
    ///
    /// ```swift
    /// do {
    ///     print(try db.checkStorage())   // "9 trees, 3021 entries, 57 nodes, 1000 out-of-line values, height 2"
    /// } catch let e as SetteeError where e.code == .corrupted {
    ///     print("damaged:", e.message)
    /// }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/corrupted`` naming the first damage found (where and what);
    ///   ``SetteeError/Code/notOpen`` once closed; ``SetteeError/Code/io``.
    public func checkStorage() throws -> String {
        try checkOpen()
        return try translating { try core.store.check().description }
    }

    /// Checks the document layer: every document's metadata and revision tree decode, the tree
    /// holds each revision once (a revision held twice can be a leaf that another branch names
    /// as its ancestor), the stored winner, flags and body are the ones the tree gives and the
    /// body is a JSON object, and the sequence, conflict and count indexes agree with the
    /// documents. Reads one snapshot; writers go on meanwhile.
    ///
    /// With `repair`, documents whose only problems are repairable are rewritten (their tree
    /// made whole, their winner chosen again, a new sequence taken so that replication carries
    /// the change); the report lists what was found and what was repaired.
    ///
    /// ```swift
    /// let report = try db.check()
    /// if report.problems.contains(where: \.isRepairable) { print(try db.check(repair: true)) }
    /// ```
    ///
    /// Every named collection is checked after the default one; what is found in one names it
    /// (`in collection store.tasks: …`). The engine's own check (every node and value's checksum
    /// and structure) is separate: it runs on the store, `settee check` runs both.
    ///
    /// - Throws: only when the check cannot run (closed database, I/O); damage is reported, not
    ///   thrown.
    public func check(repair: Bool = false) throws -> DatabaseCheckReport {
        try checkOpen()
        var report = DatabaseCheckReport()
        var repairable: [String] = []
        var drifted: [String] = []
        try core.read { tx in
            var global: [DatabaseCheckReport.Problem] = []
            var live: UInt64 = 0
            var maxSequence: UInt64 = 0
            var sequences = Set<UInt64>()
            try tx.forEach(in: core.trees.byID, from: nil, reverse: false) { k, v in
                report.documents += 1
                guard let id = makeString(k) else {
                    global.append(.init(documentID: nil, message: "a document ID is not UTF-8", isRepairable: false))
                    return true
                }
                let found = checkDocument(tx, id: id, key: k, value: v, report: &report, live: &live)
                if let seq = found.sequence {
                    sequences.insert(seq)
                    maxSequence = max(maxSequence, seq)
                }
                if found.repairable { repairable.append(id) }
                return true
            }
            try tx.forEach(in: core.trees.bySequence, from: nil, reverse: false) { k, v in
                guard let seq = k.bigEndianU64 else {
                    global.append(.init(documentID: nil, message: "a sequence key is malformed", isRepairable: false))
                    return true
                }
                if !sequences.contains(seq) {
                    let named = (try? SequenceEntry(decoding: v)).map { " (naming \($0.documentID))" } ?? ""
                    global.append(.init(documentID: nil, message: "sequence \(seq)\(named) is no document's current sequence",
                                        isRepairable: false))
                }
                return true
            }
            try tx.forEach(in: core.trees.conflicts, from: nil, reverse: false) { k, _ in
                let conflicted = try core.meta(tx, id: k).map { $0.flags.contains(.conflicted) } ?? false
                if !conflicted {
                    global.append(.init(documentID: makeString(k), message: "listed as conflicted, but the document is not",
                                        isRepairable: false))
                }
                return true
            }
            func counter(_ key: [UInt8], _ name: String) throws -> UInt64? {
                do { return try core.counter(tx, key) } catch let e as SetteeError where e.code == .corrupted {
                    global.append(.init(documentID: nil, message: "the \(name) is malformed", isRepairable: false))
                    return nil
                }
            }
            if let stored = try counter(MetaKey.liveCount, "document count"), stored != live {
                global.append(.init(documentID: nil, message: "the document count says \(stored), but \(live) documents are live",
                                    isRepairable: false))
            }
            if let last = try counter(MetaKey.lastSequence, "last sequence"), last < maxSequence {
                global.append(.init(documentID: nil, message: "the last sequence is \(last), but a document has sequence \(maxSequence)",
                                    isRepairable: false))
            }
            report.problems += global
            drifted = try checkIndexes(tx, report: &report)
        }
        if repair {
            for id in repairable where try repairTree(id) { report.repaired.append(id) }
            // After the documents: an index is rebuilt from what they hold once repaired.
            for name in drifted { try core.repairIndex(name: name) }
        }
        // The database's check is every collection's: a named one's findings say where they are.
        if owner == nil {
            for collection in core.file.namedCores(scope: nil) {
                let sub = try Database(collection: collection, of: self).check(repair: repair)
                report.documents += sub.documents
                report.revisions += sub.revisions
                report.problems += sub.problems.map { p in
                    var p = p
                    p.message = "in collection \(collection.fullName): " + p.message
                    return p
                }
                report.repaired += sub.repaired
            }
        }
        return report
    }

    /// One document's checks; returns its sequence (when its metadata decodes) and whether
    /// every problem found is repairable.
    private func checkDocument(_ tx: some StoreReading, id: String, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
                               report: inout DatabaseCheckReport, live: inout UInt64) -> (sequence: UInt64?, repairable: Bool) {
        var problems: [DatabaseCheckReport.Problem] = []
        func problem(_ message: String, repairable: Bool = false) {
            problems.append(.init(documentID: id, message: message, isRepairable: repairable))
        }
        defer { report.problems += problems }
        let meta: DocMeta
        do { meta = try DocMeta(decoding: value) } catch {
            problem("metadata: \(error.message)")
            return (nil, false)
        }
        if !meta.flags.contains(.deleted) { live += 1 }
        let tree: RevTree
        do { tree = try core.tree(tx, meta) } catch {
            problem("revision tree: \((error as? SetteeError)?.message ?? "\(error)")")
            return (meta.sequence, false)
        }
        report.revisions += tree.revs.count

        for dup in tree.duplicateIDs() {
            let mask = tree.leafMask()
            let copies = tree.revs.indices.filter { tree.revs[$0].id == dup }
            if copies.contains(where: { mask[$0] }), let inner = copies.first(where: { !mask[$0] }),
               let child = tree.revs.indices.first(where: { tree.revs[$0].parent == inner }) {
                problem("revision \(dup) is a leaf, and the history of \(tree.revs[child].id) names it as an ancestor "
                        + "(the tree holds it twice)", repairable: true)
            } else {
                problem("revision \(dup) is held \(copies.count) times in the revision tree", repairable: true)
            }
        }

        // What a commit of this tree would have stored.
        let (w, flags) = tree.winnerAndFlags()
        let winner = tree.revs[w]
        let treeFits = winner.id == meta.revisionID && flags == meta.flags
        if winner.id != meta.revisionID {
            problem("the current revision is \(meta.revisionID), but the revision tree's winner is \(winner.id)",
                    repairable: true)
        } else if flags != meta.flags {
            problem("the stored flags (\(meta.flags.rawValue)) are not the revision tree's (\(flags.rawValue))", repairable: true)
        }
        if treeFits, winner.hasBody, winner.bodyRef != meta.bodyRef {
            problem("the current body is not the one the revision tree keeps for \(winner.id)")
        }
        do {
            let body = try core.body(tx, ref: meta.bodyRef)
            guard case .object? = try? JSONParser.parse(body) else {
                problem("the current body is not a JSON object")
                return (meta.sequence, false)
            }
        } catch {
            problem("the current body cannot be read: \((error as? SetteeError)?.message ?? "\(error)")")
        }

        do {
            let entry = try tx.withValue(forKey: [UInt8](bigEndian: meta.sequence), in: core.trees.bySequence) { b in
                try SequenceEntry(decoding: b)
            }
            if let entry {
                if entry.documentID != id || entry.revisionID != meta.revisionID || entry.flags != meta.flags {
                    problem("the changes entry at sequence \(meta.sequence) says \(entry.documentID) \(entry.revisionID)")
                }
            } else {
                problem("no changes entry at its sequence \(meta.sequence)")
            }
            let listed = try tx.withValue(forKey: key, in: core.trees.conflicts) { _ in true } ?? false
            if listed != meta.flags.contains(.conflicted) {
                problem(listed ? "listed as conflicted, but it is not" : "conflicted, but missing from the conflicts index")
            }
        } catch {
            problem("its index entries cannot be read: \((error as? SetteeError)?.message ?? "\(error)")")
        }
        return (meta.sequence, !problems.isEmpty && problems.allSatisfy(\.isRepairable))
    }

    /// Rewrites one document whose tree holds a revision twice or whose stored winner is stale:
    /// the tree made whole and committed again. False when the document is gone by then.
    private func repairTree(_ id: String) throws -> Bool {
        let key = Array(id.utf8)
        return try core.write { c -> Bool in
            guard let old = try c.meta(key) else { return false }
            // A stale winner or stale flags are fixed by the commit itself, which chooses again.
            var tree = try core.tree(c.tx, old).removingDuplicates()
            _ = try c.commit(id: id, key: key, old: old, tree: &tree)
            return true
        }
    }
}
