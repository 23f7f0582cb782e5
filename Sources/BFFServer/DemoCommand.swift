import ArgumentParser
import BFF
import Cryptography
import Foundation
import HTTPCore
import Logging
import PostgresStore
import Sandbox

/// `smart-bff demo`: the one-command tour. A throwaway PostgreSQL, the sandbox EHR, and the
/// BFF wired to it with a demo page.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "Run the sandbox EHR, the BFF and a demo page together.")

    @Option(help: "BFF port.") var port = 8080
    @Option(help: "Sandbox EHR port.") var sandboxPort = 9090

    func run() async throws {
        let logLevel = ProcessInfo.processInfo.environment["BFF_LOG_LEVEL"] ?? "warning"
        let logger = LogSetup.bootstrap(level: logLevel)
        // Always a throwaway cluster, whatever DATABASE_URL says: a demo run in a shell set up
        // for a real deployment would otherwise write sandbox sessions into that database and
        // sweep its audit trail with the demo's retention.
        let database = try EmbeddedPostgres.start(prefix: "smart-bff-demo-pg")
        defer { database.destroy() }
        let databaseURL = database.url()

        let publicURL = "http://127.0.0.1:\(port)"
        var sandboxOptions = SandboxEHR.Options()
        sandboxOptions.port = sandboxPort
        sandboxOptions.clients = [SandboxClient(id: "smart-bff-demo", redirectURIs: [publicURL + "/callback"])]
        let sandbox = try await SandboxEHR.start(options: sandboxOptions, logger: logger)

        let configuration = BFFConfiguration(
            listenHost: "127.0.0.1", listenPort: port, publicURL: publicURL, databaseURL: Secret(databaseURL),
            issuers: [IssuerRegistration(iss: sandbox.fhirBaseURL, clientID: "smart-bff-demo")],
            tokenKey: Secret(SecureRandom.bytes(32)), returnOrigins: [publicURL], logLevel: logLevel)
        OpenFileLimit.raiseToHardLimit() // thousands of connections, each a descriptor
        var options = BFFRuntime.Options()
        options.openAPI = Resources.openAPI()
        let page = Response(status: .ok, contentType: "text/html; charset=utf-8",
                            body: Array(DemoPage.html(ehrLaunchURL: sandbox.ehrLaunchURL(app: publicURL + "/launch", patient: "pat-2")).utf8),
                            headers: ["Cache-Control": "no-store", "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'"])
        options.extraRoutes = { router in router.onImmediate("GET", "/") { _ in page } }
        let runtime: BFFRuntime
        do { runtime = try await BFFRuntime.start(configuration: configuration, options: options, logger: logger) } catch {
            await sandbox.shutdown()
            throw error
        }
        FileHandle.standardOutput.write(Data("smart-bff demo: open \(publicURL)/ (sandbox EHR at \(sandbox.fhirBaseURL); Ctrl-C stops)\n".utf8))
        await SignalHandling.waitForTermination()
        await runtime.shutdown(gracePeriod: .seconds(2))
        await sandbox.shutdown()
    }
}
