import Cryptography

/// A PKCE pair (RFC 7636) with the S256 method.
public struct PKCE: Sendable {
    /// 32 random bytes, base64url: 43 characters.
    public let verifier: String
    /// BASE64URL(SHA256(verifier)).
    public let challenge: String

    public init(verifier: String) {
        self.verifier = verifier
        self.challenge = PKCE.challenge(for: verifier)
    }

    /// A fresh pair from OpenSSL's CSPRNG.
    public static func make() -> PKCE { PKCE(verifier: SecureRandom.token(bytes: 32)) }

    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
    }

    /// Whether `byte` may be in a verifier: RFC 3986's unreserved characters (RFC 7636 §4.1).
    public static func isUnreserved(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }
}
