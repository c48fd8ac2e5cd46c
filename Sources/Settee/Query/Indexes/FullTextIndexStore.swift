internal import SetteeStorage

/// A document's terms for one full-text index: the positions of each term, and the number of
/// terms (its length, for BM25).
///
/// ```swift
/// let entry = FullTextDocumentEntry(fields: ["Buy milk", "and eggs"], analyzer: FullTextAnalyzer(language: "en"))
/// // terms: buy@0 milk@1 egg@102, length 3
/// ```
///
/// - Note: A value type; safe to share between threads.
struct FullTextDocumentEntry: Equatable, Sendable {
    /// Each term (UTF-8, as keyed) with its positions, ascending.
    var terms: [[UInt8]: [Int]]
    var length: Int

    init(fields: [String], analyzer: FullTextAnalyzer) {
        var terms: [[UInt8]: [Int]] = [:]
        length = analyzer.forEachTerm(inFields: fields) { term, position in terms[term, default: []].append(position) }
        self.terms = terms
    }

    /// A posting's stored value: the term frequency, then the positions as deltas.
    static func postingValue(_ positions: [Int]) -> [UInt8] {
        var w = ByteWriter(capacity: 2 + positions.count)
        w.varint(UInt64(positions.count))
        var last = 0
        for p in positions {
            w.varint(UInt64(p - last))
            last = p
        }
        return w.bytes
    }
}

/// The records of a full-text index, all in the index's one engine tree, each kind behind a
/// tag byte (Formats/indexes.md, "Full-text index records"):
///
/// | key | value |
/// |---|---|
/// | `01 ‖ term ‖ 00 ‖ number` | frequency varint ‖ position deltas (varints) |
/// | `02 ‖ term` | document frequency varint |
/// | `03 ‖ number` | length varint ‖ document ID |
/// | `04 ‖ document ID` | number (8 bytes, big-endian) |
/// | `05` | documents varint ‖ total length varint ‖ next number varint |
///
/// Numbers are 8 bytes big-endian, so a term's postings are one key range in number order;
/// terms hold no 0x00 byte (the tokenizer emits letters and digits only).
enum FullTextIndexStore {
    enum Tag: UInt8 { case posting = 1, term = 2, number = 3, document = 4, stats = 5 }

    struct Stats: Equatable {
        var documents: UInt64 = 0
        var totalLength: UInt64 = 0
        var nextNumber: UInt64 = 1

        func encoded() -> [UInt8] {
            var w = ByteWriter(capacity: 16)
            w.varint(documents)
            w.varint(totalLength)
            w.varint(nextNumber)
            return w.bytes
        }

        init() {}

        init(decoding b: UnsafeRawBufferPointer) throws(SetteeError) {
            var r = ByteReader(b)
            guard let d = r.varint(), let t = r.varint(), let n = r.varint(), r.atEnd else {
                throw SetteeError(.corrupted, "a full-text index's statistics are malformed")
            }
            documents = d
            totalLength = t
            nextNumber = n
        }
    }

    static func postingKey(_ term: [UInt8], _ number: UInt64) -> [UInt8] {
        var k: [UInt8] = [Tag.posting.rawValue]
        k.reserveCapacity(term.count + 10)
        k.append(contentsOf: term)
        k.append(0)
        appendNumber(number, to: &k)
        return k
    }

    static func termKey(_ term: [UInt8]) -> [UInt8] { [Tag.term.rawValue] + term }
    static func numberKey(_ number: UInt64) -> [UInt8] {
        var k: [UInt8] = [Tag.number.rawValue]
        appendNumber(number, to: &k)
        return k
    }
    static func documentKey(_ id: String) -> [UInt8] { [Tag.document.rawValue] + Array(id.utf8) }
    static let statsKey: [UInt8] = [Tag.stats.rawValue]

    static func appendNumber(_ n: UInt64, to k: inout [UInt8]) {
        withUnsafeBytes(of: n.bigEndian) { k.append(contentsOf: $0) }
    }

    static func readNumber(_ b: UnsafeRawBufferPointer) -> UInt64? {
        guard b.count == 8 else { return nil }
        return UInt64(bigEndian: b.loadUnaligned(as: UInt64.self))
    }

