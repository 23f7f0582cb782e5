import BFFTesting
import Cryptography
import Foundation
import HTTPClient
import HTTPCore
import JSON
import Logging
import Sandbox

/// A sandbox on a free loopback port with one client per authentication method, and the
/// calls a SMART client makes to it, over real sockets (our HTTP client, no redirects
/// followed).
struct SandboxHarness: Sendable {
    static let redirectURI = "http://app.example/cb"
    /// Needs form-encoding inside the Basic credentials (RFC 6749 §2.3.1).
    static let secret = "s3cr:et &+/é"

    let sandbox: SandboxEHR
    let http = HTTPClient()
    /// The private halves of the `rs-app` (RS384) and `es-app` (ES384) registrations.
    let rsaKey: RSAPrivateKey
    let ecKey: P384PrivateKey

    /// Client keys shared by every test.
    private static let clientRSAKey = Result { try RSAPrivateKey(pem: ClientKeyFixture.rsaPEM) }
    private static let clientECKey = Result { try P384PrivateKey.generate() }

    /// Runs `body` against a fresh sandbox and always shuts it down.
    static func with<T: Sendable>(_ configure: (inout SandboxEHR.Options) -> Void = { _ in },
                                  _ body: (SandboxHarness) async throws -> T) async throws -> T {
        let rsaKey = try SandboxHarness.clientRSAKey.get(), ecKey = try SandboxHarness.clientECKey.get()
        var options = SandboxEHR.Options()
        options.port = 0
        options.signingKeyPEM = TestKeys.sandboxSigningKeyPEM
        let redirects = [redirectURI, "http://app.example/other"]
        options.clients = [
            SandboxClient(id: "public-app", redirectURIs: redirects),
            SandboxClient(id: "secret-app", redirectURIs: redirects, secret: secret),
            SandboxClient(id: "rs-app", redirectURIs: redirects, publicKeyPEM: try rsaKey.publicKey.pem),
            SandboxClient(id: "es-app", redirectURIs: redirects, publicKeyPEM: try ecKey.publicKey.pem),
        ]
        configure(&options)
        let sandbox = try await SandboxEHR.start(options: options, logger: Logger(label: "sandbox") { _ in SwiftLogNoOpLogHandler() })
        let harness = SandboxHarness(sandbox: sandbox, rsaKey: rsaKey, ecKey: ecKey)
        do {
            let result = try await body(harness)
            await sandbox.shutdown()
            return result
        } catch {
            await sandbox.shutdown()
            throw error
        }
    }

    // MARK: Plain HTTP

    func get(_ url: String, headers: [(String, String)] = []) async throws -> HTTPClientResponse {
        try await http.execute(HTTPClientRequest(url: url.hasPrefix("/") ? sandbox.baseURL + url : url, headers: headers))
    }

    func postForm(_ path: String, _ fields: [(String, String)], headers: [(String, String)] = []) async throws -> HTTPClientResponse {
        try await http.execute(HTTPClientRequest(method: "POST", url: sandbox.baseURL + path,
                                                 headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers,
                                                 body: Array(PercentEncoding.formEncode(fields).utf8)))
    }

    // MARK: Authorization

