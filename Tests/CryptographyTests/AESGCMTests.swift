import Cryptography
import Testing

@Suite("AES-256-GCM")
struct AESGCMTests {
    @Test("Wycheproof: 256-bit key, 96-bit IV, 128-bit tag (66 cases)")
    func wycheproof() throws {
        let file = try Wycheproof.load("aes_gcm_256_96_128")
        var count = 0
        for group in Wycheproof.groups(file) {
            for test in group["tests"] as! [[String: Any]] {
                count += 1
                let key = [UInt8](hex: test["key"] as! String), iv = [UInt8](hex: test["iv"] as! String)
                let aad = [UInt8](hex: test["aad"] as! String), msg = [UInt8](hex: test["msg"] as! String)
                let ct = [UInt8](hex: test["ct"] as! String), tag = [UInt8](hex: test["tag"] as! String)
                let id = test["tcId"] as! Int
                let opened = try? AESGCM.open(ciphertext: ct, tag: tag, key: key, iv: iv, associatedData: aad)
                if test["result"] as! String == "valid" {
                    #expect(opened == msg, "tcId \(id) must decrypt")
                    let sealed = try AESGCM.seal(msg, key: key, iv: iv, associatedData: aad)
                    #expect(sealed.ciphertext == ct && sealed.tag == tag, "tcId \(id) must encrypt to the vector")
                } else {
                    #expect(opened == nil, "tcId \(id) must be refused")
                }
            }
        }
        #expect(count == 66)
    }

    @Test("seal/open round trip with a fresh nonce each time")
    func roundTrip() throws {
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        let plaintext = Array("an access token".utf8)
        let a = try AESGCM.seal(plaintext, key: key, associatedData: Array("tokens.access|row-1".utf8))
        let b = try AESGCM.seal(plaintext, key: key, associatedData: Array("tokens.access|row-1".utf8))
        #expect(a != b)
        #expect(a.count == plaintext.count + 28)
        #expect(try AESGCM.open(a, key: key, associatedData: Array("tokens.access|row-1".utf8)) == plaintext)
    }

    @Test("other associated data (another row or column) fails to open")
    func wrongAssociatedData() throws {
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        let sealed = try AESGCM.seal(Array("secret".utf8), key: key, associatedData: Array("tokens.access|row-1".utf8))
        #expect(throws: CryptoError.self) { try AESGCM.open(sealed, key: key, associatedData: Array("tokens.access|row-2".utf8)) }
        #expect(throws: CryptoError.self) { try AESGCM.open(sealed, key: key, associatedData: Array("tokens.refresh|row-1".utf8)) }
    }

    @Test("every flipped bit fails to open")
    func flippedBits() throws {
        let key = try AESGCMKey(bytes: SecureRandom.bytes(32))
        let sealed = try AESGCM.seal(Array("secret".utf8), key: key, associatedData: [])
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x01
            #expect(throws: CryptoError.self) { try AESGCM.open(tampered, key: key, associatedData: []) }
        }
    }

    @Test("keys must be 32 bytes; the key prints redacted")
    func keyRules() throws {
        #expect(throws: CryptoError.self) { try AESGCMKey(bytes: [UInt8](repeating: 1, count: 16)) }
        let key = try AESGCMKey(bytes: [UInt8](repeating: 7, count: 32))
        #expect(!"\(key)".contains("7"))
    }
}
