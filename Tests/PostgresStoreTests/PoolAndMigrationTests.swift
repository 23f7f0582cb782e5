import BFFTesting
import Foundation
import PostgresStore
import Testing

@Suite("connection pool and migrations")
struct PoolAndMigrationTests {
    @Test("two pools migrating one fresh database at the same moment: both succeed, each migration once")
    func concurrentMigration() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.createDatabase()
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        let pools = [ConnectionPool(url: url), ConnectionPool(url: url)]
        async let first = migrator.migrate(pools[0])
        async let second = migrator.migrate(pools[1])
        let applied = try await first + second
        #expect(applied.sorted() == migrator.migrations.map(\.version))
        let rows = try await pools[0].query("SELECT version, count(*) FROM schema_migrations GROUP BY version")
        #expect(rows.count == migrator.migrations.count)
        #expect(try rows.allSatisfy { try $0.int(1) == 1 })
        #expect(try await migrator.migrate(pools[0]).isEmpty)
        #expect(try await migrator.pendingCount(pools[1]) == 0)
    }

    @Test("a fresh database reports every migration pending")
    func pendingOnFresh() async throws {
        let url = try await PostgresCluster.shared().createDatabase()
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        #expect(try await migrator.pendingCount(ConnectionPool(url: url)) == migrator.migrations.count)
    }

    @Test("acquiring from an exhausted pool times out with a clear error")
    func acquireTimeout() async throws {
        let url = try await PostgresCluster.shared().createDatabase()
        var configuration = ConnectionPool.Configuration()
        configuration.size = 1
        configuration.acquireTimeout = .milliseconds(200)
        let pool = ConnectionPool(url: url, configuration: configuration)
        let waited = try await pool.withConnection { _ in
            let started = ContinuousClock.now
            await #expect { try await pool.query("SELECT 1") } throws: { ($0 as? PostgresError)?.isPoolTimeout == true }
            return ContinuousClock.now - started
        }
        // 200 ms configured; the bound only says "no hang" on a loaded 2-core machine.
        #expect(waited >= .milliseconds(200) && waited < .seconds(4))
        #expect(try await pool.query("SELECT 41 + 1").first?.int(0) == 42)
    }

    @Test("errors carry the SQLSTATE and never the bound values")
    func errorsRedacted() async throws {
        let url = try await PostgresCluster.shared().createDatabase()
        let pool = ConnectionPool(url: url)
        do {
            try await pool.query("SELECT \("SECRET-VALUE-42")::integer")
            Issue.record("expected an error")
        } catch let error as PostgresError {
            #expect(error.sqlState == "22P02")
            #expect(!error.description.contains("SECRET-VALUE-42"))
        }
    }

    @Test("database restarted while in use: fast, clear failures during the outage, then recovery without a new pool")
    func restart() async throws {
        let cluster = try await PostgresCluster.startPrivate()
        defer { cluster.destroy() }
        let url = cluster.url()
        var configuration = ConnectionPool.Configuration()
        configuration.size = 4
        configuration.connectTimeoutSeconds = 2
        let pool = ConnectionPool(url: url, configuration: configuration)
        #expect(try await pool.query("SELECT 1").count == 1)
        try await runDetached { try cluster.stopServer() }
        for _ in 0..<3 {
            let started = ContinuousClock.now
            await #expect { try await pool.query("SELECT 1") } throws: { ($0 as? PostgresError)?.isConnectionFailure == true }
            #expect(ContinuousClock.now - started < .seconds(3))
        }
        try await runDetached { try cluster.startServer() }
        var recovered = false
        for _ in 0..<20 where !recovered {
            recovered = (try? await pool.query("SELECT 1"))?.count == 1
            if !recovered { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(recovered)
        try await runDetached { try cluster.restart() }
        // The idle connection broke with the restart; the next query may fail once, then recover.
        _ = try? await pool.query("SELECT 1")
        #expect(try await pool.query("SELECT 2").first?.int(0) == 2)
    }
}