    /// A number record's value: the document's length, then its ID.
    static func numberValue(length: Int, id: String) -> [UInt8] {
        var w = ByteWriter(capacity: 4 + id.utf8.count)
        w.varint(UInt64(length))
        w.bytes.append(contentsOf: id.utf8)
        return w.bytes
    }

    static func parseNumberValue(_ b: UnsafeRawBufferPointer) throws(SetteeError) -> (length: UInt64, id: UnsafeRawBufferPointer) {
        var r = ByteReader(b)
        guard let length = r.varint(), r.remaining > 0 else {
            throw SetteeError(.corrupted, "a full-text index's document record is malformed")
        }
        return (length, UnsafeRawBufferPointer(rebasing: b[(b.count - r.remaining)...]))
    }

    static func stats(_ tx: some StoreReading, tree: Tree) throws -> Stats {
        try tx.withValue(forKey: statsKey, in: tree) { b throws(SetteeError) in try Stats(decoding: b) } ?? Stats()
    }

    static func varint(_ b: UnsafeRawBufferPointer, _ what: String) throws(SetteeError) -> UInt64 {
        var r = ByteReader(b)
        guard let v = r.varint(), r.atEnd else { throw SetteeError(.corrupted, "a full-text index's \(what) is malformed") }
        return v
    }

    /// Moves a document's records from `old` to `new` (either nil when the document is not
    /// in the index), keeping document frequencies and statistics. Tolerant of an index that
    /// lacks what `old` says it holds (a build still under way has not reached the
    /// document): only postings really removed lower a frequency.
    static func update(_ tx: WriteTransaction, tree: Tree, id: String, old: FullTextDocumentEntry?, new: FullTextDocumentEntry?) throws {
        if old == nil && new == nil { return }
        var stats = try stats(tx, tree: tree)
        let docKey = documentKey(id)
        let existing = try tx.withValue(forKey: docKey, in: tree) { b throws(SetteeError) -> UInt64 in
            guard let n = readNumber(b) else { throw SetteeError(.corrupted, "a full-text index's document number is malformed") }
            return n
        }
        func oldLength(_ number: UInt64) throws -> UInt64 {
            try tx.withValue(forKey: numberKey(number), in: tree) { b throws(SetteeError) in try parseNumberValue(b).length } ?? 0
        }
        guard let new else {
            guard let number = existing else { return }
            for term in old?.terms.keys ?? [:].keys where try tx.delete(postingKey(term, number), in: tree) {
                try changeFrequency(tx, tree: tree, term: term, by: -1)
            }
            stats.totalLength = stats.totalLength &- min(stats.totalLength, try oldLength(number))
            stats.documents = stats.documents &- min(stats.documents, 1)
            _ = try tx.delete(numberKey(number), in: tree)
            _ = try tx.delete(docKey, in: tree)
            try tx.put(statsKey, stats.encoded(), in: tree)
            return
        }
        let number: UInt64
        if let existing {
            number = existing
            for term in old?.terms.keys ?? [:].keys where new.terms[term] == nil {
                if try tx.delete(postingKey(term, number), in: tree) { try changeFrequency(tx, tree: tree, term: term, by: -1) }
            }
            stats.totalLength = stats.totalLength &- min(stats.totalLength, try oldLength(number))
        } else {
            number = stats.nextNumber
            guard number < UInt64.max else { throw SetteeError(.corrupted, "a full-text index has run out of document numbers") }
            stats.nextNumber = number + 1
            stats.documents += 1
            var k: [UInt8] = []
            appendNumber(number, to: &k)
            try tx.put(docKey, k, in: tree)
        }
        for (term, positions) in new.terms {
            // Unchanged postings of a document already indexed stay as they are.
            if existing != nil, old?.terms[term] == positions { continue }
            let key = postingKey(term, number)
            let had = try tx.withValue(forKey: key, in: tree) { _ in true } ?? false
            try tx.put(key, FullTextDocumentEntry.postingValue(positions), in: tree)
            if !had { try changeFrequency(tx, tree: tree, term: term, by: 1) }
        }
        try tx.put(numberKey(number), numberValue(length: new.length, id: id), in: tree)
        stats.totalLength += UInt64(new.length)
        try tx.put(statsKey, stats.encoded(), in: tree)
    }

