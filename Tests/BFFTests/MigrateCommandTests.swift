import BFFTesting
import Foundation
import PostgresStore
import Testing

@Suite("smart-bff migrate, as an operator runs it")
struct MigrateCommandTests {
    @Test("run by its bare name from PATH, in a folder holding a planted migrations/, it applies the migrations installed with it, not the folder's")
    func bareNameFromPATHIgnoresTheWorkingDirectory() async throws {
        let url = try await PostgresCluster.shared().createDatabase() + "&connect_timeout=30"
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("smart-bff-planted-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("migrations"), withIntermediateDirectories: true)
        try "CREATE TABLE planted_by_someone (x int);\n".write(to: folder.appendingPathComponent("migrations/0001_initial.sql"),
                                                             atomically: true, encoding: .utf8)
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("smart-bff")
        let log = folder.appendingPathComponent("migrate.log").path
        let path = executable.deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        // The shell goes to the folder, then becomes `smart-bff` found through PATH: argv[0] is the bare name.
        let process = try ChildProcess("/bin/sh", ["-c", "cd \"$1\" && exec smart-bff migrate", "sh", folder.path],
                                       environment: ["DATABASE_URL": url, "PATH": path], outputPath: log, program: executable.path)
        let status = try await runBlocking { process.waitUntilExit() }
        #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let pool = ConnectionPool(url: url)
        defer { pool.close() }
        let tables = try await pool.query("SELECT to_regclass('planted_by_someone') IS NULL, to_regclass('sessions') IS NOT NULL")
        #expect(try tables.first?.bool(0) == true, "the planted migration ran")
        #expect(try tables.first?.bool(1) == true, "the installed migrations did not run")
    }
}
