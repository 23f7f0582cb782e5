import BFF
import Cryptography
import Foundation
import JSON
import PostgresStore
import Sandbox
import Testing

@Suite("mobile hand-off and client authentication")
struct MobileAndClientAuthTests {
    func handoffLogin(_ h: BFFHarness, _ browser: Browser, verifier: String) async throws -> String {
        let challenge = Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
        let approved = try await h.approvedCallback(browser, loginPath: "/login?return_to=myapp%3A%2F%2Fcb&handoff_challenge=" + challenge)
        let callback = try await browser.request(try #require(approved))
        // No session cookie (the app gets its session through the hand-off); only the
        // sign-in's browser binding is deleted.
        #expect(callback.status == 302 && callback.setCookies.allSatisfy { $0.hasPrefix("bff_login_") && $0.contains("Max-Age=0") }, "\(callback.setCookies)")
        let location = try #require(callback.location)
        #expect(location.hasPrefix("myapp://cb?handoff="))
        return String(location.dropFirst("myapp://cb?handoff=".count))
    }

    func exchange(_ h: BFFHarness, _ browser: Browser, code: String, verifier: String) async throws -> Browser.Page {
        let body: JSONValue = ["handoff": .string(code), "handoff_verifier": .string(verifier)]
        return try await browser.request("POST", h.baseURL + "/session/handoff", headers: [("Content-Type", "application/json")], body: body.bytes)
    }

    @Test("hand-off: the code and verifier give a bearer session token that works without X-CSRF; replay fails")
    func handoff() async throws {
        let h = try await BFFHarness.start(returnOrigins: ["myapp:"])
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let verifier = SecureRandom.token(bytes: 32)
        let code = try await handoffLogin(h, browser, verifier: verifier)
        // Until its code is exchanged, the session lives about as long as the code: one never
        // claimed expires, and the sweeper revokes its tokens, within minutes, not 8 hours.
        let unclaimed = try await h.database.pool.query("SELECT extract(epoch from expires_at) FROM sessions")
        #expect(unclaimed.count == 1)
        #expect(try unclaimed[0].date(0).timeIntervalSinceNow < 180, "an unclaimed hand-off session lives the whole session TTL")
        let first = try await exchange(h, browser, code: code, verifier: verifier)
        #expect(first.status == 200)
        // Exchanged, it gets the session lifetime.
        let claimed = try await h.database.pool.query("SELECT extract(epoch from expires_at) FROM sessions")
        #expect(try claimed[0].date(0).timeIntervalSinceNow > 3600)
        let token = try #require(try JSONParser.parse(first.body)["session_token"]?.stringValue)
        let app = Browser(client: h.client)
        let session = try await app.request(h.baseURL + "/session", headers: [("Authorization", "Bearer " + token)])
        #expect(session.status == 200)
        #expect(try await app.request(h.baseURL + "/fhir/Patient/pat-1", headers: [("Authorization", "Bearer " + token)]).status == 200)
        #expect(try await exchange(h, browser, code: code, verifier: verifier).status == 400)
        #expect(try await app.request(h.baseURL + "/session", headers: [("Authorization", "Bearer wrong")]).status == 401)
    }

    @Test("a proxy's Basic credentials beside the session cookie: the cookie still counts; a bearer token that is not a session's is 401")
    func otherAuthorizationSchemes() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        let basic = [("Authorization", "Basic c3RhZ2luZzpzZWNyZXQ=")]
        #expect(try await browser.api(h.baseURL + "/session", headers: basic).status == 200)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch, headers: basic).status == 200)
        for bearer in ["Bearer", "Bearer ", "bearer not-a-session", "Bearer  "] {
            #expect(try await browser.api(h.baseURL + "/session", headers: [("Authorization", bearer)]).status == 401, "\(bearer)")
        }
    }

