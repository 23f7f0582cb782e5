import Cryptography
import Foundation
import PostgresStore

/// Paths inside the repository, for tests.
public enum RepositoryPaths {
    /// The repository root (found from this source file's location).
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let migrations = root.appendingPathComponent("migrations")
}

/// A fresh, migrated database on the shared test cluster, with a pool and a store on it.
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
        let url = try await cluster.createDatabase() + "&connect_timeout=30"
        var configuration = ConnectionPool.Configuration()
        configuration.size = poolSize
        configuration.acquireTimeout = .seconds(30)
        let pool = ConnectionPool(url: url, configuration: configuration)
        try await Migrator(directory: RepositoryPaths.migrations).migrate(pool)
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        return TestDatabase(url: url, pool: pool, store: PostgresSessionStore(pool: pool, tokenKey: key), tokenKey: key)
    }
}
