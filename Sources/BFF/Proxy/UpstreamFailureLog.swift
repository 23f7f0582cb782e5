import Foundation
import HTTPClient
import Logging
import Synchronization

/// Logs the FHIR proxy's failures at an EHR (no connection, TLS, timeout: no HTTP answer; or
/// an answer saying the server failed, 5xx) per issuer without flooding the log: the first
/// failure with its cause (the client's text, or the status), then at most one summary a
/// minute while failures go on, and one line when a request gets an answer again.
/// `bff_upstream_errors_total` counts every failure.
final class UpstreamFailureLog: Sendable {
    static let summaryInterval: TimeInterval = 60

    private struct Outage {
        var since: Date
        var failures: Int
        var lastLogged: Date
    }

    private let logger: Logger
    private let outages = Mutex<[String: Outage]>([:])
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

    /// A request to `iss` got an HTTP answer other than a server failure.
    func answered(iss: String, now: @autoclosure () -> Date) {
        guard anyOutage.load(ordering: .acquiring) else { return }
        let now = now()
        let ended: Outage? = outages.withLock { outages in
            defer { anyOutage.store(!outages.isEmpty, ordering: .releasing) }
            return outages.removeValue(forKey: iss)
        }
        guard let ended else { return }
        logger.info("FHIR requests to the EHR are answered again", metadata: [
            "smart.iss": .string(iss), "upstream.failures": .stringConvertible(ended.failures),
            "upstream.outage_seconds": .string(String(format: "%.1f", now.timeIntervalSince(ended.since))),
        ])
    }
}
