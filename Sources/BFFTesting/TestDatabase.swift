import Cryptography
import Foundation
import PostgresStore
import Synchronization

/// Paths inside the repository, for tests.
public enum RepositoryPaths {
    /// The repository root (found from this source file's location).
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let migrations = root.appendingPathComponent("migrations")
}

/// A fresh, migrated database on the shared test cluster, with a pool and a store on it.
///
/// Each is a copy of one database migrated once per test process: every suite starts at
/// once, and migrating each database anew (a few dozen DDL statements) made PostgreSQL the
/// busiest process of a test run, holding back the tests that wait on it.
public struct TestDatabase: Sendable {
    public let url: String
    public let pool: ConnectionPool
    public let store: PostgresSessionStore
    public let tokenKey: AESGCMKey

    public static func make(poolSize: Int = 8) async throws -> TestDatabase {
        let cluster = try await PostgresCluster.shared()
        // Generous timeouts: tests assert outcomes, not waiting times, and CI machines are
        // loaded. A connection to the local cluster took over 3 s (the pool's default connect
        // timeout) at the busiest moments of a parallel run on a slow machine. In the URL, so
        // that it also holds for the pools smart-bff instances under test make from it.
        let url = try await cluster.createDatabase(template: try await migratedTemplate(on: cluster)) + "&connect_timeout=30"
        var configuration = ConnectionPool.Configuration()
        configuration.size = poolSize
        configuration.acquireTimeout = .seconds(30)
        let pool = ConnectionPool(url: url, configuration: configuration)
        try await Migrator(directory: RepositoryPaths.migrations).migrate(pool) // nothing left to apply, as in service after a start
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        return TestDatabase(url: url, pool: pool, store: PostgresSessionStore(pool: pool, tokenKey: key), tokenKey: key)
    }

    /// The name of the migrated database `make` copies, made on first use (and again after a
    /// failed attempt); nothing stays connected to it (a template must have no other sessions).
    private static func migratedTemplate(on cluster: PostgresCluster) async throws -> String {
        let task = template.withLock { made in
            if let made { return made }
            let task = Task<String, any Error> {
                let url = try await cluster.createDatabase() + "&connect_timeout=30"
                let pool = ConnectionPool(url: url)
                defer { pool.close() }
                try await Migrator(directory: RepositoryPaths.migrations).migrate(pool)
                return String(url[url.range(of: ":///")!.upperBound..<url.firstIndex(of: "?")!])
            }
            made = task
            return task
        }
        do {
            return try await task.value
        } catch {
            template.withLock { if $0 == task { $0 = nil } }
            throw error
        }
    }

    /// The one template of this process's shared cluster.
    private static let template = Mutex<Task<String, any Error>?>(nil)
}
