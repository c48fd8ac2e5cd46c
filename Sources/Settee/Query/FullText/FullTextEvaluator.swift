/// Runs a ``FullTextQuery`` over a ``FullTextPostings``: the documents that match, in
/// ascending document order, each with its BM25 score (``FullTextRank``).
///
/// ```swift
/// let query = try FullTextQuery("(fast OR quick) car* NOT \"red car\"", analyzer: index.analyzer)
/// let evaluator = try FullTextEvaluator(query: query, postings: index)
/// while let match = try evaluator.next() { print(match.document, match.score) }
/// // or: FullTextRank.ranked(try evaluator.allMatches(), limit: 20)
/// ```
///
/// ## How
///
/// Each node of the query becomes a matcher that, like a cursor, sits on its current matching
/// document and moves forward only:
///
/// - a term is a ``FullTextPostingCursor``: O(df) steps;
/// - AND intersects by leapfrogging, the rarest child first: each child seeks to the largest
///   current document until all agree. A seek only moves a cursor forward and every k
///   seeks move the target forward, so the work is at most O(k · Σ df) seeks, and about
///   k · min(df) when the rarest term leads, each O(log n) in a B-tree;
/// - OR (and a prefix, the OR of the terms it expands to) merges with a min-heap of its
///   children: O(Σ df · log k);
/// - NOT walks its left side and seeks the right side to each candidate: O(df_left) seeks;
/// - a phrase is the AND of its words, then a check of their positions in each candidate
///   document: O(Σ positions · log) per candidate; positions are read for nothing else.
///
/// Memory is one cursor per term of the query (after prefix expansion) plus the positions
/// of the current phrase candidate; no posting list is ever loaded whole. A prefix may expand
/// to at most ``maximumPrefixTerms`` terms (``SetteeError/Code/invalidParameter`` past it,
/// asking for a longer prefix), which bounds the cursors a query opens.
///
/// ## Scores
///
/// A document's score is the sum of the BM25 scores of the query's terms at that document:
/// for OR, of the children that match it; for NOT, of the left side only; a prefix scores
/// each term it expanded to that the document has, with that term's own document frequency;
/// a phrase scores as the AND of its words (the phrase decides whether a document matches,
/// the words how well). The document's length is read once per match.
///
/// - Note: Not thread-safe: it holds cursors; use one evaluator from one thread (within the
///   read transaction of its postings, for the storage implementation). After an error from
///   the postings, discard it: its cursors may have moved.
final class FullTextEvaluator<Postings: FullTextPostings> {
    /// The most terms one prefix may expand to.
    ///
    /// ```swift
    /// print(FullTextEvaluator<InMemoryFullTextPostings>.maximumPrefixTerms)   // 10000
    /// ```
    static var maximumPrefixTerms: Int { 10_000 }

    /// The index read.
    private let postings: Postings
    /// N and the average length, read once.
    private let rank: FullTextRank
    /// The query's matcher; nil for a query without terms.
    private let root: FullTextMatcher?

    /// Prepares the query: reads the index statistics, opens a cursor per term (expanding
    /// prefixes) and moves to the first match.
    ///
    /// ```swift
    /// let evaluator = try FullTextEvaluator(query: query, postings: index)
    /// ```
    ///
    /// - throws: What the postings throw; ``SetteeError`` with
    ///   ``SetteeError/Code/invalidParameter`` when a prefix expands to more than
    ///   ``maximumPrefixTerms`` terms.
    init(query: FullTextQuery, postings: Postings) throws {
        self.postings = postings
        self.rank = FullTextRank(documentCount: try postings.documentCount(),
                                 totalDocumentLength: try postings.totalDocumentLength())
        if let node = query.root {
            self.root = try Self.matcher(for: node, postings: postings, rank: rank)
        } else {
            self.root = nil
        }
    }

