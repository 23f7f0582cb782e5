import Logging

/// A step around every request. Middleware is synchronous so that it can run on the I/O
/// thread for immediate routes; asynchronous work belongs in handlers.
public protocol Middleware: Sendable {
    /// Runs before the handler, in order. Return a response to answer without the handler.
    func prepare(_ request: inout Request) throws -> Response?
    /// Runs after the handler (or an error's problem response), in reverse order.
    func finish(_ request: Request, _ response: inout Response)
    /// Runs for a request the server refused while reading it (a malformed or over-long
    /// head, a timeout): there is no `Request`, only the status, the parser's reason and the
    /// peer's address.
    func refused(_ status: HTTPStatus, reason: String, peer: String, logger: Logger)
}

extension Middleware {
    public func prepare(_ request: inout Request) throws -> Response? { nil }
    public func finish(_ request: Request, _ response: inout Response) {}
    public func refused(_ status: HTTPStatus, reason: String, peer: String, logger: Logger) {}
}
