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
    /// How long `/readyz` waits for a check: a database that takes longer to answer its two
    /// small statements (hung, or behind a lock) is `unresponsive`, whatever comes later.
    static let checkLimit: Duration = .milliseconds(1500)
    /// With every pooled connection in use, the database counts as `busy` (ready) only if
    /// it answered one of them this recently (default 5 s); else they are stuck, and it is
    /// `unresponsive`.
    private let servedRecently: Duration

    /// `migrations`: what is known at start (`current` once this process has applied them),
    /// reported while the pool is too busy to look.
    public init(pool: ConnectionPool, migrator: Migrator, migrations: Migrations = .unknown, servedRecently: Duration = .seconds(5)) {
        self.pool = pool
        self.migrator = migrator
        lastMigrations = Mutex(migrations)
        self.servedRecently = servedRecently
    }

    /// `busy`: the database answers, but no pooled connection came free in time (every one is
    /// in use, and one answered within `servedRecently`). Not a reason to take the instance
    /// out of service: under load, every instance on the database would be taken out at once.
    /// `unresponsive`: it does not answer in time (hung, stopped mid-statement, or behind a
    /// lock), or every connection is stuck. `readOnly`: it answers but takes no writes (a
    /// standby; a primary demoted in a failover that this instance still reaches): no
    /// sign-in, no audit entry can be stored.
    public enum Database: String, Sendable {
        case up, busy, down, unresponsive
        case readOnly = "read-only"
    }
    public enum Migrations: String, Sendable { case current, behind, unknown }
    public typealias Status = (database: Database, migrations: Migrations)

    /// The database's and the migrations' state, at most a second old, within `checkLimit`.
    public func check() async -> Status {
        let status = await recent.value(within: Readiness.checkLimit) { [self] in
            do {
                let pending = try await self.migrator.pendingCount(self.pool, waitingAtMost: Readiness.poolWait)
                let migrations: Migrations = pending == 0 ? .current : .behind
                self.lastMigrations.withLock { $0 = migrations }
                let writable = try await self.pool.takesWrites(waitingAtMost: Readiness.poolWait)
                return (writable ? .up : .readOnly, migrations)
            } catch let error as PostgresError where error.isPoolTimeout {
                // A pool of one may be held whole by a token refresh across the EHR's answer
                // (up to 40 s), the database idle meanwhile: stuck cannot be told from held.
                let answered = self.pool.configuration.size < 2
                    || self.pool.lastServed.map { ContinuousClock.now - $0 < self.servedRecently } ?? false
                return (answered ? .busy : .unresponsive, self.lastMigrations.withLock { $0 })
            } catch {
                return (.down, .unknown)
            }
        }
        return status ?? (.unresponsive, lastMigrations.withLock { $0 })
    }
}
