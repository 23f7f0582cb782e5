import Cryptography
import Foundation
import HTTPCore
import SMART
import Sessions

/// `GET /launch` (EHR launch) and `GET /login` (standalone launch): both redirect the
/// browser to the EHR's authorization endpoint with PKCE, `state` and `nonce`.
struct LaunchHandlers: Sendable {
    let services: BFFServices
    static let pendingLifetime: TimeInterval = 600

    func launch(_ request: Request) async throws -> Response {
        guard let iss = try request.singleQueryParameter("iss"), !iss.isEmpty else { throw Problems.badRequest("The iss parameter is required.") }
        guard let launch = try request.singleQueryParameter("launch"), !launch.isEmpty, launch.utf8.count <= 2048 else {
            throw Problems.badRequest("The launch parameter is required.")
        }
        guard !launch.hasControlCharacters else { throw Problems.badRequest("The launch parameter holds control characters.") }
        guard let registration = services.registration(for: iss) else {
            throw Problems.badRequest("The issuer is not registered with this BFF.", type: "unknown-issuer")
        }
        return try await authorize(request, registration: registration, launch: launch)
    }

    func login(_ request: Request) async throws -> Response {
        let registration: IssuerRegistration
        if let iss = try request.singleQueryParameter("iss") {
            guard let found = services.registration(for: iss) else {
                throw Problems.badRequest("The issuer is not registered with this BFF.", type: "unknown-issuer")
            }
            registration = found
        } else {
            guard services.registrations.count == 1, let only = services.registrations.values.first else {
                throw Problems.badRequest("The iss parameter is required when several issuers are registered.")
            }
            registration = only
        }
        return try await authorize(request, registration: registration, launch: nil)
    }

    private func authorize(_ request: Request, registration: IssuerRegistration, launch: String?) async throws -> Response {
        guard let target = services.returnPolicy.resolve(try request.singleQueryParameter("return_to")) else {
            throw Problems.badRequest("return_to is not on the allow-list (BFF_RETURN_ORIGINS).", type: "return-to-not-allowed")
        }
        let challenge = try request.singleQueryParameter("handoff_challenge")
        if let challenge {
            guard case .app = target else { throw Problems.badRequest("handoff_challenge needs a custom-scheme return_to.") }
            guard challenge.utf8.count == 43, Base64URL.decode(challenge)?.count == 32 else {
                throw Problems.badRequest("handoff_challenge must be BASE64URL(SHA256(verifier)).")
            }
        } else if case .app = target {
            throw Problems.badRequest("A custom-scheme return_to needs a handoff_challenge (mobile hand-off).")
        }
        let configuration = try await services.discovery(for: registration, logger: request.logger)
        let pkce = PKCE.make()
        let state = SecureRandom.token(bytes: 32)
        let nonce = SecureRandom.token(bytes: 32)
        let scope = launch == nil ? registration.standaloneScope : registration.scope
        let authorization = AuthorizationRequest(
            authorizationEndpoint: configuration.authorizationEndpoint, clientID: registration.clientID,
            redirectURI: services.configuration.redirectURI, scope: scope, state: state, audience: registration.iss,
            launch: launch, codeChallenge: pkce.challenge, nonce: nonce)
        try await services.store.savePending(state: state, PendingAuthorization(
            iss: registration.iss, codeVerifier: pkce.verifier, nonce: authorization.nonce, launch: launch,
            returnTo: target.url, handoffChallenge: challenge,
            expiresAt: services.now().addingTimeInterval(LaunchHandlers.pendingLifetime)))
        var response = Response.redirect(to: authorization.url)
        response.headers.replace("Cache-Control", "no-store")
        response.headers.add("Set-Cookie", services.loginCookie.set(state))
        return response
    }
}
