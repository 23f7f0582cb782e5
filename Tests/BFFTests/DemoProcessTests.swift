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
    @Test("a Ctrl-C at the terminal (SIGINT to the whole foreground group) while the demo's PostgreSQL starts ends the demo with 130 and no error, its cluster deleted: initdb and the server are not in that group")
    func ctrlCWhileTheClusterStarts() async throws {
        // A temporary folder of its own, where the demo makes its cluster's.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("demo-ctrl-c-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let log = folder.appendingPathComponent("demo.log").path
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "TMPDIR": folder.path]
        environment["BFF_PG_BIN"] = ProcessInfo.processInfo.environment["BFF_PG_BIN"]
        // A session of its own stands for the terminal's foreground group.
        let pid = try Subprocess.spawn(SmartBFFProcess.executable.path,
                                       ["demo", "--port", "\(PortAllocator.next())", "--sandbox-port", "\(PortAllocator.next())"],
                                       environment: environment, outputPath: log, newSession: true)
        let cluster = { (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?.first { $0.hasPrefix("smart-bff-demo-pg") } }
        // While initdb runs (a second or more): the data folder is there, the server's pid file not yet.
        var duringInitdb = false
        let deadline = ContinuousClock.now + .seconds(60) // a no-hang limit
        while !duringInitdb && ContinuousClock.now < deadline {
            if let name = cluster() {
                let data = folder.appendingPathComponent(name).appendingPathComponent("data")
                duringInitdb = FileManager.default.fileExists(atPath: data.path)
                    && !FileManager.default.fileExists(atPath: data.appendingPathComponent("postmaster.pid").path)
            }
            if !duringInitdb { try await Task.sleep(for: .milliseconds(5)) }
        }
        kill(-pid, SIGINT)
        var status: Int32?
        for _ in 0..<600 where status == nil { // 60 s: a no-hang limit
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { status = Subprocess.exitStatus(raw) } else { try await Task.sleep(for: .milliseconds(100)) }
        }
        if status == nil {
            kill(-pid, SIGKILL)
            _ = Subprocess.waitForExit(pid)
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(duringInitdb, "initdb was not caught running: \(text)")
        #expect(status == 130, "\(text)")
        #expect(!text.contains("terminated by signal") && !text.contains("failed"), "\(text)")
        #expect(cluster() == nil, "the cluster's folder is left")
    }
}
