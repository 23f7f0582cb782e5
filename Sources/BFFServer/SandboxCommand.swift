import ArgumentParser
import Foundation
import Sandbox

/// `smart-bff sandbox`: a local SMART EHR simulator.
struct SandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sandbox",
        abstract: "Run a local SMART EHR simulator (authorization server, OpenID provider, FHIR R4 test data).")

    @Option(help: "Port to listen on.") var port = 9090

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("--port: expected 1...65535, got \(port)") }
    }
    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Client id of the registered public client.") var clientID = "smart-bff-demo"
    @Option(help: "Redirect URIs registered for the client (repeatable); /launch-ehr?app= opens apps only on their origins.") var redirectURI: [String] = ["http://127.0.0.1:8080/callback"]
    @Option(help: "Access token lifetime in seconds.") var accessTokenLifetime = 3600
    @Option(help: "Base URL to advertise when a proxy fronts the sandbox.") var publicURL: String?

    func run() async throws {
        _ = LogSetup.bootstrap(level: "info")
        let signals = SignalHandling.catchTermination() // caught before it listens: a stop then is graceful too
        var options = SandboxEHR.Options()
        options.host = host
        options.port = port
        options.accessTokenLifetime = accessTokenLifetime
        options.publicBaseURL = publicURL
        options.clients = [SandboxClient(id: clientID, redirectURIs: redirectURI)]
        let sandbox = try await SandboxEHR.start(options: options)
        FileHandle.standardOutput.write(Data("sandbox EHR: FHIR base \(sandbox.fhirBaseURL) (client \(clientID))\n".utf8))
        await signals.wait()
        await sandbox.shutdown()
    }
}
