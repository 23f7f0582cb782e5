internal import COpenSSL

/// CSPRNG bytes from OpenSSL.
public enum SecureRandom {
    /// `count` bytes from `RAND_bytes`. The process stops if the CSPRNG fails: nothing
    /// secure can be done without it.
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard count == 0 || RAND_bytes(&out, Int32(count)) == 1 else { fatalError("RAND_bytes failed: OpenSSL's CSPRNG is unusable") }
        return out
    }

    /// `bytes` random bytes, base64url without padding.
    public static func token(bytes: Int = 32) -> String { Base64URL.encode(self.bytes(bytes)) }
}

/// SHA-256 (EVP).
public enum SHA256 {
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_Digest(data, data.count, &out, &length, EVP_sha256(), nil) == 1 else { fatalError("EVP_Digest(SHA-256) failed") }
        return out
    }

    public static func hash(_ text: String) -> [UInt8] { hash(Array(text.utf8)) }

    /// Lower-case hex.
    public static func hex(_ data: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(data.count * 2)
        for b in data {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// HMAC-SHA-256.
public enum HMACSHA256 {
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length) != nil else {
            fatalError("HMAC(SHA-256) failed")
        }
        return out
    }
}

/// Compares in time that does not depend on where the inputs differ.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return CRYPTO_memcmp(a, b, a.count) == 0
}
