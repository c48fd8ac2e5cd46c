/// The English stop words: common function words a full-text index with `language: "english"`
/// does not store, because nearly every document has them, so they make the index larger
/// without telling documents apart.
///
/// ```swift
/// EnglishStopWords.contains("the")     // true
/// EnglishStopWords.contains("query")   // false
/// ```
///
/// The list is Settee's own (articles, pronouns, auxiliary verbs, prepositions,
/// conjunctions, a few adverbs), written in the form the tokenizer produces: lowercase and
/// without apostrophes, so the contractions appear as "dont", "isnt", "youre". It is checked
/// before stemming, on the word as written.
///
/// Left out on purpose: "us", "may", "will" and "who", whose capitalised forms (US, May,
/// Will, WHO) are things people search for; and the contractions that are words of their
/// own once the apostrophe is gone: "well" (we'll), "ill" (I'll), "hell", "shell", "wed",
/// "id".
///
/// Other languages have no stop words in Settee: a full-text index with another `language`,
/// or none, stores every word.
///
/// - Note: Immutable; safe to use from any thread.
enum EnglishStopWords {
    /// The words of at most 8 bytes, packed into integers and sorted: a stop-word check is a
    /// binary search of integers, with no hashing of the word.
    private static let packed: [UInt64] = list.compactMap { FullTextPackedWord(Array($0.utf8))?.value }.sorted()
    /// The few longer words ("themselves", "yourselves", …).
    private static let long: [[UInt8]] = list.map { Array($0.utf8) }.filter { $0.count > 8 }

    /// The words as text, in no meaningful order (for documentation and tests).
    ///
    /// ```swift
    /// print(EnglishStopWords.list.count)   // 186
    /// ```
    static let list: [String] = [
        // Articles and determiners
        "a", "an", "the", "this", "that", "these", "those", "each", "every", "either", "neither",
        "some", "any", "such", "no", "nor", "other", "another", "same", "own",
        // Personal, possessive and reflexive pronouns
        "i", "me", "my", "mine", "myself", "we", "our", "ours", "ourselves",
        "you", "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself",
        "she", "her", "hers", "herself", "it", "its", "itself",
        "they", "them", "their", "theirs", "themselves",
        // Interrogative and relative words
        "what", "which", "whom", "whose", "when", "where", "why", "how",
        "whatever", "whenever", "wherever", "whoever", "whether",
        // Auxiliary and modal verbs
        "am", "is", "are", "was", "were", "be", "been", "being",
        "have", "has", "had", "having", "do", "does", "did", "doing",
        "would", "should", "could", "might", "must", "shall", "can", "cannot",
        // Contractions without their apostrophes
        "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "hasnt", "havent", "hadnt",
        "wont", "wouldnt", "shouldnt", "couldnt", "cant", "mustnt",
        "im", "ive", "youre", "youve", "youd", "youll", "hes", "shes", "theyre", "theyve", "theyd",
        "theyll", "weve", "thats", "theres", "whats", "lets",
        // Prepositions
        "of", "at", "by", "for", "with", "about", "against", "between", "into", "through",
        "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out",
        "on", "off", "over", "under", "onto", "upon", "within", "without", "among", "via", "per",
        // Conjunctions
        "and", "but", "or", "if", "because", "as", "until", "while", "than", "though", "although",
        "unless", "since", "so", "yet",
        // Adverbs and particles
        "not", "again", "further", "then", "once", "here", "there", "all", "both", "few", "more",
        "most", "very", "too", "just", "also", "only", "now", "ever",
    ]

    /// Whether `word` (lowercase, as the tokenizer gives it) is a stop word.
    ///
    /// ```swift
    /// EnglishStopWords.contains("whose")   // true
    /// ```
    static func contains(_ word: String) -> Bool {
        contains(Array(word.utf8))
    }

    /// Whether `word` (lowercase UTF-8 bytes) is a stop word.
    ///
    /// ```swift
    /// EnglishStopWords.contains(Array("into".utf8))   // true
    /// ```
    static func contains(_ word: [UInt8]) -> Bool {
        if let key = FullTextPackedWord(word) { return FullTextPackedWord.search(key, in: packed) != nil }
        return word.count <= 10 && long.contains(word)
    }
}
