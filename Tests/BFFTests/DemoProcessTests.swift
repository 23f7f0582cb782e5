import BFFTesting
import Foundation
import PostgresStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `smart-bff demo` as a newcomer runs it, at a terminal.
@Suite("demo as a process")
struct DemoProcessTests {
    @Test("a Ctrl-C at the terminal (SIGINT to the whole foreground group) while the demo's PostgreSQL starts ends the demo with 130 and no error: initdb and the server are not in that group")
    func ctrlCWhileTheClusterStarts() async throws {
        let log = NSTemporaryDirectory() + "smart-bff-demo-\(UUID().uuidString).log"
        defer { unlink(log) }
        // A session of its own stands for the terminal's foreground group.
        let pid = try Subprocess.spawn(SmartBFFProcess.executable.path,
                                       ["demo", "--port", "\(PortAllocator.next())", "--sandbox-port", "\(PortAllocator.next())"],
                                       environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                       outputPath: log, newSession: true)
        try await Task.sleep(for: .milliseconds(300)) // initdb runs for a second or more
        kill(-pid, SIGINT)
        let status = try await runBlocking { Subprocess.waitForExit(pid) }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(status == 130, "\(text)")
        #expect(!text.contains("terminated by signal") && !text.contains("failed"), "\(text)")
    }
}
