/// A response whose body arrives as it is received (from `HTTPClient.stream`).
public struct HTTPClientStreamingResponse: Sendable {
    /// The final status code (interim 1xx responses are skipped).
    public var status: Int
    /// The fields of the final response head, in order, as received.
    public var headers: ResponseFields
    /// The body's length as the framing decided it: set only when `Content-Length` frames
    /// the body. Nil for a chunked body (whatever `Content-Length` came with it: RFC 9112
    /// §6.3), one delimited by the close, and a response without a body (to HEAD, 204, 304).
    public var declaredLength: Int?
    /// The body ends where the connection does (no length, not chunked): a close with no
    /// error (a FIN; with TLS, after close_notify) ends it as complete, whether the upstream
    /// finished it or stopped early. A proxy passing it on should not give it an end it lacks.
    public var endsAtClose = false
    /// The body in pieces. It ends with an error if the upstream stopped early: a truncated
    /// body never ends cleanly.
    public var body: HTTPBodyStream

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers.firstValue(named: name) }
}
