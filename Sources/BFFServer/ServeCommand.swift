import ArgumentParser
import BFF
import Foundation
import HTTPCore
import Logging

/// `smart-bff serve`: runs the service from the environment.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the BFF from the environment (see README).")

    func run() async throws {
        let configuration: BFFConfiguration
        do { configuration = try BFFConfiguration.fromEnvironment() } catch {
            FileHandle.standardError.write(Data(("smart-bff: configuration error\n" + error.description + "\n").utf8))
            throw ExitCode(78) // EX_CONFIG
        }
        let logger = LogSetup.bootstrap(level: configuration.logLevel)
        let app = BFFApplication(configuration: configuration, openAPI: Resources.openAPI(), logger: logger)
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.listenHost
        serverConfiguration.port = configuration.listenPort
        if let threads = ProcessInfo.processInfo.environment["BFF_IO_THREADS"].flatMap(Int.init), threads > 0 {
            serverConfiguration.eventLoops = threads
        }
        let server = HTTPServer(configuration: serverConfiguration, application: app.makeHTTPApplication(), logger: logger)
        try server.start()
        await SignalHandling.waitForTermination()
        await server.shutdown(gracePeriod: .seconds(10))
    }
}
