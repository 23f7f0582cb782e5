import Cryptography
import Testing

@Suite("RSA and P-384 signatures")
struct SignatureTests {
    @Test("Wycheproof RSA PKCS#1 v1.5 SHA-256", arguments: ["2048", "3072", "4096"])
    func wycheproofRSA(_ size: String) throws {
        let file = try Wycheproof.load("rsa_signature_\(size)_sha256_test")
        var checked = 0
        for group in Wycheproof.groups(file) {
            let key = group["publicKey"] as! [String: Any]
            let publicKey = try RSAPublicKey(modulus: [UInt8](hex: key["modulus"] as! String),
                                             exponent: [UInt8](hex: key["publicExponent"] as! String))
            for test in group["tests"] as! [[String: Any]] {
                let ok = publicKey.verifyPKCS1SHA256(signature: [UInt8](hex: test["sig"] as! String),
                                                     message: [UInt8](hex: test["msg"] as! String))
                // "acceptable" (MissingNull) is treated as must-reject.
                #expect(ok == (test["result"] as! String == "valid"), "tcId \(test["tcId"]!) \(test["comment"]!)")
                checked += 1
            }
        }
        #expect(checked >= 258)
    }

    @Test("RSA sign and verify, PEM round trip, wrong message refused")
    func rsaRoundTrip() throws {
        let key = try RSAPrivateKey.generate(bits: 2048)
        let message = Array("header.payload".utf8)
        let sig256 = try key.signPKCS1SHA256(message)
        let sig384 = try key.signPKCS1SHA384(message)
        #expect(key.publicKey.verifyPKCS1SHA256(signature: sig256, message: message))
        #expect(key.publicKey.verifyPKCS1SHA384(signature: sig384, message: message))
        #expect(!key.publicKey.verifyPKCS1SHA256(signature: sig384, message: message))
        #expect(!key.publicKey.verifyPKCS1SHA256(signature: sig256, message: Array("header.payloaD".utf8)))
        let reloaded = try RSAPrivateKey(pem: try key.pem)
        #expect(reloaded.publicKey.modulus == key.publicKey.modulus)
        let fromParts = try RSAPublicKey(modulus: key.publicKey.modulus, exponent: key.publicKey.exponent)
        #expect(fromParts.verifyPKCS1SHA256(signature: sig256, message: message))
        #expect(fromParts.modulusBits == 2048)
        #expect(key.publicKey.exponent == [1, 0, 1])
    }

    @Test("P-384 ES384: raw r||s signatures verify; tampering is refused")
    func p384() throws {
        let key = try P384PrivateKey.generate()
        let message = Array("assertion".utf8)
        let signature = try key.signES384(message)
        #expect(signature.count == 96)
        #expect(key.publicKey.verifyES384(signature: signature, message: message))
        var bad = signature
        bad[10] ^= 1
        #expect(!key.publicKey.verifyES384(signature: bad, message: message))
        #expect(key.publicKey.coordinates.x.count == 48)
        let reloaded = try P384PrivateKey(pem: try key.pem)
        #expect(reloaded.publicKey.verifyES384(signature: signature, message: message))
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pem: try key.pem) }
    }
}
