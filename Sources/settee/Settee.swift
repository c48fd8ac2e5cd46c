import ArgumentParser
import Foundation
import SetteeServer

/// `settee`: the command-line tool. `settee serve` runs the sync server.
@main
struct SetteeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settee",
        abstract: "Settee's command-line tool.",
        subcommands: [Serve.self]
    )
}

/// `settee serve [--config FILE]`.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sync server: CouchDB's HTTP API with Sync Gateway's configuration.",
        discussion: """
            Without --config, serves one database "db" stored under ./settee-data/, on loopback only \
            (public port 4984, admin port 4985), with GUEST access enabled.
            """
    )

    @Option(name: .long, help: "A JSON configuration file (Sync Gateway's keys).")
    var config: String?

    func run() async throws {
        let configuration: ServerConfiguration
        if let config {
            let text: String
            do {
                text = try String(contentsOfFile: config, encoding: .utf8)
            } catch {
                throw ValidationError("cannot read \(config): \(error.localizedDescription)")
            }
            do {
                configuration = try ServerConfiguration(json: text)
            } catch {
                throw ValidationError("\(config): \(error)")
            }
        } else {
            configuration = .standalone(directory: "./settee-data")
            print("settee: no --config given: serving database \"db\" from ./settee-data/ on 127.0.0.1 only, GUEST enabled")
        }
        let server = try SetteeServer(configuration: configuration)
        try await server.run(gracefulShutdownSignals: [.sigterm, .sigint]) { ports in
            var line = "settee: serving \(server.databaseNames.joined(separator: ", ")) on port \(ports.publicPort)"
            if let admin = ports.adminPort { line += ", admin port \(admin)" }
            // Line-buffered even when stdout is a pipe, so a supervisor sees the ports at once.
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
        print("settee: stopped")
    }
}
