/// A FHIR request as the sandbox received it, recorded so tests can check what a proxy
/// forwards (header hygiene: no cookies, the right bearer token, no hop-by-hop headers).
public struct ReceivedRequest: Sendable {
    /// The request method, e.g. `GET`.
    public let method: String
    /// The request target as sent: path and query, e.g. `/fhir/Patient/pat-1?_format=json`.
    public let target: String
    /// Every header field in the order received.
    public let headers: [(name: String, value: String)]

    /// The path and query (the request target).
    public var pathAndQuery: String { target }

    /// The first value of header `name` (case-insensitive), if present.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}
