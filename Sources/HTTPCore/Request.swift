import Logging

/// A parsed HTTP request, as handlers see it.
public struct Request: Sendable {
    /// The method token, exactly as sent (methods are case-sensitive).
    public var method: String
    /// The request-target as sent (origin-form, or the path and query of an accepted absolute-form).
    public var target: String
    /// The path part of the target, still percent-encoded.
    public var path: String
    /// The query part of the target without `?`, still percent-encoded; nil when absent.
    public var query: String?
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Values bound by the route pattern (`:name` segments and the `*` tail as `"*"`).
    public var pathParameters: [String: String] = [:]
    /// A unique id for this request, also sent back as `X-Request-ID`.
    public var id: String = ""
    /// The application's logger; `logger` adds this request's metadata to it.
    public var baseLogger: Logger
    /// A logger carrying this request's metadata (`bff.request.id`). Built on use, so
    /// requests that never log do not pay for it.
    public var logger: Logger {
        var l = baseLogger
        l[metadataKey: "bff.request.id"] = .string(id)
        return l
    }
    /// The peer address, for logs.
    public var remoteAddress: String = ""
    /// The matched route pattern (e.g. `/fhir/*`), for logs and metrics.
    public var route: String?
    /// When the application started on this request.
    public var startedAt: ContinuousClock.Instant?

    /// The logger of requests made without one (made once: a `Logger(label:)` per request
    /// took the logging system's lock every time).
    public static let defaultLogger = Logger(label: "smart-bff.http")

    public init(method: String, target: String, version: HTTPVersion = .http11,
                headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
                logger: Logger = Request.defaultLogger) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.baseLogger = logger
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            path = String(target[..<q])
            query = String(target[target.utf8.index(after: q)...])
        } else {
            path = target
            query = nil
        }
    }

    /// The query's `name=value` pairs, percent-decoded (`+` as space), in order.
    /// Pairs that do not decode as UTF-8 are dropped.
    public var queryItems: [(name: String, value: String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&", omittingEmptySubsequences: true).compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = PercentEncoding.decodeFormComponent(parts[0]) else { return nil }
            let value = parts.count > 1 ? PercentEncoding.decodeFormComponent(parts[1]) : ""
            guard let value else { return nil }
            return (name: name, value: value)
        }
    }

    /// The first value of the query parameter `name`.
    public func queryParameter(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// Every value of the query parameter `name`.
    public func queryParameters(_ name: String) -> [String] {
        queryItems.filter { $0.name == name }.map(\.value)
    }

    /// The value of cookie `name` from the `Cookie` header fields (the first pair with that
    /// exact name; spaces and tabs around pairs are ignored).
    public func cookie(_ name: String) -> String? {
        var name = name // withUTF8 is mutating; a native string is not copied
        return name.withUTF8 { wanted in
            var found: String?
            forEachCookie { pairName, value in
                guard pairName.count == wanted.count, pairName.elementsEqual(wanted) else { return true }
                found = String(decoding: value, as: UTF8.self)
                return false
            }
            return found
        }
    }

    /// Every cookie whose name starts with `prefix`, in the order sent.
    public func cookies(prefixed prefix: String) -> [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = []
        forEachCookie { name, value in
            if name.starts(with: prefix.utf8) {
                pairs.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
            }
            return true
        }
        return pairs
    }

    /// Calls `visit` with the name and value bytes of each `name=value` pair of the `Cookie`
    /// header fields, in order, while it returns true.
    private func forEachCookie(_ visit: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Bool) {
        for field in headers where field.name.equalsIgnoringASCIICase("Cookie") {
            var value = field.value
            let goOn = value.withUTF8 { bytes in
                var i = 0
                let n = bytes.count
                while i < n {
                    while i < n, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 }
                    var end = i
                    while end < n, bytes[end] != UInt8(ascii: ";") { end += 1 }
                    var last = end
                    while last > i, bytes[last - 1] == UInt8(ascii: " ") || bytes[last - 1] == UInt8(ascii: "\t") { last -= 1 }
                    if let equals = bytes[i..<last].firstIndex(of: UInt8(ascii: "=")),
                       !visit(UnsafeBufferPointer(rebasing: bytes[i..<equals]), UnsafeBufferPointer(rebasing: bytes[(equals + 1)..<last])) {
                        return false
                    }
                    i = end + 1
                }
                return true
            }
            if !goOn { return }
        }
    }
}
