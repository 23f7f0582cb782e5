import Cryptography
import JSON
@testable import JWTVerification
import Testing

/// Header rules and the attacks they stop.
@Suite("ID token: header policy and attacks")
struct HeaderAttackTests {
    let f = IDTokenFixture()

    @Test("a valid token is accepted and yields sub, fhirUser and the claims")
    func valid() async throws {
        let claims = try await f.validate(try f.token())
        #expect(claims.subject == "user-1")
        #expect(claims.fhirUser == "Practitioner/1")
        #expect(claims.claims["nonce"]?.stringValue == "n-123")
        #expect(f.endpoint.urls == [f.jwksURL])
    }

    @Test("alg none is refused, with or without a signature part")
    func algNone() async throws {
        let input = Base64URL.encode((["alg": "none", "kid": "k1"] as JSONValue).bytes) + "." + Base64URL.encode(f.claims().bytes)
        await f.expectRejected(input + ".", .malformed) // empty signature part
        await f.expectRejected(input + ".AA", .unsupportedAlgorithm)
        #expect(f.endpoint.count == 0, "no key is fetched for a refused algorithm")
    }

    @Test("HS256 keyed with the issuer's RSA public key (algorithm confusion) is refused")
    func hs256Confusion() async throws {
        for secret in [Array(try TestKeys.issuerKey.publicKey.pem.utf8), TestKeys.issuerKey.publicKey.modulus] {
            let input = Base64URL.encode((["alg": "HS256", "kid": "k1"] as JSONValue).bytes) + "." + Base64URL.encode(f.claims().bytes)
            let forged = input + "." + Base64URL.encode(HMACSHA256.authenticationCode(key: secret, message: Array(input.utf8)))
            await f.expectRejected(forged, .unsupportedAlgorithm)
        }
    }

    @Test("algorithms other than RS256 are refused", arguments: ["RS384", "RS512", "PS256", "ES256", "ES384", "rs256", "EdDSA"])
    func otherAlgorithms(_ alg: String) async throws {
        let header = Array(#"{"alg":"\#(alg)","kid":"k1"}"#.utf8)
        await f.expectRejected(try f.rawToken(header: header, payload: f.claims().bytes), .unsupportedAlgorithm)
    }

    @Test("alg missing or not a string is refused")
    func algMissing() async throws {
        await f.expectRejected(try f.rawToken(header: Array(#"{"kid":"k1"}"#.utf8), payload: f.claims().bytes), .malformed)
        await f.expectRejected(try f.rawToken(header: Array(#"{"alg":["RS256"],"kid":"k1"}"#.utf8), payload: f.claims().bytes), .malformed)
    }

    @Test("a signature by another key is refused")
    func wrongKey() async throws {
        await f.expectRejected(try f.token(key: TestKeys.attackerKey), .badSignature)
    }

    @Test("a signature one byte short or long is refused")
    func signatureLength() async throws {
        let parts = try f.token().split(separator: ".").map(String.init)
        let signature = Base64URL.decode(parts[2])!
        for bad in [Array(signature.dropLast()), [0] + signature] {
            await f.expectRejected(parts[0] + "." + parts[1] + "." + Base64URL.encode(bad), .badSignature)
        }
    }

    @Test("jku, x5u, jwk and x5c pointing at the attacker's key are not used", arguments: ["jku", "x5u", "jwk", "x5c"])
    func foreignKeyHeadersNotTrusted(_ name: String) async throws {
        let attacker = TestKeys.attackerKey
        let pointer: JSONValue = switch name {
        case "jwk": JWK.encode(attacker.publicKey, keyID: "k1")
        case "x5c": ["MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"]
        default: "https://attacker.example/keys"
        }
        let header: JSONValue = ["alg": "RS256", "kid": "k1"]
        await f.expectRejected(try f.token(header: header.setting(name, pointer), key: attacker), .badSignature)
        #expect(f.endpoint.urls == [f.jwksURL], "only the issuer's JWKS URL is ever fetched")
    }

    @Test("jku, x5u, jwk and x5c are ignored, not followed: an issuer-signed token carrying them is valid",
          arguments: ["jku", "x5u", "jwk", "x5c"])
    func foreignKeyHeadersIgnored(_ name: String) async throws {
        let header: JSONValue = ["alg": "RS256", "kid": "k1"]
        let value: JSONValue = name == "jwk" ? JWK.encode(TestKeys.attackerKey.publicKey, keyID: "k1") : "https://attacker.example/keys"
        _ = try await f.validate(try f.token(header: header.setting(name, value)))
        #expect(f.endpoint.urls == [f.jwksURL])
    }

    @Test("a crit header is refused, even one naming a known parameter")
    func crit() async throws {
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "k1", "crit": ["exp"], "exp": 1]), .criticalHeader)
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "k1", "crit": ["b64"], "b64": false]), .criticalHeader)
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "k1", "crit": []]), .criticalHeader)
    }

    @Test("typ is JWT in any case, or absent; anything else is refused")
    func typ() async throws {
        _ = try await f.validate(try f.token(header: ["alg": "RS256", "kid": "k1", "typ": "jwt"]))
        _ = try await f.validate(try f.token(header: ["alg": "RS256", "kid": "k1"]))
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "k1", "typ": "at+jwt"]), .malformed)
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "k1", "typ": 1]), .malformed)
    }

    @Test("a kid that is not a string is refused")
    func kidNotString() async throws {
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": 1]), .malformed)
    }
}
