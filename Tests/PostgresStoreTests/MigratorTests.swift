import BFFTesting
import Cryptography
import Foundation
import PostgresStore
import Sessions
import Synchronization
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

    @Test("a migration waiting for the lock another session holds says so after 2 s, naming that session's server process (not one holding the key in another database), not again a second later, and goes on once the lock is free")
    func waitForTheLockIsReported() async throws {
        let url = try await PostgresCluster.shared().createDatabaseForLoad()
        var one = ConnectionPool.Configuration()
        one.size = 1 // one connection: the lock is taken and released in the same session
        // The same key held in another database first: advisory locks are per database, and
        // that session is not the one in the way (an operator told its pid might end it).
        let elsewhere = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad(), configuration: one)
        let holder = ConnectionPool(url: url, configuration: one), pool = ConnectionPool(url: url)
        defer { holder.close(); pool.close(); elsewhere.close() }
        _ = try await elsewhere.query("SELECT pg_advisory_lock(\(0x5_3B_FF_01))")
        let holderPID = try await holder.query("SELECT pg_backend_pid(), pg_advisory_lock(\(0x5_3B_FF_01))")[0].int(0)
        let reports = Mutex<[Int?]>([])
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        let migrating = Task { try await migrator.migrate(pool) { holder in reports.withLock { $0.append(holder) } } }
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit for a loaded machine
        while reports.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(reports.withLock { $0 } == [holderPID])
        try await Task.sleep(for: .seconds(1))
        #expect(reports.withLock { $0.count } == 1, "reported more than once in 30 s")
        _ = try await holder.query("SELECT pg_advisory_unlock(\(0x5_3B_FF_01))")
        #expect(try await migrating.value == migrator.migrations.map(\.version))
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

    @Test("0004: audit rows stored before it get the migration's time as recorded_at; later rows the time their COPY writes them, not the transaction's start")
    func auditRecordedAt() async throws {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }
        let all = try Migrator(directory: RepositoryPaths.migrations)
        try await Migrator(migrations: all.migrations.filter { $0.version < 4 }).migrate(pool)
        try await pool.query("""
            INSERT INTO audit_events (at, launch_hash, iss, sub, method, path, upstream_status, bytes)
            SELECT now() - n * interval '1 day', 'h', 'i', 's', 'GET', '/Patient/' || n, 200, n FROM generate_series(1, 3) AS n
            """)
        // As 0004 to 0006 left it; 0007 stamps a COPY's rows alike (below). (With 0010's column,
        // which the store's COPY writes.)
        #expect(try await Migrator(migrations: all.migrations.filter { $0.version <= 6 || $0.version == 10 }).migrate(pool) == [4, 5, 6, 10])
        let old = try await pool.query("""
            SELECT count(DISTINCT recorded_at), bool_and(recorded_at = (SELECT applied_at FROM schema_migrations WHERE version = 4)) FROM audit_events
            """)
        #expect(try old[0].int(0) == 1 && old[0].bool(1))

        // Two pieces of one COPY, sent 300 ms apart: stamped apart. The transaction's start
        // would stamp both alike; the server may take up the first piece late on a busy
        // machine, so the gap asked for is well under the 300 ms.
        let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)))
        var pieces = 0
        try await store.appendAudit(lockWait: .seconds(5), batch: SecureRandom.bytes(16), streaming: {
            pieces += 1
            guard pieces <= 2 else { return nil }
            if pieces == 2 { try? await Task.sleep(for: .milliseconds(300)) }
            return [AuditEntry(at: Date(), launchHash: "h", iss: "i", sub: "s", fhirUser: nil, patient: nil, method: "GET",
                               pathAndQuery: "/Patient/new-\(pieces)", upstreamStatus: 200, bytes: 1)]
        })
        let new = try await pool.query("""
            SELECT extract(epoch from max(recorded_at) - min(recorded_at)) FROM audit_events WHERE path LIKE '/Patient/new-%'
            """)
        #expect(try new[0].double(0) >= 0.1)
        let index = try await pool.query("""
            SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
            WHERE i.indrelid = 'audit_events'::regclass AND c.relname = 'audit_events_recorded_at'
            """)
        #expect(try index.first?.string(0) == "brin")
    }

    @Test("migrations run under a DBA's short statement_timeout, waiting out a lock longer than it")
    func migrationsUnderShortStatementTimeout() async throws {
        let url = try await PostgresCluster.shared().createDatabaseForLoad()
        let setup = ConnectionPool(url: url)
        defer { setup.close() }
        let all = try Migrator(directory: RepositoryPaths.migrations)
        try await Migrator(migrations: all.migrations.filter { $0.version <= 6 }).migrate(setup)
        // 250 ms: the migrator's first statement (which lifts the timeout for its session) runs
        // under it, and a loaded machine has taken over 50 ms for it.
        try await DatabaseHold.setStatementTimeout("250ms", on: setup)
        let pool = ConnectionPool(url: url) // new connections: the database's new default
        defer { pool.close() }
        let holder = try await DatabaseHold.lock("audit_events", of: url, for: .milliseconds(1_000)) // 0007 alters the table
        #expect(try await all.migrate(pool) == [7, 8, 9, 10, 11, 12])
        try await holder.value
        // The connection went back to the pool with the database's default again.
        #expect(try await pool.query("SHOW statement_timeout")[0].string(0) == "250ms")
    }

    @Test("0010 and 0012 wait at most 10 s for their audit table's lock (behind it, every audit write would wait), fail, and apply at the next attempt",
          arguments: [(10, "audit_events", [10, 11, 12]), (12, "audit_batches", [12])])
    func auditMigrationsBoundTheirLockWait(version: Int, table: String, applied: [Int]) async throws {
        let url = try await PostgresCluster.shared().createDatabaseForLoad()
        let pool = ConnectionPool(url: url)
        defer { pool.close() }
        let all = try Migrator(directory: RepositoryPaths.migrations)
        try await Migrator(migrations: all.migrations.filter { $0.version < version }).migrate(pool)
        let holder = try await DatabaseHold.lock(table, of: url, for: .seconds(120))
        let started = ContinuousClock.now
        await #expect { try await all.migrate(pool) } throws: { ($0 as? PostgresError)?.sqlState == "55P03" }
        #expect(ContinuousClock.now - started < .seconds(90), "waited for the lock (120 s)")
        holder.cancel()
        _ = try? await holder.value
        #expect(try await all.migrate(pool) == applied)
    }

    @Test("0011: the trail's recorded_at index is a multi-interval BRIN of 32-page ranges, and the single-interval one is gone")
    func recordedAtIndexIsMultiInterval() async throws {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }
        try await Migrator(directory: RepositoryPaths.migrations).migrate(pool)
        let indexes = try await pool.query("""
            SELECT c.relname, pg_get_indexdef(c.oid), i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'audit_events'::regclass AND pg_get_indexdef(c.oid) LIKE '%recorded_at%'
            """)
        #expect(indexes.count == 1)
        let definition = try indexes.first?.string(1) ?? ""
        #expect(try indexes.first?.string(0) == "audit_events_recorded_at_multi" && indexes.first?.bool(2) == true)
        #expect(definition.contains("brin") && definition.contains("timestamptz_minmax_multi_ops") && definition.contains("pages_per_range='32'"), "\(definition)")
    }

    @Test("0007: PostgreSQL writes a COPY's audit rows in batches (no volatile default to evaluate per row); they share the COPY's start as recorded_at")
    func auditRowsInBatches() async throws {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }
        let all = try Migrator(directory: RepositoryPaths.migrations)
        try await Migrator(migrations: all.migrations.filter { $0.version <= 6 || $0.version == 10 }).migrate(pool) // 0010: the column the store writes
        try await pool.query("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        // A replication slot keeps the WAL from here on: the rest of the run writes gigabytes
        // (every test database is a copy), and a checkpoint meanwhile would remove the segments
        // read below (SQLSTATE 58P01, could not open file).
        // Temporary: it goes with its connection when the pool closes, whatever the test did.
        let slot = "walinspect_" + Identifier.hash(SecureRandom.token(bytes: 8)).prefix(12)
        try await pool.query("SELECT pg_create_physical_replication_slot(\(slot), true, true)")
        let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)))
        let entries = (0..<500).map {
            AuditEntry(at: Date(), launchHash: "h", iss: "i", sub: "s", fhirUser: nil, patient: nil, method: "GET",
                       pathAndQuery: "/Patient/\($0)", upstreamStatus: 200, bytes: 1)
        }
        /// The heap's WAL records for the audit table while `entries` are written in one COPY
        /// of two pieces, 300 ms apart: single-row inserts, and multi-row ones.
        func heapRecords() async throws -> (single: Int, multi: Int) {
            let start = try await pool.query("SELECT pg_current_wal_insert_lsn()::text")[0].string(0)
            var pieces = 0
            try await store.appendAudit(lockWait: .seconds(5), batch: SecureRandom.bytes(16), streaming: {
                pieces += 1
                guard pieces <= 2 else { return nil }
                if pieces == 2 { try? await Task.sleep(for: .milliseconds(300)) }
                return pieces == 1 ? Array(entries[..<250]) : Array(entries[250...])
            })
            // WAL is read up to where it is flushed; the test cluster may commit asynchronously.
            let end = try await pool.query("SELECT pg_current_wal_insert_lsn()::text")[0].string(0)
            for _ in 0..<250 where try await !pool.query("SELECT pg_current_wal_flush_lsn() >= \(end)::pg_lsn")[0].bool(0) {
                try await Task.sleep(for: .milliseconds(20))
            }
            // Only this database's audit table: other tests write to the same cluster meanwhile.
            let rows = try await pool.query("""
                SELECT count(*) FILTER (WHERE resource_manager = 'Heap' AND record_type LIKE 'INSERT%'),
                       count(*) FILTER (WHERE resource_manager = 'Heap2' AND record_type LIKE 'MULTI_INSERT%')
                FROM pg_get_wal_records_info(\(start)::pg_lsn, \(end)::pg_lsn)
                WHERE block_ref LIKE '%/' || (SELECT oid FROM pg_database WHERE datname = current_database())
                                      || '/' || pg_relation_filenode('audit_events') || ' %'
                """)
            return (try rows[0].int(0), try rows[0].int(1))
        }
        // Before 0007 (recorded_at's default clock_timestamp(), volatile): a row at a time.
        let before = try await heapRecords()
        #expect(before.single >= 500 && before.multi == 0, "\(before)")

        #expect(try await all.migrate(pool) == [7, 8, 9, 11, 12])
        try await pool.query("DELETE FROM audit_events")
        let after = try await heapRecords()
        #expect(after.single == 0 && after.multi >= 1 && after.multi < 50, "\(after)")
        // One COPY, one instant, however long it stays open.
        let stamps = try await pool.query("SELECT count(DISTINCT recorded_at), count(*) FROM audit_events")
        #expect(try stamps[0].int(0) == 1 && stamps[0].int(1) == 500)
    }

    @Test("a migration marked '-- smart-bff: no transaction' runs statement by statement outside a transaction (CREATE INDEX CONCURRENTLY), and again whole after a failure")
    func noTransaction() async throws {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }
        let table = Migrator.Migration(version: 1, name: "table", sql: "CREATE TABLE t (v integer);\nINSERT INTO t VALUES (1), (1);\n")
        let index = { (unique: Bool) in
            Migrator.Migration(version: 2, name: "index", sql: """
                -- smart-bff: no transaction
                -- Comment lines are skipped.
                DROP INDEX CONCURRENTLY IF EXISTS t_v;
                CREATE \(unique ? "UNIQUE " : "")INDEX CONCURRENTLY t_v
                    ON t (v);
                """)
        }
        // A unique index on duplicate values fails halfway, leaving an invalid index behind; unrecorded.
        await #expect(throws: PostgresError.self) { try await Migrator(migrations: [table, index(true)]).migrate(pool) }
        #expect(try await pool.query("SELECT version FROM schema_migrations ORDER BY version").map { try $0.int(0) } == [1])
        #expect(try await Migrator(migrations: [table, index(false)]).migrate(pool) == [2])
        let valid = try await pool.query("SELECT indisvalid FROM pg_index WHERE indexrelid = 't_v'::regclass")
        #expect(try valid.first?.bool(0) == true)
    }

    @Test("files not named NNNN_name.sql are refused")
    func badFileName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mig-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "SELECT 1".write(to: directory.appendingPathComponent("initial.sql"), atomically: true, encoding: .utf8)
        #expect(throws: PostgresError.self) { try Migrator(directory: directory) }
    }

    @Test("BFF_MIGRATIONS_DIR is honoured when locating migrations/, and only it: a wrong one finds none, not another")
    func locate() throws {
        let found = Migrator.locateDirectory(environment: ["BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path])
        #expect(found?.standardizedFileURL.path == RepositoryPaths.migrations.standardizedFileURL.path)
        #expect(Migrator.locateDirectory(environment: ["BFF_MIGRATIONS_DIR": "/nonexistent/migrations"]) == nil)
        // Without it: the executable's (this test binary's, under .build) before the working directory's.
        #expect(Migrator.locateDirectory(environment: [:])?.standardizedFileURL.path == RepositoryPaths.migrations.standardizedFileURL.path)
    }
}
