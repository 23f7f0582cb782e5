import Foundation
import Synchronization

/// A bounded pool of PostgreSQL connections.
///
/// - Acquiring waits at most `acquireTimeout`, then fails with `PostgresError.isPoolTimeout`
///   (task cancellation ends the wait too).
/// - An idle connection is checked before it is lent (no round trip): one the server
///   closed (a restart, `pg_terminate_backend`) or left inside a transaction is dropped and
///   replaced, so the pool recovers by itself after the server comes back. A connection whose
///   statement failed for connection reasons is dropped too.
/// - While the server is down, connecting fails fast (refused, or `connectTimeoutSeconds`).
/// - Every blocking libpq call runs on the connection's own serial queue (connects on a
///   Dispatch global queue), never on the Swift concurrency pool.
public final class ConnectionPool: Sendable {
    /// Pool settings.
    public struct Configuration: Sendable {
        /// Most connections open at once.
        public var size = 8
        /// Longest wait for a free connection.
        public var acquireTimeout: Duration = .seconds(5)
        /// libpq `connect_timeout` (a setting in the URL wins).
        public var connectTimeoutSeconds = 3
        /// `SET` statements each new connection runs before it is first lent: defaults for
        /// every statement on it, such as `statement_timeout`, which a transaction's own
        /// `SET LOCAL` limits override (`withTransaction(limits:)`). Nil: the server's.
        public var settings: String?
        /// Told of every transient failure (`PostgresError.isTransient`: the database cannot
        /// serve now) of the pool's work, and of all work served: for one log line per outage
        /// rather than one per request.
        public var healthObserver: (any DatabaseHealthObserver)?
        public init() {}
    }

    /// What a waiting acquirer is handed.
    private enum Grant {
        case connection(PostgresConnection)
        /// A slot (already counted in `open`): connect yourself.
        case slot
        case timedOut
        case cancelled
        case closed
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Grant, Never>
        /// It may be given an empty slot to connect in; not after the server refused it a
        /// connection while others of the pool worked (it waits for one of those).
        let takesSlot: Bool
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        /// Of `open`, the slots whose connection is being made (counted when the slot is given
        /// to its connector, under the same lock).
        var connecting = 0
        var waiters: [Waiter] = []
        var nextWaiter: UInt64 = 0
        var closed = false
        /// When the server last answered a statement of the pool's.
        var lastServed: ContinuousClock.Instant?
    }

    private let url: String
    public let configuration: Configuration
    private let state = Mutex(State())

    /// A pool for `url` (a libpq URI or `key=value` string). Connections open on demand.
    public init(url: String, configuration: Configuration = Configuration()) {
        self.url = url
        self.configuration = configuration
    }

    /// When a connection last came back from work the server answered (a result or an error
    /// of its own), or nil if none has: with every connection busy, whether the database
    /// still works through them or hangs. (Noted as each connection is returned, not at each
    /// statement: a connection held long, across an EHR's answer, counts when it comes back.)
    public var lastServed: ContinuousClock.Instant? { state.withLock { $0.lastServed } }

    /// Connections open right now, and how many are lent out (for metrics).
    public var usage: (open: Int, inUse: Int) {
        state.withLock { ($0.open, $0.open - $0.idle.count) }
    }

    /// Runs `body` with a connection of its own; inside, `connection.run { … }` does the
    /// blocking work on the connection's queue.
    /// `waitingAtMost`: how long to wait for a connection to come free, in place of
    /// `acquireTimeout` (a readiness check must answer before its probe gives up). Such a
    /// short wait running out is the caller's choice, not a failure of the database: the
    /// health observer is not told of it.
    public func withConnection<T: Sendable>(waitingAtMost wait: Duration? = nil,
                                            _ body: (PooledConnection) async throws -> T) async throws -> T {
        let connection: PostgresConnection
        do {
            connection = try await acquire(waitingAtMost: wait ?? configuration.acquireTimeout)
        } catch {
            if wait == nil || !((error as? PostgresError)?.isPoolTimeout ?? false) { observe(error) }
            throw error
        }
        do {
            let value = try await body(PooledConnection(connection: connection))
            release(connection, reusable: true, served: true)
            observe(nil)
            return value
        } catch let error as PostgresError where error.isConnectionFailure || error.isReadOnly {
            // Read-only: a standby, or a primary demoted in a failover; a new connection may
            // reach the new primary (the host name moved), where this one never will.
            release(connection, reusable: false, served: error.isReadOnly)
            observe(error)
            throw error
        } catch {
            // A connection left inside a transaction is caught at the next checkout.
            release(connection, reusable: true, served: error is PostgresError)
            observe(error)
            throw error
        }
    }

