import Foundation

/// A connection lent by `ConnectionPool` for the duration of a `withConnection` body. `run`
/// executes blocking libpq work on the connection's own serial queue.
public struct PooledConnection: Sendable {
    let connection: PostgresConnection

    /// Runs `work` on the connection's queue and returns its result.
    public func run<T: Sendable>(_ work: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            connection.queue.async {
                continuation.resume(with: Result { try work(connection) })
            }
        }
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    public func query(_ query: Query) async throws -> [PostgresRow] {
        try await run { try $0.execute(query) }
    }
}
