import Foundation
import Testing
@testable import Settee

/// The full-text index's algorithms (Query/FullText): tokenizer, English (Porter2) stemmer,
/// stop words, match-query parser, BM25, and query evaluation over the in-memory postings,
/// checked against a brute-force evaluation of the same queries.
@Suite struct FullTextTests {
    private let english = FullTextAnalyzer(language: "english")
    private let plain = FullTextAnalyzer(language: nil)

    private func terms(_ text: String, ignoreAccents: Bool = false) -> [String] {
        FullTextTokenizer(ignoreAccents: ignoreAccents).tokens(in: text).map(\.term)
    }

    // MARK: - Tokenizer

    @Test func wordsPositionsAndCase() {
        #expect(FullTextTokenizer().tokens(in: "Hello, World!") == [.init(term: "hello", position: 0), .init(term: "world", position: 1)])
        #expect(terms("e-mail 3.14 C++ foo_bar") == ["e", "mail", "3", "14", "c", "foo", "bar"])
        #expect(terms("  \n\t ") == [])
        #expect(terms("😀emoji😀 ✓ word") == ["emoji", "word"])
        #expect(terms("Ünïcödé 42 ٣٤ русский ΑΘΗΝΑ") == ["ünïcödé", "42", "٣٤", "русский", "αθηνα"])
    }

    @Test func apostrophesJoinTheWord() {
        #expect(terms("Don't") == ["dont"])
        #expect(terms("O’Reilly's") == ["oreillys"])
        #expect(terms("'quoted' tail' rock''n") == ["quoted", "tail", "rock", "n"])
        // Soft hyphens, zero-width joiners and variation selectors inside a word vanish too.
        #expect(terms("co\u{00AD}operate x\u{200D}y") == ["cooperate", "xy"])
    }

    @Test func foldingIsCanonicalAndCompatible() {
        // Precomposed and decomposed forms give the same term (NFC).
        #expect(terms("Café") == terms("Cafe\u{301}"))
        #expect(terms("ÉCOLE") == ["école"])
        // Compatibility forms (NFKC): ligatures, fullwidth letters.
        #expect(terms("ﬁle ｄａｔａ") == ["file", "data"])
        // Greek final sigma, the dotted capital I.
        #expect(terms("ΟΔΟΣ σοφός") == ["οδοσ", "σοφόσ"])
        #expect(terms("İstanbul") == ["istanbul"])
        #expect(terms("Straße") == ["straße"])
    }

    @Test func accentsAreKeptUnlessIgnored() {
        #expect(terms("Crème brûlée, naïve") == ["crème", "brûlée", "naïve"])
        #expect(terms("Crème brûlée, naïve", ignoreAccents: true) == ["creme", "brulee", "naive"])
        #expect(terms("Łódź Ølberg Ἀθῆναι", ignoreAccents: true) == ["lodz", "olberg", "αθηναι"])
        // Indic vowel signs are letters of their script, not accents.
        #expect(terms("हिन्दी", ignoreAccents: true) == ["हिन्दी"])
    }

