import HTTPCore
import Logging

/// The composition root: builds smart-bff's router and middleware from its configuration
/// and dependencies.
public struct BFFApplication: Sendable {
    public let configuration: BFFConfiguration
    public let openAPI: [UInt8]
    public let logger: Logger

    public init(configuration: BFFConfiguration, openAPI: [UInt8], logger: Logger) {
        self.configuration = configuration
        self.openAPI = openAPI
        self.logger = logger
    }

    /// The HTTP application serving every endpoint of the contract.
    public func makeHTTPApplication() -> HTTPApplication {
        var router = Router()
        HealthHandlers.register(on: &router, openAPI: openAPI)
        return HTTPApplication(router: router, middleware: [AccessLog()], logger: logger)
    }
}
