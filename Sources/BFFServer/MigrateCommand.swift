import ArgumentParser
import Foundation
import PostgresStore

/// `smart-bff migrate`: applies pending migrations under the advisory lock and exits.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "migrate", abstract: "Apply pending SQL migrations (DATABASE_URL) and exit.")

    func run() async throws {
        let url = try Resources.databaseURL()
        if let problem = Resources.migrationsProblem() { throw Resources.configurationError([problem]) }
        guard let directory = Migrator.locateDirectory() else { throw ExitCode(1) } // just found
        let pool = ConnectionPool(url: url)
        defer { pool.close() }
        let applied: [Int]
        do {
            applied = try await Migrator(directory: directory).migrate(pool) { holder in
                let who = holder.map { "PostgreSQL server process \($0)" } ?? "another session"
                FileHandle.standardError.write(Data("smart-bff: waiting for the migration lock, held by \(who)\n".utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("smart-bff: \(StartupFailure.line(for: error))\n".utf8))
            throw ExitCode(1)
        }
        FileHandle.standardOutput.write(Data((applied.isEmpty ? "migrations: up to date\n" : "migrations applied: \(applied.map(String.init).joined(separator: ", "))\n").utf8))
        if let newer = try? await Migrator(directory: directory).unknownVersions(pool), !newer.isEmpty {
            let list = newer.map(String.init).joined(separator: ", ")
            FileHandle.standardError.write(Data("smart-bff: the database has migrations this release does not know (\(list)): a newer release migrated it\n".utf8))
        }
    }
}
