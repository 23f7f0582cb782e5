internal import COpenSSL

/// HMAC with SHA-256 (RFC 2104).
public enum HMACSHA256 {
    /// The 32-byte MAC of `message` under `key` (any key length).
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        // The one-shot HMAC fails only on allocation failure or a broken provider.
        guard HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length) != nil else {
            fatalError("HMAC(SHA-256) failed")
        }
        return out
    }
}
