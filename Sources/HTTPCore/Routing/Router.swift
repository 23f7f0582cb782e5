/// An asynchronous request handler. It may suspend (database, upstream calls).
public typealias Handler = @Sendable (Request) async throws -> Response

/// A handler that answers at once, on the connection's I/O thread. It must never block or do
/// I/O: use it only for trivial answers such as `/healthz`, where a task hop would cost more
/// than the work.
public typealias ImmediateHandler = @Sendable (Request) throws -> Response

/// How a route answers.
public enum RouteHandler: Sendable {
    /// `cancelledWhenClientLeaves`: the handler's task is cancelled when its client closes
    /// the connection before the response is out (see `Router.on(_:_:cancelledWhenClientLeaves:_:)`).
    case async(Handler, cancelledWhenClientLeaves: Bool)
    case immediate(ImmediateHandler)
}

/// A method + path-pattern table. Patterns are literal segments, `:name` parameters and a
/// final `*` that takes the rest of the path (bound as `"*"`, possibly empty).
/// `HEAD` falls back to the `GET` route (the server drops the body).
public struct Router: Sendable {
    /// A class: `match` walks the routes on every request, and copying a struct of four
    /// references per route showed in profiles.
    final class Route: Sendable {
        let method: String
        let segments: [Segment]
        let pattern: String
        let handler: RouteHandler
        /// For literal segments then `*` (`/fhir/*`): the literal part (`/fhir`), matched
        /// without splitting the path.
        let restPrefix: String?
        /// Only literal segments: the path must equal the pattern.
        let isLiteral: Bool

        init(method: String, segments: [Segment], pattern: String, handler: RouteHandler, restPrefix: String?) {
            (self.method, self.segments, self.pattern, self.handler, self.restPrefix) = (method, segments, pattern, handler, restPrefix)
            isLiteral = segments.allSatisfy { if case .literal = $0 { return true }; return false }
        }
    }

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case rest
    }

    /// The result of looking up a request.
    public enum Match: Sendable {
        case found(handler: RouteHandler, pattern: String, parameters: [String: String])
        /// The path is a route's (the first one's `pattern`), with other methods.
        case methodNotAllowed(allowed: [String], pattern: String)
        case notFound
    }

    private var routes: [Route] = []
    /// Routes without parameters, by path: most requests are answered without splitting.
    private var literal: [String: [Route]] = [:]

    public init() {}

    /// Adds an asynchronous route. `cancelledWhenClientLeaves`: when the client closes the
    /// connection (or it fails) while the handler works, the handler's task is cancelled and
    /// the connection dropped, as nginx gives up a proxied request whose client has gone.
    /// Only for handlers that change nothing that must be finished (a proxied read); never for
    /// one whose work must complete once begun (a logout's revocation). A client that closes
    /// only its sending side and waits for the answer (a half-close) gets none on such a route.
    public mutating func on(_ method: String, _ pattern: String, cancelledWhenClientLeaves: Bool = false,
                            _ handler: @escaping Handler) {
        add(method, pattern, .async(handler, cancelledWhenClientLeaves: cancelledWhenClientLeaves))
    }

    /// Adds a route answered immediately on the I/O thread (see `ImmediateHandler`).
    public mutating func onImmediate(_ method: String, _ pattern: String, _ handler: @escaping ImmediateHandler) {
        add(method, pattern, .immediate(handler))
    }

    public mutating func get(_ pattern: String, cancelledWhenClientLeaves: Bool = false, _ handler: @escaping Handler) {
        on("GET", pattern, cancelledWhenClientLeaves: cancelledWhenClientLeaves, handler)
    }
    public mutating func post(_ pattern: String, _ handler: @escaping Handler) { on("POST", pattern, handler) }

    private mutating func add(_ method: String, _ pattern: String, _ handler: RouteHandler) {
        precondition(pattern.hasPrefix("/"), "route patterns start with /")
        let parts = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var segments: [Segment] = []
        for (i, part) in parts.enumerated() {
            if part == "*" {
                precondition(i == parts.count - 1, "* must be the last segment")
                segments.append(.rest)
            } else if part.hasPrefix(":") {
                segments.append(.parameter(String(part.dropFirst())))
            } else {
                segments.append(.literal(String(part)))
            }
        }
        var restPrefix: String?
        if segments.last == .rest, segments.dropLast().allSatisfy({ if case .literal = $0 { return true }; return false }) {
            restPrefix = String(pattern.dropLast(2)) // "/fhir/*" → "/fhir"; "/*" → ""
        }
        let route = Route(method: method, segments: segments, pattern: pattern, handler: handler, restPrefix: restPrefix)
        routes.append(route)
        if route.isLiteral { literal[pattern, default: []].append(route) }
    }

    /// Finds the route for `method` and the (still percent-encoded) `path`.
    public func match(method: String, path: String) -> Match {
        if let candidates = literal[path] {
            for route in candidates where route.method == method {
                return .found(handler: route.handler, pattern: route.pattern, parameters: [:])
            }
        }
        var parts: ArraySlice<Substring>? // split only when a route needs it
        var allowed: [String] = []
        var matchedPattern: String?
        for route in routes {
            let bound: [String: String]?
            if route.isLiteral {
                bound = route.pattern == path ? [:] : nil
            } else if let prefix = route.restPrefix {
                bound = Router.bindRest(prefix, to: path)
            } else {
                if parts == nil { parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst() }
                bound = Router.bind(route.segments, to: parts!)
            }
            guard let params = bound else { continue }
            if route.method == method || (method == "HEAD" && route.method == "GET") {
                if method == "HEAD", route.method == "GET",
                   routes.contains(where: { $0.method == "HEAD" && $0.pattern == route.pattern }) { continue }
                return .found(handler: route.handler, pattern: route.pattern, parameters: params)
            }
            allowed.append(route.method)
            if route.method == "GET" { allowed.append("HEAD") }
            if matchedPattern == nil { matchedPattern = route.pattern }
        }
        guard let matchedPattern else { return .notFound }
        return .methodNotAllowed(allowed: Array(Set(allowed)).sorted(), pattern: matchedPattern)
    }

    /// `bind` for a route of literal segments then `*`: the same result from a prefix test.
    /// (Paths are request targets, ASCII: bytes compare as characters do.)
    private static func bindRest(_ prefix: String, to path: String) -> [String: String]? {
        let bytes = path.utf8, count = prefix.utf8.count
        guard bytes.starts(with: prefix.utf8) else { return nil }
        if bytes.count == count { return ["*": ""] }
        guard bytes[bytes.index(bytes.startIndex, offsetBy: count)] == UInt8(ascii: "/") else { return nil }
        return ["*": String(bytes.dropFirst(count + 1))!]
    }

    private static func bind(_ segments: [Segment], to parts: ArraySlice<Substring>) -> [String: String]? {
        var params: [String: String] = [:]
        var index = parts.startIndex
        for segment in segments {
            switch segment {
            case .rest:
                params["*"] = parts[index...].joined(separator: "/")
                return params
            case let .literal(text):
                guard index < parts.endIndex, parts[index] == text else { return nil }
            case let .parameter(name):
                guard index < parts.endIndex, !parts[index].isEmpty else { return nil }
                params[name] = String(parts[index])
            }
            index += 1
        }
        return index == parts.endIndex ? params : nil
    }
}
