import Foundation
import PostgresStore

/// What `/readyz` checks: the database answers and no migration is pending.
public struct Readiness: Sendable {
    public let pool: ConnectionPool
    public let migrator: Migrator

    public init(pool: ConnectionPool, migrator: Migrator) {
        self.pool = pool
        self.migrator = migrator
    }

    public enum Database: String, Sendable { case up, down }
    public enum Migrations: String, Sendable { case current, behind, unknown }

    public func check() async -> (Database, Migrations) {
        do {
            let pending = try await migrator.pendingCount(pool)
            return (.up, pending == 0 ? .current : .behind)
        } catch {
            return (.down, .unknown)
        }
    }
}