    private static func changeFrequency(_ tx: WriteTransaction, tree: Tree, term: [UInt8], by delta: Int) throws {
        let key = termKey(term)
        let current = try tx.withValue(forKey: key, in: tree) { b throws(SetteeError) in try varint(b, "term record") } ?? 0
        let next: UInt64 = delta > 0 ? current + 1 : current &- min(current, 1)
        if next == 0 {
            _ = try tx.delete(key, in: tree)
        } else {
            var w = ByteWriter(capacity: 4)
            w.varint(next)
            try tx.put(key, w.bytes, in: tree)
        }
    }

    /// The records a set of documents makes, given their numbers: what the tree must hold
    /// (``Database/check(repair:)`` compares them).
    static func records(of documents: [(id: String, number: UInt64, entry: FullTextDocumentEntry)], nextNumber: UInt64) -> [[UInt8]: [UInt8]] {
        var out: [[UInt8]: [UInt8]] = [:]
        var frequencies: [[UInt8]: UInt64] = [:]
        var stats = Stats()
        stats.nextNumber = nextNumber
        for d in documents {
            var k: [UInt8] = []
            appendNumber(d.number, to: &k)
            out[documentKey(d.id)] = k
            out[numberKey(d.number)] = numberValue(length: d.entry.length, id: d.id)
            for (term, positions) in d.entry.terms {
                out[postingKey(term, d.number)] = FullTextDocumentEntry.postingValue(positions)
                frequencies[term, default: 0] += 1
            }
            stats.documents += 1
            stats.totalLength += UInt64(d.entry.length)
        }
        for (term, df) in frequencies {
            var w = ByteWriter(capacity: 4)
            w.varint(df)
            out[termKey(term)] = w.bytes
        }
        if !documents.isEmpty || nextNumber != 1 { out[statsKey] = stats.encoded() }
        return out
    }
}

/// A full-text index's postings read from one snapshot, for ``FullTextEvaluator``.
///
/// ```swift
/// let postings = StoredFullTextPostings(tx: tx, tree: index.tree, name: index.name)
/// let evaluator = try FullTextEvaluator(query: query, postings: postings)
/// ```
///
/// - Note: Not thread-safe; valid for the read transaction `tx`.
struct StoredFullTextPostings<Reader: StoreReading>: FullTextPostings {
    let tx: Reader
    let tree: Tree
    let name: String
    private let stats: FullTextIndexStore.Stats

    init(tx: Reader, tree: Tree, name: String) throws {
        self.tx = tx
        self.tree = tree
        self.name = name
        self.stats = try FullTextIndexStore.stats(tx, tree: tree)
    }

    func documentCount() throws -> Int { Int(clamping: stats.documents) }
    func totalDocumentLength() throws -> Int { Int(clamping: stats.totalLength) }

    func documentLength(of document: FullTextDocumentID) throws -> Int {
        guard let n = try tx.withValue(forKey: FullTextIndexStore.numberKey(document), in: tree, { b throws(SetteeError) in
            try FullTextIndexStore.parseNumberValue(b).length
        }) else { throw missing(document) }
        return Int(clamping: n)
    }

    /// The ID of the document a posting names.
    func documentID(of document: FullTextDocumentID) throws -> [UInt8] {
        guard let id = try tx.withValue(forKey: FullTextIndexStore.numberKey(document), in: tree, { b throws(SetteeError) in
            Array(try FullTextIndexStore.parseNumberValue(b).id)
        }) else { throw missing(document) }
        return id
    }

    private func missing(_ document: FullTextDocumentID) -> SetteeError {
        SetteeError(.corrupted, "full-text index \(name) names document number \(document), which it does not list; check(repair: true) rebuilds the index")
    }

    func documentFrequency(of term: String) throws -> Int {
        let n = try tx.withValue(forKey: FullTextIndexStore.termKey(Array(term.utf8)), in: tree) { b throws(SetteeError) in
            try FullTextIndexStore.varint(b, "term record")
        } ?? 0
        return Int(clamping: n)
    }

