@_spi(Replication) import Settee

/// The `query` group's documents: to-do lists and their tasks, as in Couchbase Lite's to-do sample,
/// each generated from (seed, index) alone, so any document, and the answer of any query over them, can
/// be made again in any order.
///
/// Document `i` (0 ..< count) is a list when `i` is a multiple of 100 (`listCount` of them, ~1 %), a task
/// otherwise (~99 %):
///
/// - list `k` (document `100 k`): ID `list-%07d`, `{"type": "task-list", "name", "owner", "createdAt"}`;
/// - task `i`: ID `task-%08d`, `{"type": "task", "title", "list": {"id", "owner"}, "createdAt",
///   "priority", "completed", "notes", "tags"}`, its list drawn uniformly from all lists.
///
/// `createdAt` is an integer, milliseconds since 1970: strictly increasing with `i` (1 s per document
/// plus 0–999 ms), so `ORDER BY createdAt` has no ties and every engine must return the same rows in
/// the same order. `priority` is 1…5, `completed` true for 30 % of tasks, `notes` 0–30 vocabulary words.
struct TaskGenerator {
    let seed: UInt64
    let count: Int

    /// ~1 % of the documents, at least one.
    var listCount: Int { max(1, count / 100) }

    static let firstCreatedAt: Int64 = 1_700_000_000_000

    /// Independent streams (the bench's `Stream` numbers are below 0x400).
    private static let fieldsStream: UInt64 = 0x400
    private static let textStream: UInt64 = 0x401

    func isList(_ index: Int) -> Bool { index % 100 == 0 && index / 100 < listCount }

    func id(of index: Int) -> String {
        isList(index) ? "list-" + Self.padded(index / 100, 7) : "task-" + Self.padded(index, 8)
    }

    static func listID(_ list: Int) -> String { "list-" + padded(list, 7) }

    /// The fields the queries select on, from a stream of their own (cheap: no text).
    struct Fields {
        let createdAt: Int64
        /// The list a task belongs to (0 ..< listCount); for a list, its own number.
        let list: Int
        let priority: Int
        let completed: Bool
    }

    func fields(of index: Int) -> Fields {
        var random = SplitMix64(seed: seed, stream: Self.fieldsStream, item: UInt64(index))
        let createdAt = Self.firstCreatedAt + Int64(index) * 1000 + Int64(random.bounded(1000))
        if isList(index) { return Fields(createdAt: createdAt, list: index / 100, priority: 0, completed: false) }
        return Fields(createdAt: createdAt, list: random.bounded(listCount), priority: random.between(1 ... 5),
                      completed: random.chance(3, in: 10))
    }

    func createdAt(of index: Int) -> Int64 { fields(of: index).createdAt }

    /// A task's title: 2–6 words.
    func title(of index: Int) -> String {
        var random = SplitMix64(seed: seed, stream: Self.textStream, item: UInt64(index))
        return Self.words(random.between(2 ... 6), &random)
    }

    /// A list's owner: a first name, lowercased, the same in the list and in each of its tasks.
    func owner(ofList list: Int) -> String {
        var random = SplitMix64(seed: seed, stream: Self.textStream, item: UInt64(list * 100))
        _ = random.next()
        return random.pick(Vocabulary.firstNames).lowercased()
    }

    /// Document `index`'s properties, as `Database.saveDocument` takes them.
    func properties(of index: Int) -> [String: JSONValue] {
        let f = fields(of: index)
        if isList(index) {
            var random = SplitMix64(seed: seed, stream: Self.textStream, item: UInt64(index))
            _ = random.next()
            _ = random.next()
            return ["type": "task-list", "name": .string(Self.words(2, &random)), "owner": .string(owner(ofList: f.list)),
                    "createdAt": .int(f.createdAt)]
        }
        var random = SplitMix64(seed: seed, stream: Self.textStream, item: UInt64(index))
        let title = Self.words(random.between(2 ... 6), &random)
        let notes = Self.words(random.between(0 ... 30), &random)
        var tags: [JSONValue] = []
        for _ in 0 ..< random.between(0 ... 2) { tags.append(.string(random.pick(Vocabulary.tags))) }
        return [
            "type": "task",
            "title": .string(title),
            "list": .object(["id": .string(Self.listID(f.list)), "owner": .string(owner(ofList: f.list))]),
            "createdAt": .int(f.createdAt),
            "priority": .int(Int64(f.priority)),
            "completed": .bool(f.completed),
            "notes": .string(notes),
            "tags": .array(tags),
        ]
    }

    private static func words(_ count: Int, _ random: inout SplitMix64) -> String {
        var text = ""
        for n in 0 ..< count {
            if n > 0 { text += " " }
            text += random.pick(Vocabulary.words)
        }
        return text
    }

    private static func padded(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
