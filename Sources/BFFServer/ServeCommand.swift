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
            throw Resources.configurationError(error.problems + fileProblems)
        }
        if !fileProblems.isEmpty { throw Resources.configurationError(fileProblems) }
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
}
