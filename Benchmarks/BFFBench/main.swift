// Micro and flow benchmarks whose figures go to BENCHMARKS.md. Build with
// `BFF_BENCHMARKS=1 swift build -c release --product BFFBench`; the scripts in Benchmarks/
// run it side by side with the reference tools.
import BFF
import Cryptography
import Foundation
import HTTPClient
import JSON
import JWTVerification
import Logging
import PostgresStore
import Sandbox
import Sessions

let arguments = CommandLine.arguments
func argument(_ name: String, _ fallback: Int) -> Int {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
    return v
}

switch arguments.dropFirst().first {
case "rs256": try rs256(seconds: argument("--seconds", 5))
case "sessions": try await sessions(url: ProcessInfo.processInfo.environment["DATABASE_URL"]!, clients: argument("--clients", 8), seconds: argument("--seconds", 10))
case "login": try await login(url: ProcessInfo.processInfo.environment["DATABASE_URL"]!, count: argument("--count", 200))
default: print("usage: BFFBench rs256|sessions|login [--seconds N] [--clients N] [--count N]")
}

/// RS256 verifications per second through the verifier (header policy + signature), one thread.
func rs256(seconds: Int) throws {
    let key = try RSAPrivateKey.generate(bits: 2048)
    let token = try JWSSigner.signRS256(header: ["alg": "RS256", "kid": "k"], claims: ["sub": "x", "iss": "i"], key: key)
    let jws = try CompactJWS(token)
    let publicKey = key.publicKey
    var count = 0
    let end = Date().addingTimeInterval(Double(seconds))
    while Date() < end {
        for _ in 0..<100 {
            _ = try JWSVerifier.checkHeader(jws)
            try JWSVerifier.verifySignature(jws, key: publicKey)
        }
        count += 100
    }
    print("rs256_verify_per_second \(count / seconds)")
}

/// Session lookups per second through the store: find by hash + touch (forced to write,
/// like the pgbench script), `clients` connections.
func sessions(url: String, clients: Int, seconds: Int) async throws {
    var configuration = ConnectionPool.Configuration()
    configuration.size = clients
    let pool = ConnectionPool(url: url, configuration: configuration)
    try await Migrator(directory: URL(fileURLWithPath: "migrations")).migrate(pool)
    let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)), touchInterval: 0)
    // Sessions "1"…"1000", inserted by the script in SQL with id_hash = sha256 of the text.
    let sessionIDs = (1...1000).map(String.init)
    let deadline = Date().addingTimeInterval(Double(seconds))
    let total = try await withThrowingTaskGroup(of: Int.self) { group in
        for c in 0..<clients {
            group.addTask {
                var n = 0
                var i = c
                while Date() < deadline {
                    let id = sessionIDs[i % sessionIDs.count]
                    guard let s = try await store.findSession(id: id, now: Date()) else { fatalError("missing session") }
                    try await store.touchSession(s, ttl: 3600, now: Date())
                    n += 1
                    i += clients
                }
                return n
            }
        }
        return try await group.reduce(0, +)
    }
    print("store_session_lookups_per_second \(total / seconds)")
    pool.close()
}

/// Full login latency (launch → callback → session) against the sandbox on loopback.
func login(url: String, count: Int) async throws {
    var sandboxOptions = SandboxEHR.Options()
    sandboxOptions.port = 0
    let port = 28_000 + Int.random(in: 0..<1000)
    sandboxOptions.clients = [SandboxClient(id: "bench", redirectURIs: ["http://127.0.0.1:\(port)/callback"])]
    let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
    let sandbox = try await SandboxEHR.start(options: sandboxOptions, logger: quiet)
    let configuration = BFFConfiguration(listenHost: "127.0.0.1", listenPort: port, publicURL: "http://127.0.0.1:\(port)",
                                         databaseURL: Secret(url), issuers: [IssuerRegistration(iss: sandbox.fhirBaseURL, clientID: "bench")],
                                         tokenKey: Secret(SecureRandom.bytes(32)), returnOrigins: ["http://127.0.0.1:\(port)"], logLevel: "warning")
    var options = BFFRuntime.Options()
    options.migrationsDirectory = URL(fileURLWithPath: "migrations")
    let runtime = try await BFFRuntime.start(configuration: configuration, options: options, logger: quiet)
    let client = HTTPClient()
    let base = "http://127.0.0.1:\(port)"
    var samples: [Double] = []
    for i in 0..<(count + 10) {
        let started = ContinuousClock.now
        let entry = try await client.execute(HTTPClientRequest(url: sandbox.ehrLaunchURL(app: base + "/launch", patient: "pat-1")))
        let launch = try await client.execute(HTTPClientRequest(url: entry.header("Location")!))
        let authorize = try await client.execute(HTTPClientRequest(url: launch.header("Location")!))
        let binding = launch.header("Set-Cookie")!.split(separator: ";")[0] // the sign-in's browser binding
        let callback = try await client.execute(HTTPClientRequest(url: authorize.header("Location")!, headers: [("Cookie", String(binding))]))
        let cookie = callback.header("Set-Cookie")!.split(separator: ";")[0]
        let session = try await client.execute(HTTPClientRequest(url: base + "/session", headers: [("Cookie", String(cookie)), ("X-CSRF", "1")]))
        precondition(session.status == 200)
        let elapsed = ContinuousClock.now - started
        if i >= 10 { samples.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000) }
    }
    samples.sort()
    print(String(format: "login_ms p50=%.2f p90=%.2f p99=%.2f n=%d", samples[samples.count / 2], samples[samples.count * 9 / 10],
                 samples[min(samples.count - 1, samples.count * 99 / 100)], samples.count))
    await runtime.shutdown(gracePeriod: .seconds(1))
    await sandbox.shutdown()
}
