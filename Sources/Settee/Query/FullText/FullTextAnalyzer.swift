/// Turns text into the terms of a full-text index: ``FullTextTokenizer``'s words, without
/// the language's stop words and stemmed by its stemmer. Documents and queries go through the
/// same analyzer, so the words of a query meet the terms of the documents.
///
/// ```swift
/// let analyzer = FullTextAnalyzer(language: "english")
/// analyzer.terms(in: "The runners are running")
/// // runner@1 run@3   ("the" and "are" are stop words but keep their positions)
/// ```
///
/// ## Languages
///
/// Couchbase Lite's `language:` takes a language code: an ISO 639-1 code (`"fr"`), a regional
/// one (`"en-US"`, `"pt_BR"`) or Snowball's name of the language (`"french"`), in any case.
/// Every language Snowball stems (``SnowballStemmer/languages``: 28, Couchbase Lite's 15
/// among them) gives that language's stemmer and stop words (``EnglishStopWords``,
/// ``StopWords``; a language without a list keeps every word). On Apple's systems, which ship no
/// Snowball, English is stemmed by Settee's Porter2 (``EnglishStemmer``) and other languages
/// lose only their stop words. Any other value, and nil, tokenizes without stemming or stop
/// words. Unlike Couchbase Lite, nil does not mean "the device's language": an index on disk
/// must give the same terms on every device that opens the database.
///
/// ## Fields
///
/// An index over several properties (`["title", "notes"]`) analyzes each one in turn; the
/// positions of a field start ``fieldPositionGap`` after the last word of the previous one,
/// so that no phrase (at most ``FullTextQuery/maximumPhraseSpan`` words) can match across
/// two fields.
///
/// - Note: A value type with no shared state; safe to share between threads.
struct FullTextAnalyzer: Sendable, Hashable {
    /// The languages the analyzer knows.
    ///
    /// ```swift
    /// FullTextAnalyzer.Language(code: "en-GB")   // .english
    /// ```
    enum Language: Sendable, Hashable {
        /// A language Snowball stems, by its algorithm's name (`"french"`): its stop words and
        /// its stemmer.
        case stemmed(String)
        /// Words as the tokenizer gives them.
        case none

        /// English.
        static let english = Language.stemmed("english")

        /// The language of a Couchbase Lite language code; ``none`` for nil and every code
        /// Snowball has no stemmer for.
        ///
        /// ```swift
        /// FullTextAnalyzer.Language(code: "fr")   // .stemmed("french")
        /// ```
        init(code: String?) {
            guard let code, let algorithm = SnowballStemmer.algorithm(forLanguage: code) else {
                self = .none
                return
            }
            self = .stemmed(algorithm)
        }
    }

    /// The positions left empty between two fields of a document; more than the longest
    /// phrase a query may ask for.
    ///
    /// ```swift
    /// FullTextAnalyzer(language: nil).terms(inFields: ["a", "b"])   // a@0 b@101
    /// ```
    static let fieldPositionGap = 100

    /// The version of the rules that make terms (tokenizer, folding, stop words, stemmer),
    /// recorded with each full-text index: an index made under other rules is rebuilt when
    /// the database opens, since its terms would not meet the terms of today's queries.
    /// Raise it with any change of those rules. 1: English alone, stemmed by Settee's Porter2.
    /// 2: Snowball's stemmers and each language's stop words (Linux, Android). 3: where there is
    /// no Snowball (Apple's systems), English by Settee's Porter2 and the stop words: a database
    /// moved between the two rebuilds its full-text indexes, whose terms would differ.
    ///
    /// ```swift
    /// print(FullTextAnalyzer.version)   // 2 on Linux
    /// ```
    static let version: UInt64 = SnowballStemmer.isAvailable ? 2 : 3

    /// The words, before stop words and stemming.
    ///
    /// ```swift
    /// let analyzer = FullTextAnalyzer(language: "en", ignoreAccents: true)
    /// print(analyzer.tokenizer.ignoreAccents)   // true
    /// ```
    let tokenizer: FullTextTokenizer
    /// Whether stop words are left out and words stemmed.
    ///
    /// ```swift
    /// print(FullTextAnalyzer(language: "english").language)   // english
    /// ```
    let language: Language

