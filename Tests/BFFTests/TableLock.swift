import BFFTesting
import PostgresStore

/// A DBA's `LOCK TABLE <table> IN ACCESS EXCLUSIVE MODE` (what `VACUUM FULL` takes), by
/// default on `audit_events`, held from a pool of its own on the database of `url` until
/// `release()`, or 120 s (past the audit writer's 60 s `statement_timeout`).
final class TableLock: Sendable {
    private let pool: ConnectionPool
    private let released = Counter()
    private let holder: Task<Void, any Error>

    /// Returns once the lock is held.
    static func take(_ url: String, table: String = "audit_events") async throws -> TableLock {
        let holding = Counter()
        let lock = TableLock(url: url, table: table, holding: holding)
        while holding.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
        return lock
    }

    private init(url: String, table: String, holding: Counter) {
        let pool = PostgresStoreAdmin.pool(url)
        let released = released
        self.pool = pool
        holder = Task {
            try await pool.withTransaction { connection in
                try await connection.query("LOCK TABLE \(raw: table) IN ACCESS EXCLUSIVE MODE")
                holding.increment()
                let deadline = ContinuousClock.now + .seconds(120)
                while released.current == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            }
        }
    }

    /// How many sessions on the database of `url` wait for a lock on `audit_events` now.
    static func waitingWrites(_ url: String) async throws -> Int {
        let pool = PostgresStoreAdmin.pool(url)
        defer { pool.close() }
        return try await pool.query("""
            SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
            WHERE d.datname = current_database() AND l.relation = 'audit_events'::regclass AND NOT l.granted
            """)[0].int(0)
    }

    /// Ends the lock's transaction (the table is free once this returns) and closes its pool.
    func release() async throws {
        released.increment()
        defer { pool.close() }
        try await holder.value
    }
}
