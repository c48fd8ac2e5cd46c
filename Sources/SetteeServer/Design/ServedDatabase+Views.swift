import Foundation
import Logging
@_spi(Replication) @_spi(Server) import Settee

/// One view of a design document (`views.<name>` with a JavaScript `map`).
struct ViewDefinition: Sendable, Equatable {
    /// The design document's ID (`_design/app`).
    let ddoc: String
    let name: String
    let map: String
    let reduce: String?
    /// The library's map index holding the view's rows: `_view/<ddoc>/<view>`, each part with
    /// `%` and `/` percent-encoded so that no two views share a name.
    let libraryName: String
    /// What the rows are made with: a changed map function makes another version, and the
    /// index is rebuilt.
    let version: String
    /// A partitioned view (its design document's in a partitioned database): each row is kept
    /// under `[partition, key]`, and the view is read one partition at a time.
    let partitioned: Bool

    init(ddoc: String, name: String, map: String, reduce: String?, partitioned: Bool = false) {
        self.ddoc = ddoc
        self.name = name
        self.map = map
        self.reduce = reduce
        self.partitioned = partitioned
        libraryName = Self.libraryPrefix + Self.escape(String(ddoc.dropFirst("_design/".count))) + "/" + Self.escape(name)
        version = (partitioned ? "javascript partitioned\n" : "javascript\n") + map
    }

    /// Whether a design document's views and indexes are partitioned: its
    /// `options.partitioned`, else the database's.
    static func partitioned(_ properties: [String: JSONValue], database: Bool) -> Bool {
        if case .object(let options)? = properties["options"], case .bool(let p)? = options["partitioned"] { return p }
        return database
    }

    /// A document's partition: its ID up to the first `:` (nil without one).
    static func partition(of id: String) -> String? {
        id.firstIndex(of: ":").map { String(id[..<$0]) }
    }

    static let libraryPrefix = "_view/"
    static let builtinReduces: Set<String> = ["_count", "_sum", "_stats", "_approx_count_distinct"]

    static func escape(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "/") }) else { return s }
        return s.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
    }

    /// The views of a design document's properties (none unless its language is JavaScript);
    /// `partitioned`: whether the database is.
    static func views(in properties: [String: JSONValue], id: String, partitioned: Bool) -> [ViewDefinition] {
        if let language = properties["language"], language != "javascript" { return [] }
        guard case .object(let views)? = properties["views"] else { return [] }
        let inPartitions = Self.partitioned(properties, database: partitioned)
        var out: [ViewDefinition] = []
        for (name, v) in views.sorted(by: { $0.key < $1.key }) {
            guard case .object(let view) = v, case .string(let map)? = view["map"] else { continue }
            var reduce: String?
            if case .string(let r)? = view["reduce"] { reduce = r }
            out.append(ViewDefinition(ddoc: id, name: name, map: map, reduce: reduce, partitioned: inPartitions))
        }
        return out
    }

    /// Checks a design document's views as a write of it is checked: `views` an object of
    /// objects, each `map` a function that compiles, each `reduce` a built-in or a function.
    static func check(_ properties: [String: JSONValue], id: String, engine: ScriptEngine) throws {
        if let language = properties["language"], language != "javascript" { return }
        guard let views = properties["views"] else { return }
        guard case .object(let list) = views else {
            throw CouchError(.badRequest, "invalid_design_doc", "`views` is not an object")
        }
        for (name, v) in list {
            guard case .object(let view) = v else { throw CouchError(.badRequest, "invalid_design_doc", "View \(name) must be an object") }
            guard case .string(let map)? = view["map"] else {
                if name == "lib" { continue }   // CommonJS modules: not run (documented)
                throw CouchError(.badRequest, "invalid_design_doc", "View \(name) must have a `map` function (a string)")
            }
            do {
                _ = try ViewMapFunction(name: "\(id) view \(name) map", source: map, engine: engine)
            } catch {
                throw CouchError(.badRequest, "compilation_error", "\(error)")
            }
            switch view["reduce"] {
            case nil: break
            case .string(let r)? where r.hasPrefix("_"):
                guard builtinReduces.contains(r.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                    throw CouchError(.badRequest, "invalid_design_doc", "View \(name): unknown built-in reduce \(r)")
                }
            case .string(let r)?:
                do {
                    _ = try ViewReduceFunction(name: "\(id) view \(name) reduce", source: r, engine: engine)
                } catch {
                    throw CouchError(.badRequest, "compilation_error", "\(error)")
                }
            default:
                throw CouchError(.badRequest, "invalid_design_doc", "View \(name): `reduce` must be a string")
            }
        }
    }
}