    /// Tells the health observer of a transient failure, or of work the database served
    /// (a success, or an answer refusing a statement).
    private func observe(_ error: (any Error)?) {
        guard let observer = configuration.healthObserver else { return }
        if let failure = error as? PostgresError, failure.isTransient {
            observer.failed(failure)
        } else if error == nil || error is PostgresError {
            observer.served()
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    ///
    /// `limits` (`SET LOCAL` statements) go in the same round trip as `BEGIN`: sent after
    /// it, a server's short `idle_in_transaction_session_timeout` could end the session in
    /// the gap, on a loaded machine, before the transaction's own limits applied.
    ///
    /// A `COMMIT` whose answer never came (`PostgresError.leavesCommitUnknown`) may have
    /// landed; such a failure is thrown as `commitUnanswered(error)` when given.
    @discardableResult
    public func withTransaction<T: Sendable>(limits: String? = nil, commitUnanswered: ((PostgresError) -> any Error)? = nil,
                                             _ body: (PooledConnection) async throws -> T) async throws -> T {
        let begin = limits.map { "BEGIN; " + $0 } ?? "BEGIN"
        return try await withConnection { connection in
            try await connection.run { try $0.executeScript(begin) }
            let value: T
            do {
                value = try await body(connection)
            } catch {
                try? await connection.run { try $0.executeScript("ROLLBACK") }
                throw error
            }
            do {
                try await connection.run { try $0.executeScript("COMMIT") }
            } catch let error as PostgresError where error.leavesCommitUnknown {
                throw commitUnanswered?(error) ?? error
            }
            return value
        }
    }

    /// Whether the server takes writes: not a standby, nor read-only by default. A connection
    /// that finds it read-only is dropped, as after a write refused as read-only: the next is
    /// made anew, and may reach another server (a failover's new primary, where the host
    /// name now points).
    public func takesWrites(waitingAtMost wait: Duration? = nil) async throws -> Bool {
        do {
            try await withConnection(waitingAtMost: wait) { connection in
                let readOnly = try await connection.run {
                    try $0.execute("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'")[0].bool(0)
                }
                if readOnly { throw PostgresError.query(sqlState: "25006", serverMessage: "the server takes no writes", context: "write check") }
            }
            return true
        } catch let error as PostgresError where error.isReadOnly {
            return false
        }
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    public func query(_ query: Query, waitingAtMost wait: Duration? = nil) async throws -> [PostgresRow] {
        try await withConnection(waitingAtMost: wait) { connection in try await connection.run { try $0.execute(query) } }
    }

    /// Closes idle connections, fails every waiter, and refuses new work. Lent connections
    /// close when they come back.
    public func close() {
        let waiters = state.withLock { s -> [Waiter] in
            s.closed = true
            s.open -= s.idle.count
            s.idle.removeAll()
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: .closed) }
    }

    // MARK: Acquire and release

    private enum Decision { case ready(PostgresConnection), connect, wait, closed }

    /// A connection within `timeout`. A new connection the server refuses while others of
    /// the pool work (PostgreSQL's `max_connections` taken by other clients) is not the
    /// caller's failure: it waits for one of those to come free, as for a full pool. With none
    /// working (the server is down), the refusal fails the caller at once.
    private func acquire(waitingAtMost timeout: Duration) async throws -> PostgresConnection {
        let deadline = ContinuousClock.now + timeout
        var decision = state.withLock { s -> Decision in
            if s.closed { return .closed }
            if let idle = s.idle.popLast() { return .ready(idle) }
            if s.open < configuration.size {
                s.open += 1
                s.connecting += 1
                return .connect
            }
            return .wait
        }
        var takesSlot = true
        while true {
            switch decision {
            case .closed:
                throw PostgresError.closed
            case let .ready(connection):
                return try await verified(connection)
            case .connect:
                do {
                    return try await connect()
                } catch {
                    // Refused while others of the pool work: the slot is given up, not passed
                    // to a waiter, who would be refused in turn (each refusal costs the server
                    // a process), and this caller waits for a working connection.
                    guard error is PostgresError, ContinuousClock.now < deadline, giveUpSlotIfOthersWork() else {
                        release(nil, reusable: false)
                        throw error
                    }
                    (decision, takesSlot) = (.wait, false)
                }
            case .wait:
                switch await waitForGrant(timeout: max(.zero, deadline - ContinuousClock.now), takesSlot: takesSlot) {
                case let .connection(connection): return try await verified(connection)
                case .slot: decision = .connect
                case .timedOut: throw PostgresError.poolTimeout(timeout)
                case .cancelled: throw CancellationError()
                case .closed: throw PostgresError.closed
                }
            }
        }
    }

    /// If connections of the pool are made and open (idle or lent out), gives up the caller's
    /// slot (its connect was refused) and returns true; else leaves it.
    private func giveUpSlotIfOthersWork() -> Bool {
        state.withLock { s in
            guard s.open - 1 > s.connecting else { return false }
            s.open -= 1
            return true
        }
    }

    /// `connection` if the server has not closed it, else a new one in its slot. The
    /// connection is idle and ours alone, and the check never blocks (a zero-timeout `poll`),
    /// so it runs on this thread without a queue hop.
    private func verified(_ connection: PostgresConnection) async throws -> PostgresConnection {
        if connection.isUsable() { return connection }
        state.withLock { $0.connecting += 1 }
        return try await connectInSlot()
    }

    /// Opens a connection in a slot already counted in `open`; gives the slot up on failure.
    private func connectInSlot() async throws -> PostgresConnection {
        do {
            return try await connect()
        } catch {
            release(nil, reusable: false)
            throw error
        }
    }

    /// Waits for a connection given back (or, if `takesSlot`, an empty slot). One that is idle
    /// or a slot that is free by the time the waiter would queue is taken at once: the caller
    /// decided to wait earlier, outside the lock, and no release would wake it for them.
    private func waitForGrant(timeout: Duration, takesSlot: Bool) async -> Grant {
        let id = state.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        // A Dispatch timer, not a task: the deadline must hold even when the Swift
        // concurrency pool is busy (a sleeping task could wake seconds late under load).
        let timer = DispatchWorkItem { [weak self] in self?.removeWaiter(id)?.resume(returning: .timedOut) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(timeout.components.seconds) * 1_000_000_000
            + Int(timeout.components.attoseconds / 1_000_000_000)), execute: timer)
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Grant, Never>) in
                let now = state.withLock { s -> Grant? in
                    // Checked under the lock that `onCancel` takes, so a waiter is never lost.
                    if Task.isCancelled { return .cancelled }
                    if s.closed { return .closed }
                    if let idle = s.idle.popLast() { return .connection(idle) }
                    if takesSlot && s.open < configuration.size {
                        s.open += 1
                        s.connecting += 1
                        return .slot
                    }
                    s.waiters.append(Waiter(id: id, continuation: continuation, takesSlot: takesSlot))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            self.removeWaiter(id)?.resume(returning: .cancelled)
        }
    }

