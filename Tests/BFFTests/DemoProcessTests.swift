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
        // A temporary folder of its own, where the demo makes its cluster's; and an initdb that
        // says it has started, then waits 3 s before it does its work: the signal comes while
        // it runs, however late a loaded machine lets this test look.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("demo-ctrl-c-\(UUID().uuidString)")
        let bin = folder.appendingPathComponent("bin"), marks = folder.appendingPathComponent("marks")
        for made in [folder, bin, marks] { try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true) }
        defer { try? FileManager.default.removeItem(at: folder) }
        chmod(folder.path, 0o755)
        chmod(marks.path, 0o777) // initdb runs as postgres when the tests run as root
        let started = marks.appendingPathComponent("initdb").path
        try Data("#!/bin/sh\n: > '\(started)'\nsleep 3\nexec '\(EmbeddedPostgres.binaries)/initdb' \"$@\"\n".utf8)
            .write(to: bin.appendingPathComponent("initdb"))
        chmod(bin.appendingPathComponent("initdb").path, 0o755)
        try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent("pg_ctl").path,
                                                   withDestinationPath: EmbeddedPostgres.binaries + "/pg_ctl")
        let log = folder.appendingPathComponent("demo.log").path
        let environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "TMPDIR": folder.path,
                           "BFF_PG_BIN": bin.path]
        // Started, watched and signalled from a thread of its own: a task waits on a loaded
        // machine's busy pool for longer than initdb runs. A session of its own stands for the
        // terminal's foreground group.
        let executable = SmartBFFProcess.executable.path
        let ports = [PortAllocator.next(), PortAllocator.next()]
        let (pid, initdbRuns) = try await runBlocking { () throws -> (Int32, Bool) in
            let pid = try Subprocess.spawn(executable, ["demo", "--port", "\(ports[0])", "--sandbox-port", "\(ports[1])"],
                                           environment: environment, outputPath: log, newSession: true)
            for _ in 0..<6_000 { // 60 s: a no-hang limit
                if FileManager.default.fileExists(atPath: started) {
                    kill(-pid, SIGINT)
                    return (pid, true)
                }
                usleep(10_000)
            }
            kill(-pid, SIGINT)
            return (pid, false)
        }
        let status = try await runBlocking { () -> Int32? in
            for _ in 0..<600 { // 60 s: a no-hang limit
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid { return Subprocess.exitStatus(raw) }
                usleep(100_000)
            }
            kill(-pid, SIGKILL)
            _ = Subprocess.waitForExit(pid)
            return nil
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let left = (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?.filter { $0.hasPrefix("smart-bff-demo-pg") } ?? []
        #expect(initdbRuns, "initdb never started: \(text)")
        #expect(status == 130, "\(text)")
        #expect(!text.contains("terminated by signal") && !text.contains("failed"), "\(text)")
        #expect(left.isEmpty, "the cluster's folder is left")
    }
}
