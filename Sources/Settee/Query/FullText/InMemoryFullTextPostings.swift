/// A full-text index held in memory: a complete ``FullTextPostings`` (the one the tests run
/// queries on, and a reference for the storage implementation), indexing documents with a
/// ``FullTextAnalyzer``.
///
/// ```swift
/// var index = InMemoryFullTextPostings(analyzer: FullTextAnalyzer(language: "english"))
/// index.index(1, fields: ["Fast cars", "Cars that run fast"])
/// index.index(2, fields: ["Slow boats"])
/// let query = try FullTextQuery("car", analyzer: index.analyzer)
/// try FullTextEvaluator(query: query, postings: index).allMatches().map(\.document)   // [1]
/// ```
///
/// Per term, an array of postings sorted by document (insertion by binary search); terms kept
/// sorted by UTF-8 bytes for prefix ranges, as a B-tree would hold them.
///
/// - Note: A value type: a copy is safe to read from any thread; mutate one copy from one
///   thread at a time.
struct InMemoryFullTextPostings: FullTextPostings, Sendable {
    /// One document of a term's list.
    ///
    /// ```swift
    /// let p = InMemoryFullTextPostings.Posting(document: 7, positions: [0, 4])
    /// ```
    struct Posting: Sendable, Hashable {
        /// The document.
        var document: FullTextDocumentID
        /// The term's positions in it, ascending (their count is the term frequency).
        var positions: [Int]
    }

    /// A cursor over one term's postings.
    ///
    /// ```swift
    /// var cursor = try index.cursor(forTerm: "car")
    /// ```
    struct Cursor: FullTextPostingCursor, Sendable {
        /// The term's postings.
        let postings: [Posting]
        /// The current posting.
        var index = 0

        /// The current document, or nil past the end.
        ///
        /// ```swift
        /// while let doc = cursor.document { …; cursor.next() }
        /// ```
        var document: FullTextDocumentID? { index < postings.count ? postings[index].document : nil }

        /// The number of positions of the current posting.
        ///
        /// ```swift
        /// let tf = cursor.termFrequency
        /// ```
        var termFrequency: Int { postings[index].positions.count }

        /// The current posting's positions.
        ///
        /// ```swift
        /// let positions = cursor.positions()
        /// ```
        func positions() -> [Int] { postings[index].positions }

        /// One posting on.
        ///
        /// ```swift
        /// cursor.next()
        /// ```
        mutating func next() { if index < postings.count { index += 1 } }

        /// Binary search for the first posting at or after `target`, from the current one.
        ///
        /// ```swift
        /// cursor.seek(atLeast: 10)
        /// ```
        mutating func seek(atLeast target: FullTextDocumentID) {
            var low = index, high = postings.count
            while low < high {
                let mid = low + (high - low) / 2
                if postings[mid].document < target { low = mid + 1 } else { high = mid }
            }
            index = low
        }
    }

    /// How documents are split into terms.
    ///
    /// ```swift
    /// let query = try FullTextQuery("run", analyzer: index.analyzer)
    /// ```
    let analyzer: FullTextAnalyzer

    /// Each term's postings, sorted by document.
    private var postingsByTerm: [String: [Posting]] = [:]
    /// Every term, ascending by UTF-8 bytes.
    private var sortedTerms: [String] = []
    /// Each document's number of terms.
    private var lengths: [FullTextDocumentID: Int] = [:]
    /// Each document's distinct terms, to remove it.
    private var termsByDocument: [FullTextDocumentID: [String]] = [:]
    /// The sum of ``lengths``.
    private var totalLength = 0

    /// An empty index.
    ///
    /// ```swift
    /// let index = InMemoryFullTextPostings(analyzer: FullTextAnalyzer(language: nil))
    /// ```
    init(analyzer: FullTextAnalyzer) {
        self.analyzer = analyzer
    }

    // MARK: - Changes

