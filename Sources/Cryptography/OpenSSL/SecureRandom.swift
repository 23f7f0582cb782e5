internal import COpenSSL

/// Bytes from OpenSSL's CSPRNG (`RAND_bytes`). Session identifiers, `state`, nonces, PKCE
/// verifiers and AES-GCM nonces all come from here.
public enum SecureRandom {
    /// `count` bytes from `RAND_bytes`. The process stops if the CSPRNG fails: nothing
    /// secure can be done without it.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        var out = [UInt8](repeating: 0, count: count)
        guard count == 0 || RAND_bytes(&out, Int32(count)) == 1 else { fatalError("RAND_bytes failed: OpenSSL's CSPRNG is unusable") }
        return out
    }

    /// `bytes` random bytes as base64url without padding (32 bytes: 256 bits, 43 characters).
    public static func token(bytes: Int = 32) -> String { Base64URL.encode(self.bytes(bytes)) }
}
