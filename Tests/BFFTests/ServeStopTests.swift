import BFFTesting
import Cryptography
import Foundation
import Logging
import Sandbox
import Testing

/// How `smart-bff serve` stops on the signals an operator or orchestrator sends.
@Suite("stopping serve")
struct ServeStopTests {
    @Test("a second stop signal closes the connections the drain waits for at once, and the stop still ends cleanly (status 0, last line shut down)")
    func secondSignalHastensTheStop() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("serve-stop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let issuers = folder.appendingPathComponent("issuers.json")
        try Data(#"[{"iss": "http://127.0.0.1:9/fhir", "client_id": "test-app"}]"#.utf8).write(to: issuers)
        let port = PortAllocator.next()
        let bff = try SmartBFFProcess.serve(port: port, log: folder.appendingPathComponent("bff.log"), environment: [
            "DATABASE_URL": database.url, "BFF_ISSUERS_FILE": issuers.path,
            "BFF_TOKEN_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
            "BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path,
        ])
        defer { Task { await bff.stop() } }
        try await bff.waitUntilListening()
        // Until it has started (the `serving` line, then the handler's set-up), a signal ends it at once.
        for _ in 0..<100 where !bff.logText.contains("\"serving\"") { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .milliseconds(200))

        // A request whose head is still coming: the drain waits for it (up to 10 s, the grace
        // period and the head's read timeout alike).
        let client = try RawHTTPClient(port: port, timeout: 30)
        defer { client.close() }
        client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        bff.signalStop()
        for _ in 0..<100 where !bff.logText.contains("\"draining\"") { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await bff.exitStatus(within: .seconds(1)) == nil, "the first signal waits for the request: \(bff.logTail)")

        bff.signalStop()
        let status = try await bff.exitStatus(within: .seconds(5))
        #expect(status == 0, "stopped within 5 s of the second signal, cleanly: \(bff.logTail)")
        #expect(bff.logText.contains("second stop signal: closing open connections now"), "\(bff.logTail)")
        let last = bff.logText.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.contains("\"shut down\"") && last.contains("\"audit.lost_entries\":\"0\""), "\(last)")
    }
}
