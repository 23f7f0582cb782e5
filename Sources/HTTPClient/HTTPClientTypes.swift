/// An outbound request.
public struct HTTPClientRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]?

    public init(method: String = "GET", url: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// A response with its whole body.
public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A response whose body arrives as it is received.
public struct HTTPClientStreamingResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    /// The body in pieces. It ends with an error if the upstream stopped early (a truncated
    /// body never ends cleanly).
    public var body: HTTPBodyStream

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Why an outbound request failed. Never carries the URL's query or any header value.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    enum Code: Sendable { case connectFailed, timedOut, tls, malformedResponse, bodyTooLarge, truncated, cancelled, other }

    let code: Code
    /// libcurl's result code, when libcurl reported the failure.
    public let curlCode: Int
    public let message: String

    init(_ code: Code, curlCode: Int = 0, _ message: String) {
        self.code = code
        self.curlCode = curlCode
        self.message = message
    }

    public var isTimeout: Bool { code == .timedOut }
    public var isConnectFailure: Bool { code == .connectFailed }
    /// The response ended before its declared end.
    public var isTruncated: Bool { code == .truncated }

    public var description: String { "outbound HTTP failed: \(message)" }
}
