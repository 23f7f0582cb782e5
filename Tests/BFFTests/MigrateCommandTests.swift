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
        let executable = SmartBFFProcess.executable
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

    @Test("a migration the database refuses: exit 1 and one line naming the file and PostgreSQL's reason; a file not named NNNN_name.sql is named too")
    func failedMigrationIsNamed() async throws {
        let url = try await PostgresCluster.shared().createDatabase() + "&connect_timeout=30"
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("smart-bff-migrations-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try "CREATE TABLE first (x int);\n".write(to: folder.appendingPathComponent("0001_initial.sql"), atomically: true, encoding: .utf8)
        try "ALTER TABLE no_such_table ADD COLUMN y int;\n".write(to: folder.appendingPathComponent("0002_broken.sql"), atomically: true, encoding: .utf8)
        let (status, output) = try await Self.migrate(url, migrations: folder)
        #expect(status == 1, "\(output)")
        #expect(output.contains("migration 0002_broken.sql") && output.contains("SQLSTATE 42P01") && output.contains("does not exist"), "\(output)")

        try "notes\n".write(to: folder.appendingPathComponent("notes.sql"), atomically: true, encoding: .utf8)
        let (again, said) = try await Self.migrate(url, migrations: folder)
        #expect(again == 1 && said.contains("notes.sql is not named NNNN_name.sql"), "\(said)")
    }

    /// A Kubernetes Job reading both from a secret made from files: each ends in a newline,
    /// which `serve` ignores, and so must `migrate`.
    @Test("values ending in a newline (read from a file or a secret) are taken without it")
    func valuesEndingInANewline() async throws {
        let url = try await PostgresCluster.shared().createDatabase() + "&connect_timeout=30"
        let (status, output) = try await Self.migrate(url + "\n", migrations: URL(fileURLWithPath: RepositoryPaths.migrations.path + "\n"))
        #expect(status == 0, "\(output)")
        let pool = ConnectionPool(url: url)
        defer { pool.close() }
        #expect(try await pool.query("SELECT to_regclass('sessions') IS NOT NULL").first?.bool(0) == true)
    }

    @Test("a DATABASE_URL libpq cannot read is a configuration error (exit 78: systemd does not restart it), and no part of it is shown")
    func unreadableDatabaseURL() async throws {
        let (status, output) = try await Self.migrate("host=db password=s3cret pw", migrations: RepositoryPaths.migrations)
        #expect(status == 78 && output.contains("DATABASE_URL: unusable connection string"), "\(status) \(output)")
        #expect(!output.contains("s3cret"), "\(output)")
    }

    @Test("a database a newer release migrated: migrate succeeds and says which versions it does not know (a rollback's operator should know)")
    func newerSchemaIsNamed() async throws {
        let url = try await PostgresCluster.shared().createDatabase() + "&connect_timeout=30"
        #expect(try await Self.migrate(url, migrations: RepositoryPaths.migrations).0 == 0)
        let pool = ConnectionPool(url: url)
        defer { pool.close() }
        try await pool.query("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')")
        let (status, output) = try await Self.migrate(url, migrations: RepositoryPaths.migrations)
        #expect(status == 0 && output.contains("migrations: up to date"), "\(output)")
        #expect(output.contains("does not know (9999)"), "\(output)")
    }

    /// `smart-bff migrate` with `BFF_MIGRATIONS_DIR`: its exit status and what it wrote.
    static func migrate(_ url: String, migrations: URL) async throws -> (Int32, String) {
        let executable = SmartBFFProcess.executable
        let log = NSTemporaryDirectory() + "smart-bff-migrate-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let process = try ChildProcess(executable.path, ["migrate"],
                                       environment: ["DATABASE_URL": url, "BFF_MIGRATIONS_DIR": migrations.path,
                                                     "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                       outputPath: log)
        let status = try await runBlocking { process.waitUntilExit() }
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }
}
