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
    /// Whose request this is (a user's session, say), for a fair share of a host's
    /// connections: see `HTTPClient.Configuration.reservedConnectionsPerHost`. Nil: no share.
    public var share: String?
    /// For `execute`: the most body bytes this answer may have, below the client's own
    /// `maxResponseBodyBytes` (a token answer needs far less than a CapabilityStatement).
    public var maxBodyBytes: Int?

    public init(method: String = "GET", url: String, headers: [(String, String)] = [], body: [UInt8]? = nil, share: String? = nil,
                maxBodyBytes: Int? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.share = share
        self.maxBodyBytes = maxBodyBytes
    }
}

extension HTTPClientRequest {
    /// Refuses what would put something other than the caller's fields on the wire
    /// (request splitting through CR/LF, a method that is not a token).
    func validate() throws(HTTPClientError) {
        guard !method.isEmpty, ByteClass.token.containsAll(method) else {
            throw .invalidRequest("the method is not an HTTP token")
        }
        for (name, value) in headers {
            guard !name.isEmpty, ByteClass.token.containsAll(name) else {
                throw .invalidRequest("a header name is not an HTTP token")
            }
            var value = value // withUTF8 is mutating; a native string is not copied
            guard !value.withUTF8({ $0.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 } }) else {
                throw .invalidRequest("a header value contains CR, LF or NUL")
            }
            if let own = HTTPClientRequest.clientsOwnField(name) { throw .invalidRequest("the client sets \(own) itself") }
        }
    }

    /// `Content-Length`, `Transfer-Encoding` or `Connection` if `name` is that field (in any case).
    private static func clientsOwnField(_ name: String) -> String? {
        switch name.utf8.count {
        case 14 where name.equalsIgnoringASCIICase("Content-Length"): "Content-Length"
        case 17 where name.equalsIgnoringASCIICase("Transfer-Encoding"): "Transfer-Encoding"
        case 10 where name.equalsIgnoringASCIICase("Connection"): "Connection"
        default: nil
        }
    }

    /// The fields the client adds unless the caller gave them.
    private struct DefaultFields {
        var host = true, userAgent = true, accept = true, acceptEncoding = true

        /// The caller gave field `name`: its default does not go.
        mutating func given(_ name: String) {
            switch name.utf8.count {
            case 4 where name.equalsIgnoringASCIICase("Host"): host = false
            case 10 where name.equalsIgnoringASCIICase("User-Agent"): userAgent = false
            case 6 where name.equalsIgnoringASCIICase("Accept"): accept = false
            case 15 where name.equalsIgnoringASCIICase("Accept-Encoding"): acceptEncoding = false
            default: break
            }
        }
    }

    /// The request as it goes on the wire to `url`'s server, or through a plain-http proxy
    /// (`absoluteForm`, with the proxy's `Proxy-Authorization` value if it needs one).
    /// Written straight into one buffer of the right size: one pass over the caller's fields
    /// finds which defaults go and how long they are.
    func encoded(for url: UpstreamURL, absoluteForm: Bool = false, proxyAuthorization: String? = nil) -> [UInt8] {
        var defaults = DefaultFields()
        var size = 192 + url.targetCount + (proxyAuthorization?.utf8.count ?? 0) + (body?.count ?? 0)
        for (name, value) in headers {
            defaults.given(name)
            size += name.utf8.count + value.utf8.count + 4
        }
        var out: [UInt8] = []
        out.reserveCapacity(size)
        out.append(utf8: method)
        out.append(literal: " ")
        if absoluteForm {
            out.append(literal: url.isSecure ? "https://" : "http://")
            url.appendAuthority(to: &out)
        }
        url.appendTarget(to: &out)
        out.append(literal: " HTTP/1.1\r\n")
        if defaults.host {
            out.append(literal: "Host: ")
            url.appendAuthority(to: &out)
            out.append(literal: "\r\n")
        }
        if defaults.userAgent { out.append(literal: "User-Agent: smart-bff\r\n") }
        if defaults.accept { out.append(literal: "Accept: */*\r\n") }
        // Without Accept-Encoding a server may compress (RFC 9110 §12.5.3), and nothing here
        // decodes: ask for the body as it is, unless the caller chose otherwise.
        if defaults.acceptEncoding { out.append(literal: "Accept-Encoding: identity\r\n") }
        if let proxyAuthorization {
            out.append(literal: "Proxy-Authorization: ")
            out.append(utf8: proxyAuthorization)
            out.append(literal: "\r\n")
        }
        for (name, value) in headers {
            out.append(utf8: name)
            out.append(literal: ": ")
            out.append(utf8: value)
            out.append(literal: "\r\n")
        }
        if let body {
            out.append(literal: "Content-Length: ")
            out.append(decimal: body.count)
            out.append(literal: "\r\n")
        } else if method == "POST" || method == "PUT" || method == "PATCH" {
            out.append(literal: "Content-Length: 0\r\n") // servers may answer 411 without it
        }
        out.append(literal: "\r\n")
        if let body { out.append(contentsOf: body) }
        return out
    }
}

extension [UInt8] {
    /// Appends the UTF-8 of `text` in one copy (the generic append of a UTF8View showed in
    /// the proxy's profile).
    mutating func append(utf8 text: String) {
        var text = text // withUTF8 is mutating; a native string is not copied
        text.withUTF8 { append(contentsOf: $0) }
    }

    /// Appends `value` (not negative) in decimal digits, without making a string of it.
    mutating func append(decimal value: Int) {
        var scale = 1
        while scale <= value / 10 { scale *= 10 }
        while scale > 0 {
            append(UInt8(ascii: "0") + UInt8(value / scale % 10))
            scale /= 10
        }
    }

    /// Appends the bytes of a literal.
    mutating func append(literal text: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}
