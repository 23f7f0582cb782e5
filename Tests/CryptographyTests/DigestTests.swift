import Cryptography
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

    @Test("base64url decoding is strict", arguments: ["QQ==", "QQ=", "Q", "QR", "Q+", "Q/", "QQ QQ", " QQ", "QQ\n", "QUJD!"])
    func strict(_ text: String) {
        // "QR" decodes to "A" only with non-zero trailing bits: non-canonical.
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("canonical base64url decodes") func canonical() {
        #expect(Base64URL.decode("QQ") == [0x41])
        #expect(Base64URL.decode("QUI") == [0x41, 0x42])
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test("constant-time comparison") func compare() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2], [1, 2, 3]))
    }
}
