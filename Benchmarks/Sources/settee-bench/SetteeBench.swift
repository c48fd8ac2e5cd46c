import Foundation

/// `settee-bench`: the same workloads on Settee (its storage engine and its document API), SQLite and LMDB,
/// side by side. See `Options.usage`.
@main
struct SetteeBench {
    static func main() {
        let options: Options
        do {
            options = try Options(parsing: Array(CommandLine.arguments.dropFirst()))
        } catch {
            Progress.log("settee-bench: \(error.message) (see --help)")
            exit(2)
        }
        if options.showHelp {
            print(Options.usage)
            return
        }
        do {
            try run(options)
        } catch {
            Progress.log("settee-bench: \(error)")
            exit(1)
        }
    }

    static func run(_ options: Options) throws {
        let root: String
        if let directory = options.directory {
            try Files.createDirectory(directory)
            for name in options.engines.map(\.rawValue) + ["query"] where !Files.isMissingOrEmpty(directory + "/" + name) {
                Progress.log("settee-bench: \(directory)/\(name) is not empty; refusing to write over it")
                exit(2)
            }
            root = directory
        } else {
            root = try Files.makeTemporaryDirectory()
        }
        defer {
            if options.directory == nil { try? Files.remove(root) }
        }

        var measurements: [Measurement] = []
        // The dataset and the per-engine workloads; `query` generates documents of its own.
        if !options.workloads.subtracting([.query, .collections]).isEmpty {
            Progress.log("generating \(options.documentCount) documents (seed \(options.seed))")
            let watch = Stopwatch()
            let dataset = Dataset(documentCount: options.documentCount, seed: options.seed,
                                  progress: Progress("generate", total: options.documentCount))
            Progress.log(String(format: "  %.1f MB of keys, versions and bodies in %.1f s",
                                Double(dataset.byteCount) / 1e6, watch.elapsedSeconds) + "; databases in " + root)

            let runner = Runner(dataset: dataset, workloads: options.workloads)
            let documentRunner = DocumentRunner(dataset: dataset, workloads: options.workloads)
            for engine in options.engines {
                let directory = root + "/" + engine.rawValue
                try Files.createDirectory(directory)
                Progress.log("\(engine.rawValue):")
                switch engine {
                case .settee: measurements += try runner.run(SetteeEngine.self, in: directory)
                case .setteeDoc: measurements += try documentRunner.run(in: directory)
                case .sqlite: measurements += try runner.run(SQLiteEngine.self, in: directory)
                case .lmdb: measurements += try runner.run(LMDBEngine.self, in: directory)
                }
                // A temporary database is not needed any more; free its disk space for the next engine.
                if options.directory == nil { try Files.remove(directory) }
            }
        }

        if options.workloads.contains(.query) {
            let engines = options.engines.filter(QueryBench.engines.contains)
            if engines.isEmpty {
                Progress.log("query: not run: it runs on settee-doc and sqlite, and neither was chosen")
            } else {
                let directory = root + "/query"
                try Files.createDirectory(directory)
                measurements += try QueryBench(documentCount: options.documentCount, seed: options.seed, engines: engines,
                                                   queries: options.queries)
                    .run(in: directory)
                if options.directory == nil { try Files.remove(directory) }
            }
        }

        if options.workloads.contains(.collections) {
            if !options.engines.contains(.setteeDoc) {
                Progress.log("collections: not run: it runs on settee-doc (and sqlite for the join), which was not chosen")
            } else {
                let directory = root + "/collections"
                try Files.createDirectory(directory)
                measurements += try CollectionsBench(documentCount: options.documentCount, seed: options.seed).run(in: directory)
                if options.directory == nil { try Files.remove(directory) }
            }
        }

        let report = Report(machine: Report.describeMachine(), documentCount: options.documentCount,
                            seed: options.seed, measurements: measurements)
        print(report.table(), terminator: "")
        if let path = options.jsonPath {
            guard FileManager.default.createFile(atPath: path, contents: Data(report.json())) else {
                throw EngineError("cannot write \(path)")
            }
        }
    }
}
