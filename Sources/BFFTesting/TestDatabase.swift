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
        let url = try await cluster.createDatabase()
        var configuration = ConnectionPool.Configuration()
        configuration.size = poolSize
        // Generous: tests assert outcomes, not waiting times, and CI machines are loaded.
        configuration.acquireTimeout = .seconds(30)
        let pool = ConnectionPool(url: url, configuration: configuration)
        try await Migrator(directory: RepositoryPaths.migrations).migrate(pool)
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        return TestDatabase(url: url, pool: pool, store: PostgresSessionStore(pool: pool, tokenKey: key), tokenKey: key)
    }
}
