import Cryptography
import Foundation
import HTTPCore
import JSON
import JWTVerification
import Logging

/// A SMART EHR simulator for development, demos and tests: SMART and OpenID discovery, a
/// JWKS, an authorization endpoint (patient picker for standalone launch, immediate
/// approval for EHR launch), a token endpoint that checks PKCE, client authentication and
/// single-use codes, RS256 ID tokens, refresh with rotation, revocation, and a FHIR R4
/// read/search server over a small bundled data set.
public final class SandboxEHR: Sendable {
    public struct Options: Sendable {
        public var host = "127.0.0.1"
        /// 0 picks a free port.
        public var port = 9090
        public var accessTokenLifetime = 3600
        public var clients: [SandboxClient] = [SandboxClient(id: "smart-bff-demo", redirectURIs: ["http://127.0.0.1:8080/callback"])]
        /// Advertise and send RFC 9207 `iss` in authorization responses.
        public var issParameter = true
        public init() {}
    }

    public let state: SandboxState
    let server: HTTPServer
    let data = SandboxData()
    public let baseURL: String
    let options: Options

    /// The FHIR base URL (`iss`).
    public var fhirBaseURL: String { baseURL + "/fhir" }
    /// The ID tokens' issuer.
    public var issuer: String { fhirBaseURL }
    public var port: Int { server.port }

    private init(options: Options, state: SandboxState, server: HTTPServer, baseURL: String) {
        self.options = options
        self.state = state
        self.server = server
        self.baseURL = baseURL
    }

    /// Starts the sandbox on its own HTTP server.
    public static func start(options: Options = Options(), logger: Logger = Logger(label: "smart-bff.sandbox")) async throws -> SandboxEHR {
        let state = try SandboxState(accessTokenLifetime: options.accessTokenLifetime, clients: options.clients)
        var configuration = ServerConfiguration()
        configuration.host = options.host
        configuration.port = options.port
        configuration.limits.maxBodyBytes = 64 * 1024
        // Handlers need the sandbox, which needs the bound port: they reach it through a box
        // filled before `start` returns (no request can arrive before anyone knows the port).
        let holder = SendableBox<SandboxEHR?>(nil)
        let server = HTTPServer(configuration: configuration,
                                application: HTTPApplication(router: makeRouter(holder), logger: logger), logger: logger)
        try server.start()
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        let sandbox = SandboxEHR(options: options, state: state, server: server, baseURL: "http://\(host):\(server.port)")
        holder.set(sandbox)
        return sandbox
    }

    public func shutdown() async { await server.shutdown(gracePeriod: .seconds(2)) }

    /// An EHR-launch URL for `patient` that sends the browser to `appLaunchURL`.
    public func ehrLaunchURL(app appLaunchURL: String, patient: String = "pat-1") -> String {
        baseURL + "/launch-ehr?app=" + PercentEncoding.encode(appLaunchURL) + "&patient=" + PercentEncoding.encode(patient)
    }

    static func makeRouter(_ holder: SendableBox<SandboxEHR?>) -> Router {
        var router = Router()
        @Sendable func sandbox() -> SandboxEHR { holder.get()! }
        router.get("/fhir/.well-known/smart-configuration") { _ in .json(sandbox().smartConfiguration().bytes) }
        router.get("/fhir/.well-known/openid-configuration") { _ in .json(sandbox().openIDConfiguration().bytes) }
        router.get("/fhir/metadata") { _ in sandbox().fhirJSON(sandbox().capabilityStatement()) }
        router.get("/jwks") { _ in .json(await sandbox().jwks().bytes) }
        router.get("/authorize") { request in try await sandbox().authorize(request) }
        router.get("/authorize/approve") { request in try await sandbox().approve(request) }
        router.post("/token") { request in await sandbox().token(request) }
        router.post("/revoke") { request in await sandbox().revoke(request) }
        router.get("/launch-ehr") { request in try await sandbox().launchEHR(request) }
        router.get("/healthz") { _ in .json(Array(#"{"status":"ok"}"#.utf8)) }
        router.get("/fhir/*") { request in await sandbox().fhir(request) }
        return router
    }

    func smartConfiguration() -> JSONValue {
        var config: JSONValue = [
            "issuer": .string(issuer), "jwks_uri": .string(baseURL + "/jwks"),
            "authorization_endpoint": .string(baseURL + "/authorize"), "token_endpoint": .string(baseURL + "/token"),
            "revocation_endpoint": .string(baseURL + "/revoke"),
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS384", "ES384"],
            "scopes_supported": ["openid", "fhirUser", "launch", "launch/patient", "patient/*.rs", "patient/*.read", "user/*.rs", "offline_access", "online_access"],
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "capabilities": ["launch-ehr", "launch-standalone", "client-public", "client-confidential-symmetric",
                             "client-confidential-asymmetric", "context-ehr-patient", "context-ehr-encounter",
                             "context-standalone-patient", "permission-offline", "permission-patient", "permission-v1",
                             "permission-v2", "sso-openid-connect"],
        ]
        if options.issParameter { config = config.setting("authorization_response_iss_parameter_supported", true) }
        return config
    }

    func openIDConfiguration() -> JSONValue {
        ["issuer": .string(issuer), "jwks_uri": .string(baseURL + "/jwks"), "authorization_endpoint": .string(baseURL + "/authorize"),
         "token_endpoint": .string(baseURL + "/token"), "response_types_supported": ["code"],
         "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"]]
    }

    func capabilityStatement() -> JSONValue {
        let oauth: JSONValue = [
            "url": "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris",
            "extension": [["url": "authorize", "valueUri": .string(baseURL + "/authorize")],
                          ["url": "token", "valueUri": .string(baseURL + "/token")],
                          ["url": "revoke", "valueUri": .string(baseURL + "/revoke")]],
        ]
        return ["resourceType": "CapabilityStatement", "status": "active", "kind": "instance", "fhirVersion": "4.0.1",
                "format": ["json"], "rest": [["mode": "server", "security": ["extension": [oauth]],
                                              "resource": .array(["Patient", "Observation", "Condition", "MedicationRequest", "Encounter", "Practitioner"].map {
                                                  ["type": .string($0), "interaction": [["code": "read"], ["code": "search-type"]]]
                                              })]]]
    }

    func jwks() async -> JSONValue {
        let keys = await state.jwks()
        return ["keys": .array(keys.map { JWK.encode($0.1.publicKey, keyID: $0.0) })]
    }

    func fhirJSON(_ value: JSONValue, status: HTTPStatus = .ok) -> Response {
        Response(status: status, contentType: "application/fhir+json", body: value.bytes)
    }
}

import Synchronization

final class SendableBox<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func get() -> Value { value.withLock { $0 } }
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
}