    /// The next matching document (ascending order) and its score; nil after the last.
    ///
    /// ```swift
    /// while let match = try evaluator.next() { ids.append(match.document) }
    /// ```
    ///
    /// - throws: What the postings throw.
    func next() throws -> FullTextMatch? {
        guard let root, let document = root.document else { return nil }
        let length = try postings.documentLength(of: document)
        let score = try root.score(documentLength: length)
        try root.next()
        return FullTextMatch(document: document, score: score)
    }

    /// Every remaining match, in ascending document order.
    ///
    /// ```swift
    /// let ranked = FullTextRank.ranked(try evaluator.allMatches())
    /// ```
    ///
    /// - throws: What the postings throw.
    func allMatches() throws -> [FullTextMatch] {
        var result: [FullTextMatch] = []
        while let match = try next() { result.append(match) }
        return result
    }

    // MARK: - Building

    /// The matcher of a query node and its subtree (recursion as deep as the tree, which the
    /// parser bounds).
    ///
    /// ```swift
    /// // .and([.term("a"), .prefix("b")]) → FullTextIntersectionMatcher([term a, union of b…])
    /// ```
    private static func matcher(for node: FullTextQuery.Node, postings: Postings, rank: FullTextRank) throws -> FullTextMatcher {
        switch node {
        case .term(let term):
            return try termMatcher(term, postings: postings, rank: rank)
        case .prefix(let prefix):
            return try prefixMatcher(prefix, postings: postings, rank: rank)
        case .phrase(let elements):
            let words: [FullTextMatcher] = try elements.map { element in
                element.isPrefix
                    ? try prefixMatcher(element.term, postings: postings, rank: rank)
                    : try termMatcher(element.term, postings: postings, rank: rank)
            }
            return try FullTextPhraseMatcher(words: words, offsets: elements.map(\.offset))
        case .and(let children):
            return try FullTextIntersectionMatcher(children.map { try matcher(for: $0, postings: postings, rank: rank) })
        case .or(let children):
            return FullTextUnionMatcher(try children.map { try matcher(for: $0, postings: postings, rank: rank) })
        case .not(let positive, let negative):
            return try FullTextExclusionMatcher(positive: try matcher(for: positive, postings: postings, rank: rank),
                                        negative: try matcher(for: negative, postings: postings, rank: rank))
        }
    }

    /// A term's cursor with its idf.
    ///
    /// ```swift
    /// let run = try termMatcher("run", postings: postings, rank: rank)
    /// ```
    private static func termMatcher(_ term: String, postings: Postings, rank: FullTextRank) throws -> FullTextTermMatcher<Postings.Cursor> {
        let df = try postings.documentFrequency(of: term)
        return FullTextTermMatcher(cursor: try postings.cursor(forTerm: term), documentFrequency: df,
                           inverseDocumentFrequency: rank.inverseDocumentFrequency(documentFrequency: df), rank: rank)
    }

    /// The union of the terms starting with `prefix`, at most ``maximumPrefixTerms`` of them.
    ///
    /// ```swift
    /// let data = try prefixMatcher("data", postings: postings, rank: rank)   // data, databas, datum…
    /// ```
    private static func prefixMatcher(_ prefix: String, postings: Postings, rank: FullTextRank) throws -> FullTextUnionMatcher {
        var terms: [String] = []
        let limit = maximumPrefixTerms
        try postings.forEachTerm(withPrefix: prefix) { term in
            terms.append(term)
            return terms.count <= limit
        }
        if terms.count > limit {
            throw SetteeError(.invalidParameter, "full-text query: the prefix \(prefix)* matches more than \(limit) terms; use a longer prefix")
        }
        return FullTextUnionMatcher(try terms.map { try termMatcher($0, postings: postings, rank: rank) })
    }
}

// MARK: - Matchers

