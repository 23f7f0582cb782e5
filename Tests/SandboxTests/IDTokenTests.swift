import Cryptography
import Foundation
import JSON
import Sandbox
import Testing

@Suite("Sandbox ID tokens")
struct IDTokenTests {
    /// The parts of a compact JWS, decoded by hand (independent of the sandbox's own code).
    private struct Token {
        let header: JSONValue
        let claims: JSONValue
        let signingInput: [UInt8]
        let signature: [UInt8]

        init(_ jwt: String) throws {
            let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
                  let signature = Base64URL.decode(parts[2]) else { throw HarnessError.unexpected("not a compact JWS") }
            self.header = try JSONParser.parse(header)
            self.claims = try JSONParser.parse(claims)
            signingInput = Array((parts[0] + "." + parts[1]).utf8)
            self.signature = signature
        }
    }

    /// The JWKS keys by kid.
    private func jwks(_ h: SandboxHarness) async throws -> [String: RSAPublicKey] {
        var keys: [String: RSAPublicKey] = [:]
        for key in try SandboxHarness.json(try await h.get("/jwks"))["keys"]?.arrayValue ?? [] {
            guard let kid = key["kid"]?.stringValue, let n = key["n"]?.stringValue.flatMap(Base64URL.decode),
                  let e = key["e"]?.stringValue.flatMap(Base64URL.decode) else { continue }
            keys[kid] = try RSAPublicKey(modulus: n, exponent: e)
        }
        return keys
    }

    @Test("The ID token is RS256 under a JWKS kid, verifies with that key, and carries nonce, iss, aud, sub, exp, iat, fhirUser")
    func verifies() async throws {
        try await SandboxHarness.with { h in
            let nonce = "nonce-" + SecureRandom.token(bytes: 8)
            let jwt = try #require(try await h.accessTokens(nonce: nonce)["id_token"]?.stringValue)
            let token = try Token(jwt)
            #expect(token.header["alg"]?.stringValue == "RS256")
            let kid = try #require(token.header["kid"]?.stringValue)
            let key = try #require(try await jwks(h)[kid])
            #expect(key.modulusBits >= 2048)
            #expect(key.verifyPKCS1SHA256(signature: token.signature, message: token.signingInput))
            var forged = token.signingInput
            forged[forged.count - 1] ^= 1
            #expect(!key.verifyPKCS1SHA256(signature: token.signature, message: forged))

            let claims = token.claims
            let now = Date().timeIntervalSince1970
            #expect(claims["iss"]?.stringValue == h.sandbox.issuer)
            #expect(claims["aud"]?.stringValue == "public-app")
            #expect(claims["sub"]?.stringValue?.isEmpty == false)
            #expect(claims["nonce"]?.stringValue == nonce)
            let exp = try #require(claims["exp"]?.doubleValue), iat = try #require(claims["iat"]?.doubleValue)
            #expect(exp > now && iat <= now + 1 && iat > now - 60)
            #expect(claims["fhirUser"]?.stringValue?.hasSuffix("Practitioner/prac-1") == true)
        }
    }

    @Test("After key rotation new ID tokens use the new kid, and both keys stay in the JWKS")
    func rotation() async throws {
        try await SandboxHarness.with { h in
            let before = try Token(try #require(try await h.accessTokens()["id_token"]?.stringValue))
            try await h.sandbox.state.rotateSigningKey()
            let after = try Token(try #require(try await h.accessTokens()["id_token"]?.stringValue))
            let oldKid = try #require(before.header["kid"]?.stringValue), newKid = try #require(after.header["kid"]?.stringValue)
            #expect(oldKid != newKid)
            let keys = try await jwks(h)
            #expect(Set(keys.keys) == [oldKid, newKid])
            #expect(keys[newKid]?.verifyPKCS1SHA256(signature: after.signature, message: after.signingInput) == true)
            #expect(keys[oldKid]?.verifyPKCS1SHA256(signature: after.signature, message: after.signingInput) == false)
            #expect(keys[oldKid]?.verifyPKCS1SHA256(signature: before.signature, message: before.signingInput) == true)
        }
    }

    @Test("Rotation without keeping the old key drops it from the JWKS")
    func rotationDroppingOldKey() async throws {
        try await SandboxHarness.with { h in
            let old = try #require(await h.sandbox.state.keyIDs.first)
            try await h.sandbox.state.rotateSigningKey(keepOld: false)
            let kids = Set(try await jwks(h).keys)
            #expect(kids.count == 1 && !kids.contains(old))
        }
    }
}