    /// A fresh PKCE pair (RFC 7636 S256).
    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = SecureRandom.token(bytes: 32)
        return (verifier, Base64URL.encode(SHA256.hash(Array(verifier.utf8))))
    }

    /// The authorization request a SMART client sends; nil values are left out.
    func authorizeURL(client: String = "public-app", redirectURI: String? = SandboxHarness.redirectURI,
                      scope: String = "openid fhirUser patient/*.rs offline_access", challenge: String?,
                      method: String? = "S256", state: String? = "st-1", nonce: String? = "n-1", launch: String? = nil,
                      aud: String? = nil, responseType: String = "code") -> String {
        let items: [(String, String?)] = [
            ("response_type", responseType), ("client_id", client), ("redirect_uri", redirectURI), ("scope", scope),
            ("state", state), ("nonce", nonce), ("aud", aud ?? sandbox.fhirBaseURL), ("launch", launch),
            ("code_challenge", challenge), ("code_challenge_method", method),
        ]
        return sandbox.baseURL + "/authorize?" + PercentEncoding.formEncode(items.compactMap { name, value in value.map { (name, $0) } })
    }

    /// Authorizes at once (EHR launch for `patient`, or no patient context) and returns the code.
    func code(client: String = "public-app", scope: String = "launch openid fhirUser patient/*.rs offline_access",
              patient: String? = "pat-1", challenge: String, nonce: String = "n-1") async throws -> String {
        let launch = try await patient.asyncMap { try await launchID(patient: $0) }
        let response = try await get(authorizeURL(client: client, scope: scope, challenge: challenge, nonce: nonce, launch: launch))
        guard response.status == 302, let location = response.header("Location"), let code = Self.query(location)["code"] else {
            throw HarnessError.unexpected("authorize answered \(response.status) \(response.header("Location") ?? "")")
        }
        return code
    }

    /// Opens an EHR launch for `patient` and returns its launch id.
    func launchID(patient: String) async throws -> String {
        let entry = try await get(sandbox.ehrLaunchURL(app: "http://app.example/launch", patient: patient))
        guard entry.status == 302, let location = entry.header("Location"), let launch = Self.query(location)["launch"] else {
            throw HarnessError.unexpected("launch-ehr answered \(entry.status)")
        }
        return launch
    }

    // MARK: Token endpoint

    /// How a token request authenticates its client.
    enum ClientAuth: Sendable {
        case publicClient(String)
        case basic(id: String, secret: String)
        case assertion(String)
        case none
    }

    func token(_ fields: [(String, String)], auth: ClientAuth) async throws -> HTTPClientResponse {
        var form = fields, headers: [(String, String)] = []
        switch auth {
        case .publicClient(let id): form.append(("client_id", id))
        case let .basic(id, secret):
            let pair = PercentEncoding.encode(id) + ":" + PercentEncoding.encode(secret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        case .assertion(let jwt):
            form += [("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", jwt)]
        case .none: break
        }
        return try await postForm("/token", form, headers: headers)
    }

    func exchange(code: String, verifier: String, redirectURI: String = SandboxHarness.redirectURI,
                  auth: ClientAuth = .publicClient("public-app")) async throws -> HTTPClientResponse {
        try await token([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                         ("code_verifier", verifier)], auth: auth)
    }

    /// Runs a whole EHR launch for `patient` and returns the token response's JSON.
    func accessTokens(patient: String? = "pat-1", scope: String = "launch openid fhirUser patient/*.rs offline_access",
                      nonce: String = "n-1") async throws -> JSONValue {
        let (verifier, challenge) = Self.pkce()
        let code = try await code(scope: scope, patient: patient, challenge: challenge, nonce: nonce)
        let response = try await exchange(code: code, verifier: verifier)
        guard response.status == 200 else { throw HarnessError.unexpected("token answered \(response.status)") }
        return try JSONParser.parse(response.body)
    }

    /// A `private_key_jwt` client assertion (RFC 7523), signed RS384 or ES384.
    func assertion(client: String, algorithm: String, audience: String? = nil, expiresIn: Int = 240,
                   jti: String = SecureRandom.token(bytes: 12), subject: String? = nil,
                   rsaKey: RSAPrivateKey? = nil) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        let header: JSONValue = ["alg": .string(algorithm), "typ": "JWT", "kid": "k1"]
        let claims: JSONValue = ["iss": .string(client), "sub": .string(subject ?? client),
                                 "aud": .string(audience ?? sandbox.baseURL + "/token"),
                                 "exp": .number(Double(now + expiresIn)), "iat": .number(Double(now)), "jti": .string(jti)]
        let input = Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
        let signature = algorithm == "ES384" ? try ecKey.signES384(Array(input.utf8))
                                             : try (rsaKey ?? self.rsaKey).signPKCS1SHA384(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    // MARK: Parsing

    static func query(_ url: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in URLComponents(string: url)?.queryItems ?? [] { result[item.name] = item.value ?? "" }
        return result
    }

    static func json(_ response: HTTPClientResponse) throws -> JSONValue { try JSONParser.parse(response.body) }
}

enum HarnessError: Error { case unexpected(String) }

extension Optional {
    func asyncMap<U>(_ transform: (Wrapped) async throws -> U) async rethrows -> U? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
