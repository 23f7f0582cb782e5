import Synchronization

/// One request and its response, from submission to the end of the body.
///
/// The calling task builds it (the request validated and encoded) and sets `delivery`; from
/// `ClientLoop.submit` on, only the loop's thread touches it, except `cancelRequested`, which
/// is atomic. Hence `@unchecked Sendable`.
final class Exchange: @unchecked Sendable {
    enum Delivery {
        case buffered(CheckedContinuation<Result<HTTPClientResponse, HTTPClientError>, Never>)
        case streaming(CheckedContinuation<Result<HTTPClientStreamingResponse, HTTPClientError>, Never>)
    }

    let url: UpstreamURL
    let proxy: ProxySettings.Proxy?
    /// The connections that may carry this request: same scheme, host, port and proxy.
    let poolKey: PoolKey
    /// `HTTPClientRequest.share`.
    let share: String?
    /// The request as it goes on the wire.
    let bytes: [UInt8]
    /// Safe to send again on a fresh connection when a reused one turned out to be closed
    /// before any answer (RFC 9110 §9.2.2: idempotent methods).
    let isIdempotent: Bool
    private let method: String
    /// Where the result goes; nil once a streaming head has been handed over.
    var delivery: Delivery?
    /// Streaming only: the body's hand-over buffer.
    private(set) var bodyBuffer: BodyBuffer?
    /// Set by the caller's cancellation; the loop checks it when the exchange arrives.
    let cancelRequested = Atomic(false)

    // Loop thread only.
    private(set) var parser: ResponseParser
    /// When, on the loop's clock, the exchange times out unless something arrives first.
    var deadline = Double.infinity
    /// When, on the loop's clock, the answer must be complete (`HTTPClient.Configuration.totalTimeout`
    /// from the submission), whatever `deadline` says: `wholeDeadline` while the whole answer is
    /// awaited (buffered, or a streaming body being collected), until then the head's.
    var totalDeadline = Double.infinity
    /// The submission's time plus the total timeout.
    var wholeDeadline = Double.infinity
    /// Reading is paused because the consumer is behind; `deadline` is then the stall
    /// deadline (the consumer's, not the upstream's), which the sweep moves on while the
    /// consumer keeps taking pieces (`BodyBuffer.lastTake`).
    var paused = false
    /// Already sent again once on a fresh connection.
    var retried = false
    /// Counted in its pool's `busyByShare` (from leaving the queue until its connection is released).
    var holdsShare = false
    /// The connection carrying (or being opened for) the exchange.
    var connection: UpstreamConnection?
    private(set) var finished = false
    private var collected: [UInt8] = []
    private let maxBodyBytes: Int

    init(request: HTTPClientRequest, url: UpstreamURL, proxy: ProxySettings.Proxy?, maxBodyBytes: Int) {
        self.url = url
        self.proxy = proxy
        poolKey = PoolKey(isSecure: url.isSecure, host: url.host, port: url.port, proxyHost: proxy?.host, proxyPort: proxy?.port ?? 0)
        share = request.share
        bytes = request.encoded(for: url, absoluteForm: proxy != nil && !url.isSecure, proxyAuthorization: url.isSecure ? nil : proxy?.authorization)
        switch request.method {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE": isIdempotent = true
        default: isIdempotent = false
        }
        method = request.method
        parser = ResponseParser(requestMethod: request.method)
        self.maxBodyBytes = maxBodyBytes
    }

    /// Streaming only: the buffer the body goes through, with the requests it makes of `owner`.
    func makeBodyBuffer(owner: ClientLoop) {
        // Strong: the buffer lets these go when the exchange ends (see BodyBuffer.State).
        bodyBuffer = BodyBuffer(controls: BodyBuffer.Controls(client: owner, exchange: self))
    }

    /// Loop thread: starts the response over (the request goes again on another connection).
    func restart() {
        parser = ResponseParser(requestMethod: method)
    }

    /// Loop thread: bytes from the connection. Returns how many belong to this response (fewer
    /// than given only when it completed before their end).
    func receive(_ input: UnsafeRawBufferPointer) throws(HTTPClientError) -> Int {
        var tooLarge = false
        let used = try parser.feed(input) { piece in
            if let bodyBuffer {
                if !bodyBuffer.deliver(piece) { paused = true }
            } else if piece.count > maxBodyBytes - collected.count {
                tooLarge = true
            } else {
                collected.append(contentsOf: piece)
            }
        }
        if bodyBuffer == nil, let length = parser.declaredLength, length > maxBodyBytes { tooLarge = true }
        if tooLarge { throw .bodyTooLarge() }
        return used
    }

    /// Loop thread: the connection ended; completes a body delimited by its end.
    func finishAtEnd() throws(HTTPClientError) { try parser.finishAtEnd() }

    /// Loop thread: hands a complete streaming head to the caller (at the end of a read pass,
    /// so that a small response that arrived whole goes with its body, in one resumption).
    func deliverHeadIfReady() {
        guard let head = parser.head, case let .streaming(continuation)? = delivery, let bodyBuffer else { return }
        delivery = nil
        totalDeadline = .infinity // the body streams on, unless its consumer collects it (`ClientLoop.awaitWhole`)
        continuation.resume(returning: .success(
            HTTPClientStreamingResponse(status: head.status, headers: head.headers, declaredLength: parser.declaredLength,
                                        endsAtClose: parser.bodyEndsAtClose, body: HTTPBodyStream(buffer: bodyBuffer))))
    }

    /// Loop thread: ends the exchange once, resuming the caller or ending the body stream.
    func finish(_ outcome: Result<Void, HTTPClientError>) {
        guard !finished else { return }
        finished = true
        connection = nil
        if case .success = outcome { deliverHeadIfReady() }
        switch delivery {
        case let .buffered(continuation)?:
            let head = parser.head
            let body = collected
            continuation.resume(returning: outcome.map { HTTPClientResponse(status: head?.status ?? 0, headers: head?.headers ?? ResponseFields(), body: body) })
        case let .streaming(continuation)?:
            bodyBuffer?.finish(outcome.map { _ in () }) // lets its hold on this exchange go
            continuation.resume(returning: .failure(outcome.failure ?? .malformedResponse()))
        case nil:
            bodyBuffer?.finish(outcome)
        }
        delivery = nil
        collected = []
    }
}

/// What tells connections apart: the upstream's scheme, host and port, and the proxy.
struct PoolKey: Hashable, Sendable {
    let isSecure: Bool
    let host: String
    let port: Int
    let proxyHost: String?
    let proxyPort: Int
}

extension Result {
    /// The error, if this is a failure.
    var failure: Failure? {
        if case let .failure(error) = self { return error }
        return nil
    }
}
