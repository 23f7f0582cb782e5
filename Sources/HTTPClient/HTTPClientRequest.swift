/// An outbound request.
///
/// `headers` are sent as given, in order, after validation: a name must be an HTTP token
/// and a value must not contain CR, LF or NUL, otherwise the request fails with
/// `HTTPClientError.invalidRequest` before anything is sent. The client adds `Host`,
/// `User-Agent: smart-bff`, `Accept: */*` (unless given) and, with a body,
/// `Content-Length`.
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

extension HTTPClientRequest {
    /// Refuses what would put something other than the caller's fields on the wire
    /// (request splitting through CR/LF, a method that is not a token).
    func validate() throws(HTTPClientError) {
        guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else {
            throw .invalidRequest("the method is not an HTTP token")
        }
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw .invalidRequest("a header name is not an HTTP token")
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw .invalidRequest("a header value contains CR, LF or NUL")
            }
        }
    }
}

/// RFC 9110 tchar.
private func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}
