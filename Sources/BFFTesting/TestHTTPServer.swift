import HTTPCore
import Logging

/// Starts an `HTTPServer` for tests: on 127.0.0.1, a free port (`server.port` tells which),
/// two I/O threads, and loggers that stay quiet unless something critical happens (or `logger`).
/// The caller stops it with `await server.shutdown(gracePeriod:)`.
public enum TestHTTPServer {
    public static func start(router: Router, middleware: [any Middleware] = [],
                             logLevel: Logger.Level = .critical, logger given: Logger? = nil,
                             configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> HTTPServer {
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.eventLoops = 2
        configure(&configuration)
        var logger = given ?? Logger(label: "smart-bff.http.test")
        if given == nil { logger.logLevel = logLevel }
        let application = HTTPApplication(router: router, middleware: middleware, logger: logger)
        let server = HTTPServer(configuration: configuration, application: application, logger: logger)
        try server.start()
        return server
    }
}
