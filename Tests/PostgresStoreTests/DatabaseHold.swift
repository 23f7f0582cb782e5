import BFFTesting
import Foundation
import PostgresStore

/// What a DBA and another session do to a test database: a short default statement timeout,
/// and a lock held for a while.
enum DatabaseHold {
    /// Sets the database's default `statement_timeout` for new connections.
    static func setStatementTimeout(_ value: String, on pool: ConnectionPool) async throws {
        try await pool.query("""
            DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = %L', current_database(), '\(raw: value)'); END $$
            """)
    }

    /// Holds `LOCK TABLE table IN ACCESS EXCLUSIVE MODE` for `duration` on a connection of
    /// `url`'s; returns once the lock is held, with the task that releases it. Its own
    /// statement has no timeout (the database's short default must not cancel it while it
    /// waits for autovacuum, say); should it fail all the same, so does this.
    static func lock(_ table: String, of url: String, for duration: Duration) async throws -> Task<Void, any Error> {
        let taken = Counter(), failed = Counter()
        let holder = Task {
            let pool = ConnectionPool(url: url)
            defer { pool.close() }
            do {
                try await pool.withTransaction(limits: "SET LOCAL statement_timeout = 0") { c in
                    try await c.query("LOCK TABLE \(raw: table) IN ACCESS EXCLUSIVE MODE")
                    taken.increment()
                    try await Task.sleep(for: duration)
                }
            } catch {
                failed.increment()
                throw error
            }
        }
        while taken.current == 0 && failed.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
        if taken.current == 0 { try await holder.value } // throws the holder's error
        return holder
    }
}
