import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Applies the numbered SQL files of `migrations/` (`0001_name.sql`, …) in order, each once,
/// each in its own transaction, under a PostgreSQL advisory lock so that instances starting
/// together are safe. Applied versions are recorded in `schema_migrations`.
///
/// A file whose first line is `-- smart-bff: no transaction` runs outside a transaction,
/// one statement (ending in `;` at the end of a line) at a time: for `CREATE INDEX
/// CONCURRENTLY`, which builds an index on a large table without holding writes back. Such
/// a file must be safe to run again from its start (`DROP INDEX IF EXISTS` first): one
/// stopped halfway is run again whole.
public struct Migrator: Sendable {
    /// One schema change: `NNNN_name.sql` read as (version, name, sql).
    public struct Migration: Sendable, Equatable {
        public let version: Int
        public let name: String
        public let sql: String

        public init(version: Int, name: String, sql: String) {
            self.version = version
            self.name = name
            self.sql = sql
        }

        /// `NNNN_name.sql`: the file's name, with the version written in four digits.
        public var fileName: String {
            let digits = String(version)
            return String(repeating: "0", count: max(0, 4 - digits.count)) + digits + "_" + name + ".sql"
        }

        /// Whether the file asks to run outside a transaction (its first line).
        var runsOutsideTransaction: Bool {
            sql.prefix { $0 != "\n" }.trimmingCharacters(in: .whitespaces) == "-- smart-bff: no transaction"
        }

