import Foundation

/// BM25 relevance, the score behind Couchbase Lite's `FullTextFunction.rank(_:)`: higher for
/// documents where the query's terms are frequent, rare across the index, and in a short
/// document.
///
/// ```swift
/// let rank = FullTextRank(documentCount: 1000, averageDocumentLength: 120)
/// let idf = rank.inverseDocumentFrequency(documentFrequency: 10)
/// let score = rank.termScore(inverseDocumentFrequency: idf, termFrequency: 3, documentLength: 80)
/// ```
///
/// For one term: `idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · length / averageLength))`,
/// with `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`, k1 = 1.2, b = 0.75. This idf (Lucene's)
/// is positive even for a term in more than half the documents, so adding a matching term
/// never lowers a score. A document's score is the sum over the query's terms it contains;
/// terms under `NOT` add nothing (see ``FullTextEvaluator`` for prefixes and phrases).
///
/// - Note: A value type; safe to share between threads.
struct FullTextRank: Sendable, Hashable {
    /// Term-frequency saturation: how quickly more occurrences stop adding.
    ///
    /// ```swift
    /// print(FullTextRank.k1)   // 1.2
    /// ```
    static let k1 = 1.2
    /// Length normalisation: 0 ignores the document length, 1 divides by it fully.
    ///
    /// ```swift
    /// print(FullTextRank.b)   // 0.75
    /// ```
    static let b = 0.75

    /// N, the number of documents in the index.
    ///
    /// ```swift
    /// print(rank.documentCount)
    /// ```
    let documentCount: Int
    /// The mean number of indexed terms per document.
    ///
    /// ```swift
    /// print(rank.averageDocumentLength)
    /// ```
    let averageDocumentLength: Double

    /// Statistics of an index.
    ///
    /// ```swift
    /// let rank = FullTextRank(documentCount: 3, averageDocumentLength: 10)
    /// ```
    init(documentCount: Int, averageDocumentLength: Double) {
        self.documentCount = max(0, documentCount)
        self.averageDocumentLength = averageDocumentLength
    }

    /// Statistics from a document count and the total of their lengths.
    ///
    /// ```swift
    /// let rank = FullTextRank(documentCount: 4, totalDocumentLength: 100)   // average 25
    /// ```
    init(documentCount: Int, totalDocumentLength: Int) {
        let average = documentCount > 0 ? Double(totalDocumentLength) / Double(documentCount) : 0
        self.init(documentCount: documentCount, averageDocumentLength: average)
    }

    /// How rare a term is: `ln(1 + (N − df + 0.5) / (df + 0.5))`, df clamped to [0, N] so
    /// statistics a concurrent write left slightly off cannot make it negative or NaN.
    ///
    /// ```swift
    /// FullTextRank(documentCount: 10, averageDocumentLength: 5).inverseDocumentFrequency(documentFrequency: 1)
    /// // ln(1 + 9.5 / 1.5) ≈ 1.99
    /// ```
    func inverseDocumentFrequency(documentFrequency: Int) -> Double {
        let n = Double(documentCount)
        let df = Double(min(max(documentFrequency, 0), documentCount))
        return log(1 + (n - df + 0.5) / (df + 0.5))
    }

    /// One term's contribution to a document's score.
    ///
    /// ```swift
    /// rank.termScore(inverseDocumentFrequency: 1.99, termFrequency: 2, documentLength: 5)
    /// ```
    func termScore(inverseDocumentFrequency idf: Double, termFrequency: Int, documentLength: Int) -> Double {
        guard termFrequency > 0 else { return 0 }
        let tf = Double(termFrequency)
        // An empty index has no average: treat every document as of average length.
        let relativeLength = averageDocumentLength > 0 ? Double(documentLength) / averageDocumentLength : 1
        let norm = Self.k1 * (1 - Self.b + Self.b * relativeLength)
        return idf * tf * (Self.k1 + 1) / (tf + norm)
    }

    /// A document's score for several terms, each given as its document frequency and its
    /// frequency in the document.
    ///
    /// ```swift
    /// rank.score([(documentFrequency: 2, termFrequency: 1), (documentFrequency: 9, termFrequency: 4)], documentLength: 30)
    /// ```
    func score(_ terms: [(documentFrequency: Int, termFrequency: Int)], documentLength: Int) -> Double {
        terms.reduce(0) { sum, term in
            sum + termScore(inverseDocumentFrequency: inverseDocumentFrequency(documentFrequency: term.documentFrequency),
                            termFrequency: term.termFrequency, documentLength: documentLength)
        }
    }

    /// Matches in rank order: highest score first, equal scores by ascending document (so the
    /// order is the same on every run); the best `limit` only when given, with a bounded heap.
    ///
    /// ```swift
    /// let top10 = FullTextRank.ranked(try evaluator.allMatches(), limit: 10)
    /// ```
    ///
    /// - Complexity: O(n log n), or O(n log k) with a limit k.
    static func ranked(_ matches: [FullTextMatch], limit: Int? = nil) -> [FullTextMatch] {
        if let limit, limit < matches.count {
            guard limit > 0 else { return [] }
            // A min-heap (by rank) of the best `limit` so far: its root is the worst kept.
            var heap: [FullTextMatch] = []
            heap.reserveCapacity(limit)
            for match in matches {
                if heap.count < limit {
                    heap.append(match)
                    siftUp(&heap, heap.count - 1)
                } else if ranksBefore(match, heap[0]) {
                    heap[0] = match
                    siftDown(&heap, 0)
                }
            }
            return heap.sorted(by: ranksBefore)
        }
        return matches.sorted(by: ranksBefore)
    }

    /// Whether `a` comes before `b` in rank order.
    ///
    /// ```swift
    /// FullTextRank.ranksBefore(FullTextMatch(document: 1, score: 2), FullTextMatch(document: 2, score: 1))   // true
    /// ```
    static func ranksBefore(_ a: FullTextMatch, _ b: FullTextMatch) -> Bool {
        a.score != b.score ? a.score > b.score : a.document < b.document
    }

    /// Moves `heap[start]` up while it ranks after its parent (the root ranks last).
    ///
    /// ```swift
    /// heap.append(match); siftUp(&heap, heap.count - 1)
    /// ```
    private static func siftUp(_ heap: inout [FullTextMatch], _ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            // The root must be the one ranking last.
            guard ranksBefore(heap[parent], heap[child]) else { return }
            heap.swapAt(parent, child)
            child = parent
        }
    }

    /// Moves `heap[start]` down while a child ranks after it.
    ///
    /// ```swift
    /// heap[0] = better; siftDown(&heap, 0)
    /// ```
    private static func siftDown(_ heap: inout [FullTextMatch], _ start: Int) {
        var parent = start
        while true {
            var worst = parent
            for child in [2 * parent + 1, 2 * parent + 2] where child < heap.count && ranksBefore(heap[worst], heap[child]) {
                worst = child
            }
            if worst == parent { return }
            heap.swapAt(parent, worst)
            parent = worst
        }
    }
}

/// A document matching a full-text query, with its BM25 score.
///
/// ```swift
/// for match in FullTextRank.ranked(try evaluator.allMatches()) { print(match.document, match.score) }
/// ```
///
/// - Note: A value type; safe to share between threads.
struct FullTextMatch: Hashable, Sendable {
    /// The matching document.
    ///
    /// ```swift
    /// let id = match.document
    /// ```
    var document: FullTextDocumentID
    /// Its BM25 score (``FullTextRank``); only comparable between matches of one query.
    ///
    /// ```swift
    /// let relevance = match.score
    /// ```
    var score: Double
}
