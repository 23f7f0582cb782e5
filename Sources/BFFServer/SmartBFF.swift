import ArgumentParser
import Cryptography

/// The `smart-bff` command.
@main
struct SmartBFF: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smart-bff",
        abstract: "A SMART-on-FHIR backend-for-frontend: it holds the OAuth tokens so front ends never do.",
        version: "0.1.0",
        subcommands: [ServeCommand.self, MigrateCommand.self, DemoCommand.self, SandboxCommand.self, AuditCommand.self]
    )

    /// Before anything else uses OpenSSL: its state stays until the process is gone.
    static func main() async {
        OpenSSLLifetime.keepThroughExit()
        await main(nil)
    }
}
