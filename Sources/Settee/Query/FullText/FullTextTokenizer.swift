import Foundation

/// One word of a text as a full-text index stores it: the folded (and, through
/// ``FullTextAnalyzer``, stemmed) term and its word position.
///
/// ```swift
/// let tokens = FullTextTokenizer().tokens(in: "Don't PANIC")
/// // [FullTextToken(term: "dont", position: 0), FullTextToken(term: "panic", position: 1)]
/// ```
///
/// Positions count every word of the text, also the ones that are not indexed (stop words,
/// over-long words), so that a phrase query can tell "state of the art" from "state art".
///
/// - Note: A value type; safe to share between threads.
struct FullTextToken: Hashable, Sendable, CustomStringConvertible {
    /// The term: lowercase, normalised (NFKC then NFC) UTF-8 text without apostrophes.
    ///
    /// ```swift
    /// print(token.term)   // "dont"
    /// ```
    var term: String
    /// The word's index in the text (0 for the first word), counting skipped words too.
    ///
    /// ```swift
    /// print(token.position)   // 1
    /// ```
    var position: Int

    /// Makes a token.
    ///
    /// ```swift
    /// let t = FullTextToken(term: "run", position: 3)
    /// ```
    init(term: String, position: Int) {
        self.term = term
        self.position = position
    }

    /// `term@position`, for test failures and debugging.
    ///
    /// ```swift
    /// print(FullTextToken(term: "run", position: 3))   // run@3
    /// ```
    var description: String { "\(term)@\(position)" }
}

/// Splits text into the words a full-text index stores: Unicode-aware word boundaries, case
/// folding, optional accent folding (Couchbase Lite's `ignoreAccents`), and word positions.
///
/// ```swift
/// let tokenizer = FullTextTokenizer(ignoreAccents: true)
/// tokenizer.tokens(in: "Crème brûlée, 2 × 3")
/// // creme@0 brulee@1 2@2 3@3
/// ```
///
/// ## Rules
///
/// - A word is a run of letters, digits and combining marks of any script (Unicode general
///   categories L, N and M). Everything else separates words: spaces, punctuation, symbols,
///   emoji. So "e-mail" is two words, "3.14" is two words, "C++" is one word ("c").
/// - Apostrophes (U+0027, U+2019, U+02BC) between two word characters are removed and the
///   parts join: "don't" → "dont", "O'Reilly" → "oreilly", "John's" → "johns" (which the
///   English stemmer then reduces to "john"). Why: a query typed without the apostrophe
///   ("dont") must find the text that has one, and the reverse; a separator would instead
///   index a lone "t" and "s". At the edges of a word an apostrophe is a separator ('quoted').
///   Zero-width (non-)joiners (U+200C, U+200D), soft hyphens (U+00AD) and variation selectors
///   inside a word are removed the same way.
/// - Han ideographs (Unicode's Ideographic property) are one word each, because Chinese and
///   Japanese do not put spaces between words; a query for "東京" becomes the phrase 東 京
///   (see ``FullTextQuery``). Other scripts written without spaces (Thai, Lao, Khmer,
///   Myanmar) are not segmented: a run of them is one word, and a run longer than the limit
///   below is not indexed. They need a dictionary segmenter, which Settee does not have.
/// - Words are normalised to NFKC, then lowercased (`String.lowercased()`), then NFC: "É"
///   written precomposed or as "E" + U+0301 gives the same term, and compatibility forms
///   fold to their plain letters (ligature "ﬁ" → "fi", fullwidth "ｄａｔａ" → "data",
///   "²" → "2"). Greek final sigma ς becomes σ, and the dot that "İ" keeps when lowercased
///   (i + U+0307) is dropped, so "İstanbul" is "istanbul". ß stays ß (lowercase mapping,
///   not full case folding).
/// - With `ignoreAccents`, the combining diacritical marks U+0300–U+036F are removed after
///   canonical decomposition (é → e, ñ → n, ü → u, ά → α, й → и), and the stroked letters
///   ø đ ł ħ ŧ become o d l h t. Marks of other blocks (Indic vowel signs, Hebrew points)
///   are part of the letters of those scripts and are kept.
/// - A term longer than ``maximumTermByteCount`` (100) UTF-8 bytes after folding is skipped,
///   not cut: it takes its position but produces no token. Why skip: cutting would make an
///   unrelated long word match on its first 100 bytes, and such words are mostly hashes,
///   base64 or URLs nobody searches for word by word. A run of more than
///   ``maximumScannedWordByteCount`` (400) bytes is skipped without being folded, which
///   bounds the work and memory per word whatever the input.
///
/// Words of ASCII text are folded byte by byte with no allocation but the token's term, and
/// so are words whose other characters need no folding (lowercase letters of most scripts,
/// kana, Han, Hangul syllables, accented lowercase letters when accents are kept); a word
/// with a character that needs folding is folded once as a whole through Foundation (one
/// `String` per word, never per character).
///
/// - Note: A value type with no shared state; safe to share between threads.
struct FullTextTokenizer: Sendable, Hashable {
    /// The longest term, in UTF-8 bytes, that is indexed; longer ones are skipped.
    ///
    /// ```swift
    /// let long = String(repeating: "a", count: FullTextTokenizer.maximumTermByteCount + 1)
    /// FullTextTokenizer().tokens(in: long)   // []
    /// ```
    static let maximumTermByteCount = 100

