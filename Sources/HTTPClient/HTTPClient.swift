import Synchronization
import HTTPCore

/// smart-bff's outbound HTTP client, over libcurl.
///
/// - HTTP/1.1 only, over plain TCP or TLS (libcurl would otherwise speak HTTP/2 to servers
///   that offer it).
/// - Connections to each upstream are pooled and kept alive between requests.
/// - TLS certificates (against the system CA bundle, or `Configuration.caCertificatesFile`)
///   and host names are verified unless `Configuration.verifyTLS` is off.
/// - Redirects are not followed: a 3xx comes back to the caller as it is.
/// - Bodies come as sent: requests carry `Accept-Encoding: identity` unless the caller sets
///   the field, and nothing is decoded.
/// - Only `http` and `https` URLs are accepted.
/// - A body that ends before its declared end (Content-Length not reached, chunked
///   encoding not terminated) is an error (`isTruncated`), never a short success.
/// - Blocking work never runs on the Swift concurrency pool. Transfers run on event loops
///   through libcurl multi handles, with libcurl's sockets and timers in the loop's epoll
///   set (the multi-socket interface), so each wake-up touches only the sockets that are
///   ready. A request made on one of the server's I/O threads (a request handler) runs on
///   that thread's own multi handle and never leaves the thread; any other caller's runs
///   on the client's own thread.
///
/// libcurl honours the standard proxy environment variables (`https_proxy`, `no_proxy`, ...).
/// Plain sockets never raise SIGPIPE; over TLS the process should ignore SIGPIPE, as
/// smart-bff's main does.
///
/// Create one client and share it: each has its own thread and connection caches (one per
/// event loop it runs on).
/// (URLSession on Linux reached only about 4k requests/s on our machines.)
public final class HTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// Time to establish a connection, TCP and TLS. Default 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// Time allowed without receiving anything from the upstream, for the response head
        /// and between pieces of the body. Time a streaming consumer spends behind (with
        /// reading paused) does not count. Default 30 s.
        public var readTimeout: Duration = .seconds(30)
        /// Connections at most per upstream host; further requests wait for one. Each event
        /// loop the client runs on keeps its own connections: a server's I/O threads share
        /// this number evenly (at least one each), and the client's own thread (callers
        /// outside request handlers) has as many again. Default 64.
        public var maxConnectionsPerHost = 64
        /// Largest body `execute` accepts. Default 16 MiB.
        public var maxResponseBodyBytes = 16 << 20
        /// Verify TLS certificates and host names. Default on.
        public var verifyTLS = true
        /// A PEM file of the CA certificates to trust, in place of the system's (bundle and
        /// directory), for upstreams under a private CA. Default nil: the system's.
        public var caCertificatesFile: String?
        /// The proxy to go through (`http://host:port`); https upstreams are reached through
        /// a `CONNECT` tunnel, TLS verified end to end. Default nil: the standard environment
        /// variables (`https_proxy`, `http_proxy`, `no_proxy`) decide, as libcurl reads them.
        public var proxy: String?

        public init() {}
    }

    public let configuration: Configuration
    /// The client's I/O thread: an epoll set with libcurl's sockets and timers, for
    /// callers that are not on an event loop.
    private let loop: EventLoop
    private let multi: CurlMulti
    /// The multi handles on other event loops (the server's I/O threads), by loop; each is
    /// made on its loop's thread by the first request from there.
    private let loopMultis = Mutex<[ObjectIdentifier: CurlMulti]>([:])

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        do {
            loop = try EventLoop(application: nil)
        } catch {
            fatalError("HTTPClient: cannot create its I/O thread: \(error)")
        }
        multi = CurlMulti(loop: loop, configuration: configuration) // before the loop starts
        loop.start(name: "http-client")
    }

    /// Stops the client's thread; requests still in flight fail with `isCancelled`.
    deinit {
        let (loop, multi) = (self.loop, self.multi)
        loop.execute {
            multi.close()
            loop.stop()
        }
        for other in loopMultis.withLock({ Array($0.values) }) {
            other.loop.execute { other.close() }
        }
    }

    /// Sends `request` and returns the response with its whole body (at most
    /// `maxResponseBodyBytes`). Cancelling the task cancels the request.
    public func execute(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        try await send(request, streaming: false) { .buffered($0) }
    }

    /// Sends `request` and returns once the final response head has arrived (at the end of
    /// libcurl's action that read it, so a small response comes with its body); the body
    /// follows through `response.body` (see `HTTPBodyStream` for backpressure and how a
    /// truncated body ends). Cancelling the task before the head arrives cancels the request;
    /// afterwards, cancel through the body stream (or drop it).
    public func stream(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientStreamingResponse {
        try await send(request, streaming: true) { .streaming($0) }
    }

    /// Submits a transfer whose result `delivery` routes to this call; cancelling the task
    /// cancels the transfer.
    private func send<Result>(_ request: HTTPClientRequest, streaming: Bool,
                              delivery: @escaping (CheckedContinuation<Swift.Result<Result, HTTPClientError>, Never>) -> CurlTransfer.Delivery)
        async throws(HTTPClientError) -> Result {
        let multi = callersMulti()
        let transfer = try multi.makeTransfer(request, configuration: configuration, streaming: streaming)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.delivery = delivery(continuation)
                multi.submit(transfer)
            }
        } onCancel: {
            multi.cancel(transfer)
        }
        return try result.get()
    }

    /// The multi handle of the event loop the caller runs on, made on first use; the
    /// client's own for callers elsewhere. A request so stays on its handler's thread: no
    /// hand-over to another thread and back, and no wake-ups between them.
    private func callersMulti() -> CurlMulti {
        guard let current = EventLoop.current, current !== loop else { return multi }
        let key = ObjectIdentifier(current)
        if let existing = loopMultis.withLock({ $0[key] }) { return existing }
        // Only this loop's thread makes its handle, so no other can have added one meanwhile.
        var share = configuration
        share.maxConnectionsPerHost = max(1, configuration.maxConnectionsPerHost / current.groupSize)
        let made = CurlMulti(loop: current, configuration: share)
        current.whenStopped { [weak self] in // its cached connections go with the loop
            made.close()
            self?.loopMultis.withLock { $0[key] = nil } // and the loop itself can go
        }
        loopMultis.withLock { $0[key] = made }
        return made
    }
}
