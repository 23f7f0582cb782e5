import Foundation
import HTTPCore
import Logging
import Synchronization

/// Prometheus metrics: requests by route and status, latency histograms, upstream latency
/// and errors, refreshes, database errors. Rendered in the text exposition format.
public final class Metrics: Sendable {
    struct Histogram {
        /// Up to a minute: the EHR's read timeout is 30 s, and a request that waits it out
        /// should land in a bucket of its own, not only in `+Inf`.
        static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
        var buckets = [Int](repeating: 0, count: Histogram.bounds.count)
        var count = 0
        var sum = 0.0

        mutating func observe(_ seconds: Double) {
            for (i, bound) in Histogram.bounds.enumerated() where seconds <= bound { buckets[i] += 1 }
            count += 1
            sum += seconds
        }

        mutating func add(_ other: Histogram) {
            for i in buckets.indices { buckets[i] += other.buckets[i] }
            count += other.count
            sum += other.sum
        }
    }

    /// Per-request counters, added up over the recorders for rendering.
    struct RequestCounters {
        var requests: [String: [Int: Int]] = [:]
        var latency: [String: Histogram] = [:]
    }

    /// One route's counts in a `RequestRecorder`: one lookup by route per request.
    struct RouteCounts {
        var byStatus: [Int: Int] = [:]
        var latency = Histogram()

        /// `seconds` nil: counted, with no time to answer (a request refused while being read).
        mutating func record(status: Int, seconds: Double?) {
            byStatus[status, default: 0] += 1
            if let seconds { latency.observe(seconds) }
        }
    }

    /// Every `kind` of `bff_upstream_errors_total` and `outcome` of `bff_token_refreshes_total`:
    /// each series is there from the start, at 0, so that `rate()` and alerts see its first
    /// failure as an increase (a series that appears with its first event hides it).
    static let upstreamErrorKinds = ["unreachable", "tls", "timeout", "malformed", "truncated", "encoding", "redirect", "cancelled", "stalled", "server_error"]
    static let refreshOutcomes = ["ok", "failed", "no_refresh_token", "invalid_grant"]

    struct State {
        var upstream = Histogram()
        var upstreamErrors = Dictionary(uniqueKeysWithValues: Metrics.upstreamErrorKinds.map { ($0, 0) })
        var refreshes = Dictionary(uniqueKeysWithValues: Metrics.refreshOutcomes.map { ($0, 0) })
        var databaseErrors = 0
    }

    private let state = Mutex(State())
    /// Where one application (one I/O thread) records its requests: every request records,
    /// so each thread has its own counters and lock, added up when /metrics is rendered.
    final class RequestRecorder: Sendable {
        fileprivate let routes = Mutex<[String: RouteCounts]>([:])

        func record(route: String, status: Int, seconds: Double?) {
            routes.withLock { routes in
                routes[route, default: RouteCounts()].record(status: status, seconds: seconds)
            }
        }
    }

    private let recorders = Mutex<[RequestRecorder]>([])

    public init() {}

    /// A recorder for one thread's requests; its counts appear in `render`.
    func makeRequestRecorder() -> RequestRecorder {
        let recorder = RequestRecorder()
        recorders.withLock { $0.append(recorder) }
        return recorder
    }

    /// The request counters of every recorder, added up.
    private func requestCounters() -> RequestCounters {
        var total = RequestCounters()
        for recorder in recorders.withLock({ $0 }) {
            for (route, counts) in recorder.routes.withLock({ $0 }) {
                for (status, count) in counts.byStatus { total.requests[route, default: [:]][status, default: 0] += count }
                if counts.latency.count > 0 { total.latency[route, default: Histogram()].add(counts.latency) } // none for `unparsed`
            }
        }
        return total
    }

    public func recordUpstream(seconds: Double) { state.withLock { $0.upstream.observe(seconds) } }
    public func recordUpstreamError(_ kind: String) { state.withLock { $0.upstreamErrors[kind, default: 0] += 1 } }
    public func recordRefresh(_ outcome: String) { state.withLock { $0.refreshes[outcome, default: 0] += 1 } }
    public func recordDatabaseError() { state.withLock { $0.databaseErrors += 1 } }

