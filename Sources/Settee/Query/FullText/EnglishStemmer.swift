/// The English (Porter2) stemmer of the Snowball project, written for Settee from the
/// algorithm's published description: it reduces inflected and derived English words to a
/// common stem so that a search for "connections" finds "connected".
///
/// ```swift
/// EnglishStemmer.stem("running")        // "run"
/// EnglishStemmer.stem("generously")     // "generous"
/// EnglishStemmer.stem("consolidation")  // "consolid"
/// ```
///
/// A stem is a search key, not a word: "happiness" → "happi", "ponies" → "poni".
///
/// ## The algorithm
///
/// Vowels are a e i o u y. R1 is the part of the word after the first non-vowel that follows a
/// vowel (for words beginning "gener", "commun" or "arsen", the part after that prefix); R2 is
/// the same region taken again inside R1. A suffix is "in R1" when it starts at or after R1.
/// A short syllable is a vowel, then a non-vowel other than w, x and Y, after a non-vowel; or
/// a vowel at the start of the word followed by a non-vowel. A word is short when it ends in a
/// short syllable and R1 is empty.
///
/// 1. Eighteen exceptional words are answered from a list ("skies" → "sky", "dying" → "die",
///    "news" → "news", …); words of one or two letters are returned unchanged.
/// 2. A leading apostrophe is removed; an initial y, and a y after a vowel, become Y (a
///    consonant) until the end.
/// 3. Step 0 removes the possessive 's' 's '; step 1a handles plurals (sses, ied/ies, s);
///    eight words ("inning", "outing", "proceed", …) stop after it; step 1b removes
///    eed/eedly (in R1) and ed/edly/ing/ingly (after a vowel), then repairs the stem (at bl iz
///    + e, undouble, short word + e); step 1c turns a final y after a consonant into i.
/// 4. Steps 2 and 3 map derivational suffixes in R1 (ational → ate, fulness → ful, li → ∅
///    after c d e g h k m n r t, …); step 4 deletes suffixes in R2 (ement, ance, ive, ion
///    after s or t, …); step 5 deletes a final e (in R2, or in R1 after no short syllable)
///    and the second l of ll in R2. In each step the longest matching suffix is chosen and
///    its condition decides; a failing condition does not fall back to a shorter suffix.
/// 5. Y becomes y again.
///
/// ## Input
///
/// The stemmer works on UTF-8 bytes, ASCII letters being the only ones it knows: every suffix
/// it tests is ASCII, so other characters (digits, letters of other alphabets, accented
/// letters) count as consonants and are never cut in half. ASCII capitals are lowercased
/// first; ``FullTextTokenizer`` already gives lowercase words. Apostrophes are handled as the
/// algorithm says, although the tokenizer removes them from inside words before stemming.
///
/// - Note: Stateless; safe to call from any thread.
enum EnglishStemmer {
    /// The stem of `word`.
    ///
    /// ```swift
    /// EnglishStemmer.stem("caresses")   // "caress"
    /// ```
    ///
    /// - Complexity: O(n) in the length of `word`.
    static func stem(_ word: String) -> String {
        var bytes = Array(word.utf8)
        stem(&bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Replaces `word` (UTF-8 bytes) by its stem, in place: no allocation unless the word
    /// grows past its buffer's capacity (a stem is at most one byte longer than its word).
    ///
    /// ```swift
    /// var word = Array("hopping".utf8)
    /// EnglishStemmer.stem(&word)   // word == Array("hop".utf8)
    /// ```
    ///
    /// - Complexity: O(n) in the length of `word`.
    static func stem(_ word: inout [UInt8]) {
        for i in word.indices where word[i] >= 0x41 && word[i] <= 0x5A { word[i] += 0x20 }
        if let exception = exceptionalForm(of: word) {
            word = exception
            return
        }
        guard word.count > 2 else { return }
        var stemming = Porter2Word(word: word)
        word = []   // unique ownership of the buffer for in-place edits
        stemming.run()
        word = stemming.w
    }

    // MARK: - Word lists

    /// The words the algorithm answers from a list before anything else (the published
    /// "exceptional forms"), the invariant ones mapping to themselves.
    ///
    /// ```swift
    /// EnglishStemmer.exceptionalForms["skies"]   // "sky"
    /// ```
    static let exceptionalForms: [String: String] = [
        "skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie",
        "idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli",
        "singly": "singl",
        "sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas", "cosmos": "cosmos",
        "bias": "bias", "andes": "andes",
    ]

    /// The words left as they are once step 1a is done (they would otherwise lose an "ing"
    /// or "eed" that is not a suffix).
    ///
    /// ```swift
    /// EnglishStemmer.invariantAfterStep1a.contains("herring")   // true
    /// ```
    static let invariantAfterStep1a: Set<String> = [
        "inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed",
    ]

    /// The exceptional form of `word` (lowercase UTF-8), if it is one of the listed words.
    ///
    /// ```swift
    /// EnglishStemmer.exceptionalForm(of: Array("dying".utf8))   // Array("die".utf8)
    /// ```
    static func exceptionalForm(of word: [UInt8]) -> [UInt8]? {
        guard let key = FullTextPackedWord(word), let i = FullTextPackedWord.search(key, in: packedExceptions.keys) else { return nil }
        return packedExceptions.forms[i]
    }

    /// Whether `word` stops after step 1a.
    ///
    /// ```swift
    /// EnglishStemmer.isInvariantAfterStep1a(Array("herring".utf8))   // true
    /// ```
    static func isInvariantAfterStep1a(_ word: [UInt8]) -> Bool {
        guard let key = FullTextPackedWord(word) else { return false }
        return FullTextPackedWord.search(key, in: packedInvariants) != nil
    }

    /// The lists as sorted packed keys: a binary search of integers instead of hashing the
    /// word for every stem.
    private static let packedExceptions: (keys: [UInt64], forms: [[UInt8]]) = {
        let sorted = exceptionalForms.map { (FullTextPackedWord(Array($0.key.utf8))!.value, Array($0.value.utf8)) }.sorted { $0.0 < $1.0 }
        return (sorted.map(\.0), sorted.map(\.1))
    }()

    /// ``invariantAfterStep1a`` as sorted packed keys.
    private static let packedInvariants: [UInt64] = invariantAfterStep1a.map { FullTextPackedWord(Array($0.utf8))!.value }.sorted()
}

/// A word of at most 8 bytes as one integer (bytes big-endian; words have no zero byte, so
/// different lengths never collide): the short word lists of the stemmer and the stop words
/// are sorted arrays of these, searched without hashing.
///
/// ```swift
/// let key = FullTextPackedWord(Array("the".utf8))!
/// FullTextPackedWord.search(key, in: sortedKeys)
/// ```
///
/// - Note: A value type; safe to share between threads.
struct FullTextPackedWord: Hashable, Sendable {
    /// The packed bytes.
    ///
    /// ```swift
    /// FullTextPackedWord(Array("ab".utf8))?.value   // 0x6162
    /// ```
    let value: UInt64

    /// Packs `bytes`; nil when longer than 8 or empty.
    ///
    /// ```swift
    /// FullTextPackedWord(Array("the".utf8))?.value   // 0x746865
    /// ```
    init?(_ bytes: [UInt8]) {
        guard !bytes.isEmpty && bytes.count <= 8 else { return nil }
        var v: UInt64 = 0
        for b in bytes { v = v << 8 | UInt64(b) }
        value = v
    }

    /// The index of `key` in the ascending `keys`, if there.
    ///
    /// ```swift
    /// FullTextPackedWord.search(key, in: sortedKeys)
    /// ```
    static func search(_ key: FullTextPackedWord, in keys: [UInt64]) -> Int? {
        var low = 0, high = keys.count
        while low < high {
            let mid = low + (high - low) / 2
            if keys[mid] < key.value { low = mid + 1 } else { high = mid }
        }
        return low < keys.count && keys[low] == key.value ? low : nil
    }
}

// MARK: - The steps

/// One word being stemmed: the bytes and the two regions, fixed once computed (as the
/// algorithm defines them: positions in the original word, not recomputed as it shrinks).
///
/// ```swift
/// var word = Porter2Word(word: Array("hopefulness".utf8))
/// word.run()   // word.w == Array("hope".utf8)
/// ```
///
/// - Note: A value type, used within one call of `EnglishStemmer.stem`.
private struct Porter2Word {
    /// The word's bytes, changed step by step.
    var w: [UInt8]
    /// Where R1 starts (the word's length when R1 is empty).
    var r1 = 0
    /// Where R2 starts.
    var r2 = 0
    /// Whether a y was turned into the consonant Y (and must be turned back).
    var hasY = false

    /// A word to stem, lowercase.
    ///
    /// ```swift
    /// var word = Porter2Word(word: Array("ponies".utf8))
    /// ```
    init(word: [UInt8]) { w = word }

    /// All the steps, in order; ``w`` is the stem afterwards.
    ///
    /// ```swift
    /// var word = Porter2Word(word: Array("ponies".utf8)); word.run()   // word.w == "poni"
    /// ```
    mutating func run() {
        if w.first == StemmerByte.apostrophe { w.removeFirst() }
        markConsonantYs()
        computeRegions()
        step0()
        step1a()
        if EnglishStemmer.isInvariantAfterStep1a(w) { restoreYs(); return }
        step1b()
        step1c()
        step2()
        step3()
        step4()
        step5()
        restoreYs()
    }

    // MARK: Letters

    /// a e i o u y (not Y, which is a consonant).
    ///
    /// ```swift
    /// Porter2Word.isVowel(UInt8(ascii: "y"))   // true
    /// ```
    static func isVowel(_ b: UInt8) -> Bool {
        switch b {
        case StemmerByte.a, StemmerByte.e, StemmerByte.i, StemmerByte.o, StemmerByte.u, StemmerByte.y: true
        default: false
        }
    }

    /// An initial y, or a y after a vowel, is a consonant: Y until ``restoreYs()``.
    /// Left to right, so in "yyy" the second y follows a Y (a consonant) and stays a vowel.
    ///
    /// ```swift
    /// // "sayings" → "saYings", "youth" → "Youth"
    /// ```
    mutating func markConsonantYs() {
        for i in w.indices where w[i] == StemmerByte.y && (i == 0 || Self.isVowel(w[i - 1])) {
            w[i] = StemmerByte.Y
            hasY = true
        }
    }

    /// Y becomes y again (the algorithm's last step).
    ///
    /// ```swift
    /// // "saY" → "say"
    /// ```
    mutating func restoreYs() {
        guard hasY else { return }
        for i in w.indices where w[i] == StemmerByte.Y { w[i] = StemmerByte.y }
    }

    /// The index just after the first non-vowel that follows a vowel, searching from
    /// `start`; the word's length when there is none (an empty region).
    ///
    /// ```swift
    /// // "beautiful": regionStart(from: 0) == 5 (R1 "iful"), regionStart(from: 5) == 7 (R2 "ul")
    /// ```
    func regionStart(from start: Int) -> Int {
        var i = start
        while i < w.count && !Self.isVowel(w[i]) { i += 1 }
        while i < w.count && Self.isVowel(w[i]) { i += 1 }
        return i < w.count ? i + 1 : w.count
    }

    /// Sets ``r1`` and ``r2``; R1 of a word starting "gener", "commun" or "arsen" starts
    /// after that prefix.
    ///
    /// ```swift
    /// // "generously": r1 == 5 ("ously"), r2 == 8 ("ly")
    /// ```
    mutating func computeRegions() {
        r1 = regionStart(from: 0)
        for prefix in StemmerSuffixes.r1Prefixes where w.starts(with: prefix) {
            r1 = prefix.count
            break
        }
        r2 = regionStart(from: r1)
    }

    /// Whether the word ends with `suffix`, compared from the last byte, where most
    /// candidates already differ.
    ///
    /// ```swift
    /// // "caresses".ends(with: "sses") == true
    /// ```
    func ends(with suffix: [UInt8]) -> Bool {
        let n = w.count, m = suffix.count
        guard n >= m else { return false }
        var k = 1
        while k <= m {
            if w[n - k] != suffix[m - k] { return false }
            k += 1
        }
        return true
    }

    /// Whether `w[0..<count]` contains a vowel.
    ///
    /// ```swift
    /// // "gaps": hasVowel(before: 2) == true ("ga"); "gas": hasVowel(before: 1) == false
    /// ```
    func hasVowel(before count: Int) -> Bool {
        w[0..<count].contains(where: Self.isVowel)
    }

    /// Whether `w[0..<end]` ends in a short syllable: non-vowel, vowel, non-vowel other than
    /// w x Y; or, for two letters, vowel then non-vowel.
    ///
    /// ```swift
    /// // "hop", "ow", "at": true; "hoop", "fix" (x), "bestow" (w): false
    /// ```
    func endsInShortSyllable(_ end: Int) -> Bool {
        if end >= 3 {
            let last = w[end - 1]
            if !Self.isVowel(last) && last != StemmerByte.w && last != StemmerByte.x && last != StemmerByte.Y
                && Self.isVowel(w[end - 2]) && !Self.isVowel(w[end - 3]) {
                return true
            }
        }
        // A vowel at the beginning of the word followed by a non-vowel.
        return end == 2 && Self.isVowel(w[0]) && !Self.isVowel(w[1])
    }

    /// Short: it ends in a short syllable and R1 is empty.
    ///
    /// ```swift
    /// // "hop" (from "hoping"): true, so step 1b adds an e; "fail": false
    /// ```
    func isShortWord() -> Bool {
        r1 >= w.count && endsInShortSyllable(w.count)
    }

    /// The longest of `table`'s suffixes the word ends with, and its action.
    ///
    /// ```swift
    /// // "relational" in step 2's table: (length: 7, action: .replace("ate")), ational not tional
    /// ```
    func longestSuffix<Action>(in table: StemmerSuffixTable<Action>) -> (length: Int, action: Action)? {
        guard let last = w.last, last < 0x80 else { return nil }
        for (suffix, action) in table.buckets[Int(last)] where ends(with: suffix) {
            return (suffix.count, action)
        }
        return nil
    }

    /// Replaces the last `length` bytes by `replacement`.
    ///
    /// ```swift
    /// // replaceSuffix(length: 4, with: "ss") on "caresses" → "caress"
    /// ```
    mutating func replaceSuffix(length: Int, with replacement: [UInt8]) {
        w.removeLast(length)
        w.append(contentsOf: replacement)
    }

    // MARK: Steps

    /// Step 0: the possessive endings 's' 's '.
    ///
    /// ```swift
    /// // "john's" → "john", "dogs'" → "dogs"
    /// ```
    mutating func step0() {
        if let match = longestSuffix(in: StemmerSuffixes.step0) { w.removeLast(match.length) }
    }

    /// Step 1a: plurals.
    ///
    /// ```swift
    /// // "caresses" → "caress", "ponies" → "poni", "ties" → "tie", "gaps" → "gap", "gas" stays
    /// ```
    mutating func step1a() {
        guard case let (length, action)? = longestSuffix(in: StemmerSuffixes.step1a) else { return }
        let stemEnd = w.count - length
        switch action {
        case .sses:
            w.removeLast(2)                                   // sses → ss
        case .ies:
            w.removeLast(stemEnd > 1 ? 2 : 1)                 // cries → cri, ties → tie
        case .keep:
            break                                             // us, ss
        case .s:
            // Delete if a vowel precedes, not immediately before the s: gaps → gap, gas stays.
            if stemEnd >= 1 && hasVowel(before: stemEnd - 1) { w.removeLast() }
        }
    }

    /// Step 1b: eed, ed, ing and their -ly forms, then the repairs of the stem.
    ///
    /// ```swift
    /// // "agreed" → "agree", "hopping" → "hop", "hoping" → "hope", "luxuriating" → "luxuriate"
    /// ```
    mutating func step1b() {
        guard case let (length, action)? = longestSuffix(in: StemmerSuffixes.step1b) else { return }
        let stemEnd = w.count - length
        switch action {
        case .eed:
            if stemEnd >= r1 { replaceSuffix(length: length, with: StemmerSuffixes.ee) }
        case .ed:
            guard hasVowel(before: stemEnd) else { return }
            w.removeLast(length)
            if ends(with: StemmerSuffixes.at) || ends(with: StemmerSuffixes.bl) || ends(with: StemmerSuffixes.iz) {
                w.append(StemmerByte.e)                              // luxuriat → luxuriate
            } else if w.count >= 2 && w[w.count - 1] == w[w.count - 2] && StemmerSuffixes.isDouble(w[w.count - 1]) {
                w.removeLast()                                // hopp → hop
            } else if isShortWord() {
                w.append(StemmerByte.e)                              // hop → hope
            }
        }
    }

    /// Step 1c: a final y or Y after a consonant that is not the first letter becomes i.
    ///
    /// ```swift
    /// // "cry" → "cri", "by" and "say" stay
    /// ```
    mutating func step1c() {
        let n = w.count
        guard n > 2, w[n - 1] == StemmerByte.y || w[n - 1] == StemmerByte.Y, !Self.isVowel(w[n - 2]) else { return }
        w[n - 1] = StemmerByte.i
    }

    /// Step 2: derivational suffixes in R1.
    ///
    /// ```swift
    /// // "relational" → "relate", "hopefulness" → "hopeful", "quickli" → "quick"
    /// ```
    mutating func step2() {
        guard case let (length, action)? = longestSuffix(in: StemmerSuffixes.step2) else { return }
        let stemEnd = w.count - length
        guard stemEnd >= r1 else { return }
        switch action {
        case .replace(let replacement):
            replaceSuffix(length: length, with: replacement)
        case .ogi:
            if stemEnd >= 1 && w[stemEnd - 1] == StemmerByte.l { replaceSuffix(length: length, with: StemmerSuffixes.og) }
        case .li:
            if stemEnd >= 1 && StemmerSuffixes.isValidLiEnding(w[stemEnd - 1]) { w.removeLast(length) }
        }
    }

    /// Step 3: more derivational suffixes in R1; "ative" only in R2.
    ///
    /// ```swift
    /// // "triplicate" → "triplic", "goodness" → "good", "formative" keeps "ative" (not in R2)
    /// ```
    mutating func step3() {
        guard case let (length, action)? = longestSuffix(in: StemmerSuffixes.step3) else { return }
        let stemEnd = w.count - length
        guard stemEnd >= r1 else { return }
        switch action {
        case .replace(let replacement):
            replaceSuffix(length: length, with: replacement)
        case .deleteInR2:
            if stemEnd >= r2 { w.removeLast(length) }
        }
    }

    /// Step 4: suffixes deleted in R2; "ion" only after s or t.
    ///
    /// ```swift
    /// // "adjustable" → "adjust", "adoption" → "adopt", "agreement" stays ("ement" not in R2)
    /// ```
    mutating func step4() {
        guard case let (length, action)? = longestSuffix(in: StemmerSuffixes.step4) else { return }
        let stemEnd = w.count - length
        guard stemEnd >= r2 else { return }
        switch action {
        case .delete:
            w.removeLast(length)
        case .ion:
            if stemEnd >= 1 && (w[stemEnd - 1] == StemmerByte.s || w[stemEnd - 1] == StemmerByte.t) { w.removeLast(length) }
        }
    }

    /// Step 5: a final e (in R2, or in R1 when not after a short syllable), and ll → l in R2.
    ///
    /// ```swift
    /// // "probate" → "probat", "rate" stays, "controll" → "control"
    /// ```
    mutating func step5() {
        guard let last = w.last else { return }
        let stemEnd = w.count - 1
        if last == StemmerByte.e {
            if stemEnd >= r2 || (stemEnd >= r1 && !endsInShortSyllable(stemEnd)) { w.removeLast() }
        } else if last == StemmerByte.l {
            if stemEnd >= r2 && stemEnd >= 1 && w[stemEnd - 1] == StemmerByte.l { w.removeLast() }
        }
    }
}

// MARK: - Tables

/// ASCII bytes the steps test.
///
/// ```swift
/// StemmerByte.y == UInt8(ascii: "y")
/// ```
private enum StemmerByte {
    /// The vowels.
    static let a = UInt8(ascii: "a"), e = UInt8(ascii: "e"), i = UInt8(ascii: "i"), o = UInt8(ascii: "o"), u = UInt8(ascii: "u")
    /// y is a vowel; Y, a y turned consonant, is not.
    static let y = UInt8(ascii: "y"), Y = UInt8(ascii: "Y")
    /// The letters the conditions name.
    static let l = UInt8(ascii: "l"), s = UInt8(ascii: "s"), t = UInt8(ascii: "t"), w = UInt8(ascii: "w"), x = UInt8(ascii: "x")
    /// The apostrophe of step 0 and of a leading "'".
    static let apostrophe = UInt8(ascii: "'")
}

/// The suffix lists of the steps, and the letter sets of their conditions.
///
/// ```swift
/// StemmerSuffixes.isDouble(UInt8(ascii: "t"))   // true: "hopp" → "hop"
/// ```
private enum StemmerSuffixes {
    /// What step 1a does with its suffixes.
    ///
    /// ```swift
    /// // ("sses", .sses), ("ies", .ies), ("ss", .keep), ("s", .s)
    /// ```
    enum Step1a { case sses, ies, keep, s }
    /// What step 1b does: eed/eedly to ee in R1, or ed/edly/ing/ingly deleted after a vowel.
    ///
    /// ```swift
    /// // ("eedly", .eed), ("ing", .ed)
    /// ```
    enum Step1b { case eed, ed }
    /// What step 2 does: replace, or the conditional ogi and li.
    ///
    /// ```swift
    /// // ("ational", .replace("ate")), ("ogi", .ogi), ("li", .li)
    /// ```
    enum Step2 { case replace([UInt8]), ogi, li }
    /// What step 3 does: replace (possibly by nothing), or delete ative in R2.
    ///
    /// ```swift
    /// // ("ness", .replace("")), ("ative", .deleteInR2)
    /// ```
    enum Step3 { case replace([UInt8]), deleteInR2 }
    /// What step 4 does: delete, or delete ion after s or t.
    ///
    /// ```swift
    /// // ("ement", .delete), ("ion", .ion)
    /// ```
    enum Step4 { case delete, ion }

    /// The UTF-8 bytes of a suffix.
    ///
    /// ```swift
    /// StemmerSuffixes.bytes("ee")   // [0x65, 0x65]
    /// ```
    static func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// A suffix table from (suffix, action) pairs.
    ///
    /// ```swift
    /// StemmerSuffixes.table([("s", ())])
    /// ```
    static func table<A>(_ entries: [(String, A)]) -> StemmerSuffixTable<A> { StemmerSuffixTable(entries) }

    /// Words starting with one of these have R1 right after it.
    static let r1Prefixes = ["gener", "commun", "arsen"].map(bytes)
    /// Replacements and endings the steps test.
    static let ee = bytes("ee"), og = bytes("og"), at = bytes("at"), bl = bytes("bl"), iz = bytes("iz")
    /// The letters whose doubles step 1b undoubles: bb dd ff gg mm nn pp rr tt.
    ///
    /// ```swift
    /// StemmerSuffixes.isDouble(UInt8(ascii: "l"))   // false: "controll" keeps its ll in step 1b
    /// ```
    static func isDouble(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "b"), UInt8(ascii: "d"), UInt8(ascii: "f"), UInt8(ascii: "g"), UInt8(ascii: "m"),
             UInt8(ascii: "n"), UInt8(ascii: "p"), UInt8(ascii: "r"), UInt8(ascii: "t"): true
        default: false
        }
    }