/// A query node being evaluated: on its current matching document (nil when exhausted),
/// moving forward only; every matcher is on its first match once made.
///
/// A class hierarchy over concrete document numbers, for speed: the current document is a
/// stored field, a step one vtable call. (Generic matchers, or arrays of a protocol's
/// existentials, ran an order of magnitude slower: methods reached through a vtable or an
/// existential are never specialised, so every comparison looked up generic metadata.)
///
/// ```swift
/// let root = try matcher(for: query.root!, postings: postings, rank: rank)
/// while let doc = root.document { print(doc, try root.score(documentLength: 10)); try root.next() }
/// ```
///
/// - Note: Not thread-safe: matchers move cursors; one evaluator's matchers are used by one
///   thread.
fileprivate class FullTextMatcher {
    /// The current matching document; nil when there are no more. Subclasses keep it current.
    ///
    /// ```swift
    /// while let doc = matcher.document { …; try matcher.next() }
    /// ```
    final var document: FullTextDocumentID?
    /// An estimate of the number of matches, to order the children of an intersection.
    ///
    /// ```swift
    /// let rarestFirst = children.sorted { $0.cost < $1.cost }
    /// ```
    let cost: Int

    /// For subclasses, which then set ``document``.
    ///
    /// ```swift
    /// super.init(cost: documentFrequency)
    /// ```
    init(cost: Int) { self.cost = cost }

    /// Moves to the next match, strictly after the current one.
    ///
    /// ```swift
    /// try matcher.next()
    /// ```
    func next() throws { preconditionFailure("abstract") }
    /// Moves to the first match at or after `target`; stays if already there.
    ///
    /// ```swift
    /// try matcher.seek(atLeast: 100)
    /// ```
    func seek(atLeast target: FullTextDocumentID) throws { preconditionFailure("abstract") }
    /// The BM25 score at the current document, whose length is `documentLength`.
    ///
    /// ```swift
    /// let score = try matcher.score(documentLength: 120)
    /// ```
    func score(documentLength: Int) throws -> Double { preconditionFailure("abstract") }
    /// Ascending positions of the term(s) at the current document (terms and prefixes, the
    /// words of a phrase; other nodes have none).
    ///
    /// ```swift
    /// let positions = try matcher.positions()   // [3, 17]
    /// ```
    func positions() throws -> [Int] { [] }
}

/// One term: its cursor.
///
/// ```swift
/// let run = FullTextTermMatcher(cursor: try postings.cursor(forTerm: "run"), documentFrequency: 3,
///                               inverseDocumentFrequency: 1.2, rank: rank)
/// ```
///
/// - Note: Not thread-safe (holds a cursor), like every matcher.
private final class FullTextTermMatcher<Cursor: FullTextPostingCursor>: FullTextMatcher {
    /// The term's postings.
    var cursor: Cursor
    /// The term's inverse document frequency.
    let idf: Double
    /// The index statistics.
    let rank: FullTextRank

    /// A matcher on a cursor's first document.
    ///
    /// ```swift
    /// FullTextTermMatcher(cursor: cursor, documentFrequency: 12, inverseDocumentFrequency: 2.1, rank: rank)
    /// ```
    init(cursor: Cursor, documentFrequency: Int, inverseDocumentFrequency: Double, rank: FullTextRank) {
        self.cursor = cursor
        self.idf = inverseDocumentFrequency
        self.rank = rank
        super.init(cost: documentFrequency)
        document = cursor.document
    }

    /// The cursor's next document.
    override func next() throws {
        try cursor.next()
        document = cursor.document
    }

    /// Seeks the cursor (a B-tree seek), unless it is already there.
    override func seek(atLeast target: FullTextDocumentID) throws {
        if let current = document, current >= target { return }
        try cursor.seek(atLeast: target)
        document = cursor.document
    }

    /// BM25 of the term at the current document.
    override func score(documentLength: Int) -> Double {
        rank.termScore(inverseDocumentFrequency: idf, termFrequency: cursor.termFrequency, documentLength: documentLength)
    }

    /// The cursor's positions.
    override func positions() throws -> [Int] { try cursor.positions() }
}

/// OR, and the terms of a prefix: a min-heap of the children by current document.
///
/// ```swift
/// let either = FullTextUnionMatcher([cat, dog])   // on min(cat.document, dog.document)
/// ```
///
/// - Note: Not thread-safe, like every matcher.
private final class FullTextUnionMatcher: FullTextMatcher {
    /// The children not exhausted. A struct, so that a heap operation is one access to the
    /// property (one exclusivity check), not one per comparison.
    private var heap: FullTextMatcherHeap

