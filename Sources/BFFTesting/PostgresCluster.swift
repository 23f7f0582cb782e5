import Foundation
import PostgresStore
import Synchronization

/// The throwaway PostgreSQL cluster of a test run: started once per test process on first
/// use, stopped and deleted at exit. Tests that restart the server start their own
/// `EmbeddedPostgres` instead.
public enum PostgresCluster {
    /// The shared cluster.
    public static func shared() async throws -> EmbeddedPostgres { try await sharedCluster.value }

    private static let sharedCluster = Task<EmbeddedPostgres, any Error> {
        let cluster = try await runDetached { try EmbeddedPostgres.start(prefix: "smart-bff-test-pg") }
        started.withLock { $0.append(cluster) }
        atexit { for c in PostgresCluster.started.withLock({ $0 }) { c.destroy() } }
        return cluster
    }

    static let started = Mutex<[EmbeddedPostgres]>([])

    /// A private cluster (destroyed at exit if the test does not destroy it first).
    public static func startPrivate() async throws -> EmbeddedPostgres {
        let cluster = try await runDetached { try EmbeddedPostgres.start(prefix: "smart-bff-test-pg") }
        started.withLock { $0.append(cluster) }
        return cluster
    }
}

extension EmbeddedPostgres {
    /// Creates a fresh empty database and returns its URI; tests that need isolation use one each.
    public func createDatabase(_ name: String = "t_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")) async throws -> String {
        let pool = ConnectionPool(url: url(), configuration: .init())
        defer { pool.close() }
        try await pool.query("CREATE DATABASE \(raw: name)")
        return url(database: name)
    }
}
