import Foundation
import JSON
import Sandbox
import Testing

@Suite("Sandbox discovery documents")
struct DiscoveryTests {
    @Test("smart-configuration names every endpoint under the sandbox and the SMART capabilities")
    func smartConfiguration() async throws {
        try await SandboxHarness.with { h in
            let response = try await h.get(h.sandbox.fhirBaseURL + "/.well-known/smart-configuration")
            #expect(response.status == 200)
            #expect(response.header("Content-Type")?.hasPrefix("application/json") == true)
            let config = try SandboxHarness.json(response)
            let base = h.sandbox.baseURL
            #expect(config["issuer"]?.stringValue == h.sandbox.fhirBaseURL)
            #expect(config["authorization_endpoint"]?.stringValue == base + "/authorize")
            #expect(config["token_endpoint"]?.stringValue == base + "/token")
            #expect(config["revocation_endpoint"]?.stringValue == base + "/revoke")
            #expect(config["jwks_uri"]?.stringValue == base + "/jwks")
            #expect(strings(config["code_challenge_methods_supported"]) == ["S256"])
            #expect(strings(config["response_types_supported"]) == ["code"])
            #expect(Set(strings(config["grant_types_supported"])) == ["authorization_code", "refresh_token"])
            #expect(Set(strings(config["token_endpoint_auth_methods_supported"])) == ["none", "client_secret_basic", "private_key_jwt"])
            #expect(Set(strings(config["token_endpoint_auth_signing_alg_values_supported"])) == ["RS384", "ES384"])
            #expect(Set(strings(config["scopes_supported"])).isSuperset(of: ["openid", "fhirUser", "launch", "launch/patient", "offline_access"]))
            let capabilities = Set(strings(config["capabilities"]))
            #expect(capabilities.isSuperset(of: [
                "launch-ehr", "launch-standalone", "client-public", "client-confidential-symmetric", "client-confidential-asymmetric",
                "context-ehr-patient", "context-standalone-patient", "permission-v1", "permission-v2", "permission-offline",
                "sso-openid-connect",
            ]))
            #expect(config["authorization_response_iss_parameter_supported"]?.boolValue == true)
        }
    }

    @Test("The RFC 9207 iss parameter is neither advertised nor sent when switched off")
    func issParameterOff() async throws {
        try await SandboxHarness.with({ $0.issParameter = false }) { h in
            let config = try SandboxHarness.json(try await h.get(h.sandbox.fhirBaseURL + "/.well-known/smart-configuration"))
            #expect(config["authorization_response_iss_parameter_supported"] == nil)
            let (_, challenge) = SandboxHarness.pkce()
            let response = try await h.get(h.authorizeURL(scope: "openid", challenge: challenge))
            let query = SandboxHarness.query(try #require(response.header("Location")))
            #expect(query["code"] != nil && query["iss"] == nil)
        }
    }

    @Test("openid-configuration: issuer, JWKS, RS256 only")
    func openIDConfiguration() async throws {
        try await SandboxHarness.with { h in
            let config = try SandboxHarness.json(try await h.get(h.sandbox.fhirBaseURL + "/.well-known/openid-configuration"))
            #expect(config["issuer"]?.stringValue == h.sandbox.issuer)
            #expect(config["jwks_uri"]?.stringValue == h.sandbox.baseURL + "/jwks")
            #expect(config["authorization_endpoint"]?.stringValue == h.sandbox.baseURL + "/authorize")
            #expect(config["token_endpoint"]?.stringValue == h.sandbox.baseURL + "/token")
            #expect(strings(config["id_token_signing_alg_values_supported"]) == ["RS256"])
            #expect(!strings(config["subject_types_supported"]).isEmpty)
        }
    }

    @Test("metadata: a CapabilityStatement with the oauth-uris extension")
    func capabilityStatement() async throws {
        try await SandboxHarness.with { h in
            let response = try await h.get(h.sandbox.fhirBaseURL + "/metadata")
            #expect(response.status == 200 && response.header("Content-Type")?.hasPrefix("application/fhir+json") == true)
            let statement = try SandboxHarness.json(response)
            #expect(statement["resourceType"]?.stringValue == "CapabilityStatement")
            #expect(statement["fhirVersion"]?.stringValue == "4.0.1")
            let extensions = statement["rest"]?.arrayValue?.first?["security"]?["extension"]?.arrayValue ?? []
            let oauth = try #require(extensions.first {
                $0["url"]?.stringValue == "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"
            })
            var uris: [String: String] = [:]
            for item in oauth["extension"]?.arrayValue ?? [] {
                if let name = item["url"]?.stringValue { uris[name] = item["valueUri"]?.stringValue }
            }
            let base = h.sandbox.baseURL
            #expect(uris == ["authorize": base + "/authorize", "token": base + "/token", "revoke": base + "/revoke"])
        }
    }

    @Test("JWKS: RSA signing keys with kid, use sig and alg RS256; rotation adds a key and keeps the old one")
    func jwks() async throws {
        try await SandboxHarness.with { h in
            let keys = try SandboxHarness.json(try await h.get("/jwks"))["keys"]?.arrayValue ?? []
            #expect(keys.count == 1)
            let key = try #require(keys.first)
            #expect(key["kty"]?.stringValue == "RSA" && key["use"]?.stringValue == "sig" && key["alg"]?.stringValue == "RS256")
            #expect(key["n"]?.stringValue?.isEmpty == false && key["e"]?.stringValue == "AQAB")
            let firstKid = try #require(key["kid"]?.stringValue)
            #expect(await h.sandbox.state.keyIDs == [firstKid])

            try await h.sandbox.state.rotateSigningKey()
            let rotated = try SandboxHarness.json(try await h.get("/jwks"))["keys"]?.arrayValue ?? []
            let kids = rotated.compactMap { $0["kid"]?.stringValue }
            #expect(kids.count == 2 && kids.contains(firstKid) && Set(kids).count == 2)
            #expect(await h.sandbox.state.keyIDs.first != firstKid)
        }
    }
}

func strings(_ value: JSONValue?) -> [String] { value?.arrayValue?.compactMap(\.stringValue) ?? [] }
