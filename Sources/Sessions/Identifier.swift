import Cryptography

/// Random identifiers and the hashes under which they are stored.
public enum Identifier {
    /// 32 bytes from OpenSSL's CSPRNG, base64url (43 characters).
    public static func make() -> String { SecureRandom.token(bytes: 32) }

    /// SHA-256 of `id`, lower-case hex: what the database stores instead of `id`.
    public static func hash(_ id: String) -> String { SHA256.hex(SHA256.hash(Array(id.utf8))) }
}