extension ServedDatabase {
    private static let viewLogger = Logger(label: "settee.server")

    /// Every view of the database's design documents.
    func viewDefinitions() throws -> [ViewDefinition] {
        var options = AllDocumentsOptions()
        options.prefix = "_design/"
        let cursor = try database.allDocuments(options)
        var out: [ViewDefinition] = []
        while let doc = try cursor.next() { out += ViewDefinition.views(in: doc.toDictionary(), id: doc.id, partitioned: partitioned) }
        return out
    }

    /// The library index configuration of a view: its map function, compiled once per version
    /// and run in JavaScriptCore for each document. A document the function throws on has no
    /// rows; it is logged and counted (`_info`).
    func mapConfiguration(_ view: ViewDefinition) throws -> MapIndexConfiguration {
        let name = view.libraryName
        let version = view.version
        let compiled: ViewMapFunction
        if let known = viewMaps.withLock({ $0[name] }), known.version == version {
            compiled = known.map
        } else {
            compiled = try ViewMapFunction(name: "\(view.ddoc) view \(view.name) map", source: view.map, engine: routing.engine)
            viewMaps.withLock { $0[name] = (version, compiled) }
        }
        // Weak: the database keeps the function, and this object keeps the database. The
        // documents of a commit go to JavaScript in one call: a call's own cost (a VM taken,
        // its time limit armed, its globals put back) is paid once per 256 documents.
        return MapIndexConfiguration(version: version, mapBatch: { [weak self] docs in
            var shown: [JSONValue] = []
            var positions: [Int] = []
            for (i, doc) in docs.enumerated() where !doc.id.hasPrefix("_design/") {
                // Design documents are not shown to map functions (CouchDB's default).
                var o = doc.properties
                o["_id"] = .string(doc.id)
                o["_rev"] = .string(doc.revisionID)
                shown.append(.object(o))
                positions.append(i)
            }
            var out = [[MapIndexEmission]](repeating: [], count: docs.count)
            guard !shown.isEmpty else { return out }
            let results = try compiled.run(docs: try JSONValue.array(shown).jsonText(), count: shown.count)
            for (position, result) in zip(positions, results) {
                switch result {
                case .success(let rows) where view.partitioned:
                    // Kept under `[partition, key]`: a partition's rows are one range.
                    guard let p = ViewDefinition.partition(of: docs[position].id) else { continue }
                    out[position] = rows.map { MapIndexEmission(key: [.string(p), $0.key], value: $0.value) }
                case .success(let rows): out[position] = rows
                case .failure(let error):
                    Self.viewLogger.warning("\("\(view.ddoc) view \(view.name): document \(docs[position].id): \(error)".escapedForLog)")
                    self?.viewErrors.withLock { $0[name, default: 0] += 1 }
                }
            }
            return out
        })
    }

    /// Gives the library the map functions of the views whose rows are whole, at start and
    /// before any write (a view whose function is not given when a write comes is rebuilt).
    func attachViews() {
        guard let views = try? viewDefinitions() else { return }
        for view in views {
            guard let info = try? database.mapIndexInfo(forName: view.libraryName), info.version == view.version, info.isReady,
                  !info.isAttached, let config = try? mapConfiguration(view) else { continue }
            do {
                try database.createIndex(config, name: view.libraryName)
            } catch {
                Self.viewLogger.error("\("\(view.ddoc) view \(view.name) could not be attached: \(error)".escapedForLog)")
            }
        }
    }

    /// Makes the library's view indexes those the design documents define (part of
    /// ``syncMangoIndexes()``): builds new and changed ones, deletes those no design document
    /// defines any more. A map function that does not compile has no index (its queries answer
    /// `compilation_error`).
    func syncViewIndexes() async throws {
        let views = try viewDefinitions()
        for view in views {
            let config: MapIndexConfiguration
            do {
                config = try mapConfiguration(view)
            } catch {
                Self.viewLogger.warning("\("\(view.ddoc) view \(view.name) does not compile: \(error)".escapedForLog)")
                continue
            }
            try await database.createIndex(config, name: view.libraryName)
        }
        let names = Set(views.map(\.libraryName))
        for existing in try database.indexes where existing.hasPrefix(ViewDefinition.libraryPrefix) && !names.contains(existing) {
            try database.deleteIndex(forName: existing)
            viewMaps.withLock { _ = $0.removeValue(forKey: existing) }
        }
    }
}