    @Test func hanIdeographsAreWordsOfTheirOwn() {
        #expect(FullTextTokenizer().tokens(in: "東京タワー 한국어") ==
                [.init(term: "東", position: 0), .init(term: "京", position: 1), .init(term: "タワー", position: 2),
                 .init(term: "한국어", position: 3)])
    }

    @Test func overlongWordsAreSkippedButKeepTheirPosition() {
        let limit = FullTextTokenizer.maximumTermByteCount
        let longest = String(repeating: "a", count: limit)
        #expect(FullTextTokenizer().tokens(in: "x \(longest) y").map(\.position) == [0, 1, 2])
        let tooLong = FullTextTokenizer().tokens(in: "x \(longest)b y")
        #expect(tooLong == [.init(term: "x", position: 0), .init(term: "y", position: 2)])
        // Measured in UTF-8 bytes after folding: 51 × "é" is 102 bytes.
        #expect(terms(String(repeating: "é", count: 51)) == [])
        #expect(terms(String(repeating: "é", count: 50)).count == 1)
        // A huge run is skipped while it is read.
        let huge = String(repeating: "z", count: 1_000_000)
        #expect(FullTextTokenizer().tokens(in: "a \(huge) b") == [.init(term: "a", position: 0), .init(term: "b", position: 2)])
    }

    @Test func positionsContinueAcrossCalls() {
        var seen: [Int] = []
        let next = FullTextTokenizer().forEachWord(in: "one two", firstPosition: 10) { _, position in seen.append(position) }
        #expect(seen == [10, 11] && next == 12)
        #expect(plain.terms(inFields: ["a b", "", "c"]).map(\.position) == [0, 1, 2 + 2 * FullTextAnalyzer.fieldPositionGap])
        #expect(FullTextAnalyzer.fieldPositionGap > FullTextQuery.maximumPhraseSpan)
    }

    // MARK: - Stemmer

    /// Word → stem pairs traced by hand through the Porter2 steps (R1/R2 worked out per word,
    /// e.g. "consolidation": R1 = "solidation", R2 = "idation"; step 2 ation → ate; step 4
    /// deletes "ate" in R2 → "consolid"), covering the exceptional words, each step's suffixes
    /// and conditions, y handling, and the longest-suffix-without-fallback rule.
    static let stems: [(String, String)] = [
        // Step 1a
        ("caresses", "caress"), ("ponies", "poni"), ("ties", "tie"), ("cries", "cri"), ("dries", "dri"),
        ("tied", "tie"), ("died", "die"), ("gaps", "gap"), ("gas", "gas"), ("kiwis", "kiwi"), ("cats", "cat"),
        ("this", "this"), ("bus", "bus"), ("class", "class"),
        // Step 1b
        ("running", "run"), ("hopping", "hop"), ("hoping", "hope"), ("hoped", "hope"), ("luxuriating", "luxuri"),
        ("fizzed", "fizz"), ("failing", "fail"), ("filing", "file"), ("shedding", "shed"), ("shed", "shed"),
        ("bled", "bled"), ("sing", "sing"), ("singing", "sing"), ("ring", "ring"), ("needed", "need"),
        ("feed", "feed"), ("agreed", "agre"), ("bleed", "bleed"), ("plastered", "plaster"), ("motoring", "motor"),
        ("exceeding", "exceed"), ("succeeded", "succeed"), ("proceeds", "proceed"),
        // Words that stop after step 1a
        ("inning", "inning"), ("outing", "outing"), ("canning", "canning"), ("herring", "herring"),
        ("earring", "earring"), ("exceed", "exceed"),
        // R1 after gener / commun / arsen
        ("generously", "generous"), ("generate", "generat"), ("communism", "communism"),
        ("communication", "communic"), ("arsenal", "arsenal"),
        // y: step 1c, Y as a consonant
        ("happy", "happi"), ("happily", "happili"), ("cry", "cri"), ("crying", "cri"), ("say", "say"),
        ("sayings", "say"), ("enjoying", "enjoy"), ("flying", "fli"), ("youth", "youth"), ("yes", "yes"),
        ("boyish", "boyish"),
        // Step 2
        ("consolidation", "consolid"), ("conditional", "condit"), ("relational", "relat"), ("valenci", "valenc"),
        ("hesitanci", "hesit"), ("digitizer", "digit"), ("conformabli", "conform"), ("radicalli", "radic"),
        ("differentli", "differ"), ("vileli", "vile"), ("analogousli", "analog"), ("vietnamization", "vietnam"),
        ("predication", "predic"), ("operator", "oper"), ("feudalism", "feudal"), ("decisiveness", "decis"),
        ("hopefulness", "hope"), ("callousness", "callous"), ("formaliti", "formal"), ("sensitiviti", "sensit"),
        ("sensibiliti", "sensibl"), ("analogi", "analog"), ("biology", "biolog"), ("hopefully", "hope"),
        ("carelessly", "careless"), ("quickly", "quick"), ("knightly", "knight"),
        // Longest suffix not in R1: no fallback to a shorter one
        ("rational", "ration"), ("national", "nation"),
        // Step 3
        ("triplicate", "triplic"), ("formative", "format"), ("formalize", "formal"), ("electriciti", "electr"),
        ("electrical", "electr"), ("hopeful", "hope"), ("goodness", "good"), ("happiness", "happi"),
        // Step 4
        ("revival", "reviv"), ("allowance", "allow"), ("inference", "infer"), ("airliner", "airlin"),
        ("gyroscopic", "gyroscop"), ("adjustable", "adjust"), ("defensible", "defens"), ("irritant", "irrit"),
        ("replacement", "replac"), ("adjustment", "adjust"), ("dependent", "depend"), ("adoption", "adopt"),
        ("activate", "activ"), ("angulariti", "angular"), ("homologous", "homolog"), ("effective", "effect"),
        ("bowdlerize", "bowdler"), ("agreement", "agreement"), ("abatements", "abat"),
        ("connection", "connect"), ("connections", "connect"), ("connected", "connect"), ("connecting", "connect"),
        // Step 5
        ("probate", "probat"), ("rate", "rate"), ("cease", "ceas"), ("controll", "control"),
        ("controlling", "control"), ("roll", "roll"), ("databases", "databas"), ("database", "databas"),
        ("searching", "search"), ("searches", "search"), ("indexes", "index"), ("indexing", "index"),
        ("documents", "document"),
        // Exceptional forms
        ("skies", "sky"), ("skis", "ski"), ("dying", "die"), ("lying", "lie"), ("tying", "tie"), ("idly", "idl"),
        ("gently", "gentl"), ("ugly", "ugli"), ("early", "earli"), ("only", "onli"), ("singly", "singl"),
        ("sky", "sky"), ("news", "news"), ("howe", "howe"), ("atlas", "atlas"), ("cosmos", "cosmos"),
        ("bias", "bias"), ("andes", "andes"),
        // Step 0 and the leading apostrophe
        ("john's", "john"), ("dogs'", "dog"), ("'tis", "tis"),
        // Not letters, or too short
        ("2024", "2024"), ("mp3s", "mp3s"), ("by", "by"), ("a", "a"), ("", ""),
    ]

    @Test func porter2Stems() {
        #expect(Self.stems.count >= 150)
        for (word, stem) in Self.stems {
            #expect(EnglishStemmer.stem(word) == stem, "\(word)")
        }
    }

    @Test func stemmingInPlaceKeepsUTF8Valid() {
        var word = Array("RUNNING".utf8)
        EnglishStemmer.stem(&word)
        #expect(word == Array("run".utf8))
        // Letters beyond ASCII count as consonants and are never cut.
        #expect(EnglishStemmer.stem("cafés") == "café")
        #expect(EnglishStemmer.stem("naïvely") == "naïv")
        for (word, _) in Self.stems {
            var bytes = Array("é\(word)ü".utf8)
            EnglishStemmer.stem(&bytes)
            #expect(String(validating: bytes, as: UTF8.self) != nil)
        }
    }

    // MARK: - Stop words and the analyzer

    @Test func stopWords() {
        for word in ["the", "and", "of", "dont", "youre", "themselves", "yourselves", "whatever"] {
            #expect(EnglishStopWords.contains(word), "\(word)")
        }
        for word in ["us", "may", "will", "who", "well", "ill", "shell", "query", "", "thes", "th"] {
            #expect(!EnglishStopWords.contains(word), "\(word)")
        }
        #expect(EnglishStopWords.list.count >= 150 && Set(EnglishStopWords.list).count == EnglishStopWords.list.count)
        // The tokenizer's form: lowercase, no apostrophes; every one found by the byte check.
        for word in EnglishStopWords.list {
            #expect(FullTextTokenizer().tokens(in: word).map(\.term) == [word])
            #expect(EnglishStopWords.contains(Array(word.utf8)))
        }
    }

    @Test func analyzerLanguages() {
        #expect(english.terms(in: "The runners are running") == [.init(term: "runner", position: 1), .init(term: "run", position: 3)])
        #expect(english.terms(inFields: ["Running", "fast cars"]).map(\.description) == ["run@0", "fast@101", "car@102"])
        for code in ["en", "EN-us", "english", "en_GB", "English"] {
            #expect(FullTextAnalyzer.Language(code: code) == .english, "\(code)")
        }
        for code: String? in [nil, "", "eng", "xx", "klingon", "porter"] {
            #expect(FullTextAnalyzer.Language(code: code) == FullTextAnalyzer.Language.none, "\(code ?? "nil")")
        }
        for code in ["fr", "FR-ca", "french", "fr_FR"] {
            #expect(FullTextAnalyzer.Language(code: code) == .stemmed("french"), "\(code)")
        }
        #expect(FullTextAnalyzer.Language(code: "nb") == .stemmed("norwegian") && FullTextAnalyzer.Language(code: "pt-BR") == .stemmed("portuguese"))
        // No language: every word, unstemmed.
        #expect(FullTextAnalyzer(language: nil).terms(in: "Les chats mangent").map(\.term) == ["les", "chats", "mangent"])
        #expect(FullTextAnalyzer(language: "en", ignoreAccents: true).terms(in: "Cafés").map(\.term) == ["cafe"])
    }

    /// Each language Snowball stems, by its code: two forms of a word meet at one term, and a
    /// stop word of the language (where Settee has a list) is not a term but keeps its position.
    /// Without Snowball (Apple's systems) English alone is stemmed, by Settee's Porter2.
    @Test(arguments: [
        // Couchbase Lite's languages, with a stop word each.
        ("da", "husene", "huse", "og"), ("nl", "boeken", "boek", "het"), ("en", "connections", "connected", "the"),
        ("fi", "taloissa", "talossa", "ja"), ("fr", "continuation", "continuer", "les"), ("de", "Häuser", "Haus", "der"),
        ("hu", "házakban", "házak", "az"), ("it", "parlando", "parlare", "il"), ("no", "husene", "husa", "og"),
        ("pt", "correndo", "correr", "não"), ("ro", "casele", "casa", "și"), ("ru", "книгами", "книги", "и"),
        ("es", "corriendo", "correr", "el"), ("sv", "husens", "husen", "och"), ("tr", "kitaplardan", "kitaplar", "ve"),
        // Snowball's others, without a list of stop words.
        ("ar", "الكتاب", "كتاب", nil), ("hy", "սեղաններ", "սեղանի", nil), ("eu", "etxeak", "etxe", nil), ("ca", "gats", "gat", nil),
        ("el", "σπίτια", "σπίτι", nil), ("hi", "किताबें", "किताब", nil), ("id", "makanan", "makan", nil), ("ga", "bhróg", "bróg", nil),
        ("lt", "namai", "namas", nil), ("ne", "किताबहरू", "किताब", nil), ("sr", "kuće", "kuća", nil),
        ("ta", "புத்தகங்கள்", "புத்தகம்", nil), ("yi", "ביכער", "ביכערס", nil),
    ] as [(String, String, String, String?)])
    func everyLanguageStemsAndDropsItsStopWords(code: String, inflected: String, other: String, stop: String?) throws {
        let analyzer = FullTextAnalyzer(language: code)
        guard case .stemmed(let algorithm) = analyzer.language else {
            Issue.record("\(code) has no stemmer")
            return
        }
        let plain = FullTextAnalyzer(language: nil)
        let a = analyzer.terms(in: inflected).map(\.term), b = analyzer.terms(in: other).map(\.term)
        if SnowballStemmer.isAvailable || algorithm == "english" {
            #expect(a.count == 1 && a == b && a != plain.terms(in: inflected).map(\.term), "\(code): \(a) \(b)")
        } else {
            #expect(a == plain.terms(in: inflected).map(\.term), "\(code): no stemmer here")
        }
        if let stop {
            #expect(analyzer.terms(in: "\(stop) \(inflected)") == [FullTextToken(term: a[0], position: 1)], "\(code)")
            #expect(plain.terms(in: stop).count == 1, "\(code): \(stop) is a word")
        }
    }

    /// Settee's Porter2, which stems English where Snowball is not (Apple's systems), gives
    /// Snowball's stems.
    @Test func porter2IsSnowballsEnglish() throws {
        try #require(SnowballStemmer.isAvailable, "this test compares with libstemmer, on Linux")
        var words = Self.stems.map(\.0)
        words += ["generously", "consolidation", "happiness", "ponies", "skies", "dying", "news", "inning", "outing",
                  "proceeding", "exceedingly", "cafés", "naïvely", "hopefulness", "relational", "conditional", "electrical"]
        for word in words where !word.isEmpty {
            var ours = Array(word.utf8), theirs = Array(word.utf8)
            EnglishStemmer.stem(&ours)
            #expect(SnowballStemmer.stem(&theirs, algorithm: "english"))
            #expect(ours == theirs, "\(word): \(String(decoding: ours, as: UTF8.self)) against \(String(decoding: theirs, as: UTF8.self))")
        }
    }

    /// Every list's words are found in the tokenizer's form, accents kept or removed.
    @Test func everyListOfStopWordsIsFound() {
        #expect(StopWords.lists.count == 14)
        for (algorithm, words) in StopWords.lists {
            #expect(SnowballStemmer.languages.values.contains(algorithm))
            for word in words {
                for ignoreAccents in [false, true] {
                    let term = FullTextTokenizer(ignoreAccents: ignoreAccents).tokens(in: word).map(\.term)
                    #expect(term.count == 1 && StopWords.contains(Array(term[0].utf8), algorithm: algorithm, ignoreAccents: ignoreAccents),
                            "\(algorithm): \(word)")
                }
            }
        }
        #expect(StopWords.contains(Array("fur".utf8), algorithm: "german", ignoreAccents: true))
        #expect(!StopWords.contains(Array("fur".utf8), algorithm: "german", ignoreAccents: false))
    }

    // MARK: - Query parsing

    private func parse(_ text: String, _ analyzer: FullTextAnalyzer? = nil) throws -> String {
        try FullTextQuery(text, analyzer: analyzer ?? plain).description
    }

    @Test func precedenceAndImplicitAnd() throws {
        #expect(try parse("a b") == "(AND a b)")
        #expect(try parse("a AND b AND c") == "(AND a b c)")
        #expect(try parse("a OR b c NOT d") == "(OR a (AND b (NOT c d)))")
        #expect(try parse("(a OR b) c") == "(AND (OR a b) c)")
        #expect(try parse("a OR (b OR c)") == "(OR a b c)")
        #expect(try parse("x NOT y NOT z") == "(NOT x (OR y z))")
        #expect(try parse("((((a))))") == "a")
        // Lowercase operators are words.
        #expect(try parse("cats and dogs or not") == "(AND cats and dogs or not)")
    }

    @Test func termsAreAnalyzedPrefixesAreNot() throws {
        #expect(try parse("running (shoes OR boots) NOT red", english) == "(AND run (NOT (OR shoe boot) red))")
        #expect(try parse("Data* RUNNING*", english) == "(AND data* running*)")
        #expect(try parse("the*", english) == "the*")
        #expect(try parse("café*", FullTextAnalyzer(language: nil, ignoreAccents: true)) == "cafe*")
    }

    @Test func phrases() throws {
        #expect(try parse("\"state of the art\"", english) == "\"state _ _ art\"")
        #expect(try parse("“smart quotes”") == "\"smart quotes\"")
        #expect(try parse("\"data bas*\" OR x") == "(OR \"data bas*\" x)")
        #expect(try parse("\"one\"") == "one")
        // A word the tokenizer splits is the phrase of its parts.
        #expect(try parse("e-mail") == "\"e mail\"")
        #expect(try parse("東京") == "\"東 京\"")
        #expect(try parse("foo-ba*") == "\"foo ba*\"")
        #expect(FullTextQuery(root: .phrase([.init(term: "a", isPrefix: false, offset: 0), .init(term: "b", isPrefix: true, offset: 2)]))
                    .description == "\"a _ b*\"")
    }

    @Test func stopWordsLeaveTheQuery() throws {
        #expect(try parse("the cat", english) == "cat")
        #expect(try parse("cat OR the", english) == "cat")
        #expect(try parse("cat NOT the", english) == "cat")
        #expect(try parse("the NOT cat", english) == "(NOTHING)")
        #expect(try parse("(the OR of) cat", english) == "cat")
        let onlyStopWords = try FullTextQuery("the AND of \"to be\"", analyzer: english)
        #expect(onlyStopWords.root == nil)
    }

    @Test func malformedQueriesNamePositions() {
        let cases: [(String, String)] = [
            ("", "empty"),
            ("   ", "empty"),
            ("NOT a", "operator NOT at position 0 has no left operand"),
            ("AND", "operator AND at position 0 has no left operand"),
            ("a AND", "operator AND at position 2 has no right operand"),
            ("a OR OR b", "operator OR at position 2 has no right operand"),
            ("a NOT", "operator NOT at position 2 has no right operand"),
            ("(a AND)", "operator AND at position 3 has no right operand"),
            ("(a", "'(' at position 0 is never closed"),
            ("x (a OR (b)", "'(' at position 2 is never closed"),
            ("a)", "unexpected ')' at position 1"),
            (")", "unexpected ')' at position 0"),
            ("a () b", "empty parentheses at position 2"),
            ("\"abc", "phrase at position 0 has no closing quote"),
            ("x \"\"", "phrase at position 2 is empty"),
            ("*", "prefix at position 0 has no letters or digits"),
            ("a -*", "prefix at position 2 has no letters or digits"),
        ]
        for (query, message) in cases {
            let error = setteeError { _ = try FullTextQuery(query, analyzer: plain) }
            #expect(error?.code == .invalidParameter, "\(query)")
            #expect(error?.message.contains(message) == true, "\(query): \(error?.message ?? "no error")")
        }
    }

    @Test func queriesAreBounded() throws {
        let longest = String(repeating: "a ", count: FullTextQuery.maximumLength / 2)
        #expect(try FullTextQuery(longest, analyzer: plain).root != nil)
        #expect(setteeError { _ = try FullTextQuery(longest + "b", analyzer: plain) }?.message.contains("longer than") == true)
        let huge = String(repeating: "x", count: 10_000_000)
        #expect(setteeError { _ = try FullTextQuery(huge, analyzer: plain) }?.code == .invalidParameter)

        let depth = FullTextQuery.maximumDepth
        let deepest = String(repeating: "(", count: depth) + "a" + String(repeating: ")", count: depth)
        #expect(try parse(deepest) == "a")
        let tooDeep = String(repeating: "(", count: depth + 1) + "a" + String(repeating: ")", count: depth + 1)
        #expect(setteeError { _ = try FullTextQuery(tooDeep, analyzer: plain) }?.message.contains("nested deeper than 64 at position 64") == true)

        let span = FullTextQuery.maximumPhraseSpan
        let widest = "\"" + (0...span).map { "w\($0)" }.joined(separator: " ") + "\""
        #expect(try FullTextQuery(widest, analyzer: plain).root != nil)
        let tooWide = "\"" + (0...span + 1).map { "w\($0)" }.joined(separator: " ") + "\""
        #expect(setteeError { _ = try FullTextQuery(tooWide, analyzer: plain) }?.message.contains("spans more than") == true)

        // Long chains stay flat: no recursion per operator.
        let chain = (0..<900).map { "t\($0)" }.joined(separator: " NOT ")   // about 8,000 characters
        guard case .not(_, .or(let excluded))? = try FullTextQuery(chain, analyzer: plain).root else {
            Issue.record("a NOT chain is one NOT of an OR")
            return
        }
        #expect(excluded.count == 899)
    }

    // MARK: - BM25

    @Test func bm25Formula() {
        let rank = FullTextRank(documentCount: 10, averageDocumentLength: 5)
        let idf = rank.inverseDocumentFrequency(documentFrequency: 1)
        #expect(abs(idf - log(1 + 9.5 / 1.5)) < 1e-12)
        // tf 2 in a document of average length: 2 · 2.2 / (2 + 1.2) = 1.375
        #expect(abs(rank.termScore(inverseDocumentFrequency: idf, termFrequency: 2, documentLength: 5) - idf * 1.375) < 1e-12)
        // More occurrences, a shorter document, a rarer term: each scores higher.
        let base = rank.termScore(inverseDocumentFrequency: idf, termFrequency: 1, documentLength: 5)
        #expect(rank.termScore(inverseDocumentFrequency: idf, termFrequency: 3, documentLength: 5) > base)
        #expect(rank.termScore(inverseDocumentFrequency: idf, termFrequency: 1, documentLength: 2) > base)
        #expect(rank.inverseDocumentFrequency(documentFrequency: 1) > rank.inverseDocumentFrequency(documentFrequency: 5))
        // A term in every document still adds a little; inconsistent statistics are clamped.
        #expect(rank.inverseDocumentFrequency(documentFrequency: 10) > 0)
        #expect(rank.inverseDocumentFrequency(documentFrequency: 50) == rank.inverseDocumentFrequency(documentFrequency: 10))
        #expect(rank.inverseDocumentFrequency(documentFrequency: -3) == rank.inverseDocumentFrequency(documentFrequency: 0))
        // No documents: no average, no NaN.
        let empty = FullTextRank(documentCount: 0, totalDocumentLength: 0)
        #expect(empty.termScore(inverseDocumentFrequency: 1, termFrequency: 1, documentLength: 3).isFinite)
        #expect(abs(rank.score([(1, 2), (5, 1)], documentLength: 5)
                    - rank.termScore(inverseDocumentFrequency: idf, termFrequency: 2, documentLength: 5)
                    - rank.termScore(inverseDocumentFrequency: rank.inverseDocumentFrequency(documentFrequency: 5), termFrequency: 1, documentLength: 5)) < 1e-12)
    }

    @Test func rankedOrderAndLimit() {
        var rng = SeededGenerator(seed: 0xF7)
        let matches = (0..<500).map { FullTextMatch(document: UInt64($0), score: Double(Int.random(in: 0..<40, using: &rng)) / 4) }
        let all = FullTextRank.ranked(matches)
        for (a, b) in zip(all, all.dropFirst()) {
            #expect(a.score > b.score || (a.score == b.score && a.document < b.document))
        }
        for limit in [0, 1, 7, 100, 499, 500, 800] {
            #expect(FullTextRank.ranked(matches, limit: limit) == Array(all.prefix(limit)), "limit \(limit)")
        }
    }

    // MARK: - Evaluation

    private func run(_ query: String, _ index: InMemoryFullTextPostings) throws -> [FullTextMatch] {
        try FullTextEvaluator(query: FullTextQuery(query, analyzer: index.analyzer), postings: index).allMatches()
    }

    private func sampleIndex() -> InMemoryFullTextPostings {
        var index = InMemoryFullTextPostings(analyzer: english)
        index.index(1, fields: ["Fast cars", "Cars that run fast"])
        index.index(2, fields: ["Slow boats"])
        index.index(3, fields: ["The state of the art in car design", "running fast"])
        index.index(4, fields: ["state art", "a car, a car, a car"])
        index.index(5, fields: ["Databases and data structures", "Indexing a database"])
        return index
    }

    @Test func evaluatesOperatorsPrefixesAndPhrases() throws {
        let index = sampleIndex()
        func docs(_ query: String) throws -> [FullTextDocumentID] { try run(query, index).map(\.document) }
        #expect(try docs("car") == [1, 3, 4])
        #expect(try docs("cars") == [1, 3, 4])
        #expect(try docs("fast car") == [1, 3])
        #expect(try docs("car NOT fast") == [4])
        #expect(try docs("car OR boat") == [1, 2, 3, 4])
        #expect(try docs("(fast OR slow) NOT design") == [1, 2])
        #expect(try docs("\"state of the art\"") == [3])
        #expect(try docs("\"state art\"") == [4])
        #expect(try docs("\"art state\"") == [])
        #expect(try docs("sta*") == [3, 4])
        #expect(try docs("data*") == [5])
        // "Indexing a database": the stop word holds its place in the phrase.
        #expect(try docs("\"index* a databas*\"") == [5])
        #expect(try docs("\"index* databas*\"") == [])
        #expect(try docs("run*") == [1, 3])
        #expect(try docs("the") == [])
        #expect(try docs("zebra OR zeb*") == [])
        // No phrase across fields: "design" ends field 1 of document 3, "running" starts field 2.
        #expect(try docs("\"design running\"") == [])
        #expect(try docs("design running") == [3])
    }

    @Test func scoresAreBM25AndRankDocuments() throws {
        let index = sampleIndex()
        let rank = FullTextRank(documentCount: index.documentCount(), totalDocumentLength: index.totalDocumentLength())
        let idf = rank.inverseDocumentFrequency(documentFrequency: index.documentFrequency(of: "car"))
        let matches = try run("car", index)
        for match in matches {
            var cursor = index.cursor(forTerm: "car")
            cursor.seek(atLeast: match.document)
            let expected = rank.termScore(inverseDocumentFrequency: idf, termFrequency: cursor.termFrequency,
                                          documentLength: index.documentLength(of: match.document))
            #expect(abs(match.score - expected) < 1e-12)
        }
        // Three "car"s in a short document beat two, which beat one.
        #expect(FullTextRank.ranked(matches).map(\.document) == [4, 1, 3])
        // A document matching both sides of an OR scores the sum of both.
        let or = try run("car OR design", index).first { $0.document == 3 }
        let car = matches.first { $0.document == 3 }
        let design = try run("design", index).first { $0.document == 3 }
        #expect(abs((or?.score ?? 0) - (car?.score ?? 0) - (design?.score ?? 0)) < 1e-12)
    }

    @Test func streamingRemovalAndReindexing() throws {
        var index = sampleIndex()
        let evaluator = try FullTextEvaluator(query: FullTextQuery("car OR boat", analyzer: english), postings: index)
        var streamed: [FullTextDocumentID] = []
        while let match = try evaluator.next() { streamed.append(match.document) }
        #expect(streamed == [1, 2, 3, 4])
        #expect(try evaluator.next() == nil)

        index.removeDocument(4)
        index.index(1, fields: ["Boats only"])
        #expect(try run("car", index).map(\.document) == [3])
        #expect(try run("boat", index).map(\.document) == [1, 2])
        #expect(index.documentCount() == 4)
        index.removeDocument(99)
        #expect(index.documentCount() == 4)
        // Terms only a removed document had leave the term list (and so prefix expansion).
        #expect(index.terms.contains("databas"))
        index.removeDocument(5)
        #expect(!index.terms.contains("databas") && index.documentFrequency(of: "databas") == 0)
        #expect(try run("data*", index).isEmpty)
        #expect(index.totalDocumentLength() == (1...3).reduce(0) { $0 + index.documentLength(of: FullTextDocumentID($1)) })

        let empty = InMemoryFullTextPostings(analyzer: english)
        #expect(try run("anything OR any*", empty).isEmpty)
    }

    @Test func prefixExpansionIsBounded() throws {
        let limit = FullTextEvaluator<InMemoryFullTextPostings>.maximumPrefixTerms
        var index = InMemoryFullTextPostings(analyzer: plain)
        index.index(1, fields: [(0...limit).map { "x\($0)" }.joined(separator: " ")])
        let error = setteeError { _ = try run("x*", index) }
        #expect(error?.code == .invalidParameter && error?.message.contains("use a longer prefix") == true)
        #expect(try run("x1*", index).map(\.document) == [1])
    }

    /// Random documents and random queries (through the parser), evaluated by the merges and
    /// by brute force over each document's terms: same documents, same scores.
    @Test func agreesWithBruteForce() throws {
        var rng = SeededGenerator(seed: 0x5E77EE)
        let vocabulary = ["apple", "apply", "ape", "band", "banana", "bandana", "cat", "cater", "dog", "dot", "egg", "ego"]
        var index = InMemoryFullTextPostings(analyzer: plain)
        var documents: [FullTextDocumentID: [String]] = [:]
        for id in 1...80 {
            let fields = (0..<Int.random(in: 1...2, using: &rng)).map { _ in
                (0..<Int.random(in: 0...10, using: &rng)).map { _ in vocabulary.randomElement(using: &rng)! }.joined(separator: " ")
            }
            let document = FullTextDocumentID(id * 3)   // gaps between numbers
            index.index(document, fields: fields)
            documents[document] = fields
        }
        // Replace and remove some, as a real index would.
        for id in [3, 30, 99] {
            index.index(FullTextDocumentID(id), fields: ["cat dog cat", "egg"])
            documents[FullTextDocumentID(id)] = ["cat dog cat", "egg"]
        }
        index.removeDocument(6)
        documents[6] = nil

        let rank = FullTextRank(documentCount: index.documentCount(), totalDocumentLength: index.totalDocumentLength())
        let brute = FullTextBruteForce(analyzer: plain, documents: documents, rank: rank)
        var nonEmpty = 0
        for round in 0..<400 {
            let text = Self.randomQuery(depth: 3, vocabulary: vocabulary, rng: &rng)
            let query = try FullTextQuery(text, analyzer: plain)
            let got = try FullTextEvaluator(query: query, postings: index).allMatches()
            let expected = brute.matches(query)
            #expect(got.map(\.document) == expected.map(\.document), "round \(round): \(text) → \(query)")
            for (a, b) in zip(got, expected) where abs(a.score - b.score) > 1e-9 {
                Issue.record("round \(round): \(text): document \(a.document) scores \(a.score), expected \(b.score)")
            }
            if !got.isEmpty { nonEmpty += 1 }
        }
        #expect(nonEmpty > 100)
    }

    private static func randomQuery(depth: Int, vocabulary: [String], rng: inout SeededGenerator) -> String {
        let word = { (rng: inout SeededGenerator) in vocabulary.randomElement(using: &rng)! }
        if depth == 0 || Int.random(in: 0..<3, using: &rng) == 0 {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: return String(word(&rng).prefix(Int.random(in: 1...3, using: &rng))) + "*"
            case 1: return "\"" + (0..<Int.random(in: 2...3, using: &rng)).map { _ in word(&rng) }.joined(separator: " ") + "\""
            case 2: return "\"\(word(&rng)) \(word(&rng).prefix(2))*\""
            default: return word(&rng)
            }
        }
        let a = randomQuery(depth: depth - 1, vocabulary: vocabulary, rng: &rng)
        let b = randomQuery(depth: depth - 1, vocabulary: vocabulary, rng: &rng)
        let op = ["AND", "OR", "NOT", ""].randomElement(using: &rng)!
        return "(\(a) \(op) \(b))"
    }
}

