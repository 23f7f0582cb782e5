import Cryptography

/// Random identifiers (session ids, launch ids, `state`, hand-off codes, session tokens) and
/// the hashes under which they are stored.
public enum Identifier {
    /// 32 bytes (256 bits) from OpenSSL's CSPRNG, base64url without padding (43 characters).
    public static func make() -> String { SecureRandom.token(bytes: 32) }

    /// SHA-256 of `id`'s UTF-8 bytes, lower-case hex (64 characters): what the database
    /// stores instead of `id`.
    public static func hash(_ id: String) -> String { hex(SHA256.hash(Array(id.utf8))) }

    /// Lower-case hex of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String { SHA256.hex(bytes) }
}
