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
}
