/// The command line, parsed by hand.
struct Options {
    var documentCount = 1_000_000
    var workloads = Set(Workload.allCases)
    var engines: [EngineName] = EngineName.allCases
    /// The `query` group's queries to check and time (all by default).
    var queries: [TaskQuery] = TaskQuery.allCases
    var jsonPath: String?
    var seed: UInt64 = 42
    /// Where the databases go; nil: a temporary directory, removed afterwards.
    var directory: String?
    var showHelp = false

    static let usage = """
        usage: settee-bench [options]
          --docs N                 documents to load (default 1000000)
          --only WORKLOAD[,...]    run only these: \(Workload.allCases.map(\.rawValue).joined(separator: ", "))
          --engines NAME[,...]     engines, in this order (default \(EngineName.allCases.map(\.rawValue).joined(separator: ",")))
          --queries NAME[,...]     the query group's queries to check and time (default all:
                                   \(TaskQuery.allCases.map(\.rawValue).joined(separator: ", ")))
          --json PATH              also write the results as JSON to PATH
          --seed S                 seed of the generated data (default 42)
          --dir PATH               put the databases in PATH/<engine> (kept); default: a temporary
                                   directory, removed afterwards
          -h, --help               show this help
        """

    /// A command line that cannot be run; the message says why.
    struct UsageError: Error {
        let message: String
    }

    init(parsing arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            // `--name=value` and `--name value` are both accepted.
            var name = argument
            var inlineValue: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            func value() throws(UsageError) -> String {
                if let inlineValue { return inlineValue }
                guard let next = remaining.popFirst() else { throw UsageError(message: "\(name) needs a value") }
                return next
            }
            switch name {
            case "--docs":
                let text = try value()
                guard let count = Int(text), count > 0 else {
                    throw UsageError(message: "--docs wants a positive number of documents, not '\(text)'")
                }
                documentCount = count
            case "--only":
                workloads = try Self.list(try value(), option: name) { text throws(UsageError) in
                    guard let workload = Workload(rawValue: text) else {
                        throw UsageError(message: "unknown workload '\(text)'; workloads: "
                            + Workload.allCases.map(\.rawValue).joined(separator: ", "))
                    }
                    return workload
                }.reduce(into: Set()) { $0.insert($1) }
            case "--engines":
                engines = try Self.list(try value(), option: name, Self.engine)
            case "--queries":
                queries = try Self.list(try value(), option: name) { text throws(UsageError) in
                    guard let query = TaskQuery(rawValue: text) else {
                        throw UsageError(message: "unknown query '\(text)'; queries: "
                            + TaskQuery.allCases.map(\.rawValue).joined(separator: ", "))
                    }
                    return query
                }
            case "--json":
                jsonPath = try value()
            case "--seed":
                let text = try value()
                guard let parsed = UInt64(text) else {
                    throw UsageError(message: "--seed wants an unsigned 64-bit integer, not '\(text)'")
                }
                seed = parsed
            case "--dir":
                directory = try value()
            case "-h", "--help":
                showHelp = true
            default:
                throw UsageError(message: "unknown option '\(argument)'")
            }
        }
    }

    private static func engine(_ text: String) throws(UsageError) -> EngineName {
        if let engine = EngineName(rawValue: text) { return engine }
        let known = EngineName.allCases.map(\.rawValue).joined(separator: ", ")
        throw UsageError(message: "unknown engine '\(text)'; engines: \(known)")
    }

    /// A comma-separated list without repeats, each item parsed by `parse`.
    private static func list<T: Equatable>(_ text: String, option: String,
                                           _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> [T] {
        var items: [T] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = try parse(String(part))
            if !items.contains(item) { items.append(item) }
        }
        guard !items.isEmpty else { throw UsageError(message: "\(option) wants at least one name") }
        return items
    }
}
