import BFFTesting
import PostgresStore

extension PostgresCluster {
    /// `createDatabase()` with `connect_timeout=30` in the URI, as `TestDatabase` does: at the
    /// busiest moments of a parallel run on a slow machine a connection to the local cluster
    /// took longer than libpq's timeout the pools use by default (3 s).
    func createDatabaseForLoad() async throws -> String {
        try await createDatabase() + "&connect_timeout=30"
    }
}

extension PostgresCluster {
    /// A pool on `database` with the same allowance, and as long to wait for a connection.
    func poolForLoad(database: String = "postgres") -> ConnectionPool {
        var configuration = ConnectionPool.Configuration()
        configuration.acquireTimeout = .seconds(30)
        return ConnectionPool(url: url(database: database) + "&connect_timeout=30", configuration: configuration)
    }
}