        /// Its statements, each ending in `;` at the end of a line; comment lines dropped.
        var statements: [String] {
            var result: [String] = [], current = ""
            for line in sql.split(separator: "\n", omittingEmptySubsequences: false) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("--") || trimmed.isEmpty { continue }
                current += line + "\n"
                if trimmed.hasSuffix(";") { result.append(current); current = "" }
            }
            if !current.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { result.append(current) }
            return result
        }
    }

    /// An arbitrary, fixed key for `pg_advisory_lock`.
    static let lockKey = 0x5_3B_FF_01

    public let migrations: [Migration]

    public init(migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Reads `NNNN_name.sql` files from `directory`.
    public init(directory: URL) throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }
        var migrations: [Migration] = []
        for file in files {
            let stem = file.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw PostgresError.migration("migration file \(file) is not named NNNN_name.sql")
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        guard Set(migrations.map(\.version)).count == migrations.count else {
            throw PostgresError.migration("two migration files share a version number")
        }
        self.init(migrations: migrations)
    }

    /// Finds `migrations/`: `BFF_MIGRATIONS_DIR` when set (and then only there), else beside
    /// the executable (or up to four folders above it), else in the working directory. The
    /// executable's own come before the working directory's: SQL planted in whatever folder
    /// `smart-bff migrate` is run from must not run as the database's owner.
    public static func locateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        let isMigrations = { (url: URL) in FileManager.default.fileExists(atPath: url.appendingPathComponent("0001_initial.sql").path) }
        if let dir = EnvironmentValue.named("BFF_MIGRATIONS_DIR", in: environment) {
            let url = URL(fileURLWithPath: dir)
            return isMigrations(url) ? url : nil
        }
        return InstallationPaths.candidates(for: "migrations").first(where: isMigrations)
    }

    /// Applies every pending migration; returns the versions applied by this call. While
    /// another process holds the migration lock (another release's migration, a leaked
    /// session), `whileWaiting` is told the holder's server process id (nil when it cannot
    /// be seen) after 2 s, then every 30 s: a start stuck there says why.
    @discardableResult
    public func migrate(_ pool: ConnectionPool, whileWaiting: @escaping @Sendable (_ holder: Int?) -> Void = { _ in }) async throws -> [Int] {
        let migrations = self.migrations
        return try await pool.withConnection { connection in
            try await connection.run { c in
                // No statement timeout for migrations (an index build on a large trail takes
                // minutes, and a DBA's short default would fail every start); the locks they
                // take are bounded by their own lock_timeout. The connection's own value (the
                // pool's setting, not the server's default) comes back before it goes back.
                // One statement: it runs under the old limit, which may be a DBA's 50 ms.
                let previous = try c.execute("SELECT current_setting('statement_timeout'), set_config('statement_timeout', '0', false)")[0].string(0)
                defer { _ = try? c.execute(Query("SELECT set_config('statement_timeout', $1, false)", [.text(previous)])) }
                // Polled, not waited for: a waiting pg_advisory_lock holds a snapshot, which the
                // lock holder's CREATE INDEX CONCURRENTLY would wait for in turn (a deadlock).
                var nextReport = ContinuousClock.now + Migrator.firstWaitReport
                while try c.execute(Query("SELECT pg_try_advisory_lock($1)", [.int(Migrator.lockKey)]))[0].bool(0) == false {
                    if ContinuousClock.now >= nextReport {
                        whileWaiting(try? Migrator.lockHolder(on: c))
                        nextReport = ContinuousClock.now + .seconds(30)
                    }
                    usleep(100_000)
                }
                defer { _ = try? c.execute(Query("SELECT pg_advisory_unlock($1)", [.int(Migrator.lockKey)])) }
                try c.executeScript("""
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                    """)
                let done = Set(try c.execute("SELECT version FROM schema_migrations").map { try $0.int(0) })
                var applied: [Int] = []
                for migration in migrations where !done.contains(migration.version) {
                    do throws(PostgresError) { try Migrator.apply(migration, on: c) } catch {
                        // Which file failed, for the operator: the server's message alone does not say.
                        throw error.within("migration \(migration.fileName)")
                    }
                    applied.append(migration.version)
                }
                return applied
            }
        }
    }

    /// How long a wait for the migration lock goes unreported.
    static let firstWaitReport: Duration = .seconds(2)

    /// The server process holding the migration lock on this database (advisory locks are
    /// per database; `pg_locks` splits a bigint key into `classid`, its high half, and
    /// `objid`, with `objsubid` 1).
    private static func lockHolder(on c: PostgresConnection) throws(PostgresError) -> Int? {
        let rows = try c.execute(Query("""
            SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND classid::bigint = $1 AND objid::bigint = $2
            """, [.int(lockKey >> 32), .int(lockKey & 0xFFFF_FFFF)]))
        // One session holds an exclusive lock; anything else names no one for sure.
        guard rows.count == 1 else { return nil }
        return try rows[0].int(0)
    }

    /// Runs one migration and records it: in a transaction of its own, unless it asks to run outside one.
    private static func apply(_ migration: Migration, on c: PostgresConnection) throws(PostgresError) {
        if migration.runsOutsideTransaction {
            for statement in migration.statements { try c.executeScript(statement) }
            _ = try c.execute("INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))")
            return
        }
        try c.executeScript("BEGIN")
        do {
            try c.executeScript(migration.sql)
            _ = try c.execute("INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))")
            try c.executeScript("COMMIT")
        } catch {
            try? c.executeScript("ROLLBACK")
            throw error
        }
    }

    /// Versions the database has applied that this release does not know: a newer release
    /// migrated it (an instance of this one still works there during a rolling upgrade, but
    /// after a rollback the operator should know the schema is ahead).
    public func unknownVersions(_ pool: ConnectionPool) async throws -> [Int] {
        let known = Set(migrations.map(\.version))
        return try await pool.query("SELECT version FROM schema_migrations ORDER BY version")
            .map { try $0.int(0) }.filter { !known.contains($0) }
    }

    /// Whether every migration has been applied (for `/readyz`).
    public func isCurrent(_ pool: ConnectionPool) async throws -> Bool {
        try await pendingCount(pool) == 0
    }

    /// How many migrations the database has not applied (for `/readyz`).
    public func pendingCount(_ pool: ConnectionPool, waitingAtMost wait: Duration? = nil) async throws -> Int {
        let rows: [PostgresRow]
        do { rows = try await pool.query("SELECT version FROM schema_migrations", waitingAtMost: wait) } catch let error as PostgresError where error.sqlState == "42P01" {
            return migrations.count // no schema_migrations table yet
        }
        let done = Set(try rows.map { try $0.int(0) })
        return migrations.filter { !done.contains($0.version) }.count
    }
}