    /// The longest run of word characters, in UTF-8 bytes before folding, that is folded at
    /// all; past it the word is skipped while it is read (folding can only shrink a word by
    /// removing marks, so nothing longer can fit ``maximumTermByteCount`` but text made of
    /// marks).
    ///
    /// ```swift
    /// print(FullTextTokenizer.maximumScannedWordByteCount)   // 400
    /// ```
    static let maximumScannedWordByteCount = 400

    /// Whether accents are removed (Couchbase Lite's `ignoreAccents`).
    ///
    /// ```swift
    /// FullTextTokenizer(ignoreAccents: true).tokens(in: "café")   // cafe@0
    /// ```
    var ignoreAccents: Bool

    /// A tokenizer; `ignoreAccents` removes diacritics (off by default, as in Couchbase Lite).
    ///
    /// ```swift
    /// let tokenizer = FullTextTokenizer(ignoreAccents: false)
    /// ```
    init(ignoreAccents: Bool = false) {
        self.ignoreAccents = ignoreAccents
    }

    /// Every indexed word of `text` with its position.
    ///
    /// ```swift
    /// FullTextTokenizer().tokens(in: "Hello, World")   // hello@0 world@1
    /// ```
    ///
    /// - Complexity: O(n) in the length of `text`.
    func tokens(in text: String) -> [FullTextToken] {
        var result: [FullTextToken] = []
        forEachWord(in: text) { word, position in
            result.append(FullTextToken(term: String(decoding: word, as: UTF8.self), position: position))
        }
        return result
    }

    /// Calls `body` with each word of `text`, folded, as UTF-8 bytes, and its position; returns
    /// the position after the last word (where the next field of the same document starts).
    ///
    /// `body` may change the bytes (``FullTextAnalyzer`` stems them in place); the buffer is
    /// reused for the next word, so no allocation happens per word for ASCII text.
    ///
    /// ```swift
    /// var terms: [String] = []
    /// let next = FullTextTokenizer().forEachWord(in: "a b", firstPosition: 10) { word, position in
    ///     terms.append(String(decoding: word, as: UTF8.self))
    /// }
    /// // terms == ["a", "b"], next == 12
    /// ```
    ///
    /// - Complexity: O(n) in the length of `text`.
    @discardableResult
    func forEachWord(
        in text: String,
        firstPosition: Int = 0,
        _ body: (_ word: inout [UInt8], _ position: Int) throws -> Void
    ) rethrows -> Int {
        var position = firstPosition
        var word: [UInt8] = []
        word.reserveCapacity(32)
        var inWord = false
        var isIdeograph = false     // the current word is one Han character (and its marks)
        var pendingJoiner = false   // an apostrophe followed the word; it joins if a letter follows
        var needsFolding = false   // a character the byte-wise lowercasing cannot handle
        var isOverlong = false

        var scalars = text.unicodeScalars.makeIterator()
        while true {
            let next = scalars.next()
            // Decide whether `next` ends the current word, and what to do with it afterwards.
            var ends = false
            var startsWord = false
            var append = false
            let characterClass = next.map(Self.classify) ?? .separator
            if next != nil {
                switch characterClass {
                case .letter:
                    if inWord && isIdeograph { ends = true; startsWord = true } else { startsWord = !inWord; append = true }
                case .ideograph:
                    ends = inWord
                    startsWord = true
                case .mark:
                    if inWord && !pendingJoiner { append = true } else if inWord { ends = true }
                case .ignorable:
                    break
                case .joiner:
                    if inWord && !isIdeograph && !pendingJoiner { pendingJoiner = true } else if inWord { ends = true }
                case .separator:
                    ends = inWord
                }
            } else {
                ends = inWord
            }

            if ends {
                if !isOverlong && needsFolding { fold(&word) }
                // Every word takes a position, indexed or not (a word cannot fold to nothing:
                // it starts with a letter, and folding keeps letters).
                if !isOverlong && !word.isEmpty && word.count <= Self.maximumTermByteCount {
                    try body(&word, position)
                }
                position += 1
                word.removeAll(keepingCapacity: true)
                inWord = false
                isIdeograph = false
                pendingJoiner = false
                needsFolding = false
                isOverlong = false
            }
            guard let scalar = next else { break }
            if startsWord {
                inWord = true
                isIdeograph = characterClass == .ideograph
                append = true
            }
            if append {
                pendingJoiner = false
                if word.count >= Self.maximumScannedWordByteCount {
                    isOverlong = true
                } else if scalar.value < 0x80 {
                    var byte = UInt8(truncatingIfNeeded: scalar.value)
                    if byte >= 0x41 && byte <= 0x5A { byte += 0x20 }   // A–Z
                    word.append(byte)
                } else {
                    if !needsFolding { needsFolding = requiresFolding(scalar, characterClass) }
                    UTF8.encode(scalar) { word.append($0) }
                }
            }
        }
        return position
    }

