import Logging

/// The router, the middleware chain and error mapping: what turns a `Request` into a
/// `Response`. Errors become RFC 9457 problem responses: an `HTTPError` as it says, one that
/// `mapError` recognises as it maps it (and logs it, if it should be), anything else a
/// generic 500 whose details go only to the log.
public final class HTTPApplication: Sendable {
    /// A response that is ready now, or work that produces one (see
    /// `Router.on(_:_:cancelledWhenClientLeaves:_:)` for the flag).
    public enum Outcome: Sendable {
        case ready(Response)
        case pending(@Sendable () async -> Response, cancelledWhenClientLeaves: Bool)
    }

    public let router: Router
    public let middleware: [any Middleware]
    public let logger: Logger
    /// Turns errors of the layers below (a database, say) into problem responses; nil for
    /// those it does not know. What it maps is not logged here: it knows whether an error
    /// deserves a line per request, or is logged once elsewhere (an outage, say).
    public let mapError: @Sendable (any Error) -> HTTPError?

    public init(router: Router, middleware: [any Middleware] = [], logger: Logger = Logger(label: "smart-bff.http"),
                mapError: @escaping @Sendable (any Error) -> HTTPError? = { _ in nil }) {
        self.router = router
        self.middleware = middleware
        self.logger = logger
        self.mapError = mapError
    }

    /// Tells the middleware of a request refused while it was read (see `Middleware.refused`).
    public func refused(_ status: HTTPStatus, reason: String, peer: String) {
        for step in middleware { step.refused(status, reason: reason, peer: peer, logger: logger) }
    }

    /// Routes `request` through the middleware to its handler. The request should carry this
    /// application's logger (`Request(…, logger: application.logger)`).
    public func dispatch(_ incoming: Request) -> Outcome {
        var request = incoming
        request.id = RequestID.make(from: request.headers["X-Request-ID"])
        do {
            for step in middleware {
                if let early = try step.prepare(&request) { return .ready(finish(request, early)) }
            }
        } catch {
            return .ready(finish(request, problem(for: error, request: request)))
        }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return .ready(finish(request, HTTPError(.notFound, detail: "No such endpoint.").response))
        case let .methodNotAllowed(allowed, pattern):
            request.route = pattern // counted and logged under the route whose methods it lacks
            let error = HTTPError(.methodNotAllowed, detail: "Allowed: \(allowed.joined(separator: ", ")).",
                                  headers: ["Allow": allowed.joined(separator: ", ")])
            return .ready(finish(request, error.response))
        case let .found(handler, pattern, parameters):
            request.pathParameters = parameters
            request.route = pattern
            switch handler {
            case let .immediate(handle):
                do { return .ready(finish(request, try handle(request))) } catch {
                    return .ready(finish(request, problem(for: error, request: request)))
                }
            case let .async(handle, cancellable):
                let routed = request
                return .pending({ [self] in
                    do { return finish(routed, try await handle(routed)) } catch {
                        return finish(routed, problem(for: error, request: routed))
                    }
                }, cancelledWhenClientLeaves: cancellable)
            }
        }
    }

    /// Convenience for tests: the response, whatever kind of route answers.
    public func respond(to request: Request) async -> Response {
        var request = request
        request.baseLogger = logger
        switch dispatch(request) {
        case let .ready(response): return response
        case let .pending(work, _): return await work()
        }
    }

    private func finish(_ request: Request, _ response: Response) -> Response {
        var response = response
        for step in middleware.reversed() { step.finish(request, &response) }
        response.headers.add("X-Request-ID", request.id)
        return response
    }

    private func problem(for error: any Error, request: Request) -> Response {
        if let http = error as? HTTPError { return http.response }
        // Only a route that gives up on a client gone has its handler cancelled: no one to answer.
        if error is CancellationError && Task.isCancelled {
            return HTTPError(.clientClosedRequest, detail: "The client closed the connection before the response.").response
        }
        if let mapped = mapError(error) { return mapped.response }
        request.logger.error("unhandled error", metadata: ["error.type": .string(String(describing: type(of: error))),
                                                           "error.detail": .string(String(describing: error))])
        return HTTPError(.internalServerError, detail: "The server could not complete the request.").response
    }
}
