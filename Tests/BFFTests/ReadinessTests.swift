@testable import BFF
import BFFTesting
import Foundation
import PostgresStore
import Testing

@Suite("readiness and other checks shared by concurrent callers")
struct ReadinessTests {
    @Test("a busy pool (every connection in use) is reported as busy without waiting out the pool's own acquire timeout, not down, and the instance stays ready, from its first check")
    func busyPool() async throws {
        let database = try await TestDatabase.make(poolSize: 1)
        var configuration = ConnectionPool.Configuration()
        configuration.size = 1
        configuration.acquireTimeout = .seconds(60) // what the check must not wait for
        let pool = ConnectionPool(url: database.url, configuration: configuration)
        defer { pool.close() }
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        let readiness = Readiness(pool: pool, migrator: migrator, migrations: .current) // as serve makes it, after migrating
        _ = try await pool.query("SELECT 1") // the database answers the pool, as after migrating
        let holding = Counter(), release = Counter()
        let holder = Task {
            try await pool.withConnection { _ in
                holding.increment()
                while release.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
            }
        }
        while holding.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
        let started = ContinuousClock.now
        #expect(await readiness.check() == (.busy, .current)) // the first check: ready
        // About 0.3 s (Readiness.poolWait); the bound leaves a loaded machine room, far below 60 s.
        #expect(ContinuousClock.now - started < .seconds(10), "the check waited for the pool's acquire timeout")
        release.increment()
        try await holder.value
        try await Task.sleep(for: .milliseconds(1100)) // past the shared result's second
        #expect(await readiness.check() == (.up, .current))
    }

    @Test("a busy pool none of whose work the database answered lately is stuck, not busy: unresponsive, and a check's short pool wait tells the outage log nothing")
    func stuckPool() async throws {
        let database = try await TestDatabase.make(poolSize: 1)
        let failures = Counter()
        var configuration = ConnectionPool.Configuration()
        configuration.size = 2 // (a pool of one is never judged stuck: a refresh may hold it across the EHR's answer)
        configuration.healthObserver = FailureCount(failures: failures)
        let pool = ConnectionPool(url: database.url, configuration: configuration)
        defer { pool.close() }
        _ = try await pool.query("SELECT 1")
        let migrator = try Migrator(directory: RepositoryPaths.migrations)
        let holding = Counter(), release = Counter()
        let holders = (0..<2).map { _ in
            Task {
                try await pool.withConnection { _ in
                    holding.increment()
                    while release.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
                }
            }
        }
        while holding.current < 2 { try await Task.sleep(for: .milliseconds(10)) }
        // Answered lately: busy. Not within the window (here none): every connection is stuck.
        #expect(await Readiness(pool: pool, migrator: migrator, migrations: .current, servedRecently: .seconds(600)).check() == (.busy, .current))
        #expect(await Readiness(pool: pool, migrator: migrator, migrations: .current, servedRecently: .zero).check() == (.unresponsive, .current))
        #expect(failures.current == 0, "a readiness check's own short wait was logged as an outage")
        release.increment()
        for holder in holders { try await holder.value }
    }

    /// A database that does not answer the check's statements (here: a lock on the table
    /// it reads; a hung server the same) makes /readyz say so within its limit, rather than
    /// hang, or answer `down` once some timeout fails the statement.
    @Test("a check the database does not answer in time is unresponsive, within the check's limit")
    func unansweredCheck() async throws {
        let database = try await TestDatabase.make()
        let readiness = Readiness(pool: database.pool, migrator: try Migrator(directory: RepositoryPaths.migrations), migrations: .current)
        let lock = try await TableLock.take(database.url, table: "schema_migrations")
        let started = ContinuousClock.now
        #expect(await readiness.check() == (.unresponsive, .current))
        #expect(ContinuousClock.now - started < .seconds(30), "waited for the lock (120 s)")
        try await lock.release()
    }

    @Test("concurrent callers share one computation, and its result for its lifetime; then it is computed again")
    func sharedResult() async throws {
        let computed = Counter()
        let compute: @Sendable () async -> Int = {
            computed.increment()
            try? await Task.sleep(for: .milliseconds(100))
            return computed.current
        }
        let recent = RecentResult<Int>(lifetime: .seconds(3600))
        let values = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { await recent.value(compute) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(computed.current == 1 && Set(values) == [1], "\(computed.current) computations")
        #expect(await recent.value(compute) == 1, "reused within its lifetime")
        let brief = RecentResult<Int>(lifetime: .milliseconds(1))
        #expect(await brief.value(compute) == 2)
        try await Task.sleep(for: .milliseconds(20))
        #expect(await brief.value(compute) == 3, "computed again once its lifetime has passed")
    }
}

/// Counts the failures a pool tells its health observer of.
private struct FailureCount: DatabaseHealthObserver {
    let failures: Counter
    func failed(_ error: PostgresError) { failures.increment() }
    func served() {}
}
