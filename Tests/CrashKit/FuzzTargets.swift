import Foundation
@_spi(Replication) import Settee
import SetteeStorage

/// Entry points for libFuzzer (see `scripts/fuzz`), also run over the seed corpus by the tests.
package enum FuzzTargets {
    /// The first byte of an input for the document layer's decoders. A store file starts with
    /// "SETTEE", so every input that could get past a log's magic still goes to ``storeFile(_:directory:)``.
    package static let documentDecodersTag = UInt8(ascii: "D")
    /// The first byte of an input for the SQL++ parser and planner, and of one for the Mango
    /// compiler (``QueryFuzzing``).
    package static let sqlTag = UInt8(ascii: "Q")
    package static let mangoTag = UInt8(ascii: "M")

    /// libFuzzer's entry point: an input starting with ``documentDecodersTag`` feeds the rest of
    /// its bytes to every decoder of the document layer (``DecoderFuzzing``), one starting with
    /// ``sqlTag`` or ``mangoTag`` to a query language (``QueryFuzzing``); any other is opened
    /// as a database's log (``storeFile(_:directory:)``).
    package static func oneInput(_ bytes: UnsafeRawBufferPointer, directory: String) {
        if let tag = bytes.first, [documentDecodersTag, sqlTag, mangoTag].contains(tag) {
            #if SETTEE_DECODER_FUZZING
            let rest = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
            switch tag {
            case sqlTag: QueryFuzzing.sql(rest)
            case mangoTag: QueryFuzzing.mango(rest)
            default: DecoderFuzzing.run(rest)
            }
            #else
            fatalError("this build has no decoder fuzzing: build with -DSETTEE_DECODER_FUZZING (scripts/fuzz does)")
            #endif
        } else {
            storeFile(bytes, directory: directory)
        }
    }

    /// Opens `bytes` as a database's log file and walks everything in it: recovery, every entry of
    /// every tree with its value, `check()`, then one commit and a close (which checkpoints what
    /// recovery rebuilt). Any error is fine; a crash, hang or runaway allocation is a finding.
    package static func storeFile(_ bytes: UnsafeRawBufferPointer, directory: String) {
        let db = directory + "/fuzz.settee"
        try? FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        do {
            try writeImage(Array(bytes), to: db + "/log")
        } catch {
            fatalError("cannot write the fuzz input to \(db): \(error)")
        }
        guard let store = try? Store(directory: db) else { return }
        defer { try? store.close() }
        _ = try? readContents(store)
        _ = try? store.read { tx in
            for name in tx.treeNames {
                guard let tree = tx.tree(named: name) else { continue }
                try tx.forEach(in: tree, reverse: true) { _, _ in true }
                _ = try tx.count(in: tree)
            }
        }
        _ = try? store.check()
        _ = try? store.write { tx in
            let tree = try tx.tree(named: "fuzz") ?? tx.createTree(named: "fuzz")
            try tx.put(Array("key".utf8), Array(repeating: 7, count: 700), in: tree)
        }
    }

    /// A directory for one fuzzing process: in memory when the machine has /dev/shm.
    package static func scratchDirectory() -> String {
        let base = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        return base + "/settee-fuzz-\(getpid())"
    }
}

extension FuzzTargets {
    /// Writes small databases of every shape the log can take into `directory`, as seeds for the
    /// fuzzer: a fresh file, a replay tail of small commits, out-of-line and compressed values,
    /// a checkpoint followed by a tail, and trees several levels deep; and, tagged for the
    /// document decoders, valid revision trees, document metadata, changes entries, a local
    /// document and JSON bodies; and, tagged for the query languages, SQL++ statements and
    /// Mango queries, wide and deep ones among them.
    package static func writeSeedCorpus(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        #if SETTEE_DECODER_FUZZING
        for (name, bytes) in DecoderFuzzing.seedInputs() {
            try Data([documentDecodersTag] + bytes).write(to: URL(fileURLWithPath: directory + "/docs-" + name))
        }
        for (name, sql, bytes) in QueryFuzzing.seedInputs() {
            try Data([sql ? sqlTag : mangoTag] + bytes).write(to: URL(fileURLWithPath: directory + (sql ? "/sql-" : "/mango-") + name))
        }
        #endif
        let work = directory + "/.work"
        defer { try? FileManager.default.removeItem(atPath: work) }
        func make(_ name: String, close: Bool, _ body: (Store) throws -> Void) throws {
            try? FileManager.default.removeItem(atPath: work)
            var config = StoreConfiguration()
            config.checkpointInterval = 1 << 16
            config.maxDirtyNodes = 64
            let store = try Store(directory: work, configuration: config)
            try body(store)
            let end = Int(store.logEnd)
            if close { try store.close() } else { store.abandon() }
            let file = try Data(contentsOf: URL(fileURLWithPath: work + "/log"))
            // A closed log is trimmed; an abandoned one ends in preallocated zeros.
            let bytes = close ? file : file.prefix(end)
            try bytes.write(to: URL(fileURLWithPath: directory + "/" + name))
        }
        try make("fresh", close: true) { _ in }
        try make("tail-small", close: false) { store in
            for i in 0..<8 {
                try store.write { tx in
                    let t = try tx.tree(named: "t") ?? tx.createTree(named: "t")
                    try tx.put(Array("key-\(i)".utf8), Array("value-\(i)".utf8), in: t)
                    if i % 3 == 2 { _ = try tx.delete(Array("key-\(i - 1)".utf8), in: t) }
                }
            }
        }
        try make("tail-values", close: false) { store in
            try store.write { tx in
                let t = try tx.createTree(named: "values")
                try tx.put(Array("plain".utf8), [UInt8](repeating: 0x61, count: 600).enumerated().map { UInt8(truncatingIfNeeded: $0.offset * 7) }, in: t)
                try tx.put(Array("packed".utf8), [UInt8](repeating: 0x62, count: 3000), in: t)
                _ = try tx.appendValue([UInt8](repeating: 0x63, count: 900))
            }
        }
        try make("checkpoint-then-tail", close: false) { store in
            try store.write { tx in
                let a = try tx.createTree(named: "a")
                let b = try tx.createTree(named: "b")
                for i in 0..<40 { try tx.put(Array("a\(i)".utf8), Array("x\(i)".utf8), in: a) }
                try tx.put(Array("b".utf8), [UInt8](repeating: 1, count: 700), in: b)
            }
            try store.checkpoint()
            try store.write { tx in
                let a = tx.tree(named: "a")!
                _ = try tx.delete(Array("a3".utf8), in: a)
                try tx.put(Array("a100".utf8), Array("late".utf8), in: a)
            }
        }
        try make("deep-tree", close: true) { store in
            try store.write { tx in
                let t = try tx.createTree(named: "deep")
                for i in 0..<600 { try tx.put(Array("shared-prefix-key-\(100_000 + i)".utf8), Array("v\(i)".utf8), in: t) }
            }
        }
    }
}