    /// The union of `children`, on the smallest of their documents.
    ///
    /// ```swift
    /// FullTextUnionMatcher([cat, dog])
    /// ```
    init(_ children: [FullTextMatcher]) {
        heap = FullTextMatcherHeap(children)
        super.init(cost: children.reduce(0) { $0 + $1.cost })
        document = heap.document
    }

    /// Moves every child on the current document on; the smallest document after them.
    override func next() throws {
        guard let current = document else { return }
        try heap.advance(past: current)
        document = heap.document
    }

    /// Seeks the children behind `target`.
    override func seek(atLeast target: FullTextDocumentID) throws {
        if let current = document, current >= target { return }
        try heap.seek(atLeast: target)
        document = heap.document
    }

    /// The sum of the scores of the children on the current document.
    override func score(documentLength: Int) throws -> Double {
        try heap.score(documentLength: documentLength)
    }

    /// The union of the positions of the children on the current document (a prefix in a
    /// phrase: any of its terms may stand at the position).
    override func positions() throws -> [Int] {
        var all: [Int] = []
        try heap.appendPositions(to: &all)
        all.sort()
        return all
    }
}

/// A binary min-heap of matchers by current document, for ``FullTextUnionMatcher``.
///
/// ```swift
/// var heap = FullTextMatcherHeap([cat, dog]); try heap.advance(past: heap.document!)
/// ```
///
/// - Note: Not thread-safe: it moves the matchers it holds.
private struct FullTextMatcherHeap {
    /// `nodes[0]` is on the smallest document; exhausted matchers are removed.
    private var nodes: [FullTextMatcher]

    /// A heap of the matchers that have a document.
    ///
    /// ```swift
    /// var heap = FullTextMatcherHeap([cat, dog])
    /// ```
    init(_ matchers: [FullTextMatcher]) {
        nodes = matchers.filter { $0.document != nil }
        for i in stride(from: nodes.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }

    /// The smallest current document.
    ///
    /// ```swift
    /// let next = heap.document
    /// ```
    var document: FullTextDocumentID? { nodes.first?.document }

    /// Whether node `a` is on an earlier document than node `b` (both have one).
    ///
    /// ```swift
    /// if less(left, smallest) { smallest = left }
    /// ```
    private func less(_ a: Int, _ b: Int) -> Bool {
        guard let x = nodes[a].document, let y = nodes[b].document else { return false }
        return x < y
    }

    /// Moves node `start` down until no child is on an earlier document.
    ///
    /// ```swift
    /// siftDown(0)   // after the root changed
    /// ```
    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            var smallest = parent
            let left = 2 * parent + 1, right = left + 1
            if left < nodes.count && less(left, smallest) { smallest = left }
            if right < nodes.count && less(right, smallest) { smallest = right }
            if smallest == parent { return }
            nodes.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// After the root moved: drop it if exhausted, restore the heap order.
    ///
    /// ```swift
    /// try top.next(); rootMoved()
    /// ```
    private mutating func rootMoved() {
        if nodes[0].document == nil {
            nodes.swapAt(0, nodes.count - 1)
            nodes.removeLast()
        }
        if !nodes.isEmpty { siftDown(0) }
    }

    /// Moves every matcher on `current` to its next document.
    ///
    /// ```swift
    /// try heap.advance(past: 7)
    /// ```
    mutating func advance(past current: FullTextDocumentID) throws {
        while let top = nodes.first, top.document == current {
            try top.next()
            rootMoved()
        }
    }

    /// Moves every matcher before `target` to `target` or after.
    ///
    /// ```swift
    /// try heap.seek(atLeast: 42)
    /// ```
    mutating func seek(atLeast target: FullTextDocumentID) throws {
        while let top = nodes.first, let d = top.document, d < target {
            try top.seek(atLeast: target)
            rootMoved()
        }
    }

    /// The sum of the scores of the matchers on the smallest document: the nodes equal to the
    /// root form a subtree at the root (each has a parent no larger, hence equal).
    ///
    /// ```swift
    /// let score = try heap.score(documentLength: 40)
    /// ```
    func score(documentLength: Int, at i: Int = 0) throws -> Double {
        guard i < nodes.count, let current = nodes[0].document, nodes[i].document == current else { return 0 }
        return try nodes[i].score(documentLength: documentLength)
            + score(documentLength: documentLength, at: 2 * i + 1)
            + score(documentLength: documentLength, at: 2 * i + 2)
    }

    /// Appends the positions of the matchers on the smallest document.
    ///
    /// ```swift
    /// var positions: [Int] = []; try heap.appendPositions(to: &positions)
    /// ```
    func appendPositions(to all: inout [Int], at i: Int = 0) throws {
        guard i < nodes.count, let current = nodes[0].document, nodes[i].document == current else { return }
        all.append(contentsOf: try nodes[i].positions())
        try appendPositions(to: &all, at: 2 * i + 1)
        try appendPositions(to: &all, at: 2 * i + 2)
    }
}

/// AND: leapfrog intersection, the child with the fewest documents leading.
///
/// ```swift
/// let both = try FullTextIntersectionMatcher([fast, car])
/// ```
///
/// - Note: Not thread-safe, like every matcher.
private final class FullTextIntersectionMatcher: FullTextMatcher {
    /// The children, fewest documents first: `children[0]` leads.
    let children: [FullTextMatcher]

