internal import COpenSSL

/// SHA-256 through OpenSSL's EVP interface.
public enum SHA256 {
    /// The 32-byte digest of `data`.
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        // EVP_Digest fails only on allocation failure or a broken provider.
        guard EVP_Digest(data, data.count, &out, &length, EVP_sha256(), nil) == 1 else { fatalError("EVP_Digest(SHA-256) failed") }
        return out
    }

    /// The digest of the UTF-8 bytes of `text`.
    public static func hash(_ text: String) -> [UInt8] { hash(Array(text.utf8)) }

    /// Lower-case hex of any bytes (digests are usually shown this way).
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
