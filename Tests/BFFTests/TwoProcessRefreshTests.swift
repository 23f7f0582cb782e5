import BFFTesting
import Cryptography
import Foundation
import HTTPClient
import Logging
import Sandbox
import Testing

/// The refresh's single flight across smart-bff processes: two `smart-bff serve` processes
/// (the built executable, as deployed) on one database share nothing but PostgreSQL, whose
/// row lock on the launch's tokens is what lets one of them refresh.
@Suite("token refresh across processes")
struct TwoProcessRefreshTests {
    @Test("two smart-bff processes, an expired access token, 32 concurrent reads spread over both: all succeed and the EHR sees one refresh")
    func singleFlightAcrossProcesses() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let ports = [PortAllocator.next(), PortAllocator.next()]
        var options = SandboxEHR.Options()
        options.port = 0
        options.signingKeyPEM = TestKeys.sandboxSigningKeyPEM
        options.clients = [SandboxClient(id: "test-app", redirectURIs: ports.map { "http://127.0.0.1:\($0)/callback" })]
        let sandbox = try await SandboxEHR.start(options: options, logger: Logger(label: "sandbox", factory: { _ in SwiftLogNoOpLogHandler() }))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("two-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let issuers = folder.appendingPathComponent("issuers.json")
        try Data(#"[{"iss": "\#(sandbox.fhirBaseURL)", "client_id": "test-app"}]"#.utf8).write(to: issuers)
        let tokenKey = Data(SecureRandom.bytes(32)).base64EncodedString()
        let processes = try ports.enumerated().map { index, port in
            try SmartBFFProcess.serve(port: port, log: folder.appendingPathComponent("bff-\(index).log"), environment: [
                "DATABASE_URL": database.url, "BFF_ISSUERS_FILE": issuers.path, "BFF_TOKEN_KEY": tokenKey,
                "BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path, "BFF_LOG_LEVEL": "warning",
            ])
        }
        defer { Task { for process in processes { await process.stop() } } }
        for process in processes { try await process.waitUntilListening() }

        // A sign-in through the first process whose access token expires at once (1 s).
        let browser = Browser(client: HTTPClient())
        await sandbox.state.setAccessTokenLifetime(1)
        let launch = try #require(try await browser.standaloneLogin(at: processes[0].baseURL, sandbox: sandbox).launch)
        await sandbox.state.setAccessTokenLifetime(3600)
        try await Task.sleep(for: .seconds(1))
        await sandbox.state.resetCounters()
        #expect(browser.cookieValues["bff_session"] != nil)
        let statuses = try await browser.concurrentReads(32, of: "/fhir/Patient/pat-1", launch: launch, over: processes.map(\.baseURL))
        #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)\n\(processes.map(\.logTail).joined(separator: "\n"))")
        #expect(await sandbox.state.refreshCount == 1)
        #expect(await sandbox.state.fhirRequests == 32)
        await sandbox.shutdown()
    }
}