    private func removeWaiter(_ id: UInt64) -> CheckedContinuation<Grant, Never>? {
        state.withLock { s in
            guard let index = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return s.waiters.remove(at: index).continuation
        }
    }

    /// Returns a connection (or, with `nil`, an empty slot) to the pool: to the first waiter
    /// if there is one, else to the idle list; a connection that is not reusable is closed
    /// and its slot goes to the first waiter that takes a slot, who connects anew.
    /// `served`: the server answered the work done on it (for `lastServed`).
    private func release(_ connection: PostgresConnection?, reusable: Bool, served: Bool = false) {
        let now: ContinuousClock.Instant? = served ? .now : nil
        let handOff = state.withLock { s -> (Waiter, Grant)? in
            if let now { s.lastServed = now }
            if s.closed {
                s.open -= 1
                return nil
            }
            if let connection, reusable {
                if !s.waiters.isEmpty { return (s.waiters.removeFirst(), .connection(connection)) }
                s.idle.append(connection)
                return nil
            }
            if let index = s.waiters.firstIndex(where: \.takesSlot) {
                s.connecting += 1
                return (s.waiters.remove(at: index), .slot)
            }
            s.open -= 1
            return nil
        }
        if let (waiter, grant) = handOff { waiter.continuation.resume(returning: grant) }
    }

    /// Connects in a slot already counted in `open` and `connecting`.
    private func connect() async throws -> PostgresConnection {
        defer { state.withLock { $0.connecting -= 1 } }
        let url = self.url, seconds = configuration.connectTimeoutSeconds, settings = configuration.settings
        // A thread of its own: PQconnectdb blocks up to the connect timeout, and on Linux a
        // blocked Dispatch global-queue thread is not replaced, so connects to a database
        // that is down held up every other user of the global queue for seconds.
        return try await runDetached { () throws(PostgresError) in try PostgresConnection(url: url, connectTimeoutSeconds: seconds, settings: settings) }
    }
}
