import Cryptography
import Foundation
import HTTPCore
import JSON
import JWTVerification
import Logging
import SMART
import Sessions

/// `GET /callback`: consumes `state` once, checks the RFC 9207 issuer, exchanges the code,
/// validates the ID token, and starts a launch in a new session, which takes over the
/// browser's earlier launches of the same user. No session and no cookie on any failure.
struct CallbackHandler: Sendable {
    let services: BFFServices
    static let handoffLifetime: TimeInterval = 60
    /// A hand-off's session lives this long until its code is exchanged (which gives it the
    /// session lifetime): one whose code is never used expires soon after it, and the
    /// sweeper revokes its tokens, rather than leave them live for the whole session TTL.
    static let unclaimedHandoffSessionLifetime: TimeInterval = handoffLifetime + 60

    func callback(_ request: Request) async throws -> Response {
        // Each parameter at most once, checked before the state is used up.
        let (iss, error, errorDescription, code) = (try request.singleQueryParameter("iss"), try request.singleQueryParameter("error"),
                                                     try request.singleQueryParameter("error_description"),
                                                     try request.singleQueryParameter("code"))
        guard let state = try request.singleQueryParameter("state"), !state.isEmpty, state.utf8.count <= 512, !state.hasControlCharacters else {
            throw Problems.badRequest("The state parameter is missing.", type: "invalid-state")
        }
        // Before the state is used up: a forged callback leaves the real sign-in possible.
        guard let binding = services.loginCookie.binding(of: state, in: request) else {
            throw Problems.badRequest("This sign-in was not started in this browser, or it was already completed.", type: "invalid-state")
        }
        guard let pending = try await services.store.consumePending(state: state, now: services.now()) else {
            throw Problems.badRequest("Unknown, expired or already used state.", type: "invalid-state")
        }
        guard let registration = services.registration(for: pending.iss) else {
            throw Problems.badRequest("The issuer is no longer registered.", type: "unknown-issuer")
        }
        let configuration = try await services.discovery(for: registration, logger: request.logger)
        try checkIssuerParameter(iss, configuration: configuration, registration: registration)
        if let error {
            let description = CallbackHandler.printable(errorDescription ?? "", limit: 300)
            throw HTTPError(.forbidden, type: Problems.base + "authorization-denied", title: "The EHR did not authorize the app",
                            detail: CallbackHandler.printable(error, limit: 64) + (description.isEmpty ? "" : ": " + description))
        }
        guard let code, !code.isEmpty else { throw Problems.badRequest("The code parameter is missing.") }

        let tokens: TokenResponse
        do {
            tokens = try await services.tokenClient.exchange(
                code: code, verifier: pending.codeVerifier, redirectURI: services.configuration.redirectURI,
                clientID: registration.clientID, authentication: services.authentication(for: registration),
                tokenEndpoint: configuration.tokenEndpoint)
        } catch {
            services.logUpstreamFailure("code exchange failed", iss: registration.iss, error, logger: request.logger)
            throw Problems.upstream(error.kind == .timeout ? .gatewayTimeout : .badGateway, "Code exchange failed: \(error.detail)")
        }
        // From here a refused sign-in hands the tokens it was given back to the EHR: no launch holds them.
        let identity: IDTokenClaims?
        do {
            // The launch context is kept in text and jsonb columns, which cannot hold U+0000.
            guard !tokens.holdsNUL else {
                throw Problems.upstream(.badGateway, "Code exchange failed: token response holds a NUL character")
            }
            identity = try await validateIdentity(tokens, pending: pending, configuration: configuration, registration: registration,
                                                  logger: request.logger)
        } catch {
            await services.revoke(TokenSet(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, idToken: tokens.idToken,
                                           accessTokenExpiresAt: nil, responseJSON: ""), iss: registration.iss)
            throw error
        }
        return try await startSession(request, state: state, binding: binding, pending: pending, registration: registration,
                                      tokens: tokens, identity: identity)
    }

