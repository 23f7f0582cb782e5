import Foundation
import Synchronization

/// A bounded pool of PostgreSQL connections. Acquiring waits at most `acquireTimeout`;
/// broken connections are dropped and replaced on demand, so the pool recovers by itself
/// after the server restarts. Every blocking libpq call runs on its connection's queue.
public final class ConnectionPool: Sendable {
    public struct Configuration: Sendable {
        public var size = 8
        public var acquireTimeout: Duration = .seconds(5)
        public var connectTimeoutSeconds = 3
        public init() {}
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<PostgresConnection?, Never>)] = []
        var nextWaiter: UInt64 = 0
        var closed = false
    }

    private let url: String
    public let configuration: Configuration
    private let state = Mutex(State())

    public init(url: String, configuration: Configuration = Configuration()) {
        self.url = url
        self.configuration = configuration
    }

    /// Connections open right now, and how many are in use (for metrics).
    public var usage: (open: Int, inUse: Int) {
        state.withLock { ($0.open, $0.open - $0.idle.count) }
    }

    /// Runs `body` with a connection. Use `connection.run` inside to do blocking work.
    public func withConnection<T: Sendable>(_ body: (PooledConnection) async throws -> T) async throws -> T {
        let connection = try await acquire()
        var healthy = true
        defer { release(connection, healthy: healthy) }
        do {
            return try await body(PooledConnection(connection: connection))
        } catch let error as PostgresError where error.isConnectionFailure {
            healthy = false
            throw error
        } catch {
            healthy = await PooledConnection(connection: connection).runUnchecked { $0.isHealthy }
            throw error
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    public func withTransaction<T: Sendable>(_ body: (PooledConnection) async throws -> T) async throws -> T {
        try await withConnection { connection in
            try await connection.run { try $0.executeScript("BEGIN") }
            do {
                let value = try await body(connection)
                try await connection.run { try $0.executeScript("COMMIT") }
                return value
            } catch {
                try? await connection.run { try $0.executeScript("ROLLBACK") }
                throw error
            }
        }
    }

    /// Runs one query.
    @discardableResult
    public func query(_ query: Query) async throws -> [PostgresRow] {
        try await withConnection { connection in try await connection.run { try $0.execute(query) } }
    }

    /// Closes idle connections and refuses new work.
    public func close() {
        let waiting = state.withLock { s -> [CheckedContinuation<PostgresConnection?, Never>] in
            s.closed = true
            s.open -= s.idle.count
            s.idle.removeAll()
            defer { s.waiters.removeAll() }
            return s.waiters.map(\.continuation)
        }
        for w in waiting { w.resume(returning: nil) }
    }

    private enum Acquire { case ready(PostgresConnection), connect, wait(UInt64), closed }

    private func acquire() async throws -> PostgresConnection {
        let decision = state.withLock { s -> Acquire in
            if s.closed { return .closed }
            if let c = s.idle.popLast() { return .ready(c) }
            if s.open < configuration.size { s.open += 1; return .connect }
            s.nextWaiter += 1
            return .wait(s.nextWaiter)
        }
        switch decision {
        case .closed:
            throw PostgresError(.closed, "the connection pool is closed")
        case let .ready(connection):
            return connection
        case .connect:
            do { return try await connect() } catch {
                state.withLock { $0.open -= 1 }
                throw error
            }
        case let .wait(id):
            return try await wait(id)
        }
    }

    private func wait(_ id: UInt64) async throws -> PostgresConnection {
        let timeout = configuration.acquireTimeout
        let connection: PostgresConnection? = await withCheckedContinuation { continuation in
            state.withLock { $0.waiters.append((id, continuation)) }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = state.withLock { s -> CheckedContinuation<PostgresConnection?, Never>? in
                    guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return s.waiters.remove(at: i).continuation
                }
                expired?.resume(returning: nil)
            }
        }
        guard let connection else { throw PostgresError(.poolTimeout, "no database connection became free in time") }
        return connection
    }

    private func connect() async throws -> PostgresConnection {
        let url = self.url, seconds = configuration.connectTimeoutSeconds
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do { continuation.resume(returning: try PostgresConnection(url: url, connectTimeoutSeconds: seconds)) } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    private func release(_ connection: PostgresConnection, healthy: Bool) {
        let waiter = state.withLock { s -> CheckedContinuation<PostgresConnection?, Never>? in
            guard healthy, !s.closed else {
                s.open -= 1
                return nil
            }
            if !s.waiters.isEmpty { return s.waiters.removeFirst().continuation }
            s.idle.append(connection)
            return nil
        }
        if let waiter { waiter.resume(returning: connection) } else if !healthy {
            // A waiter may now open a fresh connection instead.
            wakeOneWaiterToConnect()
        }
    }

    /// After a broken connection was dropped, lets one waiter open a new one.
    private func wakeOneWaiterToConnect() {
        let waiter = state.withLock { s -> CheckedContinuation<PostgresConnection?, Never>? in
            guard !s.waiters.isEmpty, s.open < configuration.size else { return nil }
            return s.waiters.removeFirst().continuation
        }
        guard let waiter else { return }
        Task {
            state.withLock { $0.open += 1 }
            if let c = try? await connect() { waiter.resume(returning: c) } else {
                state.withLock { $0.open -= 1 }
                waiter.resume(returning: nil)
            }
        }
    }
}

/// A connection lent by the pool. `run` executes blocking libpq work on the connection's
/// own queue.
public struct PooledConnection: Sendable {
    let connection: PostgresConnection

    public func run<T: Sendable>(_ work: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            connection.queue.async {
                do { continuation.resume(returning: try work(connection)) } catch { continuation.resume(throwing: error) }
            }
        }
    }

    func runUnchecked<T: Sendable>(_ work: @escaping @Sendable (PostgresConnection) -> T) async -> T {
        await withCheckedContinuation { continuation in
            connection.queue.async { continuation.resume(returning: work(connection)) }
        }
    }

    /// Runs one query.
    public func query(_ query: Query) async throws -> [PostgresRow] {
        try await run { try $0.execute(query) }
    }
}
