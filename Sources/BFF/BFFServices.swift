import Foundation
import HTTPClient
import HTTPCore
import JWTVerification
import Logging
import PostgresStore
import SMART
import Sessions

/// Everything the handlers share, built once at the composition root.
public final class BFFServices: Sendable {
    public let configuration: BFFConfiguration
    public let store: any SessionStore
    public let metadata: EHRMetadata
    public let tokenClient: TokenClient
    public let idTokens: IDTokenValidator
    public let jwks: JWKSCache
    public let http: HTTPClient
    public let cookie: SessionCookie
    /// Binds each sign-in's `state` to the browser that started it.
    let loginCookie: LoginCookie
    public let returnPolicy: ReturnToPolicy
    public let registrations: [String: IssuerRegistration]
    public let clientKeys: [String: ClientSigningKey]
    public let metrics: Metrics
    public let audit: AuditWriter
    /// The FHIR proxy's short-lived session cache.
    let proxyCache: ProxySessionCache
    /// The FHIR proxy's log of EHRs it cannot reach.
    let upstreamFailures: UpstreamFailureLog
    /// Work that goes on after its request was answered (revocations), which shutdown lets finish.
    let background = BackgroundTasks()
    public let readiness: Readiness
    /// `/metrics`' count of unexpired sessions, at most 5 s old (one query for a burst of scrapes).
    let activeSessions = RecentResult<Int?>(lifetime: .seconds(5))
    /// The current time; tests move it.
    public let now: @Sendable () -> Date
    public let logger: Logger

    public init(configuration: BFFConfiguration, store: any SessionStore, http: HTTPClient, readiness: Readiness,
                auditTiming: AuditWriter.Timing = AuditWriter.Timing(), jwksMaxAge: Duration = .seconds(3600),
                jwksRefetchInterval: Duration = .seconds(10),
                now: @escaping @Sendable () -> Date = { Date() },
                logger: Logger) throws {
        self.configuration = configuration
        self.store = store
        self.http = http
        self.readiness = readiness
        self.now = now
        self.logger = logger
        metadata = EHRMetadata(client: http)
        tokenClient = TokenClient(client: http)
        jwks = JWKSCache(refetchInterval: jwksRefetchInterval, maxAge: jwksMaxAge) { url in
            let response = try await http.execute(HTTPClientRequest(url: url, headers: [("Accept", "application/json")],
                                                                    maxBodyBytes: EHRMetadata.maxDocumentBytes))
            guard response.status == 200 else { throw SMARTError(.discovery, "JWKS answered HTTP \(response.status)") }
            return response.body
        }
        idTokens = IDTokenValidator(jwks: jwks, now: now)
        cookie = SessionCookie(secure: configuration.isSecure, sameSiteNone: configuration.cookieSameSite == .none)
        loginCookie = LoginCookie(session: cookie, lifetime: Int(LaunchHandlers.pendingLifetime),
                                  keys: ([configuration.tokenKey.value] + configuration.tokenKeyFallbacks.value).map(LoginCookie.derivedKey))
        returnPolicy = ReturnToPolicy(publicURL: configuration.publicURL, allowed: configuration.returnOrigins)
        var registrations: [String: IssuerRegistration] = [:]
        var keys: [String: ClientSigningKey] = [:]
        for registration in configuration.issuers {
            registrations[registration.iss] = registration
            if let pem = registration.privateKeyPEM {
                keys[registration.iss] = try ClientSigningKey(pem: pem.value)
            }
        }
        self.registrations = registrations
        clientKeys = keys
        metrics = Metrics()
        audit = AuditWriter(store: store, logger: logger, timing: auditTiming)
        upstreamFailures = UpstreamFailureLog(logger: logger)
        proxyCache = ProxySessionCache(ttl: TimeInterval(configuration.proxyCacheSeconds), publicFHIRBase: configuration.publicURL + "/fhir",
                                       tokenKeys: [configuration.tokenKey.value] + configuration.tokenKeyFallbacks.value)
    }

    /// The registration for `iss` (trailing slashes ignored), or nil: unknown issuers are
    /// refused before any network call.
    public func registration(for iss: String) -> IssuerRegistration? {
        registrations[IssuerRegistration.normalize(iss)]
    }

