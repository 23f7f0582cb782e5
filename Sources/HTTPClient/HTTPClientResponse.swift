import HTTPCore

/// A response with its whole body (from `HTTPClient.execute`).
public struct HTTPClientResponse: Sendable {
    /// The final status code (interim 1xx responses are skipped).
    public var status: Int
    /// The fields of the final response head, in order, as received.
    public var headers: ResponseFields
    public var body: [UInt8]

    public init(status: Int, headers: ResponseFields, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers.firstValue(named: name) }
}
