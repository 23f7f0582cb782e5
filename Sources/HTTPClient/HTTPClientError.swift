/// Why an outbound request failed.
///
/// `description` names the kind of failure in generic words; `debugDescription` adds
/// libcurl's result code and detailed text. Neither ever holds the request URL (its query
/// may carry a token) or a header value.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: String, Sendable {
        case connectFailed = "connect failed"
        case timedOut = "timed out"
        case tls = "TLS failure"
        case malformedResponse = "malformed response"
        case truncated = "response truncated"
        case bodyTooLarge = "response body too large"
        case invalidRequest = "invalid request"
        case cancelled = "cancelled"
        case other = "failed"
    }

    private let code: Code
    /// libcurl's result code (`CURLcode`), or 0 when the failure was not libcurl's.
    public let curlCode: Int
    /// A short, generic explanation.
    public let message: String
    /// libcurl's detailed error text (it may name the host, never the URL's query).
    private let detail: String

    private init(_ code: Code, _ message: String, curlCode: Int = 0, detail: String = "") {
        self.code = code
        self.message = message
        self.curlCode = curlCode
        self.detail = detail
    }

    /// No connection could be made (refused, unreachable, or the name did not resolve).
    public static func connectFailed(_ message: String = "could not connect") -> Self { Self(.connectFailed, message) }
    /// The connect timeout passed, or no data arrived within the read timeout.
    public static func timedOut(_ message: String = "no data within the timeout") -> Self { Self(.timedOut, message) }
    /// The TLS handshake or certificate verification failed.
    public static func tls(_ message: String = "TLS handshake or verification failed") -> Self { Self(.tls, message) }
    /// The upstream's answer was not valid HTTP, or there was none.
    public static func malformedResponse(_ message: String = "malformed or empty response") -> Self { Self(.malformedResponse, message) }
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

    /// The same error with libcurl's result code and detailed text attached.
    func withCurl(code: Int, detail: String) -> Self { Self(self.code, message, curlCode: code, detail: detail) }

    /// The kind of failure in a few generic words ("TLS failure", "timed out", "connect
    /// failed", ...), safe to show a client.
    public var failure: String { code.rawValue }

    public var isTimeout: Bool { code == .timedOut }
    public var isConnectFailure: Bool { code == .connectFailed }
    public var isTLSFailure: Bool { code == .tls }
    public var isTruncated: Bool { code == .truncated }
    public var isBodyTooLarge: Bool { code == .bodyTooLarge }
    public var isInvalidRequest: Bool { code == .invalidRequest }
    public var isCancelled: Bool { code == .cancelled }

    public var description: String { "outbound HTTP request \(code.rawValue): \(message)" }

    public var debugDescription: String {
        var text = "HTTPClientError(\(code.rawValue): \(message)"
        if curlCode != 0 { text += ", curl code \(curlCode)" }
        if !detail.isEmpty { text += ", \(detail)" }
        return text + ")"
    }
}