    /// The EHR's SMART configuration (cached). A failure, a timeout too, is a 502 problem
    /// ("discovery failed", as the contract has it); its detail says which, and so does a
    /// warning on `logger` (the request's).
    func discovery(for registration: IssuerRegistration, logger: Logger) async throws -> SMARTConfiguration {
        let configuration: SMARTConfiguration
        do { configuration = try await metadata.configuration(for: registration.iss) } catch {
            logUpstreamFailure("EHR discovery failed", iss: registration.iss, error, logger: logger)
            throw Problems.upstream(.badGateway, "EHR discovery failed: \(error.detail)")
        }
        // Both issuers this registration's sign-ins go by: the authorization server's (RFC
        // 9207's `iss`, discovery's when it names one) and the ID tokens' (`id_token_issuer`
        // when set): either, were it another EHR's, would let this one pass for it.
        for issuer in [registration.authorizationServerIssuer(discovered: configuration.issuer),
                       registration.openIDIssuer(discovered: configuration.issuer)] {
            switch await otherRegistration(claiming: issuer, besides: registration) {
            case nil:
                continue
            case let .theirs(other)?:
                logger.warning("EHR discovery names another registered EHR's issuer: its sign-ins are refused",
                               metadata: ["smart.iss": .string(registration.iss), "smart.other_iss": .string(other)])
                throw Problems.upstream(.badGateway, "The EHR's discovery names the issuer of another registered EHR.")
            case let .unknown(other, error)?:
                logger.warning("EHR discovery names an issuer that may be another registered EHR's, whose discovery failed: its sign-ins are refused until it answers",
                               metadata: ["smart.iss": .string(registration.iss), "smart.other_iss": .string(other), "error.detail": .string(error.detail)])
                throw Problems.upstream(.badGateway, "The EHR's issuer cannot be told apart from another registered EHR's, whose discovery failed; try again later.")
            }
        }
        return configuration
    }

    /// Whose issuer a discovery's issuer may be, besides its own registration's.
    private enum OtherClaim: Sendable {
        /// Another registered EHR's (its `iss`).
        case theirs(String)
        /// Perhaps another registered EHR's: that one's discovery, which would say, failed.
        case unknown(String, SMARTError)
    }

    /// Whether `issuer` is another registered EHR's than `registration`'s. RFC 9207's mix-up
    /// defence holds only while each authorization server's issuer is its own: an EHR that
    /// claimed another's would get that one's codes, and its PKCE verifiers, sent to its own
    /// token endpoint. An issuer is another EHR's when it is that one's by registration (its
    /// FHIR base or `id_token_issuer`); or when that one's discovery names it, unless this
    /// registration makes it this one's: its FHIR base, its `id_token_issuer`, or an issuer on
    /// its FHIR base's origin (Epic's `…/oauth2` beside its `…/api/FHIR/R4`) when no other
    /// registration is on that origin. That one's
    /// discovery is fetched when it is not cached: an impostor must not pass because the EHR
    /// it claims to be has not been asked yet on this instance (after a restart, say); when
    /// the fetch fails, which EHR the issuer is cannot be told (`unknown`).
    private func otherRegistration(claiming issuer: String, besides registration: IssuerRegistration) async -> OtherClaim? {
        let wanted = IssuerRegistration.normalize(issuer)
        func owns(_ r: IssuerRegistration) -> Bool {
            ([r.iss] + (r.idTokenIssuer.map { [$0] } ?? [])).contains { IssuerRegistration.normalize($0) == wanted }
        }
        // On this registration's origin, and no other registration's: another EHR served on
        // this origin (two tenants of one host) may have its issuer there too.
        let origin = Origin.of(wanted)
        func onOrigin(_ r: IssuerRegistration) -> Bool {
            origin != nil && ([r.iss] + (r.idTokenIssuer.map { [$0] } ?? [])).contains { Origin.of($0) == origin }
        }
        let ownedHere = owns(registration)
            || (onOrigin(registration) && !registrations.values.contains { $0.iss != registration.iss && onOrigin($0) })
        let others = registrations.values.filter { $0.iss != registration.iss }
        if let other = others.first(where: owns) { return .theirs(other.iss) }
        guard !ownedHere else { return nil }
        // All at once: one slow EHR's discovery is waited for once, not added to the others'.
        let claims = await withTaskGroup(of: OtherClaim?.self) { group in
            for other in others {
                group.addTask { [metadata] in
                    do throws(SMARTError) {
                        let discovered = try await metadata.configuration(for: other.iss).issuer
                        return discovered.map { IssuerRegistration.normalize($0) == wanted } == true ? .theirs(other.iss) : nil
                    } catch {
                        return .unknown(other.iss, error)
                    }
                }
            }
            return await group.reduce(into: [OtherClaim]()) { if let claim = $1 { $0.append(claim) } }
        }
        return claims.first { if case .theirs = $0 { true } else { false } } ?? claims.first
    }

    /// Logs a request to the EHR that failed, as a warning on `logger` (the request's, so that
    /// the line carries its id): one that failed below HTTP (no connection, TLS, timeout) with
    /// the client's detail, which names the cause (an untrusted certificate, say) that the
    /// problem response leaves out; one the EHR answered with an error with what the problem
    /// says (its status, its OAuth error code).
    func logUpstreamFailure(_ message: Logger.Message, iss: String, _ error: SMARTError, logger: Logger) {
        logger.warning(message, metadata: ["smart.iss": .string(iss), "error.detail": .string(error.cause?.debugDescription ?? error.detail)])
    }

    /// How smart-bff authenticates to this EHR's token endpoint.
    func authentication(for registration: IssuerRegistration) -> ClientAuthentication {
        if let key = clientKeys[registration.iss], let kid = registration.privateKeyID { return .privateKeyJWT(key: key, keyID: kid) }
        if let secret = registration.clientSecret { return .secretBasic(secret: secret.value) }
        return .none
    }
}
