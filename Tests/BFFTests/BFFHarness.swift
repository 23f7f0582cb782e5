import BFF
import BFFTesting
import Cryptography
import Foundation
import HTTPClient
import HTTPCore
import JSON
import Logging
import PostgresStore
import Sandbox

/// A sandbox EHR and one or more smart-bff instances on one fresh database, over real
/// loopback sockets; plus a small browser (cookie jar, no automatic redirects).
final class BFFHarness: Sendable {
    let sandbox: SandboxEHR
    let bffs: [BFFRuntime]
    let database: TestDatabase
    let logs: LogSink
    /// The test's own client (the "browser"); it trusts the test CA.
    let client: HTTPClient
    /// The TLS front of the sandbox EHR, when it is reached over https.
    let ehrTLS: TLSTestServer?
    /// The relay the instances reach the database through, when a test loses a commit's answer.
    let commitAnswerLoss: CommitAnswerLoss?

    var bff: BFFRuntime { bffs[0] }
    var baseURL: String { "http://127.0.0.1:\(bff.port)" }

    static func start(instances: Int = 1, extraClients: [SandboxClient] = [],
                      registrations: (SandboxEHR, [Int]) -> [IssuerRegistration] = { s, _ in [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app")] },
                      returnOrigins: [String] = [], readTimeout: Duration = .seconds(30), stallTimeout: Duration = .seconds(120),
                      writeTimeout: Double = 30, proxyCacheSeconds: Int = 2,
                      refreshDeadline: Duration = .seconds(15),
                      tokenKeys: [(key: [UInt8], fallbacks: [[UInt8]])] = [],
                      ehrOverTLS: Bool = false, bffTrustsTestCA: Bool = true, auditMaxPending: Int? = nil, auditLockWait: Duration? = nil,
                      sweepInterval: Duration = .seconds(60), shutdownDeadline: Duration? = nil, jwksMaxAge: Duration = .seconds(3600),
                      jwksRefetchInterval: Duration = .seconds(10),
                      ehrConnections: (perHost: Int, reserved: Int)? = nil,
                      commitAnswerLoss: (armed: Bool, awayAfterLoss: Bool)? = nil,
                      sandbox configure: (inout SandboxEHR.Options) -> Void = { _ in }) async throws -> BFFHarness {
        let database = try await TestDatabase.make(poolSize: 4)
        let relay = try commitAnswerLoss.map { try CommitAnswerLoss(inFrontOf: database.url, armed: $0.armed, awayAfterLoss: $0.awayAfterLoss) }
        let ports = (0..<instances).map { _ in PortAllocator.next() }
        var sandboxOptions = SandboxEHR.Options()
        sandboxOptions.port = 0
        sandboxOptions.signingKeyPEM = TestKeys.sandboxSigningKeyPEM
        let redirects = ports.map { "http://127.0.0.1:\($0)/callback" }
        sandboxOptions.clients = [SandboxClient(id: "test-app", redirectURIs: redirects)]
        // Over TLS, the sandbox is https://localhost:<port> to everyone, through a TLS front
        // with a certificate from the test CA (which `BFF_TLS_CA_FILE` names).
        let ehrTLS = ehrOverTLS ? try TLSTestServer(identity: TestCertificates.localhost) : nil
        if let ehrTLS { sandboxOptions.publicBaseURL = "https://localhost:\(ehrTLS.port)" }
        let caFile = try TestCertificates.caFile()
        configure(&sandboxOptions)
        let logs = LogSink()
        var logger = Logger(label: "smart-bff.test") { label in JSONLogHandler(label: label, sink: logs) }
        logger.logLevel = .debug
        let sandbox = try await SandboxEHR.start(options: sandboxOptions, logger: Logger(label: "sandbox", factory: { _ in SwiftLogNoOpLogHandler() }))
        ehrTLS?.forward(to: sandbox.port)
        for client in extraClients {
            var c = client
            c.redirectURIs = redirects
            await sandbox.state.register(c)
        }
        var bffs: [BFFRuntime] = []
        let sharedKey = SecureRandom.bytes(32) // instances share BFF_TOKEN_KEY unless `tokenKeys` says otherwise
        for (index, port) in ports.enumerated() {
            let publicURL = "http://127.0.0.1:\(port)"
            let keys = index < tokenKeys.count ? tokenKeys[index] : (key: sharedKey, fallbacks: [])
            let configuration = BFFConfiguration(
                listenHost: "127.0.0.1", listenPort: port, publicURL: publicURL, databaseURL: Secret(relay?.url ?? database.url),
                issuers: registrations(sandbox, ports), tokenKey: Secret(keys.key), tokenKeyFallbacks: Secret(keys.fallbacks),
                returnOrigins: [publicURL] + returnOrigins, logLevel: "debug", proxyCacheSeconds: proxyCacheSeconds,
                tlsCAFile: bffTrustsTestCA ? caFile : nil)
            var options = BFFRuntime.Options()
            options.migrationsDirectory = RepositoryPaths.migrations
            options.poolSize = 4
            // Reads wait their turn for one of the 4 connections (32 at once in RefreshTests),
            // on a machine that may be running the whole suite: 5 s could pass for an outage.
            options.poolAcquireTimeout = .seconds(30)
            options.server.eventLoops = 1
            options.server.writeTimeout = writeTimeout
            // No test waits for the default read timeout: long, so that no EHR call on a loaded
            // machine passes for a timeout.
            options.http.readTimeout = readTimeout
            options.http.stallTimeout = stallTimeout
            if let ehrConnections {
                options.http.maxConnectionsPerHost = ehrConnections.perHost
                options.http.reservedConnectionsPerHost = ehrConnections.reserved
            }
            if let auditMaxPending { options.audit.maxPending = auditMaxPending }
            if let auditLockWait { options.audit.lockWait = auditLockWait }
            if let shutdownDeadline { options.shutdownDeadline = shutdownDeadline }
            options.refreshDeadline = refreshDeadline
            options.sweepInterval = sweepInterval
            options.jwksMaxAge = jwksMaxAge
            options.jwksRefetchInterval = jwksRefetchInterval
            bffs.append(try await BFFRuntime.start(configuration: configuration, options: options, logger: logger))
        }
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.caCertificatesFile = caFile
        return BFFHarness(sandbox: sandbox, bffs: bffs, database: database, logs: logs,
                          client: HTTPClient(configuration: clientConfiguration), ehrTLS: ehrTLS, commitAnswerLoss: relay)
    }

    private init(sandbox: SandboxEHR, bffs: [BFFRuntime], database: TestDatabase, logs: LogSink,
                 client: HTTPClient, ehrTLS: TLSTestServer?, commitAnswerLoss: CommitAnswerLoss?) {
        self.sandbox = sandbox
        self.bffs = bffs
        self.database = database
        self.logs = logs
        self.client = client
        self.ehrTLS = ehrTLS
        self.commitAnswerLoss = commitAnswerLoss
    }

    /// Waits until `condition` holds of the sandbox's state, or 60 s pass (a no-hang limit
    /// only: nothing is timed with it; the caller's expectation says whether it came).
    func waitForSandbox(within limit: Duration = .seconds(60), _ condition: (SandboxState) async -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while await !condition(sandbox.state), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    func stop() async {
        for bff in bffs { await bff.shutdown(gracePeriod: .seconds(1)) }
        await sandbox.shutdown()
        ehrTLS?.shutdown()
        commitAnswerLoss?.shutdown()
        database.pool.close()
    }
}

import Synchronization

/// Ports for BFF instances whose redirect URI must be known before they bind: below the
/// kernel's ephemeral range, handed out once each in this process, and free when handed
/// out. Another test run on the machine (its range starts elsewhere, but a run takes
/// hundreds) or any other server may hold a port of the range: such ports are skipped.
enum PortAllocator {
    private static let counter = Atomic<Int>(0)
    private static let base = 21_000 + Int(getpid() % 50) * 100

    static func next() -> Int {
        var port = 0
        for _ in 0..<6_000 {
            port = base + counter.add(1, ordering: .relaxed).newValue % 6_000
            guard let (fd, _) = try? LoopbackSocket.bind(port: port) else { continue }
            close(fd)
            return port
        }
        return port
    }
}
