import Cryptography
import Foundation
import Testing

@Suite("digests, random bytes and base64url")
struct DigestTests {
    @Test("SHA-256 and HMAC-SHA-256 match published vectors")
    func knownAnswers() {
        #expect(SHA256.hex(SHA256.hash("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // RFC 4231 test case 2.
        let mac = HMACSHA256.authenticationCode(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(SHA256.hex(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("random tokens are 256 bits and differ")
    func randomTokens() {
        let a = SecureRandom.token(bytes: 32), b = SecureRandom.token(bytes: 32)
        #expect(a != b)
        #expect(a.count == 43)
        #expect(Base64URL.decode(a)?.count == 32)
    }

    @Test("base64url round trip for every length 0...64")
    func roundTrip() {
        for n in 0...64 {
            let bytes = SecureRandom.bytes(n)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test("base64url decoding is strict", arguments: ["QQ==", "QQ=", "Q", "QR", "Q+", "Q/", "QQ QQ", " QQ", "QQ\n", "QUJD!",
                                                       "QUJ=", "QUJDRA==", "QUF", "QUJDR", "QUJD\tRA", "Q\u{0}Q", "QÜ"])
    func strict(_ text: String) {
        // "QR" and "QUF" decode to "A" and "AA" only with non-zero trailing bits: non-canonical.
        // "QUJDR" has a length of 1 modulo 4.
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("canonical base64url decodes") func canonical() {
        #expect(Base64URL.decode("QQ") == [0x41])
        #expect(Base64URL.decode("QUI") == [0x41, 0x42])
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
        #expect(Base64URL.decode("QUE") == [0x41, 0x41])
        #expect(Base64URL.decode("") == [])
    }

    @Test("constant-time comparison") func compare() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2], [1, 2, 3]))
    }
}

@Suite("errors and keys")
struct CryptoErrorTests {
    @Test("a failed PEM parse carries the operation and OpenSSL's drained error queue")
    func openSSLQueue() {
        do {
            _ = try RSAPublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
            Issue.record("garbage PEM accepted")
        } catch {
            #expect(error.isInvalidKey)
            #expect(!error.openSSLErrors.isEmpty, "the queue was drained into the error")
            #expect(error.debugDescription.contains("["))
            #expect(!error.description.contains("AAAA"))
        }
        // The queue was drained: the next error starts clean.
        #expect(CryptoError.openSSL("test").openSSLErrors.isEmpty)
    }

    @Test("a failed tag check is an authentication failure")
    func authenticationFailure() throws {
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        do {
            _ = try AESGCM.open([UInt8](repeating: 0, count: 40), key: key, associatedData: [])
            Issue.record("opened garbage")
        } catch {
            #expect(error.isAuthenticationFailure)
        }
    }

    @Test("AESGCMKey from base64 needs exactly 32 bytes")
    func keyFromBase64() throws {
        let bytes = SecureRandom.bytes(32)
        let sealed = try AESGCM.seal([1, 2, 3], key: try AESGCMKey(base64: Data(bytes).base64EncodedString()), associatedData: [])
        #expect(try AESGCM.open(sealed, key: try AESGCMKey(bytes: bytes), associatedData: []) == [1, 2, 3])
        #expect(throws: CryptoError.self) { try AESGCMKey(base64: Data(SecureRandom.bytes(31)).base64EncodedString()) }
        #expect(throws: CryptoError.self) { try AESGCMKey(base64: "not base64!") }
    }

    @Test("keys of the wrong type are refused")
    func wrongKeyTypes() throws {
        let rsa = TestKeys.rsa2048
        #expect(throws: CryptoError.self) { try P384PrivateKey(pem: try rsa.pem) }
        #expect(throws: CryptoError.self) { try P384PublicKey(pem: try rsa.publicKey.pem) }
        #expect(try rsa.pemString.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try RSAPublicKey(pem: try rsa.publicKey.pem).modulus == rsa.publicKey.modulus)
    }
}
