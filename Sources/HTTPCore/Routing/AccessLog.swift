import Logging
import Foundation

/// Logs one line per request: request id, the peer's address, method, route pattern, status
/// and duration; and one per request refused while it was read (peer, status and reason).
/// The peer is the TCP peer: behind a load balancer, the balancer's address.
/// It never logs the query, headers or body, so no token, code, cookie or `Authorization`
/// value can reach the log through it.
public struct AccessLog: Middleware {
    public init() {}

    public func prepare(_ request: inout Request) throws -> Response? {
        request.startedAt = ContinuousClock.now
        return nil
    }

    public func finish(_ request: Request, _ response: inout Response) {
        guard request.baseLogger.logLevel <= .info else { return }
        let elapsed = request.startedAt.map { ContinuousClock.now - $0 } ?? .zero
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        request.logger.info("request", metadata: [
            "network.peer.address": .string(request.remoteAddress),
            "http.method": .string(AccessLog.shown(request.method)),
            "http.route": .string(request.route ?? "unmatched"),
            "http.status": .stringConvertible(response.status.code),
            "duration_ms": .string(String(format: "%.3f", ms)),
        ])
    }

    public func refused(_ status: HTTPStatus, reason: String, peer: String, logger: Logger) {
        logger.info("request refused", metadata: [
            "network.peer.address": .string(peer),
            "http.status": .stringConvertible(status.code),
            "error.detail": .string(reason),
        ])
    }

    /// Methods are tokens of any length: a client's 8 000-byte one is cut to 32 bytes.
    static func shown(_ method: String) -> String {
        method.utf8.count <= 32 ? method : String(decoding: method.utf8.prefix(32), as: UTF8.self) + "…"
    }
}
