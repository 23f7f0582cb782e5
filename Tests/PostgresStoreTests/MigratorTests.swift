import BFFTesting
import Foundation
import PostgresStore
import Testing

@Suite("Migrator")
struct MigratorTests {
    @Test("two pools migrating one fresh database at the same moment: both succeed, each migration applied once; a second run is a no-op")
    func concurrentMigration() async throws {
        let url = try await PostgresCluster.shared().createDatabaseForLoad()
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        let pools = [ConnectionPool(url: url), ConnectionPool(url: url)]
        defer { for pool in pools { pool.close() } }
        async let first = migrator.migrate(pools[0])
        async let second = migrator.migrate(pools[1])
        let applied = try await first + second
        #expect(applied.sorted() == migrator.migrations.map(\.version))
        let rows = try await pools[0].query("SELECT version, count(*) FROM schema_migrations GROUP BY version")
        #expect(rows.count == migrator.migrations.count)
        #expect(try rows.allSatisfy { try $0.int(1) == 1 })
        #expect(try await migrator.migrate(pools[0]).isEmpty)
        #expect(try await migrator.pendingCount(pools[1]) == 0)
        #expect(try await migrator.isCurrent(pools[1]))
    }

    @Test("a fresh database reports every migration pending")
    func pendingOnFresh() async throws {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        #expect(try await migrator.pendingCount(pool) == migrator.migrations.count)
        #expect(try await !migrator.isCurrent(pool))
    }

    @Test("migrations given in code run in version order; a failing one rolls back whole and stays pending")
    func inCodeAndFailure() async throws {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }
        let good = Migrator(migrations: [
            .init(version: 2, name: "second", sql: "INSERT INTO t VALUES (2)"),
            .init(version: 1, name: "first", sql: "CREATE TABLE t (n integer); INSERT INTO t VALUES (1)"),
        ])
        #expect(try await good.migrate(pool) == [1, 2])
        let bad = Migrator(migrations: good.migrations + [
            .init(version: 3, name: "broken", sql: "INSERT INTO t VALUES (3); SELECT * FROM no_such_table"),
        ])
        await #expect(throws: PostgresError.self) { try await bad.migrate(pool) }
        #expect(try await pool.query("SELECT n FROM t ORDER BY n").map { try $0.int(0) } == [1, 2])
        #expect(try await bad.pendingCount(pool) == 1)
        let names = try await pool.query("SELECT name FROM schema_migrations ORDER BY version").map { try $0.string(0) }
        #expect(names == ["first", "second"])
    }

    @Test("files not named NNNN_name.sql are refused")
    func badFileName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mig-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "SELECT 1".write(to: directory.appendingPathComponent("initial.sql"), atomically: true, encoding: .utf8)
        #expect(throws: PostgresError.self) { try Migrator(directory: directory) }
    }

    @Test("BFF_MIGRATIONS_DIR is honoured when locating migrations/")
    func locate() {
        let found = Migrator.locateDirectory(environment: ["BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path])
        #expect(found?.standardizedFileURL.path == RepositoryPaths.migrations.standardizedFileURL.path)
    }
}
