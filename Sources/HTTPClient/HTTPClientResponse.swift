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
    /// The first value of field `name`, compared case-insensitively (ASCII). A plain loop
    /// over the bytes: the generic `first(where:)` over zipped UTF-8 views showed in profiles.
    func firstValue(named name: String) -> String? {
        var name = name
        return name.withUTF8 { wanted in
            for field in self where field.name.utf8.count == wanted.count {
                var fieldName = field.name
                let same = fieldName.withUTF8 { have in
                    for i in 0..<wanted.count where asciiLowercased(have[i]) != asciiLowercased(wanted[i]) { return false }
                    return true
                }
                if same { return field.value }
            }
            return nil
        }
    }
}

@inline(__always)
private func asciiLowercased(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
}
