#if canImport(CStemmer)
import CStemmer
#endif
import Synchronization

/// Snowball's stemmers (the libstemmer library, as Debian's `libstemmer-dev` installs it on Linux
/// and Android): the stemmer of each language full-text indexes know (``languages``). Apple's
/// systems ship no libstemmer: there ``isAvailable`` is false, and the analyzer stems English
/// with Settee's own Porter2 (``EnglishStemmer``) and other languages not at all.
///
/// ```swift
/// var word = Array("continuation".utf8)
/// if SnowballStemmer.stem(&word, algorithm: "french") { print(String(decoding: word, as: UTF8.self)) }   // continu
/// ```
///
/// - Note: Thread-safe: a libstemmer stemmer keeps state while it stems, so each call takes one
///   from a pool of its language (made on first use, kept for the next call).
enum SnowballStemmer {
    /// Whether this build has Snowball's stemmers.
    ///
    /// ```swift
    /// print(SnowballStemmer.isAvailable)   // true on Linux
    /// ```
    static var isAvailable: Bool {
        #if canImport(CStemmer)
        true
        #else
        false
        #endif
    }

    /// The languages with a stemmer, by Snowball's algorithm name, with their ISO 639-1 codes
    /// (Norwegian's three: `no`, `nb` and `nn`). Snowball's `porter` (the first English stemmer,
    /// superseded by `english`) is left out.
    ///
    /// ```swift
    /// print(SnowballStemmer.languages["fr"] ?? "none")   // french
    /// ```
    static let languages: [String: String] = [
        "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish", "nl": "dutch",
        "en": "english", "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
        "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian", "ne": "nepali",
        "no": "norwegian", "nb": "norwegian", "nn": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian",
        "sr": "serbian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
    ]

    /// The algorithm of a language code (`fr`, `fr-CA`, `pt_BR`) or name (`french`), in any
    /// case; nil for a language without a stemmer.
    ///
    /// ```swift
    /// SnowballStemmer.algorithm(forLanguage: "en-GB")   // "english"
    /// ```
    static func algorithm(forLanguage code: String) -> String? {
        let lower = code.lowercased()
        let primary = String(lower.prefix { $0 != "-" && $0 != "_" })
        if let name = languages[primary] { return name }
        return Set(languages.values).contains(lower) ? lower : nil
    }

    /// Stems `word` (lowercase UTF-8) in place with `algorithm`'s stemmer; false, leaving it
    /// as it is, where this build has none (Apple's systems) or libstemmer cannot make one.
    ///
    /// ```swift
    /// var word = Array("chanteurs".utf8)
    /// _ = SnowballStemmer.stem(&word, algorithm: "french")   // word == "chanteur"
    /// ```
    static func stem(_ word: inout [UInt8], algorithm: String) -> Bool {
        #if canImport(CStemmer)
        // Words are bounded by the tokenizer (FullTextTokenizer.maximumTermByteCount); the
        // check keeps the conversion below exact whatever the caller.
        guard !word.isEmpty, let size = Int32(exactly: word.count) else { return false }
        guard let stemmer = take(algorithm) else { return false }
        defer { give(stemmer, algorithm) }
        // The stem is in the stemmer's own buffer until its next call: copied out before the
        // stemmer goes back to the pool.
        let stemmed = word.withUnsafeBufferPointer { bytes -> [UInt8]? in
            guard let result = sb_stemmer_stem(stemmer.handle, bytes.baseAddress, size) else { return nil }   // out of memory
            let length = Int(sb_stemmer_length(stemmer.handle))
            guard length >= 0 else { return nil }
            return Array(UnsafeBufferPointer(start: result, count: length))
        }
        guard let stemmed else { return false }
        word = stemmed
        return true
        #else
        return false
        #endif
    }

    #if canImport(CStemmer)
    /// One libstemmer stemmer, used by one caller at a time.
    private final class Stemmer: @unchecked Sendable {
        let handle: OpaquePointer
        init?(_ algorithm: String) {
            guard let h = sb_stemmer_new(algorithm, "UTF_8") else { return nil }
            handle = h
        }
        deinit { sb_stemmer_delete(handle) }
    }

    /// Stemmers not in use, by algorithm: at most 16 of each are kept.
    private static let pool = Mutex<[String: [Stemmer]]>([:])

    private static func take(_ algorithm: String) -> Stemmer? {
        if let pooled = pool.withLock({ $0[algorithm]?.popLast() }) { return pooled }
        return Stemmer(algorithm)
    }

    private static func give(_ stemmer: Stemmer, _ algorithm: String) {
        pool.withLock { p in
            if p[algorithm, default: []].count < 16 { p[algorithm, default: []].append(stemmer) }
        }
    }
    #endif
}