    /// The intersection of `children` (at least one), on its first common document.
    ///
    /// ```swift
    /// try FullTextIntersectionMatcher([fast, car])
    /// ```
    init(_ children: [FullTextMatcher]) throws {
        precondition(!children.isEmpty, "an intersection needs children")
        self.children = children.sorted { $0.cost < $1.cost }
        super.init(cost: self.children[0].cost)
        try align()
    }

    /// Seeks the children round-robin to the largest document seen until all are on it.
    ///
    /// ```swift
    /// // fast [1, 3, 9], car [3, 4, 9]: target 1 → car seeks to 3 → fast seeks to 3: on 3
    /// ```
    private func align() throws {
        guard var target = children[0].document else { document = nil; return }
        var agreeing = 1
        var i = 1 % children.count
        while agreeing < children.count {
            try children[i].seek(atLeast: target)
            guard let d = children[i].document else { document = nil; return }
            if d == target {
                agreeing += 1
            } else {
                target = d
                agreeing = 1
            }
            i = (i + 1) % children.count
        }
        document = target
    }

    /// Moves the leading child on, then realigns.
    override func next() throws {
        guard document != nil else { return }
        try children[0].next()
        try align()
    }

    /// Seeks the leading child, then realigns.
    override func seek(atLeast target: FullTextDocumentID) throws {
        if let current = document, current >= target { return }
        try children[0].seek(atLeast: target)
        try align()
    }

    /// The sum of the children's scores (all are on the document).
    override func score(documentLength: Int) throws -> Double {
        var sum = 0.0
        for child in children { sum += try child.score(documentLength: documentLength) }
        return sum
    }
}

/// NOT: the positive side's documents the negative side does not have.
///
/// ```swift
/// let carNotRed = try FullTextExclusionMatcher(positive: car, negative: red)
/// ```
///
/// - Note: Not thread-safe, like every matcher.
private final class FullTextExclusionMatcher: FullTextMatcher {
    /// The documents to return.
    let positive: FullTextMatcher
    /// The documents to leave out.
    let negative: FullTextMatcher

    /// `positive` without what `negative` matches, on its first document.
    ///
    /// ```swift
    /// try FullTextExclusionMatcher(positive: car, negative: red)
    /// ```
    init(positive: FullTextMatcher, negative: FullTextMatcher) throws {
        self.positive = positive
        self.negative = negative
        super.init(cost: positive.cost)
        try align()
    }

