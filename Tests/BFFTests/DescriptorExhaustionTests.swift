import BFFTesting
import Foundation
import Testing

/// A server with no file descriptor left for a new connection: the kernel keeps completing
/// handshakes into the listen backlog and the listener stays readable.
@Suite("out of file descriptors")
struct DescriptorExhaustionTests {
    @Test("a server out of file descriptors neither spins nor stops: it says so once, and serves the waiting connections when descriptors free up")
    func outOfDescriptors() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("descriptors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = PortAllocator.next()
        // The sandbox EHR runs on the same HTTP server; 48 descriptors leave it a few dozen
        // for connections.
        let server = try SmartBFFProcess.start(["sandbox", "--port", "\(port)"], port: port,
                                               log: folder.appendingPathComponent("sandbox.log"), openFileLimit: 48)
        defer { Task { await server.stop() } }
        try await server.waitUntilListening()

        var held = try await runBlocking { try (0..<80).map { _ in try LoopbackSocket.connect(port: port) } }
        defer { for fd in held { close(fd) } } // once: the list is emptied when they are closed below
        // Every connection made it into the backlog; the server accepted what it could.
        for _ in 0..<100 where !server.logText.contains("out of file descriptors") { try await Task.sleep(for: .milliseconds(50)) }
        #expect(server.logText.contains("out of file descriptors: accepting paused"), "\(server.logTail)")
        let before = server.cpuSeconds
        try await Task.sleep(for: .seconds(2))
        let spent = server.cpuSeconds - before
        // Woken by a readable listener it cannot accept from, a loop spins: about 2 s of CPU here.
        #expect(spent < 0.5, "\(spent) s of CPU in 2 s while out of descriptors")
        // One warning every 10 s, not one per 100 ms pause (a loaded machine may stretch the test past 10 s).
        let warnings = server.logText.components(separatedBy: "out of file descriptors").count - 1
        #expect(warnings >= 1 && warnings <= 3, "\(warnings) warnings")

        for fd in held { close(fd) }
        held = []
        let answered = try await runBlocking { () -> Int? in
            let client = try RawHTTPClient(port: port, timeout: 10)
            defer { client.close() }
            _ = client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            return client.readResponse()?.status
        }
        #expect(answered == 200)
    }
}
