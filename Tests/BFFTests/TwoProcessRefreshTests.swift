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
            try SmartBFFProcess.start(port: port, log: folder.appendingPathComponent("bff-\(index).log"), environment: [
                "DATABASE_URL": database.url, "BFF_ISSUERS_FILE": issuers.path, "BFF_TOKEN_KEY": tokenKey,
                "BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path, "BFF_LOG_LEVEL": "warning",
            ])
        }
        defer { for process in processes { process.stop() } }
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

/// A `smart-bff serve` process, started from the executable beside the test bundle (the
/// package's build folder: `swift build` builds it with the tests).
private final class SmartBFFProcess: Sendable {
    let port: Int
    let log: URL
    private let process: Process

    var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, log: URL, process: Process) {
        (self.port, self.log, self.process) = (port, log, process)
    }

    static func start(port: Int, log: URL, environment: [String: String]) throws -> SmartBFFProcess {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("smart-bff")
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw Missing(what: "\(executable.path): build the smart-bff product first (scripts/test does)")
        }
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = executable
        process.arguments = ["serve"]
        process.environment = environment.merging(["BFF_LISTEN": "127.0.0.1:\(port)", "BFF_PUBLIC_URL": "http://127.0.0.1:\(port)",
                                                   "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return SmartBFFProcess(port: port, log: log, process: process)
    }

    /// Waits (up to 60 s, for a loaded machine) until the process accepts connections; fails
    /// at once if it exited (a configuration problem: its log says which).
    func waitUntilListening() async throws {
        for _ in 0..<600 {
            guard process.isRunning else { throw Missing(what: "smart-bff on port \(port) exited: \(logTail)") }
            if let fd = try? LoopbackSocket.connect(port: port) {
                close(fd)
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Missing(what: "smart-bff on port \(port) did not listen within 60 s: \(logTail)")
    }

    /// The end of its log, for failure messages.
    var logTail: String {
        String((try? String(contentsOf: log, encoding: .utf8))?.suffix(2_000) ?? "")
    }

    /// Stops it as an operator would (SIGTERM: a graceful shutdown) and waits for it.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    struct Missing: Error, CustomStringConvertible {
        let what: String
        var description: String { what }
    }
}
