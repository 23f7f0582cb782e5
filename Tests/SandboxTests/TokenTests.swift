import Cryptography
import Foundation
import JSON
import Sandbox
import Testing

@Suite("Sandbox token endpoint: authorization code")
struct TokenTests {
    @Test("A public client redeems its code: the SMART token response, no-store")
    func publicClient() async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let code = try await h.code(patient: "pat-2", challenge: challenge)
            let response = try await h.exchange(code: code, verifier: verifier)
            #expect(response.status == 200)
            #expect(response.header("Cache-Control") == "no-store")
            #expect(response.header("Content-Type")?.hasPrefix("application/json") == true)
            let body = try SandboxHarness.json(response)
            #expect(body["access_token"]?.stringValue?.isEmpty == false)
            #expect(body["token_type"]?.stringValue == "Bearer")
            #expect(body["expires_in"]?.intValue == 3600)
            #expect(body["scope"]?.stringValue == "launch openid fhirUser patient/*.rs offline_access")
            #expect(body["refresh_token"]?.stringValue?.isEmpty == false)
            #expect(body["id_token"]?.stringValue?.split(separator: ".").count == 3)
            #expect(body["patient"]?.stringValue == "pat-2" && body["encounter"]?.stringValue == "enc-2")
            #expect(body["need_patient_banner"]?.boolValue == true)
            let style = try await h.get(try #require(body["smart_style_url"]?.stringValue))
            #expect(try style.status == 200 && SandboxHarness.json(style)["color_background"] != nil)
            #expect(body["sandbox_extension"]?.stringValue == "kept")
            #expect(await h.sandbox.state.tokenRequests == 1)
        }
    }

    @Test("Without offline_access or online_access no refresh token; without openid no ID token")
    func optionalTokens() async throws {
        try await SandboxHarness.with { h in
            let body = try await h.accessTokens(scope: "launch patient/*.rs")
            #expect(body["access_token"] != nil && body["refresh_token"] == nil && body["id_token"] == nil)
        }
    }

    @Test("The code is refused with a wrong PKCE verifier, a wrong redirect_uri or another client, and burnt by the attempt")
    func refusals() async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let attempts: [(String, String, SandboxHarness.ClientAuth)] = [
                (SandboxHarness.pkce().verifier, SandboxHarness.redirectURI, .publicClient("public-app")), // another verifier
                (String(verifier.dropLast()), SandboxHarness.redirectURI, .publicClient("public-app")),
                (challenge, SandboxHarness.redirectURI, .publicClient("public-app")), // the challenge itself
                (verifier, "http://app.example/other", .publicClient("public-app")), // registered, but not the one authorized
                (verifier, SandboxHarness.redirectURI, .basic(id: "secret-app", secret: SandboxHarness.secret)), // another client
            ]
            for (wrongVerifier, redirect, auth) in attempts {
                let code = try await h.code(challenge: challenge)
                let refused = try await h.exchange(code: code, verifier: wrongVerifier, redirectURI: redirect, auth: auth)
                #expect(refused.status == 400 && refused.header("Cache-Control") == "no-store")
                #expect(try SandboxHarness.json(refused)["error"]?.stringValue == "invalid_grant")
                // The failed attempt used the code up: the right request now fails too.
                #expect(try await h.exchange(code: code, verifier: verifier).status == 400)
            }
            let good = try await h.code(challenge: challenge)
            #expect(try await h.exchange(code: good, verifier: verifier).status == 200)
        }
    }

    @Test("A verifier that is not RFC 7636's (too short, or with characters outside the unreserved set) is refused even when its hash is the challenge")
    func verifierForm() async throws {
        try await SandboxHarness.with { h in
            for verifier in ["a", "ab+cd/ef==" + String(repeating: "x", count: 40)] {
                let challenge = Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
                let code = try await h.code(challenge: challenge)
                let refused = try await h.exchange(code: code, verifier: verifier)
                let error = try SandboxHarness.json(refused)["error"]?.stringValue
                #expect(refused.status == 400 && error == "invalid_grant", "\(verifier)")
            }
        }
    }

    @Test("A code works once")
    func reusedCode() async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let code = try await h.code(challenge: challenge)
            #expect(try await h.exchange(code: code, verifier: verifier).status == 200)
            let again = try await h.exchange(code: code, verifier: verifier)
            #expect(try again.status == 400 && (SandboxHarness.json(again))["error"]?.stringValue == "invalid_grant")
        }
    }

    @Test("A code expires after the code lifetime")
    func expiredCode() async throws {
        try await SandboxHarness.with { h in
            await h.sandbox.state.setCodeLifetime(0)
            let (verifier, challenge) = SandboxHarness.pkce()
            let code = try await h.code(challenge: challenge)
            #expect(try await h.exchange(code: code, verifier: verifier).status == 400)
            await h.sandbox.state.setCodeLifetime(60)
            #expect(try await h.exchange(code: try await h.code(challenge: challenge), verifier: verifier).status == 200)
        }
    }

    @Test("client_secret_basic: the right URL-encoded secret is accepted; wrong, missing or unencoded ones get 401 invalid_client")
    func clientSecretBasic() async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let wrong: [SandboxHarness.ClientAuth] = [
                .basic(id: "secret-app", secret: "wrong"), .basic(id: "secret-app", secret: SandboxHarness.secret + "x"),
                .basic(id: "secret-app", secret: ""), .publicClient("secret-app"), .none,
                .basic(id: "public-app", secret: ""), .basic(id: "nobody", secret: SandboxHarness.secret),
            ]
            for auth in wrong {
                let code = try await h.code(client: "secret-app", challenge: challenge)
                let refused = try await h.exchange(code: code, verifier: verifier, auth: auth)
                #expect(refused.status == 401, "\(auth)")
                #expect(try SandboxHarness.json(refused)["error"]?.stringValue == "invalid_client")
            }
            // The secret as it is, without the form-encoding RFC 6749 §2.3.1 asks for.
            let raw = "Basic " + Data(("secret-app:" + SandboxHarness.secret).utf8).base64EncodedString()
            let code = try await h.code(client: "secret-app", challenge: challenge)
            let unencoded = try await h.postForm("/token", [("grant_type", "authorization_code"), ("code", code),
                                                            ("redirect_uri", SandboxHarness.redirectURI), ("code_verifier", verifier)],
                                                 headers: [("Authorization", raw)])
            #expect(unencoded.status == 401)
            let good = try await h.code(client: "secret-app", challenge: challenge)
            let accepted = try await h.exchange(code: good, verifier: verifier, auth: .basic(id: "secret-app", secret: SandboxHarness.secret))
            #expect(accepted.status == 200)
        }
    }

    @Test("private_key_jwt: RS384 and ES384 assertions from the registered keys are accepted", arguments: [("rs-app", "RS384"), ("es-app", "ES384")])
    func privateKeyJWT(client: String, algorithm: String) async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let code = try await h.code(client: client, challenge: challenge)
            let assertion = try h.assertion(client: client, algorithm: algorithm)
            #expect(try await h.exchange(code: code, verifier: verifier, auth: .assertion(assertion)).status == 200)
        }
    }

    @Test("private_key_jwt: bad assertions get 401 invalid_client", arguments: [
        "replayed-jti", "wrong-aud", "expired", "exp-too-far", "sub-differs", "other-key", "alg-RS256", "tampered", "wrong-type",
    ])
    func badAssertions(problem: String) async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            if problem == "replayed-jti" {
                let first = try await h.code(client: "rs-app", challenge: challenge)
                let used = try h.assertion(client: "rs-app", algorithm: "RS384", jti: "once")
                #expect(try await h.exchange(code: first, verifier: verifier, auth: .assertion(used)).status == 200)
            }
            let code = try await h.code(client: "rs-app", challenge: challenge)
            var fields = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", SandboxHarness.redirectURI),
                          ("code_verifier", verifier), ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")]
            let assertion: String = switch problem {
            case "replayed-jti": try h.assertion(client: "rs-app", algorithm: "RS384", jti: "once")
            case "wrong-aud": try h.assertion(client: "rs-app", algorithm: "RS384", audience: h.sandbox.fhirBaseURL)
            case "expired": try h.assertion(client: "rs-app", algorithm: "RS384", expiresIn: -10)
            case "exp-too-far": try h.assertion(client: "rs-app", algorithm: "RS384", expiresIn: 600)
            case "sub-differs": try h.assertion(client: "rs-app", algorithm: "RS384", subject: "es-app")
            case "other-key": try h.assertion(client: "rs-app", algorithm: "RS384", rsaKey: try RSAPrivateKey(pem: ClientKeyFixture.otherRSAPEM))
            case "alg-RS256": try h.assertion(client: "rs-app", algorithm: "RS256")
            default: try h.assertion(client: "rs-app", algorithm: "RS384")
            }
            fields.append(("client_assertion", problem == "tampered" ? tamper(assertion) : assertion))
            if problem == "wrong-type" { fields[4].1 = "urn:ietf:params:oauth:client-assertion-type:saml2-bearer" }
            let refused = try await h.postForm("/token", fields)
            #expect(refused.status == 401)
            #expect(try SandboxHarness.json(refused)["error"]?.stringValue == "invalid_client")
        }
    }

    /// Changes one claim after signing (exp pushed back a little), keeping the signature.
    private func tamper(_ jwt: String) -> String {
        let parts = jwt.split(separator: ".").map(String.init)
        let claims = (try? JSONParser.parse(Base64URL.decode(parts[1]) ?? [])) ?? .null
        let changed = claims.setting("exp", .number((claims["exp"]?.doubleValue ?? 0) + 1))
        return parts[0] + "." + Base64URL.encode(changed.bytes) + "." + parts[2]
    }

    @Test("A confidential client cannot pass as a public one, and a public client cannot send a client_secret")
    func noDowngrade() async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let code = try await h.code(client: "rs-app", challenge: challenge)
            #expect(try await h.exchange(code: code, verifier: verifier, auth: .publicClient("rs-app")).status == 401)
            let other = try await h.code(challenge: challenge)
            let withSecret = try await h.token([("grant_type", "authorization_code"), ("code", other), ("redirect_uri", SandboxHarness.redirectURI),
                                                ("code_verifier", verifier), ("client_secret", "x")], auth: .publicClient("public-app"))
            #expect(withSecret.status == 401)
        }
    }
}