    // MARK: - Characters

    /// What a character does to word boundaries.
    ///
    /// ```swift
    /// FullTextTokenizer.classify("-") == .separator
    /// ```
    enum CharacterClass: Equatable {
        /// Part of a word: letters (but Han ideographs) and digits.
        case letter
        /// A Han ideograph: a word by itself.
        case ideograph
        /// A combining mark: continues the word it follows, dropped elsewhere.
        case mark
        /// Removed inside a word without ending it (soft hyphen, variation selectors).
        case ignorable
        /// Joins two parts of a word and is removed (apostrophes, zero-width joiners).
        case joiner
        /// Ends a word.
        case separator
    }

    /// The class of one character.
    ///
    /// ```swift
    /// FullTextTokenizer.classify("’")   // .joiner
    /// ```
    static func classify(_ scalar: Unicode.Scalar) -> CharacterClass {
        let v = scalar.value
        if v < 0x80 {
            // ASCII without touching Unicode property tables.
            if (v >= 0x61 && v <= 0x7A) || (v >= 0x41 && v <= 0x5A) || (v >= 0x30 && v <= 0x39) { return .letter }
            return v == 0x27 ? .joiner : .separator
        }
        switch v {
        case 0x2019, 0x02BC, 0x200C, 0x200D: return .joiner
        case 0x00AD, 0xFE00...0xFE0F, 0xE0100...0xE01EF: return .ignorable
        default: break
        }
        let properties = scalar.properties
        switch properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
            return properties.isIdeographic ? .ideograph : .letter
        case .decimalNumber, .letterNumber, .otherNumber:
            return .letter
        case .nonspacingMark, .spacingMark, .enclosingMark:
            return .mark
        default:
            return .separator
        }
    }

    // MARK: - Folding

    /// Whether a word with `scalar` must go through ``fold(_:)``: the character changes under
    /// NFKC case folding (capitals, compatibility forms, final sigma), may compose with its
    /// neighbour (marks, conjoining Hangul jamo), or carries an accent to remove. Other
    /// characters (lowercase letters of most scripts, kana, Han, precomposed Hangul) are
    /// stored as they are, without the cost of Foundation's normalisation.
    ///
    /// ```swift
    /// requiresFolding("é", .letter)   // false unless ignoreAccents; "É" → true
    /// ```
    private func requiresFolding(_ scalar: Unicode.Scalar, _ characterClass: CharacterClass) -> Bool {
        if characterClass == .mark { return true }
        switch scalar.value {
        case 0x1100...0x11FF, 0xA960...0xA97F, 0xD7B0...0xD7FF: return true   // conjoining jamo
        case 0x00C0...0x04FF, 0x1E00...0x1FFF: if ignoreAccents { return true }  // accented Latin, Greek, Cyrillic
        default: break
        }
        let properties = scalar.properties
        return properties.changesWhenNFKCCaseFolded || properties.canonicalCombiningClass != .notReordered
    }

    /// Folds a word with characters beyond ASCII: compatibility forms, lowercase, final sigma,
    /// accents if asked, then NFC. ASCII letters were already lowercased while the word was
    /// read. NFKC comes before lowercasing because some compatibility characters fold to
    /// capitals (ℌ → H).
    ///
    /// ```swift
    /// var word = Array("ÉCOLE".utf8); fold(&word)   // "école" ("ecole" with ignoreAccents)
    /// ```
    private func fold(_ word: inout [UInt8]) {
        let lowered = String(decoding: word, as: UTF8.self).precomposedStringWithCompatibilityMapping.lowercased()
        let source = ignoreAccents ? lowered.decomposedStringWithCanonicalMapping : lowered
        var scalars = String.UnicodeScalarView()
        var previous: Unicode.Scalar = " "
        for scalar in source.unicodeScalars {
            var folded = scalar
            switch scalar.value {
            case 0x0307 where previous == "i":
                continue   // İ lowercases to i + dot above: the dot says nothing once lowercase
            case 0x0300...0x036F where ignoreAccents:
                continue   // combining diacritical marks
            case 0x03C2: folded = "σ"
            case 0x00F8 where ignoreAccents: folded = "o"   // ø
            case 0x0111 where ignoreAccents: folded = "d"   // đ
            case 0x0142 where ignoreAccents: folded = "l"   // ł
            case 0x0127 where ignoreAccents: folded = "h"   // ħ
            case 0x0167 where ignoreAccents: folded = "t"   // ŧ
            default: break
            }
            scalars.append(folded)
            previous = folded
        }
        let result = String(scalars).precomposedStringWithCanonicalMapping
        word.removeAll(keepingCapacity: true)
        word.append(contentsOf: result.utf8)
    }
}
