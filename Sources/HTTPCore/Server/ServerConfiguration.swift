/// How the server listens and what it tolerates. Every default is safe for a public server.
public struct ServerConfiguration: Sendable {
    /// Address to bind (`127.0.0.1`, `0.0.0.0`, `::`).
    public var host = "127.0.0.1"
    /// Port to bind; 0 picks a free one (see `HTTPServer.port`).
    public var port = 8080
    /// Request size limits.
    public var limits = HTTPLimits()
    /// Seconds a client has to send a whole request head (and then its body) once it started:
    /// slow-loris protection; also how long a new connection may wait before its first byte.
    /// Default 10 s.
    public var requestReadTimeout: Double = 10
    /// Seconds an idle keep-alive connection (one that has served a request) stays open.
    /// Default 75 s (as nginx's): longer
    /// than the idle timeout of the load balancers in front (AWS ALB's is 60 s), so that the
    /// balancer closes an idle connection first; closed here at the same moment, a request
    /// it sends on it meanwhile is lost, and the client gets a 502.
    public var idleTimeout: Double = 75
    /// Seconds a response may stall with unsent bytes before the connection is dropped. Default 30 s.
    public var writeTimeout: Double = 30
    /// Requests served on one connection before it is closed. Default 10 000.
    public var maxRequestsPerConnection = 10_000
    /// Open connections at most; beyond it new ones get 503 and are closed. Default 10 000.
    public var maxConnections = 10_000
    /// I/O threads; default one per core.
    public var eventLoops = max(1, System.coreCount)

    public init() {}
}

import Foundation

enum System {
    static var coreCount: Int { ProcessInfo.processInfo.activeProcessorCount }
}
