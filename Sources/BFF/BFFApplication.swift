import HTTPCore
import Logging

/// The composition root: smart-bff's router and middleware over its services.
public struct BFFApplication: Sendable {
    public let services: BFFServices
    public let openAPI: [UInt8]
    /// Extra routes (the demo page).
    public let extraRoutes: @Sendable (inout Router) -> Void
    /// One per process, whatever the number of applications: refreshes are single-flight here.
    let refresher: TokenRefresher

    public init(services: BFFServices, openAPI: [UInt8], extraRoutes: @escaping @Sendable (inout Router) -> Void = { _ in }) {
        self.services = services
        self.openAPI = openAPI
        self.extraRoutes = extraRoutes
        refresher = TokenRefresher(services: services)
    }

    /// The HTTP application serving every endpoint of the contract. Each call makes a new
    /// one (the server makes one per I/O thread); they share the services and the refresher.
    public func makeHTTPApplication() -> HTTPApplication {
        var router = Router()
        HealthHandlers.register(on: &router, openAPI: openAPI)
        let launch = LaunchHandlers(services: services)
        router.get("/launch", launch.launch)
        router.get("/login", launch.login)
        router.get("/callback", CallbackHandler(services: services).callback)
        let session = SessionHandlers(services: services)
        router.get("/session", session.session)
        router.get("/context", session.context)
        router.post("/logout", session.logout)
        router.post("/session/handoff", session.handoff)
        let proxy = FHIRProxy(services: services, refresher: refresher)
        router.get("/fhir/*", proxy.handle)
        let operations = OperationsHandlers(services: services)
        router.get("/readyz", operations.readyz)
        router.get("/metrics", operations.metrics)
        router.onImmediate("GET", "/.well-known/jwks.json") { _ in operations.jwks() }
        extraRoutes(&router)
        return HTTPApplication(router: router, middleware: [AccessLog(), MetricsMiddleware(recorder: services.metrics.makeRequestRecorder()), SecurityHeaders()],
                               logger: services.logger)
    }
}
