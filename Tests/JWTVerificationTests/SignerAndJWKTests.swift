import Cryptography
import JSON
@testable import JWTVerification
import Testing

/// The signer (sandbox ID tokens, client assertions) and the public JWK encoder.
@Suite("JWS signer and JWK encoder")
struct SignerAndJWKTests {
    static let claims: JSONValue = ["iss": "app", "sub": "app", "aud": "https://ehr.example/token"]

    @Test("RS256 tokens verify under the RS256 policy; alg is set from the algorithm")
    func rs256() throws {
        let token = try JWSSigner.signRS256(header: ["alg": "none", "kid": "k1", "typ": "JWT"], claims: Self.claims, key: TestKeys.issuerKey)
        let jws = try CompactJWS(token)
        #expect(jws.header == ["alg": "RS256", "kid": "k1", "typ": "JWT"])
        #expect(jws.payload == Self.claims)
        #expect(try JWSVerifier.checkHeader(jws) == "k1")
        try JWSVerifier.verifySignature(jws, key: TestKeys.issuerKey.publicKey)
    }

    @Test("RS384 client assertions verify with the public key and are not RS256")
    func rs384() throws {
        let jws = try CompactJWS(try JWSSigner.signRS384(header: ["kid": "c1"], claims: Self.claims, key: TestKeys.issuerKey))
        #expect(jws.algorithm == "RS384")
        #expect(TestKeys.issuerKey.publicKey.verifyPKCS1SHA384(signature: jws.signature, message: jws.signingInput))
        #expect(!TestKeys.issuerKey.publicKey.verifyPKCS1SHA256(signature: jws.signature, message: jws.signingInput))
        #expect(throws: JWTError.self) { try JWSVerifier.checkHeader(jws) }
    }

    @Test("ES384 client assertions carry a raw 96-byte r||s signature that verifies")
    func es384() throws {
        let key = try P384PrivateKey.generate()
        let jws = try CompactJWS(try JWSSigner.signES384(header: ["kid": "c2", "typ": "JWT"], claims: Self.claims, key: key))
        #expect(jws.algorithm == "ES384")
        #expect(jws.signature.count == 96)
        #expect(key.publicKey.verifyES384(signature: jws.signature, message: jws.signingInput))
        #expect(!key.publicKey.verifyES384(signature: jws.signature, message: jws.signingInput + [0x20]))
    }

    @Test("the signer refuses a header or claims that are not objects")
    func signerInput() {
        #expect(throws: CryptoError.self) { try JWSSigner.signRS256(header: "RS256", claims: Self.claims, key: TestKeys.issuerKey) }
        #expect(throws: CryptoError.self) { try JWSSigner.signRS256(header: [:], claims: ["a"], key: TestKeys.issuerKey) }
    }

    @Test("an RSA JWK round-trips: n and e decode to the key, and it parses as a usable key")
    func rsaJWK() throws {
        let publicKey = TestKeys.issuerKey.publicKey
        let jwk = JWK.encode(publicKey, keyID: "k1", algorithm: "RS384")
        #expect(jwk["kty"] == "RSA" && jwk["use"] == "sig" && jwk["alg"] == "RS384" && jwk["kid"] == "k1")
        #expect(jwk["e"] == "AQAB")
        #expect(Base64URL.decode(jwk["n"]!.stringValue!) == publicKey.modulus)
        #expect(publicKey.modulus.count == 256 && publicKey.modulus[0] != 0)
        let parsed = try #require(try JWK.parseRSASigningKey(JWK.encode(publicKey, keyID: "k1")))
        #expect(parsed.keyID == "k1" && parsed.key.modulus == publicKey.modulus)
    }

    @Test("a P-384 JWK has crv P-384 and 48-byte x and y that match the public point")
    func ecJWK() throws {
        let key = try P384PrivateKey.generate()
        let jwk = JWK.encode(key.publicKey, keyID: "c2")
        #expect(jwk["kty"] == "EC" && jwk["crv"] == "P-384" && jwk["alg"] == "ES384" && jwk["use"] == "sig")
        let x = try #require(Base64URL.decode(jwk["x"]!.stringValue!)), y = try #require(Base64URL.decode(jwk["y"]!.stringValue!))
        #expect(x.count == 48 && y.count == 48)
        #expect(x == key.publicKey.x && y == key.publicKey.y)
        // The same point again from the PEM form.
        let reloaded = try P384PublicKey(pem: try key.publicKey.pem)
        #expect(reloaded.coordinates.x == x && reloaded.coordinates.y == y)
    }

    @Test("a JWKS document is {keys: [...]}, and JWKSet keeps only the usable RSA signing keys")
    func jwksDocument() throws {
        let document = JWKSet.document([JWK.encode(TestKeys.issuerKey.publicKey, keyID: "k1"),
                                        JWK.encode(try P384PrivateKey.generate().publicKey, keyID: "c2")])
        #expect(document["keys"]?.arrayValue?.count == 2)
        let set = try JWKSet(json: document.bytes)
        #expect(set.keys.map(\.keyID) == ["k1"])
        #expect(throws: JWTError.self) { try JWKSet(json: Array(#"{"kids":[]}"#.utf8)) }
    }
}
