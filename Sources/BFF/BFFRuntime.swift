import Cryptography
import Foundation
import HTTPClient
import HTTPCore
import Logging
import PostgresStore

/// A running smart-bff: database pool (migrated), services, HTTP server and the sweeper.
/// `smart-bff serve`, `smart-bff demo` and the tests all start it the same way.
public final class BFFRuntime: Sendable {
    public let services: BFFServices
    public let server: HTTPServer
    public let pool: ConnectionPool
    private let sweeper: Sweeper
    private let refresher: TokenRefresher
    private let shutdownDeadline: Duration

    /// The bound port.
    public var port: Int { server.port }

    /// Refreshes waiting for their turn (`RefreshLimits.concurrent`), for tests.
    var refreshesWaitingForTheirTurn: Int { refresher.waitingForTheirTurn }

    private init(services: BFFServices, server: HTTPServer, pool: ConnectionPool, sweeper: Sweeper, refresher: TokenRefresher,
                 shutdownDeadline: Duration) {
        self.services = services
        self.server = server
        self.pool = pool
        self.sweeper = sweeper
        self.refresher = refresher
        self.shutdownDeadline = shutdownDeadline
    }

    public struct Options: Sendable {
        public var migrationsDirectory: URL?
        public var openAPI: [UInt8] = []
        public var server = ServerConfiguration()
        public var poolSize = 16
        /// Longest wait of a request for a free database connection before it fails (503).
        public var poolAcquireTimeout: Duration = ConnectionPool.Configuration().acquireTimeout
        /// Longest a token refresh may take before it answers 503 (`RefreshLimits.deadline`).
        public var refreshDeadline: Duration = .seconds(15)
        public var http = HTTPClient.Configuration()
        /// When the PHI audit writer commits, and how much may wait before reads are refused.
        public var audit = AuditWriter.Timing()
        /// How long `shutdown` may take in all: it retries audit writes the database refuses
        /// until then. Under the 30 s an orchestrator commonly waits after SIGTERM before it
        /// kills the process (Kubernetes' `terminationGracePeriodSeconds`).
        public var shutdownDeadline: Duration = .seconds(20)
        public var now: @Sendable () -> Date = { Date() }
        /// How often expired rows are deleted (and expired sessions' tokens revoked).
        public var sweepInterval: Duration = .seconds(60)
        /// How old an EHR's cached JWKS may be before it is fetched again (`JWKSCache`'s `maxAge`).
        public var jwksMaxAge: Duration = .seconds(3600)
        /// How long after a fetch of an EHR's JWKS the next may start (`JWKSCache`'s `refetchInterval`).
        public var jwksRefetchInterval: Duration = .seconds(10)
        public var extraRoutes: @Sendable (inout Router) -> Void = { _ in }
        /// Called once the server listens, before the `serving` line is logged.
        public var whenListening: @Sendable () -> Void = {}
        public init() {}
    }

