import Foundation
internal import SetteeStorage
import Synchronization
internal import Logging

extension Database {
    /// Creates an index (or does nothing when one of that name indexes the same thing; replaces
    /// one that indexes something else), as Couchbase Lite's `createIndex(_:name:)` does.
    ///
    /// ```swift
    /// try db.createIndex(ValueIndexConfiguration(["type", "list.id", "createdAt"]), name: "tasks")
    /// let q = try db.createQuery("SELECT META().id FROM _ WHERE type = 'task' AND list.id = $list ORDER BY createdAt")
    /// print(try q.explain())   // … USING INDEX tasks …
    /// ```
    ///
    /// The documents already in the database are indexed from snapshots, in steps, while other
    /// threads go on writing (their writes keep the index up to date from the start); the
    /// index serves queries once it is whole. From then on every commit that changes a
    /// document's current revision updates it in the same commit.
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` for an empty or over-long name, an
    ///   expression that does not parse or cannot be indexed (parameters, aggregates), a call
    ///   inside ``inBatch(_:)``; ``SetteeError/Code/notOpen``.
    public func createIndex(_ config: some IndexConfiguration, name: String) throws {
        try createIndex(config, name: name) { _ in true }
    }

    /// ``createIndex(_:name:)`` with progress: `progress` is called on this thread after each
    /// step of the build and may return false to cancel it (the index is then removed and
    /// ``SetteeError/Code/cancelled`` thrown; if removing it fails, that failure is thrown
    /// instead, and the next open finishes building the index).
    ///
    /// ```swift
    /// try db.createIndex(ValueIndexConfiguration(["createdAt"]), name: "dates") { p in
    ///     print("\(p.documentsIndexed)/\(p.documentsTotal)")
    ///     return !shouldStop
    /// }
    /// ```
    public func createIndex(_ config: some IndexConfiguration, name: String, progress: (IndexBuildProgress) -> Bool) throws {
        try createAnyIndex(config, name: name, progress: progress)
    }

    /// ``createIndex(_:name:progress:)`` on a thread of its own; cancelling the task cancels the
    /// build (the index is removed).
    ///
    /// ```swift
    /// try await db.createIndex(ValueIndexConfiguration(["type"]), name: "types") { p in
    ///     print(p.documentsIndexed)
    /// }
    /// ```
    public func createIndex(_ config: some IndexConfiguration, name: String,
                            progress: (@Sendable (IndexBuildProgress) -> Void)? = nil) async throws {
        let cancelled = Atomic<Bool>(false)
        let config = config as any IndexConfiguration
        try await withTaskCancellationHandler {
            try await core.onOwnThread { [self] in
                try createAnyIndex(config, name: name) { p in
                    progress?(p)
                    return !cancelled.load(ordering: .relaxed)
                }
            }
        } onCancel: {
            cancelled.store(true, ordering: .relaxed)
        }
    }

    private func createAnyIndex(_ config: any IndexConfiguration, name: String, progress: (IndexBuildProgress) -> Bool) throws {
        try checkOpen()
        let definition = try Self.definition(of: config, name: name)
        if let map = config as? MapIndexConfiguration {
            // Given before the catalog changes, so that the reload attaches it.
            core.parts.queries.mapFunctions.withLock { $0[name] = map }
        }
        let needsBuild = try core.changingIndexes { c -> Bool in try c.defineIndex(name: name, definition: definition) }
        if needsBuild { try core.buildIndex(name: name, progress: progress) }
    }

    /// Deletes an index and its entries; nothing happens when there is none of that name.
    ///
    /// ```swift
    /// try db.deleteIndex(forName: "tasks")
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/invalidParameter`` inside ``inBatch(_:)``;
    ///   ``SetteeError/Code/notOpen``.
    public func deleteIndex(forName name: String) throws {
        try checkOpen()
        try core.changingIndexes { c in try c.removeIndex(name: name) }
        core.parts.queries.mapFunctions.withLock { _ = $0.removeValue(forKey: name) }
    }

    /// The names of the database's indexes, in name order (an index still being built is
    /// listed).
    ///
    /// ```swift
    /// if try !db.indexes.contains("tasks") { try db.createIndex(ValueIndexConfiguration(["type"]), name: "tasks") }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/notOpen`` once closed; ``SetteeError/Code/corrupted`` when
    ///   the index catalog cannot be read.
    public var indexes: [String] {
        get throws {
            try checkOpen()
            return try core.read { tx in
                var names: [String] = []
                try tx.forEach(in: core.trees.indexCatalog, from: nil, reverse: false) { k, _ in
                    names.append(String(decoding: k, as: UTF8.self))
                    return true
                }
                return names
            }
        }
    }

