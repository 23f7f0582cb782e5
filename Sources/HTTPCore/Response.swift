/// Writes the parts of a streamed response body. `write` suspends while the connection's
/// send buffer is full, so a producer never holds more than a bounded amount in memory.
public protocol BodyWriter: Sendable {
    func write(_ bytes: [UInt8]) async throws
}

/// A response body: bytes in memory, or a producer that streams them.
public enum ResponseBody: Sendable {
    case bytes([UInt8])
    /// A streamed body. With `length`, it is sent with `Content-Length` and must produce exactly
    /// that many bytes; without, it is sent chunked (HTTP/1.1) or close-delimited (HTTP/1.0).
    /// If the producer throws, the connection is closed without completing the message, so
    /// the client never mistakes a truncated body for a complete one. The producer runs
    /// exactly once: if the connection has gone before the response could be sent, with a
    /// writer whose every write throws, so that its error path lets go of what it holds.
    case stream(length: Int?, producer: @Sendable (any BodyWriter) async throws -> Void)

    public static let empty = ResponseBody.bytes([])
}

/// An HTTP response.
public struct Response: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: ResponseBody
    /// A streamed body without a length goes out delimited by the connection's close, even
    /// to an HTTP/1.1 client (no chunked framing, which would give it a definite end): for a
    /// body passed on whose own end only a close marks, complete or cut short alike.
    public var endsAtClose = false

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: ResponseBody = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with `body` and its `Content-Type`.
    public init(status: HTTPStatus = .ok, contentType: String, body: [UInt8], headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.headers = headers
        self.headers.replace("Content-Type", contentType)
        self.body = .bytes(body)
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: HTTPStatus = .ok) -> Response {
        Response(status: status, contentType: "text/plain; charset=utf-8", body: Array(text.utf8))
    }

    /// An `application/json` response from already-encoded JSON.
    public static func json(_ json: [UInt8], status: HTTPStatus = .ok) -> Response {
        Response(status: status, contentType: "application/json", body: json)
    }

    /// A redirect with `Location`.
    public static func redirect(to location: String, status: HTTPStatus = .found) -> Response {
        var r = Response(status: status)
        r.headers.replace("Location", location)
        return r
    }
}
