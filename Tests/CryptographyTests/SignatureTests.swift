import Cryptography
import Testing

@Suite("RSA and P-384 signatures")
struct SignatureTests {
    /// Per file: cases, Wycheproof-valid cases refused by the key policy (e = 3 keys), and
    /// `acceptable` cases (MissingNull), which are refused.
    static let rsaExpectations: [String: (cases: Int, policy: Int, acceptable: Int)] = [
        "2048": (259, 2, 1), "3072": (259, 1, 1), "4096": (258, 0, 1),
    ]

    @Test("Wycheproof RSA PKCS#1 v1.5 SHA-256 through the verifier and the key policy", arguments: ["2048", "3072", "4096"])
    func wycheproofRSA(_ size: String) throws {
        let file = try Wycheproof.load("rsa_signature_\(size)_sha256_test")
        var cases = 0, policyRejections = 0, acceptable = 0, accepted = 0
        for group in Wycheproof.groups(file) {
            let key = group["publicKey"] as! [String: Any]
            let publicKey = try RSAPublicKey(modulus: [UInt8](hex: key["modulus"] as! String),
                                             exponent: [UInt8](hex: key["publicExponent"] as! String))
            // The PEM form of the same key is the same key.
            #expect(try RSAPublicKey(pem: group["publicKeyPem"] as! String).modulus == publicKey.modulus)
            let usable = RSAKeyPolicy.violation(of: publicKey) == nil
            for test in group["tests"] as! [[String: Any]] {
                cases += 1
                let result = test["result"] as! String
                let verified = publicKey.verifyPKCS1SHA256(signature: [UInt8](hex: test["sig"] as! String),
                                                           message: [UInt8](hex: test["msg"] as! String))
                // The verifier itself: exactly the valid cases verify ("acceptable" is refused).
                #expect(verified == (result == "valid"), "tcId \(test["tcId"]!) \(test["comment"]!)")
                if result == "acceptable" { acceptable += 1 }
                if result == "valid" && !usable { policyRejections += 1 }
                if verified && usable { accepted += 1 }
            }
        }
        let expected = try #require(SignatureTests.rsaExpectations[size])
        #expect(cases == expected.cases)
        #expect(policyRejections == expected.policy, "valid signatures under keys the policy refuses")
        #expect(acceptable == expected.acceptable)
        #expect(accepted == 7, "the valid cases under policy keys")
    }

    @Test("a signature not exactly the modulus length is refused, even with a leading zero")
    func signatureLength() throws {
        let key = TestKeys.rsa2048
        let message = Array("m".utf8)
        let good = try key.signPKCS1SHA256(message)
        #expect(key.publicKey.verifyPKCS1SHA256(signature: good, message: message))
        #expect(!key.publicKey.verifyPKCS1SHA256(signature: [0] + good, message: message))
        #expect(!key.publicKey.verifyPKCS1SHA256(signature: Array(good.dropFirst()), message: message))
        #expect(!key.publicKey.verifyPKCS1SHA256(signature: [], message: message))
        let good384 = try key.signPKCS1SHA384(message)
        #expect(!key.publicKey.verifyPKCS1SHA384(signature: [0] + good384, message: message))
    }

    @Test("the key policy: e = 65537 and 2048-4096 bits")
    func keyPolicy() throws {
        let n2048 = [UInt8](repeating: 0xC5, count: 256)
        #expect(RSAKeyPolicy.violation(modulus: n2048, exponent: [1, 0, 1]) == nil)
        #expect(RSAKeyPolicy.violation(modulus: [0, 0] + n2048, exponent: [0, 1, 0, 1]) == nil)
        #expect(RSAKeyPolicy.violation(modulus: n2048, exponent: [3]) != nil)
        #expect(RSAKeyPolicy.violation(modulus: Array(n2048.dropFirst()), exponent: [1, 0, 1]) != nil) // 2040 bits
        #expect(RSAKeyPolicy.violation(modulus: [0x7F] + [UInt8](repeating: 0xC5, count: 255), exponent: [1, 0, 1]) != nil) // 2047 bits
        #expect(RSAKeyPolicy.violation(modulus: [UInt8](repeating: 0xC5, count: 512), exponent: [1, 0, 1]) == nil)
        #expect(RSAKeyPolicy.violation(modulus: [1] + [UInt8](repeating: 0xC5, count: 512), exponent: [1, 0, 1]) != nil) // 4097 bits
        #expect(RSAKeyPolicy.violation(of: TestKeys.rsa2048.publicKey) == nil)
    }

    @Test("the key policy refuses a ROCA-fingerprinted modulus and not a random one")
    func roca() throws {
        // N = P * 2^s + 65537, P the product of the 38 test primes: N is 65537 modulo each of
        // them, a power of 65537, which is the ROCA fingerprint.
        let primes = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83,
                      89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167]
        var n: [UInt8] = [1]
        for p in primes { n = BigEndian.multiply(n, by: p) }
        while BigEndian.bitLength(n) < 2048 { n = BigEndian.multiply(n, by: 2) }
        n[n.count - 3] |= 0x01; n[n.count - 1] |= 0x01 // + 65537: the low 17 bits were zero
        #expect(BigEndian.bitLength(n) == 2048)
        #expect(RSAKeyPolicy.violation(modulus: n, exponent: [1, 0, 1])?.contains("ROCA") == true)
        n[n.count - 1] ^= 0x04 // + 4: now 3 modulo 11, where the powers of 65537 are only 1 and 10
        #expect(RSAKeyPolicy.violation(modulus: n, exponent: [1, 0, 1]) == nil)
        #expect(RSAKeyPolicy.violation(of: TestKeys.rsa2048.publicKey) == nil)
    }

    @Test("RSA sign and verify, PEM round trip, wrong message refused")
    func rsaRoundTrip() async throws {
        let key = try await TestKeys.generateRSA(bits: 2048)
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
