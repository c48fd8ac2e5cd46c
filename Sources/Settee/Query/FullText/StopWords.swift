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
/// Other languages have lists of their own (``StopWords``); an index without a language
/// stores every word.
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

/// The stop words of the other languages with a list in Settee (Couchbase Lite's full-text
/// languages): each language's articles, pronouns, commonest prepositions and conjunctions, and
/// forms of "to be" and "to have". Settee's own lists, kept short: a word left out is only
/// indexed, while a word wrongly listed could never be found.
///
/// ```swift
/// StopWords.contains(Array("les".utf8), algorithm: "french", ignoreAccents: false)   // true
/// ```
///
/// The languages Snowball stems without a list here (Arabic, Basque, Greek, Hindi, …) keep every
/// word. A list is compared with words as the tokenizer gives them, so each is folded the same
/// way (lowercase, and without accents for an index that ignores them).
///
/// - Note: Immutable once made; safe to use from any thread.
enum StopWords {
    /// Each language's words, by Snowball's algorithm name (English: ``EnglishStopWords``).
    static let lists: [String: [String]] = [
        "danish": [
            "og", "i", "at", "en", "et", "den", "det", "de", "der", "som", "til", "af", "på", "med", "for", "er", "var",
            "har", "havde", "ikke", "jeg", "du", "han", "hun", "vi", "dig", "mig", "ham", "hende", "os", "dem", "sig",
            "min", "din", "sin", "vores", "jeres", "deres", "om", "men", "eller", "fra", "ved", "efter", "hvor", "hvad",
            "hvem", "når", "så", "også", "være", "blive", "bliver", "blev",
        ],
        "dutch": [
            "de", "het", "een", "en", "of", "maar", "want", "dat", "die", "dit", "deze", "wie", "wat", "als", "dan", "ik",
            "jij", "je", "hij", "zij", "ze", "wij", "we", "jullie", "mij", "me", "hem", "haar", "ons", "hun", "mijn",
            "jouw", "zijn", "in", "op", "aan", "bij", "met", "naar", "van", "voor", "om", "uit", "door", "tot", "te",
            "is", "was", "waren", "ben", "bent", "heeft", "hebben", "had", "wordt", "worden", "niet", "geen", "ook",
            "nog", "er", "zo",
        ],
        "finnish": [
            "ja", "tai", "mutta", "että", "kun", "jos", "kuin", "ei", "en", "et", "emme", "ette", "eivät", "on", "ovat",
            "oli", "olivat", "olla", "minä", "sinä", "hän", "me", "te", "he", "se", "ne", "tämä", "tuo", "nämä", "nuo",
            "mikä", "joka", "mitä", "kuka", "myös", "vain", "niin", "jo", "nyt", "sitten", "koska",
        ],
        "french": [
            "le", "la", "les", "un", "une", "des", "du", "de", "et", "ou", "mais", "donc", "car", "ni", "que", "qui",
            "quoi", "dont", "où", "ce", "cet", "cette", "ces", "son", "sa", "ses", "mon", "ma", "mes", "ton", "ta",
            "tes", "notre", "nos", "votre", "vos", "leur", "leurs", "je", "tu", "il", "elle", "on", "nous", "vous",
            "ils", "elles", "me", "te", "se", "lui", "eux", "y", "en", "au", "aux", "à", "dans", "par", "pour", "sur",
            "sous", "avec", "sans", "chez", "entre", "vers", "est", "sont", "était", "être", "avoir", "ont", "ne",
            "pas", "très", "aussi", "comme", "si",
        ],
        "german": [
            "der", "die", "das", "den", "dem", "des", "ein", "eine", "einer", "eines", "einem", "einen", "und", "oder",
            "aber", "doch", "denn", "dass", "wenn", "als", "wie", "ich", "du", "er", "sie", "es", "wir", "ihr", "mich",
            "dich", "sich", "mir", "dir", "ihm", "ihn", "uns", "euch", "ihnen", "mein", "dein", "unser", "euer", "in",
            "im", "an", "am", "auf", "aus", "bei", "mit", "nach", "von", "vom", "zu", "zum", "zur", "für", "über",
            "durch", "gegen", "ohne", "um", "ist", "sind", "war", "waren", "bin", "bist", "hat", "haben", "hatte",
            "wird", "werden", "nicht", "auch", "noch", "nur", "so", "sehr", "schon",
        ],
        "hungarian": [
            "a", "az", "egy", "és", "vagy", "de", "hogy", "ha", "mint", "is", "nem", "sem", "van", "volt", "lesz",
            "vannak", "voltak", "én", "te", "ő", "mi", "ti", "ők", "ez", "azt", "ezt", "ami", "aki", "amely", "ahol",
            "mert", "csak", "már", "még", "meg", "pedig", "így", "úgy",
        ],
        "italian": [
            "il", "lo", "la", "i", "gli", "le", "un", "uno", "una", "di", "del", "della", "dei", "delle", "a", "al",
            "alla", "ai", "da", "dal", "in", "nel", "nella", "con", "su", "sul", "per", "tra", "fra", "e", "ed", "o",
            "ma", "che", "chi", "non", "si", "è", "sono", "era", "essere", "avere", "ha", "hanno", "io", "tu", "lui",
            "lei", "noi", "voi", "loro", "mi", "ti", "ci", "vi", "suo", "sua", "suoi", "sue", "mio", "mia", "questo",
            "questa", "quello", "quella", "come", "anche", "più", "molto",
        ],
        "norwegian": [
            "og", "i", "å", "at", "en", "et", "ei", "den", "det", "de", "der", "som", "til", "av", "på", "med", "for",
            "er", "var", "har", "hadde", "ikke", "jeg", "du", "han", "hun", "vi", "dere", "meg", "deg", "ham", "henne",
            "oss", "dem", "seg", "min", "din", "sin", "vår", "deres", "om", "men", "eller", "fra", "ved", "etter",
            "hvor", "hva", "hvem", "når", "så", "også", "være", "bli", "blir", "ble",
        ],
        "portuguese": [
            "o", "a", "os", "as", "um", "uma", "uns", "umas", "de", "do", "da", "dos", "das", "em", "no", "na", "nos",
            "nas", "por", "pelo", "pela", "para", "com", "sem", "sobre", "entre", "e", "ou", "mas", "que", "se", "não",
            "é", "são", "foi", "ser", "estar", "está", "ter", "tem", "eu", "tu", "ele", "ela", "nós", "eles", "elas",
            "você", "vocês", "me", "te", "lhe", "seu", "sua", "seus", "suas", "meu", "minha", "este", "esta", "esse",
            "essa", "isso", "isto", "aquele", "aquela", "muito", "mais", "também", "como", "quando", "onde",
        ],
        "romanian": [
            // ș and ț in both of their encodings (comma below, and the older cedilla).
            "și", "şi", "în", "la", "de", "cu", "pe", "din", "pentru", "prin", "spre", "sub", "fără", "un", "o", "unui",
            "unei", "niște", "nişte", "a", "al", "ale", "ai", "este", "sunt", "era", "fi", "fost", "are", "au", "avea",
            "nu", "că", "ce", "care", "cine", "dacă", "sau", "dar", "ci", "eu", "tu", "el", "ea", "noi", "voi", "ei",
            "ele", "mă", "te", "se", "ne", "vă", "îl", "îi", "lor", "său", "mai", "foarte", "acest", "această", "acel",
            "acea",
        ],
        "russian": [
            // е and ё both: writers often leave out the diaeresis.
            "и", "в", "во", "не", "что", "он", "на", "я", "с", "со", "как", "а", "то", "все", "она", "так", "его", "но",
            "да", "ты", "к", "у", "же", "вы", "за", "бы", "по", "только", "ее", "её", "мне", "было", "вот", "от",
            "меня", "еще", "ещё", "нет", "о", "из", "ему", "когда", "даже", "ли", "если", "уже", "или", "ни", "быть",
            "был", "была", "были", "до", "вас", "они", "мы", "их", "это", "этот", "эта", "эти", "для", "мой", "моя",
            "свой", "себя", "при", "над", "под", "без", "про", "чтобы", "где", "там", "тут",
        ],
        "spanish": [
            "el", "la", "los", "las", "un", "una", "unos", "unas", "de", "del", "al", "a", "y", "e", "o", "u", "pero",
            "que", "qué", "como", "con", "sin", "en", "por", "para", "sobre", "entre", "hasta", "desde", "es", "son",
            "fue", "ser", "estar", "está", "están", "ha", "han", "se", "su", "sus", "mi", "mis", "tu", "tus", "lo", "le",
            "les", "me", "te", "nos", "yo", "él", "ella", "ellos", "ellas", "nosotros", "vosotros", "usted", "ustedes",
            "este", "esta", "estos", "estas", "ese", "esa", "esos", "esas", "muy", "más", "no", "ni", "ya", "también",
            "cuando", "donde", "porque",
        ],
        "swedish": [
            "och", "i", "att", "en", "ett", "den", "det", "de", "som", "till", "av", "på", "med", "för", "är", "var",
            "har", "hade", "inte", "jag", "du", "han", "hon", "vi", "ni", "mig", "dig", "honom", "henne", "oss", "dem",
            "sig", "min", "din", "sin", "vår", "deras", "om", "men", "eller", "från", "vid", "efter", "över", "där",
            "vad", "vem", "när", "så", "också", "vara", "bli", "blir", "blev",
        ],
        "turkish": [
            "ve", "veya", "ile", "ama", "fakat", "de", "da", "ki", "bu", "şu", "o", "bir", "ben", "sen", "biz", "siz",
            "onlar", "mi", "mı", "mu", "mü", "için", "gibi", "kadar", "daha", "çok", "ne", "neden", "nasıl", "her",
            "hiç", "ise", "değil", "olan", "olarak", "diye", "sonra", "önce",
        ],
    ]

    /// The lists as the tokenizer gives words, by algorithm: accents kept, then removed.
    private static let folded: [String: (kept: Set<[UInt8]>, removed: Set<[UInt8]>)] = lists.mapValues { words in
        func fold(_ ignoreAccents: Bool) -> Set<[UInt8]> {
            let tokenizer = FullTextTokenizer(ignoreAccents: ignoreAccents)
            return Set(words.flatMap { tokenizer.tokens(in: $0).map { Array($0.term.utf8) } })
        }
        return (fold(false), fold(true))
    }

    /// Whether `word` (as the tokenizer gives it) is a stop word of `algorithm`'s language.
    ///
    /// ```swift
    /// StopWords.contains(Array("fur".utf8), algorithm: "german", ignoreAccents: true)   // true: für
    /// ```
    static func contains(_ word: [UInt8], algorithm: String, ignoreAccents: Bool) -> Bool {
        if algorithm == "english" { return EnglishStopWords.contains(word) }
        guard let sets = folded[algorithm] else { return false }
        return ignoreAccents ? sets.removed.contains(word) : sets.kept.contains(word)
    }
}
