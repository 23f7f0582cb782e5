import JSON
/// An error that maps to an RFC 9457 problem response (`application/problem+json`).
/// `detail` is shown to clients: it must never contain a token, secret or cookie.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    public var status: HTTPStatus
    /// A URI identifying the problem type (`about:blank` when the status says it all).
    public var type: String
    public var title: String
    public var detail: String?
    /// Extra headers, e.g. `Allow` on 405 or `WWW-Authenticate` on 401.
    public var headers: HTTPHeaders

    public init(_ status: HTTPStatus, type: String = "about:blank", title: String? = nil,
                detail: String? = nil, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.type = type
        self.title = title ?? status.reason
        self.detail = detail
        self.headers = headers
    }

    public var description: String { "HTTPError(\(status.code) \(title)\(detail.map { ": " + $0 } ?? ""))" }

    /// The problem+json response for this error.
    public var response: Response {
        var fields: [(String, JSONValue)] = [
            ("type", .string(type)), ("title", .string(title)), ("status", .number(Double(status.code))),
        ]
        if let detail { fields.append(("detail", .string(detail))) }
        var r = Response(status: status, contentType: "application/problem+json",
                         body: Array(JSONValue.object(fields).serialized().utf8), headers: headers)
        r.headers.replace("Cache-Control", "no-store")
        return r
    }
}
