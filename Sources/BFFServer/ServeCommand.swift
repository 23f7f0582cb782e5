import ArgumentParser
import BFF
import Foundation
import HTTPCore
import Logging
import PostgresStore

/// `smart-bff serve`: runs the service from the environment.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the BFF from the environment (see README).")

    func run() async throws {
        let configuration: BFFConfiguration
        let fileProblems = [Resources.openAPIFileProblem(), Resources.migrationsProblem()].compactMap { $0 }
        do { configuration = try BFFConfiguration.fromEnvironment() } catch {
            throw ServeCommand.configurationError(error.problems + fileProblems)
        }
        if !fileProblems.isEmpty { throw ServeCommand.configurationError(fileProblems) }
        let signals = SignalHandling.catchTermination(exitingAtOnce: true)
        let logger = LogSetup.bootstrap(level: configuration.logLevel)
        for warning in BFFConfiguration.warnings(publicURL: configuration.publicURL) { logger.warning("\(warning)") }
        if let warning = ConnectionString.transportWarning(configuration.databaseURL.value) { logger.warning("\(warning)") }
        OpenFileLimit.raiseToHardLimit() // thousands of connections, each a descriptor
        var options = BFFRuntime.Options()
        if let openAPI = Resources.openAPI() { options.openAPI = openAPI } else {
            logger.warning("openapi.yaml not found (BFF_OPENAPI_FILE, beside the executable, or in the working directory): /openapi.yaml serves an empty description")
            options.openAPI = Resources.stubOpenAPI
        }
        if let threads = configuration.ioThreads { options.server.eventLoops = threads }
        options.poolSize = configuration.databasePoolSize
        options.whenListening = { signals.serving() } // before the `serving` line: a signal after it stops gracefully
        let runtime: BFFRuntime
        do { runtime = try await BFFRuntime.start(configuration: configuration, options: options, logger: logger) } catch {
            logger.critical("start-up failed", metadata: ["error": .string(StartupFailure.line(for: error))])
            throw ExitCode(1)
        }
        await signals.wait()
        Task { await signals.wait(count: 2); runtime.hurryShutdown() } // waits on until the process ends
        // A stop that lost PHI audit entries is a failed stop, for systemd and Kubernetes to record.
        if await runtime.shutdown() > 0 { throw ExitCode(1) }
    }

    /// Ends `serve` as a configuration error (exit 78, EX_CONFIG): one JSON log line per
    /// problem, as every other line `serve` writes, so that a log shipper reads them too;
    /// `config.variable` names the setting at fault.
    static func configurationError(_ problems: [String]) -> ExitCode {
        let logger = LogSetup.bootstrap(level: "error")
        for problem in problems {
            let variable = problem.prefix { $0 != ":" }
            logger.critical("configuration error", metadata: ["config.variable": .string(String(variable)), "config.problem": .string(problem)])
        }
        return ExitCode(78)
    }
}
