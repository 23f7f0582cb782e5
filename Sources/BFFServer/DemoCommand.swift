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

    func validate() throws {
        for (name, value) in [("--port", port), ("--sandbox-port", sandboxPort)] where !(1...65535).contains(value) {
            throw ValidationError("\(name): expected 1...65535, got \(value)")
        }
    }

    func run() async throws {
        let logLevel = EnvironmentValue.named("BFF_LOG_LEVEL")?.lowercased() ?? "info"
        let problems = [BFFConfiguration.logLevelProblem(logLevel), Resources.openAPIFileProblem()].compactMap { $0 }
        if !problems.isEmpty { throw Resources.configurationError(problems) }
        let logger = LogSetup.bootstrap(level: logLevel)
        // Caught from here on: a Ctrl-C while the cluster starts ends the start at the next
        // step, and the cluster is deleted (killed at once, it would run on, orphaned).
        let signals = SignalHandling.catchTermination()
        // The contract's rule: a throwaway cluster when DATABASE_URL is unset, else that
        // database (said on the first line, since the demo's sandbox sessions and audit
        // entries then land there).
        let given = EnvironmentValue.named("DATABASE_URL")
        if let given, let problem = ConnectionString.configurationProblem(given) { throw Resources.configurationError([problem]) }
        let database = try given == nil ? EmbeddedPostgres.start(prefix: "smart-bff-demo-pg") : nil
        defer { database?.destroy() }
        if given != nil {
            FileHandle.standardError.write(Data("smart-bff demo: using DATABASE_URL's database (unset it for a throwaway one)\n".utf8))
        }
        let databaseURL = given ?? database!.url()
        if signals.received { throw ExitCode(130) }

        let publicURL = "http://127.0.0.1:\(port)"
        var sandboxOptions = SandboxEHR.Options()
        sandboxOptions.port = sandboxPort
        sandboxOptions.clients = [SandboxClient(id: "smart-bff-demo", redirectURIs: [publicURL + "/callback"])]
        let sandbox = try await SandboxEHR.start(options: sandboxOptions, logger: logger)
        if signals.received {
            await sandbox.shutdown()
            throw ExitCode(130)
        }

        let configuration = BFFConfiguration(
            listenHost: "127.0.0.1", listenPort: port, publicURL: publicURL, databaseURL: Secret(databaseURL),
            issuers: [IssuerRegistration(iss: sandbox.fhirBaseURL, clientID: "smart-bff-demo")],
            tokenKey: Secret(SecureRandom.bytes(32)), returnOrigins: [publicURL], logLevel: logLevel)
        OpenFileLimit.raiseToHardLimit() // thousands of connections, each a descriptor
        var options = BFFRuntime.Options()
        options.openAPI = Resources.openAPI() ?? Resources.stubOpenAPI
        let html = DemoPage.html(ehrLaunchURL: sandbox.ehrLaunchURL(app: publicURL + "/launch", patient: "pat-2"))
        let page = Response(status: .ok, contentType: "text/html; charset=utf-8", body: Array(html.utf8),
                            headers: ["Cache-Control": "no-store", "Content-Security-Policy": DemoPage.contentSecurityPolicy(of: html)])
        options.extraRoutes = { router in router.onImmediate("GET", "/") { _ in page } }
        let runtime: BFFRuntime
        do { runtime = try await BFFRuntime.start(configuration: configuration, options: options, logger: logger) } catch {
            await sandbox.shutdown()
            // The demo's port is its --port, not BFF_LISTEN (which it does not read).
            let line = StartupFailure.line(for: error).replacingOccurrences(of: "BFF_LISTEN:", with: "--port:")
            FileHandle.standardError.write(Data("smart-bff demo: \(line)\n".utf8))
            throw ExitCode(1)
        }
        FileHandle.standardOutput.write(Data("smart-bff demo: open \(publicURL)/ (sandbox EHR at \(sandbox.fhirBaseURL); Ctrl-C stops)\n".utf8))
        await signals.wait()
        Task { await signals.wait(count: 2); runtime.hurryShutdown() } // waits on until the process ends
        await runtime.shutdown(gracePeriod: .seconds(2))
        await sandbox.shutdown()
    }
}