    @Test("a logout that carries a bearer session token beside the browser's cookie (stale or live) ends the bearer's session at most: the cookie is kept, and its session and tokens live on")
    func logoutBearerBesideCookie() async throws {
        let h = try await BFFHarness.start(returnOrigins: ["myapp:"])
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        let stale = try await browser.api("POST", h.baseURL + "/logout", headers: [("Authorization", "Bearer stale-token")])
        #expect(stale.status == 204 && stale.setCookies.isEmpty, "\(stale.setCookies)")
        let verifier = SecureRandom.token(bytes: 32)
        let app = Browser(client: h.client)
        let code = try await handoffLogin(h, app, verifier: verifier)
        let token = try #require(try JSONParser.parse(try await exchange(h, app, code: code, verifier: verifier).body)["session_token"]?.stringValue)
        await h.sandbox.state.resetCounters()
        let live = try await browser.api("POST", h.baseURL + "/logout", headers: [("Authorization", "Bearer " + token)])
        #expect(live.status == 204 && live.setCookies.isEmpty, "\(live.setCookies)")
        #expect(try await app.request(h.baseURL + "/session", headers: [("Authorization", "Bearer " + token)]).status == 401)
        #expect(await h.sandbox.state.revocations == 2, "the bearer's session's tokens only")
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200, "the cookie's session lives on")
    }

    @Test("hand-off: a wrong verifier burns the code, and the sign-in's tokens are revoked at the EHR")
    func wrongVerifier() async throws {
        let h = try await BFFHarness.start(returnOrigins: ["myapp:"])
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let verifier = SecureRandom.token(bytes: 32)
        let code = try await handoffLogin(h, browser, verifier: verifier)
        #expect(try await exchange(h, browser, code: code, verifier: SecureRandom.token(bytes: 32)).status == 400)
        #expect(await h.sandbox.state.revocations == 2) // refresh and access token
        #expect(try await exchange(h, browser, code: code, verifier: verifier).status == 400)
    }

    @Test("hand-off: a verifier too short, too long, missing or not a string is a wrong verifier: it burns the code, and the right one then fails too",
          arguments: ["short", "long", "missing", "number"])
    func wrongLengthVerifier(_ kind: String) async throws {
        let h = try await BFFHarness.start(returnOrigins: ["myapp:"])
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let verifier = SecureRandom.token(bytes: 32) // 43 characters, the shortest allowed
        let code = try await handoffLogin(h, browser, verifier: verifier)
        let wrong: JSONValue? = switch kind {
        case "short": .string(String(verifier.dropLast())) // 42
        case "long": .string(verifier + String(repeating: "a", count: 86)) // 129
        case "number": .number(1)
        default: nil
        }
        let body: JSONValue = wrong.map { ["handoff": .string(code), "handoff_verifier": $0] } ?? ["handoff": .string(code)]
        let refused = try await browser.request("POST", h.baseURL + "/session/handoff", headers: [("Content-Type", "application/json")], body: body.bytes)
        #expect(refused.status == 400 && refused.text.contains("invalid-handoff"), "\(refused.text)")
        #expect(try await exchange(h, browser, code: code, verifier: verifier).status == 400)
    }

    @Test("hand-off: a verifier with characters RFC 7636 does not allow (base64's + / =, a space) is refused even when its hash is the challenge, and burns the code")
    func verifierCharacters() async throws {
        let h = try await BFFHarness.start(returnOrigins: ["myapp:"])
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        for verifier in ["ab+cd/ef==" + String(repeating: "x", count: 40), String(repeating: "a b", count: 15)] {
            let code = try await handoffLogin(h, browser, verifier: verifier)
            let refused = try await exchange(h, browser, code: code, verifier: verifier)
            #expect(refused.status == 400 && refused.text.contains("invalid-handoff"), "\(verifier): \(refused.text)")
        }
    }

    @Test("hand-off: a scheme off the allow-list, or a custom scheme without a challenge, is refused")
    func schemeOffList() async throws {
        let h = try await BFFHarness.start(returnOrigins: ["myapp:"])
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let challenge = Base64URL.encode(SHA256.hash(Array("v".utf8)))
        #expect(try await browser.request(h.baseURL + "/login?return_to=otherapp%3A%2F%2Fcb&handoff_challenge=" + challenge).status == 400)
        #expect(try await browser.request(h.baseURL + "/login?return_to=myapp%3A%2F%2Fcb").status == 400)
    }

    @Test("a private_key_jwt assertion expires well within the 5 minutes EHRs allow: one whose clock lags the BFF's by 30 s takes it")
    func clientAssertionLeavesRoomForClockSkew() async throws {
        let key = try P384PrivateKey.generate()
        var client = SandboxClient(id: "confidential-app", redirectURIs: [])
        client.publicKeyPEM = try key.publicKey.pem
        let pem = try key.pem
        let h = try await BFFHarness.start(extraClients: [client], registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "confidential-app", privateKeyPEM: Secret(pem), privateKeyID: "ec-1")]
        })
        defer { Task { await h.stop() } }
        await h.sandbox.state.setAssertionClockLag(30)
        let (done, launch) = try await h.standaloneLogin(Browser(client: h.client))
        #expect(done.status == 302 && launch != nil, "\(done.status) \(done.text)")
    }

    @Test("client_secret_basic, and private_key_jwt with RS384 and ES384 keys, on code exchange, refresh and revocation",
          arguments: ["secret", "rsa", "ec"])
    func clientAuthentication(_ kind: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bff-keys-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var client = SandboxClient(id: "confidential-app", redirectURIs: [])
        var registration = { (iss: String) in IssuerRegistration(iss: iss, clientID: "confidential-app") }
        switch kind {
        case "secret":
            client.secret = "s3cr:et/with+chars"
            registration = { iss in IssuerRegistration(iss: iss, clientID: "confidential-app", clientSecret: Secret("s3cr:et/with+chars")) }
        case "rsa":
            let key = try await runDetached { try RSAPrivateKey.generate(bits: 2048) } // seconds of CPU: not on the pool
            client.publicKeyPEM = try key.publicKey.pem
            let pem = try key.pem
            registration = { iss in IssuerRegistration(iss: iss, clientID: "confidential-app", privateKeyPEM: Secret(pem), privateKeyID: "rsa-1") }
        default:
            let key = try P384PrivateKey.generate()
            client.publicKeyPEM = try key.publicKey.pem
            let pem = try key.pem
            registration = { iss in IssuerRegistration(iss: iss, clientID: "confidential-app", privateKeyPEM: Secret(pem), privateKeyID: "ec-1") }
        }
        let make = registration
        let h = try await BFFHarness.start(extraClients: [client], registrations: { s, _ in [make(s.fhirBaseURL)] })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (done, launch) = try await h.standaloneLogin(browser)
        #expect(done.status == 302 && launch != nil, "\(done.status) \(done.text)")
        await h.sandbox.state.expireAccessTokens()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 1)
        let jwks = try JSONParser.parse(try await browser.request(h.baseURL + "/.well-known/jwks.json").body)
        let keys = jwks["keys"]?.arrayValue ?? []
        #expect(keys.count == (kind == "secret" ? 0 : 1))
        if kind == "rsa" { #expect(keys.first?["alg"]?.stringValue == "RS384" && keys.first?["d"] == nil) }
        if kind == "ec" { #expect(keys.first?["crv"]?.stringValue == "P-384" && keys.first?["d"] == nil) }
        // Logout revokes both tokens; the EHR counts only revocations from an authenticated client.
        #expect(try await browser.api("POST", h.baseURL + "/logout").status == 204)
        #expect(await h.sandbox.state.revocations == 2)
    }
}
