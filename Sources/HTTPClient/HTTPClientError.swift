/// Why an outbound request failed.
///
/// `description` and `debugDescription` give the kind of failure and what happened
/// (`message`: OpenSSL's or the system's words; it may name the host and port). Neither
/// ever holds the request's path or query (they may carry a token) or a header value.
/// `failure` is the kind alone, safe to show a client.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: String, Sendable {
        case connectFailed = "connect failed"
        case timedOut = "timed out"
        case shareBusy = "share of connections busy"
        case stalled = "reader stalled"
        case tls = "TLS failure"
        case malformedResponse = "malformed response"
        case closedWithoutAnswer = "closed without an answer"
        case truncated = "response truncated"
        case bodyTooLarge = "response body too large"
        case invalidRequest = "invalid request"
        case cancelled = "cancelled"
        case other = "failed"
    }

    private let code: Code
    /// What happened, in a few words (it may name the host, never the URL's path or query).
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// No connection could be made (refused, unreachable, or the name did not resolve).
    public static func connectFailed(_ message: String = "could not connect") -> Self { Self(.connectFailed, message) }
    /// The connect timeout passed, or no data arrived within the read timeout.
    public static func timedOut(_ message: String = "no data within the timeout") -> Self { Self(.timedOut, message) }
    /// The request waited for a connection past its connect and read timeouts while its
    /// share's own requests held every connection the share may (see
    /// `HTTPClient.Configuration.reservedConnectionsPerHost`): nothing was sent; the caller's
    /// share kept it waiting, not the upstream.
    public static func shareBusy(_ message: String = "every connection this request's share may hold stayed busy") -> Self {
        Self(.shareBusy, message)
    }
    /// The response's reader was behind and took nothing for the stall timeout: its transfer
    /// was given up (the reader's doing, not the upstream's).
    public static func stalled(_ message: String = "the response's reader took nothing for longer than the stall timeout") -> Self {
        Self(.stalled, message)
    }
    /// The TLS handshake or certificate verification failed.
    public static func tls(_ message: String = "TLS handshake or verification failed") -> Self { Self(.tls, message) }
    /// The upstream's answer was not valid HTTP (or, unfinished, could not be read as such).
    public static func malformedResponse(_ message: String = "malformed or empty response") -> Self { Self(.malformedResponse, message) }
    /// The upstream closed the connection without sending a byte: no answer, rather than a
    /// wrong one (a balancer with no backend, a server that dropped the request).
    public static func closedWithoutAnswer(_ message: String) -> Self { Self(.closedWithoutAnswer, message) }
    /// The response ended before its declared end (Content-Length or chunked framing).
    public static func truncated(_ message: String = "response ended early") -> Self { Self(.truncated, message) }
    /// The body exceeded the limit (`Configuration.maxResponseBodyBytes` or `collect(limit:)`).
    public static func bodyTooLarge(_ message: String = "response body exceeds the limit") -> Self { Self(.bodyTooLarge, message) }
    /// The request could not be sent as given (bad method, header, URL or scheme).
    public static func invalidRequest(_ message: String) -> Self { Self(.invalidRequest, message) }
    /// The caller cancelled the request (task cancellation, `HTTPBodyStream.cancel()`), or the client shut down.
    public static func cancelled(_ message: String = "cancelled") -> Self { Self(.cancelled, message) }
    /// Any other failure.
    public static func other(_ message: String) -> Self { Self(.other, message) }

    /// The kind of failure in a few generic words ("TLS failure", "timed out", "connect
    /// failed", ...), safe to show a client.
    public var failure: String { code.rawValue }

    public var isTimeout: Bool { code == .timedOut }
    public var isStalled: Bool { code == .stalled }
    public var isShareBusy: Bool { code == .shareBusy }
    public var isConnectFailure: Bool { code == .connectFailed }
    public var isTLSFailure: Bool { code == .tls }
    public var isTruncated: Bool { code == .truncated }
    /// An answer that is not well-framed HTTP/1.1 (not a connection closed without one).
    public var isMalformed: Bool { code == .malformedResponse }
    public var isBodyTooLarge: Bool { code == .bodyTooLarge }
    public var isInvalidRequest: Bool { code == .invalidRequest }
    public var isCancelled: Bool { code == .cancelled }

    public var description: String { "outbound HTTP request \(code.rawValue): \(message)" }

    public var debugDescription: String { "HTTPClientError(\(code.rawValue): \(message))" }
}
