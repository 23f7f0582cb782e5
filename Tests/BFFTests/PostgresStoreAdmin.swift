import PostgresStore

/// Pools on other databases of the test cluster, and a database outage without stopping
/// the shared cluster.
enum PostgresStoreAdmin {
    static func pool(_ url: String) -> ConnectionPool { ConnectionPool(url: url) }

    /// Takes the database of `url` away: no new connections, and its open ones are cut.
    static func takeAway(_ url: String) async throws {
        let (admin, name) = adminPool(for: url)
        defer { admin.close() }
        try await admin.query("ALTER DATABASE \(raw: name) ALLOW_CONNECTIONS false")
        // Each backend waited for (up to 10 s): without a timeout the call returns at once, and
        // on a loaded machine a backend may still serve a query after takeAway has returned.
        try await admin.query("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = \(name)")
    }

    /// Lets connections to the database of `url` in again.
    static func bringBack(_ url: String) async throws {
        let (admin, name) = adminPool(for: url)
        defer { admin.close() }
        try await admin.query("ALTER DATABASE \(raw: name) ALLOW_CONNECTIONS true")
    }

    /// Sets `name` to `value` for new connections to the database of `url`.
    static func setting(_ url: String, _ name: String, to value: String) async throws {
        let (admin, database) = adminPool(for: url)
        defer { admin.close() }
        try await admin.query("ALTER DATABASE \(raw: database) SET \(raw: name) = \(raw: "'" + value + "'")")
    }

    /// A pool on the cluster's `postgres` database, and the name of `url`'s database.
    private static func adminPool(for url: String) -> (ConnectionPool, String) {
        let name = String(url[url.range(of: ":///")!.upperBound..<url.firstIndex(of: "?")!])
        return (pool(url.replacingOccurrences(of: ":///" + name + "?", with: ":///postgres?")), name)
    }
}