    /// Connects, migrates, and starts serving on `configuration.listenHost:listenPort`.
    public static func start(configuration: BFFConfiguration, options: Options, logger: Logger) async throws -> BFFRuntime {
        var poolConfiguration = ConnectionPool.Configuration()
        poolConfiguration.size = options.poolSize
        poolConfiguration.acquireTimeout = options.poolAcquireTimeout
        poolConfiguration.settings = PostgresSessionStore.connectionSettings
        poolConfiguration.healthObserver = DatabaseFailureLog(logger: logger)
        let pool = ConnectionPool(url: configuration.databaseURL.value, configuration: poolConfiguration)
        guard let directory = options.migrationsDirectory ?? Migrator.locateDirectory() else {
            throw StartError(message: "BFF_MIGRATIONS_DIR: migrations/ not found (where it names, or else beside the executable or in the working directory)")
        }
        let migrator = try Migrator(directory: directory)
        let applied = try await migrator.migrate(pool) { holder in
            logger.warning("waiting for the migration lock, which another process holds", metadata: [
                "db.lock_holder_pid": .string(holder.map(String.init) ?? "not visible"),
            ])
        }
        if !applied.isEmpty { logger.info("migrations applied", metadata: ["db.migrations": .string(applied.map(String.init).joined(separator: ","))]) }
        if let newer = try? await migrator.unknownVersions(pool), !newer.isEmpty {
            logger.warning("the database has migrations this release does not know: a newer release migrated it", metadata: [
                "db.migrations": .string(newer.map(String.init).joined(separator: ",")),
            ])
        }
        let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: configuration.tokenKey.value),
                                         fallbackKeys: try configuration.tokenKeyFallbacks.value.map { try AESGCMKey(bytes: $0) },
                                         logger: logger)
        var http = options.http
        if let caFile = configuration.tlsCAFile { http.caCertificatesFile = caFile }
        let client = HTTPClient(configuration: http)
        if let problem = client.egressProblem {
            logger.warning("the egress proxy setting cannot be used: requests it covers will fail", metadata: ["error.detail": .string(problem)])
        }
        let services = try BFFServices(configuration: configuration, store: store, http: client,
                                       readiness: Readiness(pool: pool, migrator: migrator, migrations: .current), // just applied
                                       auditTiming: options.audit,
                                       jwksMaxAge: options.jwksMaxAge, jwksRefetchInterval: options.jwksRefetchInterval, now: options.now, logger: logger)
        let app = BFFApplication(services: services, openAPI: options.openAPI,
                                 refreshLimits: RefreshLimits(deadline: options.refreshDeadline, poolSize: options.poolSize),
                                 extraRoutes: options.extraRoutes)
        var serverConfiguration = options.server
        serverConfiguration.host = configuration.listenHost
        serverConfiguration.port = configuration.listenPort
        let server = HTTPServer(configuration: serverConfiguration, makeApplication: { app.makeHTTPApplication() }, logger: logger)
        try server.start()
        options.whenListening()
        // What an operator checks first, and nothing secret (no database URL, key or client secret).
        logger.info("serving", metadata: [
            "bff.public_url": .string(configuration.publicURL),
            "smart.issuers": .string(configuration.issuers.map(\.iss).joined(separator: " ")),
            "tls.trust": .string(BFFConfiguration.tlsTrust(caFile: configuration.tlsCAFile)),
            "http.egress": .string(client.egressSummary),
            "http.io_threads": .stringConvertible(serverConfiguration.eventLoops),
            "db.pool_size": .stringConvertible(options.poolSize),
            "proxy.cache_seconds": .stringConvertible(configuration.proxyCacheSeconds),
            "process.open_file_limit": .stringConvertible(OpenFileLimit.current?.soft ?? 0),
        ])
        if let limit = OpenFileLimit.current, limit.soft < UInt64(serverConfiguration.maxConnections) + 256 {
            // Beyond it, new connections wait in the listen backlog until descriptors free up.
            logger.warning("the open-file limit allows fewer connections than the server's limit; raise it (LimitNOFILE=, ulimit -n)",
                           metadata: ["process.open_file_limit": .stringConvertible(limit.soft),
                                      "http.max_connections": .stringConvertible(serverConfiguration.maxConnections)])
        }
        let sweeper = Sweeper(store: store, interval: options.sweepInterval, auditRetentionDays: configuration.auditRetentionDays,
                              now: services.now,
                              // A session that ended by expiry keeps no token valid at the EHR either.
                              onEnded: { ended in await services.revokeTokens(of: ended, width: 8) },
                              onSweep: { removed in
                                  if removed > 0 { logger.debug("swept expired rows", metadata: ["db.rows": .stringConvertible(removed)]) }
                              },
                              onError: { error in
                                  logger.warning("sweep failed; retried in a minute", metadata: ["error": .string(String(reflecting: error))])
                              })
        return BFFRuntime(services: services, server: server, pool: pool, sweeper: sweeper, refresher: app.refresher,
                          shutdownDeadline: options.shutdownDeadline)
    }

    /// Graceful stop, over by `Options.shutdownDeadline` (20 s) after the call: drain HTTP
    /// (`gracePeriod`, which should leave the audit trail some of that time); then, together,
    /// let the token refreshes under way store what their EHR answers (a rotated refresh
    /// token would be lost with the pool) and write the audit entries still buffered,
    /// retrying while the database refuses them (a failover, a migration's lock), until the
    /// deadline; and close the pool. Entries still unwritten then are lost with the process:
    /// an error line says how many (a count, never what they hold). Those of a write whose
    /// commit got no answer get a line of their own, with the batch id that says whether
    /// they are stored after all. Returns how many were lost (`serve` then exits with 1).
    @discardableResult
    public func shutdown(gracePeriod: Duration = .seconds(10)) async -> Int {
        let deadline = ContinuousClock.now + shutdownDeadline
        refresher.beginStopping() // no refresh sends a request the drain below would not wait for
        await server.shutdown(gracePeriod: gracePeriod)
        sweeper.stop()
        async let refreshes: Void = refresher.drain(until: deadline)
        async let revocations: Void = services.background.wait(until: deadline)
        // Whatever the HTTP drain took, a write under way gets a second to land.
        await services.audit.drain(until: max(deadline, ContinuousClock.now + .seconds(1)))
        await refreshes
        await revocations
        if services.background.running > 0 {
            // Their launches are gone from the database: the tokens stay valid at the EHR
            // until they expire, which the operator should know.
            services.logger.warning("token revocations cut short at shutdown", metadata: [
                "revocations.running": .stringConvertible(services.background.running),
            ])
        }
        services.audit.stop()
        let audit = services.audit.status
        let lost = audit.pending - audit.unsettledEntries
        if lost > 0 {
            services.logger.error("audit entries lost at shutdown: the database did not take them", metadata: [
                "audit.entries": .stringConvertible(lost),
            ])
        }
        if let batch = audit.unsettledBatch {
            services.logger.error("audit entries perhaps lost at shutdown: their write's commit got no answer; they are stored if audit_batches holds the batch, not claimed", metadata: [
                "audit.entries": .stringConvertible(audit.unsettledEntries), "audit.batch": .string(batch),
            ])
        }
        pool.close()
        // The last line: the HTTP server's "stopped" comes before the audit trail's last writes.
        services.logger.info("shut down", metadata: ["audit.lost_entries": .stringConvertible(max(0, lost))])
        return max(0, lost)
    }

    /// An operator's second stop signal: the connections a `shutdown` is waiting for are closed
    /// now. The audit trail is still written (within the shutdown's deadline): PHI access
    /// records are not dropped to save a few seconds.
    public func hurryShutdown() {
        services.logger.warning("second stop signal: closing open connections now; the audit trail is still written", metadata: [
            "http.connections": .stringConvertible(server.connectionCount),
        ])
        server.endGracePeriod()
    }

    struct StartError: Error, CustomStringConvertible { let message: String; var description: String { message } }
}
