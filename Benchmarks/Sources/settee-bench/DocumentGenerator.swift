/// Generates one document's version and JSON body from (seed, document index, generation) alone, so any
/// document can be generated again, in any order, with the same bytes.
struct DocumentGenerator {
    static let bodySizes = 400 ... 600

    /// The longest word the filler text may add, so a body aimed at `target` ends in `target-… ... target`.
    private static let longestFillerWord = Vocabulary.words.map(\.utf8.count).max()! + 1

    let seed: UInt64

    /// The key of document `index`: `doc-%08d`.
    static func key(_ index: Int) -> [UInt8] {
        let digits = String(index)
        return Array(("doc-" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits).utf8)
    }

    /// `<generation>-` followed by 32 lowercase hex digits.
    func version(of index: Int, generation: Int) -> [UInt8] {
        Self.revisionID(generation: generation,
                        SplitMix64(seed: seed, stream: Stream.versions + UInt64(generation), item: UInt64(index)))
    }

    /// The revision of generation `generation` (1...) in the history `rev-insert` gives document `index`:
    /// `<generation>-` followed by 32 lowercase hex digits, from a stream of its own.
    func replicatedRevisionID(of index: Int, generation: Int) -> [UInt8] {
        Self.revisionID(generation: generation,
                        SplitMix64(seed: seed, stream: Stream.history + UInt64(generation), item: UInt64(index)))
    }

    private static func revisionID(generation: Int, _ random: SplitMix64) -> [UInt8] {
        var random = random
        var bytes = Array("\(generation)-".utf8)
        let hex = Array("0123456789abcdef".utf8)
        for _ in 0 ..< 2 {
            let word = random.next()
            for shift in stride(from: 60, through: 0, by: -4) {
                bytes.append(hex[Int((word >> UInt64(shift)) & 0xF)])
            }
        }
        return bytes
    }

    /// A JSON object of 400 to 600 bytes: strings, numbers, booleans, a nested object and arrays.
    func body(of index: Int, generation: Int) -> [UInt8] {
        var random = SplitMix64(seed: seed, stream: Stream.bodies + UInt64(generation), item: UInt64(index))
        let target = random.between(Self.bodySizes.lowerBound + Self.longestFillerWord ... Self.bodySizes.upperBound)
        let first = random.pick(Vocabulary.firstNames)
        let last = random.pick(Vocabulary.lastNames)

        var json = JSONWriter(reservingCapacity: Self.bodySizes.upperBound)
        json.beginObject()
        json.name("type"); json.string(random.pick(Vocabulary.kinds))
        json.name("name"); json.string("\(first) \(last)")
        json.name("email")
        json.string("\(first.lowercased()).\(last.lowercased())\(random.bounded(100))@\(random.pick(Vocabulary.domains))")
        json.name("age"); json.integer(random.between(18 ... 90))
        json.name("active"); json.bool(random.chance(3, in: 4))
        json.name("verified"); json.bool(random.chance(1, in: 2))
        json.name("balance"); json.fixed(Double(random.bounded(10_000_000)) / 100, digits: 2)
        json.name("status"); json.string(random.pick(Vocabulary.statuses))
        json.name("created"); json.string(Self.timestamp(&random))
        json.name("revision"); json.integer(generation)

        json.name("address")
        json.beginObject()
        json.name("street")
        json.string("\(random.between(1 ... 999)) \(random.pick(Vocabulary.streets)) \(random.pick(Vocabulary.streetSuffixes))")
        json.name("city"); json.string(random.pick(Vocabulary.cities))
        json.name("zip"); json.string(String(random.between(10_000 ... 99_999)))
        json.name("country"); json.string(random.pick(Vocabulary.countries))
        json.name("geo")
        json.beginObject()
        json.name("lat"); json.fixed(Double(random.between(-900_000 ... 900_000)) / 10_000, digits: 4)
        json.name("lon"); json.fixed(Double(random.between(-1_800_000 ... 1_800_000)) / 10_000, digits: 4)
        json.endObject()
        json.endObject()

        json.name("tags")
        json.beginArray()
        var tags = Vocabulary.tags
        for slot in 0 ..< random.between(2 ... 4) {
            tags.swapAt(slot, slot + random.bounded(tags.count - slot))
            json.string(tags[slot])
        }
        json.endArray()

        json.name("scores")
        json.beginArray()
        for _ in 0 ..< random.between(3 ... 5) { json.integer(random.between(0 ... 100)) }
        json.endArray()

        // Filler text up to the target size: words until one more would overshoot (the closing `"}` counts).
        json.name("notes")
        var notes = random.pick(Vocabulary.words)
        while true {
            let word = random.pick(Vocabulary.words)
            if json.count + notes.utf8.count + 1 + word.utf8.count + 3 > target { break }
            notes += " " + word
        }
        json.string(notes)
        json.endObject()

        precondition(Self.bodySizes.contains(json.count), "generated body of \(json.count) bytes")
        return json.bytes
    }

    private static func timestamp(_ random: inout SplitMix64) -> String {
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
        return "20\(two(random.between(15 ... 25)))-\(two(random.between(1 ... 12)))-\(two(random.between(1 ... 28)))"
            + "T\(two(random.bounded(24))):\(two(random.bounded(60))):\(two(random.bounded(60)))Z"
    }
}

/// Independent random streams derived from the one seed.
enum Stream {
    static let insertionOrder: UInt64 = 1
    static let warmUpGets: UInt64 = 2
    static let timedGets: UInt64 = 3
    static let updates: UInt64 = 4
    /// The documents `compaction`'s writer saves while it measures.
    static let compactionWrites: UInt64 = 5
    static let versions: UInt64 = 0x100
    static let bodies: UInt64 = 0x200
    static let history: UInt64 = 0x300
}
