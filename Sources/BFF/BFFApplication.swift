import HTTPCore
import Logging
import PostgresStore

/// The composition root: smart-bff's router and middleware over its services.
public struct BFFApplication: Sendable {
    public let services: BFFServices
    public let openAPI: [UInt8]
    /// Extra routes (the demo page).
    public let extraRoutes: @Sendable (inout Router) -> Void
    /// One per process, whatever the number of applications: refreshes are single-flight here.
    let refresher: TokenRefresher

    public init(services: BFFServices, openAPI: [UInt8], refreshLimits: RefreshLimits,
                extraRoutes: @escaping @Sendable (inout Router) -> Void = { _ in }) {
        self.services = services
        self.openAPI = openAPI
        self.extraRoutes = extraRoutes
        refresher = TokenRefresher(services: services, limits: refreshLimits)
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
        // A read whose browser has gone (a fetch aborted) stops waiting for the EHR, and frees its connection.
        router.get("/fhir/*", cancelledWhenClientLeaves: true, proxy.handle)
        let operations = OperationsHandlers(services: services)
        router.get("/readyz", operations.readyz)
        router.get("/metrics", operations.metrics)
        router.onImmediate("GET", "/.well-known/jwks.json") { _ in operations.jwks() }
        extraRoutes(&router)
        let metrics = services.metrics
        return HTTPApplication(router: router, middleware: [AccessLog(), MetricsMiddleware(recorder: metrics.makeRequestRecorder()), SecurityHeaders()],
                               logger: services.logger, mapError: { BFFApplication.problem(for: $0, metrics: metrics) })
    }

    /// Database failures that reach a handler's caller: counted, and 503 while PostgreSQL
    /// cannot serve the request (unreachable, locked, read-only, out of connections: a retry
    /// may succeed; the session is kept), logged once per outage by the pool's
    /// `DatabaseFailureLog`, not per request. Other statement failures stay generic 500s,
    /// each logged.
    static func problem(for error: any Error, metrics: Metrics) -> HTTPError? {
        guard let error = error as? PostgresError else { return nil }
        metrics.recordDatabaseError()
        return error.isTransient ? Problems.databaseUnavailable() : nil
    }
}
