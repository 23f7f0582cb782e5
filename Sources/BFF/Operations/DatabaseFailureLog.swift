import Foundation
import Logging
import PostgresStore
import Synchronization

/// Logs the database's outages, as the connection pool reports them, without a line per
/// request: the first failure with its cause (kind, SQLSTATE, and PostgreSQL's or libpq's
/// message with quoted values removed: "connection refused", "too many clients", "read-only
/// transaction", a lock timeout), then at most one summary a minute while failures go on,
/// and one line when the database serves again. Requests' failures are counted in
/// `bff_database_errors_total`, and each is in the access log with its 503.
final class DatabaseFailureLog: DatabaseHealthObserver {
    static let summaryInterval: TimeInterval = 60

    private struct Outage {
        var since: Date
        var failures: Int
        var lastLogged: Date
    }

    private let logger: Logger
    private let now: @Sendable () -> Date
    private let outage = Mutex<Outage?>(nil)

    init(logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        self.logger = logger
        self.now = now
    }

    func failed(_ error: PostgresError) {
        let now = now()
        let due: (message: Logger.Message, failures: Int)? = outage.withLock { outage in
            guard var current = outage else {
                outage = Outage(since: now, failures: 1, lastLogged: now)
                return ("the database cannot serve requests", 1)
            }
            current.failures += 1
            defer { outage = current }
            guard now.timeIntervalSince(current.lastLogged) >= Self.summaryInterval else { return nil }
            current.lastLogged = now
            return ("the database still cannot serve requests", current.failures)
        }
        guard let due else { return }
        logger.error(due.message, metadata: ["error.detail": .string(error.debugDescription),
                                             "db.failures": .stringConvertible(due.failures)])
    }

    func recovered() {
        let now = now()
        guard let ended = outage.withLock({ outage -> Outage? in
            defer { outage = nil }
            return outage
        }) else { return }
        logger.notice("the database serves requests again", metadata: [
            "db.failures": .stringConvertible(ended.failures),
            "db.outage_seconds": .string(String(format: "%.1f", now.timeIntervalSince(ended.since))),
        ])
    }
}
