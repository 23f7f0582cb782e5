import Foundation
import PostgresStore
import Synchronization

/// What `/readyz` checks: the database answers, takes writes, and no migration is pending.
/// One check runs at a time, and its result serves every caller for a second.
public final class Readiness: Sendable {
    public let pool: ConnectionPool
    public let migrator: Migrator
    private let recent = RecentResult<Status>(lifetime: .seconds(1))
    private let lastMigrations: Mutex<Migrations>
    /// How long a check waits for a pooled connection before it says `busy`: well within a
    /// probe's timeout (Kubernetes' default is 1 s), where the pool's own wait is seconds.
    static let poolWait: Duration = .milliseconds(300)

    /// `migrations`: what is known at start (`current` once this process has applied them),
    /// reported while the pool is too busy to look.
    public init(pool: ConnectionPool, migrator: Migrator, migrations: Migrations = .unknown) {
        self.pool = pool
        self.migrator = migrator
        lastMigrations = Mutex(migrations)
    }

    /// `busy`: the database answers, but no pooled connection came free in time (every one is
    /// in use). Not a reason to take the instance out of service: under load, every instance
    /// on the database would be taken out at once. `readOnly`: it answers but takes no writes
    /// (a standby; a primary demoted in a failover that this instance still reaches): no
    /// sign-in, no audit entry can be stored.
    public enum Database: String, Sendable {
        case up, busy, down
        case readOnly = "read-only"
    }
    public enum Migrations: String, Sendable { case current, behind, unknown }
    public typealias Status = (database: Database, migrations: Migrations)

    /// The database's and the migrations' state, at most a second old.
    public func check() async -> Status {
        await recent.value { [self] in
            do {
                let pending = try await self.migrator.pendingCount(self.pool, waitingAtMost: Readiness.poolWait)
                let migrations: Migrations = pending == 0 ? .current : .behind
                self.lastMigrations.withLock { $0 = migrations }
                let writable = try await self.pool.takesWrites(waitingAtMost: Readiness.poolWait)
                return (writable ? .up : .readOnly, migrations)
            } catch let error as PostgresError where error.isPoolTimeout {
                return (.busy, self.lastMigrations.withLock { $0 })
            } catch {
                return (.down, .unknown)
            }
        }
    }
}
