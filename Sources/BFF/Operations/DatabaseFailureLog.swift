import Foundation
import Logging
import PostgresStore
import Synchronization

/// Logs the database's outages, as the connection pool reports them, without a line per
/// request: the first failure with its cause (kind, SQLSTATE, and PostgreSQL's or libpq's
/// message with quoted values removed: "connection refused", "too many clients", "read-only
/// transaction", a lock timeout), then at most one summary a minute while failures go on,
/// and one line once the database has served work with no failure for `quietPeriod`. (A
/// partial outage, a read-only server or a locked table, fails some work and serves the
/// rest: each success in between is no recovery.) Requests' failures are counted in
/// `bff_database_errors_total`, and each is in the access log with its 503.
final class DatabaseFailureLog: DatabaseHealthObserver {
    static let summaryInterval: TimeInterval = 60
    static let quietPeriod: TimeInterval = 30

    private struct Outage {
        var since: Date
        var failures: Int
        var lastLogged: Date
        var lastFailure: Date
    }

    private let logger: Logger
    private let now: @Sendable () -> Date
    private let outage = Mutex<Outage?>(nil)
    /// An outage is open: served work checks this, not the lock.
    private let open = Atomic(false)

    init(logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        self.logger = logger
        self.now = now
    }

    func failed(_ error: PostgresError) {
        let now = now()
        let due: (message: Logger.Message, failures: Int)? = outage.withLock { outage in
            open.store(true, ordering: .relaxed)
            guard var current = outage else {
                outage = Outage(since: now, failures: 1, lastLogged: now, lastFailure: now)
                return ("the database cannot serve requests", 1)
            }
            current.failures += 1
            current.lastFailure = now
            defer { outage = current }
            guard now.timeIntervalSince(current.lastLogged) >= Self.summaryInterval else { return nil }
            current.lastLogged = now
            return ("the database still cannot serve requests", current.failures)
        }
        guard let due else { return }
        logger.error(due.message, metadata: ["error.detail": .string(error.debugDescription),
                                             "db.failures": .stringConvertible(due.failures)])
    }

    func served() {
        guard open.load(ordering: .relaxed) else { return }
        let now = now()
        guard let ended = outage.withLock({ outage -> Outage? in
            guard let current = outage, now.timeIntervalSince(current.lastFailure) >= Self.quietPeriod else { return nil }
            outage = nil
            open.store(false, ordering: .relaxed)
            return current
        }) else { return }
        // At the outage's own level: a log kept at warning or error shows its end too.
        logger.error("the database serves requests again", metadata: [
            "db.failures": .stringConvertible(ended.failures),
            "db.outage_seconds": .string(String(format: "%.1f", ended.lastFailure.timeIntervalSince(ended.since))),
        ])
    }
}
