import Foundation
import Synchronization
import HTTPCore

/// smart-bff's outbound HTTP client: HTTP/1.1 of our own on the event loops, TLS through
/// OpenSSL (libssl).
///
/// - HTTP/1.1 only, over plain TCP or TLS 1.2+ (ALPN offers http/1.1 alone).
/// - Connections to each upstream are pooled and kept alive between requests; a kept-alive
///   connection that the upstream closed just as it was reused is replaced, and an
///   idempotent request sent again on a fresh one, once.
/// - TLS certificates (against the system CA store, or `Configuration.caCertificatesFile`)
///   and host names (or IP addresses) are verified unless `Configuration.verifyTLS` is off;
///   the host name goes in SNI.
/// - Redirects are not followed: a 3xx comes back to the caller as it is.
/// - Bodies come as sent: requests carry `Accept-Encoding: identity` unless the caller sets
///   the field, and nothing is decoded; a transfer coding other than chunked is refused.
/// - Only `http` and `https` URLs are accepted (`UpstreamURL` says exactly which).
/// - A body that ends before its declared end (Content-Length not reached, chunked
///   encoding not terminated, a close-delimited body over TLS without close_notify) is an
///   error (`isTruncated`), never a short success. Responses are parsed strictly
///   (`ResponseParser`).
/// - Blocking work never runs on the Swift concurrency pool or on an event loop: sockets are
///   non-blocking in the loop's epoll set, and host names resolve on threads of their own
///   (`Resolver`). A request made on one of the server's I/O threads (a request handler)
///   runs on that thread and never leaves it; any other caller's runs on the client's own
///   thread.
/// - Egress proxies as `ProxySettings` describes (the standard `https_proxy`, `http_proxy`
///   and `no_proxy` variables, read when the client is made).
/// - Never raises SIGPIPE.
///
/// Create one client and share it: each has its own thread and connection pools (one per
/// event loop it runs on).
/// (URLSession on Linux reached only about 4k requests/s on our machines, and libcurl cost
/// a quarter of the proxy's CPU: BENCHMARKS.md.)
public final class HTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// Time to set up a connection: name lookup, TCP, proxy tunnel and TLS. Default 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// Time allowed without receiving anything from the upstream, for the response head
        /// and between pieces of the body. Time a streaming consumer spends behind (with
        /// reading paused) does not count: `stallTimeout` bounds that. Default 30 s.
        public var readTimeout: Duration = .seconds(30)
        /// Time a streaming consumer that is behind may go without taking a piece. Once
        /// 1 MiB of body waits for it, reading from the upstream pauses (see
        /// `HTTPBodyStream`) until it has taken most of that (¾ MiB). If, while paused, it
        /// takes nothing for this long (counted from the pause or its last piece taken), the
        /// transfer fails as stalled (`isStalled`: what was still buffered is dropped, its
        /// next read throws, and `HTTPBodyStream.failure` tells at once) and the connection closes. A paused transfer holds one
        /// of the host's `maxConnectionsPerHost`: without this bound, one reader that
        /// stopped reading could hold them all for hours. A reader that takes a piece at
        /// least this often is never cut off, however slow. Default 120 s, four times the
        /// default read timeout.
        public var stallTimeout: Duration = .seconds(120)
        /// Time a whole buffered request (`execute`) may take, from the call to the last byte
        /// of the body, waiting for a connection included. An upstream that trickles its answer,
        /// a byte now and then within the read timeout, cannot hold the caller (a sign-in, a
        /// token revocation) longer. A streamed response (`stream`) has this long for its head,
        /// and for its body too once the consumer asks for it whole (`HTTPBodyStream.collect`);
        /// a body streamed on may take longer, bounded by the read and stall timeouts. Default 60 s.
        public var totalTimeout: Duration = .seconds(60)
        /// Connections at most per upstream host; further requests wait for one. Each event
        /// loop the client runs on keeps its own connections: a server's I/O threads share
        /// this number evenly (at least one each), and the client's own thread (callers
        /// outside request handlers) has as many again. Default 64.
        public var maxConnectionsPerHost = 64
        /// Of those, connections that requests of any one `HTTPClientRequest.share` never
        /// take: they stay for other shares' requests (and requests of none), so that one
        /// user's many slow requests cannot take every connection to a host from all the
        /// others. Divided among event loops like the host limit (at least one each, on a
        /// loop with two or more connections; 0: none); a share's further requests wait while
        /// others go ahead in their place. Default 16: with the default 64 on 2 loops, one
        /// share holds at most 48.
        public var reservedConnectionsPerHost = 16
        /// How long a kept-alive connection may have been idle for a request that is never
        /// sent again (a POST, such as a token request) to go on it; else it goes on a new one.
        /// A server with a 5 s keep-alive timeout (Apache's and Node's default) may be closing
        /// an older one just then, and such a request would fail. Default 2 s.
        public var maxIdleForUnrepeatable: Duration = .seconds(2)
        /// Largest body `execute` accepts. Default 16 MiB.
        public var maxResponseBodyBytes = 16 << 20
        /// Verify TLS certificates and host names. Default on.
        public var verifyTLS = true
        /// A PEM file of the CA certificates to trust, in place of the system's, for
        /// upstreams under a private CA. Default nil: the system's.
        public var caCertificatesFile: String?
        /// The proxy to go through (`http://host:port`); https upstreams are reached through
        /// a `CONNECT` tunnel, TLS verified end to end. Default nil: the standard environment
        /// variables decide (`ProxySettings`).
        public var proxy: String?

        public init() {}
    }

    public let configuration: Configuration
    /// The client's I/O thread, for callers that are not on an event loop.
    private let loop: EventLoop
    private let own: ClientLoop
    private let shared: ClientShared
    /// The client on other event loops (the server's I/O threads), by loop; each is made on
    /// its loop's thread by the first request from there.
    private let loopClients = Mutex<[ObjectIdentifier: ClientLoop]>([:])

    public convenience init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, resolver: Resolver())
    }

    /// A client whose host names resolve through `resolver` (tests give it answers).
    init(configuration: Configuration, resolver: Resolver) {
        self.configuration = configuration
        shared = ClientShared(tls: TLSContext(verify: configuration.verifyTLS, caCertificatesFile: configuration.caCertificatesFile),
                              resolver: resolver,
                              proxies: ProxySettings(configured: configuration.proxy, environment: ProcessInfo.processInfo.environment))
        do {
            loop = try EventLoop(application: nil)
        } catch {
            fatalError("HTTPClient: cannot create its I/O thread: \(error)")
        }
        own = ClientLoop(loop: loop, configuration: configuration, groupSize: 1, shared: shared) // before the loop starts
        loop.start(name: "http-client")
    }

    /// Where requests go (direct, or through which proxy), without credentials, for logs.
    public var egressSummary: String { shared.proxies.summary }
    /// Why the egress proxy setting cannot be used, if it cannot (its requests all fail).
    public var egressProblem: String? { shared.proxies.problem }

    /// Stops the client's thread; requests still in flight fail with `isCancelled`.
    deinit {
        let (loop, own) = (self.loop, self.own)
        loop.execute {
            own.close()
            loop.stop()
        }
        for other in loopClients.withLock({ Array($0.values) }) {
            other.loop.execute { other.close() }
        }
    }

    /// Sends `request` and returns the response with its whole body (at most
    /// `maxResponseBodyBytes`). Cancelling the task cancels the request.
    public func execute(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        try await send(request, streaming: false) { .buffered($0) }
    }

    /// Sends `request` and returns once the final response head has arrived (at the end of
    /// the read that completed it, so a small response comes with its body); the body
    /// follows through `response.body` (see `HTTPBodyStream` for backpressure and how a
    /// truncated body ends). Cancelling the task before the head arrives cancels the request;
    /// afterwards, cancel through the body stream (or drop it).
    public func stream(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientStreamingResponse {
        try await send(request, streaming: true) { .streaming($0) }
    }

    /// Submits an exchange whose result `delivery` routes to this call; cancelling the task
    /// cancels the exchange.
    private func send<Result>(_ request: HTTPClientRequest, streaming: Bool,
                              delivery: @escaping (CheckedContinuation<Swift.Result<Result, HTTPClientError>, Never>) -> Exchange.Delivery)
        async throws(HTTPClientError) -> Result {
        let client = callersClient()
        let exchange = try client.makeExchange(request, streaming: streaming)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                exchange.delivery = delivery(continuation)
                client.submit(exchange)
            }
        } onCancel: {
            client.cancel(exchange)
        }
        return try result.get()
    }

    /// The client on the event loop the caller runs on, made on first use; the client's own
    /// for callers elsewhere. A request so stays on its handler's thread: no hand-over to
    /// another thread and back, and no wake-ups between them.
    private func callersClient() -> ClientLoop {
        guard let current = EventLoop.current, current !== loop else { return own }
        let key = ObjectIdentifier(current)
        if let existing = loopClients.withLock({ $0[key] }) { return existing }
        // Only this loop's thread makes its client, so no other can have added one meanwhile.
        let made = ClientLoop(loop: current, configuration: configuration, groupSize: current.groupSize, shared: shared)
        current.whenStopped { [weak self, weak made] in // its pooled connections go with the loop
            made?.close()
            self?.loopClients.withLock { $0[key] = nil } // and the loop itself can go
        }
        loopClients.withLock { $0[key] = made }
        return made
    }
}
