import HTTPCore

/// A response with its whole body (from `HTTPClient.execute`).
public struct HTTPClientResponse: Sendable {
    /// The final status code (interim 1xx responses are skipped).
    public var status: Int
    /// The fields of the final response head, in order, as received.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers.firstValue(named: name) }
}

extension [(name: String, value: String)] {
    /// The first value of field `name`, compared case-insensitively (ASCII).
    func firstValue(named name: String) -> String? {
        // Names of another length are passed over here, without a call (and the retains of
        // its arguments) for each.
        let length = name.utf8.count
        for index in indices where self[index].name.utf8.count == length && self[index].name.equalsIgnoringASCIICase(name) {
            return self[index].value
        }
        return nil
    }
}