/// The reference the merges are checked against: every document's terms in a dictionary,
/// each query node answered document by document, scores summed as FullTextEvaluator
/// documents them.
private struct FullTextBruteForce {
    let documents: [FullTextDocumentID: (positions: [String: [Int]], length: Int)]
    let documentFrequency: [String: Int]
    let rank: FullTextRank

    init(analyzer: FullTextAnalyzer, documents raw: [FullTextDocumentID: [String]], rank: FullTextRank) {
        var documents: [FullTextDocumentID: (positions: [String: [Int]], length: Int)] = [:]
        var df: [String: Int] = [:]
        for (id, fields) in raw {
            var positions: [String: [Int]] = [:]
            let tokens = analyzer.terms(inFields: fields)
            for token in tokens { positions[token.term, default: []].append(token.position) }
            documents[id] = (positions, tokens.count)
            for term in positions.keys { df[term, default: 0] += 1 }
        }
        self.documents = documents
        self.documentFrequency = df
        self.rank = rank
    }

    func matches(_ query: FullTextQuery) -> [FullTextMatch] {
        guard let root = query.root else { return [] }
        return documents.keys.sorted().compactMap { id in
            let document = documents[id]!
            return score(root, document).map { FullTextMatch(document: id, score: $0) }
        }
    }