    /// The letters before which step 2 removes "li": c d e g h k m n r t.
    ///
    /// ```swift
    /// StemmerSuffixes.isValidLiEnding(UInt8(ascii: "k"))   // true: "quickli" → "quick"
    /// ```
    static func isValidLiEnding(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "c"), UInt8(ascii: "d"), UInt8(ascii: "e"), UInt8(ascii: "g"), UInt8(ascii: "h"),
             UInt8(ascii: "k"), UInt8(ascii: "m"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"): true
        default: false
        }
    }

    /// Step 0's suffixes.
    static let step0: StemmerSuffixTable<Void> = table([("'s'", ()), ("'s", ()), ("'", ())])

    /// Step 1a's suffixes.
    static let step1a: StemmerSuffixTable<Step1a> = table([
        ("sses", .sses), ("ied", .ies), ("ies", .ies), ("us", .keep), ("ss", .keep), ("s", .s),
    ])

    /// Step 1b's suffixes.
    static let step1b: StemmerSuffixTable<Step1b> = table([
        ("eedly", .eed), ("ingly", .ed), ("edly", .ed), ("eed", .eed), ("ing", .ed), ("ed", .ed),
    ])

    /// Step 2's suffixes, all tested in R1.
    static let step2: StemmerSuffixTable<Step2> = table([
        ("ational", .replace(bytes("ate"))), ("fulness", .replace(bytes("ful"))),
        ("iveness", .replace(bytes("ive"))), ("ization", .replace(bytes("ize"))),
        ("ousness", .replace(bytes("ous"))),
        ("tional", .replace(bytes("tion"))), ("biliti", .replace(bytes("ble"))),
        ("lessli", .replace(bytes("less"))),
        ("entli", .replace(bytes("ent"))), ("ation", .replace(bytes("ate"))),
        ("alism", .replace(bytes("al"))), ("aliti", .replace(bytes("al"))),
        ("ousli", .replace(bytes("ous"))), ("iviti", .replace(bytes("ive"))),
        ("fulli", .replace(bytes("ful"))),
        ("enci", .replace(bytes("ence"))), ("anci", .replace(bytes("ance"))),
        ("abli", .replace(bytes("able"))), ("izer", .replace(bytes("ize"))),
        ("ator", .replace(bytes("ate"))), ("alli", .replace(bytes("al"))),
        ("bli", .replace(bytes("ble"))), ("ogi", .ogi),
        ("li", .li),
    ])

    /// Step 3's suffixes, all tested in R1.
    static let step3: StemmerSuffixTable<Step3> = table([
        ("ational", .replace(bytes("ate"))), ("tional", .replace(bytes("tion"))),
        ("alize", .replace(bytes("al"))), ("icate", .replace(bytes("ic"))),
        ("iciti", .replace(bytes("ic"))), ("ative", .deleteInR2),
        ("ical", .replace(bytes("ic"))), ("ness", .replace([])),
        ("ful", .replace([])),
    ])

    /// Step 4's suffixes, all tested in R2.
    static let step4: StemmerSuffixTable<Step4> = table([
        ("ement", .delete),
        ("ance", .delete), ("ence", .delete), ("able", .delete), ("ible", .delete), ("ment", .delete),
        ("ant", .delete), ("ent", .delete), ("ism", .delete), ("ate", .delete), ("iti", .delete),
        ("ous", .delete), ("ive", .delete), ("ize", .delete), ("ion", .ion),
        ("al", .delete), ("er", .delete), ("ic", .delete),
    ])
}

/// One step's suffixes, grouped by their last byte so that a word is compared only with the
/// suffixes ending in its own last letter; each group longest first, so the first match is
/// the longest.
///
/// ```swift
/// let table = StemmerSuffixTable([("ing", 1), ("ed", 2)])   // buckets["g"] = [ing], buckets["d"] = [ed]
/// ```
///
/// - Note: Immutable; safe to share between threads.
private struct StemmerSuffixTable<Action: Sendable>: Sendable {
    /// Indexed by the last byte (ASCII only: every suffix is ASCII).
    let buckets: [[([UInt8], Action)]]

    /// Groups and sorts `entries`.
    ///
    /// ```swift
    /// StemmerSuffixTable([("sses", .sses), ("s", .s)])
    /// ```
    init(_ entries: [(String, Action)]) {
        var buckets = Array(repeating: [([UInt8], Action)](), count: 0x80)
        for (suffix, action) in entries {
            let bytes = Array(suffix.utf8)
            if let last = bytes.last { buckets[Int(last)].append((bytes, action)) }
        }
        self.buckets = buckets.map { bucket in bucket.sorted { $0.0.count > $1.0.count } }
    }
}
