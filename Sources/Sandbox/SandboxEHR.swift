import Cryptography
import Foundation
import HTTPCore
import JSON
import JWTVerification
import Logging
import Synchronization

/// A SMART EHR simulator for development, demos and tests: SMART and OpenID discovery, a
/// JWKS, an authorization endpoint (patient picker for standalone launch, immediate
/// approval for EHR launch), a token endpoint that checks PKCE, client authentication and
/// single-use codes, RS256 ID tokens, refresh with rotation, revocation, and a FHIR R4
/// read/search server over a small bundled data set.
public final class SandboxEHR: Sendable {
    /// How the sandbox starts. Everything under "fail modes" can also be switched at run time
    /// through `state` (`SandboxState`).
    public struct Options: Sendable {
        /// Address to bind.
        public var host = "127.0.0.1"
        /// Port to listen on; 0 picks a free port.
        public var port = 9090
        /// Seconds an access token lives (`expires_in`).
        public var accessTokenLifetime = 3600
        /// Seconds an authorization code stays redeemable (it is single-use regardless).
        public var codeLifetime = 60
        /// A refresh consumes the refresh token and returns a new one.
        public var rotateRefreshTokens = true
        /// Registered clients; by default the public client `smart-bff-demo`.
        public var clients: [SandboxClient] = [SandboxClient(id: "smart-bff-demo", redirectURIs: ["http://127.0.0.1:8080/callback"])]
        /// Advertise `authorization_response_iss_parameter_supported` and send RFC 9207 `iss`
        /// in authorization responses.
        public var issParameter = true
        /// The ID-token signing key (PEM); nil makes a new 2048-bit key at start.
        public var signingKeyPEM: String?
        /// Advertise the RFC 7009 `revocation_endpoint` (it answers either way).
        public var revocation = true
        /// Members of `.well-known/smart-configuration` set over the sandbox's own (an
        /// endpoint elsewhere, say `revocation_endpoint` on another origin).
        public var smartConfigurationMembers: [String: String] = [:]
        /// The base URL to advertise when the sandbox sits behind a proxy (default: its own address).
        public var publicBaseURL: String?
        /// Fail mode: refresh grants answer `400 {"error": refreshError}` (e.g. `invalid_grant`).
        public var refreshError: String?
        /// Fail mode: the token endpoint answers every request with this status (e.g. 503).
        public var tokenEndpointStatus: Int?
        /// Fail mode: FHIR responses wait this long.
        public var fhirDelay: Duration?
        /// Fail mode: the FHIR server answers 503 (for a server that is gone, shut the sandbox down).
        public var fhirDown = false
        /// Fail mode: FHIR responses break off half-way through their declared body.
        public var closeMidBody = false
        /// The `iss` of ID tokens (and of RFC 9207 authorization responses) when it is not the
        /// FHIR base: then, as an Oracle Health tenant was reported to, discovery names no
        /// `issuer` and `openid-configuration` is not found.
        public var idTokenIssuer: String?
        /// The `iss` of ID tokens alone, when it differs from the issuer discovery names (which
        /// RFC 9207 authorization responses carry): Oracle Health's tenants name
        /// `…/tenants/{t}` in discovery and `…/tenants/{t}/oidc/idsps/{t}/` in ID tokens.
        public var idTokensOwnIssuer: String?
        /// As Epic's: the issuer (named by discovery, in ID tokens and in RFC 9207's `iss`) is
        /// the OAuth server, `{sandbox}/oauth2`, not the FHIR base.
        public var issuerAtOAuthServer = false
        /// As Epic before its August 2021 version: the ID tokens' issuer is the OAuth server,
        /// `{sandbox}/oauth2`; the smart-configuration names neither `issuer` nor `jwks_uri`,
        /// and the OpenID configuration is served only under that issuer, not the FHIR base.
        public var openIDConfigurationAtOAuthServerOnly = false

        /// The defaults above.
        public init() {}
    }

    /// Run-time switches, counters and recorded requests.
    public let state: SandboxState
    let server: HTTPServer
    let data = SandboxData()
    /// The sandbox's base URL, e.g. `http://127.0.0.1:9090` (no trailing slash).
    public let baseURL: String
    let options: Options

    /// The FHIR base URL (`iss`).
    public var fhirBaseURL: String { baseURL + "/fhir" }
    /// The ID tokens' issuer.
    public var issuer: String {
        options.openIDConfigurationAtOAuthServerOnly || options.issuerAtOAuthServer ? baseURL + "/oauth2" : options.idTokenIssuer ?? fhirBaseURL
    }
    /// The bound port.
    public var port: Int { server.port }