    /// RFC 9207: `iss` must be the authorization server's issuer when present, and must be
    /// present when the server says it sends it. Compared byte for byte, but for trailing
    /// slashes: where discovery names no issuer, the expected one is `id_token_issuer` or
    /// the FHIR base, whose trailing slash the registration drops.
    private func checkIssuerParameter(_ iss: String?, configuration: SMARTConfiguration, registration: IssuerRegistration) throws {
        let expected = registration.authorizationServerIssuer(discovered: configuration.issuer)
        if let iss {
            guard IssuerRegistration.normalize(iss).utf8.elementsEqual(IssuerRegistration.normalize(expected).utf8) else {
                throw Problems.badRequest("The authorization response came from another issuer (RFC 9207).", type: "issuer-mismatch")
            }
        } else if configuration.issParameterSupported {
            throw Problems.badRequest("The authorization response lacks the iss parameter the EHR promises (RFC 9207).", type: "issuer-mismatch")
        }
    }

    /// Where the EHR's ID-token keys are: its discovery's `jwks_uri`, else the one the
    /// OpenID issuer's own discovery document names.
    private func jwksURL(_ configuration: SMARTConfiguration, issuer: String, registration: IssuerRegistration,
                         logger: Logger) async throws -> String {
        if let known = configuration.jwksURI { return known }
        do {
            return try await services.metadata.jwksURI(ofIssuer: issuer, for: registration.iss)
        } catch {
            logger.warning("ID token rejected", metadata: ["smart.iss": .string(registration.iss), "jwt.reason": .string(error.detail)])
            throw HTTPError(.unauthorized, type: Problems.base + "id-token-rejected", detail: "The EHR publishes no JWKS.")
        }
    }

    private func validateIdentity(_ tokens: TokenResponse, pending: PendingAuthorization, configuration: SMARTConfiguration,
                                  registration: IssuerRegistration, logger: Logger) async throws -> IDTokenClaims? {
        // A nonce went out exactly when `openid` was asked for: then an ID token is required,
        // whatever the EHR's `scope` says. Were the granted scope to decide, a response that
        // leaves out `openid` and the token would start a session with no identity checked
        // and the nonce never compared. A token sent unasked is validated all the same.
        let scope = CallbackHandler.grantedScope(tokens, pending: pending, registration: registration)
        let required = pending.nonce != nil || AuthorizationRequest.hasScope(scope, "openid")
        guard required || tokens.idToken != nil else { return nil }
        guard let idToken = tokens.idToken else {
            throw HTTPError(.unauthorized, type: Problems.base + "id-token-rejected", detail: "The EHR returned no ID token.")
        }
        let issuer = registration.openIDIssuer(discovered: configuration.issuer)
        let jwksURL = try await jwksURL(configuration, issuer: issuer, registration: registration, logger: logger)
        do {
            let claims = try await services.idTokens.validate(idToken, issuer: issuer,
                                                               clientID: registration.clientID, nonce: pending.nonce, jwksURL: jwksURL)
            if let failure = await services.jwks.fetchFailure(issuer: issuer) {
                // Verified by the cached keys while the JWKS cannot be fetched: fine for now, not for long.
                await services.metadata.recordJWKS(registration.iss, "stale: the cached keys verified; fetching them again failed: \(failure)")
                logger.warning("EHR JWKS could not be fetched; its cached keys still verify",
                                        metadata: ["smart.iss": .string(registration.iss), "jwt.reason": .string(failure)])
            } else {
                await services.metadata.recordJWKS(registration.iss, "ok")
            }
            return claims
        } catch {
            // The token came from the EHR's token endpoint, not from the browser: a bad one is the
            // EHR's fault (its keys, its clock, its configuration), or an attack on that channel.
            if error.kind == .jwksUnavailable { await services.metadata.recordJWKS(registration.iss, "failed: \(error.reason)") }
            logger.warning("ID token rejected", metadata: ["smart.iss": .string(registration.iss), "jwt.reason": .string(error.reason)])
            throw HTTPError(.unauthorized, type: Problems.base + "id-token-rejected", detail: error.description)
        }
    }

