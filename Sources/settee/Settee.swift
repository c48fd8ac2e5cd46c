import ArgumentParser
import Foundation
import Settee
import SetteeServer

/// `settee`: the command-line tool. Inspect, edit, check, move and sync databases; `settee
/// serve` runs the sync server.
@main
struct SetteeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settee",
        abstract: "Settee's command-line tool: look inside, edit, check, copy and serve databases.",
        discussion: """
            A database is a directory NAME.settee; info, ls, cat, put, rm and cp also take the URL of \
            a database on a CouchDB-compatible server (http://user:password@host:4984/db). Output is \
            for people; --json prints JSON for scripts.

            \(ExitStatus.help)
            """,
        subcommands: [Serve.self, Info.self, Ls.self, Cat.self, Revs.self, Put.self, Rm.self, Purge.self, Expire.self,
                      Conflicts.self, Resolve.self, Compact.self, Check.self, Export.self, Import.self, Cp.self]
    )

    /// Runs the command, mapping every failure to one line on standard error and an exit code
    /// from ``ExitStatus`` (ArgumentParser's own usage errors exit 1).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var async = command as? AsyncParsableCommand {
                try await async.run()
            } else {
                try command.run()
            }
            Foundation.exit(ExitStatus.ok.rawValue)
        } catch let e as CLIError {
            Terminal.err("settee: " + e.message)
            Foundation.exit(e.status.rawValue)
        } catch let e as SetteeError {
            let c = CLIError(e)
            Terminal.err("settee: " + c.message)
            Foundation.exit(c.status.rawValue)
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { Terminal.out(message) }
                Foundation.exit(0)
            }
            if !message.isEmpty { Terminal.err(message) }
            Foundation.exit(code == .validationFailure ? ExitStatus.usage.rawValue : ExitStatus.failed.rawValue)
        }
    }
}

/// `settee serve [--config FILE]`.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sync server: CouchDB's HTTP API with Sync Gateway's configuration.",
        discussion: """
            Example: settee serve
                     settee serve --config sg.json
            Without --config, serves one database "db" stored under ./settee-data/, on loopback only \
            (public port 4984, admin port 4985 with the admin page at /_admin/), with GUEST access enabled.
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
                throw CLIError(.notFound, "cannot read \(config): \(error.localizedDescription)")
            }
            do {
                configuration = try ServerConfiguration(json: text)
            } catch {
                throw CLIError(.usage, "\(config): \(error)")
            }
        } else {
            configuration = .standalone(directory: "./settee-data")
            Terminal.out("settee: no --config given: serving database \"db\" from ./settee-data/ on 127.0.0.1 only, GUEST enabled")
        }
        let server = try SetteeServer(configuration: configuration)
        let host = Self.host(configuration.interface)
        try await server.run(gracefulShutdownSignals: [.sigterm, .sigint]) { ports in
            var line = "settee: serving \(server.databaseNames.joined(separator: ", ")) on port \(ports.publicPort)"
            if let admin = ports.adminPort { line += ", admin port \(admin)" }
            Terminal.out(line)
            let first = server.databaseNames.first ?? "db"
            Terminal.out("settee: REST API   http://\(host):\(ports.publicPort)/\(first)")
            if let admin = ports.adminPort, let adminInterface = configuration.adminInterface {
                Terminal.out("settee: admin page http://\(Self.host(adminInterface)):\(admin)/_admin/")
            }
        }
        Terminal.out("settee: stopped")
    }

    /// The host to print for a listening address (`:4984` and `0.0.0.0` listen everywhere;
    /// this machine reaches them at 127.0.0.1).
    static func host(_ interface: String) -> String {
        guard let colon = interface.lastIndex(of: ":") else { return "127.0.0.1" }
        let h = String(interface[..<colon])
        return h.isEmpty || h == "0.0.0.0" || h == "[::]" ? "127.0.0.1" : h
    }
}