    /// The catalog definition of a configuration, checked.
    static func definition(of config: any IndexConfiguration, name: String) throws(SetteeError) -> IndexDefinition {
        guard !name.isEmpty, name.utf8.count <= 255, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw SetteeError(.invalidParameter, "index names are 1 to 255 bytes of UTF-8 without control characters")
        }
        let d: IndexDefinition
        if let value = config as? ValueIndexConfiguration {
            guard !value.expressions.isEmpty, value.expressions.count <= 32 else {
                throw SetteeError(.invalidParameter, "index \(name): a value index has 1 to 32 expressions")
            }
            var v = IndexDefinition(kind: .value, state: .building, treeName: "", expressions: value.expressions,
                                    condition: value.where, collatorVersion: try JSONCollation.collatorVersion())
            v.byChannel = value.byChannel
            guard value.covering.count <= 32 else {
                throw SetteeError(.invalidParameter, "index \(name): a value index has at most 32 covering expressions")
            }
            v.covering = value.covering
            d = v
        } else if let text = config as? FullTextIndexConfiguration {
            guard !text.expressions.isEmpty, text.expressions.count <= 32 else {
                throw SetteeError(.invalidParameter, "index \(name): a full-text index has 1 to 32 expressions")
            }
            if let language = text.language, language.isEmpty || language.utf8.count > 64 {
                throw SetteeError(.invalidParameter, "index \(name): a language is a code of 1 to 64 bytes (\"english\", \"en\") or nil")
            }
            d = IndexDefinition(kind: .fullText, state: .building, treeName: "", expressions: text.expressions,
                                condition: text.where, collatorVersion: try JSONCollation.collatorVersion(),
                                text: .init(language: text.language, ignoreAccents: text.ignoreAccents, analyzerVersion: FullTextAnalyzer.version))
        } else if let map = config as? MapIndexConfiguration {
            guard !map.version.isEmpty, map.version.utf8.count <= 1 << 20 else {
                throw SetteeError(.invalidParameter, "index \(name): a map index's version is 1 byte to 1 MiB of text")
            }
            return IndexDefinition(kind: .map, state: .building, treeName: "", expressions: [map.version], condition: nil,
                                   collatorVersion: try JSONCollation.collatorVersion())
        } else {
            throw SetteeError(.invalidParameter, "index \(name): \(type(of: config)) is not an index configuration Settee knows")
        }
        // Compiled once here so that a bad expression is refused before anything is written.
        for e in d.expressions + d.covering { _ = try CompiledIndex.compile(e, index: name) }
        if let c = d.condition { _ = try CompiledIndex.compile(c, index: name) }
        return d
    }
}

public struct IndexInfo: Sendable, Hashable {
    /// The kinds of index.
    ///
    /// ```swift
    /// if info.kind == .map { … }
    /// ```
    public enum Kind: String, Sendable, Hashable {
        /// ``ValueIndexConfiguration``.
        case value
        /// ``FullTextIndexConfiguration``.
        case fullText
        /// ``MapIndexConfiguration``.
        case map
    }

    /// The index's name.
    ///
    /// ```swift
    /// print(info.name)
    /// ```
    public let name: String
    /// What it indexes.
    ///
    /// ```swift
    /// print(info.kind.rawValue)   // "value"
    /// ```
    public let kind: Kind
    /// Whether it is whole and serves queries (false while it is built).
    ///
    /// ```swift
    /// if !info.isReady { print("building") }
    /// ```
    public let isReady: Bool
    /// Its entries: one per indexed document for a value index (and, kept by channel, one more
    /// per channel of the document), one per row for a map index, the stored records (terms
    /// and documents) for a full-text index.
    ///
    /// ```swift
    /// print("\(info.entryCount) entries")
    /// ```
    public let entryCount: Int
}

extension Database {
    /// The kind, state and size of the index `name`; nil when there is none.
    ///
    /// ```swift
    /// for name in try db.indexes {
    ///     if let info = try db.indexInfo(forName: name) { print(name, info.kind, info.entryCount) }
    /// }
    /// ```
    ///
    /// - Throws: ``SetteeError/Code/corrupted`` for an unreadable catalog record;
    ///   ``SetteeError/Code/notOpen``.
    public func indexInfo(forName name: String) throws -> IndexInfo? {
        try checkOpen()
        return try core.read { tx -> IndexInfo? in
            guard let d = try tx.withValue(forKey: Array(name.utf8), in: core.trees.indexCatalog, { b in try IndexDefinition(decoding: b) })
            else { return nil }
            let tree = tx.tree(named: d.treeName)
            let kind: IndexInfo.Kind
            let entries: Int
            switch d.kind {
            case .value:
                kind = .value
                entries = try tree.map { t in
                    // Back entries are not counted: each entry has one.
                    guard d.byChannel else { return try tx.count(in: t) / 2 }
                    var n = 0
                    try tx.forEach(in: t, from: IndexEntry.backTag, reverse: false) { k, _ in
                        guard k.starts(with: IndexEntry.backTag) else { return false }
                        n += 1
                        return true
                    }
                    return try tx.count(in: t) - n
                } ?? 0
            case .fullText:
                kind = .fullText
                entries = try tree.map { try tx.count(in: $0) } ?? 0
            case .map:
                kind = .map
                entries = try tree.map { try MapIndexStore.rowCount(tx, tree: $0) } ?? 0
            }
            return IndexInfo(name: name, kind: kind, isReady: d.state == .ready, entryCount: entries)
        }
    }
}
