import HTTPCore

/// An outbound request.
///
/// `headers` are sent as given, in order, after validation: a name must be an HTTP token
/// and a value must not contain CR, LF or NUL, and the framing fields (`Content-Length`,
/// `Transfer-Encoding`) and `Connection` are the client's own; otherwise the request fails
/// with `HTTPClientError.invalidRequest` before anything is sent. The client adds `Host`,
/// `User-Agent: smart-bff`, `Accept: */*` and `Accept-Encoding: identity` (each unless
/// given) and, with a body or for POST, PUT and PATCH, `Content-Length`.
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
            for own in ["Content-Length", "Transfer-Encoding", "Connection"] where name.equalsIgnoringASCIICase(own) {
                throw .invalidRequest("the client sets \(own) itself")
            }
        }
    }

    /// The request as it goes on the wire to `url`'s server, or through a plain-http proxy
    /// (`absoluteForm`, with the proxy's `Proxy-Authorization` value if it needs one).
    func encoded(for url: UpstreamURL, absoluteForm: Bool = false, proxyAuthorization: String? = nil) -> [UInt8] {
        func given(_ name: String) -> Bool { headers.contains { $0.0.equalsIgnoringASCIICase(name) } }
        var out: [UInt8] = []
        out.reserveCapacity(192 + headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 } + (body?.count ?? 0))
        func field(_ name: String, _ value: String) {
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        out.append(contentsOf: method.utf8)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: (absoluteForm ? url.absoluteTarget : url.target).utf8)
        out.append(contentsOf: " HTTP/1.1\r\n".utf8)
        if !given("Host") { field("Host", url.authority) }
        if !given("User-Agent") { field("User-Agent", "smart-bff") }
        if !given("Accept") { field("Accept", "*/*") }
        // Without Accept-Encoding a server may compress (RFC 9110 §12.5.3), and nothing here
        // decodes: ask for the body as it is, unless the caller chose otherwise.
        if !given("Accept-Encoding") { field("Accept-Encoding", "identity") }
        if let proxyAuthorization { field("Proxy-Authorization", proxyAuthorization) }
        for (name, value) in headers { field(name, value) }
        if let body {
            field("Content-Length", String(body.count))
        } else if method == "POST" || method == "PUT" || method == "PATCH" {
            field("Content-Length", "0") // servers may answer 411 without it
        }
        out.append(contentsOf: "\r\n".utf8)
        if let body { out.append(contentsOf: body) }
        return out
    }
}