    private func startSession(_ request: Request, state: String, binding: String, pending: PendingAuthorization, registration: IssuerRegistration,
                              tokens: TokenResponse, identity: IDTokenClaims?) async throws -> Response {
        let now = services.now()
        let ttl = TimeInterval(services.configuration.sessionTTL)
        let launchID = Identifier.make()
        let fhirUser = identity?.fhirUser
        let launch = LaunchRecord(idHash: Identifier.hash(launchID), iss: registration.iss, sub: identity?.subject ?? "",
                                  fhirUser: fhirUser, scope: CallbackHandler.grantedScope(tokens, pending: pending, registration: registration),
                                  patient: tokens.patient,
                                  contextJSON: CallbackHandler.context(tokens, fhirUser: fhirUser).serialized(), createdAt: now)
        let tokenSet = TokenSet(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, idToken: tokens.idToken,
                                accessTokenExpiresAt: tokens.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) },
                                responseJSON: tokens.raw.serialized())

        if let challenge = pending.handoffChallenge {
            // Mobile: a fresh session, reachable only through a one-time hand-off code.
            let sessionID = try await services.store.startSession(with: launch, tokens: tokenSet, replacing: nil,
                                                                  ttl: CallbackHandler.unclaimedHandoffSessionLifetime, now: now).sessionID
            let code = SecureRandom.token(bytes: 32)
            try await services.store.saveHandoff(code: code, sessionHash: Identifier.hash(sessionID), challenge: challenge,
                                                 expiresAt: now.addingTimeInterval(CallbackHandler.handoffLifetime))
            var response = noStore(.redirect(to: URLPolicy.settingQuery(pending.returnTo, [("handoff", code)])))
            response.headers.add("Set-Cookie", services.loginCookie.expire(state))
            return response
        }
        // Browser: a new session identifier at every login (no fixation). Earlier launches of
        // the same user carry over, so two tabs can hold two patients; another user's (a
        // shared workstation) end as at logout. One transaction: if it fails, the browser's
        // session and cookie stay as they were.
        // Two tabs' callbacks that overlap: the second to store its session joins the first's
        // (found through the login cookies, or through the browser's old session that the
        // first replaced), so that no session is left behind the other's cookie.
        let previous = services.cookie.read(from: request)
        let signIn = BrowserSignIn(binding: binding, otherBindings: services.loginCookie.otherBindings(in: request, besides: state))
        let id: String, ended: [(LaunchRecord, TokenSet)]
        do {
            (id, ended) = try await services.store.startSession(with: launch, tokens: tokenSet, replacing: previous, signIn: signIn,
                                                                ttl: ttl, now: now)
        } catch {
            // Nothing was stored (a database failure, a lock waited for too long): the tokens
            // this sign-in was given go back to the EHR, as for any refused sign-in.
            await services.revokeTokens(of: [(launch, tokenSet)])
            throw error
        }
        if let previous { services.proxyCache.invalidate(sessionHash: Identifier.hash(previous)) } // the old identifier stops working here too
        // In the background: the answer (and its cookie) goes out now, not after the EHR's
        // revocation round trips, which would let an overlapping tab's later sign-in answer
        // first and the browser keep this, replaced, session's cookie.
        if !ended.isEmpty { services.background.start { [services] in await services.revokeTokens(of: ended) } }
        var response = noStore(.redirect(to: URLPolicy.settingQuery(pending.returnTo, [("bff_launch", launchID)])))
        response.headers.add("Set-Cookie", services.cookie.set(id))
        response.headers.add("Set-Cookie", services.loginCookie.expire(state))
        return response
    }

    /// The scope the tokens carry: the answer's, or, when it names none, the one asked for
    /// (RFC 6749 §5.1).
    static func grantedScope(_ tokens: TokenResponse, pending: PendingAuthorization, registration: IssuerRegistration) -> String {
        tokens.scope ?? (pending.launch == nil ? registration.standaloneScope : registration.scope)
    }

    /// The SMART launch context a front end may see (never a token).
    static func context(_ t: TokenResponse, fhirUser: String?) -> JSONValue {
        func opt(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
        return ["patient": opt(t.patient), "encounter": opt(t.encounter), "fhirUser": opt(fhirUser),
                "need_patient_banner": t.needPatientBanner.map { .bool($0) } ?? .null, "smart_style_url": opt(t.smartStyleURL),
                "intent": opt(t.intent), "tenant": opt(t.tenant), "fhirContext": t.fhirContext ?? .null]
    }

    /// Text from the EHR for a problem detail: printable ASCII only, bounded.
    static func printable(_ s: String, limit: Int) -> String {
        String(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(limit).map(Character.init))
    }

    private func noStore(_ response: Response) -> Response {
        var r = response
        r.headers.replace("Cache-Control", "no-store")
        return r
    }
}
