import PostgresStore

/// A pool on another database of the test cluster.
enum PostgresStoreAdmin {
    static func pool(_ url: String) -> ConnectionPool { ConnectionPool(url: url) }
}
