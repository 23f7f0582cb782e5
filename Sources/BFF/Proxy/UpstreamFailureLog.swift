import Foundation
import HTTPClient
import Logging
import Synchronization

/// Logs the FHIR proxy's failures to reach an EHR (no connection, TLS, timeout: no HTTP
/// answer) per issuer without flooding the log: the first failure with its cause (the client's
/// text), then at most one summary a minute while failures go on, and one line when a request
/// gets an answer again. Answers saying the EHR's server failed (5xx) are logged apart, at most
/// once a minute per issuer with their count: one resource that always fails, among reads
/// that succeed, is no outage. `bff_upstream_errors_total` counts every failure.
final class UpstreamFailureLog: Sendable {
    static let summaryInterval: TimeInterval = 60

    private struct Outage {
        var since: Date
        var failures: Int
        var lastLogged: Date
    }

    private let logger: Logger
    private let outages = Mutex<[String: Outage]>([:])
    /// Per issuer: when server errors were last logged, and how many came since.
    private let serverErrors = Mutex<[String: (lastLogged: Date, since: Int)]>([:])
    /// Whether any issuer is in an outage: answered requests check this, not the lock.
    private let anyOutage = Atomic(false)

    init(logger: Logger) { self.logger = logger }

    /// A request to `iss` failed at `now`; `detail` says how.
    func failed(iss: String, detail: @autoclosure () -> String, now: Date) {
        let due: (message: Logger.Message, failures: Int)? = outages.withLock { outages in
            guard var outage = outages[iss] else {
                outages[iss] = Outage(since: now, failures: 1, lastLogged: now)
                anyOutage.store(true, ordering: .releasing)
                return ("FHIR requests to the EHR fail", 1)
            }
            outage.failures += 1
            defer { outages[iss] = outage }
            guard now.timeIntervalSince(outage.lastLogged) >= Self.summaryInterval else { return nil }
            outage.lastLogged = now
            return ("FHIR requests to the EHR still fail", outage.failures)
        }
        guard let due else { return }
        logger.warning(due.message, metadata: ["smart.iss": .string(iss), "error.detail": .string(detail()),
                                               "upstream.failures": .stringConvertible(due.failures)])
    }

    /// A request to `iss` was answered with `status`, a server failure (5xx): logged when it
    /// is the issuer's first, or a minute after the last line, with the count since.
    func serverError(iss: String, status: Int, now: Date) {
        let due: Int? = serverErrors.withLock { errors in
            guard let last = errors[iss] else {
                errors[iss] = (now, 0)
                return 1
            }
            guard now.timeIntervalSince(last.lastLogged) >= Self.summaryInterval else {
                errors[iss] = (last.lastLogged, last.since + 1)
                return nil
            }
            errors[iss] = (now, 0)
            return last.since + 1
        }
        guard let due else { return }
        logger.warning("FHIR reads answered with server errors", metadata: [
            "smart.iss": .string(iss), "error.detail": .string("the EHR answered HTTP \(status)"),
            "upstream.failures": .stringConvertible(due),
        ])
    }

    /// A request to `iss` got an HTTP answer.
    func answered(iss: String, now: @autoclosure () -> Date) {
        guard anyOutage.load(ordering: .acquiring) else { return }
        let now = now()
        let ended: Outage? = outages.withLock { outages in
            defer { anyOutage.store(!outages.isEmpty, ordering: .releasing) }
            return outages.removeValue(forKey: iss)
        }
        guard let ended else { return }
        // At the outage's own level: a log kept at warning shows its end too.
        logger.warning("FHIR requests to the EHR are answered again", metadata: [
            "smart.iss": .string(iss), "upstream.failures": .stringConvertible(ended.failures),
            "upstream.outage_seconds": .string(String(format: "%.1f", now.timeIntervalSince(ended.since))),
        ])
    }
}