    /// The terms a leaf stands for in this document.
    private func terms(_ term: String, prefix: Bool, _ document: (positions: [String: [Int]], length: Int)) -> [String] {
        prefix ? document.positions.keys.filter { $0.utf8.starts(with: term.utf8) } : (document.positions[term] == nil ? [] : [term])
    }

    private func termScore(_ term: String, _ document: (positions: [String: [Int]], length: Int)) -> Double {
        rank.termScore(inverseDocumentFrequency: rank.inverseDocumentFrequency(documentFrequency: documentFrequency[term] ?? 0),
                       termFrequency: document.positions[term]?.count ?? 0, documentLength: document.length)
    }

    /// The node's score at the document, or nil when it does not match.
    private func score(_ node: FullTextQuery.Node, _ document: (positions: [String: [Int]], length: Int)) -> Double? {
        switch node {
        case .term(let t), .prefix(let t):
            let isPrefix = if case .prefix = node { true } else { false }
            let found = terms(t, prefix: isPrefix, document)
            return found.isEmpty ? nil : found.reduce(0) { $0 + termScore($1, document) }
        case .phrase(let elements):
            let sets = elements.map { e in Set(terms(e.term, prefix: e.isPrefix, document).flatMap { document.positions[$0]! }) }
            guard let first = sets.first else { return nil }
            let occurs = first.contains { anchor in
                elements.indices.allSatisfy { sets[$0].contains(anchor - elements[0].offset + elements[$0].offset) }
            }
            guard occurs else { return nil }
            return elements.reduce(0) { sum, e in
                sum + terms(e.term, prefix: e.isPrefix, document).reduce(0) { $0 + termScore($1, document) }
            }
        case .and(let children):
            var sum = 0.0
            for child in children {
                guard let s = score(child, document) else { return nil }
                sum += s
            }
            return sum
        case .or(let children):
            let scores = children.compactMap { score($0, document) }
            return scores.isEmpty ? nil : scores.reduce(0, +)
        case .not(let positive, let negative):
            return score(negative, document) == nil ? score(positive, document) : nil
        }
    }
}
