import Cryptography
import Foundation
import HTTPCore
import JSON

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

        /// The patient the token is confined to: its launch patient when every resource
        /// scope is a `patient/` one (no `user/` or `system/` scope widens it).
        var boundPatient: String? {
            let scopes = scope.split(separator: " ")
            guard let patient, !scopes.contains(where: { $0.hasPrefix("user/") || $0.hasPrefix("system/") }) else { return nil }
            return patient
        }
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

    // Switches for tests (initial values come from `SandboxEHR.Options`).
    /// Seconds an access token lives (`expires_in`).
    public private(set) var accessTokenLifetime: Int
    /// Seconds an authorization code stays redeemable.
    public private(set) var codeLifetime: Int
    /// Whether a refresh consumes the refresh token and returns a new one.
    public private(set) var rotateRefreshTokens: Bool
    /// When set, refresh grants fail with this OAuth error (e.g. `invalid_grant`).
    public private(set) var refreshError: String?
    /// When set, a refresh grants this scope (a narrower one, say) in place of the grant's.
    public private(set) var refreshScope: String?
    /// When set, the token endpoint answers every request with this status (e.g. 503).
    public private(set) var tokenEndpointStatus: Int?
    /// The OAuth `error` the token endpoint sends with `tokenEndpointStatus`.
    public private(set) var tokenEndpointError = "temporarily_unavailable"
    /// Every request to the token endpoint waits this long before it is answered (counted
    /// on arrival): an EHR whose token endpoint hangs.
    public private(set) var tokenDelay: Duration?
    /// While set, every request to the token endpoint waits (counted, after `tokenDelay`)
    /// until it is cleared, a minute at most: a test says when the EHR answers, where a
    /// delay would guess how long the rest of the test takes on a loaded machine.
    public private(set) var holdingTokenAnswers = false
    /// Seconds the token endpoint's clock reads behind the real time when it checks a client
    /// assertion's `exp`: an EHR whose clock lags the BFF's.
    public private(set) var assertionClockLag = 0
    /// The next authorization request is answered with `error=access_denied`.
    public private(set) var denyNextAuthorization = false
    /// Every FHIR request waits this long before it is answered.
    public private(set) var fhirDelay: Duration?
    /// The revocation endpoint waits this long before it answers (a slow EHR at logout).
    public private(set) var revocationDelay: Duration?
    /// Every FHIR request is answered 503 with an OperationOutcome.
    public private(set) var fhirDown: Bool
    /// Every authorized FHIR request gets a response that breaks off half-way through its body.
    public private(set) var closeMidBody: Bool
    /// FHIR responses claim this `Content-Encoding` whatever the request asked for (the body
    /// stays as it is): a server that compresses unasked.
    public private(set) var fhirContentEncoding: String?
    /// The JWKS endpoint answers 503 (an outage of the ID-token keys alone).
    public private(set) var jwksDown = false
    /// Searches page as HAPI FHIR's do: their links name the FHIR base itself,
    /// `{base}?_getpages=<search id>&_getpagesoffset=N&_count=C&_bundletype=searchset`.
    public private(set) var hapiPaging = false
    /// The user (`sub`) that ID tokens name: another value plays another clinician signing
    /// in on the same workstation.
    public private(set) var idTokenSubject = "user-prac-1"
    /// Members (of this JSON object) that every token response carries, replacing the
    /// sandbox's own of the same name: an EHR with odd context, a NUL in `intent`, say.
    public private(set) var tokenResponseExtras: JSONValue = [:]

    // Counters for tests.
    /// Requests to the token endpoint with `grant_type=refresh_token` (refused ones included).
    public private(set) var refreshCount = 0
    /// Requests to the token endpoint, any grant type, refused ones included.
    public private(set) var tokenRequests = 0
    /// Revocation requests from authenticated clients.
    public private(set) var revocations = 0
    /// Requests under `/fhir/` other than discovery and metadata, with or without a token.
    public private(set) var fhirRequests = 0
    /// The last 100 of those requests, oldest first.
    public private(set) var recentFHIRRequests: [ReceivedRequest] = []
    /// Of those requests, how many wait out the FHIR delay now, and at most at once.
    public private(set) var delayedFHIRRequests = 0
    public private(set) var peakDelayedFHIRRequests = 0
    /// Streamed bodies (`Binary/large`) sent to their end, and those whose connection failed
    /// first (the client closed it).
    public private(set) var streamsSentWhole = 0
    public private(set) var streamsCutShort = 0
    /// Refresh tokens the token endpoint would still take (neither used up nor revoked).
    public var liveRefreshTokens: Int { refreshTokens.count }
    /// Access tokens the FHIR server would still take (neither expired nor revoked).
    public var liveAccessTokens: Int { accessTokens.values.filter { $0.expiresAt > Date() }.count }

    init(options: SandboxEHR.Options, signingKey: RSAPrivateKey) {
        accessTokenLifetime = options.accessTokenLifetime
        codeLifetime = options.codeLifetime
        rotateRefreshTokens = options.rotateRefreshTokens
        refreshError = options.refreshError
        tokenEndpointStatus = options.tokenEndpointStatus
        fhirDelay = options.fhirDelay
        fhirDown = options.fhirDown
        closeMidBody = options.closeMidBody
        self.signingKey = signingKey
        signingKeyID = "sandbox-" + SecureRandom.token(bytes: 6)
        for client in options.clients { self.clients[client.id] = client }
    }

    /// Access tokens issued from now on live `seconds` (0 issues tokens that are already expired).
    public func setAccessTokenLifetime(_ seconds: Int) { accessTokenLifetime = seconds }
    /// Authorization codes issued from now on stay redeemable for `seconds`.
    public func setCodeLifetime(_ seconds: Int) { codeLifetime = seconds }
    /// Turns refresh-token rotation on or off.
    public func setRotateRefreshTokens(_ on: Bool) { rotateRefreshTokens = on }
    /// Makes refresh answer `400 {"error": error}` (e.g. `invalid_grant`), or nil to succeed.
    public func setRefreshError(_ error: String?) { refreshError = error }
    /// Makes refreshes grant `scope` in place of the original grant's, or nil to keep that.
    public func setRefreshScope(_ scope: String?) { refreshScope = scope }
    /// Makes the token endpoint answer with this HTTP status (e.g. 503), or nil.
    public func setTokenEndpointStatus(_ status: Int?, error: String = "temporarily_unavailable") {
        tokenEndpointStatus = status
        tokenEndpointError = error
    }
    /// Delays every token endpoint answer by `delay`, or not at all with nil.
    public func setTokenDelay(_ delay: Duration?) { tokenDelay = delay }
    /// Makes the token endpoint's clock read `seconds` behind when it checks client assertions.
    public func setAssertionClockLag(_ seconds: Int) { assertionClockLag = seconds }
    /// Holds every token endpoint answer from now on (true) until released (false).
    public func holdTokenAnswers(_ on: Bool) { holdingTokenAnswers = on }
    /// Answers the next authorization request with `error=access_denied`.
    public func denyNext() { denyNextAuthorization = true }
    /// Delays every FHIR response by `delay`, or not at all with nil.
    public func setFHIRDelay(_ delay: Duration?) { fhirDelay = delay }

    /// A FHIR request starts (true) or ends (false) its delay.
    func delaying(_ starts: Bool) {
        delayedFHIRRequests += starts ? 1 : -1
        peakDelayedFHIRRequests = max(peakDelayedFHIRRequests, delayedFHIRRequests)
    }
    /// Makes the revocation endpoint wait `delay` before answering, or answer at once (nil).
    public func setRevocationDelay(_ delay: Duration?) { revocationDelay = delay }
    /// Makes the FHIR server answer 503 (an outage that still accepts connections).
    public func setFHIRDown(_ down: Bool) { fhirDown = down }
    /// Makes FHIR responses break off half-way through their declared body.
    public func setCloseMidBody(_ on: Bool) { closeMidBody = on }
    /// Makes FHIR responses claim `coding` as their `Content-Encoding`, or stops it with nil.
    public func setFHIRContentEncoding(_ coding: String?) { fhirContentEncoding = coding }
    /// Makes the JWKS endpoint answer 503, or serve again.
    public func setJWKSDown(_ down: Bool) { jwksDown = down }
    /// Turns HAPI FHIR's style of paging links on or off.
    public func setHAPIPaging(_ on: Bool) { hapiPaging = on }
    /// Makes ID tokens issued from now on name the user `sub`.
    public func setIDTokenSubject(_ sub: String) { idTokenSubject = sub }
    /// Makes token responses from now on carry the members of `extras` (a JSON object).
    public func setTokenResponseExtras(_ extras: JSONValue) { tokenResponseExtras = extras }
    /// Registers (or replaces) a client.
    public func register(_ client: SandboxClient) { clients[client.id] = client }
    /// Zeroes the counters and forgets the recorded FHIR requests.
    public func resetCounters() {
        refreshCount = 0; tokenRequests = 0; revocations = 0; fhirRequests = 0; recentFHIRRequests = []; peakDelayedFHIRRequests = 0
        streamsSentWhole = 0; streamsCutShort = 0
    }
    /// The key IDs the JWKS publishes, the current signing key first.
    public var keyIDs: [String] { [signingKeyID] + retiredKeys.map(\.id) }

    /// Signs with a new key from now on; the old one stays in the JWKS unless `keepOld` is false.
    public func rotateSigningKey(keepOld: Bool = true) async throws {
        let key = try await SandboxState.generateSigningKey()
        if keepOld { retiredKeys.append((signingKeyID, signingKey)) }
        signingKey = key
        signingKeyID = "sandbox-" + SecureRandom.token(bytes: 6)
    }

    /// A new 2048-bit signing key, made on a thread of its own: seconds of CPU under load,
    /// which must not hold a thread of the concurrency pool.
    static func generateSigningKey() async throws -> RSAPrivateKey {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<RSAPrivateKey, any Error>) in
            Thread { done.resume(with: Result { try RSAPrivateKey.generate(bits: 2048) }) }.start()
        }
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

    func countStream(sentWhole: Bool) {
        if sentWhole { streamsSentWhole += 1 } else { streamsCutShort += 1 }
    }

    func countToken(refresh: Bool) {
        tokenRequests += 1
        if refresh { refreshCount += 1 }
    }

    func countRevocation() { revocations += 1 }

    /// Whether the next authorization request is to be denied; clears the switch.
    func takeDenial() -> Bool {
        defer { denyNextAuthorization = false }
        return denyNextAuthorization
    }

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

    /// Whether `url` is on the origin (scheme, host, port) of a registered client's redirect
    /// URI: where the sandbox sends a browser on an EHR launch. A real EHR launches only the
    /// launch URLs registered with it, so it is no open redirect.
    func isRegisteredAppOrigin(_ url: String) -> Bool {
        guard let origin = Origin.of(url) else { return false }
        return clients.values.contains { $0.redirectURIs.contains { Origin.of($0) == origin } }
    }
    func launch(_ id: String) -> (patient: String, encounter: String)? { launches[id] }
}