    private init(options: Options, state: SandboxState, server: HTTPServer, baseURL: String) {
        self.options = options
        self.state = state
        self.server = server
        self.baseURL = baseURL
    }

    /// Starts the sandbox on its own HTTP server; it serves until `shutdown()`.
    /// - Throws: when the address cannot be bound or the signing key cannot be made.
    public static func start(options: Options = Options(), logger: Logger = Logger(label: "smart-bff.sandbox")) async throws -> SandboxEHR {
        let key: RSAPrivateKey
        if let pem = options.signingKeyPEM { key = try RSAPrivateKey(pem: pem) } else { key = try await SandboxState.generateSigningKey() }
        let state = SandboxState(options: options, signingKey: key)
        var configuration = ServerConfiguration()
        configuration.host = options.host
        configuration.port = options.port
        configuration.limits.maxBodyBytes = 64 * 1024
        // Handlers need the sandbox, which needs the bound port: they reach it through a box
        // filled before `start` returns (a request that races ahead of that gets 503).
        let holder = SendableBox<SandboxEHR?>(nil)
        let server = HTTPServer(configuration: configuration,
                                application: HTTPApplication(router: makeRouter(holder), logger: logger), logger: logger)
        try server.start()
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        let sandbox = SandboxEHR(options: options, state: state, server: server,
                                 baseURL: options.publicBaseURL ?? "http://\(host):\(server.port)")
        holder.set(sandbox)
        return sandbox
    }

    /// Stops the server, giving requests in flight two seconds to finish.
    public func shutdown() async { await server.shutdown(gracePeriod: .seconds(2)) }

    /// An EHR-launch URL for `patient` that sends the browser to `appLaunchURL`.
    public func ehrLaunchURL(app appLaunchURL: String, patient: String = "pat-1") -> String {
        baseURL + "/launch-ehr?app=" + PercentEncoding.encode(appLaunchURL) + "&patient=" + PercentEncoding.encode(patient)
    }

    static func makeRouter(_ holder: SendableBox<SandboxEHR?>) -> Router {
        var router = Router()
        @Sendable func sandbox() throws(HTTPError) -> SandboxEHR {
            guard let sandbox = holder.get() else { throw HTTPError(.serviceUnavailable, detail: "The sandbox is starting.") }
            return sandbox
        }
        router.get("/fhir/.well-known/smart-configuration") { _ in .json(try sandbox().smartConfiguration().bytes) }
        router.get("/fhir/.well-known/openid-configuration") { _ in
            let s = try sandbox()
            guard s.options.idTokenIssuer == nil, !s.options.openIDConfigurationAtOAuthServerOnly else {
                throw HTTPError(.notFound, detail: "No OpenID discovery here.")
            }
            return .json(s.openIDConfiguration().bytes)
        }
        router.get("/oauth2/.well-known/openid-configuration") { _ in
            let s = try sandbox()
            guard s.options.openIDConfigurationAtOAuthServerOnly else { throw HTTPError(.notFound, detail: "No OpenID discovery here.") }
            return .json(s.openIDConfiguration().bytes)
        }
        router.get("/fhir/metadata") { _ in let s = try sandbox(); return s.fhirJSON(s.capabilityStatement()) }
        router.get("/jwks") { _ in
            let s = try sandbox()
            if await s.state.jwksDown { throw HTTPError(.serviceUnavailable, detail: "The JWKS is down (sandbox fail mode).") }
            return .json(await s.jwks().bytes)
        }
        router.get("/authorize") { request in try await sandbox().authorize(request) }
        router.get("/authorize/approve") { request in try await sandbox().approve(request) }
        router.post("/token") { request in try await sandbox().token(request) }
        router.post("/revoke") { request in try await sandbox().revoke(request) }
        router.get("/launch-ehr") { request in try await sandbox().launchEHR(request) }
        router.get("/healthz") { _ in .json(Array(#"{"status":"ok"}"#.utf8)) }
        router.get("/smart-style.json") { _ in .json(SandboxEHR.smartStyle.bytes) }
        router.get("/fhir/*") { request in try await sandbox().fhir(request) }
        return router
    }

    func fhirJSON(_ value: JSONValue, status: HTTPStatus = .ok) -> Response {
        Response(status: status, contentType: "application/fhir+json", body: value.bytes)
    }
}

/// A value shared between the router's closures and `start`.
final class SendableBox<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func get() -> Value { value.withLock { $0 } }
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
}
