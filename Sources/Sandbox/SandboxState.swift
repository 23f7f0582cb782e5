import Cryptography
import Foundation
import JSON

/// A client the sandbox knows.
public struct SandboxClient: Sendable {
    public var id: String
    public var redirectURIs: [String]
    /// `client_secret_basic` when set.
    public var secret: String?
    /// PEM public key (RSA for RS384, P-384 for ES384) for `private_key_jwt` when set.
    public var publicKeyPEM: String?

    public init(id: String, redirectURIs: [String], secret: String? = nil, publicKeyPEM: String? = nil) {
        self.id = id
        self.redirectURIs = redirectURIs
        self.secret = secret
        self.publicKeyPEM = publicKeyPEM
    }
}

/// A FHIR request as the sandbox received it (tests check header hygiene with it).
public struct ReceivedRequest: Sendable {
    public let method: String
    public let target: String
    public let headers: [(name: String, value: String)]
}

/// Everything the sandbox remembers, and the switches tests use to make it misbehave.
public actor SandboxState {
    struct Grant: Sendable {
        let clientID: String
        let redirectURI: String
        let challenge: String
        let scope: String
        let nonce: String?
        let patient: String?
        let encounter: String?
        let expiresAt: Date
    }

    struct AccessToken: Sendable {
        let clientID: String
        let scope: String
        let patient: String?
        let expiresAt: Date
    }

    struct RefreshGrant: Sendable {
        let clientID: String
        let scope: String
        let patient: String?
        let encounter: String?
    }

    var clients: [String: SandboxClient] = [:]
    var codes: [String: Grant] = [:]
    var launches: [String: (patient: String, encounter: String)] = [:]
    var accessTokens: [String: AccessToken] = [:]
    var refreshTokens: [String: RefreshGrant] = [:]
    var seenAssertionIDs: Set<String> = []
    var signingKey: RSAPrivateKey
    var signingKeyID: String
    var retiredKeys: [(id: String, key: RSAPrivateKey)] = []

    // Switches for tests.
    public var accessTokenLifetime: Int
    public var rotateRefreshTokens = true
    public var refreshError: String?
    public var tokenEndpointStatus: Int?
    public var denyNextAuthorization = false
    public var fhirDelay: Duration?
    public var closeMidBody = false

    // Counters for tests.
    public private(set) var refreshCount = 0
    public private(set) var tokenRequests = 0
    public private(set) var revocations = 0
    public private(set) var fhirRequests = 0
    public private(set) var recentFHIRRequests: [ReceivedRequest] = []

    init(accessTokenLifetime: Int, clients: [SandboxClient]) throws {
        self.accessTokenLifetime = accessTokenLifetime
        signingKey = try RSAPrivateKey.generate(bits: 2048)
        signingKeyID = "sandbox-" + SecureRandom.token(bytes: 6)
        for client in clients { self.clients[client.id] = client }
    }

    public func setAccessTokenLifetime(_ seconds: Int) { accessTokenLifetime = seconds }
    public func setRotateRefreshTokens(_ on: Bool) { rotateRefreshTokens = on }
    /// Makes refresh answer `{"error": error}` (e.g. `invalid_grant`), or nil to succeed.
    public func setRefreshError(_ error: String?) { refreshError = error }
    /// Makes the token endpoint answer with this HTTP status (e.g. 503), or nil.
    public func setTokenEndpointStatus(_ status: Int?) { tokenEndpointStatus = status }
    public func denyNext() { denyNextAuthorization = true }
    public func setFHIRDelay(_ delay: Duration?) { fhirDelay = delay }
    public func setCloseMidBody(_ on: Bool) { closeMidBody = on }
    public func register(_ client: SandboxClient) { clients[client.id] = client }
    public func resetCounters() { refreshCount = 0; tokenRequests = 0; revocations = 0; fhirRequests = 0; recentFHIRRequests = [] }

    /// Signs with a new key from now on; the old one stays in the JWKS.
    public func rotateSigningKey(keepOld: Bool = true) throws {
        if keepOld { retiredKeys.append((signingKeyID, signingKey)) }
        signingKey = try RSAPrivateKey.generate(bits: 2048)
        signingKeyID = "sandbox-" + SecureRandom.token(bytes: 6)
    }

    /// Expires every access token now (refresh tokens stay valid).
    public func expireAccessTokens() {
        for (token, grant) in accessTokens {
            accessTokens[token] = AccessToken(clientID: grant.clientID, scope: grant.scope, patient: grant.patient, expiresAt: .distantPast)
        }
    }

    func record(_ request: ReceivedRequest) {
        fhirRequests += 1
        recentFHIRRequests.append(request)
        if recentFHIRRequests.count > 100 { recentFHIRRequests.removeFirst() }
    }

    func countToken(refresh: Bool) {
        tokenRequests += 1
        if refresh { refreshCount += 1 }
    }

    func countRevocation() { revocations += 1 }

    func newLaunch(patient: String) -> String {
        let id = SecureRandom.token(bytes: 12)
        let encounter = "enc-" + (patient.split(separator: "-").last.map(String.init) ?? "1")
        launches[id] = (patient, encounter)
        return id
    }

    func issueCode(_ grant: Grant) -> String {
        let code = SecureRandom.token(bytes: 24)
        codes[code] = grant
        return code
    }

    func takeCode(_ code: String) -> Grant? { codes.removeValue(forKey: code) }

    func noteAssertion(_ jti: String) -> Bool { seenAssertionIDs.insert(jti).inserted }

    func issueAccessToken(clientID: String, scope: String, patient: String?) -> (String, Int) {
        let token = SecureRandom.token(bytes: 24)
        accessTokens[token] = AccessToken(clientID: clientID, scope: scope, patient: patient,
                                          expiresAt: Date().addingTimeInterval(Double(accessTokenLifetime)))
        return (token, accessTokenLifetime)
    }

    func issueRefreshToken(_ grant: RefreshGrant) -> String {
        let token = SecureRandom.token(bytes: 24)
        refreshTokens[token] = grant
        return token
    }

    func refreshGrant(_ token: String, consume: Bool) -> RefreshGrant? {
        consume ? refreshTokens.removeValue(forKey: token) : refreshTokens[token]
    }

    func revoke(_ token: String) {
        accessTokens[token] = nil
        refreshTokens[token] = nil
    }

    func validAccessToken(_ token: String) -> AccessToken? {
        guard let t = accessTokens[token], t.expiresAt > Date() else { return nil }
        return t
    }

    func jwks() -> [(String, RSAPrivateKey)] { [(signingKeyID, signingKey)] + retiredKeys }
    func currentKey() -> (String, RSAPrivateKey) { (signingKeyID, signingKey) }
    func client(_ id: String) -> SandboxClient? { clients[id] }
    func launch(_ id: String) -> (patient: String, encounter: String)? { launches[id] }
}
