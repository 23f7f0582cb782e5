import Foundation
import JSON
import Sandbox
import Testing

@Suite("Sandbox token endpoint: refresh, fail modes and revocation")
struct RefreshTests {
    private func refresh(_ h: SandboxHarness, _ token: String, auth: SandboxHarness.ClientAuth = .publicClient("public-app"))
        async throws -> (status: Int, body: JSONValue) {
        let response = try await h.token([("grant_type", "refresh_token"), ("refresh_token", token)], auth: auth)
        #expect(response.header("Cache-Control") == "no-store")
        return (response.status, try SandboxHarness.json(response))
    }

    @Test("Refresh rotates the refresh token: the new one works, the old one is invalid_grant; refreshCount counts")
    func rotation() async throws {
        try await SandboxHarness.with { h in
            let first = try #require(try await h.accessTokens()["refresh_token"]?.stringValue)
            let (status, body) = try await refresh(h, first)
            #expect(status == 200)
            #expect(body["access_token"]?.stringValue?.isEmpty == false && body["token_type"]?.stringValue == "Bearer")
            #expect(body["patient"]?.stringValue == "pat-1" && body["id_token"] == nil)
            let second = try #require(body["refresh_token"]?.stringValue)
            #expect(second != first)
            #expect(try await refresh(h, first).body["error"]?.stringValue == "invalid_grant")
            #expect(try await refresh(h, second).status == 200)
            #expect(await h.sandbox.state.refreshCount == 3)
            #expect(await h.sandbox.state.tokenRequests == 4)
        }
    }

    @Test("Without rotation the same refresh token keeps working and none is returned")
    func noRotation() async throws {
        try await SandboxHarness.with({ $0.rotateRefreshTokens = false }) { h in
            let token = try #require(try await h.accessTokens()["refresh_token"]?.stringValue)
            for _ in 0..<2 {
                let (status, body) = try await refresh(h, token)
                #expect(status == 200 && body["refresh_token"] == nil && body["access_token"] != nil)
            }
        }
    }

    @Test("A refresh authenticates the client as the code exchange did")
    func refreshClientAuthentication() async throws {
        try await SandboxHarness.with { h in
            let (verifier, challenge) = SandboxHarness.pkce()
            let code = try await h.code(client: "secret-app", challenge: challenge)
            let auth = SandboxHarness.ClientAuth.basic(id: "secret-app", secret: SandboxHarness.secret)
            let tokens = try SandboxHarness.json(try await h.exchange(code: code, verifier: verifier, auth: auth))
            let refreshToken = try #require(tokens["refresh_token"]?.stringValue)
            #expect(try await refresh(h, refreshToken, auth: .basic(id: "secret-app", secret: "wrong")).status == 401)
            #expect(try await refresh(h, refreshToken, auth: .publicClient("secret-app")).status == 401)
            // Refused authentication does not use the token up.
            let (status, body) = try await refresh(h, refreshToken, auth: auth)
            #expect(status == 200)
            let rotated = try #require(body["refresh_token"]?.stringValue)
            // Another client cannot use it.
            #expect(try await refresh(h, rotated, auth: .publicClient("public-app")).body["error"]?.stringValue == "invalid_grant")
        }
    }

    @Test("Fail modes: refresh invalid_grant, token endpoint 503, set at start or at run time")
    func failModes() async throws {
        try await SandboxHarness.with({ $0.refreshError = "invalid_grant" }) { h in
            let token = try #require(try await h.accessTokens()["refresh_token"]?.stringValue)
            let (status, body) = try await refresh(h, token)
            #expect(status == 400 && body["error"]?.stringValue == "invalid_grant")
            await h.sandbox.state.setRefreshError(nil)
            await h.sandbox.state.setTokenEndpointStatus(503)
            #expect(try await refresh(h, token).status == 503)
            await h.sandbox.state.setTokenEndpointStatus(nil)
            #expect(try await refresh(h, token).status == 200)
        }
    }

    @Test("Access-token lifetime is switchable; expired tokens are refused by the FHIR server")
    func lifetime() async throws {
        try await SandboxHarness.with({ $0.accessTokenLifetime = 120 }) { h in
            #expect(try await h.accessTokens()["expires_in"]?.intValue == 120)
            await h.sandbox.state.setAccessTokenLifetime(0)
            let expired = try #require(try await h.accessTokens()["access_token"]?.stringValue)
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: [("Authorization", "Bearer " + expired)]).status == 401)
            await h.sandbox.state.setAccessTokenLifetime(3600)
            let live = try #require(try await h.accessTokens()["access_token"]?.stringValue)
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: [("Authorization", "Bearer " + live)]).status == 200)
            await h.sandbox.state.expireAccessTokens()
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: [("Authorization", "Bearer " + live)]).status == 401)
        }
    }

    @Test("Revocation answers 200 for known and unknown tokens, counts, and kills the token")
    func revocation() async throws {
        try await SandboxHarness.with { h in
            let tokens = try await h.accessTokens()
            let access = try #require(tokens["access_token"]?.stringValue)
            let refreshToken = try #require(tokens["refresh_token"]?.stringValue)
            let revoke = { (token: String) in
                try await h.postForm("/revoke", [("token", token), ("client_id", "public-app")]).status
            }
            #expect(try await revoke(refreshToken) == 200)
            #expect(try await revoke(access) == 200)
            #expect(try await revoke("never-issued") == 200)
            #expect(await h.sandbox.state.revocations == 3)
            #expect(try await refresh(h, refreshToken).body["error"]?.stringValue == "invalid_grant")
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: [("Authorization", "Bearer " + access)]).status == 401)
            #expect(try await h.postForm("/revoke", [("token", access), ("client_id", "nobody")]).status == 401)
        }
    }
}