    /// Skips the positive side's documents the negative side has (seeking it to each).
    ///
    /// ```swift
    /// // car [1, 3, 4], fast [1, 3]: 1 and 3 skipped: on 4
    /// ```
    private func align() throws {
        while let d = positive.document {
            try negative.seek(atLeast: d)
            if negative.document != d { break }
            try positive.next()
        }
        document = positive.document
    }

    /// The positive side's next document the negative side does not have.
    override func next() throws {
        guard document != nil else { return }
        try positive.next()
        try align()
    }

    /// Seeks the positive side, then skips what the negative side has.
    override func seek(atLeast target: FullTextDocumentID) throws {
        if let current = document, current >= target { return }
        try positive.seek(atLeast: target)
        try align()
    }

    /// The positive side's score: excluded terms add nothing.
    override func score(documentLength: Int) throws -> Double {
        try positive.score(documentLength: documentLength)
    }
}

/// A phrase: the intersection of its words, then their positions at each candidate.
///
/// ```swift
/// let phrase = try FullTextPhraseMatcher(words: [state, art], offsets: [0, 3])   // "state of the art"
/// ```
///
/// - Note: Not thread-safe, like every matcher.
private final class FullTextPhraseMatcher: FullTextMatcher {
    /// The phrase's words (terms or prefix unions), in phrase order.
    let words: [FullTextMatcher]
    /// Each word's position after the first word's.
    let offsets: [Int]
    /// The documents that have every word, where positions are checked.
    let conjunction: FullTextIntersectionMatcher

    /// The words at their offsets (as many offsets as words), on the first occurrence.
    ///
    /// ```swift
    /// try FullTextPhraseMatcher(words: [state, art], offsets: [0, 3])
    /// ```
    init(words: [FullTextMatcher], offsets: [Int]) throws {
        precondition(words.count == offsets.count && !words.isEmpty, "a phrase needs words at offsets")
        self.words = words
        self.offsets = offsets
        self.conjunction = try FullTextIntersectionMatcher(words)
        super.init(cost: conjunction.cost)
        try align()
    }

    /// Whether the words stand at their offsets from one another somewhere in the current
    /// candidate: each position of the first word is an anchor, the others are looked up.
    ///
    /// ```swift
    /// // "state _ _ art" at state [1, 8], art [4]: anchor 1 → art at 4: occurs
    /// ```
    private func occurs() throws -> Bool {
        let lists = try words.map { try $0.positions() }
        for anchor in lists[0] {
            let start = anchor - offsets[0]
            var all = true
            for i in 1 ..< words.count where !Self.contains(lists[i], start + offsets[i]) {
                all = false
                break
            }
            if all { return true }
        }
        return false
    }

    /// Binary search.
    ///
    /// ```swift
    /// FullTextPhraseMatcher.contains([1, 4, 9], 4)   // true
    /// ```
    private static func contains(_ sorted: [Int], _ value: Int) -> Bool {
        var low = 0, high = sorted.count
        while low < high {
            let mid = low + (high - low) / 2
            if sorted[mid] < value { low = mid + 1 } else { high = mid }
        }
        return low < sorted.count && sorted[low] == value
    }

    /// Skips the intersection's candidates where the words are not in sequence.
    ///
    /// ```swift
    /// // "state art": documents 3 and 4 have both words, only 4 in sequence: on 4
    /// ```
    private func align() throws {
        while conjunction.document != nil {
            if try occurs() { break }
            try conjunction.next()
        }
        document = conjunction.document
    }

    /// The next candidate of the intersection where the phrase occurs.
    override func next() throws {
        guard document != nil else { return }
        try conjunction.next()
        try align()
    }

    /// Seeks the intersection, then checks positions.
    override func seek(atLeast target: FullTextDocumentID) throws {
        if let current = document, current >= target { return }
        try conjunction.seek(atLeast: target)
        try align()
    }

    /// The score of the words, as their AND would have it.
    override func score(documentLength: Int) throws -> Double {
        try conjunction.score(documentLength: documentLength)
    }
}
