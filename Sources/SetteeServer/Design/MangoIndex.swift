import Foundation
import Synchronization
@_spi(Replication) @_spi(Server) import Settee

// The Mango indexes of a database: what `"language": "query"` design documents define, and the
// library indexes kept to match them. The HTTP endpoints (`_index`, `_find`) read and write
// through this model.

/// One Mango index, as its design document defines it (`_index`'s model): the fields it
/// orders by, in one direction, and an optional `partial_filter_selector`; served by a library
/// index named ``libraryName`` over ``expressions``.
///
/// ```swift
/// let index = MangoIndex(ddoc: "_design/by-n", name: "n", fields: [("n", false)], partial: nil)
/// try await database.createIndex(ValueIndexConfiguration(index.expressions), name: index.libraryName)
/// ```
///
/// - Note: A value type.
struct MangoIndex: Sendable {
    var ddoc: String
    var name: String
    var fields: [(field: String, descending: Bool)]
    var partial: JSONValue?
    /// A partitioned index (CouchDB's, in a partitioned database): its entries are keyed by
    /// the document's partition first, so a partition's query reads its own entries alone.
    var partitioned = false

    var libraryName: String { "\(ddoc)/\(name)" }

    var json: JSONValue {
        var def: [String: JSONValue] = ["fields": .array(fields.map { .object([$0.field: .string($0.descending ? "desc" : "asc")]) })]
        if let partial { def["partial_filter_selector"] = partial }
        return ["ddoc": .string(ddoc), "name": .string(name), "type": "json", "partitioned": .bool(partitioned), "def": .object(def)]
    }

    /// The library index's expressions: each field's path, every name quoted; for a
    /// partitioned index, the document's partition before them.
    var expressions: [String] {
        (partitioned ? [MangoQuery.partitionExpression] : []) + fields.map { f in
            MangoIndex.names(of: f.field).map { "`" + $0.replacingOccurrences(of: "`", with: "``") + "`" }.joined(separator: ".")
        }
    }

    /// A Mango field's names: dots separate them, `\.` is a dot within one.
    static func names(of field: String) -> [String] {
        var out: [String] = []
        var name = ""
        var escaped = false
        for ch in field {
            if escaped { name.append(ch); escaped = false } else if ch == "\\" { escaped = true } else if ch == "." { out.append(name); name = "" } else { name.append(ch) }
        }
        out.append(name)
        return out
    }

    /// An index definition's `fields`: names, or `{"name": "asc" | "desc"}`, in one direction.
    static func definedFields(_ value: JSONValue?) throws -> [(field: String, descending: Bool)] {
        guard case .array(let list)? = value, !list.isEmpty, list.count <= 32 else {
            throw CouchError(.badRequest, "invalid_index_fields_definition", "Index fields must be a non-empty array of field names or {\"field\": \"asc\" | \"desc\"}")
        }
        var out: [(field: String, descending: Bool)] = []
        for item in list {
            switch item {
            case .string(let f): out.append((f, false))
            case .object(let o) where o.count == 1:
                guard let (field, direction) = o.first, case .string(let d) = direction, d == "asc" || d == "desc" else {
                    throw CouchError(.badRequest, "invalid_index_fields_definition", "Index field directions are \"asc\" or \"desc\"")
                }
                out.append((field, d == "desc"))
            default:
                throw CouchError(.badRequest, "invalid_index_fields_definition", "Index fields must be a non-empty array of field names or {\"field\": \"asc\" | \"desc\"}")
            }
        }
        for f in out where f.field.isEmpty || names(of: f.field).contains(where: \.isEmpty) || f.field.utf8.count > 1024 {
            throw CouchError(.badRequest, "invalid_index_fields_definition", "Invalid field name \"\(f.field)\"")
        }
        if Set(out.map(\.descending)).count > 1 {
            throw CouchError(.badRequest, "invalid_index_fields_definition", "Index fields must all sort in one direction")
        }
        return out
    }
}

extension ServedDatabase {
    /// The Mango indexes the database's design documents define.
    /// The Mango indexes the design documents define: read from them once after each change,
    /// then from memory (every `_find` chooses among them).
    func mangoIndexes() throws -> [MangoIndex] {
        let (generation, known) = mangoIndexList.withLock { $0 }
        if let known { return known }
        let list = try Self.mangoIndexes(of: database, partitioned: partitioned)
        mangoIndexList.withLock { if $0.generation == generation { $0.list = list } }
        return list
    }

    /// Forgets the Mango indexes read: a design document changed.
    func designDocumentsChanged() {
        mangoIndexList.withLock { $0 = ($0.generation &+ 1, nil) }
    }

    /// `partitioned`: the database's, which a design document's `options.partitioned` overrides.
    static func mangoIndexes(of database: Database, partitioned: Bool) throws -> [MangoIndex] {
        var options = AllDocumentsOptions()
        options.prefix = "_design/"
        let cursor = try database.allDocuments(options)
        var out: [MangoIndex] = []
        while let doc = try cursor.next() {
            let props = doc.toDictionary()
            guard props["language"] == .string("query"), case .object(let views)? = props["views"] else { continue }
            let inPartitions = ViewDefinition.partitioned(props, database: partitioned)
            for (name, v) in views.sorted(by: { $0.key < $1.key }) {
                guard case .object(let view) = v, case .object(let options)? = view["options"], case .object(let def)? = options["def"],
                      let fields = try? MangoIndex.definedFields(def["fields"]) else { continue }
                var partial = def["partial_filter_selector"]
                if case .object(let o)? = partial, o.isEmpty { partial = nil }
                out.append(MangoIndex(ddoc: doc.id, name: name, fields: fields, partial: partial, partitioned: inPartitions))
            }
        }
        return out
    }

    /// One synchronization after another per database: two at once would build the same index
    /// twice.
    private static let mangoSyncs = Mutex<[ObjectIdentifier: Task<Void, any Error>]>([:])

    /// Makes the library's `_design/…` indexes those the design documents define: creates
    /// (or, changed, replaces) each, deletes those no design document defines any more; the
    /// same for views (``syncViewIndexes()``). Run at start, after `_index` writes, when a
    /// design document changes however it was written, and before a view is read whose index
    /// is not whole.
    func syncMangoIndexes() async throws {
        // Whoever asks next reads the design documents as they are now.
        designDocumentsChanged()
        let database = self.database
        let key = ObjectIdentifier(database)
        let task = Self.mangoSyncs.withLock { tasks in
            let previous = tasks[key]
            let next = Task.detached {
                _ = await previous?.result
                let wanted = try Self.mangoIndexes(of: database, partitioned: self.partitioned)
                for index in wanted {
                    // Kept by channel: a user's `_find` reads only its channels' entries.
                    try await database.createIndex(ValueIndexConfiguration(index.expressions, byChannel: true), name: index.libraryName)
                }
                let names = Set(wanted.map(\.libraryName))
                for existing in try database.indexes where existing.hasPrefix("_design/") && !names.contains(existing) {
                    try database.deleteIndex(forName: existing)
                }
                try await self.syncViewIndexes()
            }
            tasks[key] = next
            return next
        }
        defer {
            // The last one forgets itself, so a closed database leaves nothing behind.
            Self.mangoSyncs.withLock { tasks in if tasks[key] == task { tasks[key] = nil } }
        }
        try await task.value
    }
}
