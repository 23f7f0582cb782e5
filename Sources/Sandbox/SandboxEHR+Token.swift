import Cryptography
import Foundation
import HTTPCore
import JSON
import JWTVerification

extension SandboxEHR {
    /// `POST /token`: authorization code (PKCE checked) and refresh grants, with the
    /// client authenticated exactly as registered.
    func token(_ request: Request) async -> Response {
        let form = SandboxEHR.formFields(request.body)
        let grantType = form["grant_type"]
        await state.countToken(refresh: grantType == "refresh_token")
        if let delay = await state.tokenDelay { try? await Task.sleep(for: delay) }
        let held = ContinuousClock.now
        while await state.holdingTokenAnswers, ContinuousClock.now - held < .seconds(60) { try? await Task.sleep(for: .milliseconds(10)) }
        if let status = await state.tokenEndpointStatus {
            return oauthError(await state.tokenEndpointError, status: HTTPStatus(code: status))
        }
        guard let client = await authenticate(request, form) else { return oauthError("invalid_client", status: .unauthorized) }
        switch grantType {
        case "authorization_code":
            guard let code = form["code"], let grant = await state.takeCode(code), grant.expiresAt > Date(), grant.clientID == client.id else {
                return oauthError("invalid_grant")
            }
            guard form["redirect_uri"] == grant.redirectURI else { return oauthError("invalid_grant", "redirect_uri differs") }
            // RFC 7636 §4.1: 43 to 128 unreserved characters; a client that sends another is
            // refused here as a strict server would, so the sandbox catches it.
            guard let verifier = form["code_verifier"], (43...128).contains(verifier.utf8.count),
                  verifier.utf8.allSatisfy({ b in
                      (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39)
                          || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "~")
                  }),
                  PKCEChallenge.s256(verifier) == grant.challenge else {
                return oauthError("invalid_grant", "PKCE verification failed")
            }
            return await tokenResponse(client: client, scope: grant.scope, patient: grant.patient, encounter: grant.encounter,
                                       nonce: grant.nonce, includeRefresh: true, idToken: true)
        case "refresh_token":
            if let error = await state.refreshError { return oauthError(error) }
            let rotate = await state.rotateRefreshTokens
            guard let token = form["refresh_token"], let grant = await state.refreshGrant(token, consume: rotate),
                  grant.clientID == client.id else { return oauthError("invalid_grant") }
            return await tokenResponse(client: client, scope: await state.refreshScope ?? grant.scope, patient: grant.patient,
                                       encounter: grant.encounter, nonce: nil, includeRefresh: rotate, idToken: false)
        default:
            return oauthError("unsupported_grant_type")
        }
    }

    /// `POST /revoke` (RFC 7009): 200 for any token, known or not, once the client has
    /// authenticated as at the token endpoint (401 `invalid_client` otherwise).
    func revoke(_ request: Request) async -> Response {
        let form = SandboxEHR.formFields(request.body)
        guard await authenticate(request, form) != nil else { return oauthError("invalid_client", status: .unauthorized) }
        if let token = form["token"] { await state.revoke(token) }
        await state.countRevocation()
        if let delay = await state.revocationDelay { try? await Task.sleep(for: delay) }
        return Response(status: .ok)
    }

    private func tokenResponse(client: SandboxClient, scope: String, patient: String?, encounter: String?, nonce: String?,
                               includeRefresh: Bool, idToken: Bool) async -> Response {
        let scopes = scope.split(separator: " ").map(String.init)
        let (access, lifetime) = await state.issueAccessToken(clientID: client.id, scope: scope, patient: patient)
        var body: JSONValue = ["access_token": .string(access), "token_type": "Bearer", "expires_in": .number(Double(lifetime)),
                               "scope": .string(scope), "need_patient_banner": true,
                               "smart_style_url": .string(baseURL + "/smart-style.json"), "sandbox_extension": "kept"]
        if let patient { body = body.setting("patient", .string(patient)) }
        if let encounter { body = body.setting("encounter", .string(encounter)) }
        if includeRefresh, scopes.contains("offline_access") || scopes.contains("online_access") {
            let refresh = await state.issueRefreshToken(.init(clientID: client.id, scope: scope, patient: patient, encounter: encounter))
            body = body.setting("refresh_token", .string(refresh))
        }
        if idToken, scopes.contains("openid") {
            let (kid, key) = await state.currentKey()
            let now = Int(Date().timeIntervalSince1970)
            var claims: JSONValue = ["iss": .string(options.idTokensOwnIssuer ?? issuer), "sub": .string(await state.idTokenSubject), "aud": .string(client.id),
                                     "exp": .number(Double(now + 300)), "iat": .number(Double(now))]
            if let nonce { claims = claims.setting("nonce", .string(nonce)) }
            if scopes.contains("fhirUser") { claims = claims.setting("fhirUser", .string(fhirBaseURL + "/Practitioner/prac-1")) }
            if let jwt = try? JWSSigner.signRS256(header: ["alg": "RS256", "kid": .string(kid), "typ": "JWT"], claims: claims, key: key) {
                body = body.setting("id_token", .string(jwt))
            }
        }
        for (name, value) in await state.tokenResponseExtras.objectValue ?? [] { body = body.setting(name, value) }
        var response = Response.json(body.bytes)
        response.headers.replace("Cache-Control", "no-store")
        return response
    }

    /// Client authentication, exactly as registered: public (`client_id` in the form),
    /// `client_secret_basic`, or `private_key_jwt`. One method per request (RFC 6749 §2.3);
    /// a `client_id` in the form must name the authenticated client.
    private func authenticate(_ request: Request, _ form: [String: String]) async -> SandboxClient? {
        let assertionType = form["client_assertion_type"]
        let client: SandboxClient?
        if let header = request.headers["Authorization"], header.hasPrefix("Basic ") {
            guard assertionType == nil, form["client_secret"] == nil else { return nil }
            client = await verifyBasic(String(header.dropFirst(6)))
        } else if let assertionType {
            guard assertionType == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                  let assertion = form["client_assertion"] else { return nil }
            client = await verifyAssertion(assertion)
        } else {
            guard form["client_secret"] == nil, let id = form["client_id"], let known = await state.client(id),
                  known.secret == nil, known.publicKeyPEM == nil else { return nil }
            client = known
        }
        guard let client, form["client_id"].map({ $0 == client.id }) ?? true else { return nil }
        return client
    }

    /// RFC 6749 §2.3.1: `base64(urlencode(id) ":" urlencode(secret))`.
    private func verifyBasic(_ credentials: String) async -> SandboxClient? {
        guard let decoded = Data(base64Encoded: credentials).flatMap({ String(data: $0, encoding: .utf8) }),
              let colon = decoded.firstIndex(of: ":"),
              let id = PercentEncoding.decodeFormComponent(decoded[..<colon]),
              let secret = PercentEncoding.decodeFormComponent(decoded[decoded.index(after: colon)...]),
              let client = await state.client(id), let expected = client.secret,
              constantTimeEquals(Array(secret.utf8), Array(expected.utf8)) else { return nil }
        return client
    }

    private func verifyAssertion(_ assertion: String) async -> SandboxClient? {
        guard let jws = try? CompactJWS(assertion), let id = jws.payload["iss"]?.stringValue, jws.payload["sub"]?.stringValue == id,
              let client = await state.client(id), let pem = client.publicKeyPEM else { return nil }
        let verified: Bool
        switch jws.algorithm {
        case "RS384": verified = (try? RSAPublicKey(pem: pem))?.verifyPKCS1SHA384(signature: jws.signature, message: jws.signingInput) ?? false
        case "ES384": verified = (try? P384PublicKey(pem: pem))?.verifyES384(signature: jws.signature, message: jws.signingInput) ?? false
        default: verified = false
        }
        // exp in the future and at most 5 minutes away, by this server's clock, as Epic checks it.
        let now = Date().timeIntervalSince1970 - Double(await state.assertionClockLag)
        guard verified, jws.payload["aud"]?.stringValue == baseURL + "/token",
              let exp = jws.payload["exp"]?.doubleValue, exp > now, exp <= now + 300,
              let jti = jws.payload["jti"]?.stringValue, await state.noteAssertion(jti) else { return nil }
        return client
    }

    func oauthError(_ error: String, _ description: String? = nil, status: HTTPStatus = .badRequest) -> Response {
        var body: JSONValue = ["error": .string(error)]
        if let description { body = body.setting("error_description", .string(description)) }
        var response = Response.json(body.bytes, status: status)
        response.headers.replace("Cache-Control", "no-store")
        return response
    }

    static func formFields(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = PercentEncoding.decodeFormComponent(parts[0]) else { continue }
            fields[name] = parts.count > 1 ? PercentEncoding.decodeFormComponent(parts[1]) : ""
        }
        return fields
    }
}

/// PKCE S256 as the authorization server computes it.
enum PKCEChallenge {
    static func s256(_ verifier: String) -> String { Base64URL.encode(SHA256.hash(Array(verifier.utf8))) }
}