    /// An analyzer for a Couchbase Lite language code and `ignoreAccents` setting.
    ///
    /// ```swift
    /// let analyzer = FullTextAnalyzer(language: "english", ignoreAccents: false)
    /// ```
    init(language: String?, ignoreAccents: Bool = false) {
        self.init(language: Language(code: language), ignoreAccents: ignoreAccents)
    }

    /// An analyzer for a language.
    ///
    /// ```swift
    /// let analyzer = FullTextAnalyzer(language: .english, ignoreAccents: false)
    /// ```
    init(language: Language, ignoreAccents: Bool = false) {
        self.tokenizer = FullTextTokenizer(ignoreAccents: ignoreAccents)
        self.language = language
    }

    // MARK: - Terms

    /// The terms of `text` with their positions.
    ///
    /// ```swift
    /// FullTextAnalyzer(language: "english").terms(in: "Cats and dogs")   // cat@0 dog@2
    /// ```
    ///
    /// - Complexity: O(n) in the length of `text`.
    func terms(in text: String) -> [FullTextToken] {
        var result: [FullTextToken] = []
        forEachTerm(in: text) { term, position in
            result.append(FullTextToken(term: String(decoding: term, as: UTF8.self), position: position))
        }
        return result
    }

    /// The terms of a document's indexed fields, in order, each field's positions starting
    /// ``fieldPositionGap`` after the previous field's last word.
    ///
    /// ```swift
    /// FullTextAnalyzer(language: "english").terms(inFields: ["Running", "fast cars"])
    /// // run@0 fast@101 car@102
    /// ```
    ///
    /// - Complexity: O(n) in the total length of the fields.
    func terms(inFields fields: [String]) -> [FullTextToken] {
        var result: [FullTextToken] = []
        forEachTerm(inFields: fields) { term, position in
            result.append(FullTextToken(term: String(decoding: term, as: UTF8.self), position: position))
        }
        return result
    }

    /// Calls `body` with each term of `text` as UTF-8 bytes (the form of an index key) and its
    /// position; returns the position after the last word. No allocation per word for ASCII
    /// text beyond what `body` does.
    ///
    /// ```swift
    /// analyzer.forEachTerm(in: "connected components") { term, position in
    ///     keys.append(term + [0] + documentKey)   // "connect", "compon"
    /// }
    /// ```
    ///
    /// - Complexity: O(n) in the length of `text`.
    @discardableResult
    func forEachTerm(
        in text: String,
        firstPosition: Int = 0,
        _ body: (_ term: [UInt8], _ position: Int) throws -> Void
    ) rethrows -> Int {
        try tokenizer.forEachWord(in: text, firstPosition: firstPosition) { word, position in
            if analyze(&word) { try body(word, position) }
        }
    }

    /// Calls `body` with each term of each field, positions continuing from field to field
    /// with ``fieldPositionGap`` between them; returns the number of terms (the document
    /// length BM25 uses).
    ///
    /// ```swift
    /// let length = analyzer.forEachTerm(inFields: [title, notes]) { term, position in … }
    /// ```
    ///
    /// - Complexity: O(n) in the total length of the fields.
    @discardableResult
    func forEachTerm(
        inFields fields: [String],
        _ body: (_ term: [UInt8], _ position: Int) throws -> Void
    ) rethrows -> Int {
        var position = 0
        var count = 0
        for (index, field) in fields.enumerated() {
            if index > 0 { position += Self.fieldPositionGap }
            position = try forEachTerm(in: field, firstPosition: position) { term, at in
                count += 1
                try body(term, at)
            }
        }
        return count
    }

    /// Applies stop words and stemming to one tokenizer word, in place; false when the word is
    /// a stop word and is not indexed.
    ///
    /// ```swift
    /// var word = Array("running".utf8)
    /// analyzer.analyze(&word)   // true, word == Array("run".utf8)
    /// ```
    func analyze(_ word: inout [UInt8]) -> Bool {
        switch language {
        case .stemmed(let algorithm):
            if StopWords.contains(word, algorithm: algorithm, ignoreAccents: tokenizer.ignoreAccents) { return false }
            if !SnowballStemmer.stem(&word, algorithm: algorithm), algorithm == "english" { EnglishStemmer.stem(&word) }
            return true
        case .none:
            return true
        }
    }
}
