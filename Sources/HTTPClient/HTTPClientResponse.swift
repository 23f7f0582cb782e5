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
    func firstValue(named name: String) -> String? {
        first { $0.name.utf8.elementsEqual(name.utf8, by: { asciiLowercased($0) == asciiLowercased($1) }) }?.value
    }
}

@inline(__always)
private func asciiLowercased(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
}