    func cursor(forTerm term: String) throws -> Cursor {
        var c = Cursor(postings: self, prefix: [FullTextIndexStore.Tag.posting.rawValue] + Array(term.utf8) + [0])
        try c.fill(from: c.prefix)
        return c
    }

    func forEachTerm(withPrefix prefix: String, _ body: (String) throws -> Bool) throws {
        let start = FullTextIndexStore.termKey(Array(prefix.utf8))
        try tx.forEach(in: tree, from: start, reverse: false) { k, _ in
            guard k.starts(with: start) else { return false }
            return try body(String(decoding: k.dropFirst(), as: UTF8.self))
        }
    }

    /// A term's postings, read from the tree a slice at a time; a seek beyond the slice reads
    /// from the target (one B-tree descent), so an intersection with a rare term skips the
    /// long lists it meets.
    struct Cursor: FullTextPostingCursor {
        let postings: StoredFullTextPostings
        let prefix: [UInt8]
        private var slice: [(document: FullTextDocumentID, frequency: Int, value: [UInt8])] = []
        private var index = 0
        /// Whether the tree holds more of this term after the slice.
        private var more = false
        /// Grows while the cursor walks, so a seek-heavy intersection reads little.
        private var sliceSize = 16

        init(postings: StoredFullTextPostings, prefix: [UInt8]) {
            self.postings = postings
            self.prefix = prefix
        }

        var document: FullTextDocumentID? { index < slice.count ? slice[index].document : nil }

        var termFrequency: Int { index < slice.count ? slice[index].frequency : 0 }

        func positions() throws -> [Int] {
            guard index < slice.count else { return [] }
            return try slice[index].value.withUnsafeBytes { b throws(SetteeError) -> [Int] in
                var r = ByteReader(b)
                let bad = SetteeError(.corrupted, "full-text index \(postings.name) holds a malformed posting")
                guard let n = r.varint(), n <= UInt64(b.count) else { throw bad }
                var out: [Int] = []
                out.reserveCapacity(Int(n))
                var p: UInt64 = 0
                for _ in 0 ..< n {
                    guard let d = r.varint() else { throw bad }
                    let (sum, overflow) = p.addingReportingOverflow(d)
                    guard !overflow, sum <= UInt64(Int.max) else { throw bad }
                    p = sum
                    out.append(Int(p))
                }
                return out
            }
        }

        mutating func next() throws {
            guard index < slice.count else { return }
            index += 1
            if index == slice.count, more, let last = slice.last {
                var from = prefix
                FullTextIndexStore.appendNumber(last.document, to: &from)
                sliceSize = min(sliceSize * 2, 512)
                try fill(from: from, skipFirst: true)
            }
        }

        mutating func seek(atLeast target: FullTextDocumentID) throws {
            guard let current = document, current < target else { return }
            if let last = slice.last, last.document >= target {
                while index < slice.count, slice[index].document < target { index += 1 }
                return
            }
            guard more else {
                index = slice.count
                return
            }
            var from = prefix
            FullTextIndexStore.appendNumber(target, to: &from)
            try fill(from: from)
        }

        /// Reads the next slice from `start` (past it when `skipFirst` and it is there).
        mutating func fill(from start: [UInt8], skipFirst: Bool = false) throws {
            var out: [(document: FullTextDocumentID, frequency: Int, value: [UInt8])] = []
            var hasMore = false
            let limit = sliceSize
            let name = postings.name
            let prefix = self.prefix
            try postings.tx.forEach(in: postings.tree, from: start, reverse: false) { k, v in
                guard k.starts(with: prefix) else { return false }
                if skipFirst && k.elementsEqual(start) { return true }
                if out.count == limit {
                    hasMore = true
                    return false
                }
                var r = ByteReader(v)
                guard let n = FullTextIndexStore.readNumber(UnsafeRawBufferPointer(rebasing: k[prefix.count...])),
                      let tf = r.varint(), tf > 0, tf <= UInt64(v.count) else {
                    throw SetteeError(.corrupted, "full-text index \(name) holds a malformed posting")
                }
                out.append((n, Int(tf), Array(v)))
                return true
            }
            slice = out
            index = 0
            more = hasMore
        }
    }
}