    /// Indexes (or re-indexes) a document from its fields' text.
    ///
    /// ```swift
    /// index.index(1, fields: ["Title", "Notes about the title"])
    /// ```
    ///
    /// - Complexity: O(n + t·(log d + T)) for n characters, t distinct terms, d documents per
    ///   term and T terms (inserting a new term shifts the sorted term array).
    mutating func index(_ document: FullTextDocumentID, fields: [String]) {
        removeDocument(document)
        var positionsByTerm: [String: [Int]] = [:]
        let length = analyzer.forEachTerm(inFields: fields) { term, position in
            positionsByTerm[String(decoding: term, as: UTF8.self), default: []].append(position)
        }
        lengths[document] = length
        totalLength += length
        termsByDocument[document] = Array(positionsByTerm.keys)
        for (term, positions) in positionsByTerm {
            if postingsByTerm[term] == nil {
                sortedTerms.insert(term, at: Self.lowerBound(of: term, in: sortedTerms))
            }
            // In place (the dictionary's subscript with a default yields the stored array), not
            // a copy of the whole list per document.
            let posting = Posting(document: document, positions: positions)
            if let last = postingsByTerm[term]?.last, last.document < document {
                postingsByTerm[term, default: []].append(posting)   // documents indexed in order: no search
            } else {
                let at = Self.lowerBound(of: document, in: postingsByTerm[term] ?? [])
                postingsByTerm[term, default: []].insert(posting, at: at)
            }
        }
    }

    /// Removes a document; nothing happens if it is not indexed.
    ///
    /// ```swift
    /// index.removeDocument(1)
    /// ```
    mutating func removeDocument(_ document: FullTextDocumentID) {
        guard let terms = termsByDocument.removeValue(forKey: document) else { return }
        totalLength -= lengths.removeValue(forKey: document) ?? 0
        for term in terms {
            // No local copy of the list is kept, so that removing from it happens in place.
            guard let (at, count) = postingsByTerm[term].map({ (Self.lowerBound(of: document, in: $0), $0.count) }),
                  at < count, postingsByTerm[term]?[at].document == document else { continue }
            if count == 1 {
                postingsByTerm[term] = nil
                let t = Self.lowerBound(of: term, in: sortedTerms)
                if t < sortedTerms.count && sortedTerms[t] == term { sortedTerms.remove(at: t) }
            } else {
                postingsByTerm[term]?.remove(at: at)
            }
        }
    }

    /// Every term, ascending by UTF-8 bytes (for tests).
    ///
    /// ```swift
    /// print(index.terms)   // ["boat", "car", "fast", "run", "slow"]
    /// ```
    var terms: [String] { sortedTerms }

    // MARK: - FullTextPostings

    /// The number of indexed documents.
    ///
    /// ```swift
    /// let n = index.documentCount()
    /// ```
    func documentCount() -> Int { lengths.count }

    /// The sum of the documents' lengths.
    ///
    /// ```swift
    /// let total = index.totalDocumentLength()
    /// ```
    func totalDocumentLength() -> Int { totalLength }

    /// A document's number of terms (0 for an unknown document).
    ///
    /// ```swift
    /// let length = index.documentLength(of: 1)
    /// ```
    func documentLength(of document: FullTextDocumentID) -> Int { lengths[document] ?? 0 }

    /// The number of documents with `term`.
    ///
    /// ```swift
    /// let df = index.documentFrequency(of: "car")
    /// ```
    func documentFrequency(of term: String) -> Int { postingsByTerm[term]?.count ?? 0 }

    /// A cursor over `term`'s postings.
    ///
    /// ```swift
    /// var cursor = index.cursor(forTerm: "car")
    /// ```
    func cursor(forTerm term: String) -> Cursor { Cursor(postings: postingsByTerm[term] ?? []) }

    /// The terms starting with `prefix`, in byte order, from a binary search of the sorted terms.
    ///
    /// ```swift
    /// index.forEachTerm(withPrefix: "ca") { print($0); return true }
    /// ```
    func forEachTerm(withPrefix prefix: String, _ body: (String) throws -> Bool) rethrows {
        var i = Self.lowerBound(of: prefix, in: sortedTerms)
        while i < sortedTerms.count && sortedTerms[i].utf8.starts(with: prefix.utf8) {
            guard try body(sortedTerms[i]) else { return }
            i += 1
        }
    }

    // MARK: - Searching

    /// The index of the first of the sorted `terms` not before `term` (by UTF-8 bytes).
    ///
    /// ```swift
    /// Self.lowerBound(of: "car", in: ["boat", "car", "fast"])   // 1
    /// ```
    private static func lowerBound(of term: String, in terms: [String]) -> Int {
        var low = 0, high = terms.count
        while low < high {
            let mid = low + (high - low) / 2
            if terms[mid].utf8.lexicographicallyPrecedes(term.utf8) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The index of the first posting not before `document`.
    ///
    /// ```swift
    /// Self.lowerBound(of: 5, in: postings)   // where document 5 is or would go
    /// ```
    private static func lowerBound(of document: FullTextDocumentID, in list: [Posting]) -> Int {
        var low = 0, high = list.count
        while low < high {
            let mid = low + (high - low) / 2
            if list[mid].document < document { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