    /// The exposition text, with gauges supplied by the caller.
    public func render(activeSessions: Int?, pool: (open: Int, inUse: Int)?, audit: AuditWriter.Status) -> String {
        let s = state.withLock { $0 }
        let r = requestCounters()
        var out = ""
        out += "# HELP bff_http_requests_total HTTP requests by route and status.\n# TYPE bff_http_requests_total counter\n"
        for route in r.requests.keys.sorted() {
            for status in r.requests[route]!.keys.sorted() {
                out += "bff_http_requests_total{route=\"\(Metrics.escape(route))\",status=\"\(status)\"} \(r.requests[route]![status]!)\n"
            }
        }
        out += "# HELP bff_http_request_duration_seconds Time to answer (to the response head).\n# TYPE bff_http_request_duration_seconds histogram\n"
        for route in r.latency.keys.sorted() {
            out += Metrics.histogram("bff_http_request_duration_seconds", r.latency[route]!, labels: "route=\"\(Metrics.escape(route))\"")
        }
        out += "# HELP bff_upstream_duration_seconds FHIR upstream time to response head, of the reads the EHR answered.\n# TYPE bff_upstream_duration_seconds histogram\n"
        out += Metrics.histogram("bff_upstream_duration_seconds", s.upstream, labels: nil)
        out += "# HELP bff_upstream_errors_total FHIR upstream failures by kind.\n# TYPE bff_upstream_errors_total counter\n"
        for kind in s.upstreamErrors.keys.sorted() { out += "bff_upstream_errors_total{kind=\"\(kind)\"} \(s.upstreamErrors[kind]!)\n" }
        out += "# HELP bff_token_refreshes_total Access token refreshes by outcome.\n# TYPE bff_token_refreshes_total counter\n"
        for outcome in s.refreshes.keys.sorted() { out += "bff_token_refreshes_total{outcome=\"\(outcome)\"} \(s.refreshes[outcome]!)\n" }
        out += "# HELP bff_database_errors_total Requests failed by the database (unreachable, busy, refusing).\n# TYPE bff_database_errors_total counter\n"
        out += "bff_database_errors_total \(s.databaseErrors)\n"
        out += "# HELP bff_audit_pending_entries PHI access audit entries not yet in the database.\n# TYPE bff_audit_pending_entries gauge\n"
        out += "bff_audit_pending_entries \(audit.pending)\n"
        out += "# HELP bff_audit_written_entries_total PHI access audit entries written.\n# TYPE bff_audit_written_entries_total counter\n"
        out += "bff_audit_written_entries_total \(audit.written)\n"
        out += "# HELP bff_audit_write_failures_total Failed PHI access audit writes (their entries are kept and retried).\n"
        out += "# TYPE bff_audit_write_failures_total counter\nbff_audit_write_failures_total \(audit.failedWrites)\n"
        out += "# HELP bff_audit_unsettled_entries Of the pending entries, those of a write whose commit got no answer (they may be stored; the database is asked before they are sent again).\n"
        out += "# TYPE bff_audit_unsettled_entries gauge\nbff_audit_unsettled_entries \(audit.unsettledEntries)\n"
        if let activeSessions {
            out += "# HELP bff_active_sessions Unexpired sessions.\n# TYPE bff_active_sessions gauge\nbff_active_sessions \(activeSessions)\n"
        }
        if let pool {
            out += "# HELP bff_db_pool_connections Database pool connections by state.\n# TYPE bff_db_pool_connections gauge\n"
            out += "bff_db_pool_connections{state=\"open\"} \(pool.open)\nbff_db_pool_connections{state=\"in_use\"} \(pool.inUse)\n"
        }
        return out
    }

    static func histogram(_ name: String, _ h: Histogram, labels: String?) -> String {
        let prefix = labels.map { $0 + "," } ?? ""
        var out = ""
        for (i, bound) in Histogram.bounds.enumerated() { out += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(h.buckets[i])\n" }
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(h.count)\n"
        let suffix = labels.map { "{\($0)}" } ?? ""
        out += "\(name)_sum\(suffix) \(h.sum)\n\(name)_count\(suffix) \(h.count)\n"
        return out
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}

/// Records every request in `Metrics`.
struct MetricsMiddleware: Middleware {
    let recorder: Metrics.RequestRecorder

    func prepare(_ request: inout Request) throws -> Response? {
        if request.startedAt == nil { request.startedAt = ContinuousClock.now }
        return nil
    }

    func finish(_ request: Request, _ response: inout Response) {
        let elapsed = request.startedAt.map { ContinuousClock.now - $0 } ?? .zero
        recorder.record(route: request.route ?? "unmatched", status: response.status.code, seconds: elapsed.seconds)
    }

    /// Requests refused before they could be routed count under the route `unparsed`, with
    /// no time to answer: how long a refused request took to arrive (a timeout's 10 s) is not
    /// the server's answering time, and a 0 would pull the route's quantiles down.
    func refused(_ status: HTTPStatus, reason: String, peer: String, logger: Logger) {
        recorder.record(route: "unparsed", status: status.code, seconds: nil)
    }
}
